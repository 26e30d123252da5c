"""Threading the forward sweep's last join straight into the reverse sweep.

A kernel that ends in an ``if``/``else`` (``basic_if_quad``: ``if s >= 0: x = (-b + sqrt(s)) /
(2a) ... else: x = 0``) joins its arms in a block that only branches on to the end; the reverse
sweep then starts by deciding the same branch again (reverse.py ``_dispatch``) and enters the
reverse of the arm taken. In between, each arm's values are out of scope: the reverse
recomputes them (a square root and divisions here) and the threads of a warp diverge twice.
LLVM's jump threading would join each arm to its reverse, but it does not run on GPU targets
(branches there may diverge).

``thread_tail`` does it on the derived function: each forward predecessor ``p`` of that join
branches directly to the reverse edge block of ``p`` (where the dispatch would have led), so
the arm dominates its own reverse and LLVM's CSE reuses what the arm computed. Applied only
when it changes nothing else: the join and every block after it up to the end are bare
branches (no phi, no instruction to reverse), outside loops, and nothing the edges use is
computed in the reverse blocks that are bypassed.
"""
from __future__ import annotations

from ..ir.core import Block
from ..analysis.control_flow import reachable_blocks


def _bare(block: Block) -> bool:
    return len(block.instructions) == 1 and block.terminator is not None and len(block.terminator.blocks) == 1


def thread_tail(rev) -> bool:
    """Retarget the last join's predecessors to their reverse edges (see the module docstring);
    returns whether it did. ``rev``: the reverse engine after the sweep is built."""
    chain, block = [rev.exit], rev.exit
    while len(rev.preds[block]) == 1 and _bare(rev.preds[block][0]):
        block = rev.preds[block][0]
        chain.append(block)
    join = block
    edges = rev.reverse_edges.get(join)
    if edges is None or not _bare(join) or rev.exit.instructions[:-1] or rev.loops.in_loop(join):
        return False
    saved = {p: list(p.terminator.blocks) for p in edges}
    for p, edge in edges.items():
        p.terminator.blocks = [edge if t is join else t for t in p.terminator.blocks]
    live = set(reachable_blocks(rev.fn))
    dropped = {inst for b in rev.fn.blocks if b not in live for inst in b.instructions}
    if any(o in dropped for b in live for inst in b.instructions for o in inst.operands):
        for p, blocks in saved.items():      # an edge uses a value of the bypassed reverse: keep the dispatch
            p.terminator.blocks = blocks
        return False
    rev.fn.blocks = [b for b in rev.fn.blocks if b in live]
    return True
