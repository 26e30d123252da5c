"""The tangent calls of the JVP rule bind a lazy forward kernel (kernels/kernel.py ``lazy_jvp``): its
signature without the AD, its body derived on first use, which ``jax.grad`` (that transposes the call
away) never makes. The kernels and numbers are those of the eager derivation, and a forward mode that
cannot be derived still raises its DifferentiationError, when the tangent call is run."""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import adoffload as ado
from adoffload import In, InOut, Out, f64
from adoffload.errors import DifferentiationError
from adoffload.kernels.kernel import DerivedKernel, lazy_jvp


@ado.kernel
def pair(x: In[f64], w: In[f64], y: Out[f64], total: InOut[f64]):
    i = ado.tid()
    v = ado.exp(-w[0] * x[i] * x[i]) * x[i]
    y[i] = v
    ado.atomic_add(total, 0, v * w[1])


def _polar_vjp(a, b, dr, dphi):
    return dr, dphi


@ado.func(vjp=_polar_vjp)
def _polar(a, b):
    return ado.sqrt(a * a + b * b), ado.atan2(b, a)


@ado.kernel
def reverse_only(x: In[f64], r: Out[f64], phi: Out[f64]):
    i = ado.tid()
    r[i], phi[i] = _polar(x[i], 1.0)


def _loss(call):
    return lambda x, w: jnp.sum(call(x, w, jnp.zeros(1))[0] ** 2) + jnp.sum(call(x, w, jnp.zeros(1))[1])


@pytest.mark.parametrize("wrt", [("x",), ("w",), ("x", "w")])
def test_the_lazy_signature_is_the_derived_one(wrt):
    for base in (pair, ado.vjp(pair, ["x"], primal_outputs=False)):
        lazy = DerivedKernel(base, "jvp", wrt, primal_outputs=False, lazy=True)
        eager = DerivedKernel(base, "jvp", wrt, primal_outputs=False)
        assert not lazy.body_derived and eager.body_derived
        assert (lazy.signature, lazy.body_name, lazy.tape) == (eager.signature, eager.body_name, eager.tape)
        assert lazy.module_text() == eager.module_text()
        assert lazy.body_derived


def test_jax_grad_binds_the_tangent_call_without_deriving_it():
    call = ado.jax_kernel(pair, grid=16)
    x, w = jnp.linspace(-1.0, 1.0, 16), jnp.asarray([0.7, 1.3])
    expected = jax.grad(_loss(lambda x, w, t: _plain(x, w, t)), argnums=(0, 1))(x, w)
    got = jax.grad(_loss(call), argnums=(0, 1))(x, w)
    for g, e in zip(got, expected):
        np.testing.assert_allclose(g, e, rtol=1e-12)
    forward = lazy_jvp(pair, ["x", "w"], primal_outputs=False)
    assert isinstance(forward, DerivedKernel) and not forward.body_derived     # bound, transposed away, never run
    # jax.jvp runs the tangent call: the body is derived then, and agrees with plain JAX
    tangents = (jnp.ones(16), jnp.asarray([0.1, -0.2]))
    _, t = jax.jvp(lambda x, w: call(x, w, jnp.zeros(1)), (x, w), tangents)
    _, te = jax.jvp(lambda x, w: _plain(x, w, jnp.zeros(1)), (x, w), tangents)
    for a, b in zip(t, te):
        np.testing.assert_allclose(a, b, rtol=1e-12)
    assert forward.body_derived
    assert ado.jvp(pair, ["x", "w"], primal_outputs=False) is forward


def _plain(x, w, total):
    v = jnp.exp(-w[0] * x * x) * x
    return v, total + jnp.sum(v * w[1])[None]


def test_a_forward_mode_that_cannot_be_derived_raises_when_its_tangent_call_runs():
    call = ado.jax_kernel(reverse_only)
    x = jnp.linspace(0.5, 1.5, 8)
    with pytest.raises(DifferentiationError) as eager:
        ado.jvp(reverse_only, ["x"], primal_outputs=False)
    # jax.grad transposes the tangent call away: only the adjoint is derived, and it can be
    np.testing.assert_allclose(jax.grad(lambda x: call(x)[0].sum())(x), np.ones(8))
    with pytest.raises(DifferentiationError) as lazy:
        jax.jvp(lambda x: call(x)[0], (x,), (jnp.ones(8),))
    assert str(lazy.value) == str(eager.value)
    assert "helper @_polar returns a tuple and has only a custom vjp" in str(lazy.value)
    with pytest.raises(DifferentiationError, match="only a custom vjp"):     # and again, not cached
        jax.jit(lambda x: jax.jvp(lambda x: call(x)[0], (x,), (2 * jnp.ones(8),))[1])(x)
    with pytest.raises(DifferentiationError, match="only a custom vjp"):     # an eager jvp of the lazy kernel
        ado.jvp(reverse_only, ["x"], primal_outputs=False)
