"""Control-flow facts the reverse sweep needs: dominators, natural loops, static trip bounds.

Works on any ``ir.core.Function`` whose CFG is reducible (every cycle has a single entry,
which canonical LLVM from a structured front end always is); irreducible control flow is
reported as a DifferentiationError because its blocks cannot be given a per-visit tape.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ..errors import DifferentiationError
from ..ir.cfg import reachable_blocks  # noqa: F401 (re-exported: the engine imports it from here)
from ..ir.core import Block, Constant, Instruction, Value
from .trip_bounds import COMPARE, MAX_SIMULATED_TRIPS, header_visit_bound, int_value


def predecessor_map(blocks: list[Block]) -> dict[Block, list[Block]]:
    """Distinct predecessors of each block among ``blocks`` (in the order they appear)."""
    preds: dict[Block, list[Block]] = {b: [] for b in blocks}
    for b in blocks:
        for s in b.successors:
            if s in preds and b not in preds[s]:
                preds[s].append(b)
    return preds


class Dominators:
    """Immediate dominators by the iterative algorithm of Cooper, Harvey and Kennedy."""

    def __init__(self, blocks: list[Block]):
        self.order = {b: k for k, b in enumerate(blocks)}        # reverse post-order numbers
        preds = predecessor_map(blocks)
        entry = blocks[0]
        self.idom: dict[Block, Block] = {entry: entry}
        changed = True
        while changed:
            changed = False
            for b in blocks[1:]:
                done = [p for p in preds[b] if p in self.idom]
                new = done[0]
                for p in done[1:]:
                    new = self._intersect(p, new)
                if self.idom.get(b) is not new:
                    self.idom[b] = new
                    changed = True

    def _intersect(self, a: Block, b: Block) -> Block:
        while a is not b:
            while self.order[a] > self.order[b]:
                a = self.idom[a]
            while self.order[b] > self.order[a]:
                b = self.idom[b]
        return a

    def dominates(self, a: Block, b: Block) -> bool:
        while True:
            if a is b:
                return True
            parent = self.idom[b]
            if parent is b:
                return False
            b = parent


@dataclass(eq=False)
class Loop:
    header: Block
    blocks: set[Block] = field(default_factory=set)
    latches: list[Block] = field(default_factory=list)


def natural_loops(blocks: list[Block], dom: Dominators) -> list[Loop]:
    """Natural loops (back edges merged per header); raises on irreducible cycles."""
    order = dom.order
    preds = predecessor_map(blocks)
    loops: dict[Block, Loop] = {}
    for b in blocks:
        for s in b.successors:
            if s in order and order[s] <= order[b]:          # a retreating edge
                if not dom.dominates(s, b):
                    branch = b.instructions[-1] if b.instructions else None
                    where = f" at {branch.location}" if branch is not None and branch.location is not None else ""
                    raise DifferentiationError(
                        f"irreducible control flow in @{b.parent.name} (edge {b.name} -> {s.name}{where} enters a "
                        f"cycle that has several entries, a goto into a loop); reverse mode needs structured loops")
                loop = loops.setdefault(s, Loop(s, {s}))
                loop.latches.append(b)
                work = [b]
                while work:
                    x = work.pop()
                    if x not in loop.blocks:
                        loop.blocks.add(x)
                        work.extend(preds[x])
    return list(loops.values())


class LoopInfo:
    """Loops of a function's reachable blocks and per-block loop membership."""

    def __init__(self, blocks: list[Block], dom: Dominators):
        self.loops = natural_loops(blocks, dom)
        self.containing: dict[Block, list[Loop]] = {b: [] for b in blocks}
        for loop in self.loops:
            for b in loop.blocks:
                self.containing[b].append(loop)
        self._dom = dom

    def in_loop(self, block: Block) -> bool:
        return bool(self.containing.get(block))

    def visit_bound(self, block: Block) -> int | None:
        """How many times ``block`` can execute per call, or None when not statically bounded."""
        total = 1
        for loop in self.containing[block]:
            enclosing = [outer for outer in self.containing[block] if outer is not loop and loop.header in outer.blocks]
            bound = header_visit_bound(loop, self._dom, enclosing)
            if bound is None:
                return None
            total *= bound
        return total


@dataclass(frozen=True)
class Induction:
    """``phi = [start, outside], [phi + step, latch]``: reversible without a tape (i_prev = i - step)."""
    phi: Instruction
    loop: Loop
    start: Value
    step: int
    preheader: Block


def inductions(loops: list[Loop], dom: Dominators, preds: dict[Block, list[Block]]) -> dict[Instruction, Induction]:
    """Induction phis of loops with one latch and one outside predecessor, whose header
    dominates every exit block (so the last value can be saved where the loop is left)."""
    found = {}
    for loop in loops:
        outside = [p for p in preds[loop.header] if p not in loop.blocks]
        if len(loop.latches) != 1 or len(outside) != 1:
            continue
        exits = {s for b in loop.blocks for s in b.successors if s not in loop.blocks}
        if not all(dom.dominates(loop.header, x) for x in exits):
            continue
        for phi in loop.header.phis:
            if not phi.type.is_int or len(phi.operands) != 2:
                continue
            k = phi.blocks.index(loop.latches[0]) if loop.latches[0] in phi.blocks else None
            if k is None or phi.blocks[1 - k] is not outside[0]:
                continue
            nxt = phi.operands[k]
            if not (isinstance(nxt, Instruction) and nxt.opcode == "add" and phi in nxt.operands):
                continue
            other = nxt.operands[1] if nxt.operands[0] is phi else nxt.operands[0]
            step = int_value(other)
            wraps_freely = phi.type.bits < 64 and not ({"nsw", "nuw"} & nxt.flags)
            if step and not wraps_freely:
                found[phi] = Induction(phi, loop, phi.operands[1 - k], step, outside[0])
    return found


def exit_value(ind: Induction, exiting: Block, target: Block) -> Constant | None:
    """The counter's value when ``ind``'s loop is left along ``exiting -> target``, when that edge
    is the header's test of the counter against constants and the counter starts at a constant:
    the first of start, start + step, ... that fails the test. None otherwise (the reverse sweep
    then caches it). Saves a tape slot per visit of a constant-trip inner loop."""
    term = exiting.terminator
    start = int_value(ind.start)
    if (exiting is not ind.loop.header or start is None or term is None or term.opcode != "br"
            or len(term.blocks) != 2 or term.blocks.count(target) != 1 or target in ind.loop.blocks):
        return None
    cond = term.operands[0]
    if not isinstance(cond, Instruction) or cond.opcode != "icmp" or cond.predicate not in COMPARE:
        return None
    bits, signed = ind.phi.type.bits, cond.predicate.startswith("s")

    def evaluate(v, i):
        x = i if v is ind.phi else int_value(v)
        if x is None:
            return None
        x &= (1 << bits) - 1
        return x - (1 << bits) if signed and x >> (bits - 1) else x

    leaves_when = term.blocks.index(target) == 0      # the branch leaves when the test is true
    i = start
    for _ in range(MAX_SIMULATED_TRIPS):
        a, b = evaluate(cond.operands[0], i), evaluate(cond.operands[1], i)
        if a is None or b is None:
            return None
        if COMPARE[cond.predicate](a, b) == leaves_when:
            x = i & ((1 << bits) - 1)
            return Constant(ind.phi.type, x - (1 << bits) if x >> (bits - 1) else x)
        i += ind.step
    return None


def exit_bound(ind: Induction, exiting: Block, target: Block) -> tuple[Value, int] | None:
    """``(n, c)`` when leaving ``ind``'s loop along ``exiting -> target`` proves the counter equals
    ``n + c`` (modulo its width) for a value ``n`` defined outside the loop: the edge is taken
    exactly when ``icmp eq (phi + k), n`` holds (``ne`` with the edge on its false side), so then
    ``phi == n - k`` -- clang's rotated ``for (i = 0; i < n; i++)`` leaves on ``i.next == n``.
    None otherwise. Like ``exit_value``, saves the tape slot of the counter's last value."""
    term = exiting.terminator
    if (term is None or term.opcode != "br" or len(term.blocks) != 2 or term.blocks.count(target) != 1
            or target in ind.loop.blocks):
        return None
    cond = term.operands[0]
    if not isinstance(cond, Instruction) or cond.opcode != "icmp" or cond.predicate not in ("eq", "ne"):
        return None
    if (cond.predicate == "eq") != (term.blocks[0] is target):
        return None                                 # the edge is taken when the two differ: not determined
    for x, n in ((cond.operands[0], cond.operands[1]), (cond.operands[1], cond.operands[0])):
        if isinstance(n, Instruction) and n.parent in ind.loop.blocks:
            continue
        if x is ind.phi:
            return n, 0
        if isinstance(x, Instruction) and x.opcode == "add" and ind.phi in x.operands:
            other = x.operands[1] if x.operands[0] is ind.phi else x.operands[0]
            k = int_value(other)
            if k is not None:
                return n, -k
    return None
