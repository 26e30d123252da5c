"""ado.grad / ado.value_and_grad / ado.jvp of helpers whose differentiated argument is an array of the
thread (frontend/array_derivatives.py, enzyme/inner_arrays.py)."""
import random

import numpy as np
import pytest
import scipy.optimize

import adoffload as ado
from adoffload.testing import helper_programs
from tests.foreign_cuda.checks import needs_lld

N, M = 5, 6


@ado.func
def rosen(x):
    s = 0.0
    for i in range(N - 1):
        s += 100.0 * (x[i + 1] - x[i] * x[i]) ** 2 + (1.0 - x[i]) ** 2
    return s


@ado.kernel
def rosen_derivatives(xs: ado.In[ado.f64, 2], vs: ado.In[ado.f64, 2], e: ado.Out[ado.f64], g1: ado.Out[ado.f64, 2],
                      g2: ado.Out[ado.f64, 2], dy: ado.Out[ado.f64]):
    i = ado.tid()
    x = ado.zeros(N, ado.f64)
    v = ado.zeros(N, ado.f64)
    g = ado.zeros(N, ado.f64)
    h = ado.zeros(N, ado.f64)
    for j in range(N):
        x[j] = xs[i, j]
        v[j] = vs[i, j]
        g[j] = 7.0                 # overwritten, not added to
    e[i] = ado.value_and_grad(rosen)(x, out=g)
    ado.grad(rosen)(x, out=h)
    y, d = ado.jvp(rosen)(x, v)
    dy[i] = d
    for j in range(N):
        g1[i, j] = g[j]
        g2[i, j] = h[j]


def test_rosenbrock_value_gradient_and_tangent_match_scipy():
    rng = np.random.default_rng(0)
    xs, vs = rng.normal(size=(5, N)), rng.normal(size=(5, N))
    e, g1, g2, dy = np.zeros(5), np.zeros((5, N)), np.zeros((5, N)), np.zeros(5)
    rosen_derivatives(xs, vs, e, g1, g2, dy, grid=5)
    expected = np.array([scipy.optimize.rosen_der(x) for x in xs])
    np.testing.assert_allclose(e, [scipy.optimize.rosen(x) for x in xs], rtol=1e-13)
    np.testing.assert_allclose(g1, expected, rtol=1e-12, atol=1e-12)
    np.testing.assert_array_equal(g1, g2)
    np.testing.assert_allclose(dy, np.sum(expected * vs, axis=1), rtol=1e-12)


@ado.func
def decay(x, t, y, r):
    for k in range(M):
        r[k] = x[0] * ado.exp(-x[1] * t[k]) + x[2] - y[k]


@ado.func
def half_squares(x, t, y):
    r = ado.zeros(M, ado.f64)
    decay(x, t, y, r)
    s = 0.0
    for k in range(M):
        s += r[k] * r[k]
    return 0.5 * s


@ado.kernel
def decay_jacobian(xs: ado.In[ado.f64, 2], ts: ado.In[ado.f64], ys: ado.In[ado.f64, 2], jac: ado.Out[ado.f64, 3],
                   jtr: ado.Out[ado.f64, 2]):
    i = ado.tid()
    x = ado.zeros(3, ado.f64)
    t = ado.zeros(M, ado.f64)
    y = ado.zeros(M, ado.f64)
    r = ado.zeros(M, ado.f64)
    dr = ado.zeros(M, ado.f64)
    v = ado.zeros(3, ado.f64)
    g = ado.zeros(3, ado.f64)
    for j in range(3):
        x[j] = xs[i, j]
    for k in range(M):
        t[k] = ts[k]
        y[k] = ys[i, k]
    for c in range(3):
        for j in range(3):
            v[j] = 0.0
        v[c] = 1.0
        ado.jvp(decay, argnums=(0, 3))(x, t, y, r, v, dr)
        for k in range(M):
            jac[i, k, c] = dr[k]
    cost = ado.value_and_grad(half_squares)(x, t, y, out=g)
    for j in range(3):
        jtr[i, j] = g[j]


def test_jacobian_columns_by_jvp_and_the_gradient_of_the_cost_are_jt_r():
    rng = np.random.default_rng(1)
    xs, ts, ys = rng.normal(size=(4, 3)), np.linspace(0, 2, M), rng.normal(size=(4, M))
    jac, jtr = np.zeros((4, M, 3)), np.zeros((4, 3))
    decay_jacobian(xs, ts, ys, jac, jtr, grid=4)
    for x, y, j, g in zip(xs, ys, jac, jtr):
        e = np.exp(-x[1] * ts)
        expected = np.stack([e, -x[0] * ts * e, np.ones(M)], axis=1)
        np.testing.assert_allclose(j, expected, rtol=1e-13, atol=1e-15)
        np.testing.assert_allclose(g, expected.T @ (x[0] * e + x[2] - y), rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("seed", range(6))
def test_random_helpers_forward_reverse_and_finite_differences(seed, tmp_path):
    program = helper_programs.generate(random.Random(seed))
    case = helper_programs.check_case(program, seed, tmp_path)
    assert not case.failures, "\n".join(case.failures) + "\n" + program.source


@pytest.mark.parametrize("jvp, broken", [(False, "central difference"), (True, "<J v, w>")])
def test_the_random_checks_fail_on_a_wrong_derivative(jvp, broken, tmp_path):
    """A helper whose custom vjp is wrong (3a instead of 2a) fails the finite differences; with a right
    custom jvp beside it, forward and reverse mode disagree too."""
    program = helper_programs.generate(random.Random(0))
    rules = "jvp=pair_jvp, vjp=pair_vjp" if jvp else "vjp=pair_vjp"
    wrong = program.source.replace(
        "@ado.func\ndef pair(a, b):",
        "def pair_vjp(a, b, d):\n    return 3.0 * a * d, 0.0\n\n\ndef pair_jvp(a, b, da, db):\n    return 2.0 * a * da\n\n\n"
        f"@ado.func({rules})\ndef pair(a, b):\n    return a * a\n\n\ndef unused(a, b):")
    wrong = wrong.replace("    f0 = x[0] * p[0]\n", "    f0 = pair(x[0], p[0])\n", 1)
    case = helper_programs.check_case(helper_programs.GeneratedHelpers(wrong), 1000 + jvp, tmp_path)
    assert any(broken in f for f in case.failures), case.failures


@ado.func
def scaled_energy(x, s):
    e = 0.0
    for j in range(4):
        e += s * x[j] * x[j] * x[j]
    return e


@ado.kernel
def gradient_kernel(xs: ado.In[ado.f64, 2], s: ado.f64, g_out: ado.Out[ado.f64, 2]):
    i = ado.tid()
    x = ado.zeros(4, ado.f64)
    g = ado.zeros(4, ado.f64)
    for j in range(4):
        x[j] = xs[i, j]
    ado.grad(scaled_energy)(x, s, out=g)
    for j in range(4):
        g_out[i, j] = g[j]


def test_hessian_vector_products_by_the_adjoint_of_a_gradient_kernel():
    """Second order: ado.vjp of a kernel that calls ado.grad(f)(x, out=g) gives H w."""
    xs, w = np.array([[0.5, -1.0, 2.0, 0.3]]), np.array([[1.0, 2.0, -1.0, 0.5]])
    d_xs, d_s = np.zeros_like(xs), np.zeros(1)
    ado.vjp(gradient_kernel, ["xs", "s"])(xs, 1.5, np.zeros_like(xs), d_xs, d_s, w, grid=1)
    np.testing.assert_allclose(d_xs, 6.0 * 1.5 * xs * w, rtol=1e-13)
    np.testing.assert_allclose(d_s, [np.sum(3.0 * xs ** 2 * w)], rtol=1e-13)


@ado.func
def f32_norm(x):
    return ado.sqrt(x[0] * x[0] + x[1] * x[1] + x[2] * x[2])


@ado.kernel
def f32_kernel(xs: ado.In[ado.f32, 2], g_out: ado.Out[ado.f32, 2]):
    i = ado.tid()
    x = ado.zeros(3, ado.f32)
    g = ado.zeros(3, ado.f32)
    for j in range(3):
        x[j] = xs[i, j]
    ado.grad(f32_norm)(x, out=g)
    for j in range(3):
        g_out[i, j] = g[j]


def test_f32_arrays():
    xs = np.array([[3.0, 4.0, 0.0], [1.0, 2.0, 2.0]], np.float32)
    g = np.zeros_like(xs)
    f32_kernel(xs, g, grid=2)
    np.testing.assert_allclose(g, xs / np.linalg.norm(xs, axis=1, keepdims=True), rtol=1e-6)


@ado.func
def block_energy(x):
    e = 0.0
    for j in range(8):
        e += ado.cos(x[j]) * x[(j + 1) % 8]
    return e


@ado.kernel(block=8)
def block_gradient(xs: ado.In[ado.f64, 2], e_out: ado.Out[ado.f64], g_out: ado.Out[ado.f64, 2]):
    t = ado.thread_id()
    b = ado.block_id()
    xsh = ado.shared(8, ado.f64)
    gsh = ado.shared(8, ado.f64)
    xsh[t] = xs[b, t]
    ado.sync_threads()
    if t == 0:
        e_out[b] = ado.value_and_grad(block_energy)(xsh, out=gsh)
    ado.sync_threads()
    g_out[b, t] = gsh[t]


def test_a_block_shared_array_is_differentiated_by_one_thread():
    rng = np.random.default_rng(2)
    xs = rng.normal(size=(3, 8))
    e, g = np.zeros(3), np.zeros((3, 8))
    block_gradient(xs, e, g, grid=24)
    nxt = np.roll(xs, -1, axis=1)
    np.testing.assert_allclose(e, np.sum(np.cos(xs) * nxt, axis=1), rtol=1e-13)
    np.testing.assert_allclose(g, -np.sin(xs) * nxt + np.roll(np.cos(xs), 1, axis=1), rtol=1e-12, atol=1e-14)


def test_every_thread_writing_a_shared_gradient_is_a_race():
    with pytest.raises(ado.SharedMemoryRaceError):
        @ado.kernel(block=8)
        def racing(xs: ado.In[ado.f64, 2], g_out: ado.Out[ado.f64, 2]):
            t = ado.thread_id()
            b = ado.block_id()
            xsh = ado.shared(8, ado.f64)
            gsh = ado.shared(8, ado.f64)
            xsh[t] = xs[b, t]
            ado.sync_threads()
            ado.grad(block_energy)(xsh, out=gsh)
            ado.sync_threads()
            g_out[b, t] = gsh[t]


@pytest.mark.parametrize("target, arch", [("nvptx", "sm_90"), pytest.param("amdgpu", "gfx942", marks=needs_lld)])
def test_compiles_for_gpus(target, arch):
    """Local arrays and the adjoint's static tape on GPUs (AMD: private allocas in address space 5)."""
    artifact = decay_jacobian.compiled(target, arch=arch).artifact
    assert artifact
    if target == "nvptx":
        assert "decay_jacobian" in artifact
    block = block_gradient.compiled(target, arch=arch).artifact
    assert block


@pytest.mark.gpu
@pytest.mark.parametrize("seed", range(3))
def test_random_helpers_on_cuda(seed, tmp_path, cuda):
    program = helper_programs.generate(random.Random(seed))
    case = helper_programs.check_case(program, seed, tmp_path, threads=64, device="cuda")
    assert not case.failures, "\n".join(case.failures)


@pytest.mark.gpu
def test_rosenbrock_on_cuda(cuda):
    rng = np.random.default_rng(0)
    xs, vs = rng.normal(size=(300, N)), rng.normal(size=(300, N))
    e, g1, g2, dy = np.zeros(300), np.zeros((300, N)), np.zeros((300, N)), np.zeros(300)
    rosen_derivatives(xs, vs, e, g1, g2, dy, grid=300, device="cuda")
    np.testing.assert_allclose(g1, [scipy.optimize.rosen_der(x) for x in xs], rtol=1e-12, atol=1e-12)


# --- refusals -------------------------------------------------------------------------------

def _compile(body: str, tmp_path, name="bad"):
    """A kernel from source text with rosen/decay helpers in scope (errors carry its lines)."""
    import importlib.util
    path = tmp_path / f"{name}.py"
    path.write_text("import adoffload as ado\n" + HELPERS + body)
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)


HELPERS = """

@ado.func
def rosen(x):
    return 100.0 * (x[1] - x[0] * x[0]) ** 2 + (1.0 - x[0]) ** 2


@ado.func
def half_squares(x, t, y):
    return x[0] * t[0] * y[1]


@ado.func
def scaled_energy(x, s):
    return s * x[0]


"""

REFUSALS = {
    "no out": ("    x = ado.zeros(5, ado.f64)\n    e[0] = ado.value_and_grad(rosen)(x)\n",
               ado.KernelTypeError, "pass out=g"),
    "out shape": ("    x = ado.zeros(5, ado.f64)\n    g = ado.zeros(4, ado.f64)\n    ado.grad(rosen)(x, out=g)\n",
                  ado.KernelTypeError, r"must be ado.f64 of shape \(5,\)"),
    "out dtype": ("    x = ado.zeros(5, ado.f64)\n    g = ado.zeros(5, ado.f32)\n    ado.grad(rosen)(x, out=g)\n",
                  ado.KernelTypeError, "must be ado.f64"),
    "out is x": ("    x = ado.zeros(5, ado.f64)\n    ado.grad(rosen)(x, out=x)\n",
                 ado.KernelTypeError, "arrays of their own"),
    "out a parameter": ("    x = ado.zeros(5, ado.f64)\n    ado.grad(rosen)(x, out=p)\n",
                        ado.UnsupportedConstructError, "kernel parameter"),
    "x a parameter": ("    g = ado.zeros(5, ado.f64)\n    ado.grad(rosen)(p, out=g)\n",
                      ado.UnsupportedConstructError, "copy it into a local array"),
    "mixed argnums": ("    x = ado.zeros(4, ado.f64)\n    g = ado.zeros(4, ado.f64)\n"
                      "    ado.grad(scaled_energy, argnums=(0, 1))(x, 2.0, out=(g, g))\n",
                      ado.KernelTypeError, "mixes array and scalar"),
    "int array": ("    x = ado.zeros(5, ado.i64)\n    g = ado.zeros(5, ado.i64)\n    ado.grad(rosen)(x, out=g)\n",
                  ado.KernelTypeError, "only float arrays"),
    "tangent shape": ("    x = ado.zeros(5, ado.f64)\n    v = ado.zeros(3, ado.f64)\n    y, d = ado.jvp(rosen)(x, v)\n",
                      ado.KernelTypeError, "tangent of argument 0"),
    "out for jvp": ("    x = ado.zeros(5, ado.f64)\n    y, d = ado.jvp(rosen)(x, x, out=x)\n",
                    ado.KernelTypeError, "positional arguments only"),
    "x passed twice": ("    x = ado.zeros(3, ado.f64)\n    g = ado.zeros(3, ado.f64)\n"
                       "    ado.grad(half_squares)(x, x, x, out=g)\n",
                       ado.KernelTypeError, "argument 0, which is differentiated, and argument 1 too"),
    "too few outs": ("    x = ado.zeros(3, ado.f64)\n    t = ado.zeros(6, ado.f64)\n    g = ado.zeros(3, ado.f64)\n"
                     "    ado.grad(half_squares, argnums=(0, 1))(x, t, t, out=g)\n",
                     ado.KernelTypeError, r"out= needs 2 array"),
}


@pytest.mark.parametrize("case", sorted(REFUSALS))
def test_refusals_name_the_line(case, tmp_path):
    body, error, message = REFUSALS[case]
    source = "@ado.kernel\ndef bad(p: ado.In[ado.f64], e: ado.Out[ado.f64]):\n" + body
    with pytest.raises(error, match=message) as info:
        _compile(source, tmp_path, name=f"bad_{abs(hash(case))}")
    assert "bad_" in str(info.value) and info.value.line is not None


def test_a_loop_over_a_parameter_array_needs_a_dynamic_tape_and_is_refused(tmp_path):
    source = '''
@ado.func
def weighted(x, w):
    s = 0.0
    for k in range(len(w)):
        s = ado.sin(s) * x[k % 3] + w[k]
    return s


@ado.kernel
def bad(w: ado.In[ado.f64], e: ado.Out[ado.f64]):
    x = ado.zeros(3, ado.f64)
    g = ado.zeros(3, ado.f64)
    e[0] = ado.value_and_grad(weighted)(x, w, out=g)
'''
    with pytest.raises(ado.DifferentiationError, match="dynamic tape") as info:
        _compile(source, tmp_path, name="bad_tape")
    line = ("import adoffload as ado\n" + HELPERS + source).splitlines().index(
        "    e[0] = ado.value_and_grad(weighted)(x, w, out=g)") + 1
    assert f"bad_tape.py:{line}:" in str(info.value)


@ado.func
def pair_energy(p):
    """Pairs of a (4, 3) array of positions: sum of 1 / r^2."""
    e = 0.0
    for a in range(4):
        for b in range(a + 1, 4):
            r2 = 0.0
            for c in range(3):
                r2 += (p[a, c] - p[b, c]) ** 2
            e += 1.0 / r2
    return e


@ado.kernel
def positions_gradient(ps: ado.In[ado.f64, 3], vs: ado.In[ado.f64, 3], g_out: ado.Out[ado.f64, 3],
                       dy: ado.Out[ado.f64]):
    i = ado.tid()
    p = ado.zeros((4, 3), ado.f64)
    v = ado.zeros((4, 3), ado.f64)
    g = ado.zeros((4, 3), ado.f64)
    for a in range(4):
        for c in range(3):
            p[a, c] = ps[i, a, c]
            v[a, c] = vs[i, a, c]
    ado.grad(pair_energy)(p, out=g)
    y, d = ado.jvp(pair_energy)(p, v)
    dy[i] = d
    for a in range(4):
        for c in range(3):
            g_out[i, a, c] = g[a, c]


def test_a_two_dimensional_local_array():
    rng = np.random.default_rng(5)
    ps, vs = rng.normal(size=(3, 4, 3)), rng.normal(size=(3, 4, 3))
    g, dy = np.zeros_like(ps), np.zeros(3)
    positions_gradient(ps, vs, g, dy, grid=3)
    for p, gp in zip(ps, g):
        d = p[:, None] - p[None]
        r2 = (d ** 2).sum(-1) + np.eye(4)
        expected = (-2 * d / r2[..., None] ** 2 * (1 - np.eye(4))[..., None]).sum(1)
        np.testing.assert_allclose(gp, expected, rtol=1e-12)
    np.testing.assert_allclose(dy, np.einsum("bac,bac->b", g, vs), rtol=1e-12)


@ado.kernel(block=8)
def block_tangent(xs: ado.In[ado.f64, 2], vs: ado.In[ado.f64, 2], dy: ado.Out[ado.f64]):
    t = ado.thread_id()
    b = ado.block_id()
    xsh = ado.shared(8, ado.f64)
    vsh = ado.shared(8, ado.f64)
    xsh[t] = xs[b, t]
    vsh[t] = vs[b, t]
    ado.sync_threads()
    if t == 0:
        y, d = ado.jvp(block_energy)(xsh, vsh)
        dy[b] = d


def test_a_tangent_of_shared_arrays():
    rng = np.random.default_rng(6)
    xs, vs = rng.normal(size=(2, 8)), rng.normal(size=(2, 8))
    dy = np.zeros(2)
    block_tangent(xs, vs, dy, grid=16)
    nxt = np.roll(xs, -1, axis=1)
    g = -np.sin(xs) * nxt + np.roll(np.cos(xs), 1, axis=1)
    np.testing.assert_allclose(dy, np.sum(g * vs, axis=1), rtol=1e-12)


@ado.func
def chooser(x, p):
    s = 0.0
    for j in range(4):
        s += ado.sin((x[j]) if x[j] > 0.1 else (p[j]))
    return s


@ado.kernel
def chooser_gradient(xs: ado.In[ado.f64, 2], ps: ado.In[ado.f64, 2], g_out: ado.Out[ado.f64, 2]):
    i = ado.tid()
    x = ado.zeros(4, ado.f64)
    p = ado.zeros(4, ado.f64)
    g = ado.zeros(4, ado.f64)
    for j in range(4):
        x[j] = xs[i, j]
        p[j] = ps[i, j]
    ado.grad(chooser)(x, p, out=g)
    for j in range(4):
        g_out[i, j] = g[j]


def test_a_data_array_merged_with_the_parameters_gets_a_scratch_shadow():
    """`x[j] if c else p[j]` becomes a load through a select of the two arrays' pointers; p (not
    differentiated) gets a zeroed shadow of its own, and the gradient flows through x's side only."""
    xs = np.array([[0.5, -0.3, 0.2, 0.05]])
    ps = np.array([[1.0, 2.0, 3.0, 4.0]])
    g = np.zeros((1, 4))
    chooser_gradient(xs, ps, g, grid=1)
    np.testing.assert_allclose(g, np.where(xs > 0.1, np.cos(xs), 0.0), rtol=1e-14)


@needs_lld
def test_the_merged_data_arrays_scratch_shadow_compiles_for_amd():
    assert chooser_gradient.compiled("amdgpu", arch="gfx942").artifact       # the scratch alloca in address space 5
