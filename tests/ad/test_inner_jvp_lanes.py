"""``ado.jvp(f, argnums=..., width=K)`` of a helper with array arguments: K tangent lanes in one forward
pass (frontend/array_derivatives.py, enzyme/inner_arrays.py), each tangent array ``(K, *shape)``."""
import importlib.util

import numpy as np
import pytest

import adoffload as ado
from tests.foreign_cuda.checks import needs_lld

M = 7


@ado.func
def decay(x, t, y, r):
    for k in range(len(r)):
        r[k] = x[0] * ado.exp(-x[1] * t[k]) + x[2] - y[k]


@ado.kernel
def decay_lanes(xs: ado.In[ado.f64, 2], ts: ado.In[ado.f64], ys: ado.In[ado.f64, 2], vs: ado.In[ado.f64, 3],
                d_out: ado.Out[ado.f64, 3], r_out: ado.Out[ado.f64, 2]):
    """Lanes of random tangents ``vs[i]`` (2, 3): ``d_out[i, l] = J vs[i, l]``; ``t`` the kernel parameter."""
    i = ado.tid()
    x = ado.zeros(3, ado.f64)
    y = ado.zeros(M, ado.f64)
    r = ado.zeros(M, ado.f64)
    V = ado.zeros((2, 3), ado.f64)
    D = ado.zeros((2, M), ado.f64)
    for j in range(3):
        x[j] = xs[i, j]
        for lane in range(2):
            V[lane, j] = vs[i, lane, j]
    for k in range(M):
        y[k] = ys[i, k]
    ado.jvp(decay, argnums=(0, 3), width=2)(x, ts, y, r, V, D)
    for k in range(M):
        r_out[i, k] = r[k]
        for lane in range(2):
            d_out[i, lane, k] = D[lane, k]


def _decay(x, t, y):
    return x[0] * np.exp(-x[1] * t) + x[2] - y


def test_lanes_are_jacobian_vector_products_and_match_central_differences():
    rng = np.random.default_rng(3)
    xs, ts, ys, vs = rng.normal(size=(5, 3)), np.linspace(0, 2, M), rng.normal(size=(5, M)), rng.normal(size=(5, 2, 3))
    d, r = np.zeros((5, 2, M)), np.zeros((5, M))
    decay_lanes(xs, ts, ys, vs, d, r, grid=5)
    h = 1e-6
    for x, y, v, got, res in zip(xs, ys, vs, d, r):
        np.testing.assert_allclose(res, _decay(x, ts, y), rtol=1e-14, atol=1e-15)
        e = np.exp(-x[1] * ts)
        jac = np.stack([e, -x[0] * ts * e, np.ones(M)], axis=1)
        for lane in range(2):
            np.testing.assert_allclose(got[lane], jac @ v[lane], rtol=1e-12, atol=1e-14)
            central = (_decay(x + h * v[lane], ts, y) - _decay(x - h * v[lane], ts, y)) / (2 * h)
            np.testing.assert_allclose(got[lane], central, rtol=1e-6, atol=1e-8)


@ado.func
def mixed(x, p, w, r):
    """Reads x through a select with the data array p (p gets a scratch shadow, now with lanes),
    a 2-D parameter array x, a scalar w."""
    for k in range(4):
        r[k] = ado.sin(x[k // 2, k % 2] if x[k // 2, k % 2] > 0.1 else p[k]) * w + x[0, 0] * x[1, 1]


@ado.kernel
def mixed_lanes(xs: ado.In[ado.f64, 3], ps: ado.In[ado.f64, 2], d_out: ado.Out[ado.f64, 3]):
    i = ado.tid()
    x = ado.zeros((2, 2), ado.f64)
    p = ado.zeros(4, ado.f64)
    r = ado.zeros(4, ado.f64)
    V = ado.zeros((4, 2, 2), ado.f64)
    D = ado.zeros((4, 4), ado.f64)
    for a in range(2):
        for b in range(2):
            x[a, b] = xs[i, a, b]
            V[2 * a + b, a, b] = 1.0
    for k in range(4):
        p[k] = ps[i, k]
    ado.jvp(mixed, argnums=(0, 3), width=4)(x, p, 1.5, r, V, D)
    for lane in range(4):
        for k in range(4):
            d_out[i, lane, k] = D[lane, k]


def test_a_two_dimensional_argument_and_a_scratch_shadow_with_lanes():
    xs = np.array([[[0.5, -0.3], [0.2, 0.05]], [[0.7, 0.9], [-1.0, 0.3]]])
    ps = np.array([[1.0, 2.0, 3.0, 4.0], [0.5, 0.25, 0.125, 2.0]])
    d = np.zeros((2, 4, 4))
    mixed_lanes(xs, ps, d, grid=2)
    for x, p, got in zip(xs, ps, d):
        flat = x.reshape(4)
        jac = np.zeros((4, 4))                     # jac[k, e]: d r_k / d x.flat[e]
        for k in range(4):
            if flat[k] > 0.1:
                jac[k, k] += 1.5 * np.cos(flat[k])
            jac[k, 0] += flat[3]
            jac[k, 3] += flat[0]
        np.testing.assert_allclose(got, jac.T, rtol=1e-14, atol=1e-15)   # lane e: column e of J


@ado.func
def scaled(x, r):
    for k in range(3):
        r[k] = x[k] * x[(k + 1) % 3]


@ado.kernel
def f32_lanes(xs: ado.In[ado.f32, 2], d_out: ado.Out[ado.f32, 3]):
    i = ado.tid()
    x = ado.zeros(3, ado.f32)
    r = ado.zeros(3, ado.f32)
    V = ado.zeros((3, 3), ado.f32)
    D = ado.zeros((3, 3), ado.f32)
    for j in range(3):
        x[j] = xs[i, j]
        V[j, j] = 1.0
    ado.jvp(scaled, argnums=(0, 1), width=3)(x, r, V, D)
    for lane in range(3):
        for k in range(3):
            d_out[i, lane, k] = D[lane, k]


def test_f32_lanes():
    xs = np.array([[1.0, 2.0, 3.0], [-0.5, 4.0, 0.25]], np.float32)
    d = np.zeros((2, 3, 3), np.float32)
    f32_lanes(xs, d, grid=2)
    for x, got in zip(xs, d):
        jac = np.zeros((3, 3), np.float32)
        for k in range(3):
            jac[k, k] += x[(k + 1) % 3]
            jac[k, (k + 1) % 3] += x[k]
        np.testing.assert_allclose(got, jac.T, rtol=1e-6)


@ado.kernel
def one_lane(xs: ado.In[ado.f64, 2], d_out: ado.Out[ado.f64, 2]):
    """width=1: the tangents keep their leading axis of one lane."""
    i = ado.tid()
    x = ado.zeros(3, ado.f64)
    r = ado.zeros(3, ado.f64)
    V = ado.zeros((1, 3), ado.f64)
    D = ado.zeros((1, 3), ado.f64)
    for j in range(3):
        x[j] = xs[i, j]
    V[0, 1] = 1.0
    ado.jvp(scaled, argnums=(0, 1), width=1)(x, r, V, D)
    for k in range(3):
        d_out[i, k] = D[0, k]


def test_one_lane():
    xs = np.array([[1.0, 2.0, 3.0]])
    d = np.zeros((1, 3))
    one_lane(xs, d, grid=1)
    np.testing.assert_array_equal(d, [[1.0, 3.0, 0.0]])   # d r_k / d x_1: r_0 = x0 x1, r_1 = x1 x2, r_2 = x2 x0


@pytest.mark.parametrize("target, arch", [("nvptx", "sm_90"), pytest.param("amdgpu", "gfx942", marks=needs_lld)])
def test_lanes_compile_for_gpus(target, arch):
    """The lane-strided shadows and the lanes' scratch shadow (AMD: private allocas in address space 5)."""
    for kernel in (decay_lanes, mixed_lanes, f32_lanes):
        assert kernel.compiled(target, arch=arch).artifact


@pytest.mark.gpu
def test_lanes_on_cuda(cuda):
    rng = np.random.default_rng(4)
    xs, ts, ys, vs = rng.normal(size=(64, 3)), np.linspace(0, 2, M), rng.normal(size=(64, M)), rng.normal(size=(64, 2, 3))
    got = [np.zeros((64, 2, M)), np.zeros((64, M))]
    want = [np.zeros((64, 2, M)), np.zeros((64, M))]
    decay_lanes(xs, ts, ys, vs, *got, grid=64, device="cuda")
    decay_lanes(xs, ts, ys, vs, *want, grid=64)
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, rtol=1e-13, atol=1e-15)


HELPERS = """
@ado.func
def residual(x, r):
    for k in range(4):
        r[k] = x[k % 2] * x[k % 2]


@ado.func
def energy(x):
    return x[0] * x[1]


@ado.func
def scaled_residual(x, s, r):
    for k in range(4):
        r[k] = s * x[k % 2]


"""

REFUSALS = {
    "lane shape": ("    x = ado.zeros(2, ado.f64)\n    r = ado.zeros(4, ado.f64)\n    V = ado.zeros((2, 2), ado.f64)\n"
                   "    D = ado.zeros(4, ado.f64)\n    ado.jvp(residual, argnums=(0, 1), width=2)(x, r, V, D)\n",
                   ado.KernelTypeError, r"shape \(2, 4\) \(a leading axis of 2 lanes"),
    "returns a float": ("    x = ado.zeros(2, ado.f64)\n    V = ado.zeros((2, 2), ado.f64)\n"
                        "    y, d = ado.jvp(energy, width=2)(x, V)\n",
                        ado.KernelTypeError, "for helpers that return nothing"),
    "scalar argnum": ("    x = ado.zeros(2, ado.f64)\n    r = ado.zeros(4, ado.f64)\n    V = ado.zeros((2, 2), ado.f64)\n"
                      "    D = ado.zeros((2, 4), ado.f64)\n"
                      "    ado.jvp(scaled_residual, argnums=(0, 1, 2), width=2)(x, 2.0, r, V, 1.0, D)\n",
                      ado.KernelTypeError, "includes a scalar"),
    "scalar helper": ("    y, d = ado.jvp(energy2, width=2)(1.0, 2.0, 1.0, 0.0)\n",
                      ado.KernelTypeError, "takes array arguments"),
    "width of grad": ("    x = ado.zeros(2, ado.f64)\n    g = ado.zeros(2, ado.f64)\n"
                      "    ado.grad(energy, width=2)(x, out=g)\n",
                      ado.KernelTypeError, "width"),
    "width zero": ("    x = ado.zeros(2, ado.f64)\n    r = ado.zeros(4, ado.f64)\n"
                   "    ado.jvp(residual, argnums=(0, 1), width=0)(x, r, x, r)\n",
                   ado.KernelTypeError, "width must be a positive int"),
}


@pytest.mark.parametrize("case", sorted(REFUSALS))
def test_refusals_name_the_line(case, tmp_path):
    body, error, message = REFUSALS[case]
    name = f"lanes_{abs(hash(case))}"
    source = ("import adoffload as ado\n" + HELPERS + "@ado.func\ndef energy2(a, b):\n    return a * b\n\n\n"
              "@ado.kernel\ndef bad(p: ado.In[ado.f64], e: ado.Out[ado.f64]):\n" + body)
    path = tmp_path / f"{name}.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    with pytest.raises(error, match=message) as info:
        spec.loader.exec_module(module)
        module.bad(np.zeros(1), np.zeros(1), grid=1)
    assert name in str(info.value) and info.value.line is not None
