"""How many elements each GPU thread handles: the launch-side policy for abi's k-per-thread entry.

With k > 1 a rank-1 GPU entry runs the linear ids ``linear*k .. linear*k+k-1`` per thread
and, when every array is 16-byte aligned, LLVM merges their accesses into 128-bit loads and
stores (``ld.global.v4.f32``, ``v2.f64``) -- what XLA's fused loops do. It pays only while
the launch still has enough threads to fill the GPU, so small grids keep k = 1.

Rules (first match wins):

=============================================  ==========================================
grid rank 2 or 3                               1 (the entry refuses k > 1)
``ADOFFLOAD_ELEMENTS_PER_THREAD=N`` is set     N for every rank-1 launch (1 disables; A/B)
``total >= VECTOR_ELEMENTS * MIN_THREADS``     VECTOR_ELEMENTS
otherwise                                      1
=============================================  ==========================================

Launchers compile with ``elements_per_thread=k`` and launch ``threads(total, k)`` threads;
the slots still carry the logical grid.
"""
from __future__ import annotations

import os

from ..errors import CompilationError

ENV_VAR = "ADOFFLOAD_ELEMENTS_PER_THREAD"
# Four 32-bit elements = one 128-bit access (two for 64-bit elements, merged pairwise).
VECTOR_ELEMENTS = 4
# Threads a launch must keep after dividing by k: about one full wave of an H200 (132 SMs x
# 2048 resident threads = 270,336), so the GPU stays full. 4 * 2^18 = 2^20 elements.
MIN_THREADS = 1 << 18


def forced_elements_per_thread() -> int | None:
    """The value of ``ADOFFLOAD_ELEMENTS_PER_THREAD`` (None when unset or empty)."""
    raw = os.environ.get(ENV_VAR, "").strip()
    if not raw:
        return None
    from .abi import MAX_ELEMENTS_PER_THREAD
    try:
        k = int(raw)
    except ValueError:
        k = 0
    if not 1 <= k <= MAX_ELEMENTS_PER_THREAD:
        raise CompilationError(f"{ENV_VAR}={raw!r}: expected an integer from 1 to {MAX_ELEMENTS_PER_THREAD} "
                               f"(1 disables several elements per thread)")
    return k


def elements_per_thread(signature, total: int) -> int:
    """k for a GPU launch of ``total`` logical threads of a kernel with ``signature`` (see the
    rules above). ``signature`` needs only ``grid_rank``."""
    if signature.grid_rank != 1:
        return 1
    forced = forced_elements_per_thread()
    if forced is not None:
        return forced
    return VECTOR_ELEMENTS if total >= VECTOR_ELEMENTS * MIN_THREADS else 1


def threads(total: int, k: int) -> int:
    """GPU threads to launch for ``total`` logical threads at k per thread."""
    return -(-int(total) // int(k))
