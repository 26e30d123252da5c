"""The transformation probe on host devices (subprocesses): shard_map, sharded jit, pmap; a 2x2 mesh."""
import os
import subprocess
import sys
import textwrap
from pathlib import Path

SCRIPT = textwrap.dedent('''
    import os, sys
    os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=2"
    sys.path[:0] = [sys.argv[1], sys.argv[2]]
    import jax
    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp, numpy as np
    from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
    import adoffload as ado
    from probe_kernels import (accumulate, accumulate_ref, blend, blend_ref, gather_scale, gather_scale_ref, grid2,
                               grid2_ref, ragged_power, ragged_power_ref, scatter_add, scatter_add_ref)
    from test_transform_probe import close
    assert len(jax.devices()) == 2
    mesh = Mesh(np.array(jax.devices()), ("d",))
    sh = NamedSharding(mesh, P("d"))
    rng = np.random.default_rng(1)
    x, y, XB = rng.standard_normal(8), rng.standard_normal(8), rng.standard_normal((4, 8))
    idx = np.array([2, 0, 5, 5, 1, 3, 6, 6], np.int32)
    counts = np.array([0, 1, 3, 2, 5, 1, 4, 2], np.int32)
    f, g, k2 = ado.jax_kernel(blend), ado.jax_kernel(gather_scale), ado.jax_kernel(grid2)
    s = ado.jax_kernel(scatter_add, out_shapes=lambda x, idx: {"acc": (7,)}, grid=lambda x, idx: x.shape)
    acc, rp = ado.jax_kernel(accumulate), ado.jax_kernel(ragged_power)
    s_ref = lambda x, i: scatter_add_ref(x, i, 7)

    # pmap, and pmap of vmap
    close(jax.pmap(f, in_axes=(None, 0, 0))(0.3, XB[:2], XB[2:]), jax.vmap(blend_ref, in_axes=(None, 0, 0))(0.3, XB[:2], XB[2:]))
    pg = lambda F: jax.grad(lambda a, x: jnp.sum(F(a, x, y)[0]))
    close(jax.pmap(pg(f), in_axes=(None, 0))(0.3, XB[:2]), jax.vmap(pg(blend_ref), in_axes=(None, 0))(0.3, XB[:2]))
    summed = jax.pmap(lambda x: jax.lax.psum(pg(f)(0.3, x), "i"), axis_name="i")(XB[:2])
    close(summed, np.full(2, sum(pg(blend_ref)(0.3, v) for v in XB[:2])))
    pv = lambda F: jax.vmap(F, in_axes=(None, 0, None))
    close(jax.pmap(pv(f), in_axes=(None, 0, None))(0.3, XB.reshape(2, 2, 8), y),
          jax.vmap(pv(blend_ref), in_axes=(None, 0, None))(0.3, XB.reshape(2, 2, 8), y))
    rg = lambda F: jax.grad(lambda x, c: jnp.sum(F(x, c) ** 2))
    close(jax.pmap(rg(rp))(XB[:2], np.stack([counts, counts[::-1]])), jax.vmap(rg(ragged_power_ref))(XB[:2], np.stack([counts, counts[::-1]])))

    # jit of sharded inputs: the scatter's atomics reduce across the shards
    xs, ids = jax.device_put(x, sh), jax.device_put(idx, sh)
    close(jax.jit(s)(xs, ids), s_ref(x, idx))
    close(jax.jit(jax.grad(lambda x: jnp.sum(s(x, ids) ** 2)))(xs), jax.grad(lambda x: jnp.sum(s_ref(x, idx) ** 2))(x))
    h = jax.jit(g, in_shardings=(None, sh, sh), out_shardings=sh)
    close(h(1.2, x, idx), gather_scale_ref(1.2, x, idx))
    close(jax.jit(rg(rp))(xs, jax.device_put(counts, sh)), rg(ragged_power_ref)(x, counts))
    XX = jax.device_put(XB, sh)
    close(jax.jit(jax.vmap(lambda x: f(0.3, x, y), spmd_axis_name="d"))(XX), jax.vmap(lambda x: blend_ref(0.3, x, y))(XB))

    # shard_map: a replicated table gathered by sharded indices; its cotangent and w's are summed over devices
    h = jax.shard_map(g, mesh=mesh, in_specs=(P(), P(), P("d")), out_specs=P("d"))
    wl = lambda F: jax.grad(lambda w, x: jnp.sum(jnp.sin(F(w, x, idx))), argnums=(0, 1))
    close(jax.jit(h)(1.2, x, idx), gather_scale_ref(1.2, x, idx))
    close(jax.jit(wl(h))(1.2, x), wl(gather_scale_ref)(1.2, x))
    # partial histograms per device, then psum
    h = jax.shard_map(lambda x, i: jax.lax.psum(s(x, i), "d"), mesh=mesh, in_specs=(P("d"), P("d")), out_specs=P())
    close(jax.jit(h)(x, idx), s_ref(x, idx))
    close(jax.jit(jax.grad(lambda x: jnp.sum(h(x, idx) ** 2)))(x), jax.grad(lambda x: jnp.sum(s_ref(x, idx) ** 2))(x))
    # 2-D grid, rows sharded, b replicated
    X2, b = rng.standard_normal((4, 3)), rng.standard_normal(3)
    h = jax.shard_map(k2, mesh=mesh, in_specs=(P("d", None), P()), out_specs=P("d", None))
    l2 = lambda F: jax.grad(lambda X, b: jnp.sum(F(X, b) ** 2), argnums=(0, 1))
    close(jax.jit(h)(X2, b), grid2_ref(X2, b))
    close(jax.jit(l2(h))(X2, b), l2(grid2_ref)(X2, b))
    # shard_map of vmap and vmap of shard_map
    X = rng.standard_normal((2, 8))
    h = jax.shard_map(pv(f), mesh=mesh, in_specs=(P(), P(None, "d"), P("d")), out_specs=P(None, "d"))
    close(jax.jit(h)(0.3, X, y), pv(blend_ref)(0.3, X, y))
    al = lambda F: jax.grad(lambda a, X: jnp.sum(F(a, X, y)[0] ** 2), argnums=(0, 1))
    close(jax.jit(al(h))(0.3, X), al(pv(blend_ref))(0.3, X))
    h2 = jax.shard_map(lambda x, y: f(0.3, x, y), mesh=mesh, in_specs=(P("d"), P("d")), out_specs=P("d"))
    close(jax.jit(jax.vmap(h2, in_axes=(0, None)))(X, y), pv(blend_ref)(0.3, X, y))
    # InOut; a replicated scalar under hessian and jacfwd; check_vma off
    h = jax.shard_map(acc, mesh=mesh, in_specs=(P("d"), P("d")), out_specs=P("d"))
    il = lambda F: jax.grad(lambda x, s: jnp.sum(F(x, s) ** 2), argnums=(0, 1))
    close(jax.jit(il(h))(x, y), il(accumulate_ref)(x, y))
    for check in (True, False):
        h = jax.shard_map(lambda a, x, y: f(a, x, y)[0], mesh=mesh, in_specs=(P(), P("d"), P("d")), out_specs=P("d"),
                          check_vma=check)
        ref = lambda a, x: blend_ref(a, x, y)[0]
        close(jax.jit(jax.hessian(lambda a: jnp.sum(h(a, x, y) ** 2)))(0.3), jax.hessian(lambda a: jnp.sum(ref(a, x) ** 2))(0.3))
        close(jax.jit(jax.jacfwd(lambda a, x: h(a, x, y), argnums=(0, 1)))(0.3, x), jax.jacfwd(ref, argnums=(0, 1))(0.3, x))
    # a dynamic-tape kernel: its handler sizes the tape per device
    h = jax.shard_map(rp, mesh=mesh, in_specs=(P("d"), P("d")), out_specs=P("d"))
    close(jax.jit(rg(h))(x, counts), rg(ragged_power_ref)(x, counts))
    close(jax.jit(jax.hessian(lambda x: jnp.sum(h(x, counts))))(x), jax.hessian(lambda x: jnp.sum(ragged_power_ref(x, counts)))(x),
          1e-9)
    print("PROBE_DEVICES_OK")
''')


def _run_in_a_child(tmp_path, text: str, done: str) -> None:
    """Run ``text`` in a fresh process (its XLA_FLAGS set the host device count before JAX starts)
    and check that it printed ``done``."""
    script = tmp_path / "run.py"
    script.write_text(text)
    here = Path(__file__).resolve().parent
    env = dict(os.environ, JAX_PLATFORMS="cpu")
    env.pop("XLA_FLAGS", None)
    env["PYTHONPATH"] = os.pathsep.join([str(here.parents[1]), env.get("PYTHONPATH", "")])
    result = subprocess.run([sys.executable, str(script), str(here), str(here.parents[1])], capture_output=True,
                            text=True, timeout=400, env=env)
    assert done in result.stdout, result.stdout[-2000:] + result.stderr[-4000:]


def test_transformations_on_two_host_devices(tmp_path):
    _run_in_a_child(tmp_path, SCRIPT, "PROBE_DEVICES_OK")


MESH_2X2 = textwrap.dedent('''
    import os, sys
    os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=4"
    sys.path[:0] = [sys.argv[1], sys.argv[2]]
    import jax
    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp, numpy as np
    from jax.sharding import Mesh, PartitionSpec as P
    import adoffload as ado
    from probe_kernels import blend, blend_ref, total, total_ref
    from test_transform_probe import close
    mesh = Mesh(np.array(jax.devices()).reshape(2, 2), ("a", "b"))
    rng = np.random.default_rng(2)
    x, y, X = rng.standard_normal(8), rng.standard_normal(8), rng.standard_normal((3, 8))
    f = ado.jax_kernel(blend)
    tot = ado.jax_kernel(total, out_shapes={"e": (1,)}, grid=lambda x, y: x.shape)
    # x varies over 'a', y over 'b': the results vary over both, so out_specs=P('a') is refused, as in plain JAX
    # (the results were typed like x: one 'b' shard's values came back)
    for F in (f, blend_ref):
        h = jax.shard_map(lambda x, y: F(0.3, x, y)[0], mesh=mesh, in_specs=(P("a"), P("b")), out_specs=P("a"))
        try:
            jax.jit(h)(x, y)
            raise AssertionError(f"{F.__name__}: out_specs=P('a') accepted")
        except ValueError as exc:
            assert "out_specs" in str(exc), exc
    sm = lambda F: jax.shard_map(lambda a, x, y: F(a, x, y)[0], mesh=mesh, in_specs=(P(), P("a"), P("b")),
                                 out_specs=P(("a", "b")))
    close(jax.jit(sm(f))(0.3, x, y), sm(blend_ref)(0.3, x, y))
    # cotangents: x's sums over 'b', y's over 'a', the replicated a's over both
    L = lambda F: jax.grad(lambda a, x, y: jnp.sum(sm(F)(a, x, y) ** 2), argnums=(0, 1, 2))
    close(jax.jit(L(f))(0.3, x, y), L(blend_ref)(0.3, x, y))
    J = lambda F: jax.jacfwd(sm(F), argnums=(0, 1, 2))
    close(jax.jit(J(f))(0.3, x, y), J(blend_ref)(0.3, x, y))
    H = lambda F: jax.hessian(lambda a: jnp.sum(sm(F)(a, x, y) ** 2))
    close(jax.jit(H(f))(0.3), H(blend_ref)(0.3))
    # a psum over both axes of a reduction, and vmap inside
    ps = lambda F: jax.shard_map(lambda x, y: jax.lax.psum(F(x, y), ("a", "b")), mesh=mesh, in_specs=(P("a"), P("b")),
                                 out_specs=P())
    close(jax.jit(ps(tot))(x, y), ps(total_ref)(x, y))
    G = lambda F: jax.grad(lambda x, y: ps(F)(x, y)[0], argnums=(0, 1))
    close(jax.jit(G(tot))(x, y), G(total_ref)(x, y))
    vm = lambda F: jax.shard_map(jax.vmap(lambda x, y: F(0.3, x, y)[1], in_axes=(0, None)), mesh=mesh,
                                 in_specs=(P(None, "a"), P("b")), out_specs=P(None, ("a", "b")))
    V = lambda F: jax.grad(lambda X, y: jnp.sum(jnp.sin(vm(F)(X, y))), argnums=(0, 1))
    close(jax.jit(V(f))(X, y), V(blend_ref)(X, y))
    print("MESH_2X2_OK")
''')


def test_results_vary_over_every_mesh_axis_their_operands_vary_over(tmp_path):
    _run_in_a_child(tmp_path, MESH_2X2, "MESH_2X2_OK")
