"""Spread independent work (basin-hopping walkers, fitting configurations) over devices.

A batch of independent systems is split along its leading axis over a one-axis
``jax.sharding.Mesh``; each device runs the same ``jax.vmap``-ed function on its share
(``jax.shard_map``), so no communication happens and the results equal the unsharded run
walker for walker. The mesh holds the *global* devices, so the same code runs over the
GPUs of several hosts when every host starts it under ``jax.distributed`` (docs/scaling.md).
"""
from __future__ import annotations

import functools

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

from ..errors import ShardingError

WALKERS = "walkers"
_PLATFORMS = {"cpu": "cpu", "cuda": "gpu", "gpu": "gpu", "rocm": "gpu", "hip": "gpu"}


def start_distributed() -> bool:
    """Join a multi-process JAX job when the environment describes one; True if it did.

    Set ``JAX_COORDINATOR_ADDRESS`` (host:port of process 0) on every process, with
    ``JAX_NUM_PROCESSES`` and ``JAX_PROCESS_ID`` where no cluster manager (SLURM, Open MPI)
    provides them. Must run before anything else touches JAX devices. On the CPU platform the
    processes exchange data through gloo.
    """
    import os
    if not os.environ.get("JAX_COORDINATOR_ADDRESS"):
        return False
    number = lambda name: int(os.environ[name]) if os.environ.get(name) else None
    if os.environ.get("JAX_PLATFORMS", "").startswith("cpu"):
        jax.config.update("jax_cpu_collectives_implementation", "gloo")
    jax.distributed.initialize(num_processes=number("JAX_NUM_PROCESSES"), process_id=number("JAX_PROCESS_ID"))
    return True


def select_devices(platform: str = "cpu", count: int | None = None) -> list:
    """The first ``count`` devices of ``platform`` over all processes (all of them when None).

    Under ``jax.distributed`` the list spans every host; ``count`` must then be a multiple
    of the devices per host, since every process runs its share.
    """
    name = _PLATFORMS.get(platform, platform)
    try:
        devices = jax.devices(name)
    except RuntimeError:
        devices = []
    if not devices:
        raise ShardingError(f"JAX finds no {name} device on this machine")
    if count is None:
        return devices
    if not 1 <= count <= len(devices):
        raise ShardingError(f"asked for {count} {name} devices, {len(devices)} are visible "
                            f"({jax.process_count()} process(es))")
    chosen = devices[:count]
    if jax.process_count() > 1 and {d.process_index for d in chosen} != set(range(jax.process_count())):
        raise ShardingError(f"{count} of {len(devices)} devices leave some processes without a device; "
                            "under jax.distributed use all devices or a multiple of the devices per host")
    return chosen


def walker_mesh(devices) -> Mesh:
    """A one-axis mesh (axis ``"walkers"``) over ``devices``."""
    return Mesh(np.asarray(devices), (WALKERS,))


def padded_size(batch: int, mesh: Mesh) -> int:
    """The smallest multiple of the mesh size that holds ``batch`` systems."""
    n = mesh.size
    return -(-batch // n) * n


def split_keys(key, batch: int, mesh: Mesh):
    """``jax.random.split(key, batch)``, created directly in its sharded layout.

    The keys are the ones an unsharded run splits from ``key``, so walker i starts the same
    on any number of devices. Built inside ``jit`` from a replicated key, which also works
    under ``jax.distributed`` (a host array would have to be addressable everywhere).
    """
    _check_divides(batch, mesh)
    return _key_splitter(batch, mesh)(np.asarray(key))


@functools.lru_cache(maxsize=32)
def _key_splitter(batch: int, mesh: Mesh):
    return jax.jit(lambda k: jax.random.split(k, batch), out_shardings=NamedSharding(mesh, P(WALKERS)))


def over_walkers(fn, mesh: Mesh, shared=()):
    """``jit(shard_map(fn))`` with every argument and result split along its leading axis,
    except the arguments at positions ``shared`` (parameters), which every device gets whole.

    ``fn`` must treat the systems of its batch independently (a ``jax.vmap``-ed function);
    each device then runs it on its own share, with no communication. ``jax.grad`` through
    it sums a shared argument's cotangent over the devices.
    """
    def specs(args):
        return tuple(P() if i in shared else P(WALKERS) for i in range(len(args)))

    def call(*args):
        for i, arg in enumerate(args):
            if i not in shared:
                for leaf in jax.tree.leaves(arg):
                    _check_divides(leaf.shape[0], mesh)
        # No collectives happen, so the per-device types need no checking (check_vma=False): the
        # batched function need not mark its loop carries as device-varying.
        return jax.shard_map(fn, mesh=mesh, in_specs=specs(args), out_specs=P(WALKERS), check_vma=False)(*args)
    return jax.jit(call)


def to_host(x) -> np.ndarray:
    """A (possibly multi-host) global array as a numpy array on this process."""
    if jax.process_count() > 1:
        from jax.experimental import multihost_utils
        return np.asarray(multihost_utils.process_allgather(x, tiled=True))
    return np.asarray(x)


def describe(devices) -> str:
    """'4 cpu devices' / '2 gpu devices on 2 processes' for the scripts' first line."""
    kinds = sorted({d.platform for d in devices})
    processes = len({d.process_index for d in devices})
    text = f"{len(devices)} {'/'.join(kinds)} device{'s' if len(devices) != 1 else ''}"
    return text + (f" on {processes} processes" if processes > 1 else "")


def _check_divides(batch: int, mesh: Mesh) -> None:
    if batch % mesh.size:
        raise ShardingError(f"a batch of {batch} does not split evenly over {mesh.size} devices; "
                            f"use {padded_size(batch, mesh)} (sharding.padded_size)")
