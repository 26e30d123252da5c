"""The exclusive prefix sum of a dynamic tape's per-thread byte counts, on the device.

A reverse kernel with a dynamic tape (enzyme/tape.py) needs each thread's offset into the tape:
the exclusive prefix sum of the counts its counting kernel writes, one per thread. Copying 2**24
counts to the host to sum them there took longer than the kernels themselves (docs/cuda.md), so
GPU launches scan them where they are, in place, with three kernels of our own language:

* ``chunk_sums``: thread j sums ``a[j*CHUNK : (j+1)*CHUNK]`` into ``sums[j]``;
* the sums are scanned the same way, level after level, until one thread can take the rest:
  ``serial_scan`` (one thread; it also writes the grand total, the tape's size);
* ``chunk_scan``: thread j rewrites its chunk as offsets, starting from its scanned sum.

The numpy launcher (launch.py) and the JAX GPU handlers (jax/tape_handler.py) both use them; the
CPU keeps its plain host loop.
"""
from __future__ import annotations

import adoffload as ado

CHUNK = 128                  # elements per thread and level
HANDLER_LEVELS = 4           # the JAX handler's fixed levels: a grid of 2**39 leaves 2**11 to the serial pass
SCAN_KERNELS = ("chunk_sums", "serial_scan", "chunk_scan")     # the GPU handlers' tables, in this order


@ado.kernel
def chunk_sums(a: ado.In[ado.i64], sums: ado.Out[ado.i64]):
    j = ado.tid()
    start = j * CHUNK
    end = min(start + CHUNK, a.shape[0])
    total = ado.i64(0)
    for k in range(start, end):
        total += a[k]
    sums[j] = total


@ado.kernel
def chunk_scan(a: ado.InOut[ado.i64], sums: ado.In[ado.i64]):
    j = ado.tid()
    start = j * CHUNK
    end = min(start + CHUNK, a.shape[0])
    acc = sums[j]
    for k in range(start, end):
        count = a[k]
        a[k] = acc
        acc += count


@ado.kernel
def serial_scan(a: ado.InOut[ado.i64], total: ado.Out[ado.i64]):
    acc = ado.i64(0)
    for k in range(a.shape[0]):
        count = a[k]
        a[k] = acc
        acc += count
    total[0] = acc


def level_sizes(n: int, levels: int | None = None) -> list[int]:
    """Lengths of the arrays scanned per level: ``n``, then one sum per chunk of the previous
    one; ``levels`` of them after ``n`` (None: until one chunk is left)."""
    sizes = [n]
    while (len(sizes) <= levels) if levels is not None else sizes[-1] > CHUNK:
        sizes.append(-(-sizes[-1] // CHUNK))
    return sizes


def exclusive_scan_on_device(counts, device) -> int:
    """Scan ``counts`` (1-D int64: a DeviceArray on a GPU ``device``, a numpy array on the host)
    in place into exclusive offsets; returns the total. Temporary buffers are freed on every path."""
    import numpy as np

    from .launch import launch
    from .runtime.dlpack import DeviceArray
    on_host = device.kind == "cpu"
    arrays = [counts]
    try:
        for m in level_sizes(counts.shape[0])[1:] + [1]:       # the sums of each level, and the total
            arrays.append(np.zeros(m, np.int64) if on_host else DeviceArray.empty(m, np.int64, device=device))
        sums, total = arrays[:-1], arrays[-1]
        for lower, upper in zip(sums, sums[1:]):
            launch(chunk_sums, (lower, upper), {}, grid=upper.shape[0], device=device)
        launch(serial_scan, (sums[-1], total), {}, grid=1, device=device)
        for lower, upper in reversed(list(zip(sums, sums[1:]))):
            launch(chunk_scan, (lower, upper), {}, grid=upper.shape[0], device=device)
        return int((total if on_host else total.to_numpy())[0])
    finally:
        if not on_host:
            for array in arrays[1:]:
                device.free(array.buffer)
