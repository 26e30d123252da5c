"""Refilled memory: the reverse sweep re-executes a loop iteration's fill of a tile instead of taping
every load of it (why the tiled SGEMM's adjoint was 400x slower than XLA's: it taped each
shared-memory and register-tile load of every k step).

A *plan* covers one memory object M (a block-shared array, or a thread-private ``alloca``) and the
innermost loop L holding all of M's accesses. At the start of the reverse of each iteration of L
(the reverse of L's latch) the reverse sweep runs a *slice* of that iteration: only the stores to
M and what they need (read-only loads, index math, inner loops). Loads of M in L then reload M in
the reverse sweep (``reloadable``) instead of reading the tape. Sound only because:

* the slice stores the same values at the same addresses as the forward iteration did: values
  come from memory the kernel never writes (or from another refilled object of an enclosing loop,
  valid at that point), and addresses and the slice's branches are *fixed*: computed from values
  defined outside every loop, constants and inner-loop counters, so every iteration of every
  instance of L writes the same set of addresses (positions outside it keep what they held before
  L, in both sweeps);
* no store to M runs after L (private M), or anywhere outside L (shared M), and no store to M is
  reachable from a reloaded load within its iteration;
* shared M: L holds barriers (so the whole block runs it in step) and every load of M and every
  reload point lies between barriers of the iteration: no thread refills while another still reads
  the previous iteration's tile, and the refill is complete before anyone reloads; M is not read
  outside L; no barrier separates two stores of the fill (threads may overwrite each other's
  elements in that order, which the refill, run without the barrier, would not keep).

A fill value that cannot be re-executed (a load of memory the kernel writes: the registers a
prefetching SGEMM loaded the tile into during the previous step) is taken from the tape instead
(``Plan.taped``): the forward sweep's own value, so the refill still stores what the forward
iteration stored. That is done only where it tapes fewer values than the loads of M it takes off
the tape (one value per filled element against every k step's reads of it).

A branch one of whose successors cannot reach the function's normal exit (a failed bounds check)
is followed to the other successor: a thread that reaches the reverse sweep went that way.
Anything else is refused (no plan: the loads stay on the tape).
"""
from __future__ import annotations

import copy
from dataclasses import dataclass, field

from ..errors import DifferentiationError
from ..ir.builder import Builder
from ..ir.core import Argument, Block, Constant, GlobalVariable, Instruction, Value
from .blocks import REPLAYED_CALLS
from ..analysis.control_flow import Loop
from .rules import rule_for

_PURE = frozenset({
    "getelementptr", "bitcast", "addrspacecast", "ptrtoint", "inttoptr", "trunc", "zext", "sext", "fpext",
    "fptrunc", "sitofp", "uitofp", "fptosi", "fptoui", "add", "sub", "mul", "shl", "lshr", "ashr", "and", "or",
    "xor", "sdiv", "udiv", "srem", "urem", "icmp", "fcmp", "select", "fadd", "fsub", "fmul", "fdiv", "frem",
    "fneg", "extractvalue", "freeze"})
_ADDRESS = ("getelementptr", "bitcast", "addrspacecast")


def _pure_math_call(v: Instruction) -> bool:
    """A call of a math function with a derivative rule (no memory): re-executable."""
    if any(o.type.is_pointer for o in v.operands):
        return False
    try:
        rule_for(v)
    except DifferentiationError:
        return False
    return True


class _Refused(Exception):
    """This object gets no plan (its loads stay on the tape)."""


def root_of(pointer: Value) -> Value:
    while isinstance(pointer, Instruction) and pointer.opcode in _ADDRESS:
        pointer = pointer.operands[0]
    return pointer


def _is_barrier(inst: Instruction) -> bool:
    return inst.opcode == "call" and getattr(inst.callee, "name", "") in REPLAYED_CALLS


@dataclass
class Plan:
    root: Value
    loop: Loop
    shared: bool
    stores: list[Instruction]
    region: list[Block] = field(default_factory=list)     # blocks of L that can reach a store of M
    slice: set[Instruction] = field(default_factory=set)  # the instructions the refill re-executes
    taped: set[Instruction] = field(default_factory=set)  # fill values taken from the tape (need)


class Refills:
    """The plans of one reverse function (see the module docstring); ``emit`` writes the refills."""

    def __init__(self, reverser, shared_roots: set[Value]):
        self.r = reverser
        self.live = set(reverser.live)
        self.shared_roots = shared_roots
        self.plans: dict[Value, Plan] = {}
        candidates = list(shared_roots) + [i for i in reverser.fn.entry.instructions if i.opcode == "alloca"]
        accesses = self._accesses()
        self.written = {root for root, insts in accesses.items()
                        if insts is None or any(i.opcode != "load" for i in insts)}
        self._unknown_writes = any(not isinstance(root, (Argument, GlobalVariable))
                                   and not (isinstance(root, Instruction) and root.opcode == "alloca")
                                   for root in self.written)
        pending = [r for r in candidates if accesses.get(r)]
        grown = True
        while grown:                  # a tile filled from another refilled tile needs that one's plan first
            grown = False
            for root in list(pending):
                try:
                    self.plans[root] = self._plan(root, accesses[root])
                except _Refused:
                    continue
                pending.remove(root)
                grown = True

    # ---- analysis
    def _accesses(self) -> dict[Value, list[Instruction] | None]:
        """Per candidate root: its loads, stores and memsets; None when used any other way."""
        found: dict[Value, list[Instruction] | None] = {}
        for block in self.r.blocks:
            for inst in block.instructions:
                for k, operand in enumerate(inst.operands):
                    if not operand.type.is_pointer:
                        continue
                    root = root_of(operand)
                    if inst.opcode in _ADDRESS and k == 0:
                        continue
                    ok = ((inst.opcode == "load" and k == 0) or (inst.opcode == "store" and k == 1)
                          or (inst.opcode == "call" and k == 0
                              and getattr(inst.callee, "name", "").startswith(("llvm.memset", "llvm.lifetime"))))
                    if not ok:
                        found[root] = None
                    elif found.get(root, []) is not None:
                        found.setdefault(root, []).append(inst)
        return found

    def _readonly(self, load: Instruction) -> bool:
        """A load of an argument array nothing in the function writes (stores to thread-private
        ``alloca``s cannot reach it; kernel arrays are distinct buffers)."""
        root = root_of(load.operands[0])
        return (isinstance(root, Argument) and root not in self.shared_roots and root not in self.written
                and not self._unknown_writes)

    def _plan(self, root: Value, accesses) -> Plan:
        if not accesses:
            raise _Refused
        live = [i for i in accesses if i.parent in self.live]
        looped = [i for i in live if self.r.loops.containing[i.parent]]
        if not looped:
            raise _Refused
        common = set.intersection(*(set(map(id, self.r.loops.containing[i.parent])) for i in looped))
        loops = [lp for lp in self.r.loops.containing[looped[0].parent] if id(lp) in common]
        if not loops:
            raise _Refused
        loop = min(loops, key=lambda lp: len(lp.blocks))
        shared = root in self.shared_roots
        stores = [i for i in live if i.opcode != "load" and i.parent in loop.blocks]
        if len(loop.latches) != 1 or loop.latches[0] is loop.header or not stores:
            raise _Refused
        if any(i.opcode != "store" for i in stores):
            raise _Refused
        outside = [i for i in live if i.parent not in loop.blocks]
        if shared and outside:
            raise _Refused        # no thread may read or write the tile outside L while others refill it
        after = self._reachable_from_exits(loop)
        if any(i.opcode != "load" and i.parent in after for i in outside):
            raise _Refused
        plan = Plan(root, loop, shared, stores)
        if shared and not any(_is_barrier(i) for b in loop.blocks for i in b.instructions):
            raise _Refused
        if shared and not all(self._bracketed(plan, i.parent) for i in live if i.opcode == "load"):
            raise _Refused
        header_targets = {t for t in loop.header.successors if t in self.live}
        if len({t for t in header_targets if t in loop.blocks}) != 1:
            raise _Refused            # the refill enters the body where the header's test continues
        for block in loop.blocks:     # the refill runs one iteration: L may be left only at its header
            if block in self.live and block is not loop.header and any(
                    s in self.live and s not in loop.blocks for s in block.successors):
                raise _Refused
        for store in stores:
            if not self._fixed(store.operands[1], loop, {}):
                raise _Refused
        plan.region = [b for b in self.r.blocks if b in loop.blocks and b in self.live
                       and any(s.parent is b or self._reaches_in_iteration(loop, b, s.parent) for s in stores)]
        if loop.header not in plan.region:
            raise _Refused
        if shared and any(self._store_follows(plan, i) for b in plan.region for i in b.instructions
                          if _is_barrier(i)):
            raise _Refused            # fills on both sides of a barrier may overwrite each other's
            # elements in order; the refill, without that barrier, would race
        plan.slice = self._slice(plan)
        return plan

    def _store_follows(self, plan: Plan, inst: Instruction) -> bool:
        """Whether a store of the fill can run after ``inst`` in the same iteration."""
        block = inst.parent
        return any(s.parent is block and block.instructions.index(s) > block.instructions.index(inst)
                   or self._reaches_in_iteration(plan.loop, block, s.parent) for s in plan.stores)

    def _reachable_from_exits(self, loop: Loop) -> set[Block]:
        work = [s for b in loop.blocks for s in b.successors if s not in loop.blocks]
        seen: set[Block] = set()
        while work:
            b = work.pop()
            if b not in seen:
                seen.add(b)
                work.extend(b.successors)
        return seen

    def _iteration_successors(self, loop: Loop, block: Block, avoid=frozenset()) -> list[Block]:
        return [s for s in block.successors if s in loop.blocks and s is not loop.header
                and s in self.live and s not in avoid]

    def _reaches_in_iteration(self, loop: Loop, start: Block, target: Block, avoid=frozenset()) -> bool:
        """Whether ``target`` can follow ``start`` in one iteration of ``loop`` (no back edge),
        through blocks not in ``avoid``."""
        seen, work = set(), list(self._iteration_successors(loop, start, avoid))
        while work:
            b = work.pop()
            if b is target:
                return True
            if b not in seen:
                seen.add(b)
                work.extend(self._iteration_successors(loop, b, avoid))
        return False

    def _bracketed(self, plan: Plan, block: Block) -> bool:
        """Shared tiles: a barrier of the iteration separates ``block`` from the iteration's start
        (where the previous iteration's reverse refills) and from its end (where this one's does)."""
        loop = plan.loop
        barriers = frozenset(b for b in loop.blocks if any(_is_barrier(i) for i in b.instructions))
        if block in barriers or block is loop.header or block not in loop.blocks:
            return False
        latch = loop.latches[0]
        if loop.header not in barriers and (
                self._reaches_in_iteration(loop, loop.header, block, barriers)):
            return False
        return latch in barriers or not self._reaches_in_iteration(loop, block, latch, barriers)

    def _fixed(self, v: Value, loop: Loop, memo: dict) -> bool:
        """The same value in every iteration of every instance of ``loop`` (given a fixed path)."""
        if isinstance(v, (Constant, Argument)) or not isinstance(v, Instruction):
            return True
        if not self.r.loops.containing[v.parent]:
            return True
        if v.parent not in loop.blocks or v.parent is loop.header and v.opcode == "phi":
            return False
        if v in memo:
            return memo[v]
        memo[v] = True                 # a cycle through inner-loop phis of fixed inputs is fixed
        if v.opcode == "phi" or v.opcode in _PURE:
            ok = all(self._fixed(o, loop, memo) for o in v.operands)
        elif v.opcode == "load":
            ok = self._readonly(v) and self._fixed(v.operands[0], loop, memo)
        else:
            ok = False
        memo[v] = ok
        return ok

    def _slice(self, plan: Plan) -> set[Instruction]:
        loop, region = plan.loop, set(plan.region)
        wanted: list[Value] = list(plan.stores)
        for block in plan.region:
            if block is loop.header:
                continue
            term = block.terminator
            targets = [s for s in term.blocks if s in self.live]
            if not any(t in region for t in targets if t is not loop.header):
                continue              # the fill is over wherever it goes (the refill ends there)
            if term.opcode not in ("br", "switch") or (term.opcode == "switch" and len(set(targets)) > 1):
                raise _Refused
            if term.opcode == "br" and len(set(targets)) == 2:
                if not self._fixed(term.operands[0], loop, {}):
                    raise _Refused
                wanted.append(term.operands[0])
        chosen: set[Instruction] = set()
        while wanted:
            v = wanted.pop()
            if not isinstance(v, Instruction) or v in chosen or self._external(v, loop):
                continue
            if v.parent not in region:
                raise _Refused
            if not self._sliceable(v, plan):
                if not self._tapeable(v, plan):
                    raise _Refused
                plan.taped.add(v)
                continue
            chosen.add(v)
            wanted.extend(v.operands)
        if plan.taped and not self._fill_cheaper(plan):
            raise _Refused            # taping the fill would cost as much as taping the tile's loads
        return chosen

    def _fill_cheaper(self, plan: Plan) -> bool:
        """Whether taping ``plan.taped`` once per iteration of L costs less than taping M's loads:
        a load of M in a loop inside L is taped once per inner iteration; else count them."""
        depth = len(self.r.loops.containing[plan.loop.header])
        loads = [i for b in plan.loop.blocks if b in self.live for i in b.instructions
                 if i.opcode == "load" and root_of(i.operands[0]) is plan.root]
        return (any(len(self.r.loops.containing[i.parent]) > depth for i in loads)
                or len(plan.taped) < len(loads))

    def _tapeable(self, v: Instruction, plan: Plan) -> bool:
        """A fill value the refill may take from the tape: a load that runs once in every iteration
        that reaches the latch (its block dominates the latch and is in no loop inside L), so the
        tape holds its one value for the iteration being reversed. Inside an inner loop the tape
        would give only its last iteration's value to every inner iteration of the refill."""
        containing = self.r.loops.containing
        return (v.opcode == "load" and v.parent in plan.loop.blocks and v.parent is not plan.loop.header
                and len(containing[v.parent]) == len(containing[plan.loop.header])
                and self.r.dom.dominates(v.parent, plan.loop.latches[0]))

    def _external(self, v: Instruction, loop: Loop) -> bool:
        """Taken from the forward sweep (``need``) rather than re-executed."""
        return v.parent not in loop.blocks or (v.parent is loop.header and v.opcode == "phi")

    def _sliceable(self, v: Instruction, plan: Plan) -> bool:
        if v.opcode in ("store", "phi") or v.opcode in _PURE:
            return v.opcode != "store" or root_of(v.operands[1]) is plan.root
        if v.opcode == "call":
            return _pure_math_call(v)
        if v.opcode != "load":
            return False
        if self._readonly(v):
            return True
        outer = self.plans.get(root_of(v.operands[0]))     # planned earlier: enclosing loops come first
        return (outer is not None and outer is not plan and plan.loop.blocks < outer.loop.blocks
                and self._valid_load(outer, v) and self._valid_point(outer, plan.loop.latches[0]))

    def _valid_load(self, plan: Plan, load: Instruction) -> bool:
        block = load.parent
        if block not in plan.loop.blocks or block not in self.live:
            return False
        if self._store_follows(plan, load):
            return False
        return not plan.shared or self._bracketed(plan, block)

    def _valid_point(self, plan: Plan, block: Block) -> bool:
        if block not in plan.loop.blocks or block is plan.loop.header:
            return False
        return not plan.shared or self._bracketed(plan, block)

    # ---- used by reverse.py
    def reloadable(self, load: Instruction, block: Block) -> bool:
        """Whether ``need`` may re-read ``load``'s memory in ``block``'s reverse."""
        plan = self.plans.get(root_of(load.operands[0]))
        return (plan is not None and self._valid_load(plan, load) and self._valid_point(plan, block)
                and self.r.dom.dominates(load.parent, block))

    def emit(self, block: Block, b: Builder) -> Builder:
        """At the start of ``block``'s reverse: the refills of the loops ``block`` is the latch of;
        returns the builder where the reverse of ``block`` continues."""
        for plan in self.plans.values():
            if plan.loop.latches[0] is block:
                b = self._emit(plan, b)
        return b

    def _emit(self, plan: Plan, b: Builder) -> Builder:
        r, loop = self.r, plan.loop
        latch = loop.latches[0]
        fn = r.fn
        cont = fn.add_block(f"{loop.header.name}.refill.done")
        blocks = {old: fn.add_block(f"{old.name}.refill") for old in plan.region}
        values: dict[Value, Value] = {}

        def value(v: Value) -> Value:
            if not isinstance(v, Instruction):
                return v
            if v in values:
                return values[v]
            return r.need(v, latch)          # defined before L, or a header phi of L

        def target(s: Block) -> Block:
            return blocks.get(s, cont) if s is not loop.header else cont

        b.br(blocks[loop.header])
        clones: list[tuple[Instruction, Instruction]] = []
        for old in plan.region:
            nb = Builder(blocks[old])
            for inst in old.instructions:
                if inst in plan.slice:
                    new = copy.copy(inst)
                    new.name, new.parent, new.flags, new.location = "", None, set(inst.flags), inst.location
                    nb.insert(new, f"{inst.name or 'v'}.refill")
                    values[inst] = new
                    clones.append((inst, new))
            term = old.terminator
            live = [s for s in term.blocks if s in self.live]
            if old is loop.header:
                inside = [s for s in live if s in loop.blocks]
                nb.br(target(inside[0]))
            elif len({target(s) for s in live}) == 1:
                nb.br(target(live[0]))
            elif len(set(live)) == 1:
                nb.br(target(live[0]))
            else:
                nb.cbranch(value(term.operands[0]), target(term.blocks[0]), target(term.blocks[1]))
        for inst, new in clones:
            if inst.opcode == "phi":
                pairs = [(v, p) for v, p in zip(inst.operands, inst.blocks) if p in blocks]
                new.operands = [value(v) for v, _ in pairs]
                new.blocks = [blocks[p] for _, p in pairs]
            else:
                new.operands = [value(v) for v in inst.operands]
                new.blocks = list(inst.blocks)
        return Builder(cont)

