"""adoffload.optimize from JAX: jit, vmap, and a clear refusal of derivatives."""
import numpy as np
import pytest

jax = pytest.importorskip("jax")
import jax.numpy as jnp  # noqa: E402

import adoffload as ado  # noqa: E402
from adoffload.optimize import least_squares, minimize, shared  # noqa: E402
from tests.optimize.problems import M, T, decay, decay_data, shifted_bowl  # noqa: E402

jax.config.update("jax_enable_x64", True)


def same_answers(got, reference):
    """Bit for bit where JAX runs on the host as the numpy call does; on a GPU (JAX's default device
    there) libdevice's exp and log may differ from the host's in the last place."""
    if jax.default_backend() == "cpu":
        np.testing.assert_array_equal(got, reference)
    else:
        np.testing.assert_allclose(got, reference, rtol=1e-12, atol=1e-14)


def test_jit_and_vmap_give_numpys_answers():
    rng = np.random.default_rng(0)
    x0, w = rng.normal(size=(2, 5, 3)), rng.uniform(0.5, 2.0, (2, 5))
    reference = minimize(shifted_bowl, x0[0], args=(0.25, w[0]))
    jitted = jax.jit(lambda x, w: minimize(shifted_bowl, x, args=(0.25, w)).x)(jnp.asarray(x0[0]), jnp.asarray(w[0]))
    same_answers(np.asarray(jitted), reference.x)
    batched = jax.vmap(lambda x, w: minimize(shifted_bowl, x, args=(0.25, w)).x)(jnp.asarray(x0), jnp.asarray(w))
    assert batched.shape == (2, 5, 3)
    same_answers(np.asarray(batched[0]), reference.x)
    np.testing.assert_allclose(np.asarray(batched), 0.25, atol=1e-6)


def test_least_squares_under_jit():
    true, y = decay_data(np.random.default_rng(1), 4)
    x0 = np.tile([1.0, 1.0, 0.0], (4, 1))
    reference = least_squares(decay, x0, args=(shared(T), y), m=M)
    result = jax.jit(lambda x, y: least_squares(decay, x, args=(shared(jnp.asarray(T)), y), m=M))(
        jnp.asarray(x0), jnp.asarray(y))
    same_answers(np.asarray(result.x), reference.x)
    np.testing.assert_array_equal(np.asarray(result.success), reference.success)


def test_derivatives_are_refused():
    x0 = jnp.zeros((2, 3))
    with pytest.raises(ado.JaxIntegrationError, match="not differentiable"):
        jax.grad(lambda x: minimize(shifted_bowl, x, args=(0.25, jnp.ones(2))).fun.sum())(x0)


def test_the_refusals_advice_works():
    """The refusal said 'wrap the call in jax.lax.stop_gradient', which (around the results) raises the
    same error: the gradient must be stopped on the inputs, and then the rest of the function differentiates."""
    x0, w = jnp.zeros((2, 3)), jnp.ones(2)
    with pytest.raises(ado.JaxIntegrationError, match="stop the gradient of the call's inputs"):
        jax.grad(lambda x: jax.lax.stop_gradient(minimize(shifted_bowl, x, args=(0.25, w)).fun).sum())(x0)
    grad = jax.grad(lambda x: minimize(shifted_bowl, jax.lax.stop_gradient(x), args=(0.25, w)).fun.sum()
                    + (x * x).sum())(x0 + 1.0)
    np.testing.assert_array_equal(np.asarray(grad), 2.0)


def test_a_traced_scalar_argument_is_refused_with_advice_that_works_under_jit():
    x0 = jnp.zeros((2, 3))
    with pytest.raises(ado.ArgumentError, match=r"0-d array.*traced value under jax.jit: pass jnp.full"):
        jax.jit(lambda x, c: minimize(shifted_bowl, x, args=(c, jnp.ones(2))).x)(x0, 0.25)
    x = jax.jit(lambda x, c: minimize(shifted_bowl, x, args=(jnp.full((2,), c), jnp.ones(2))).x)(x0, 0.25)
    np.testing.assert_allclose(np.asarray(x), 0.25, atol=1e-6)


def test_a_traced_result_prints():
    """Printing the result inside jax.jit (its status a tracer) raised TracerArrayConversionError."""
    texts = []

    def solve(x):
        result = minimize(shifted_bowl, x, args=(0.25, jnp.ones(2)))
        texts.append(repr(result))
        return result.x

    jax.jit(solve)(jnp.zeros((2, 3)))
    assert texts[0].startswith("OptimizeResult(2 problems, traced; keys x, fun")
    assert "2 converged" in repr(minimize(shifted_bowl, jnp.zeros((2, 3)), args=(0.25, jnp.ones(2))))


def test_a_jax_argument_with_a_numpy_start_is_refused():
    with pytest.raises(ado.ArgumentError, match="JAX array but x0 is not"):
        minimize(shifted_bowl, np.zeros((2, 3)), args=(0.25, jnp.ones(2)))


WITHOUT_X64 = """
import jax, jax.numpy as jnp, numpy as np
jax.config.update("jax_enable_x64", False)
from adoffload.optimize import least_squares, minimize, shared
from tests.optimize.problems import M, T, decay, rosen, shifted_bowl
x0 = jnp.asarray(np.random.default_rng(0).uniform(-1, 1, (4, 3)), jnp.float32)
for method, layout in (("lbfgs", "thread"), ("bfgs", "warp"), ("fire", "thread")):
    r = jax.jit(lambda x: minimize(shifted_bowl, x, args=(0.5, jnp.ones(4)), method=method, layout=layout,
                                   tol=1e-4, maxiter=5000))(x0)
    assert r.x.dtype == jnp.float32 and r.status.dtype == jnp.int32, (r.x.dtype, r.status.dtype)
    assert bool(r.success.all()) and np.abs(np.asarray(r.x) - 0.5).max() < 1e-3, (method, r.status)
fit = jax.jit(lambda x, y: least_squares(decay, x, args=(shared(jnp.asarray(T, jnp.float32)), y), m=M))(
    jnp.tile(jnp.asarray([1.0, 1.0, 0.0], jnp.float32), (2, 1)),
    jnp.asarray(1.5 * np.exp(-0.7 * T) + 0.2, jnp.float32)[None].repeat(2, 0))
assert fit.njev.dtype == jnp.int32 and bool(fit.success.all())
assert np.abs(np.asarray(fit.x) - [1.5, 0.7, 0.2]).max() < 1e-3, fit.x
print("ok")
"""


def test_float32_problems_run_without_jax_x64():
    """docs/optimize.md: float64 problems need JAX's x64; float32 ones were refused without it too
    (the kernels' maxiter and status outputs were int64, which JAX then has not)."""
    import subprocess
    import sys
    from pathlib import Path
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run([sys.executable, "-c", WITHOUT_X64], cwd=root, capture_output=True, text=True,
                          timeout=600, env={**__import__("os").environ, "PYTHONPATH": str(root)})
    assert done.returncode == 0 and done.stdout.strip().endswith("ok"), done.stderr[-3000:]
