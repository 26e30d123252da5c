"""vmap (an IR-batched kernel, never a loop), its composition with grad, and control flow."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import adoffload as ado

from kernels import cube3, cube3_ref, rowscale, rowscale_ref, saxpy, saxpy_ref, scale_inplace, wave, wave_ref

B, N = 3, 5


def _data():
    x = np.linspace(0.1, 1.2, B * N).reshape(B, N)
    return np.array([0.5, -1.0, 2.0]), x, np.cos(x)


def _calls(jaxpr):
    return [e for e in jaxpr.eqns if e.primitive.name == "adoffload_kernel_call"]


@pytest.mark.parametrize("in_axes", [(0, 0, 0), (None, 0, None), (0, None, 1), (None, None, 0)])
def test_vmap_matches_loop(in_axes):
    a, x, y = _data()
    args = [a, x, y.T if in_axes[2] == 1 else y]
    args = [arg[0] if ax is None else arg for arg, ax in zip(args, in_axes)]
    f = ado.jax_kernel(wave)
    got = jax.vmap(f, in_axes=in_axes)(*args)
    for b in range(B):
        one = [arg if ax is None else np.take(arg, b, axis=ax) for arg, ax in zip(args, in_axes)]
        for g, r in zip(got, wave_ref(*one)):
            np.testing.assert_allclose(g[b], r, rtol=1e-13)
    jaxpr = jax.make_jaxpr(jax.vmap(f, in_axes=in_axes))(*args)
    assert len(_calls(jaxpr)) == 1      # one batched kernel, not a loop


def test_vmap_of_inout_broadcasts_unbatched_state():
    a, x, _ = _data()
    y = np.ones(N)
    got = jax.vmap(ado.jax_kernel(scale_inplace), in_axes=(0, 0, None))(a, x, y)
    np.testing.assert_allclose(got, y[None] * a[:, None] + x * x)


def test_vmap_two_dimensional_and_nested():
    x = np.arange(2 * 3 * 4, dtype=float).reshape(2, 3, 4)
    w = np.array([1.0, 2.0, -1.0, 0.5])
    f = ado.jax_kernel(rowscale)
    np.testing.assert_allclose(jax.vmap(f, in_axes=(0, None))(x, w), rowscale_ref(x, w))
    xs = np.stack([x, 2 * x])
    ws = np.stack([w, w + 1])
    got = jax.vmap(jax.vmap(f, in_axes=(0, None)))(xs, ws)
    np.testing.assert_allclose(got, np.stack([rowscale_ref(xs[i], ws[i]) for i in range(2)]))


def test_vmap_grid_rank_three_folds_batch_into_axis_zero():
    xs = np.arange(2 * 2 * 3 * 2, dtype=float).reshape(2, 2, 3, 2) / 5
    got = jax.jit(jax.vmap(ado.jax_kernel(cube3)))(xs)
    np.testing.assert_allclose(got, np.stack([cube3_ref(v) for v in xs]), rtol=1e-14)


def _loss(f):
    return lambda a, x, y: jnp.sum(f(a, x, y)[0] ** 2) + jnp.sum(f(a, x, y)[1])


@pytest.mark.parametrize("order", ["vmap_of_grad", "grad_of_vmap"])
def test_vmap_and_grad_compose(order):
    a, x, y = _data()
    f, ref = _loss(ado.jax_kernel(wave)), _loss(wave_ref)
    if order == "vmap_of_grad":
        t = lambda g: jax.vmap(jax.grad(g, argnums=(1, 2)), in_axes=(None, 0, 0))
        args = (0.4, x, y)
    else:
        t = lambda g: jax.grad(lambda x, y: jnp.sum(jax.vmap(g, in_axes=(None, 0, 0))(0.4, x, y)), argnums=(0, 1))
        args = (x, y)
    jax.tree.map(lambda p, q: np.testing.assert_allclose(p, q, rtol=1e-12), jax.jit(t(f))(*args), t(ref)(*args))


def test_jacfwd_and_jacrev_batch_derivative_kernels():
    _, x, y = _data()
    f = lambda x: ado.jax_kernel(wave)(0.4, x, y[0])[0]
    r = lambda x: wave_ref(0.4, x, y[0])[0]
    np.testing.assert_allclose(jax.jacfwd(f)(x[0]), jax.jacfwd(r)(x[0]), rtol=1e-12)
    np.testing.assert_allclose(jax.jacrev(f)(x[0]), jax.jacrev(r)(x[0]), rtol=1e-12)


def test_scan_while_cond_checkpoint():
    f = ado.jax_kernel(saxpy)
    x0 = np.linspace(0.0, 1.0, N)
    y = np.full(N, 0.1)

    def step(x, a):
        return f(a, x, y), jnp.sum(x)

    def run(x):
        x1, sums = jax.lax.scan(step, x, jnp.array([0.5, 0.9, 1.1]))
        x2 = jax.lax.while_loop(lambda c: c[1] < 3, lambda c: (f(0.5, c[0], y), c[1] + 1), (x1, 0))[0]
        x3 = jax.lax.cond(jnp.sum(x2) > 0, lambda v: f(2.0, v, y), lambda v: v, x2)
        return jnp.sum(jax.checkpoint(lambda v: f(1.5, v, y) ** 2)(x3)) + jnp.sum(sums)

    def run_ref(x):
        sums = 0.0
        for a in (0.5, 0.9, 1.1):
            sums = sums + jnp.sum(x)
            x = saxpy_ref(a, x, y)
        for _ in range(3):
            x = saxpy_ref(0.5, x, y)
        x = jnp.where(jnp.sum(x) > 0, saxpy_ref(2.0, x, y), x)
        return jnp.sum(saxpy_ref(1.5, x, y) ** 2) + sums

    np.testing.assert_allclose(jax.jit(run)(x0), run_ref(x0), rtol=1e-12)
    np.testing.assert_allclose(jax.jit(jax.grad(lambda x: jax.lax.scan(step, x, jnp.array([0.5, 0.9]))[0].sum()))(x0),
                               jax.grad(lambda x: saxpy_ref(0.9, saxpy_ref(0.5, x, y), y).sum())(x0))
    # while_loop has no reverse mode in JAX; forward mode goes through everything
    tangent = np.linspace(1.0, -1.0, N)
    np.testing.assert_allclose(jax.jvp(run, (x0,), (tangent,))[1], jax.jvp(run_ref, (x0,), (tangent,))[1],
                               rtol=1e-10)
