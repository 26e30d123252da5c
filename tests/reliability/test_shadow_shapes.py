"""Shadow arrays checked against their primals (issue 30): a derivative kernel indexes ``d_x`` with
``x``'s shape, so a short tangent was read past its end, a short ``d_out`` written past it, and a
0-element ``d_a`` for a scalar took the gradient beyond it. Every such call is now a ShapeError naming
the parameter, the shape expected and the one given, raised before anything runs: each bad array is a
view into a larger buffer whose tail must come back untouched, and no argument changes. Correct calls
of every variant still run and give the derivatives."""
from __future__ import annotations

import numpy as np
import pytest

import adoffload as ado
from adoffload.errors import ShapeError

N, WIDTH = 16, 3
SENTINEL = 12345.0


@ado.kernel
def axpby(a: ado.f64, x: ado.In[ado.f64], y: ado.InOut[ado.f64], out: ado.Out[ado.f64]):
    i = ado.tid()
    out[i] = a * x[i] * x[i] + y[i]
    y[i] = 2.0 * y[i]


VARIANTS = {
    "jvp": lambda: ado.jvp(axpby, ["a", "x"]),
    "jvp3": lambda: ado.jvp(axpby, ["a", "x"], width=WIDTH),
    "vjp": lambda: ado.vjp(axpby, ["a", "x"]),
    "lean_jvp": lambda: ado.jvp(axpby, ["a", "x"], primal_outputs=False),
    "lean_vjp": lambda: ado.vjp(axpby, ["a", "x"], primal_outputs=False),
    "jvp_of_vjp": lambda: ado.jvp(ado.vjp(axpby, ["a", "x"]), ["x"]),
    "vjp_of_vjp": lambda: ado.vjp(ado.vjp(axpby, ["a", "x"]), ["x"]),
}


def arguments(kernel, rng) -> dict:
    """Correctly shaped values for every visible parameter of an ``axpby`` derivative."""
    values = {}
    for p in kernel.signature.visible_params:
        if not p.is_array:
            values[p.name] = 1.5
            continue
        name = p.name.split("_")[-1]
        if name == "a":         # a scalar's gradient is one element; its tangents, one per lane
            shape = (WIDTH,) if getattr(kernel, "width", 1) > 1 else (1,)
        else:
            shape = (WIDTH, N) if p.type.ndim == 2 else (N,)
        values[p.name] = rng.standard_normal(shape)
    return values


def guarded(shape: tuple[int, ...], dtype=np.float64) -> tuple[np.ndarray, np.ndarray]:
    """A view of ``shape`` at the start of a larger buffer of SENTINEL, and that buffer."""
    size = int(np.prod(shape))
    buffer = np.full(size + 32, SENTINEL, dtype)
    return buffer[:size].reshape(shape), buffer


def call(kernel, values: dict):
    return kernel(**values, grid=N)


# (variant, parameter, bad shape, expected shape)
BAD = [
    ("jvp", "d_out", (N - 1,), (N,)),            # written past its end
    ("jvp", "d_x", (N - 1,), (N,)),              # read past its end
    ("jvp", "d_y", (N - 1,), (N,)),              # an InOut shadow
    ("jvp", "d_x", (N + 1,), (N,)),              # too long: a wrong array, refused too
    ("jvp3", "d_x", (WIDTH, N - 1), (WIDTH, N)),
    ("jvp3", "d_out", (WIDTH - 1, N), (WIDTH, N)),
    ("jvp3", "d_a", (WIDTH - 1,), (WIDTH,)),
    ("jvp3", "d_y", (WIDTH, N - 1), (WIDTH, N)),
    ("vjp", "d_a", (0,), (1,)),                  # the scalar's gradient went past a 0-element array
    ("vjp", "d_a", (2,), (1,)),
    ("vjp", "d_x", (N - 1,), (N,)),
    ("vjp", "d_out", (N - 1,), (N,)),
    ("vjp", "d_y", (N - 1,), (N,)),
    ("lean_jvp", "d_out", (N - 1,), (N,)),
    ("lean_vjp", "d_x", (N - 1,), (N,)),
    ("lean_vjp", "d_a", (0,), (1,)),
    ("jvp_of_vjp", "d_d_a", (0,), (1,)),         # the tangent of the gradient d_a: shaped like d_a
    ("jvp_of_vjp", "d2_out", (N - 1,), (N,)),
    ("jvp_of_vjp", "d_x", (N - 1,), (N,)),       # the first derivative's shadow, checked in the second
    ("vjp_of_vjp", "d2_x", (N - 1,), (N,)),
    ("vjp_of_vjp", "d_d_x", (N - 1,), (N,)),
    ("vjp_of_vjp", "d_a", (0,), (1,)),
]


@pytest.mark.parametrize("variant,param,bad,expected", BAD, ids=[f"{v}-{p}-{b}" for v, p, b, _ in BAD])
def test_a_misshapen_shadow_is_a_shape_error_and_nothing_is_written(variant, param, bad, expected):
    kernel = VARIANTS[variant]()
    values = arguments(kernel, np.random.default_rng(1))
    view, buffer = guarded(bad)
    values[param] = view
    before = {name: np.copy(v) for name, v in values.items()}
    with pytest.raises(ShapeError) as info:
        call(kernel, values)
    message = str(info.value)
    assert f"parameter '{param}'" in message
    assert f"expected a float64 array of shape {expected}, got shape {bad}" in message
    assert (buffer[view.size:] == SENTINEL).all(), "memory past the shadow was written"
    for name, value in values.items():
        np.testing.assert_array_equal(value, before[name], err_msg=f"'{name}' changed: the kernel ran")


def test_a_transposed_shadow_of_a_2d_array_is_refused():
    @ado.kernel
    def scale2(x: ado.In[ado.f32, 2], out: ado.Out[ado.f32, 2]):
        i, j = ado.tid()
        out[i, j] = 3.0 * x[i, j]

    x, out = np.ones((4, 6), np.float32), np.zeros((4, 6), np.float32)
    d_x = np.zeros((6, 4), np.float32)            # as many elements, the wrong shape
    with pytest.raises(ShapeError, match=r"'d_x'.*shape \(4, 6\), got shape \(6, 4\)"):
        ado.vjp(scale2, ["x"])(x, out, d_x=d_x, d_out=np.ones((4, 6), np.float32), grid=(4, 6))


def test_correct_calls_of_every_variant_run():
    rng = np.random.default_rng(2)
    for name, make in VARIANTS.items():
        kernel = make()
        call(kernel, arguments(kernel, rng))
        call(kernel, arguments(kernel, rng))      # and again, through the launcher's cached plan


def test_jvp_and_vjp_values():
    rng = np.random.default_rng(3)
    a, x, y = 1.5, rng.standard_normal(N), rng.standard_normal(N)
    d_a, d_x, d_y = 0.25, rng.standard_normal(N), rng.standard_normal(N)
    y0, dy0 = y.copy(), d_y.copy()
    out, d_out = np.zeros(N), np.zeros(N)
    ado.jvp(axpby, ["a", "x"])(a, x, y, out, d_a=d_a, d_x=d_x, d_y=d_y, d_out=d_out, grid=N)
    np.testing.assert_allclose(d_out, d_a * x * x + 2 * a * x * d_x + dy0, rtol=1e-14)
    np.testing.assert_allclose(d_y, 2 * dy0, rtol=1e-14)
    np.testing.assert_allclose(y, 2 * y0, rtol=1e-14)

    s, t = rng.standard_normal(N), rng.standard_normal(N)
    g_a, g_x, g_y, seed = np.zeros(1), np.zeros(N), t.copy(), s.copy()
    ado.vjp(axpby, ["a", "x"])(a, x, y0.copy(), np.zeros(N), d_a=g_a, d_x=g_x, d_y=g_y, d_out=seed, grid=N)
    np.testing.assert_allclose(g_a, [np.sum(s * x * x)], rtol=1e-13)
    np.testing.assert_allclose(g_x, 2 * a * x * s, rtol=1e-14)
    np.testing.assert_allclose(g_y, s + 2 * t, rtol=1e-14)
    np.testing.assert_array_equal(seed, s)            # the caller's seed is kept


def test_vector_tangents_are_lanes_of_single_tangents():
    rng = np.random.default_rng(4)
    a, x, y = 0.5, rng.standard_normal(N), rng.standard_normal(N)
    d_a, d_x, d_y = rng.standard_normal(WIDTH), rng.standard_normal((WIDTH, N)), rng.standard_normal((WIDTH, N))
    d_out = np.zeros((WIDTH, N))
    ado.jvp(axpby, ["a", "x"], width=WIDTH)(a, x, y.copy(), np.zeros(N), d_a=d_a, d_x=d_x, d_y=d_y.copy(),
                                            d_out=d_out, grid=N)
    for lane in range(WIDTH):
        one = np.zeros(N)
        ado.jvp(axpby, ["a", "x"])(a, x, y.copy(), np.zeros(N), d_a=d_a[lane], d_x=d_x[lane], d_y=d_y[lane].copy(),
                                   d_out=one, grid=N)
        np.testing.assert_allclose(d_out[lane], one, rtol=1e-14)


CUDA_SOURCE = r"""
struct Affine { float scale; float shift; };
extern "C" __global__ void affine(Affine p, const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = p.scale * x[i] * x[i] + p.shift;
}
"""


@pytest.fixture(scope="module")
def affine():
    module = ado.from_cuda(CUDA_SOURCE)
    return module.kernel("affine", p=ado.struct(scale=ado.f32, shift=ado.f32), x=ado.In[ado.f32],
                         y=ado.Out[ado.f32], n=ado.i32)


def cuda_values(n: int = 64) -> dict:
    rng = np.random.default_rng(5)
    return dict(p=dict(scale=2.0, shift=0.5), x=rng.standard_normal(n).astype(np.float32),
                y=np.zeros(n, np.float32), n=n)


@pytest.mark.parametrize("param,bad,expected", [("d_x", (63,), (64,)), ("d_y", (63,), (64,)),
                                                ("d_p_scale", (0,), (1,)), ("d_p_shift", (2,), (1,))])
def test_cuda_kernel_shadows_and_struct_field_gradients_are_checked(affine, param, bad, expected):
    values = cuda_values()
    shadows = dict(d_x=np.zeros(64, np.float32), d_y=np.ones(64, np.float32),
                   d_p=dict(scale=np.zeros(1, np.float32), shift=np.zeros(1, np.float32)))
    view, buffer = guarded(bad, np.float32)
    if param.startswith("d_p_"):
        shadows["d_p"][param[4:]] = view
    else:
        shadows[param] = view
    with pytest.raises(ShapeError) as info:
        ado.vjp(affine, ["p", "x"])(**values, **shadows, blocks=2, threads=32)
    assert f"parameter '{param}'" in str(info.value)
    assert f"expected a float32 array of shape {expected}, got shape {bad}" in str(info.value)
    assert (buffer[view.size:] == np.float32(SENTINEL)).all(), "memory past the shadow was written"


def test_cuda_kernel_tangents_are_checked_and_correct_calls_work(affine):
    values = cuda_values()
    x = values["x"]
    d_y = np.zeros(64, np.float32)
    with pytest.raises(ShapeError, match=r"'d_x'.*shape \(64,\), got shape \(32,\)"):
        ado.jvp(affine, ["x"])(**values, d_x=np.ones(32, np.float32), d_y=d_y, blocks=2, threads=32)
    ado.jvp(affine, ["x"])(**values, d_x=np.ones(64, np.float32), d_y=d_y, blocks=2, threads=32)
    np.testing.assert_allclose(d_y, 4.0 * x, rtol=1e-6)
    d_scale, d_x = np.zeros(1, np.float32), np.zeros(64, np.float32)
    ado.vjp(affine, ["p", "x"])(**cuda_values(), d_x=d_x, d_y=np.ones(64, np.float32),
                                d_p=dict(scale=d_scale, shift=np.zeros(1, np.float32)), blocks=2, threads=32)
    np.testing.assert_allclose(d_scale, [np.sum(x * x)], rtol=1e-5)
    np.testing.assert_allclose(d_x, 4.0 * x, rtol=1e-6)
