"""Finite sets of the values an integer may take, for the race check (shared.py).

A bitonic sort's stride starts at a power of two and is halved or doubled each trip of a loop
holding a barrier; the race check sees it as one value alike for the block, of which nothing is
known. ``ValueSets.of`` follows such a value back through phis, constants and arithmetic with
constants to the finite set of bit patterns it may have ({1, 2, 4, ..., 32}); the check then
enumerates the block's threads once per element. Any other leaf (a parameter, a load, a thread
index, a call) gives None: unknown.

The sets over-approximate every value that is not poison: a result that an operation's flags
make poison (``shl nsw`` overflowing, ``lshr exact`` dropping ones, a shift by the width or more)
or a division by zero (undefined behaviour) is left out, since a poison stride used in an address
or a branch is undefined behaviour itself. A phi's value along an edge of a conditional branch
keeps only the elements for which the branch takes that edge, when the condition is a function
of that incoming value alone (``for (s = 2; s <= 64; s <<= 1)``: the back edge carries 4 to 64).

Counters stepped together in one loop, only one of them tested (the Blelloch scan's ``offset *= 2``
beside ``d >>= 1``), are simulated as one state from their entry values (``ValueSets._loop_run``): the
untested one then has its exact values, in the loop and on the edges leaving it.

``fold_constant_branches`` turns a conditional branch whose condition has one possible value into
a jump: ``for (stride = size >> 1; stride > 0; ...)`` with ``size`` in {2, ..., 64} always enters,
so the loop around it has no barrier-free path back (races/intervals.py).
"""
from __future__ import annotations

import itertools

from ...ir.core import Block, Constant, Function, Instruction, IntType, PointerType, Value
from ...ir.cfg import dominator_sets
from .forms import apply_instruction, is_poison as _poison

MAX_VALUES = 80              # more possible values than this: unknown
_MAX_SLICE = 200             # instructions followed back from one value
_MAX_DEPTH = 12              # depth of a branch condition evaluated from one incoming value
_MAX_BASES = 4               # values followed back from a phi's incoming value to what its branch tests
_ARITHMETIC = frozenset({"add", "sub", "mul", "shl", "lshr", "ashr", "udiv", "sdiv", "urem", "srem", "and", "or",
                         "xor", "zext", "sext", "trunc", "icmp", "select", "phi"})


class ValueSets:
    """``of(v)``: the unsigned bit patterns integer ``v`` may have, or None (module docstring)."""

    def __init__(self, fn: Function):
        self._memo: dict[int, frozenset | None] = {}
        self._preds = fn.predecessors()
        self._dom = dominator_sets(fn)
        self._kept: dict[tuple, bool] = {}
        self._never: dict[tuple, bool] = {}
        self._runs: dict[int, tuple | None] = {}

    def of(self, v: Value) -> frozenset | None:
        if id(v) not in self._memo:
            self._memo[id(v)] = self._solve(v)
        return self._memo[id(v)]

    def _solve(self, v: Value) -> frozenset | None:
        c = _constant(v)
        if c is not None:
            return frozenset({c})
        slice_ = self._slice(v)
        if slice_ is None:
            return None
        sets: dict[int, set] = {id(i): set() for i in slice_}
        changed = True
        while changed:
            changed = False
            for inst in slice_:
                new = self._step(inst, sets)
                if new is None:
                    return None
                mine = sets[id(inst)]
                if not new <= mine:
                    mine |= new
                    changed = True
                    if len(mine) > MAX_VALUES:
                        return None
        return frozenset(sets[id(v)])

    def _slice(self, v: Value) -> list[Instruction] | None:
        """The instructions ``v`` is computed from (None when a leaf is not a constant)."""
        found, seen, todo = [], set(), [v]
        while todo:
            x = todo.pop()
            if _constant(x) is not None or id(x) in seen:
                continue
            if not (isinstance(x, Instruction) and isinstance(x.type, IntType) and x.opcode in _ARITHMETIC):
                return None
            if x.opcode == "icmp" and not isinstance(x.operands[0].type, IntType):
                return None
            seen.add(id(x))
            found.append(x)
            if len(found) > _MAX_SLICE:
                return None
            todo.extend(x.operands[1:] if x.opcode == "select" else x.operands)   # either side, whatever chose
        return found

    def _step(self, inst: Instruction, sets: dict) -> set | None:
        """The values ``inst`` takes where its operands take the values found so far."""
        def values(o):
            c = _constant(o)
            return {c} if c is not None else sets[id(o)]
        if inst.opcode == "phi":
            run = self._loop_run(inst.parent)
            if run is not None and inst in run[0]:
                k = run[0].index(inst)
                return {state[k] for state in run[2]}
            out = set()
            for o, pred in zip(inst.operands, inst.blocks):
                leaving = self._leaving(o, pred, inst.parent)
                out |= leaving if leaving is not None else _along(values(o), o, pred, inst.parent, sets, self._dom)
            return out
        if inst.opcode == "select":
            return values(inst.operands[1]) | values(inst.operands[2])
        operand_sets = [self._entering(inst.parent, o, values(o), sets) for o in inst.operands]
        total = 1
        for s in operand_sets:
            total *= len(s)
        if total > MAX_VALUES * MAX_VALUES:
            return None
        bits = inst.type.bits
        out = set()
        for combo in itertools.product(*operand_sets):
            if _poison(inst, list(combo), bits):
                continue
            x = apply_instruction(inst, list(combo), bits)
            if x is None:
                return None
            out.add(x)
        return out

    # -- counters stepped together: a loop's header phis simulated as one state --
    def _loop_run(self, header: Block):
        """(phis, latch, states, exits) of the loop that ``header`` heads, or None: every state (tuple of
        the header's phi values) the loop may start a trip with, from the finite sets of their values on
        entry, and the states in which its latch leaves it. The Blelloch scan's stride doubles while
        another counter halves and only the other one is tested: alone, the stride's set is every power
        of two; together, 1 to 128. A superset of the runs: another exit only ends a run early."""
        if id(header) not in self._runs:
            self._runs[id(header)] = None           # a loop whose entry values need its own run: unknown
            self._runs[id(header)] = self._simulate(header)
        return self._runs[id(header)]

    def _simulate(self, header: Block):
        latches = [p for p in self._preds.get(header, []) if header in self._dom.get(p, ())]
        phis = [p for p in header.phis if isinstance(p.type, IntType)]      # a float accumulator is no counter
        if len(latches) != 1 or not phis:
            return None
        latch = latches[0]
        term = latch.terminator
        if term is None or term.opcode != "br" or len(term.blocks) != 2 or term.blocks[0] is term.blocks[1]:
            return None
        starts = []
        for phi in phis:
            entering = set()
            for o, b in zip(phi.operands, phi.blocks):
                if b is not latch:
                    found = self.of(o)
                    if found is None:
                        return None
                    entering |= found
            starts.append(sorted(entering))
        todo, before = list(itertools.product(*starts)), self._dom.get(latch, {latch})
        if len(todo) > MAX_VALUES:
            return None
        back = [phi.operands[phi.blocks.index(latch)] for phi in phis]
        states, exits, stay = set(), set(), term.blocks[0] is header
        while todo:
            state = todo.pop()
            if state in states:
                continue
            states.add(state)
            if len(states) > MAX_VALUES:
                return None
            env = {id(phi): e for phi, e in zip(phis, state)}
            taken = _evaluate_state(term.operands[0], env, before) if len(term.operands) == 1 else None
            if taken is None:
                return None
            if bool(taken) != stay:
                exits.add(state)
                continue
            following = tuple(_evaluate_state(b, env, before) for b in back)
            if None in following:
                return None
            todo.append(following)
        return phis, latch, states, exits

    def _leaving(self, value: Value, pred: Block, block: Block) -> set | None:
        """The values ``value`` has on the edge from ``pred`` out of a simulated loop whose latch is
        ``pred`` (an LCSSA phi of the stride after the loop), or None when that is not known."""
        header = next((s for s in pred.successors if s is not block and s in self._dom.get(pred, ())), None)
        run = self._loop_run(header) if header is not None else None
        if run is None or run[1] is not pred:
            return None
        before, found = self._dom.get(pred, {pred}), set()
        for state in run[3]:
            x = _evaluate_state(value, {id(phi): e for phi, e in zip(run[0], state)}, before)
            if x is None:
                return None
            found.add(x)
        return found

    def admitted(self, v: Value, conditions: list) -> set:
        """The elements of ``of(v)`` for which each of ``conditions`` ((condition, side) pairs, as
        races/guards.py gives them: true where an access runs) that is a function of ``v`` alone
        takes its side."""
        kept = set(self.of(v))
        for condition, side in conditions:
            if side not in (True, False) or not _evaluate(condition, v, None, 0, probe=True):
                continue
            kept = {e for e in kept if _evaluate(condition, v, e, 0) in (None, int(side))}
        return kept

    def _entering(self, block: Block, value: Value, elements: set, sets: dict) -> set:
        """``elements`` of ``value`` (defined outside ``block``) that the branches on it into the
        blocks dominating ``block`` let through (``while (size <= 64) { ... size *= 2; }``: ``size``
        is at most 64 where it is doubled), where ``value`` cannot be defined anew in between."""
        if not isinstance(value, Instruction) or value.parent is block:
            return elements
        for q in self._dom.get(block, ()):
            preds = self._preds.get(q, [])
            if len(preds) == 1 and self._last_passed(value.parent, block, (preds[0], q)):
                elements = _along(elements, value, preds[0], q, sets, self._dom, keep_value=True)
        return elements

    def _last_passed(self, definition: Block, block: Block, edge: tuple) -> bool:
        """Whether every path from ``definition`` to ``block`` takes ``edge``."""
        key = (id(definition), id(block), id(edge[0]), id(edge[1]))
        if key not in self._kept:
            seen, todo = set(), [s for s in definition.successors if (definition, s) != edge]
            while todo and block not in seen:
                b = todo.pop()
                if b not in seen:
                    seen.add(b)
                    todo.extend(s for s in b.successors if (b, s) != edge)
            self._kept[key] = block not in seen
        return self._kept[key]

    def never_taken(self, pred: Block, block: Block, succ: Block) -> bool:
        """Whether ``block``, entered from ``pred``, never branches to ``succ``: its condition is
        computed in it from one of its phis, whose value from ``pred`` has a finite set none of
        whose elements sends it there (``while stride > 0`` entered with ``stride = size // 2``)."""
        key = (id(pred), id(block), id(succ))
        if key not in self._never:
            self._never[key] = self._never_taken(pred, block, succ)
        return self._never[key]

    def _never_taken(self, pred: Block, block: Block, succ: Block) -> bool:
        term = block.terminator
        if term is None or term.opcode != "br" or len(term.blocks) != 2 or term.blocks[0] is term.blocks[1]:
            return False
        condition, side = term.operands[0], succ is term.blocks[0]
        for phi in block.phis:
            if pred not in phi.blocks or not _evaluate(condition, phi, None, 0, probe=True, within={block}):
                continue
            found = self.of(phi.operands[phi.blocks.index(pred)])
            if found is None:
                return False
            taken = [_evaluate(condition, phi, e, 0) for e in found]
            return all(t is not None and bool(t) != side for t in taken)
        return False


def _constant(v: Value) -> int | None:
    """The unsigned bit pattern of an integer constant."""
    if isinstance(v, Constant) and v.kind == "scalar" and isinstance(v.value, (int, bool)) \
            and isinstance(v.type, IntType):
        return int(v.value) % (1 << v.type.bits)
    return None


def _along(elements: set, value: Value, pred: Block, block: Block, sets: dict, dom: dict,
           keep_value: bool = False) -> set:
    """The elements of ``value`` for which the branch ending ``pred`` goes to ``block``, when the
    branch condition is a function of ``value`` or of a value it is computed from with constants,
    all in blocks that dominate ``pred`` (``for (s = 2; s < 64; s <<= 1)``: the back edge carries
    ``s << 1`` where ``s < 64``; clang may double ``s`` in the loop's header and test the old ``s`` in its
    latch, as in the samples' ``for (s = 1; s < blockDim.x; s *= 2)``). Dominance is what makes both
    use one instance of the base: a block B that dominates ``pred`` and is dominated by the base's
    block runs after the base's last run on every path to ``pred`` (a path from that run to ``pred``
    avoiding B, after a first arrival at the base's block that cannot have passed B, would reach
    ``pred`` without B); ``keep_value``: only a condition on ``value`` itself (an operand of an
    instruction of ``block``)."""
    term = pred.terminator
    if term is None or term.opcode != "br" or len(term.blocks) != 2 or term.blocks[0] is term.blocks[1]:
        return set(elements)
    side, condition = term.blocks[0] is block, term.operands[0]
    before = dom.get(pred, {pred})
    base = value
    for _ in range(_MAX_BASES):
        # both computed in ``pred`` from one instance of the base
        if _evaluate(condition, base, None, 0, probe=True, within=before) \
                and _evaluate(value, base, None, 0, probe=True, within=before):
            source = elements if base is value else sets[id(base)]
            kept = set()
            for e in source:
                taken = _evaluate(condition, base, e, 0)
                x = _evaluate(value, base, e, 0)
                if x is None:                   # poison where e is: not carried
                    continue
                if taken is None or bool(taken) == side:
                    kept.add(x)
            return kept
        if keep_value:
            break
        inputs = [o for o in getattr(base, "operands", []) if _constant(o) is None]
        if not (isinstance(base, Instruction) and base.opcode in _ARITHMETIC - {"phi", "select", "icmp"}
                and len(inputs) == 1 and id(inputs[0]) in sets):
            break
        base = inputs[0]
    return set(elements)


def _evaluate(v: Value, x: Value, e: int | None, depth: int, probe: bool = False, within: set | None = None):
    """``v`` where ``x`` is ``e``, if it depends on nothing else (None otherwise, or where poison);
    ``probe``: only whether it depends on nothing else (and is computed in the blocks ``within``, if given)."""
    if v is x:
        return True if probe else e
    c = _constant(v)
    if c is not None:
        return True if probe else c
    if depth > _MAX_DEPTH or not (isinstance(v, Instruction) and isinstance(v.type, IntType)) \
            or v.opcode in ("phi", "select") or v.opcode not in _ARITHMETIC or (within and v.parent not in within):
        return None
    operands = [_evaluate(o, x, e, depth + 1, probe, within) for o in v.operands]
    if any(o is None for o in operands):
        return None
    if probe:
        return True
    if _poison(v, operands, v.type.bits):
        return None
    return apply_instruction(v, operands, v.type.bits)


def _evaluate_state(v: Value, env: dict, within: set, depth: int = 0):
    """``v`` where the phis ``env`` names (by id) have its values, if it depends on nothing else and
    is computed in the blocks ``within`` (None otherwise, or where poison)."""
    if id(v) in env:
        return env[id(v)]
    c = _constant(v)
    if c is not None:
        return c
    if depth > _MAX_DEPTH or not (isinstance(v, Instruction) and isinstance(v.type, IntType)) \
            or v.opcode in ("phi", "select") or v.opcode not in _ARITHMETIC or v.parent not in within:
        return None
    operands = [_evaluate_state(o, env, within, depth + 1) for o in v.operands]
    if any(o is None for o in operands) or _poison(v, operands, v.type.bits):
        return None
    return apply_instruction(v, operands, v.type.bits)


def fold_constant_branches(fn: Function, sets: ValueSets) -> None:
    """Branches whose condition has one possible value become jumps; unreachable blocks go."""
    for b in fn.blocks:
        term = b.terminator
        if term is None or term.opcode != "br" or len(term.blocks) != 2 or term.blocks[0] is term.blocks[1]:
            continue
        found = sets.of(term.operands[0])
        if found is not None and len(found) == 1:
            term.operands, term.blocks = [], [term.blocks[0 if next(iter(found)) else 1]]
    prune_unreachable(fn)


def prune_unreachable(fn: Function) -> None:
    """Drop the blocks no path from the entry reaches, and phi entries of edges that are gone."""
    reached, todo = set(), [fn.entry]
    while todo:
        b = todo.pop()
        if b not in reached:
            reached.add(b)
            todo.extend(b.successors)
    fn.blocks = [b for b in fn.blocks if b in reached]
    for b in fn.blocks:
        for phi in b.phis:
            keep = [k for k, p in enumerate(phi.blocks) if p in reached and b in p.successors]
            phi.operands = [phi.operands[k] for k in keep]
            phi.blocks = [phi.blocks[k] for k in keep]


def symbol_inputs(forms, sets: ValueSets, roots: list[Value]) -> tuple[list[Instruction], list[Instruction]]:
    """The symbols (values alike for the block, races/forms.py's "v" atoms) with finite value sets
    that ``roots`` (addresses, branch conditions) are computed from, with the thread's index and
    constants: (leaves: phis and selects, derived: the symbols computed from them, which
    shared_forms.Concrete evaluates once the leaves have values). A root that also depends on
    anything else (loaded data, a parameter) is left out: it stays unknown whatever they are."""
    leaves, derived = {}, {}
    for root in roots:
        mine, theirs = _inputs(forms, sets, root)
        if mine is not None:
            leaves.update(mine)
            derived.update(theirs)
    return list(leaves.values()), list(derived.values())


def _inputs(forms, sets: ValueSets, root: Value):
    leaves, derived, seen, todo = {}, {}, set(), [(root, 0)]
    while todo:
        v, depth = todo.pop()
        if _constant(v) is not None or id(v) in seen:
            continue
        seen.add(id(v))
        if not isinstance(v, Instruction):
            if v in forms.tids or isinstance(v.type, PointerType):
                continue
            return None, None
        if depth > _MAX_SLICE:
            return None, None
        got = forms.eval(v) if isinstance(v.type, IntType) else None
        own = got is not None and got[0].coef == {("v", id(v)): 1} and got[0].const == 0
        if own and v.opcode in ("phi", "select"):
            if sets.of(v) is None:
                return None, None
            leaves[id(v)] = v
            continue
        if v.opcode not in _ARITHMETIC - {"phi", "select"} and v.opcode != "getelementptr" \
                and not (v.opcode == "phi" and not isinstance(v.type, IntType)):
            return None, None                  # loaded data, a call, a phi varying between threads
        if own:
            derived[id(v)] = v
        todo.extend((o, depth + 1) for o in v.operands)
    return leaves, derived
