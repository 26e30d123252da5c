"""adoffload.optimize.minimize against scipy.optimize.minimize on the same problems (host CPU)."""
import numpy as np
import pytest
import scipy.optimize

import adoffload as ado
from adoffload.optimize import bfgs, fire, lbfgs, minimize, shared
from adoffload.optimize.status import FTOL, GTOL, LINE_SEARCH, MAXITER, NONFINITE
from tests.foreign_cuda.checks import needs_lld
from tests.optimize.problems import log_barrier, quadratic, random_quadratics, rosen, shifted_bowl

SCIPY = {"lbfgs": "L-BFGS-B", "bfgs": "BFGS"}


@pytest.fixture(scope="module")
def starts():
    return np.random.default_rng(1).uniform(-1.5, 1.5, (12, 4))


@pytest.mark.parametrize("method", ["lbfgs", "bfgs"])
def test_rosenbrock_batch_matches_scipy(method, starts):
    result = minimize(rosen, starts, method=method)
    assert result.success.all() and set(np.unique(result.status)) <= {GTOL, FTOL}
    for k, x0 in enumerate(starts):
        ref = scipy.optimize.minimize(scipy.optimize.rosen, x0, jac=scipy.optimize.rosen_der, method=SCIPY[method])
        assert ref.success
        np.testing.assert_allclose(result.x[k], ref.x, atol=1e-4)
        assert abs(result.fun[k] - ref.fun) < 1e-8
        np.testing.assert_allclose(result.jac[k], scipy.optimize.rosen_der(result.x[k]), rtol=1e-10, atol=1e-12)
        assert result.fun[k] == pytest.approx(scipy.optimize.rosen(result.x[k]), rel=1e-12, abs=1e-15)
    if method == "lbfgs":          # the same algorithm: about the same work
        scipy_iterations = [scipy.optimize.minimize(scipy.optimize.rosen, x0, jac=scipy.optimize.rosen_der,
                                                    method="L-BFGS-B").nit for x0 in starts]
        assert np.mean(result.nit) < 1.5 * np.mean(scipy_iterations)


@pytest.mark.parametrize("method", ["lbfgs", "bfgs", "fire"])
def test_one_and_two_parameters(method):
    """n = 1 (a loop over len(x) of one trip) and Rosenbrock at n = 2 (range(len(x) - 1): one trip): the
    helper's adjoint was refused as needing a dynamic tape."""
    x0 = np.random.default_rng(7).uniform(-1.5, 1.5, (3, 2))
    result = minimize(rosen, x0, method=method, options={"maxiter": 50000} if method == "fire" else None)
    assert result.success.all()
    np.testing.assert_allclose(result.x, 1.0, atol=1e-4)
    bowl = minimize(shifted_bowl, x0[:, :1].copy(), args=(0.5, np.ones(3)), method=method)
    assert bowl.success.all()
    np.testing.assert_allclose(bowl.x, 0.5, atol=5e-6)     # |g| = 2 |x - c| <= gtol


def test_fire_reaches_the_gradient_tolerance(starts):
    result = minimize(rosen, starts, method="fire", options={"maxiter": 20000})
    assert result.success.all() and (result.status == GTOL).all()
    assert np.abs(result.jac).max() <= 1e-5
    for k, x0 in enumerate(starts):       # the minimum scipy finds from the same start (1 or the other one)
        ref = scipy.optimize.minimize(scipy.optimize.rosen, x0, jac=scipy.optimize.rosen_der, method="BFGS")
        np.testing.assert_allclose(result.x[k], ref.x, atol=1e-4)


@pytest.mark.parametrize("method", ["lbfgs", "bfgs", "fire"])
def test_random_quadratics_reach_the_solution_of_a_x_equals_b(method):
    rng = np.random.default_rng(2)
    a, b = random_quadratics(rng, 10, 5)
    x0 = rng.normal(size=(10, 5))
    options = {"fire": {"maxiter": 50000, "gtol": 1e-9}, "lbfgs": {"gtol": 1e-9, "ftol": 1e-14},
               "bfgs": {"gtol": 1e-9}}[method]
    result = minimize(quadratic, x0, args=(a, b), method=method, options=options)
    assert result.success.all()
    exact = np.linalg.solve(a, b[..., None])[..., 0]
    np.testing.assert_allclose(result.x, exact, atol=1e-7)
    for k in range(3):
        ref = scipy.optimize.minimize(lambda x: 0.5 * x @ a[k] @ x - b[k] @ x, x0[k],
                                      jac=lambda x: a[k] @ x - b[k], method="BFGS", tol=1e-9)
        np.testing.assert_allclose(result.x[k], ref.x, atol=1e-7)


def test_per_problem_scalars_and_a_shared_array():
    """args: a per-problem scalar (shape (batch,)) and a scalar shared by all."""
    rng = np.random.default_rng(3)
    x0, w = rng.normal(size=(6, 3)), rng.uniform(0.5, 2.0, 6)
    result = minimize(shifted_bowl, x0, args=(0.25, w))
    np.testing.assert_allclose(result.x, 0.25, atol=1e-6)
    np.testing.assert_allclose(result.jac, 2 * w[:, None] * (result.x - 0.25), rtol=1e-9, atol=1e-14)


def test_one_launch_for_the_whole_batch(monkeypatch):
    import importlib
    kernels = importlib.import_module("adoffload.kernels.kernel")
    calls = []
    original = kernels.launch
    monkeypatch.setattr(kernels, "launch", lambda *a, **k: calls.append(a[0].name) or original(*a, **k))
    minimize(rosen, np.zeros((5, 4)), method="lbfgs")
    assert calls == ["minimize_lbfgs_rosen"]


def test_maxiter_reports_failure_not_a_minimum(starts):
    result = minimize(rosen, starts, method="lbfgs", maxiter=3)
    assert not result.success.any() and (result.status == MAXITER).all()
    assert (result.nit == 3).all()
    assert "maximum number of iterations" in result.message[0]
    np.testing.assert_allclose(result.fun, [scipy.optimize.rosen(x) for x in result.x], rtol=1e-12)


def test_maxiter_none_in_options_is_the_methods_default():
    """options={"maxiter": None} gave 200 * n iterations for every method; L-BFGS's default is 15000."""
    from adoffload.optimize.api import OPTIONS, _options
    for method, expected in ((lbfgs, 15000), (bfgs, 200 * 3), (fire, 10000)):
        assert _options(method, None, None, {"maxiter": None}, "minimize", 3)["maxiter"] == expected
        assert _options(method, None, None, None, "minimize", 3)["maxiter"] == expected
    assert OPTIONS[lbfgs]["maxiter"] == 15000
    start = np.full((1, 3), -1.2)
    assert minimize(rosen, start, options={"maxiter": None}).nit[0] == minimize(rosen, start).nit[0]


def test_a_start_where_the_function_is_nan_fails_that_problem_only():
    x0 = np.array([[2.0, 1.0], [-1.0, 1.0], [0.5, -0.3]])
    result = minimize(log_barrier, x0)
    assert list(result.success) == [True, False, True]
    assert result.status[1] == NONFINITE and "not finite" in result.message[1]
    np.testing.assert_allclose(result.x[[0, 2]], [[1.0, 0.0], [1.0, 0.0]], atol=1e-5)


def test_tolerances_below_rounding_end_in_a_failed_line_search():
    start = np.array([[-1.2, 1.0, 0.5, 0.3]])
    result = minimize(rosen, start, options={"gtol": 0.0, "ftol": 0.0})
    assert result.status[0] == LINE_SEARCH and not result.success[0]
    converged = minimize(rosen, start)           # the local minimum near (-0.78, 0.61, 0.38, 0.15)
    np.testing.assert_allclose(result.x, converged.x, atol=1e-5)


def test_float32():
    x0 = np.random.default_rng(4).uniform(-1, 1, (4, 3)).astype(np.float32)
    result = minimize(shifted_bowl, x0, args=(0.5, np.ones(4, np.float32)), tol=1e-4)
    assert result.x.dtype == np.float32 and result.success.all()
    np.testing.assert_allclose(result.x, 0.5, atol=1e-4)


def test_float_arrays_take_the_starts_dtype():
    """float64 arrays with float32 starts (numpy's default dtype for data): passed in float32, as a
    float scalar is; they ended in a KernelTypeError inside lbfgs.py (a float64 function value stored
    into the float32 state). float32 arrays with float64 starts give the float64 answers."""
    x0 = np.random.default_rng(4).uniform(-1, 1, (4, 3))
    centre = np.array([0.5, 0.25, -0.5, 1.0])
    for method in ("lbfgs", "bfgs", "fire"):
        result = minimize(shifted_bowl, x0.astype(np.float32), args=(centre, 2.0), method=method, tol=1e-4)
        assert result.x.dtype == np.float32 and result.success.all()
        np.testing.assert_allclose(result.x, np.repeat(centre[:, None], 3, 1), atol=1e-4)
        shared_centre = minimize(quadratic, x0.astype(np.float32), method=method, tol=1e-3,
                                 args=(shared(np.eye(3) * 2.0), shared(np.array([1.0, 2.0, 3.0]))))
        np.testing.assert_allclose(shared_centre.x, np.tile([0.5, 1.0, 1.5], (4, 1)), atol=1e-3)
    wide = minimize(shifted_bowl, x0, args=(centre.astype(np.float32), 2.0))
    np.testing.assert_array_equal(wide.x, minimize(shifted_bowl, x0, args=(centre, 2.0)).x)


def test_an_empty_batch():
    result = minimize(rosen, np.zeros((0, 4)))
    assert result.x.shape == (0, 4) and result.success.shape == (0,)


def test_the_generated_kernel_is_in_the_kernel_language_and_named_in_errors():
    from adoffload.optimize import generate, lbfgs
    kernel = generate.minimize_kernel(rosen, lbfgs, 4, np.dtype(np.float64), (), {"H": 10})
    assert isinstance(kernel, ado.Kernel) and kernel.pyfunc.__code__.co_filename.endswith(".py")
    assert "ado.value_and_grad(fun)(xt, out=gt)" in open(kernel.pyfunc.__code__.co_filename).read()


def test_shared_marks_an_array_for_every_problem():
    @ado.func
    def weighted(x, wts):
        s = 0.0
        for i in range(len(x)):
            s += wts[i] * (x[i] - 1.0) ** 2
        return s

    result = minimize(weighted, np.zeros((3, 2)), args=(shared(np.array([1.0, 4.0])),))
    np.testing.assert_allclose(result.x, 1.0, atol=1e-6)


def test_gpu_launches_use_blocks_of_one_warp():
    """A few thousand problems spread over every multiprocessor (generate.LAUNCH_BLOCK)."""
    from adoffload.optimize import generate, lbfgs
    kernel = generate.minimize_kernel(rosen, lbfgs, 4, np.dtype(np.float64), (), {"H": 10})
    assert kernel.compiled("nvptx", arch="sm_90").extra["block_threads"] == generate.LAUNCH_BLOCK == 32
    assert "block_threads" not in kernel.compiled("host").extra


def test_a_problem_too_large_for_a_thread_is_refused_with_advice():
    with pytest.raises(ado.CompilationError, match="need [0-9]+ bytes per thread.*smaller maxcor"):
        minimize(rosen, np.zeros((1, 70000)), method="lbfgs", maxiter=1)


@ado.func
def bowl_with_data(x, data):
    s = 0.0
    for i in range(len(x)):
        s += (x[i] - data[i]) ** 2
    return s


def test_arrays_too_large_for_a_thread_are_named_as_the_cause():
    """300,000 floats per problem in args at n = 3: the advice was 'fewer parameters per problem' only."""
    with pytest.raises(ado.CompilationError, match=r"2400000 bytes of that are the copies of the problem's arrays"):
        minimize(bowl_with_data, np.zeros((2, 3)), args=(np.zeros((2, 300000)),))


@pytest.mark.parametrize("target, arch", [("nvptx", "sm_90"), pytest.param("amdgpu", "gfx942", marks=needs_lld)])
def test_the_optimizer_kernels_compile_for_gpus(target, arch):
    """NVIDIA PTX and AMD GCN (no AMD GPU here: compiled, not run; local arrays in address space 5)."""
    from adoffload.optimize import fire, generate, lbfgs
    from adoffload.optimize.inputs import ArgSpec
    from tests.optimize.problems import M, decay
    kernels = [generate.minimize_kernel(rosen, lbfgs, 4, np.dtype(np.float64), (), {"H": 10}),
               generate.minimize_kernel(rosen, fire, 4, np.dtype(np.float64), (), {"G": 1}),
               generate.least_squares_kernel(decay, 3, M, np.dtype(np.float64),
                                             (ArgSpec("shared_array", "ado.f64", (M,)),
                                              ArgSpec("batch_array", "ado.f64", (M,))), False)]
    for kernel in kernels:
        assert kernel.compiled(target, arch=arch).artifact
