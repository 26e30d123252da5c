"""adoffload.optimize on an NVIDIA GPU: the same answers as the host, one launch per batch (marked gpu)."""
import numpy as np
import pytest

from adoffload.optimize import api, least_squares, minimize, shared
from tests.optimize.problems import M, T, decay, decay_data, quadratic, random_quadratics, rosen

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("method", ["lbfgs", "bfgs", "fire"])
def test_rosenbrock_on_cuda_matches_the_host(method, cuda):
    x0 = np.random.default_rng(0).uniform(-1.5, 1.5, (4096, 4))
    options = {"maxiter": 20000} if method == "fire" else None
    gpu = minimize(rosen, x0, method=method, device="cuda", options=options)
    host = minimize(rosen, x0[:256], method=method, options=options)
    assert gpu.success.all() and host.success.all()     # the device's math rounds otherwise: iterates may differ
    np.testing.assert_allclose(gpu.x[:256], host.x, atol=2e-5)


def test_random_quadratics_on_cuda(cuda):
    rng = np.random.default_rng(2)
    a, b = random_quadratics(rng, 2048, 6)
    result = minimize(quadratic, rng.normal(size=(2048, 6)), args=(a, b), device="cuda",
                      options={"gtol": 1e-9, "ftol": 1e-14})
    assert result.success.all()
    np.testing.assert_allclose(result.x, np.linalg.solve(a, b[..., None])[..., 0], atol=1e-7)


@pytest.mark.parametrize("method", ["lm", "gn"])
def test_decay_fits_on_cuda_match_the_host(method, cuda):
    true, y = decay_data(np.random.default_rng(1), 20000)
    x0 = np.tile([1.0, 1.0, 0.0], (20000, 1))
    gpu = least_squares(decay, x0, args=(shared(T), y), m=M, method=method, device="cuda")
    host = least_squares(decay, x0[:200], args=(shared(T), y[:200]), m=M, method=method)
    both = gpu.success[:200] & host.success
    assert both.mean() > 0.95 and gpu.success.mean() > 0.95
    np.testing.assert_allclose(gpu.x[:200][both], host.x[both], rtol=1e-5, atol=1e-7)
    # residuals and gradients stayed on the device until read here (result.Deferred)
    np.testing.assert_allclose(gpu.fun[:200][both], host.fun[both], rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(gpu.optimality[:200][both], host.optimality[both], atol=1e-7)


def test_residuals_and_gradients_stay_on_the_device_until_read(cuda):
    true, y = decay_data(np.random.default_rng(3), 5000)
    result = least_squares(decay, np.tile([1.0, 1.0, 0.0], (5000, 1)), args=(shared(T), y), m=M, device="cuda")
    assert isinstance(dict.__getitem__(result, "fun"), api.Deferred)
    assert isinstance(dict.__getitem__(result, "grad"), api.Deferred)
    model = result.x[:, :1] * np.exp(-result.x[:, 1:2] * T) + result.x[:, 2:]
    np.testing.assert_allclose(result.fun, model - y, atol=1e-10)
    assert isinstance(result.fun, np.ndarray) and result.fun.shape == (5000, M)


def test_jax_on_cuda(cuda):
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    try:
        device = jax.devices("gpu")[0]
    except RuntimeError:
        pytest.skip("JAX has no CUDA backend here")
    import jax.numpy as jnp
    x0 = np.random.default_rng(3).uniform(-1.5, 1.5, (1024, 4))
    with jax.default_device(device):
        result = jax.jit(lambda x: minimize(rosen, x).x)(jnp.asarray(x0))
    np.testing.assert_allclose(np.asarray(result), minimize(rosen, x0).x, atol=1e-6)


def test_decay_fits_on_cuda_are_the_same_through_the_staging_buffers(cuda, monkeypatch):
    """y and the residuals (60,000 x 30 float64, 14.4 MB each) go through runtime/staging.py's
    page-locked buffers; with staging off (the driver's pageable copies) every output is the same."""
    assert cuda.staging() is not None and 60000 * M * 8 >= cuda.STAGING_MIN_BYTES
    true, y = decay_data(np.random.default_rng(3), 60000)
    x0 = np.tile([1.0, 1.0, 0.0], (60000, 1))
    staged = least_squares(decay, x0, args=(shared(T), y), m=M, device="cuda")
    monkeypatch.setattr(cuda, "STAGING_MIN_BYTES", float("inf"))
    plain = least_squares(decay, x0, args=(shared(T), y), m=M, device="cuda")
    monkeypatch.setattr(api, "_output", lambda shape, dtype: np.full(shape, 7, dtype))    # not zeroed by the API
    dirty = least_squares(decay, x0, args=(shared(T), y), m=M, device="cuda")
    assert staged.success.mean() > 0.95
    for key in ("x", "cost", "fun", "grad", "optimality", "status", "nit", "nfev", "njev"):
        assert np.array_equal(staged[key], plain[key]) and np.array_equal(staged[key], dirty[key]), key
