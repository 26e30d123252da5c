"""Barrier intervals of a block-kernel body, for the race check (shared.py).

A barrier (``sync_threads``, and the block operations, which hold barriers on every target) ends an
interval. A *piece* is the code of a block between two of its barriers; an interval *starts* at the
entry or right after a barrier, and its *region* is every piece that start reaches without passing
another barrier. Two accesses may run in one interval when a start's region holds both, unless the
block-uniform branches that run at most once per interval (on no barrier-free cycle) separate
them: all threads of a block take the same side of each, so one choice of sides must reach both
(a loop around a barrier: its exit and its next trip; an inner loop's exit followed by the outer
loop's exit, and the inner loop's next trip or the outer loop's: no choice reaches both).
"""
from __future__ import annotations

import itertools

from ...language import collectives
from ...ir.core import Block, Function, Instruction

# Calls after which every thread of the block has finished what it did before (they hold barriers).
BOUNDARIES = frozenset({"sync_threads", "block_sum", "block_max", "block_broadcast", "block_first_thread"})
_MAX_CHOSEN = 8             # uniform branches of one interval whose sides are enumerated together


def is_boundary(inst: Instruction) -> bool:
    if inst.opcode != "call":
        return False
    parsed = collectives.parse(getattr(inst.callee, "name", ""))
    return parsed is not None and parsed[0] in BOUNDARIES


class Intervals:
    """Pieces, interval starts and regions of ``fn``; ``unstable``: blocks on barrier-free cycles
    (``never_taken(pred, block, succ)``: ``block`` entered from ``pred`` never goes on to ``succ``,
    so no cycle takes those two edges in a row: shared_values.ValueSets.never_taken)."""

    def __init__(self, fn: Function, never_taken=None):
        self.pieces = {b: sum(map(is_boundary, b.instructions)) for b in fn.blocks}
        self.regions: dict[tuple, set] = {}
        self.starts: dict[tuple, set] = {}
        for start in [(fn.entry, 0)] + [(b, k) for b in fn.blocks for k in range(1, self.pieces[b] + 1)]:
            region = self._reach(start, None)
            self.regions[start] = region
            for node in region:
                self.starts.setdefault(node, set()).add(start)
        self.unstable = _on_cycles([b for b in fn.blocks if not self.pieces[b]], never_taken)
        self._sides: dict[tuple, dict] = {}
        self._branches: dict[tuple, list] = {}       # per start: its uniform branches run once per interval
        self._runs: dict[tuple, list] = {}           # per start: the pieces reached under each choice of their sides
        self._avoiding: dict[tuple, set] = {}        # (start, piece): the pieces reached without passing it
        self._after: dict[tuple, set] = {}           # piece: the pieces reached after it in its interval

    def node(self, inst: Instruction) -> tuple:
        block = inst.parent
        return block, sum(map(is_boundary, block.instructions[:block.instructions.index(inst)]))

    def _reach(self, start: tuple, banned) -> set:
        """Pieces reachable from ``start`` without passing a barrier or the edge(s) ``banned``."""
        banned = banned if isinstance(banned, (set, frozenset)) else {banned}
        seen, todo = set(), [start]
        while todo:
            node = todo.pop()
            if node in seen:
                continue
            seen.add(node)
            b, k = node
            if k == self.pieces[b]:
                todo.extend((s, 0) for s in b.successors if (b, s) not in banned)
        return seen

    def settle(self, divergence) -> None:
        """Which uniform branch sides each piece needs, per start (``divergence``: the uniformity analysis)."""
        for start, region in self.regions.items():
            needs: dict[tuple, set] = {}
            branches = self._branches.setdefault(start, [])
            for b, k in region:
                term = b.terminator
                if k != self.pieces[b] or term is None or term.opcode != "br" or len(term.blocks) != 2 \
                        or term.blocks[0] is term.blocks[1] or b in self.unstable \
                        or divergence.is_varying(term.operands[0]):
                    continue
                branches.append(b)
                for side, target in zip((True, False), term.blocks):
                    for node in region - self._reach(start, (b, target)):
                        needs.setdefault(node, set()).add((id(b), side))
            self._sides[start] = needs

    def together(self, a: tuple, b: tuple) -> bool:
        """Whether pieces ``a`` and ``b`` may run in one interval (after ``settle``): no uniform
        branch puts them on different sides, and one choice of sides of all of them reaches both
        (the exit of an inner loop's last trip and the next trip of the outer loop: two branches)."""
        for start in self.starts.get(a, set()) & self.starts.get(b, set()):
            needs = self._sides.get(start, {})
            na, nb = needs.get(a, set()), needs.get(b, set())
            if not any((branch, not side) in nb for branch, side in na) \
                    and any(a in run and b in run for _, run in self._choices(start)):
                return True
        return False

    def same_instance(self, a: Instruction, b: Instruction, definition: Instruction) -> bool:
        """Whether two threads at ``a`` and at ``b`` in one interval have the same instance of
        ``definition`` (a value alike for the block, on no barrier-free cycle): under each choice of
        sides of the uniform branches that reaches both, it runs before both on every path, or
        before neither on any. (A loop whose barrier lies between its counter's uses: the write
        after the barrier uses trip k's counter, the read before the next barrier trip k + 1's.)"""
        d, na, nb = self.node(definition), self.node(a), self.node(b)
        for start in self.starts.get(na, set()) & self.starts.get(nb, set()):
            if d not in self.regions[start]:
                continue
            for banned, run in self._choices(start):
                if na in run and nb in run and d in run:        # (where it does not run, neither has a new one)
                    first = self._order(start, banned, d, definition, a)
                    if first is None or first != self._order(start, banned, d, definition, b):
                        return False
        return True

    def _order(self, start: tuple, banned: frozenset, d: tuple, definition: Instruction,
               x: Instruction) -> bool | None:
        """True: ``definition`` (in piece ``d``) runs before ``x`` on every path from ``start`` that
        avoids the edges ``banned``; False: on none; None: on some."""
        node = self.node(x)
        if node == d:
            block = x.parent.instructions
            return block.index(definition) < block.index(x)
        key = (start, banned, d)
        if key not in self._avoiding:
            self._avoiding[key] = self._pieces_from([start], d, banned)
        if node not in self._avoiding[key]:
            return True
        if (d, banned) not in self._after:
            b, k = d
            self._after[(d, banned)] = self._pieces_from([(s, 0) for s in b.successors if (b, s) not in banned],
                                                         None, banned) if k == self.pieces[b] else set()
        return False if node not in self._after[(d, banned)] else None

    def _pieces_from(self, todo: list, avoid, banned: frozenset) -> set:
        """Pieces reachable from ``todo`` without passing a barrier, an edge of ``banned`` or piece ``avoid``."""
        seen = set()
        while todo:
            n = todo.pop()
            if n in seen or n == avoid:
                continue
            seen.add(n)
            b, k = n
            if k == self.pieces[b]:
                todo.extend((s, 0) for s in b.successors if (b, s) not in banned)
        return seen

    def _choices(self, start: tuple) -> list:
        """(banned edges, pieces reached) from ``start`` under each choice of sides of its uniform
        branches (one run: all threads of a block take one side of each, at most once in the
        interval); with more than _MAX_CHOSEN branches, the whole region."""
        if start not in self._runs:
            branches = self._branches.get(start, [])
            if len(branches) > _MAX_CHOSEN:
                self._runs[start] = [(frozenset(), self.regions[start])]
            else:
                runs = []
                for sides in itertools.product((True, False), repeat=len(branches)):
                    banned = frozenset((b, b.terminator.blocks[1 if side else 0]) for b, side in zip(branches, sides))
                    runs.append((banned, self._reach(start, banned)))
                self._runs[start] = runs
        return self._runs[start]


def _on_cycles(blocks: list[Block], never_taken=None) -> set[Block]:
    """The blocks of ``blocks`` that lie on a cycle of ``blocks`` that ``never_taken`` allows (a walk
    over edges: entering a block from one predecessor may rule out some of its exits)."""
    inside = set(blocks)
    found = set()
    for b in blocks:
        seen, todo = set(), [s for s in b.successors if s in inside]
        while todo:
            x = todo.pop()
            if x not in seen:
                seen.add(x)
                todo.extend(s for s in x.successors if s in inside)
        if b in seen:
            found.add(b)
    if never_taken is None or not found:
        return found
    inside, feasible = found, set()          # only blocks on cycles at all can be on allowed ones
    for b in inside:
        for first in b.successors:
            if first not in inside or b in feasible:
                continue
            seen, todo = set(), [(b, first)]
            while todo:
                edge = todo.pop()
                if edge in seen:
                    continue
                seen.add(edge)
                p, x = edge
                if x is b and not never_taken(p, b, first):
                    feasible.add(b)
                    break
                todo.extend((x, s) for s in x.successors if s in inside and not never_taken(p, x, s))
    return feasible
