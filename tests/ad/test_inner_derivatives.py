"""ado.grad / ado.value_and_grad / ado.jvp of an @ado.func, called inside kernels (enzyme/inner.py)."""
import numpy as np
import pytest

import adoffload as ado


@ado.func
def lj_pair(r2, sigma, epsilon):
    s2 = sigma * sigma / r2
    s6 = s2 * s2 * s2
    return 4.0 * epsilon * (s6 * s6 - s6)


def lj_by_hand(r2, sigma, epsilon):
    """(value, dE/dr2, dE/dsigma, dE/depsilon) written out."""
    s6 = (sigma * sigma / r2) ** 3
    value = 4.0 * epsilon * (s6 * s6 - s6)
    de_ds6 = 4.0 * epsilon * (2.0 * s6 - 1.0)
    return value, de_ds6 * (-3.0 * s6 / r2), de_ds6 * (6.0 * s6 / sigma), value / epsilon


@ado.func
def morse(r, depth, alpha, r0):
    x = 1.0 - ado.exp(-alpha * (r - r0))
    return depth * (x * x - 1.0)


def make_kernel(dtype):
    @ado.kernel
    def derivatives(r2: ado.In[dtype], sigma: dtype, out: ado.Out[dtype, 2]):
        i = ado.tid()
        v, (d_r2, d_eps) = ado.value_and_grad(lj_pair, argnums=(0, 2))(r2[i], sigma, 0.7)
        g = ado.grad(lj_pair)(r2[i], sigma, 0.7)
        d_sigma = ado.grad(lj_pair, argnums=1)(r2[i], sigma, 0.7)
        y, dy = ado.jvp(lj_pair)(r2[i], sigma, 0.7, 1.0, 0.5, 0.0)
        out[i, 0] = v
        out[i, 1] = d_r2
        out[i, 2] = d_eps
        out[i, 3] = g
        out[i, 4] = d_sigma
        out[i, 5] = y
        out[i, 6] = dy
    return derivatives


@pytest.mark.parametrize("dtype, rtol", [(ado.f64, 1e-12), (ado.f32, 2e-5)])
def test_against_hand_written_derivatives(dtype, rtol):
    r2 = np.linspace(0.9, 3.0, 7).astype(dtype.dtype)
    sigma = 1.05
    out = np.zeros((7, 7), dtype.dtype)
    make_kernel(dtype)(r2, sigma, out, grid=7)
    r = r2.astype(np.float64)
    value, d_r2, d_sigma, d_eps = lj_by_hand(r, sigma, 0.7)
    expected = np.stack([value, d_r2, d_eps, d_r2, d_sigma, value, d_r2 + 0.5 * d_sigma], axis=1)
    np.testing.assert_allclose(out, expected, rtol=rtol, atol=rtol * 1e-2)


def test_against_finite_differences_with_a_math_call():
    @ado.kernel
    def forces(r: ado.In[ado.f64], out: ado.Out[ado.f64, 2]):
        i = ado.tid()
        d_r, d_alpha = ado.grad(morse, argnums=(0, 2))(r[i], 1.3, 1.5, 1.2)
        out[i, 0] = d_r
        out[i, 1] = d_alpha

    r = np.linspace(0.8, 2.5, 9)
    out = np.zeros((9, 2))
    forces(r, out, grid=9)
    h = 1e-6
    fd_r = (morse(r + h, 1.3, 1.5, 1.2) - morse(r - h, 1.3, 1.5, 1.2)) / (2 * h)
    fd_alpha = (morse(r, 1.3, 1.5 + h, 1.2) - morse(r, 1.3, 1.5 - h, 1.2)) / (2 * h)
    np.testing.assert_allclose(out[:, 0], fd_r, rtol=1e-7, atol=1e-9)
    np.testing.assert_allclose(out[:, 1], fd_alpha, rtol=1e-7, atol=1e-9)


def test_the_derivative_is_inlined_and_no_placeholder_is_left():
    text = make_kernel(ado.f64).module_text()
    assert "adoffload.inner" not in text
    assert text.count("define ") == 1


def test_helper_with_a_custom_vjp_is_differentiated_through_it():
    def square_vjp(x, dy):
        return 3.0 * x * dy          # deliberately not 2x: proves the custom rule is used

    @ado.func(vjp=square_vjp)
    def square(x):
        return x * x

    @ado.kernel
    def k(x: ado.In[ado.f64], out: ado.Out[ado.f64]):
        i = ado.tid()
        out[i] = ado.grad(square)(x[i])

    x = np.array([1.0, 2.0])
    out = np.zeros(2)
    k(x, out, grid=2)
    np.testing.assert_allclose(out, 3.0 * x)


def test_second_order_vjp_of_a_kernel_that_calls_grad():
    """Energy-like kernel e[i] = dV/dr2(r2[i]); its adjoint is d2V/dr2^2, checked by differences."""
    @ado.kernel
    def slope(r2: ado.In[ado.f64], e: ado.Out[ado.f64]):
        i = ado.tid()
        e[i] = ado.grad(lj_pair)(r2[i], 1.0, 1.0)

    r2 = np.linspace(1.0, 2.0, 5)
    d_r2 = np.zeros(5)
    adjoint = ado.vjp(slope, ["r2"])
    assert [p.name for p in adjoint.signature.visible_params] == ["r2", "e", "d_r2", "d_e"]
    adjoint(r2, np.zeros(5), d_r2, np.ones(5), grid=5)
    h = 1e-6
    first = lambda x: lj_by_hand(x, 1.0, 1.0)[1]   # noqa: E731
    np.testing.assert_allclose(d_r2, (first(r2 + h) - first(r2 - h)) / (2 * h), rtol=1e-6)


def test_forward_mode_over_a_kernel_that_calls_value_and_grad():
    @ado.kernel
    def pair(r2: ado.In[ado.f64], sigma: ado.f64, out: ado.Out[ado.f64]):
        i = ado.tid()
        v, g = ado.value_and_grad(lj_pair)(r2[i], sigma, 1.0)
        out[i] = v * g

    r2 = np.linspace(1.0, 2.0, 4)
    tangent = ado.jvp(pair, ["sigma"])
    assert [p.name for p in tangent.signature.visible_params] == ["r2", "sigma", "out", "d_sigma", "d_out"]
    d_out = np.zeros(4)
    tangent(r2, 1.1, np.zeros(4), 1.0, d_out, grid=4)
    h = 1e-6
    product = lambda s: np.prod(lj_by_hand(r2, s, 1.0)[:2], axis=0)   # noqa: E731
    np.testing.assert_allclose(d_out, (product(1.1 + h) - product(1.1 - h)) / (2 * h), rtol=1e-6)


def test_mixed_precision_partials_have_their_arguments_types():
    @ado.func
    def scaled(x: ado.f32, y: ado.f64):
        return ado.f64(x) * y * y

    @ado.kernel
    def k(x: ado.In[ado.f32], y: ado.In[ado.f64], dx: ado.Out[ado.f32], dy: ado.Out[ado.f64]):
        i = ado.tid()
        v, (gx, gy) = ado.value_and_grad(scaled, argnums=(0, 1))(x[i], y[i])
        dx[i] = gx
        dy[i] = gy

    x, y = np.array([1.5, 2.0], np.float32), np.array([0.5, 3.0])
    dx, dy = np.zeros(2, np.float32), np.zeros(2)
    k(x, y, dx, dy, grid=2)
    np.testing.assert_allclose(dx, y * y, rtol=1e-6)
    np.testing.assert_allclose(dy, 2 * x * y, rtol=1e-12)


def test_argnums_out_of_range_is_refused_with_the_source_line():
    with pytest.raises(ado.KernelTypeError, match="argnums 3 out of range") as info:
        @ado.kernel
        def bad(r2: ado.In[ado.f64], out: ado.Out[ado.f64]):
            i = ado.tid()
            out[i] = ado.grad(lj_pair, argnums=3)(r2[i], 1.0, 1.0)
    assert info.value.line is not None and "ado.grad(lj_pair, argnums=3)" in info.value.source_line


@pytest.mark.parametrize("argnums", [(0, 0), (), 1.5, True, -4])
def test_bad_argnums_are_refused(argnums):
    with pytest.raises(ado.ArgumentError, match="argnums"):
        ado.value_and_grad(lj_pair, argnums=argnums)


def test_grad_with_respect_to_an_int_argument_is_refused():
    @ado.func
    def power(x, n):
        return x ** n

    with pytest.raises(ado.KernelTypeError, match="only float arguments can be differentiated") as info:
        @ado.kernel
        def bad(x: ado.In[ado.f64], out: ado.Out[ado.f64]):
            i = ado.tid()
            out[i] = ado.grad(power, argnums=1)(x[i], i)
    assert info.value.line is not None


def test_a_kernel_parameter_array_is_not_differentiated():
    """Arrays are differentiated when they are the thread's own (tests/ad/test_inner_arrays.py)."""
    @ado.func
    def first(a):
        return a[0]

    with pytest.raises(ado.UnsupportedConstructError, match="a kernel parameter.*copy it into a local array"):
        @ado.kernel
        def bad(x: ado.In[ado.f64], out: ado.Out[ado.f64]):
            i = ado.tid()
            out[i] = ado.grad(first)(x)


def test_wrong_argument_count_is_refused():
    with pytest.raises(ado.KernelTypeError, match=r"takes 6 \(x1..x3, dx1..dx3\) argument"):
        @ado.kernel
        def bad(x: ado.In[ado.f64], out: ado.Out[ado.f64]):
            i = ado.tid()
            y, dy = ado.jvp(lj_pair)(x[i], 1.0, 1.0)
            out[i] = dy


def test_outside_a_kernel_the_derivative_says_where_it_runs():
    with pytest.raises(ado.Error, match="inside kernels only"):
        ado.grad(lj_pair)(1.0, 1.0, 1.0)
    with pytest.raises(ado.ArgumentError, match="@ado.func"):
        ado.grad(lambda x: x)


def test_nested_derivatives_are_refused_with_the_call_site():
    @ado.func
    def slope(r2):
        return ado.grad(lj_pair)(r2, 1.0, 1.0)

    with pytest.raises(ado.DifferentiationError, match="nested derivatives") as info:
        @ado.kernel
        def bad(r2: ado.In[ado.f64], out: ado.Out[ado.f64]):
            i = ado.tid()
            out[i] = ado.grad(slope)(r2[i])
    assert "test_inner_derivatives.py:" in str(info.value)


def test_a_helper_may_call_grad_of_another_helper():
    @ado.func
    def force_scale(r2):
        return -2.0 * ado.grad(lj_pair)(r2, 1.0, 1.0)

    @ado.kernel
    def k(r2: ado.In[ado.f64], out: ado.Out[ado.f64]):
        i = ado.tid()
        out[i] = force_scale(r2[i])

    r2 = np.array([1.1, 1.7])
    out = np.zeros(2)
    k(r2, out, grid=2)
    np.testing.assert_allclose(out, -2.0 * lj_by_hand(r2, 1.0, 1.0)[1], rtol=1e-12)
