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


def test_a_jax_argument_with_a_numpy_start_is_refused():
    with pytest.raises(ado.ArgumentError, match="JAX array but x0 is not"):
        minimize(shifted_bowl, np.zeros((2, 3)), args=(0.25, jnp.ones(2)))
