"""Static cost counts of a kernel body, for ``adoffload compile --stats`` (cli.py).

What makes an adjoint slower than its primal is mostly memory traffic the primal does not
have: atomics (each one a read-modify-write at L2 on a GPU), a tape (bytes written in the
forward sweep and read back), and loads the reverse sweep repeats to recompute values. These
are counted statically, per thread: an operation inside a loop counts once "per iteration",
one outside every loop "per thread".

* ``ir_stats(body)``: atomics of the final body (after AD and canonicalization), by operation
  and type; uniform-address adds (``@adoffload.uniform_fadd``, combined per warp and block on
  GPUs) apart. The status record's ``atomicrmw xchg`` (a failure report) is not counted.
* ``ReverseStats`` (filled by the reverse engine, reverse.py): the tape (static bytes or
  dynamic) and the loads the reverse sweep re-executes, as the engine emitted them (LLVM may
  still merge some).
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from ..ir.core import Function, Instruction
from ..analysis.address_classes import UNIFORM_ADD_PREFIX
from ..analysis.control_flow import Dominators, LoopInfo, reachable_blocks

PER_ITERATION, PER_THREAD = "per iteration", "per thread"


@dataclass
class ReverseStats:
    """What the reverse engine knows about one adjoint (see the module docstring)."""
    tape_bytes: int | None = 0           # static tape bytes per thread; None: dynamic (counting kernel)
    recomputed_loads: Counter = field(default_factory=Counter)    # PER_ITERATION / PER_THREAD -> count
    deferred_sites: int = 0              # updates summed in a register (deferred.py)
    deferred_adds: int = 0               # ... and the adds into memory they became


@dataclass
class BodyStats:
    atomics: Counter                     # ("fadd double", PER_ITERATION) -> count
    uniform_adds: Counter                # ("double", PER_THREAD) -> count
    loads: Counter                       # PER_ITERATION / PER_THREAD -> loads of memory (not the stack)


def _root(p):
    while isinstance(p, Instruction) and p.opcode in ("getelementptr", "bitcast", "addrspacecast"):
        p = p.operands[0]
    return p


def ir_stats(body: Function) -> BodyStats:
    """Atomics and uniform adds of ``body``, per iteration (inside a loop) or per thread."""
    blocks = reachable_blocks(body)
    loops = LoopInfo(blocks, Dominators(blocks))
    status = body.args[-1] if body.args and body.args[-1].name == "status" else None
    atomics, uniform, loads = Counter(), Counter(), Counter()
    for block in blocks:
        where = PER_ITERATION if loops.in_loop(block) else PER_THREAD
        for inst in block.instructions:
            if inst.opcode in ("atomicrmw", "cmpxchg"):
                root = _root(inst.operands[0])
                if status is not None and root is status:
                    continue
                op = inst.op if inst.opcode == "atomicrmw" else "cmpxchg"
                atomics[(f"{op} {inst.operands[-1].type}", where)] += 1
            elif inst.opcode == "call" and getattr(inst.callee, "name", "").startswith(UNIFORM_ADD_PREFIX):
                uniform[(str(inst.operands[1].type), where)] += 1
            elif inst.opcode == "load" and not (isinstance(_root(inst.operands[0]), Instruction)
                                                and _root(inst.operands[0]).opcode == "alloca"):
                loads[where] += 1
    return BodyStats(atomics, uniform, loads)


def format_counts(counts: Counter) -> str:
    """``3 fadd double per iteration, 3 per thread`` style, or ``none``."""
    if not counts:
        return "none"
    parts = []
    for kind in sorted({k for k, _ in counts}):
        where = [f"{counts[(kind, w)]} {w}" for w in (PER_ITERATION, PER_THREAD) if counts[(kind, w)]]
        parts.append(f"{kind}: {', '.join(where)}")
    return "; ".join(parts)


__all__ = ["ReverseStats", "BodyStats", "ir_stats", "format_counts", "PER_ITERATION", "PER_THREAD"]
