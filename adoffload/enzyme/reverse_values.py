"""What the reverse sweep needs from the forward sweep: each primal value reused where it dominates the exit,
recomputed where it is pure and cheap (``need``), or cached on the tape (tape.py)."""
from __future__ import annotations

import copy

from ..language import collectives
from ..errors import DifferentiationError
from ..ir.builder import Builder
from ..ir.core import Argument, Block, Function, GlobalVariable, Instruction, Value
from .activity import is_uniform_add
from .rules import rule_for
from .memory import heap_function, is_allocation
from ..analysis.pointers import leaves


# Pure instructions the reverse sweep may re-execute instead of caching (loads: see _readonly).
RECOMPUTABLE = frozenset({
    "getelementptr", "bitcast", "addrspacecast", "ptrtoint", "inttoptr", "trunc", "zext", "sext",
    "fpext", "fptrunc", "sitofp", "uitofp", "fptosi", "fptoui", "add", "sub", "mul", "shl", "lshr",
    "ashr", "and", "or", "xor", "sdiv", "udiv", "srem", "urem", "icmp", "fcmp", "select", "fadd", "fsub",
    "fmul", "fdiv", "frem", "fneg", "extractvalue", "freeze", "load",
    "insertelement", "extractelement", "shufflevector"})   # lane moves: a splat of a taped scalar is not taped again
MAX_RECOMPUTE_DEPTH = 64   # recomputing beats a tape on GPUs: registers and FLOPs are cheap, memory is not
_WRITES = frozenset({"store", "atomicrmw", "cmpxchg"})


def is_pure_math_call(v: Instruction) -> bool:
    """A call of a math function with a derivative rule (sqrt, exp, ...): no memory, recomputable.
    Not a block kernel's exchange (block_sum, shuffle, ...): every thread of the block must run it
    together, and a recomputation sits wherever its use's reverse does, under divergent branches
    too (the other threads would never arrive)."""
    if v.opcode != "call" or any(o.type.is_pointer for o in v.operands):
        return False
    exchange = isinstance(v.callee, Function) and collectives.parse(v.callee.name)
    if exchange and exchange[0] in collectives.EXCHANGES:
        return False
    try:
        rule_for(v)
    except DifferentiationError:
        return False
    return True


_NOT_WRITING_CALLS = ("llvm.lifetime.", "llvm.assume", "llvm.experimental.noalias", "llvm.dbg.", "llvm.prefetch",
                      "llvm.invariant.")
_WRITES_FIRST_OPERAND = ("llvm.memset.", "llvm.memcpy.", "llvm.memmove.")


def written_roots(fn: Function) -> tuple[set, bool]:
    """The arguments and globals ``fn`` may write through, and whether it may write somewhere it
    cannot name (a pointer loaded from memory or made from an integer, or a call that gets a
    pointer and is not a known memory intrinsic or heap function). Writes into the function's
    own allocas and heap blocks name no argument: those blocks are new, no argument points there."""
    roots, unknown = set(), False
    for inst in fn.instructions():
        targets = []
        if inst.opcode == "store":
            targets = [inst.operands[1]]
        elif inst.opcode in _WRITES:
            targets = [inst.operands[0]]
        elif is_uniform_add(inst):          # writes its pointer operand, nothing else
            targets = [inst.operands[0]]
        elif inst.opcode in ("call", "invoke") and any(o.type.is_pointer for o in inst.operands):
            callee = getattr(inst.callee, "name", "") if isinstance(inst.callee, Function) else ""
            heap = heap_function(inst)
            if callee.startswith(_NOT_WRITING_CALLS):
                continue
            if callee.startswith(_WRITES_FIRST_OPERAND):
                targets = [inst.operands[0]]
            elif heap is not None and heap.pointer is not None:
                targets = [inst.operands[heap.pointer]]
            else:
                unknown = True
                continue
        for target in targets:
            for root in leaves(target):
                if isinstance(root, (Argument, GlobalVariable)):
                    roots.add(root)
                elif not (isinstance(root, Instruction) and (root.opcode == "alloca" or is_allocation(root))):
                    unknown = True
    return roots, unknown


def strip_pointer(pointer: Value) -> Value:
    while isinstance(pointer, Instruction) and pointer.opcode in ("getelementptr", "bitcast", "addrspacecast"):
        pointer = pointer.operands[0]
    return pointer


class PrimalValues:
    """The value policy of the reverse engine (mixed into reverse._Reverser)."""

    # ---- what the reverse sweep needs from the forward sweep
    def need(self, v: Value, block: Block, depth: int = 0) -> Value:
        """``v`` as usable in ``block``'s reverse: reused, recomputed or cached (tape.py)."""
        if not isinstance(v, Instruction):
            return v
        key = (block, v)
        if key in self.needed:
            return self.needed[key]
        home = v.parent
        if not self.loops.in_loop(home) and self.dom.dominates(home, self.exit):
            return v
        pop = self.pop_builders[block]
        ind = self.inductions.get(v)
        if ind is not None and block in ind.loop.blocks:
            result = self.needed[key] = pop.load(v.type, self._induction_slot(v), f"{v.name}.rev")
            return result
        recomputable = v.opcode in RECOMPUTABLE or is_pure_math_call(v)
        if depth < MAX_RECOMPUTE_DEPTH and recomputable and (v.opcode != "load" or self._readonly(v) or (
                self.refills is not None and self.refills.reloadable(v, block))):
            operands = [self.need(o, block, depth + 1) for o in v.operands]
            clone = copy.copy(v)
            clone.name, clone.parent, clone.flags = "", None, set(v.flags)
            clone.operands = operands
            result = pop.insert(clone, f"{v.name or 'v'}.re")
            self._note_recomputed(result, block)
        else:
            result = self._invariant(v, block)
            if result is None:
                result = self.tape.cache(block, self.loops.in_loop(block), v, pop)
        self.needed[key] = result
        return result

    def _invariant(self, v: Instruction, block: Block) -> Instruction | None:
        """``v`` where it is invariant in loops around ``block``: defined outside them, so taping it in
        ``block``'s record would push the same value on every iteration (llm.c's layernorm: the mean
        and the variance of a row, pushed C times each). It is taken once per execution of the
        outermost such loop instead, at the loop's exits (``need`` there: reused, recomputed, or in the
        exit's record, pushed after the loop's records and popped before the reverse sweep enters the
        loop), kept in a slot the reverse of every exit sets, and read from it inside the loop.
        None (tape it per iteration) where an exit is not dominated by ``v`` or has predecessors
        outside the loop: the reverse sweep could enter the loop without passing a reverse that set it."""
        outside = [loop for loop in self.loops.containing[block] if v.parent not in loop.blocks]
        if not outside or not self.dom.dominates(v.parent, block):
            return None
        loop = max(outside, key=lambda candidate: len(candidate.blocks))       # the outermost
        key = (loop.header, v)
        slot = self.invariant_slots.get(key)
        if slot is None:
            # the exits the reverse sweep can come from (a failure path that never returns has none)
            exits = [e for e in self.live if e not in loop.blocks and any(p in loop.blocks for p in self.preds[e])]
            if not exits or any(not self.dom.dominates(v.parent, e) or any(p not in loop.blocks for p in self.preds[e])
                                for e in exits):
                return None
            slot = self.entry.alloca(v.type, f"{v.name or 'v'}.invariant")
            for e in exits:
                self.pop_builders[e].store(self.need(v, e), slot)
            self.invariant_slots[key] = slot
        return self.pop_builders[block].load(v.type, slot, f"{v.name or 'v'}.inv")

    def _induction_slot(self, phi: Instruction) -> Instruction:
        """The reverse sweep's copy of an induction variable: set where the reverse sweep enters
        the loop (from an exit), stepped back on each reverse latch edge."""
        if phi not in self.induction_slots:
            self.induction_slots[phi] = self.entry.alloca(phi.type, f"{phi.name}.rev.slot")
        return self.induction_slots[phi]

    def _readonly(self, load: Instruction) -> bool:
        load = self.shadow_loads.get(load, load)     # a shadow pointer's load: as its primal load
        pointer = self.original.get(load.operands[0], load.operands[0])
        return all(self.readonly_root(root) for root in leaves(pointer))

    def readonly_root(self, root: Value) -> bool:
        """The primal never writes through ``root`` (an argument or global): every write of the
        primal (stores, atomics, ``llvm.memset``/``memcpy``/``memmove``, ``free``/``realloc``) goes
        through pointers derived (GEPs, casts, phis, selects: analysis/pointers.leaves) from other
        arguments or globals, or from the function's own allocas and heap blocks, and it calls
        nothing else with a pointer (which might write anywhere)."""
        if not hasattr(self, "_written_roots"):
            self._written_roots, self._writes_unknown = written_roots(self.primal)
        return (not self._writes_unknown and isinstance(root, (Argument, GlobalVariable))
                and root not in self._written_roots)

    def _rebuild(self, v: Value, block: Block, b: Builder, memo: dict) -> Value:
        """``v`` recomputed at ``b`` for ``block``'s reverse. Values whose home dominates
        ``block`` ran on every path into it and come from ``need``; the others are cloned
        here, where the caller has established that the forward sweep computed them."""
        if not isinstance(v, Instruction) or v in self.inductions or self.dom.dominates(v.parent, block):
            return self.need(v, block)
        if v not in memo:
            clone = copy.copy(v)
            clone.name, clone.parent, clone.flags = "", None, set(v.flags)
            clone.operands = [self._rebuild(o, block, b, memo) for o in v.operands]
            memo[v] = b.insert(clone, f"{v.name or 'v'}.re")
            self._note_recomputed(memo[v], block)
        return memo[v]

    def _note_recomputed(self, clone: Instruction, block: Block) -> None:
        if clone.opcode == "load":
            self.recomputed_loads.append((clone, block))

    def _recomputable(self, v: Value, depth: int = 0) -> bool:
        """Whether ``need`` can rebuild ``v`` from arguments, constants, induction variables and
        read-only loads (no tape): only then is re-deriving a branch worth it."""
        if not isinstance(v, Instruction) or v in self.inductions:
            return True
        if not self.loops.in_loop(v.parent) and self.dom.dominates(v.parent, self.exit):
            return True
        if depth >= MAX_RECOMPUTE_DEPTH or not (v.opcode in RECOMPUTABLE or is_pure_math_call(v)):
            return False
        if v.opcode == "load" and not self._readonly(v):
            return False
        return all(self._recomputable(o, depth + 1) for o in v.operands)
