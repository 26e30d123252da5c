"""A kernel under ``shard_map`` across every local GPU, with ``grad`` inside and sharded inputs.

Run on a machine with >= 2 GPUs: ``python benchmarks/shard_map_gpus.py``. Prints what it
checked and exits non-zero on a mismatch; with fewer than 2 GPUs it says so and skips.
"""
from __future__ import annotations

import sys

import numpy as np


def main() -> int:
    import jax
    import jax.numpy as jnp
    from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

    import adoffload as ado
    jax.config.update("jax_enable_x64", True)
    gpus = jax.devices()     # the default backend's devices: GPUs, or CPU devices for a dry run
    if len(gpus) < 2:
        print(f"skipped: {len(gpus)} {gpus[0].platform} device(s) visible, shard_map needs at least 2")
        return 0

    @ado.kernel
    def wave(a: ado.f64, x: ado.In[ado.f64], y: ado.Out[ado.f64]):
        i = ado.tid()
        y[i] = ado.sin(x[i]) * a + x[i] * x[i]

    f = ado.jax_kernel(wave)
    mesh = Mesh(np.array(gpus), ("d",))
    n = 1 << 20
    x = jax.device_put(jnp.linspace(0.0, 3.0, n), NamedSharding(mesh, P("d")))
    shard_map = getattr(jax, "shard_map", None)
    if shard_map is None:
        from jax.experimental.shard_map import shard_map

    def local_loss(a, xs):
        return jax.lax.psum(jnp.sum(f(a, xs)), "d")

    sharded = jax.jit(shard_map(lambda a, xs: (local_loss(a, xs), jax.grad(local_loss, argnums=(0, 1))(a, xs)),
                                mesh=mesh, in_specs=(P(), P("d")), out_specs=(P(), (P(), P("d")))))
    loss, (da, dx) = sharded(0.7, x)
    xr = np.linspace(0.0, 3.0, n)
    ok = np.allclose(loss, np.sum(np.sin(xr) * 0.7 + xr * xr)) and np.allclose(da, np.sum(np.sin(xr)))
    ok = ok and np.allclose(np.asarray(dx), np.cos(xr) * 0.7 + 2 * xr)
    print(f"shard_map over {len(gpus)} devices ({[d.device_kind for d in gpus]}): loss and grad "
          f"{'match' if ok else 'DO NOT match'} the numpy reference; dx sharding {dx.sharding}")
    sharded_in = jax.jit(f)(0.7, x)
    ok2 = np.allclose(np.asarray(sharded_in), np.sin(xr) * 0.7 + xr * xr)
    print(f"jit with a sharded input across {len(gpus)} devices: {'matches' if ok2 else 'DOES NOT match'}")
    return 0 if ok and ok2 else 1


if __name__ == "__main__":
    sys.exit(main())
