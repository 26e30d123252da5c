"""Derivatives of kernel calls against jax.numpy references: check_grads, jvp/vjp/linearize, jac*, hessian."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.test_util import check_grads

import adoffload as ado

from kernels import (energy, energy_ref, gate, gate_ref, rowscale, rowscale_ref, saxpy, saxpy_ref, scale_inplace,
                     scale_inplace_ref, tally, tally_ref, wave, wave_ref)


def _args(name):
    x = np.linspace(0.2, 1.3, 5)
    y = np.cos(x) + 0.5
    return {
        "saxpy": (0.7, x, y),
        "wave": (0.3, x, y),
        "scale_inplace": (1.7, x, y),
        "rowscale": (np.arange(12.0).reshape(3, 4) / 5, np.array([1.0, -0.5, 0.25, 2.0])),
        "energy": (x,),
        "gate": (x, np.sin(7 * x)),
        "tally": (x, np.array([0.5])),
    }[name]


CASES = {
    "saxpy": (saxpy, saxpy_ref, {}),
    "wave": (wave, wave_ref, {}),
    "scale_inplace": (scale_inplace, scale_inplace_ref, {}),
    "rowscale": (rowscale, rowscale_ref, {}),
    "energy": (energy, energy_ref, {"out_shapes": {"e": (1,)}, "grid": lambda x: x.shape}),
    # InOut arrays whose adjoint never writes the seed (lean.py makes it In): the input's gradient is
    # the seed (the JAX transpose gave zero; found by the block fuzzer)
    "gate": (gate, gate_ref, {}),
    "tally": (tally, tally_ref, {"grid": lambda x, total: x.shape}),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_values_match_reference(name):
    kernel, ref, options = CASES[name]
    got = jax.jit(ado.jax_kernel(kernel, **options))(*_args(name))
    jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-12), got, ref(*_args(name)))


@pytest.mark.parametrize("name", sorted(CASES))
def test_check_grads_order_one(name):
    kernel, _, options = CASES[name]
    check_grads(ado.jax_kernel(kernel, **options), _args(name), order=1, modes=["fwd", "rev"])


@pytest.mark.parametrize("name", ["wave", "rowscale", "scale_inplace"])
def test_check_grads_order_two_arrays(name):
    kernel, _, options = CASES[name]
    args = _args(name)
    arrays = [k for k, a in enumerate(args) if np.ndim(a) > 0]

    def f(*array_args):
        full = list(args)
        for k, a in zip(arrays, array_args):
            full[k] = a
        return ado.jax_kernel(kernel, **options)(*full)
    check_grads(f, [args[k] for k in arrays], order=2, modes=["fwd", "rev"])


@pytest.mark.parametrize("name", ["wave", "saxpy"])
def test_check_grads_order_two_with_scalar(name):
    kernel, _, options = CASES[name]
    f = ado.jax_kernel(kernel, **options)
    check_grads(f, _args(name), order=2, modes=["fwd", "rev"])


def _loss(f):
    return lambda a, x, y: jnp.sum(f(a, x, y)[0] * jnp.arange(1.0, 6.0)) + jnp.sum(f(a, x, y)[1] ** 2)


@pytest.mark.parametrize("transform", ["grad", "jacfwd", "jacrev", "hessian_x", "fwd_over_rev_x"])
def test_transformations_match_reference(transform):
    f, ref = _loss(ado.jax_kernel(wave)), _loss(wave_ref)
    t = {
        "grad": lambda g: jax.grad(g, argnums=(0, 1, 2)),
        "jacfwd": lambda g: jax.jacfwd(g, argnums=(0, 1, 2)),
        "jacrev": lambda g: jax.jacrev(g, argnums=(0, 1, 2)),
        "hessian_x": lambda g: jax.hessian(g, argnums=1),
        "fwd_over_rev_x": lambda g: lambda a, x, y: jax.jvp(lambda x: jax.grad(g, argnums=1)(a, x, y),
                                                            (x,), (jnp.ones_like(x),)),
    }[transform]
    args = _args("wave")
    jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12),
                 jax.jit(t(f))(*args), t(ref)(*args))


def test_jvp_vjp_linearize_agree():
    f = ado.jax_kernel(wave)
    a, x, y = _args("wave")
    tangents = (0.5, np.ones_like(x), np.linspace(-1, 1, 5))
    primal, jvp_out = jax.jvp(f, (a, x, y), tangents)
    _, linear = jax.linearize(f, a, x, y)
    jax.tree.map(np.testing.assert_allclose, linear(*tangents), jvp_out)
    _, pullback = jax.vjp(f, a, x, y)
    cotangent = (np.arange(5.0), np.ones(5))
    lhs = sum(np.vdot(c, t) for c, t in zip(cotangent, jvp_out))
    rhs = sum(np.vdot(p, t) for p, t in zip(pullback(cotangent), tangents))
    np.testing.assert_allclose(lhs, rhs, rtol=1e-12)


def test_symbolic_zero_tangents_derive_only_what_is_needed():
    f = ado.jax_kernel(saxpy)
    a, x, y = _args("saxpy")
    jaxpr = jax.make_jaxpr(lambda x: jax.jvp(lambda x: f(a, x, y), (x,), (jnp.ones_like(x),)))(x)
    calls = [e for e in jaxpr.eqns if e.primitive.name == "adoffload_kernel_call"]
    tangent_calls = [e for e in calls if e.params["spec"].tangent_of is not None]
    assert len(tangent_calls) == 1
    assert tangent_calls[0].params["spec"].tangent_of[1] == ("x",)
    assert jax.grad(lambda y: f(a, x, y).sum())(y).tolist() == [1.0] * 5


def test_no_tangent_means_no_derivative_kernel():
    f = ado.jax_kernel(saxpy)
    a, x, y = _args("saxpy")
    jaxpr = jax.make_jaxpr(lambda z: jax.jvp(lambda z: (f(a, x, y), z), (z,), (jnp.ones_like(z),)))(y)
    names = [e.params["spec"].kernel.name for e in jaxpr.eqns if e.primitive.name == "adoffload_kernel_call"]
    assert names == ["saxpy"]


@pytest.mark.parametrize("strategy", ["columns", "tangent"])
def test_a_scalar_tangent_gives_one_forward_call_by_columns(strategy, monkeypatch):
    """Differentiated in scalars only, the columns strategy (scalar_jvp.py) binds one jvp call that
    also gives the outputs; the tangent strategy binds the primal and a tangent call."""
    monkeypatch.setenv("ADOFFLOAD_SCALAR_JVP", strategy)
    f = ado.jax_kernel(saxpy)
    a, x, y = _args("saxpy")
    jaxpr = jax.make_jaxpr(lambda y: jax.jvp(lambda a: f(a, x, y), (a,), (0.5,)))(y)
    calls = [e.params["spec"] for e in jaxpr.eqns if e.primitive.name == "adoffload_kernel_call"]
    if strategy == "columns":
        assert [c.kernel.name for c in calls] == ["saxpy_jvp"] and calls[0].tangent_of is None
    else:
        assert [c.kernel.name for c in calls] == ["saxpy", "saxpy_jvp"] and calls[1].tangent_of[1] == ("a",)
    primal, tangent = jax.jvp(lambda a: f(a, x, y), (a,), (0.5,))
    np.testing.assert_allclose(tangent, 0.5 * x, rtol=1e-14)
    np.testing.assert_allclose(primal, a * x + y, rtol=1e-14)


@pytest.mark.parametrize("strategy", ["columns", "tangent"])
def test_hessian_through_scalar_with_atomic_adjoint(strategy, monkeypatch):
    # With strategy "tangent" (scalar_jvp.py): the adjoint of an active scalar is accumulated with @adoffload.uniform_fadd; differentiating
    # that adjoint kernel again uses the engine's linear rule for it (forward and reverse).
    # With "columns": forward over forward of the kernel, no adjoint kernel.
    monkeypatch.setenv("ADOFFLOAD_SCALAR_JVP", strategy)
    h = jax.hessian(lambda a: ado.jax_kernel(saxpy)(a, *_args("saxpy")[1:]).sum() ** 2)(0.7)
    x = _args("saxpy")[1]
    np.testing.assert_allclose(h, 2 * np.sum(x) ** 2)
