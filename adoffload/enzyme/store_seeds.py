"""Which stores of a kernel other threads of its launch make to the same element, so that the reverse
sweep takes such a store's seed with one atomic exchange (reverse.py) instead of a load and a store of
zero, which would hand the seed to every thread that loads it before the first zero lands (on a GPU
all lanes of a warp at once: the gradient times the threads that store, every thread writing its
block's result, `out[blockIdx.x] = total`).

Positive evidence only, so that stores whose address the analysis merely cannot prove the thread's own
(a 2-D stencil's `v[i * nx + j]`) keep the plain load and store, and forward-over-reverse: the index
uses the thread indices through a division by a constant (`blockIdx`) or not at all, so every thread of
a block that stores stores that element; and no equality test on a thread index guards the store
(`if (threadIdx.x == 0)`: one writer per block)."""
from __future__ import annotations

from ..ir.core import Argument, Block, Constant, Instruction, Value

_BLOCK_LEVEL = frozenset({"udiv", "sdiv", "lshr", "ashr"})      # by a constant: the block's index
SEED_EXCHANGE = "d.seed_taken"      # the name of the reverse sweep's exchange (soundness.py recognizes it)


def stored_by_the_block(pointer: Value, thread_args: set, block: Block, dom, preds) -> bool:
    """Whether every thread of a block that reaches ``block`` stores the element ``pointer`` addresses,
    with no thread-equality guard (see the module docstring)."""
    return not _uses_lane(pointer, thread_args, set()) and not _one_thread_guard(block, thread_args, dom, preds)


def _uses_lane(v: Value, thread_args: set, seen: set) -> bool:
    """Whether ``v`` depends on a thread index other than through a division by a constant (calls,
    such as the lane id, count as depending)."""
    if v in thread_args:
        return True
    if not isinstance(v, Instruction) or v in seen:
        return False
    seen.add(v)
    if v.opcode in _BLOCK_LEVEL and isinstance(v.operands[1], Constant):
        return False
    if v.opcode == "call":
        return True
    return any(_uses_lane(o, thread_args, seen) for o in v.operands if isinstance(o, Instruction | Argument))


def _one_thread_guard(block: Block, thread_args: set, dom, preds) -> bool:
    """Whether ``block`` runs only where an equality test on a thread index held."""
    for head in preds:
        term = head.instructions[-1] if head.instructions else None
        if term is None or term.opcode != "br" or len(term.blocks) != 2 or term.blocks[0] is term.blocks[1]:
            continue
        for taken, equal in ((term.blocks[0], True), (term.blocks[1], False)):
            if preds.get(taken) == [head] and dom.dominates(taken, block) and \
                    _thread_equality(term.operands[0], equal, thread_args):
                return True
    return False


def _thread_equality(cond: Value, holds: bool, thread_args: set) -> bool:
    """Whether ``cond`` being ``holds`` implies an equality between a thread-dependent value and another."""
    if not isinstance(cond, Instruction):
        return False
    if cond.opcode == "icmp" and cond.predicate == ("eq" if holds else "ne"):
        return any(_uses_lane(o, thread_args, set()) for o in cond.operands)
    if holds and (cond.opcode == "and" or cond.opcode == "select" and _is_false(cond.operands[2])):
        return any(_thread_equality(o, True, thread_args) for o in cond.operands[:2])
    return False


def _is_false(v: Value) -> bool:
    return isinstance(v, Constant) and v.value in (0, False)
