"""A kernel under shard_map across every local device, with grad inside and sharded inputs: agreement, not time.

Run on a machine with at least 2 GPUs (``--device cuda``), or as a dry run on host devices
(``XLA_FLAGS=--xla_force_host_platform_device_count=2 ... --device cpu``). A replicated scalar's
cotangent must be the sum of every device's contribution. With fewer than 2 devices the rows say
they were skipped.
"""
from __future__ import annotations

import numpy as np

import adoffload as ado

DEVICES = ("cpu", "cuda")


@ado.kernel
def wave(a: ado.f64, x: ado.In[ado.f64], y: ado.Out[ado.f64]):
    i = ado.tid()
    y[i] = ado.sin(x[i]) * a + x[i] * x[i]


def run(rows, device: str, quick: bool, options) -> None:
    import jax
    import jax.numpy as jnp
    from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
    jax.config.update("jax_enable_x64", True)
    devices = jax.devices("gpu" if device == "cuda" else "cpu")
    if len(devices) < 2:
        rows.append({"case": "shard_map", "devices": len(devices),
                     "skipped": f"{len(devices)} {device} device(s) visible; shard_map needs at least 2"})
        return
    f = ado.jax_kernel(wave)
    mesh = Mesh(np.array(devices), ("d",))
    n = 1 << (12 if quick else 20)
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
    ok = bool(np.allclose(loss, np.sum(np.sin(xr) * 0.7 + xr * xr)) and np.allclose(da, np.sum(np.sin(xr)))
              and np.allclose(np.asarray(dx), np.cos(xr) * 0.7 + 2 * xr))
    kinds = sorted({d.device_kind for d in devices})
    rows.append({"case": "loss and grad under shard_map (replicated scalar's cotangent summed)", "n": n,
                 "devices": len(devices), "device_kind": ", ".join(kinds), "agree": ok,
                 "dx_sharding": str(dx.sharding)})
    sharded_in = jax.jit(f)(0.7, x)
    rows.append({"case": "jit with a sharded input", "n": n, "devices": len(devices), "device_kind": ", ".join(kinds),
                 "agree": bool(np.allclose(np.asarray(sharded_in), np.sin(xr) * 0.7 + xr * xr))})
