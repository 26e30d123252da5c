"""The cooperative operations of block kernels as they appear in body IR (one table for all stages).

The front end (frontend/blocks.py) and the AD rules (enzyme/blocks.py) emit calls of
``@adoffload.<name>[.<f32|f64>]``; each code generation target defines them (codegen/blocks.py
for GPUs, codegen/host/block_split.py for the host CPU). Operand and result kinds: ``T`` the float type
of the suffix, ``i32``, ``i1``; ``void`` for none. Every one of them must be reached by all threads
of a block together (block-uniform control flow).
"""
from __future__ import annotations

PREFIX = "adoffload."

# name -> (result kind, operand kinds)
OPS: dict[str, tuple[str, tuple[str, ...]]] = {
    "sync_threads": ("void", ()),
    "lane_id": ("i32", ()),              # index in the warp
    "warp_size": ("i32", ()),            # 32 (NVIDIA, host CPU) or 64 (AMD, the cpu:wave64 host)
    "thread_rank": ("i32", ()),          # row-major index in the block
    "warp_sum": ("T", ("T",)),
    "warp_max": ("T", ("T",)),
    "block_sum": ("T", ("T",)),
    "block_max": ("T", ("T",)),
    "shuffle": ("T", ("T", "i32")),      # v of lane (src mod warp size)
    "shuffle_t": ("T", ("T", "i32")),    # transpose of shuffle: sum of v over the lanes whose src is me
    "block_broadcast": ("T", ("T", "i32")),   # v of thread src (src uniform)
    "warp_first_lane": ("i32", ("i1",)),      # lowest lane whose predicate holds, warp size if none
    "block_first_thread": ("i32", ("i1",)),   # lowest thread whose predicate holds, block size if none
    # bit k: the predicate of lane k of the caller's 32-lane segment (the warp on NVIDIA and the
    # host; half of a 64-lane AMD wavefront, as the CUDA header's shuffles): CUDA's __ballot_sync
    "warp_ballot": ("i32", ("i1",)),
}
# Operations whose result depends on other threads' operands (a data exchange).
EXCHANGES = frozenset(name for name, (_, operands) in OPS.items() if operands)
FLOAT_SUFFIXES = {"f32": "float", "f64": "double"}


def parse(callee_name: str) -> tuple[str, str | None] | None:
    """``adoffload.warp_sum.f32`` -> ("warp_sum", "f32"); ``adoffload.sync_threads`` -> ("sync_threads",
    None); None for any other name."""
    if not callee_name.startswith(PREFIX):
        return None
    rest = callee_name[len(PREFIX):]
    name, _, suffix = rest.partition(".")
    if name not in OPS:
        return None
    takes_float = "T" in (OPS[name][0],) + OPS[name][1]
    if takes_float != (suffix in FLOAT_SUFFIXES) or (not takes_float and suffix):
        return None
    return name, suffix or None


def callee(name: str, suffix: str | None = None) -> str:
    return PREFIX + name + (f".{suffix}" if suffix else "")
