"""JAX transformations composed over kernel calls as a demanding user would, plain jax.numpy the oracle.

Nested and mixed vmap/grad/jacfwd/jacrev/hessian, jvp of vjp, linearize + linear_transpose,
checkpoint policies, control flow, custom_vjp/custom_jvp, integer inputs (float0 cotangents),
odd layouts, zero sizes, donation, AOT compilation; and what is refused (jax.export).
Multi-device runs are in test_transform_probe_devices.py.
"""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import adoffload as ado
from adoffload.errors import JaxIntegrationError

from probe_kernels import (accumulate, accumulate_ref, blend, blend32, blend32_ref, blend_ref, count_pos,
                           count_pos_ref, gather_scale, gather_scale_ref, grid2, grid2_ref, grid3, grid3_ref,
                           index_mix, index_mix_ref, matvec, matvec_ref, ragged_power, ragged_power_ref,
                           reverse_add, reverse_add_ref, scatter_add, scatter_add_ref, total, total_ref)

RNG = np.random.default_rng(0)
X, Y = RNG.standard_normal(6), RNG.standard_normal(6)
XB = RNG.standard_normal((3, 6))
IDX = np.array([2, 0, 5, 5, 1, 3], np.int32)
M = 7                                        # scatter_add's output length
COUNTS = np.array([0, 1, 3, 2, 5, 1], np.int32)

f = ado.jax_kernel(blend)
gather = ado.jax_kernel(gather_scale)
scatter = ado.jax_kernel(scatter_add, out_shapes=lambda x, idx: {"acc": (M,)}, grid=lambda x, idx: x.shape)
tot = ado.jax_kernel(total, out_shapes={"e": (1,)}, grid=lambda x, y: x.shape)
mv = ado.jax_kernel(matvec)
k2 = ado.jax_kernel(grid2)
k3 = ado.jax_kernel(grid3)
acc = ado.jax_kernel(accumulate)
f32 = ado.jax_kernel(blend32)
ragged = ado.jax_kernel(ragged_power)
scatter_ref = lambda x, idx: scatter_add_ref(x, idx, M)


def close(got, ref, tol=1e-10):
    """Same tree, shapes and dtypes (float0 included), values to ``tol``."""
    got, ref = jax.tree.leaves(got), jax.tree.leaves(ref)
    assert len(got) == len(ref)
    for p, q in zip(got, ref):
        p, q = np.asarray(p), np.asarray(q)
        assert p.shape == q.shape and p.dtype == q.dtype, (p.shape, p.dtype, q.shape, q.dtype)
        if p.dtype != jax.dtypes.float0:
            np.testing.assert_allclose(p, q, rtol=tol, atol=tol)


# ----------------------------------------------------------------------------- refusals and fixes

def test_jax_export_is_refused_naming_the_kernel():
    """An exported module would name this process's target (adoffload_blend_<n>), which another
    process does not have, or has for another kernel. JAX's own check can be disabled per target:
    the refusal stands then too, for the primal and for a derivative."""
    from jax import export
    fn = jax.jit(lambda a, x, y: f(a, x, y))
    with pytest.raises(JaxIntegrationError, match="kernel 'blend'.*jax.export"):
        export.export(fn)(0.3, X, Y)
    lowered = fn.lower(0.3, X, Y).as_text()
    names = sorted(set(word.split("(")[0] for word in lowered.split("@")[1:] if word.startswith("adoffload_")))
    assert names
    grad = jax.jit(jax.grad(lambda x: jnp.sum(f(0.3, x, Y)[0])))
    names += sorted(set(word.split("(")[0] for word in grad.lower(X).as_text().split("@")[1:]
                        if word.startswith("adoffload_")))
    unchecked = [export.DisabledSafetyCheck.custom_call(name) for name in names]
    with pytest.raises(JaxIntegrationError, match="kernel 'blend'.*jax.export"):
        export.export(fn, disabled_checks=unchecked)(0.3, X, Y)
    with pytest.raises(JaxIntegrationError, match="kernel 'blend_vjp'.*jax.export"):
        export.export(grad, disabled_checks=unchecked)(X)
    # AOT compilation in the process stays supported
    compiled = jax.jit(jax.grad(lambda a, x: jnp.sum(f(a, x, Y)[0]), argnums=(0, 1))).lower(0.3, X).compile()
    close(compiled(0.7, Y), jax.grad(lambda a, x: jnp.sum(blend_ref(a, x, Y)[0]), argnums=(0, 1))(0.7, Y))


def test_calls_under_disable_jit():
    """Eager calls ran their jitted custom call; under jax.disable_jit() that jit ran its body
    eagerly, which bound the primitive again: a RecursionError."""
    with jax.disable_jit():
        close(f(0.3, X, Y), blend_ref(0.3, X, Y))
        loss = lambda F: lambda x: jnp.sum(F(0.3, x, Y)[0] ** 2)
        close(jax.grad(loss(f))(X), jax.grad(loss(blend_ref))(X))
        close(jax.vmap(f, in_axes=(None, 0, None))(0.3, XB, Y), jax.vmap(blend_ref, in_axes=(None, 0, None))(0.3, XB, Y))


def test_make_jaxpr_and_eval_shape_do_not_run_the_kernel():
    """An out-of-bounds gather raises when it runs; tracing it must not."""
    bad = np.array([0, 1, 99, 2, 3, 4], np.int32)
    assert jax.eval_shape(gather, 1.0, X, bad).shape == (6,)
    jaxpr = jax.make_jaxpr(jax.grad(lambda x: jnp.sum(gather(1.0, x, bad))))(X)
    assert any(e.primitive.name == "adoffload_kernel_call" for e in jaxpr.jaxpr.eqns)
    with pytest.raises(Exception, match="out of bounds"):
        jax.block_until_ready(gather(1.0, X, bad))
