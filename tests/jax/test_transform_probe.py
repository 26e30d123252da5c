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



def test_jet_is_refused_naming_the_kernel():
    """jax.experimental.jet found no rule for the primitive: a bare KeyError."""
    from jax.experimental import jet
    with pytest.raises(JaxIntegrationError, match="kernel 'blend'.*jet"):
        jet.jet(lambda x: f(0.3, x, Y)[0], (X,), ((Y, Y),))
    # what the message offers instead: nested jvp, here the second-order term of x + t Y
    second = jax.jvp(lambda x: jax.jvp(lambda x: f(0.3, x, Y)[0], (x,), (Y,))[1], (X,), (Y,))[1]
    ref = jax.jvp(lambda x: jax.jvp(lambda x: blend_ref(0.3, x, Y)[0], (x,), (Y,))[1], (X,), (Y,))[1]
    close(second, ref)

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


# ----------------------------------------------------------------------------- vmap placements

def test_vmap_axes_at_different_positions_and_nested():
    YT = RNG.standard_normal((6, 3))
    close(jax.vmap(f, in_axes=(None, 0, 1), out_axes=(1, 0))(0.3, XB, YT),
          jax.vmap(blend_ref, in_axes=(None, 0, 1), out_axes=(1, 0))(0.3, XB, YT))
    A = jnp.array([0.1, 0.5, 0.9])
    close(jax.vmap(f, in_axes=(0, None, 1))(A, X, YT), jax.vmap(blend_ref, in_axes=(0, None, 1))(A, X, YT))
    X3 = RNG.standard_normal((2, 6, 3))
    nest = lambda F: jax.vmap(jax.vmap(F, in_axes=(None, 1, None)), in_axes=(None, 0, None), out_axes=1)
    close(nest(f)(0.4, X3, Y), nest(blend_ref)(0.4, X3, Y))
    four = lambda F: jax.vmap(jax.vmap(jax.vmap(jax.vmap(F))))
    X4, A4 = RNG.standard_normal((2, 2, 2, 2, 5)), RNG.standard_normal((2, 2, 2, 2))
    close(four(f)(A4, X4, X4[::-1]), four(blend_ref)(A4, X4, X4[::-1]))


def test_vmap_folds_of_rank_three_grids_keep_thread_ids():
    """A 2-D kernel under three vmaps is rank 3, then folded; the thread ids' values show any mix-up."""
    im = ado.jax_kernel(index_mix)
    X5, C3 = RNG.standard_normal((2, 2, 3, 4, 5)), RNG.standard_normal((2, 2, 3))
    v3 = lambda F: jax.vmap(jax.vmap(jax.vmap(F)))
    loss = lambda F: jax.grad(lambda x, c: jnp.sum(F(x, c) ** 2), argnums=(0, 1))
    close(v3(im)(X5, C3), v3(index_mix_ref)(X5, C3))
    close(v3(loss(im))(X5, C3), v3(loss(index_mix_ref))(X5, C3))
    X4, C = RNG.standard_normal((3, 2, 3, 4)) * 0.3, jnp.array([0.1, 0.2, -0.3])
    close(jax.vmap(k3, in_axes=(2, 0))(X4.transpose(1, 2, 0, 3), C), jax.vmap(grid3_ref)(X4, C))
    close(jax.vmap(jax.hessian(lambda x, c: jnp.sum(k3(x, c) ** 2), argnums=1), in_axes=(0, None))(X4, 0.4),
          jax.vmap(jax.hessian(lambda x, c: jnp.sum(grid3_ref(x, c) ** 2), argnums=1), in_axes=(0, None))(X4, 0.4))


def test_gathers_and_scatters_with_batched_index_arrays():
    I = np.stack([IDX, (IDX + 1) % 6, IDX[::-1]])
    close(jax.vmap(gather, in_axes=(None, None, 0))(1.1, X, I), jax.vmap(gather_scale_ref, in_axes=(None, None, 0))(1.1, X, I))
    close(jax.vmap(scatter)(XB, I), jax.vmap(scatter_ref)(XB, I))
    # x shared by the batch: its cotangent sums the batch's atomic contributions
    loss = lambda F: lambda x: jnp.sum(jnp.sin(jax.vmap(F, in_axes=(None, 0))(x, I)))
    close(jax.grad(loss(scatter))(X), jax.grad(loss(scatter_ref))(X))
    close(jax.jacfwd(loss(scatter))(X), jax.jacfwd(loss(scatter_ref))(X))
    wloss = lambda F: lambda w, x: jnp.sum(jnp.sin(F(w, x, IDX)))
    W = jnp.array([1.0, 2.0, 3.0])
    close(jax.vmap(jax.grad(wloss(gather), argnums=(0, 1)))(W, XB), jax.vmap(jax.grad(wloss(gather_scale_ref), argnums=(0, 1)))(W, XB))


# ----------------------------------------------------------------------------- derivatives

def test_jacobians_and_hessians_with_several_inputs_and_outputs():
    close(jax.jacfwd(f, argnums=(0, 1, 2))(0.3, X, Y), jax.jacfwd(blend_ref, argnums=(0, 1, 2))(0.3, X, Y))
    close(jax.jacrev(f, argnums=(0, 1, 2))(0.3, X, Y), jax.jacrev(blend_ref, argnums=(0, 1, 2))(0.3, X, Y))
    prod = lambda F: lambda a, x: jnp.sum(F(a, x, Y)[0] * F(a, x, Y)[1])
    close(jax.hessian(prod(f), argnums=(0, 1))(0.3, X), jax.hessian(prod(blend_ref), argnums=(0, 1))(0.3, X))
    A = RNG.standard_normal((4, 6))
    sm = lambda F: lambda a, x: jnp.sum(jnp.sin(F(a, x)))
    close(jax.hessian(sm(mv), argnums=(0, 1))(A, X), jax.hessian(sm(matvec_ref), argnums=(0, 1))(A, X))
    inout = lambda F: lambda x, s: jnp.sum(jnp.sin(F(x, s)))
    close(jax.hessian(inout(acc), argnums=(0, 1))(X, Y), jax.hessian(inout(accumulate_ref), argnums=(0, 1))(X, Y))
    third = lambda F: jax.jacfwd(jax.hessian(lambda a: jnp.sum(F(a, X, Y)[0])))
    close(third(f)(0.4), third(blend_ref)(0.4))
    rr = lambda F: jax.grad(lambda x: jnp.sum(jax.grad(lambda x: jnp.sum(F(0.4, x, Y)[0] ** 2))(x) ** 2))
    close(rr(f)(X), rr(blend_ref)(X))


def test_jvp_of_vjp_and_linearize_with_linear_transpose():
    def pullback(F):
        def h(x, ct):
            return jax.vjp(lambda x: F(0.3, x, Y), x)[1](ct)[0]
        return h
    ct = (np.ones(6), np.arange(6.0))
    close(jax.jvp(pullback(f), (X, ct), (Y, ct))[1], jax.jvp(pullback(blend_ref), (X, ct), (Y, ct))[1])
    _, lin = jax.linearize(lambda x, y: f(0.3, x, y), X, Y)
    _, lin_ref = jax.linearize(lambda x, y: blend_ref(0.3, x, y), X, Y)
    close(lin(Y, X), lin_ref(Y, X))
    close(jax.vmap(lin)(XB, XB[::-1]), jax.vmap(lin_ref)(XB, XB[::-1]))
    T, T_ref = jax.linear_transpose(lin, X, Y), jax.linear_transpose(lin_ref, X, Y)
    close(T(ct), T_ref(ct))
    close(jax.jit(jax.vmap(T))((XB, 2 * XB)), jax.vmap(T_ref)((XB, 2 * XB)))
    # a primal call is not a linear function to JAX: transposing it directly is refused, naming the kernel
    with pytest.raises(JaxIntegrationError, match="kernel 'blend' is not linear"):
        jax.linear_transpose(lambda x: f(0.3, x, Y)[1], X)(X)


@pytest.mark.parametrize("name", ["blend", "matvec", "grid2", "total", "scatter", "gather", "accumulate", "ragged"])
def test_forward_and_reverse_agree_under_vmap_and_with_central_differences(name):
    """<J v, w> = <v, J^T w> for random v, w, and J v against central differences, of vmapped kernels."""
    rng = np.random.default_rng(len(name))
    xb = rng.standard_normal((3, 6))
    cases = {
        "blend": (lambda x, y: jax.vmap(f, in_axes=(None, 0, 0))(0.3, x, y), (xb, xb[::-1])),
        "matvec": (jax.vmap(mv), (rng.standard_normal((3, 4, 6)), xb)),
        "grid2": (jax.vmap(k2, in_axes=(0, None)), (rng.standard_normal((3, 3, 4)), rng.standard_normal(4))),
        "total": (jax.vmap(tot), (xb, 0.5 * xb)),
        "scatter": (lambda x: jax.vmap(scatter, in_axes=(0, None))(x, IDX), (xb,)),
        "gather": (lambda w, x: jax.vmap(gather, in_axes=(0, 0, None))(w, x, IDX), (np.array([0.3, 1.0, 2.0]), xb)),
        "accumulate": (jax.vmap(acc), (xb, xb + 1)),
        "ragged": (lambda x: jax.vmap(ragged, in_axes=(0, None))(x, COUNTS), (0.5 * xb,)),
    }
    F, args = cases[name]
    v = tuple(rng.standard_normal(np.shape(a)) for a in args)
    out, Jv = jax.jvp(F, args, v)
    w = jax.tree.map(lambda o: rng.standard_normal(o.shape), out)
    JTw = jax.vjp(F, *args)[1](w)
    lhs = sum(np.vdot(p, q) for p, q in zip(jax.tree.leaves(Jv), jax.tree.leaves(w)))
    rhs = sum(np.vdot(p, q) for p, q in zip(v, JTw))
    assert abs(lhs - rhs) <= 1e-11 * max(1.0, abs(lhs))
    h = 1e-6
    plus = F(*[a + h * t for a, t in zip(args, v)])
    minus = F(*[a - h * t for a, t in zip(args, v)])
    close(jax.tree.map(lambda p, q: (p - q) / (2 * h), plus, minus), Jv, tol=1e-6)


# ----------------------------------------------------------------------------- control flow, remat, wrappers

@pytest.mark.parametrize("policy", [None, "nothing_saveable", "everything_saveable", "names"])
def test_checkpoint_policies(policy):
    from jax.ad_checkpoint import checkpoint_name
    chosen = (jax.checkpoint_policies.save_only_these_names("u") if policy == "names" else
              None if policy is None else getattr(jax.checkpoint_policies, policy))
    loss = lambda F: jax.checkpoint(lambda a, x: jnp.sum(jnp.sin(checkpoint_name(F(a, x, Y)[0], "u")) + F(a, x, Y)[1]),
                                    policy=chosen)
    close(jax.jit(jax.grad(loss(f), argnums=(0, 1)))(0.3, X), jax.grad(loss(blend_ref), argnums=(0, 1))(0.3, X))


def test_loops_and_branches_with_the_kernel_in_their_bodies():
    def scanned(F):
        def body(c, a):
            c = jax.remat(lambda c: F(a, c, Y)[0])(c)
            return c, jnp.sum(c)
        return lambda x: jnp.sum(jnp.add(*[jnp.sum(t) for t in jax.lax.scan(body, x, jnp.array([0.2, 0.5, 0.9]),
                                                                           unroll=2)]))
    close(jax.jit(jax.grad(scanned(f)))(X), jax.grad(scanned(blend_ref))(X))
    fori = lambda F: lambda x: jnp.sum(jax.lax.fori_loop(0, 3, lambda i, c: F(0.5 + 0.1 * i, c, Y)[0], x))
    close(jax.grad(fori(f))(X), jax.grad(fori(blend_ref))(X))
    switch = lambda F: lambda x, k: jax.lax.switch(k, [lambda x: jnp.sum(F(0.3, x, Y)[0]),
                                                       lambda x: jnp.sum(F(0.7, x, Y)[1]), jnp.sum], x)
    for k in range(3):
        close(jax.jit(jax.grad(switch(f)))(X, k), jax.grad(switch(blend_ref))(X, k))
    cond = lambda F: lambda x, p: jnp.sum(jax.lax.cond(p > 0, lambda x: F(0.3, x, Y)[0], lambda x: F(0.9, x, Y)[1], x))
    P = jnp.array([1.0, -1.0, 2.0])
    close(jax.vmap(jax.value_and_grad(cond(f)))(XB, P), jax.vmap(jax.value_and_grad(cond(blend_ref)))(XB, P))
    # a batched predicate: while_loop's batching runs the body on every element until all are done
    grow = lambda F: lambda x: jax.lax.while_loop(lambda c: jnp.sum(c) < 30, lambda c: F(1.1, c, Y)[1] + 1.0, x)
    X0 = np.abs(XB) + np.array([[0.0], [1.0], [3.0]])
    close(jax.vmap(grow(f))(X0), jax.vmap(grow(blend_ref))(X0))
    close(jax.jvp(grow(f), (X0[0],), (Y,)), jax.jvp(grow(blend_ref), (X0[0],), (Y,)))
    close(jax.lax.map(lambda x: f(0.3, x, Y), XB, batch_size=2), jax.vmap(lambda x: blend_ref(0.3, x, Y))(XB))


def test_custom_vjp_and_custom_jvp_wrapping_the_kernel_and_has_aux():
    @jax.custom_vjp
    def h(x):
        return f(0.3, x, Y)[0]
    h.defvjp(lambda x: (h(x), x), lambda x, ct: jax.vjp(lambda x: f(0.3, x, Y)[0], x)[1](ct))

    @jax.custom_jvp
    def k(x):
        return f(0.3, x, Y)[0]
    k.defjvp(lambda p, t: jax.jvp(lambda x: f(0.3, x, Y)[0], p, t))
    ref = jax.grad(lambda x: jnp.sum(blend_ref(0.3, x, Y)[0] ** 2))
    for wrapped in (h, k):
        loss = jax.grad(lambda x: jnp.sum(wrapped(x) ** 2))
        close(loss(X), ref(X))
        close(jax.vmap(loss)(XB), jax.vmap(ref)(XB))

    def aux(F):
        def loss(a, x):
            u, v = F(a, x, Y)
            return jnp.sum(u * v), (u, v)
        return jax.value_and_grad(loss, argnums=(0, 1), has_aux=True)
    close(aux(f)(0.3, X), aux(blend_ref)(0.3, X))


def test_dynamic_tape_kernel_in_scan_checkpoint_cond_and_hessian():
    def run(F):
        def body(c, k):
            c = jax.checkpoint(lambda c: F(0.5 * c, COUNTS))(c)
            c = jax.lax.cond(k > 0, lambda c: 2.0 * c, lambda c: F(c, COUNTS), c)
            return c, jnp.sum(c)
        return lambda x: jnp.sum(jnp.add(*[jnp.sum(t) for t in jax.lax.scan(body, x, jnp.arange(3))]))
    close(jax.jit(jax.grad(run(ragged)))(X), jax.grad(run(ragged_power_ref))(X))
    CB = np.stack([COUNTS, COUNTS[::-1]])
    hess = lambda F: jax.vmap(jax.hessian(lambda x, c: jnp.sum(F(x, c))))
    close(hess(ragged)(XB[:2], CB), hess(ragged_power_ref)(XB[:2], CB), tol=1e-9)


# ----------------------------------------------------------------------------- inputs

def test_integer_inputs_get_float0_cotangents_and_tangents():
    int_loss = lambda F: jax.grad(lambda w, x, i: jnp.sum(F(w, x, i)), argnums=(0, 1, 2), allow_int=True)
    got = int_loss(gather)(1.1, X, IDX)
    assert got[2].dtype == jax.dtypes.float0
    close(got, int_loss(gather_scale_ref)(1.1, X, IDX))
    zero = np.zeros(6, jax.dtypes.float0)
    close(jax.jvp(gather, (1.1, X, IDX), (1.0, Y, zero)), jax.jvp(gather_scale_ref, (1.1, X, IDX), (1.0, Y, zero)))
    close(jax.vjp(gather, 1.1, X, IDX)[1](Y), jax.vjp(gather_scale_ref, 1.1, X, IDX)[1](Y))
    _, lin = jax.linearize(gather, 1.1, X, IDX)
    close(lin(0.5, Y, zero), jax.linearize(gather_scale_ref, 1.1, X, IDX)[1](0.5, Y, zero))
    # an int output beside a float one, an int scalar
    cp = ado.jax_kernel(count_pos)
    close(jax.jvp(lambda x: cp(x, 3), (X,), (Y,)), jax.jvp(lambda x: count_pos_ref(x, 3), (X,), (Y,)))
    n_loss = lambda F: jax.grad(lambda x, n: jnp.sum(F(x, n)[0]), argnums=(0, 1), allow_int=True)
    close(n_loss(cp)(X, 3), n_loss(count_pos_ref)(X, 3))
    ns = jnp.array([1, 2, 3], jnp.int32)
    close(jax.vmap(cp, in_axes=(None, 0))(X, ns), jax.vmap(count_pos_ref, in_axes=(None, 0))(X, ns))


def test_stop_gradient_closed_over_constants_and_weak_scalars():
    loss = lambda F: lambda a, x, y: jnp.sum(F(jax.lax.stop_gradient(a), x, jax.lax.stop_gradient(y))[0] ** 2)
    close(jax.grad(loss(f), argnums=(0, 1, 2))(0.3, X, Y), jax.grad(loss(blend_ref), argnums=(0, 1, 2))(0.3, X, Y))
    yc = jnp.asarray(Y)
    closed = lambda F: jax.jit(jax.grad(lambda x: jnp.sum(F(0.3, x, yc)[1])))
    close(closed(f)(X), closed(blend_ref)(X))
    close(jax.jit(lambda x: f(2, x, Y))(X), blend_ref(2.0, X, Y))           # a Python int as an f64 scalar
    close(jax.grad(lambda a: jnp.sum(f(a, X, Y)[0]))(2.0), jax.grad(lambda a: jnp.sum(blend_ref(a, X, Y)[0]))(2.0))


def test_float32_kernel_under_x64():
    x32, y32 = X.astype(np.float32), Y.astype(np.float32)
    out = f32(0.5, x32, y32)
    assert out.dtype == np.float32
    close(out, blend32_ref(np.float32(0.5), x32, y32), tol=1e-6)
    ref = lambda a, x: jnp.sum(blend32_ref(a, x, y32))
    # a weak Python float is f64 under x64: its cotangent is too, as in plain JAX
    close(jax.grad(lambda a, x: jnp.sum(f32(a, x, y32)), argnums=(0, 1))(0.5, x32), jax.grad(ref, argnums=(0, 1))(0.5, x32),
          tol=1e-5)
    close(jax.grad(lambda a, x: jnp.sum(f32(a, x, y32)), argnums=(0, 1))(np.float32(0.5), x32),
          jax.grad(ref, argnums=(0, 1))(np.float32(0.5), x32), tol=1e-5)
    sq = lambda F: jax.hessian(lambda x: jnp.sum(F(np.float32(0.5), x, y32) ** 2))
    close(sq(f32)(x32), sq(blend32_ref)(x32), tol=1e-4)


def test_transposed_sliced_and_reversed_layouts():
    Mt, b6 = RNG.standard_normal((8, 3)), RNG.standard_normal(6)
    close(jax.jit(lambda m: k2(m.T[:, 1:7], b6))(Mt), grid2_ref(Mt.T[:, 1:7], b6))
    close(k2(jnp.asarray(Mt).T[:, ::-1][:, :6], b6[::-1]), grid2_ref(Mt.T[:, ::-1][:, :6], b6[::-1]))
    X2, b = RNG.standard_normal((3, 4)), RNG.standard_normal(4)
    close(k2(np.asfortranarray(X2), b), grid2_ref(X2, b))
    close(k2(X2[:, ::-1], b), grid2_ref(X2[:, ::-1], b))
    sq = lambda F: jax.grad(lambda m: jnp.sum(F(m.T[:, :6], b6) ** 2))
    close(sq(k2)(Mt), sq(grid2_ref)(Mt))
    X3 = RNG.standard_normal((2, 3, 4))
    close(jax.jit(lambda x: k3(jnp.transpose(x, (2, 0, 1)), 0.3))(X3), grid3_ref(np.transpose(X3, (2, 0, 1)), 0.3))


def test_zero_size_arrays_and_batches_of_one():
    z, zi = np.zeros(0), np.zeros(0, np.int32)
    close(f(0.3, z, z), blend_ref(0.3, z, z))
    close(jax.grad(lambda x: jnp.sum(f(0.3, x, z)[0]))(z), z)
    close(scatter(z, zi), np.zeros(M))
    close(jax.grad(lambda x: tot(x, x)[0])(z), z)
    close(jax.grad(lambda x: jnp.sum(ragged(x, zi) ** 2))(z), z)
    for shape in ((0, 6), (3, 0)):
        zb = np.zeros(shape)
        close(jax.vmap(f, in_axes=(None, 0, 0))(0.3, zb, zb), blend_ref(0.3, zb, zb))
    close(jax.vmap(jax.grad(lambda x, c: jnp.sum(ragged(x, c) ** 2)))(np.zeros((0, 6)), np.zeros((0, 6), np.int32)),
          np.zeros((0, 6)))
    one = lambda F: jax.vmap(jax.grad(lambda x: F(x, Y)[0]))
    close(one(tot)(XB[:1]), one(total_ref)(XB[:1]))
    rone = lambda F: jax.vmap(jax.grad(lambda x, c: jnp.sum(F(x, c) ** 2)))
    close(rone(ragged)(X[None], COUNTS[None]), rone(ragged_power_ref)(X[None], COUNTS[None]))


def test_donated_buffers_and_one_array_for_two_parameters():
    """An In and an InOut given one array: the kernel reads x[n - 1 - i] of another thread, so a
    shared buffer would show. Donated or not, XLA must give the InOut its own."""
    ra = ado.jax_kernel(reverse_add)
    close(jax.jit(lambda x, y: f(0.3, x, y), donate_argnums=(0, 1))(jnp.asarray(X), jnp.asarray(Y)), blend_ref(0.3, X, Y))
    close(jax.jit(acc, donate_argnums=(1,))(X, jnp.asarray(Y)), accumulate_ref(X, Y))
    close(ra(X, X), reverse_add_ref(X, X))
    close(jax.jit(lambda x: ra(x, x))(X), reverse_add_ref(X, X))
    close(jax.jit(lambda x: ra(x, x), donate_argnums=0)(jnp.asarray(X)), reverse_add_ref(X, X))
    close(jax.vmap(lambda x: ra(x, x))(XB), jax.vmap(lambda x: reverse_add_ref(x, x))(XB))
    close(jax.grad(lambda x: jnp.sum(ra(x, x) ** 2))(X), jax.grad(lambda x: jnp.sum(reverse_add_ref(x, x) ** 2))(X))
    # an InOut fed a closed-over constant: the constant is not updated in place between calls
    const = np.array(Y)
    h = jax.jit(lambda x: ra(x, const))
    close(h(X), reverse_add_ref(X, Y))
    close(h(X), reverse_add_ref(X, Y))
