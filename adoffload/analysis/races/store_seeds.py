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

from ...errors import DifferentiationError
from ...ir.core import Argument, Block, Constant, Function, Instruction, Value

_BLOCK_LEVEL = frozenset({"udiv", "sdiv", "lshr", "ashr"})      # by a constant: the block's index
SEED_EXCHANGE = "d.seed_taken"      # the name of the reverse sweep's exchange (soundness.py recognizes it)


def stored_by_the_block(pointer: Value, thread_args: set, block: Block, dom, preds) -> bool:
    """Whether every thread of a block that reaches ``block`` stores the element ``pointer`` addresses,
    with no thread-equality guard (see the module docstring)."""
    return not _uses_lane(pointer, thread_args, set()) and not _one_thread_guard(block, thread_args, dom, preds)


def _uses_lane(v: Value, thread_args: set, seen: set) -> bool:
    """Whether ``v`` depends on a thread index other than through a division by a constant (calls,
    such as the lane id, count as depending, and so do atomics, whose results differ per thread --
    a slot handed out by ``atomic_add`` -- and loads of a thread's own stack memory)."""
    if v in thread_args:
        return True
    if not isinstance(v, Instruction) or v in seen:
        return False
    seen.add(v)
    if v.opcode in _BLOCK_LEVEL and isinstance(v.operands[1], Constant):
        return False
    if v.opcode in ("call", "atomicrmw", "cmpxchg") or v.opcode == "load" and _on_the_stack(v.operands[0]):
        return True
    return any(_uses_lane(o, thread_args, seen) for o in v.operands if isinstance(o, Instruction | Argument))


def _on_the_stack(pointer: Value) -> bool:
    while isinstance(pointer, Instruction) and pointer.opcode in ("getelementptr", "bitcast"):
        pointer = pointer.operands[0]
    return isinstance(pointer, Instruction) and pointer.opcode == "alloca"


def dominating_tests(block: Block, dom, preds):
    """``(condition, holds)`` for each two-way branch whose side ``block`` runs on only: the side is
    entered from the branch alone and dominates ``block``, so ``condition`` is ``holds`` there."""
    for head in preds:
        term = head.instructions[-1] if head.instructions else None
        if term is None or term.opcode != "br" or len(term.blocks) != 2 or term.blocks[0] is term.blocks[1]:
            continue
        for taken, holds in ((term.blocks[0], True), (term.blocks[1], False)):
            if preds.get(taken) == [head] and dom.dominates(taken, block):
                yield term.operands[0], holds


def _one_thread_guard(block: Block, thread_args: set, dom, preds) -> bool:
    """Whether ``block`` runs only where an equality test on a thread index held."""
    return any(_thread_equality(cond, holds, thread_args) for cond, holds in dominating_tests(block, dom, preds))


def _thread_equality(cond: Value, holds: bool, thread_args: set) -> bool:
    """Whether ``cond`` being ``holds`` implies an equality between a thread-dependent value and another."""
    if not isinstance(cond, Instruction):
        return False
    if cond.opcode == "icmp" and cond.predicate == ("eq" if holds else "ne"):
        return any(_uses_lane(o, thread_args, set()) for o in cond.operands)
    if holds and (cond.opcode == "and" or cond.opcode == "select" and is_false(cond.operands[2])):
        return any(_thread_equality(o, True, thread_args) for o in cond.operands[:2])
    return False


def is_false(v: Value) -> bool:
    return isinstance(v, Constant) and v.value in (0, False)


def check_stores_by_the_block(fn: Function, thread_args: list, stored_arrays: set, shared=(),
                              mode: str = "reverse") -> None:
    """Refuse a float store that every thread of a block makes to one element (``stored_by_the_block``)
    of an array in ``stored_arrays`` (the active arrays of the launch, not the ``shared`` ones) with a value
    that may differ between those threads: a data race. The host keeps the last thread's value, a GPU
    any one's, and the reverse sweep hands the seed to whichever thread exchanges it first (not the
    writer whose value survived): the gradient would silently disagree with the primal. In forward
    ``mode`` the value and its tangent are two stores, which the warps of a GPU block may interleave,
    so the tangent kept need not be the surviving value's. The value is
    compared with analysis/uniformity.py's analysis, taking the divisions of the thread indices
    that the address makes as the block; where it divides an index two ways, or also uses it
    undivided, nothing is refused."""
    from ..uniformity import Divergence
    from ..address_classes import pointer_roots
    from ..control_flow import Dominators, predecessor_map, reachable_blocks
    blocks = reachable_blocks(fn)
    dom, preds, analyses = Dominators(blocks), predecessor_map(blocks), {}
    threads = set(thread_args)
    for block in blocks:
        for inst in block.instructions:
            if inst.opcode != "store" or not inst.operands[0].type.is_float:
                continue
            value, pointer = inst.operands
            roots = pointer_roots(pointer)
            if not roots or not roots <= stored_arrays or not stored_by_the_block(pointer, threads, block, dom, preds):
                continue
            divisors = _divisors(pointer, threads)
            if divisors is None:
                continue
            extents = tuple(divisors.get(t, 0) for t in thread_args)      # 0: the address ignores that index
            if extents not in analyses:
                analyses[extents] = Divergence(fn, list(thread_args), extents, shared)
            if analyses[extents].is_varying(value):
                where = f" at {inst.location}" if inst.location is not None else ""
                raise DifferentiationError(
                    f"cannot differentiate the store{where} in {mode} mode: all the threads whose index "
                    f"divides to one value (every thread of a block, for an index made from block_id()) store "
                    f"to one element there a value that may differ between them. That is a data race "
                    f"(the host keeps the last thread's value, a GPU any one's), and the derivative cannot "
                    f"tell which thread's value survived. Store from one thread (if ado.thread_id() == 0:) or "
                    f"store a value alike for the whole block (a block_sum result)")


def _divisors(pointer: Value, threads: set) -> dict | None:
    """{thread index: d} for the ``udiv t, d`` / ``lshr t, log2 d`` (``ashr``: ``t // d`` in our
    language) of thread indices in an address, or None where one index is divided two ways or
    appears otherwise than divided."""
    found: dict = {}
    todo, seen = [pointer], set()
    while todo:
        v = todo.pop()
        if not isinstance(v, Instruction) or id(v) in seen:
            continue
        seen.add(id(v))
        for o in v.operands:
            if o in threads:
                k = v.operands[1] if len(v.operands) == 2 else None
                if not isinstance(k, Constant) or v.operands[0] is not o or v.opcode not in ("udiv", "lshr", "ashr"):
                    return None
                d = k.value if v.opcode == "udiv" else 1 << k.value        # thread indices are >= 0
                if found.setdefault(o, d) != d:
                    return None
        todo.extend(o for o in v.operands if isinstance(o, Instruction))
    return found
