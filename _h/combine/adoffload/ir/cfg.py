"""Control-flow facts every pass asks for: reverse post-order and dominator sets."""
from __future__ import annotations

from .core import Block, Function


def reachable_blocks(fn: Function) -> list[Block]:
    """Blocks reachable from the entry, in reverse post-order."""
    seen, order = {fn.entry}, []
    stack = [(fn.entry, iter(fn.entry.successors))]
    while stack:
        block, successors = stack[-1]
        nxt = next((s for s in successors if s not in seen), None)
        if nxt is None:
            order.append(block)
            stack.pop()
        else:
            seen.add(nxt)
            stack.append((nxt, iter(nxt.successors)))
    order.reverse()
    return order


def dominator_sets(fn: Function) -> dict[Block, set[Block]]:
    """Each block's dominators (the simple iterative algorithm), for every block of ``fn``; a
    block without predecessors other than the entry is dominated only by itself."""
    preds = fn.predecessors()
    dom = {b: set(fn.blocks) for b in fn.blocks}
    dom[fn.entry] = {fn.entry}
    changed = True
    while changed:
        changed = False
        for b in fn.blocks[1:]:
            incoming = [dom[p] for p in preds[b]]
            new = (set.intersection(*incoming) if incoming else set()) | {b}
            if new != dom[b]:
                dom[b], changed = new, True
    return dom
