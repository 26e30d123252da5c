"""The exclusive prefix sum of a dynamic tape's per-thread byte counts, on the device.

A reverse kernel with a dynamic tape (enzyme/tape.py) needs each thread's offset into the tape:
the exclusive prefix sum of the counts its counting kernel writes, one per thread. Copying 2**24
counts to the host to sum them there took longer than the kernels themselves (docs/cuda.md), so
GPU launches scan them where they are, in place, with three kernels of our own language (plain functions here; ``kernel.scan_kernels()`` compiles them):

* ``chunk_sums``: thread j sums ``a[j*CHUNK : (j+1)*CHUNK]`` into ``sums[j]``;
* the sums are scanned the same way, level after level, until one thread can take the rest:
  ``serial_scan`` (one thread; it also writes the grand total, the tape's size);
* ``chunk_scan``: thread j rewrites its chunk as offsets, starting from its scanned sum.

The numpy launcher (launch.py) and the JAX GPU handlers (jax/tape_handler.py) both use them; the
CPU keeps its plain host loop. This module imports no kernel machinery: the launcher passes the
compiled kernels and its own launch function in (the launcher itself needs the scan).
"""
from __future__ import annotations

from ..language.builtins import tid
from ..language.types import In, InOut, Out, i64

CHUNK = 128                  # elements per thread and level
HANDLER_LEVELS = 4           # the JAX handler's fixed levels: a grid of 2**39 leaves 2**11 to the serial pass
SCAN_KERNELS = ("chunk_sums", "serial_scan", "chunk_scan")     # the GPU handlers' tables, in this order


def chunk_sums(a: In[i64], sums: Out[i64]):
    j = tid()
    start = j * CHUNK
    end = min(start + CHUNK, a.shape[0])
    total = i64(0)
    for k in range(start, end):
        total += a[k]
    sums[j] = total


def chunk_scan(a: InOut[i64], sums: In[i64]):
    j = tid()
    start = j * CHUNK
    end = min(start + CHUNK, a.shape[0])
    acc = sums[j]
    for k in range(start, end):
        count = a[k]
        a[k] = acc
        acc += count


def serial_scan(a: InOut[i64], total: Out[i64]):
    acc = i64(0)
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


def exclusive_scan_on_device(counts, device, kernels: dict, launch) -> int:
    """Scan ``counts`` (1-D int64: a DeviceArray on a GPU ``device``, a numpy array on the host)
    in place into exclusive offsets; returns the total. ``kernels``: ``kernel.scan_kernels()``;
    ``launch``: ``launch.launch``. Temporary buffers are freed on every path."""
    import numpy as np

    from ..runtime.dlpack import DeviceArray
    chunk_sums, serial_scan, chunk_scan = (kernels[name] for name in SCAN_KERNELS)
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
