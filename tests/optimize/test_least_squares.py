"""adoffload.optimize.least_squares against scipy.optimize.least_squares (host CPU)."""
import numpy as np
import pytest
import scipy.optimize

import adoffload as ado
from adoffload.optimize import least_squares, shared
from adoffload.optimize.status import MAXITER, SINGULAR, XTOL
from tests.optimize.problems import M, T, decay, decay_data


def scipy_fit(x0, y, method="lm"):
    return scipy.optimize.least_squares(lambda p: p[0] * np.exp(-p[1] * T) + p[2] - y, x0, method=method)


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(0)
    true, y = decay_data(rng, 24)
    return true, y, np.tile([1.0, 1.0, 0.0], (24, 1))


@pytest.mark.parametrize("method", ["lm", "gn"])
def test_noisy_decay_fits_match_scipy(method, data):
    true, y, x0 = data
    result = least_squares(decay, x0, args=(shared(T), y), m=M, method=method)
    assert result.x.shape == (24, 3) and result.fun.shape == (24, M)
    for k in np.flatnonzero(result.success):
        ref = scipy_fit(x0[k], y[k])
        np.testing.assert_allclose(result.x[k], ref.x, rtol=1e-5, atol=1e-6)
        assert result.cost[k] == pytest.approx(ref.cost, rel=1e-9)
        np.testing.assert_allclose(result.fun[k], ref.fun, atol=1e-6)
        np.testing.assert_allclose(result.grad[k], ref.jac.T @ ref.fun, atol=1e-6)
    assert result.success.mean() >= (1.0 if method == "lm" else 0.9)
    # every trial point is evaluated with its Jacobian: njev = the start + the trials (+1 after a stop at a
    # rejected trial, which evaluates x once more)
    assert ((result.njev == result.nfev + 1) | (result.njev == result.nfev + 2)).all()
    assert (result.njev[result.success] == result.nfev[result.success] + 1).mean() > 0.5
    fitted = result.x[result.success]
    assert np.abs(fitted - true[result.success]).max() < 0.2        # noise 0.01: close to the truth
    np.testing.assert_allclose(result.optimality, np.abs(result.grad).max(axis=1))


def test_the_residuals_and_gradient_belong_to_the_returned_x(data):
    _, y, x0 = data
    result = least_squares(decay, x0[:4], args=(shared(T), y[:4]), m=M)
    for x, g, r, target in zip(result.x, result.grad, result.fun, y[:4]):
        e = np.exp(-x[1] * T)
        np.testing.assert_allclose(r, x[0] * e + x[2] - target, rtol=1e-12, atol=1e-14)
        jac = np.stack([e, -x[0] * T * e, np.ones(M)], axis=1)
        np.testing.assert_allclose(g, jac.T @ r, rtol=1e-9, atol=1e-13)


def test_max_nfev_reports_failure(data):
    _, y, x0 = data
    result = least_squares(decay, x0[:3], args=(shared(T), y[:3]), m=M, max_nfev=2)
    assert (result.status == MAXITER).all() and not result.success.any()
    assert (result.nfev == 2).all()
    for x, r, target in zip(result.x, result.fun, y[:3]):     # the residuals of the returned x, not of a trial
        np.testing.assert_allclose(r, x[0] * np.exp(-x[1] * T) + x[2] - target, rtol=1e-12, atol=1e-14)
    for cap in (1, 3):              # stopped after a rejected trial point or an accepted one
        capped = least_squares(decay, x0[:6], args=(shared(T), y[:6]), m=M, max_nfev=cap, method="gn")
        for x, r, target, cost in zip(capped.x, capped.fun, y[:6], capped.cost):
            expected = x[0] * np.exp(-x[1] * T) + x[2] - target
            np.testing.assert_allclose(r, expected, rtol=1e-12, atol=1e-14)
            assert cost == pytest.approx(0.5 * expected @ expected, rel=1e-12)


@ado.func
def one_parameter_matters(x, t, y, r):
    for k in range(len(r)):
        r[k] = x[0] * t[k] + 0.0 * x[1] - y[k]


def test_gauss_newton_refuses_singular_normal_equations_and_lm_damps_them():
    y = 2.0 * T[None, :] + 0.0 * np.ones((2, 1))
    x0 = np.array([[0.5, 1.0], [1.5, -1.0]])
    gn = least_squares(one_parameter_matters, x0, args=(shared(T), y), m=M, method="gn")
    assert (gn.status == SINGULAR).all() and not gn.success.any()
    lm = least_squares(one_parameter_matters, x0, args=(shared(T), y), m=M, method="lm")
    assert lm.success.all()
    np.testing.assert_allclose(lm.x[:, 0], 2.0, rtol=1e-8)


@ado.func
def weighted_model(x, t, basis, y, w, scale, count, r):
    """Every kind of argument at once: t (a shared 1-D array, looped over by its run-time length),
    basis (a shared 2-D array), y (the problem's row), w (the problem's scalar), scale (a float and
    count an int, the same for every problem). r_k = w (x0 exp(-x1 t_k) + sum_j x_{2+j} basis[j, k]) * scale - y_k."""
    for k in range(len(t)):
        s = x[0] * ado.exp(-x[1] * t[k])
        for j in range(count):
            s += x[2 + j] * basis[j, k]
        r[k] = w * s * scale - y[k]


def test_shared_arrays_batch_arrays_and_scalars_together_match_scipy():
    rng = np.random.default_rng(5)
    batch, count = 6, 2
    basis = np.stack([np.ones(M), T / 4.0])
    true = np.column_stack([rng.uniform(0.5, 2, batch), rng.uniform(0.3, 2, batch), rng.uniform(-0.5, 0.5, (batch, count))])
    w = rng.uniform(0.5, 1.5, batch)
    scale = 1.25

    def model(p, k):
        return w[k] * (p[0] * np.exp(-p[1] * T) + p[2:] @ basis) * scale

    y = np.array([model(true[k], k) + 0.01 * rng.standard_normal(M) for k in range(batch)])
    x0 = np.tile([1.0, 1.0, 0.0, 0.0], (batch, 1))
    for method in ("lm", "gn"):
        result = least_squares(weighted_model, x0, args=(shared(T), shared(basis), y, w, scale, count), m=M,
                               method=method)
        assert result.success.all(), method
        for k in range(batch):
            ref = scipy.optimize.least_squares(lambda p: model(p, k) - y[k], x0[k], method="lm")
            np.testing.assert_allclose(result.x[k], ref.x, rtol=1e-5, atol=1e-6)
            assert result.cost[k] == pytest.approx(ref.cost, rel=1e-9)
            np.testing.assert_allclose(result.grad[k], ref.jac.T @ ref.fun, atol=1e-6)
            h, jac = 1e-6, np.zeros((M, 4))
            for c in range(4):          # the Jacobian behind grad, by central differences at the result
                e = np.zeros(4)
                e[c] = h
                jac[:, c] = (model(result.x[k] + e, k) - model(result.x[k] - e, k)) / (2 * h)
            np.testing.assert_allclose(result.grad[k], jac.T @ result.fun[k], rtol=1e-6, atol=1e-8)


@ado.func
def cosine_series(x, t, y, r):
    """Ten parameters (above the 8 Jacobian lanes of one pass: passes of 8 and 2):
    r_k = sum_j x_j cos(j t_k) + 0.1 x_0 x_1 - y_k."""
    for k in range(len(r)):
        s = 0.1 * x[0] * x[1]
        for j in range(len(x)):
            s += x[j] * ado.cos(j * t[k])
        r[k] = s - y[k]


def test_ten_parameters_take_two_jacobian_passes_and_match_scipy():
    rng = np.random.default_rng(9)
    batch, n = 4, 10
    t = np.linspace(0.0, np.pi, M)
    basis = np.cos(np.arange(n)[:, None] * t[None, :])

    def model(p):
        return p @ basis + 0.1 * p[0] * p[1]

    true = rng.uniform(-1, 1, (batch, n))
    y = np.array([model(p) for p in true]) + 0.01 * rng.standard_normal((batch, M))
    x0 = np.zeros((batch, n))
    result = least_squares(cosine_series, x0, args=(shared(t), y), m=M)
    assert result.success.all()
    for k in range(batch):
        ref = scipy.optimize.least_squares(lambda p: model(p) - y[k], x0[k], method="lm")
        np.testing.assert_allclose(result.x[k], ref.x, rtol=1e-5, atol=1e-6)
        assert result.cost[k] == pytest.approx(ref.cost, rel=1e-9)
        h, jac = 1e-6, np.zeros((M, n))
        for c in range(n):
            e = np.zeros(n)
            e[c] = h
            jac[:, c] = (model(result.x[k] + e) - model(result.x[k] - e)) / (2 * h)
        np.testing.assert_allclose(result.grad[k], jac.T @ result.fun[k], rtol=1e-6, atol=1e-9)


def test_a_shared_array_shorter_than_the_residual_loop_is_a_bounds_error_naming_it():
    """The shared array is the kernel's parameter itself (not a local copy): the error gives its shape."""
    short = np.linspace(0.0, 1.0, M - 5)
    with pytest.raises(ado.BoundsError, match=rf"index {M - 5} is out of bounds .*shape \({M - 5},\)"):
        least_squares(decay, np.ones((2, 3)), args=(shared(short), np.zeros((2, M))), m=M)


@ado.func
def one_rate(x, t, y, r):
    for k in range(len(r)):
        r[k] = ado.exp(-x[0] * t[k]) - y[k]


def test_one_parameter_is_one_jacobian_lane():
    y = np.exp(-np.array([[0.7], [1.3]]) * T[None, :])
    result = least_squares(one_rate, np.ones((2, 1)), args=(shared(T), y), m=M)
    assert result.success.all()
    np.testing.assert_allclose(result.x[:, 0], [0.7, 1.3], rtol=1e-9)
    for k, target in enumerate(y):
        ref = scipy.optimize.least_squares(lambda p: np.exp(-p[0] * T) - target, [1.0], method="lm")
        np.testing.assert_allclose(result.x[k], ref.x, rtol=1e-7)


def test_a_rejected_levenberg_marquardt_step_below_xtol_ends_with_xtol_not_singular(data):
    """At the cost's rounding floor (float32 with the default tolerances, float64 with tolerances of
    1e-15) no trial reduces the cost and the damping grows until the step is below xtol: that ends with
    XTOL (success) as scipy's check after a rejected trial does, at the last accepted x. It ended with
    SINGULAR, Gauss-Newton's code, once the damping overflowed the Cholesky factorization."""
    true, y, x0 = data
    f32 = least_squares(decay, x0.astype(np.float32), args=(shared(T.astype(np.float32)), y.astype(np.float32)),
                        m=M)
    assert f32.success.all() and SINGULAR not in f32.status
    tight = least_squares(decay, x0, args=(shared(T), y), m=M, ftol=1e-15, xtol=1e-15, gtol=1e-15)
    assert tight.success.all() and XTOL in tight.status
    for k in range(len(y)):
        ref = scipy_fit(x0[k], y[k])
        np.testing.assert_allclose(tight.x[k], ref.x, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(f32.x[k], ref.x, rtol=1e-3, atol=1e-3)
        r = tight.x[k, 0] * np.exp(-tight.x[k, 1] * T) + tight.x[k, 2] - y[k]
        np.testing.assert_allclose(tight.fun[k], r, rtol=1e-12, atol=1e-14)    # the returned x's residuals


@ado.func
def spread(x, y, r):
    for k in range(len(r)):
        r[k] = x[k % len(x)] - y[k]


def test_a_fit_too_large_for_a_thread_gets_advice_for_least_squares():
    """The advice named minimize's layout='warp' and method='lbfgs', which least_squares does not take."""
    with pytest.raises(ado.CompilationError, match=r"need [0-9]+ bytes per thread.*fewer parameters or residuals") \
            as info:
        least_squares(spread, np.zeros((1, 200)), args=(np.zeros((1, 400)),), m=400)
    assert "layout=" not in str(info.value) and "maxcor" not in str(info.value)
    assert "copies of the problem's arrays" not in str(info.value)        # 3200 bytes of them: not the cause


@pytest.mark.parametrize("scale", [1.0, 1e-3, 1e-6, 1e100])
@pytest.mark.parametrize("method", ["lm", "gn"])
def test_the_gradient_test_does_not_depend_on_the_data_scale(scale, method):
    """Decay data in small units (concentrations of 1e-3 mol/L): an absolute gtol of 1e-8 on J^T r met
    at residuals of ~1e-6 stopped these fits with success and parameters still 1e-5 off; scipy's
    method="lm" (an angle test) fits them exactly, at every scale."""
    true = np.array([[1.5 * scale, 1.2, 0.1 * scale], [0.7 * scale, 2.5, -0.2 * scale]])
    y = true[:, :1] * np.exp(-true[:, 1:2] * T) + true[:, 2:]
    x0 = np.array([[1.0 * scale, 0.5, 0.0], [1.0 * scale, 1.0, 0.0]])
    result = least_squares(decay, x0, args=(shared(T), y), m=M, method=method)
    assert result.success.all()
    np.testing.assert_allclose(result.x, true, rtol=1e-7, atol=1e-9 * scale)
    if scale > 1.0:         # |J_j|^2 |r|^2 overflows here (scipy's own lm stops 2% off at this scale)
        return
    for k in range(2):
        np.testing.assert_allclose(result.x[k], scipy_fit(x0[k], y[k]).x, rtol=1e-7, atol=1e-9 * scale)
