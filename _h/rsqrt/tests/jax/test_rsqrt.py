"""jax.grad and jax.hessian through a kernel calling ``ado.rsqrt`` (the JAX rules run the derived
kernels, so the rsqrt rule's first and second derivatives), against jax.numpy's 1/sqrt."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import adoffload as ado


@ado.kernel
def coulomb(q: ado.In[ado.f64], r2: ado.In[ado.f64], e: ado.Out[ado.f64]):
    i = ado.tid()
    e[i] = q[i] * ado.rsqrt(r2[i])


@pytest.fixture(autouse=True)
def on_the_host():
    with jax.default_device(jax.devices("cpu")[0]):
        yield


def _loss(f):
    return lambda q, r2: jnp.sum(f(q, r2) ** 2)


def test_grad_and_hessian_match_jax_numpy():
    f = ado.jax_kernel(coulomb)
    ours, ref = _loss(f), _loss(lambda q, r2: q / jnp.sqrt(r2))
    q, r2 = np.linspace(-1.0, 1.5, 6), np.linspace(0.3, 2.0, 6)
    for a, b in zip(jax.grad(ours, argnums=(0, 1))(q, r2), jax.grad(ref, argnums=(0, 1))(q, r2)):
        np.testing.assert_allclose(a, b, rtol=1e-13)
    np.testing.assert_allclose(jax.hessian(ours, argnums=1)(q, r2), jax.hessian(ref, argnums=1)(q, r2),
                               rtol=1e-12, atol=1e-14)
