"""Control-flow facts every pass asks for: reverse post-order and dominator sets."""
from __future__ import annotations

from .core import Block, Function


def split_before(fn: Function, inst, suffix: str) -> Block:
    """Move ``inst`` and what follows it in its block to a new block ``<block>.<suffix>`` placed right
    after it (the successors' phis now name the new block); the old block is left without a terminator."""
    block = inst.parent
    at = block.instructions.index(inst)
    rest = Block(fn._unique_block_name(f"{block.name}.{suffix}"), parent=fn)
    for moved in block.instructions[at:]:
        rest.append(moved)
    del block.instructions[at:]
    for succ in rest.successors:
        for phi in succ.phis:
            phi.blocks = [rest if b is block else b for b in phi.blocks]
    fn.blocks.insert(fn.blocks.index(block) + 1, rest)
    return rest


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
