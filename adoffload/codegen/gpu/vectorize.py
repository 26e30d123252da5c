"""How many elements each GPU thread handles: the launch-side policy for abi's k-per-thread entry.

With k > 1 a rank-1 GPU entry runs the linear ids ``linear*k .. linear*k+k-1`` per thread
and, when every array is 16-byte aligned, LLVM merges their accesses into 128-bit loads and
stores (``ld.global.v4.f32``, ``v2.f64``) -- what XLA's fused loops do. Measured on the H200
(benchmarks/results/2026-11-30-h200-run4): it pays only when

* one thread's k elements fill exactly one 128-bit access per array (k = 16 bytes / the
  widest element: 4 for f32/i32, 2 for f64/i64), so a warp's accesses stay contiguous; and
* every access of the fast path is such a vector access. A body that does not vectorize
  (branches, libdevice calls, bounds checks that stay) turns k > 1 into strided scalar
  accesses, up to 2x slower than one element per thread. ``choose_compiled`` builds both
  and keeps k only when the k build has no more scalar global accesses than the k = 1 one
  (its tail loop), on NVPTX; AMDGPU keeps k = 1 (never measured).

Rules of ``elements_per_thread`` (first match wins):

=============================================  ==========================================
grid rank 2 or 3                               1 (the entry refuses k > 1)
``ADOFFLOAD_ELEMENTS_PER_THREAD=N`` is set     N for every rank-1 launch (1 disables; A/B),
                                               used even when it does not vectorize
no array parameter                             1
``total >= k * MIN_THREADS``                   k = 16 // widest array element (of the arrays
                                               indexed by the thread id, where known)
otherwise                                      1
=============================================  ==========================================

Launchers then call ``choose_compiled`` and launch ``launch_threads(compiled, total, resident)``
threads (``ceil(total / k)``, or one resident wave for grid-stride reduction entries); the slots
still carry the logical grid.
"""
from __future__ import annotations

import os
import re

from ...errors import CompilationError

ENV_VAR = "ADOFFLOAD_ELEMENTS_PER_THREAD"
VECTOR_BYTES = 16                    # one 128-bit access
# Threads a launch must keep after dividing by k: about one full wave of an H200 (132 SMs x
# 2048 resident threads = 270,336), so the GPU stays full.
MIN_THREADS = 1 << 18
_SCALAR_GLOBAL = re.compile(r"\b(?:ld|st)\.global(?:\.nc)?\.(?:b|f|u|s)\d+\b")
_VECTOR_GLOBAL = re.compile(r"\b(?:ld|st)\.global(?:\.nc)?\.v[24]\.")

MAX_ELEMENTS_PER_THREAD = 16        # the most logical threads one GPU thread runs (abi's k-per-thread entries)


def forced_elements_per_thread() -> int | None:
    """The value of ``ADOFFLOAD_ELEMENTS_PER_THREAD`` (None when unset or empty)."""
    raw = os.environ.get(ENV_VAR, "").strip()
    if not raw:
        return None
    try:
        k = int(raw)
    except ValueError:
        k = 0
    if not 1 <= k <= MAX_ELEMENTS_PER_THREAD:
        raise CompilationError(f"{ENV_VAR}={raw!r}: expected an integer from 1 to {MAX_ELEMENTS_PER_THREAD} "
                               f"(1 disables several elements per thread)")
    return k


def vector_elements(signature, streamed=None) -> int:
    """k that makes one thread's elements of the widest array exactly one 128-bit access.

    ``streamed``: indices of the params indexed by the thread id (``Kernel.thread_indexed``);
    when any of them is an array, only those count, so a reduction's one-element total
    (``vsum: i64`` beside ``vec: i32``) does not halve the vector of the array it streams."""
    arrays = [(k, p) for k, p in enumerate(signature.params) if p.is_array]
    chosen = [p for k, p in arrays if streamed and k in streamed] or [p for _, p in arrays]
    sizes = [p.dtype.dtype.itemsize for p in chosen]
    return max(1, VECTOR_BYTES // max(sizes)) if sizes else 1


def elements_per_thread(signature, total: int, streamed=None) -> int:
    """The k to try for a GPU launch of ``total`` logical threads (see the rules above)."""
    if signature.grid_rank != 1:
        return 1
    forced = forced_elements_per_thread()
    if forced is not None:
        return forced
    k = vector_elements(signature, streamed)
    return k if k > 1 and total >= k * MIN_THREADS else 1


def streamed_params(kernel) -> set[int]:
    """Param indices a kernel indexes by its thread id (for ``elements_per_thread``)."""
    return {param for param, _dim, _axis in kernel.thread_indexed}


def choose_compiled(kernel, target: str, k: int, **options):
    """``kernel.compiled(target, **options)`` with ``elements_per_thread=k`` when that build's
    fast path is all vector accesses (or k is forced by the environment), else with k = 1."""
    one = kernel.compiled(target, **options)
    if k == 1:
        return one
    many = kernel.compiled(target, elements_per_thread=k, **options)
    if forced_elements_per_thread() is not None or (target == "nvptx" and vectorized(many.ptx, one.ptx)):
        return many
    return one


def vectorized(ptx_k: str, ptx_one: str) -> bool:
    """Whether a k-per-thread build vectorized: it has vector global accesses, and no more
    scalar ones than the one-element build (those are its guarded tail loop)."""
    return bool(_VECTOR_GLOBAL.search(ptx_k)) and \
        len(_SCALAR_GLOBAL.findall(ptx_k)) <= len(_SCALAR_GLOBAL.findall(ptx_one))


def threads(total: int, k: int) -> int:
    """GPU threads to launch for ``total`` logical threads at k per thread."""
    return -(-int(total) // int(k))


def launch_threads(compiled, total: int, resident: int | None = None) -> int:
    """GPU threads to launch for ``compiled``: ``threads(total, k)``, capped at ``resident`` (the
    threads the GPU holds at once: ``GpuFunction.resident_threads``) when the entry loops over
    the grid (``compiled.grid_stride``, codegen/gpu/grid_stride.py) -- one full wave, each thread
    looping over several groups, one atomic per block."""
    count = threads(total, compiled.elements_per_thread)
    if getattr(compiled, "grid_stride", False) and resident:
        count = min(count, int(resident))
    return count
