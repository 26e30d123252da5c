"""scalar_jvp.py: a kernel call differentiated in a few scalars is one vector-forward call (outputs and
Jacobian columns); jax.grad then needs no adjoint kernel. Checked against the tangent-call strategy
(reverse sweep), a jax.numpy reference and central finite differences, and for when it must not apply."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.extend.core import jaxprs_in_params

import adoffload as ado
from adoffload.errors import JaxIntegrationError
from adoffload.jax import scalar_jvp


@ado.kernel
def smeared(a: ado.f64, b: ado.f64, x: ado.In[ado.f64], y: ado.InOut[ado.f64], out: ado.Out[ado.f64]):
    i = ado.tid()
    acc = 0.0
    for k in range(x.shape[0]):
        if k != i:
            d = x[k] - x[i]
            acc = acc + b * ado.exp(-a * d * d)
    out[i] = acc
    y[i] = y[i] * a + b * x[i] * x[i]


def smeared_ref(a, b, x, y):
    d = x[None, :] - x[:, None]
    terms = b * jnp.exp(-a * d * d)
    return y * a + b * x * x, jnp.sum(terms, axis=1) - jnp.diagonal(terms)


X = np.linspace(-1.0, 1.3, 7)
Y = np.cos(X)
WEIGHTS = np.arange(1.0, 8.0)


def _loss(f):
    def loss(a, b, x):
        y, out = f(a, b, x, Y)
        return jnp.sum(WEIGHTS * out ** 2) + jnp.sum(jnp.sin(y))
    return loss


def _calls(fn, *args):
    jaxpr = jax.make_jaxpr(fn)(*args)
    found = []

    def walk(jaxpr):
        for e in jaxpr.eqns:
            if e.primitive.name == "adoffload_kernel_call":
                found.append(e.params["spec"])
            for sub in jaxprs_in_params(e.params):
                walk(sub)
    walk(jaxpr.jaxpr)
    return found


@pytest.mark.parametrize("strategy", ["columns", "tangent"])
def test_scalar_gradients_match_reference_and_finite_differences(strategy, monkeypatch):
    monkeypatch.setenv(scalar_jvp.STRATEGY_VARIABLE, strategy)
    ours = jax.jit(jax.grad(_loss(ado.jax_kernel(smeared)), argnums=(0, 1)))(0.7, 1.3, X)
    ref = jax.grad(_loss(smeared_ref), argnums=(0, 1))(0.7, 1.3, X)
    np.testing.assert_allclose(ours, ref, rtol=1e-12)
    loss, h = _loss(smeared_ref), 1e-6
    fd = [(loss(0.7 + h, 1.3, X) - loss(0.7 - h, 1.3, X)) / (2 * h),
          (loss(0.7, 1.3 + h, X) - loss(0.7, 1.3 - h, X)) / (2 * h)]
    np.testing.assert_allclose(ours, fd, rtol=1e-7)


def test_columns_strategy_binds_one_forward_call_and_no_adjoint():
    f = ado.jax_kernel(smeared)
    calls = _calls(jax.grad(_loss(f), argnums=(0, 1)), 0.7, 1.3, X)
    assert [c.kernel.name for c in calls] == ["smeared_jvp2"]
    assert calls[0].out_shapes == ((7,), (2, 7))      # out and its two columns (y's are InOut operands)


def test_jvp_by_columns_matches_the_tangent_call():
    f = ado.jax_kernel(smeared)
    primals, tangents = (0.7, 1.3, X, Y), (0.25, -2.0, np.zeros_like(X), np.zeros_like(Y))
    by_columns = jax.jvp(f, primals, tangents)
    with pytest.MonkeyPatch.context() as m:
        m.setenv(scalar_jvp.STRATEGY_VARIABLE, "tangent")
        by_tangent_call = jax.jvp(f, primals, tangents)
    jax.tree.map(lambda p, q: np.testing.assert_allclose(p, q, rtol=1e-13, atol=1e-15), by_columns, by_tangent_call)


def test_an_array_differentiated_too_keeps_the_tangent_call_and_its_adjoint():
    f = ado.jax_kernel(smeared)
    calls = _calls(jax.grad(_loss(f), argnums=(0, 2)), 0.7, 1.3, X)
    names = [c.kernel.name for c in calls]
    assert "smeared_vjp" in names and "smeared_jvp2" not in names
    ours = jax.grad(_loss(f), argnums=(0, 2))(0.7, 1.3, X)
    ref = jax.grad(_loss(smeared_ref), argnums=(0, 2))(0.7, 1.3, X)
    jax.tree.map(lambda p, q: np.testing.assert_allclose(p, q, rtol=1e-11), ours, ref)


def test_more_scalars_than_max_width_keep_the_tangent_call(monkeypatch):
    monkeypatch.setattr(scalar_jvp, "MAX_WIDTH", 1)
    calls = _calls(jax.grad(_loss(ado.jax_kernel(smeared)), argnums=(0, 1)), 0.7, 1.3, X)
    assert "smeared_vjp" in [c.kernel.name for c in calls]


def test_vmap_of_the_scalar_gradient_matches_a_loop():
    grad = jax.grad(_loss(ado.jax_kernel(smeared)), argnums=(0, 1))
    a = np.array([0.5, 0.9, 1.4])
    batched = jax.vmap(grad, in_axes=(0, None, None))(a, 1.3, X)
    for k, ak in enumerate(a):
        np.testing.assert_allclose([batched[0][k], batched[1][k]], grad(ak, 1.3, X), rtol=1e-13)


def test_an_unknown_strategy_is_refused(monkeypatch):
    monkeypatch.setenv(scalar_jvp.STRATEGY_VARIABLE, "sideways")
    with pytest.raises(JaxIntegrationError, match="ADOFFLOAD_SCALAR_JVP='sideways'.*columns, tangent"):
        jax.grad(_loss(ado.jax_kernel(smeared)))(0.7, 1.3, X)
