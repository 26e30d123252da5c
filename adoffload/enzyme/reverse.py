"""Reverse mode: the combined adjoint (augmented forward sweep, then the reverse sweep).

``reverse(module, fn, activity)`` adds a function that runs a copy of ``fn`` (the augmented
forward sweep, which also writes the tape) and then walks the CFG backwards: every primal
block B gets a reverse block ``B.rev`` that undoes B's instructions in reverse order and then
branches to the reverse of the predecessor that led into B (recorded in the forward sweep as
a "came-from" index when B has several predecessors). Adjoints live in one ``alloca``
accumulator per active value (SROA/mem2reg turn them into registers after AD); a phi's
adjoint flows to the incoming value of the edge taken. What the reverse sweep needs from the
primal is reused, recomputed or cached on the tape (policy in reverse_values.py, storage in
tape.py); shadow updates are plain, per-thread-uniform or atomic (analysis/address_classes.py), or
logged in deterministic mode (deterministic.py).

The engine is one class, ``_Reverser``, assembled from one module per responsibility: set-up,
shadows and adjoint slots here; the value policy (reverse_values.py); the reversed control flow
(reverse_blocks.py); the reverse of each instruction, memory and calls included
(reverse_instructions.py, reverse_memory.py, reverse_accumulate.py); the tape and the result
(reverse_finish.py).

Derived function: primal args, then one shadow per non-Const arg (pointer shadow for a Dup
pointer, ``ptr`` to a one-element accumulator for an Active/Dup float scalar), then ``dret``
(the seed) if ``fn`` returns a float, then ``ptr %tape, i64 %tape_offset`` if the tape is
dynamic (see tape.py), then ``ptr %log, i64 %log_offset`` if deterministic mode logs contributions
(see deterministic.py). It returns void.

Assumption: distinct pointer arguments do not alias (kernel arrays are distinct buffers);
loads from an argument the function never writes are recomputed in the reverse sweep. A kernel's
adjoint says so to LLVM: those arguments are ``noalias`` (``_mark_readonly_noalias``).
"""
from __future__ import annotations

from ..errors import DifferentiationError
from ..ir.builder import Builder
from ..ir.clone import clone_function_body
from ..ir.core import (Argument, Block, Function, FunctionType, Instruction, Module,
                       Value, const, i8, i64, ptr, void)
from .activity import CONST, Activity, derived_attributes, is_float_type, is_placeholder_pointer
from .adjoint_values import adjoint_identity, add_adjoints, zero_of
from .memory import (allocation_size, heap_function, refuse_unsafe_stack_array, shadow_alloc, stack_array_count,
                     zeroed_stack_array)
from .refill import Refills
from .reverse_accumulate import flush_sums
from .reverse_thread import thread_tail
from .deferred import DeferredAdds
from .deterministic import ContributionLog
from ..analysis.address_classes import AddressClassifier, ParallelInfo
from ..analysis.control_flow import Dominators, LoopInfo, inductions, predecessor_map, reachable_blocks
from .zero_adjoints import maybe_zero_adjoints
from .rules import describe
from .soundness import analyze, check_kernel_stores, check_rerun
from .tape import STATIC_TAPE_LIMIT, Tape
from .reverse_blocks import ControlFlowReversal
from .reverse_finish import Finishing, ReverseResult
from .reverse_instructions import InstructionReversal
from .reverse_values import PrimalValues, strip_pointer


def reverse(module: Module, fn: Function, activity: list[Activity], name: str | None = None,
            deterministic: bool = False, parallel: ParallelInfo | None = None,
            failure_arg: int | None = None, static_tape_limit: int = STATIC_TAPE_LIMIT) -> ReverseResult:
    """Add the combined adjoint of ``fn`` to ``module`` (see the module docstring).

    ``deterministic``: shadow updates that may race (SHARED, UNIFORM) go to a per-thread
    contribution log that the launcher reduces in a fixed order (deterministic.py). Without
    ``parallel`` every update is already a plain per-thread add, so nothing changes.
    ``failure_arg``: the kernel's status-record argument. A thread that records a failure (a
    bounds error) returns without a reverse sweep: the launch raises anyway, and reversing those
    exits would enter loops at several points (an irreducible adjoint no one could differentiate
    again). ``static_tape_limit``: the most bytes of a local-array tape (inner_arrays.py raises it).
    """
    name = name or f"{fn.name}.reverse"
    try:
        return _Reverser(module, fn, list(activity), parallel, deterministic=deterministic and parallel is not None,
                         failure_arg=failure_arg, static_tape_limit=static_tape_limit).build(name)
    except BaseException:
        module.functions.pop(name, None)     # leave no half-built function behind in the module
        raise


# ----------------------------------------------------------------------------- cloning


# ----------------------------------------------------------------------------- the engine

class _Reverser(PrimalValues, ControlFlowReversal, InstructionReversal, Finishing):
    def __init__(self, module: Module, fn: Function, activity: list[Activity], parallel: ParallelInfo | None,
                 deterministic: bool = False, failure_arg: int | None = None,
                 static_tape_limit: int = STATIC_TAPE_LIMIT):
        self.module, self.primal, self.activity, self.parallel = module, fn, activity, parallel
        self.static_tape_limit = static_tape_limit
        self.deterministic, self.failure_arg = deterministic, failure_arg
        self.info = analyze(fn, activity)
        if parallel is not None:         # a kernel: its adjoint is a launch of its own
            check_rerun(fn, fn.args[failure_arg] if failure_arg is not None else None)
            check_kernel_stores(fn, activity, parallel, "reverse")

    # ---- set-up
    def build(self, name: str) -> ReverseResult:
        fn = self._declare(name)
        self._clone_forward(fn)
        self._make_shadows()
        self.maybe_zero = maybe_zero_adjoints(self.blocks, self.exit)
        self.dom = Dominators(self.blocks)
        self.loops = LoopInfo(self.blocks, self.dom)
        self.preds = predecessor_map(self.blocks)
        self.inductions = inductions(self.loops.loops, self.dom, self.preds)
        self.induction_slots: dict[Instruction, Instruction] = {}
        self.invariant_slots: dict[tuple, Instruction] = {}   # (loop header, value) -> slot (reverse_values)
        self.loop_heads: dict = {}           # loop -> (reverse head block, selector slot, its switch)
        self.classifier = (AddressClassifier(self.parallel, self.dom, fn.args[:len(self.primal.args)], function=fn)
                           if self.parallel is not None else None)
        self.tape = Tape(fn, self.entry)
        self.log = (ContributionLog(fn, self.entry, [fn.args[j] for j in sorted(self.shadow_args.values())])
                    if self.deterministic else None)
        self.deferred = DeferredAdds(self.entry)
        self.recomputed_loads: list[tuple[Instruction, Block]] = []
        self._mark_readonly_noalias(fn)
        self._reverse_blocks()
        self.refills = (Refills(self, {fn.args[k] for k in self.parallel.block_shared_args})
                        if self.parallel is not None and self.parallel.block_shared_args else None)
        for block in self.live:
            self._reverse_block(block)
        self.final = flush_sums(self, self.final)
        self.final.ret()
        thread_tail(self)
        return self._finish()

    def _declare(self, name: str) -> Function:
        primal = self.primal
        params = [a.type for a in primal.args]
        names = [a.name for a in primal.args]
        self.shadow_args: dict[int, int] = {}
        for k, (arg, act) in enumerate(zip(primal.args, self.activity)):
            if act is not CONST:
                self.shadow_args[k] = len(params)
                params.append(ptr)
                names.append(f"d_{arg.name}")
        self.returns_float = is_float_type(primal.return_type)
        if self.returns_float:
            params.append(primal.return_type)
            names.append("dret")
        fn = Function(name, FunctionType(void, tuple(params)),
                      [Argument(t, n, k) for k, (t, n) in enumerate(zip(params, names))])
        fn.personality = primal.personality       # landing pads (invoke) need the primal's
        for arg, new in zip(primal.args, fn.args):
            new.attributes = derived_attributes(arg)
        self.module.add_function(fn)
        self.fn = fn
        return fn

    def _mark_readonly_noalias(self, fn: Function) -> None:
        """A kernel's adjoint: ``noalias`` on the primal pointer arguments it only reads (``readonly_root``).

        The reverse sweep recomputes loads of those arrays after it has written its shadows, which is
        right only if no array the adjoint writes (a shadow, an output, the status record) shares their
        memory: the engine's assumption (module docstring; the launcher refuses written arrays that
        overlap another). Saying so to LLVM (the inliner turns it into alias scopes) lets a load of such
        an array be shared across the shadow atomics of one iteration and hoisted out of the reverse
        loop, instead of being issued again after each atomic. Kernels only: helpers differentiated
        inside a kernel (inner.py) get pointers that need not be distinct."""
        if self.parallel is None:
            return
        for arg, new in zip(self.primal.args, fn.args):
            if arg.type.is_pointer and self.readonly_root(arg):
                new.attributes.add("noalias")

    def _clone_forward(self, fn: Function) -> None:
        value_map = dict(zip(self.primal.args, fn.args))
        block_map, returns = clone_function_body(self.primal, fn, value_map)
        self.block_map = block_map
        self.original = {new: old for old, new in value_map.items()}
        self.forward_insts = {v for v in value_map.values() if isinstance(v, Instruction)}
        exit_block = fn.add_block("exit")
        b = Builder(exit_block)
        self.ret_phi = None
        if self.returns_float:
            self.ret_phi = b.phi(self.primal.return_type, [(r.operands[0], r.parent) for r in returns], "retval")
        self.exit_branch = b.emit("unreachable", void, [])   # becomes ``br exit.rev`` below
        for r in returns:
            r.opcode, r.operands, r.blocks = "br", [], [exit_block]
        self.exit = exit_block
        if self.failure_arg is not None and not self.returns_float:
            self._end_failed_threads(fn, fn.args[self.failure_arg])
        self.blocks = reachable_blocks(fn)
        self.entry = Builder()
        self.entry.position_before(fn.entry.instructions[0])
        self.adjoint_slots: dict[Value, Instruction] = {}
        self.uniform_sums: dict[Value, Instruction] = {}

    def _end_failed_threads(self, fn: Function, status: Value) -> None:
        """Edges from failure-recording blocks to a plain return go to a ``ret`` of their own,
        outside the reverse sweep (see ``reverse``'s ``failure_arg``)."""
        failing = {b for b in fn.blocks
                   if any(i.opcode == "atomicrmw" and strip_pointer(i.operands[0]) is status for i in b.instructions)}
        preds = fn.predecessors()
        grown = True
        while grown:
            grown = False
            for b in fn.blocks:
                if b not in failing and preds[b] and all(p in failing for p in preds[b]):
                    failing.add(b)
                    grown = True
        returning = {b for b in fn.blocks if len(b.instructions) == 1 and b.terminator is not None
                     and b.terminator.blocks == [self.exit]}
        failed_exit = None
        for b in failing:
            term = b.terminator
            if term is None or not any(t in returning for t in term.blocks):
                continue
            if failed_exit is None:
                failed_exit = fn.add_block("failed.exit")
                Builder(failed_exit).ret()
            term.blocks = [failed_exit if t in returning else t for t in term.blocks]

    # ---- shadows (augmented forward)
    def _make_shadows(self) -> None:
        """Shadow pointers next to their primal pointers: GEPs, casts, phis, selects, allocas."""
        self.shadow: dict[Value, Value] = {}
        self.shadow_loads: dict[Instruction, Instruction] = {}
        for k, j in self.shadow_args.items():
            if self.fn.args[k].type.is_pointer:
                self.shadow[self.fn.args[k]] = self.fn.args[j]
        phis = []
        for block in self.blocks:
            for inst in list(block.instructions):
                old = self.original.get(inst)
                if old is None or not self.info.has_shadow(old):
                    continue
                b = Builder()
                b.position_before(inst)
                b.index += 1
                s = self._shadow_of(inst, b, phis)
                s.name = self.fn.fresh_name(f"{inst.name or 'p'}.shadow")
                self.shadow[inst] = s
        for phi, s in phis:
            s.operands = [self._shadow_operand(v, phi) for v in phi.operands]
        self._store_shadow_pointers()

    def _store_shadow_pointers(self) -> None:
        """A pointer with a shadow stored into memory with a shadow: its shadow goes into the shadow
        memory beside it, in the augmented forward sweep (pointer_memory.py); the reverse sweep leaves
        it there (``_reverse_store``), for the shadow loads it recomputes."""
        for block in self.blocks:
            for inst in list(block.instructions):
                old = self.original.get(inst)
                if (old is None or old.opcode != "store" or not old.operands[0].type.is_pointer
                        or not self.info.has_shadow(old.operands[1]) or not (
                            self.info.has_shadow(old.operands[0]) or is_placeholder_pointer(old.operands[0]))):
                    continue
                b = Builder()
                b.position_before(inst)
                b.index += 1
                b.store(self._shadow_operand(inst.operands[0], inst), self._shadow_operand(inst.operands[1], inst),
                        align=inst.align)

    def _shadow_of(self, inst: Instruction, b: Builder, phis: list) -> Instruction:
        op = inst.opcode
        if op == "getelementptr":
            return b.gep(inst.element_type, self._shadow_operand(inst.operands[0], inst), inst.operands[1:],
                         inbounds="inbounds" in inst.flags)
        if op in ("bitcast", "addrspacecast"):
            return b.cast(op, self._shadow_operand(inst.operands[0], inst), inst.type)
        if op == "select":
            return b.select(inst.operands[0], self._shadow_operand(inst.operands[1], inst),
                            self._shadow_operand(inst.operands[2], inst))
        if op == "phi":
            s = b.phi(inst.type, [(v, blk) for v, blk in zip(inst.operands, inst.blocks)])
            phis.append((inst, s))
            return s
        if op == "load":          # a pointer kept in memory: its shadow from the shadow memory
            s = b.load(inst.type, self._shadow_operand(inst.operands[0], inst), align=inst.align)
            self.shadow_loads[s] = inst     # recomputed or taped as the primal load is (reverse_values.py)
            return s
        heap = heap_function(inst)
        if heap is not None:      # realloc too: the old shadow stays until the reverse sweep (_reverse_heap)
            return b.call(shadow_alloc(self.module), [allocation_size(b, inst)])
        if op == "alloca" and stack_array_count(inst) is not None:    # beside it: its count may be computed late
            refuse_unsafe_stack_array(self.original[inst], "@" + self.primal.name)
            return zeroed_stack_array(self.module, b, inst.element_type, inst.operands[0], align=inst.align)
        if op == "alloca":
            s = self.entry.alloca(inst.element_type)
            s.align = inst.align          # the primal's accesses, copied to the shadow, claim it
            self.entry.store(zero_of(inst.element_type), s)
            # use the array through a GEP: ir export types an alloca as a pointer to its whole
            # array, and an element store straight into it is refused (the GEP folds away)
            return self.entry.gep(i8, s, [const(i64, 0)])
        raise DifferentiationError(f"cannot build a shadow pointer for {describe(inst)}")

    def _shadow_operand(self, v: Value, user: Instruction) -> Value:
        if v in self.shadow:
            return self.shadow[v]
        if is_placeholder_pointer(v):
            return v
        raise DifferentiationError(f"pointer {v.ref()} used by {describe(user)} has no shadow "
                                   f"(it mixes a Const pointer with a Dup one)")

    # ---- activity
    def has_adjoint(self, v: Value) -> bool:
        if v is self.ret_phi and v is not None:
            return True
        if isinstance(v, Argument):
            return v.index in self.shadow_args and not v.type.is_pointer
        old = self.original.get(v)
        return old is not None and not isinstance(old, Argument) and self.info.is_active(old)

    def adjoint_slot(self, v: Value) -> Instruction:
        slot = self.adjoint_slots.get(v)
        if slot is None:
            slot = self.entry.alloca(v.type, f"{v.name or 'v'}.adj")
            self.entry.store(adjoint_identity(v.type), slot)
            self.adjoint_slots[v] = slot
        return slot

    def take_adjoint(self, v: Value, b: Builder) -> Value:
        """The adjoint accumulated for ``v`` so far; resets it (v may be redefined in a loop)."""
        slot = self.adjoint_slot(v)
        adj = b.load(v.type, slot, f"{v.name or 'v'}.d")
        b.store(adjoint_identity(v.type), slot)
        return adj

    def add_adjoint(self, v: Value, delta: Value | None, b: Builder) -> None:
        if delta is None or not self.has_adjoint(v):
            return
        slot = self.adjoint_slot(v)
        b.store(add_adjoints(b, b.load(v.type, slot), delta), slot)
