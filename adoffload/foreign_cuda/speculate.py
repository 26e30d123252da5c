"""Warp exchanges under a thread-dependent ``if``, made block-uniform by running the ``if`` on every thread.

CUDA reductions end with ``return warp == 0 ? warp_sum(v) : 0.0``: shuffles that only warp 0
reaches. Block kernels need every thread of a block at every exchange (uniformity.py), but
such a branch can simply be taken by all threads when its body has no effect besides its
values: a shuffle only reads lanes of the caller's own warp, so the other warps' extra
shuffles change nothing. ``speculate`` rewrites

    X: br c, T, J      (T .. exits to J only, entered only from X)
    J: p = phi [a, X], [b, E] ...

into ``X: br T`` and ``p = phi [select(c, b, a), E] ...``, which computes the same values for
the threads that took each side. It applies only when the body is *speculatable*: no stores,
atomics, barriers, allocas, loads (a load the thread would not have made could fault), integer
division by a variable, calls other than warp exchanges and pure math, and no branch in it that
depends on the thread (so every thread leaves it as the ones that entered did).
"""
from __future__ import annotations

from .. import collectives
from ..errors import DivergentBarrierError
from ..ir.builder import Builder
from ..ir.core import Block, Constant, Function, Instruction
from .uniformity import Divergence, describe, divergent_cooperation

_PURE_CALL_PREFIXES = ("llvm.fabs", "llvm.sqrt", "llvm.exp", "llvm.log", "llvm.sin", "llvm.cos", "llvm.pow",
                       "llvm.minnum", "llvm.maxnum", "llvm.fma", "llvm.fmuladd", "llvm.floor", "llvm.ceil",
                       "llvm.copysign", "llvm.smax", "llvm.smin", "llvm.umax", "llvm.umin", "llvm.abs",
                       "llvm.assume")
_PURE_LIBM = frozenset(f + suffix for f in ("sin", "cos", "tan", "exp", "log", "sqrt", "pow", "fabs", "fmin", "fmax",
                                            "tanh", "erf", "exp2", "log2", "log1p", "expm1", "atan2", "floor",
                                            "ceil", "fma", "copysign") for suffix in ("", "f"))
_EXCHANGES = frozenset({"shuffle", "lane_id", "warp_size", "warp_sum", "warp_max", "thread_rank"})
_DIVISIONS = frozenset({"sdiv", "udiv", "srem", "urem"})
MAX_ROUNDS = 64


def make_exchanges_uniform(fn: Function, tids, block, kernel: str) -> int:
    """Speculate the innermost speculatable branch around each divergent exchange until none is
    left; raise DivergentBarrierError for a barrier or an exchange that cannot be made uniform.
    Returns the number of branches speculated."""
    for rounds in range(MAX_ROUNDS):
        found = divergent_cooperation(fn, tids, block)
        if not found:
            return rounds
        inst, branches = found[0]
        info = Divergence(fn, tids, block)
        if collectives.parse(inst.callee.name)[0] == "sync_threads" or \
                not any(speculate(fn, branch, info) for branch in branches):
            raise DivergentBarrierError(describe(inst, branches[0], kernel))
    raise DivergentBarrierError(f"kernel '{kernel}': more than {MAX_ROUNDS} divergent branches around warp exchanges")


def speculate(fn: Function, branch: Instruction, info: Divergence) -> bool:
    """Let every thread run the body of ``branch`` (see the module docstring); False when it cannot."""
    if branch.opcode != "br" or len(branch.blocks) != 2:
        return False
    x = branch.parent
    condition = branch.operands[0]
    preds = fn.predecessors()
    for side, (body, join) in enumerate((branch.blocks, branch.blocks[::-1])):
        region = _body(body, join, x, preds)
        if region is None or not all(_speculatable(i, info) for b in region for i in b.instructions):
            continue
        taken_when = side == 0          # the body runs when the condition is true (then-side) or false
        for phi in join.phis:
            incoming = dict(zip((id(b) for b in phi.blocks), phi.operands))
            if id(x) not in incoming:
                continue
            skipped = incoming[id(x)]
            keep = [(v, b) for v, b in zip(phi.operands, phi.blocks) if b is not x]
            phi.operands, phi.blocks = [], []
            for value, b in keep:
                if b in region:
                    builder = Builder()
                    builder.position_before_terminator(b)
                    value = builder.select(condition, value, skipped) if taken_when else \
                        builder.select(condition, skipped, value)
                phi.operands.append(value)
                phi.blocks.append(b)
        branch.operands, branch.blocks = [], [body]
        return True
    return False


def _body(entry: Block, join: Block, x: Block, preds) -> set[Block] | None:
    """The blocks from ``entry`` up to ``join`` when ``entry`` is only entered from ``x`` and every
    path out of them goes to ``join`` (else None)."""
    if entry is join or preds[entry] != [x]:
        return None
    region, todo = set(), [entry]
    while todo:
        b = todo.pop()
        if b in region:
            continue
        region.add(b)
        for s in b.successors:
            if s is not join:
                todo.append(s)
    for b in region:
        if b is not entry and any(p not in region for p in preds[b]):
            return None
        if not b.successors:             # a return inside: the thread would have left
            return None
    return region


def _speculatable(inst: Instruction, info: Divergence) -> bool:
    op = inst.opcode
    if op in ("store", "atomicrmw", "cmpxchg", "fence", "alloca", "load", "invoke", "unreachable", "ret"):
        return False
    if op in _DIVISIONS and not (isinstance(inst.operands[1], Constant) and inst.operands[1].value not in (0, -1)):
        return False
    if op in ("br", "switch") and inst.operands and info.is_varying(inst.operands[0]):
        return False
    if op == "call":
        name = getattr(inst.callee, "name", "")
        parsed = collectives.parse(name)
        if parsed is not None:
            return parsed[0] in _EXCHANGES
        return name.startswith(_PURE_CALL_PREFIXES) or name in _PURE_LIBM
    return True
