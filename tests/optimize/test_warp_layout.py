"""minimize(layout="warp"): one problem per warp, the same algorithm as one problem per thread."""
import numpy as np
import pytest

from adoffload.errors import ArgumentError, CompilationError
from adoffload.optimize import layout as layouts
from adoffload.optimize import minimize
from adoffload.chemistry.kernels import lj_cluster_energy
from tests.optimize.problems import quadratic, random_quadratics, rosen, shifted_bowl


def _close_counts(a, b, slack):
    """nit/nfev of the two layouts: equal but for rounding (dot products summed in another order)."""
    assert np.all(np.abs(a - b) <= slack * np.maximum(b, 10)), (a, b)


@pytest.mark.parametrize("method", ["lbfgs", "bfgs"])
def test_rosenbrock_n6_warp_matches_thread(method):
    x0 = np.random.default_rng(0).uniform(-1.5, 1.5, (5, 6))
    warp = minimize(rosen, x0, method=method, layout="warp")
    thread = minimize(rosen, x0, method=method, layout="thread")
    np.testing.assert_array_equal(warp.status, thread.status)
    assert warp.success.all()
    _close_counts(warp.nit, thread.nit, 0.1)
    _close_counts(warp.nfev, thread.nfev, 0.1)
    np.testing.assert_allclose(warp.x, thread.x, atol=1e-5)
    np.testing.assert_allclose(warp.jac, thread.jac, atol=1e-4)
    np.testing.assert_allclose(warp.fun, thread.fun, atol=1e-9)


def test_fire_warp_matches_thread_with_groups():
    x0 = np.random.default_rng(6).uniform(0.0, 2.4, (3, 39))          # LJ13, atoms of 3 coordinates
    options = {"group": 3, "maxiter": 3000}
    warp = minimize(lj_cluster_energy, x0, args=(1.0, 1.0), method="fire", layout="warp", options=options)
    thread = minimize(lj_cluster_energy, x0, args=(1.0, 1.0), method="fire", layout="thread", options=options)
    np.testing.assert_array_equal(warp.status, thread.status)
    assert warp.success.all()
    _close_counts(warp.nit, thread.nit, 0.1)
    np.testing.assert_allclose(warp.fun, thread.fun, atol=1e-8)


def test_rosenbrock_n40_lbfgs_warp_matches_thread():
    x0 = np.random.default_rng(1).uniform(-1.5, 1.5, (3, 40))
    warp = minimize(rosen, x0, method="lbfgs", layout="warp")
    thread = minimize(rosen, x0, method="lbfgs", layout="thread")
    np.testing.assert_array_equal(warp.status, thread.status)
    _close_counts(warp.nit, thread.nit, 0.15)
    _close_counts(warp.nfev, thread.nfev, 0.15)
    np.testing.assert_allclose(warp.x, thread.x, atol=1e-3)
    np.testing.assert_allclose(warp.fun, thread.fun, atol=1e-7)


@pytest.mark.parametrize("method", ["lbfgs", "bfgs"])
def test_quadratics_with_known_minimum(method):
    rng = np.random.default_rng(2)
    a, b = random_quadratics(rng, 6, 5)
    options = {"gtol": 1e-9, "ftol": 1e-14}
    x0 = rng.normal(size=(6, 5))
    result = minimize(quadratic, x0, args=(a, b), method=method, layout="warp", options=options)
    thread = minimize(quadratic, x0, args=(a, b), method=method, layout="thread", options=options)
    assert result.success.all()
    np.testing.assert_array_equal(result.status, thread.status)
    _close_counts(result.nit, thread.nit, 0.2)
    np.testing.assert_allclose(result.x, np.linalg.solve(a, b[..., None])[..., 0], atol=1e-7)


def test_bfgs_above_the_local_memory_limit_runs_per_warp():
    # n=380: the inverse Hessian alone is 380*380*8 = 1.1 MiB, above the host's 1 MiB per thread
    # (and NVIDIA's 512 KiB): the thread layout is refused, the warp layout (and so auto) runs
    n = 380
    x0 = np.random.default_rng(3).uniform(-1.5, 1.5, (2, n))
    args = (0.5, np.array([1.0, 2.0]))
    with pytest.raises(CompilationError, match="layout='warp'"):
        minimize(shifted_bowl, x0, args=args, method="bfgs", layout="thread")
    result = minimize(shifted_bowl, x0, args=args, method="bfgs")          # auto
    np.testing.assert_array_equal(result.status, 1)
    np.testing.assert_allclose(result.x, 0.5, atol=1e-8)


def test_auto_rule():
    from adoffload.optimize import bfgs, fire, generate, lbfgs
    never = lambda: pytest.fail("the thread kernel is not needed for this choice")   # noqa: E731
    assert layouts.choose("auto", fire, 30_000, 64, "cuda", never) == "thread"      # above WARP_MAX_N
    assert layouts.choose("thread", bfgs, 64, 64, "cuda", never) == "thread"
    x = np.dtype(np.float64)
    small = lambda: generate.minimize_kernel(rosen, lbfgs, 6, x, (), {"H": 10})          # noqa: E731
    assert layouts.choose("auto", lbfgs, 6, 64, "cpu", small) == "thread"          # host: thread
    assert layouts.choose("auto", lbfgs, 6, 100_000, "cuda", small) == "thread"    # small n on a GPU
    assert layouts.choose("auto", lbfgs, 6, 64, "cuda", small) == "thread"         # a small batch too
    big = lambda: generate.minimize_kernel(rosen, bfgs, 380, x, (), {})                 # noqa: E731
    assert layouts.choose("auto", bfgs, 380, 64, "cuda", big) == "warp"            # n*n past 512 KiB
    assert layouts.target_of("hip") == ("amdgpu", 64) and layouts.target_of("cpu:wave64") == ("host", 64)


def test_bad_layouts_are_refused():
    x0 = np.zeros((2, 3))
    with pytest.raises(ArgumentError, match="'auto', 'thread'.*'warp'"):
        minimize(rosen, x0, layout="block")
    with pytest.raises(ArgumentError, match="layout='warp' is built for n <= 16384"):
        minimize(rosen, np.zeros((1, 16385)), method="lbfgs", layout="warp")


@pytest.mark.gpu
@pytest.mark.parametrize("method", ["lbfgs", "bfgs"])
def test_warp_layout_on_cuda_matches_the_host(method, cuda):
    x0 = np.random.default_rng(4).uniform(-1.5, 1.5, (512, 64))
    gpu = minimize(rosen, x0, method=method, device="cuda", layout="warp")
    host = minimize(rosen, x0[:8], method=method, layout="thread")
    assert gpu.success.all() and host.success.all()
    np.testing.assert_allclose(gpu.x[:8], host.x, atol=1e-4)
    thread = minimize(rosen, x0, method=method, device="cuda", layout="thread")
    np.testing.assert_array_equal(gpu.status, thread.status)


def test_warp_layout_through_jax_jit():
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    x0 = np.random.default_rng(5).uniform(-1.5, 1.5, (4, 6))
    result = jax.jit(lambda x: minimize(rosen, x, method="lbfgs", layout="warp"))(jax.numpy.asarray(x0))
    thread = minimize(rosen, x0, method="lbfgs", layout="thread")
    np.testing.assert_array_equal(np.asarray(result.status), thread.status)
    np.testing.assert_allclose(np.asarray(result.x), thread.x, atol=1e-6)
    assert "X" not in result                     # the scratch arrays are not results


def test_a_jax_calls_auto_layout_decides_for_jaxs_backend(monkeypatch):
    """docs/optimize.md: a JAX call's auto decides for JAX's default backend; it decided for the host
    (minimize's device="cpu" default), whose 1 MiB per thread lets through kernels NVIDIA's 512 KiB refuses."""
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    from adoffload.optimize import api
    seen = []
    monkeypatch.setattr(api, "jax_device", lambda: "cuda")
    monkeypatch.setattr(api, "choose", lambda layout, module, n, batch, device, kernel: seen.append(device) or "thread")
    minimize(rosen, jax.numpy.zeros((2, 3)))
    minimize(rosen, np.zeros((2, 3)))
    assert seen == ["cuda", "cpu"]


@pytest.mark.parametrize("module", ["lbfgs_warp", "bfgs_warp", "fire_warp"])
def test_the_warp_kernels_compile_for_nvidia(module):
    """No GPU here: compiled for sm_90, not run (test_warp_layout_on_cuda_matches_the_host runs them)."""
    import importlib
    from adoffload.optimize import generate
    static = {"lbfgs_warp": {"H": 10}, "bfgs_warp": {}, "fire_warp": {"G": 1}}[module]
    kernel = generate.minimize_warp_kernel(rosen, importlib.import_module(f"adoffload.optimize.{module}"), 70,
                                           np.dtype(np.float64), (), static, 32)
    assert kernel.compiled("nvptx", arch="sm_90").artifact
