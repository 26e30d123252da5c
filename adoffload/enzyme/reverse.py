"""Reverse mode: the combined adjoint (augmented forward sweep, then the reverse sweep).

``reverse(module, fn, activity)`` adds a function that runs a copy of ``fn`` (the augmented
forward sweep, which also writes the tape) and then walks the CFG backwards: every primal
block B gets a reverse block ``B.rev`` that undoes B's instructions in reverse order and then
branches to the reverse of the predecessor that led into B (recorded in the forward sweep as
a "came-from" index when B has several predecessors). Adjoints live in one ``alloca``
accumulator per active value (SROA/mem2reg turn them into registers after AD); a phi's
adjoint flows to the incoming value of the edge taken. What the reverse sweep needs from the
primal is reused, recomputed or cached on the tape (policy in ``_Reverser.need``, storage in
tape.py); shadow updates are plain, per-thread-uniform or atomic (parallel.py), or logged in
deterministic mode (deterministic.py).

Derived function: primal args, then one shadow per non-Const arg (pointer shadow for a Dup
pointer, ``ptr`` to a one-element accumulator for an Active/Dup float scalar), then ``dret``
(the seed) if ``fn`` returns a float, then ``ptr %tape, i64 %tape_offset`` if the tape is
dynamic (see tape.py), then ``ptr %log, i64 %log_offset`` if deterministic mode logs contributions
(see deterministic.py). It returns void.

Assumption: distinct pointer arguments do not alias (kernel arrays are distinct buffers);
loads from an argument the function never writes are recomputed in the reverse sweep.
"""
from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Callable

from ..language import collectives
from ..errors import DifferentiationError
from ..ir.builder import Builder
from ..ir.clone import clone_function_body
from ..ir.core import (Argument, Block, Function, FunctionType, GlobalVariable, Instruction,
                       Module, Value, const, i8, i32, i64, ptr, void)
from .activity import (CONST, Activity, derived_attributes, is_float_type, is_placeholder_pointer,
                       is_uniform_add)
from .blocks import REPLAYED_CALLS
from .adjoint_values import adjoint_identity, add_adjoints, zero_of
from .memory import (allocation_size, heap_function, refuse_unsafe_stack_array, shadow_alloc, stack_array_count,
                     zeroed_stack_array)
from .refill import Refills
from .reverse_accumulate import accumulate, flush_sums
from .reverse_memory import reverse_copy, reverse_heap
from .reverse_thread import thread_tail
from .custom import custom_cotangents, extractvalue_reverse, find_custom, insertvalue_reverse
from .forward import _IGNORED_CALLS
from .deferred import DeferredAdds
from .deterministic import ContributionLog, LogSpec, attach_log
from ..analysis.address_classes import (UNIFORM_ADD_PREFIX, AddressClass, AddressClassifier, ParallelInfo,
    pointer_roots)
from ..analysis.races.store_seeds import SEED_EXCHANGE, stored_by_the_block
from ..analysis.control_flow import Dominators, LoopInfo, exit_value, inductions, predecessor_map, reachable_blocks
from .zero_adjoints import maybe_zero_adjoints
from .rules import RuleContext, describe, reverse_contributions, rule_for, rule_key
from .soundness import analyze, check_kernel_stores, check_rerun
from .stats import PER_ITERATION, PER_THREAD, ReverseStats
from .vectors import extractelement_reverse, insertelement_reverse, shufflevector_reverse
from .tape import STATIC_TAPE_LIMIT, Tape, TapeSpec, add_count_function

ReverseOverride = Callable[[RuleContext, Instruction, Value], "list[Value | None]"]
# Reverse-only rules that take precedence over rules.RULES (keyed like it).
REVERSE_OVERRIDES: dict[str, ReverseOverride] = {"extractvalue": extractvalue_reverse,
                                                 "insertvalue": insertvalue_reverse,
                                                 "extractelement": extractelement_reverse,
                                                 "insertelement": insertelement_reverse,
                                                 "shufflevector": shufflevector_reverse}

# Pure instructions the reverse sweep may re-execute instead of caching (loads: see _readonly).
_RECOMPUTABLE = frozenset({
    "getelementptr", "bitcast", "addrspacecast", "ptrtoint", "inttoptr", "trunc", "zext", "sext",
    "fpext", "fptrunc", "sitofp", "uitofp", "fptosi", "fptoui", "add", "sub", "mul", "shl", "lshr",
    "ashr", "and", "or", "xor", "sdiv", "udiv", "srem", "urem", "icmp", "fcmp", "select", "fadd", "fsub",
    "fmul", "fdiv", "frem", "fneg", "extractvalue", "freeze", "load"})
_MAX_RECOMPUTE_DEPTH = 64   # recomputing beats a tape on GPUs: registers and FLOPs are cheap, memory is not
_WRITES = frozenset({"store", "atomicrmw", "cmpxchg"})


def _is_pure_math_call(v: Instruction) -> bool:
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


@dataclass
class ReverseResult:
    function: Function
    tape: TapeSpec | None = None
    count_function: Function | None = None
    log: LogSpec | None = None          # deterministic mode's contribution log (deterministic.py)
    stats: ReverseStats | None = None   # tape, recomputed loads, deferred updates (stats.py)


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

def _strip_pointer(pointer: Value) -> Value:
    while isinstance(pointer, Instruction) and pointer.opcode in ("getelementptr", "bitcast", "addrspacecast"):
        pointer = pointer.operands[0]
    return pointer




# ----------------------------------------------------------------------------- the engine

class _Reverser:
    def __init__(self, module: Module, fn: Function, activity: list[Activity], parallel: ParallelInfo | None,
                 deterministic: bool = False, failure_arg: int | None = None, static_tape_limit: int = STATIC_TAPE_LIMIT):
        self.module, self.primal, self.activity, self.parallel, self.static_tape_limit = module, fn, activity, parallel, static_tape_limit
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
        self.maybe_zero = maybe_zero_adjoints(self.blocks)
        self.dom = Dominators(self.blocks)
        self.loops = LoopInfo(self.blocks, self.dom)
        self.preds = predecessor_map(self.blocks)
        self.inductions = inductions(self.loops.loops, self.dom, self.preds)
        self.induction_slots: dict[Instruction, Instruction] = {}
        self.loop_heads: dict = {}           # loop -> (reverse head block, selector slot, its switch)
        self.classifier = (AddressClassifier(self.parallel, self.dom, fn.args[:len(self.primal.args)], function=fn)
                           if self.parallel is not None else None)
        self.tape = Tape(fn, self.entry)
        self.log = (ContributionLog(fn, self.entry, [fn.args[j] for j in sorted(self.shadow_args.values())])
                    if self.deterministic else None)
        self.deferred = DeferredAdds(self.entry)
        self.recomputed_loads: list[tuple[Instruction, Block]] = []
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
                   if any(i.opcode == "atomicrmw" and _strip_pointer(i.operands[0]) is status for i in b.instructions)}
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
        recomputable = v.opcode in _RECOMPUTABLE or _is_pure_math_call(v)
        if depth < _MAX_RECOMPUTE_DEPTH and recomputable and (v.opcode != "load" or self._readonly(v) or (
                self.refills is not None and self.refills.reloadable(v, block))):
            operands = [self.need(o, block, depth + 1) for o in v.operands]
            clone = copy.copy(v)
            clone.name, clone.parent, clone.flags = "", None, set(v.flags)
            clone.operands = operands
            result = pop.insert(clone, f"{v.name or 'v'}.re")
            self._note_recomputed(result, block)
        else:
            result = self.tape.cache(block, self.loops.in_loop(block), v, pop)
        self.needed[key] = result
        return result

    def _induction_slot(self, phi: Instruction) -> Instruction:
        """The reverse sweep's copy of an induction variable: set where the reverse sweep enters
        the loop (from an exit), stepped back on each reverse latch edge."""
        if phi not in self.induction_slots:
            self.induction_slots[phi] = self.entry.alloca(phi.type, f"{phi.name}.rev.slot")
        return self.induction_slots[phi]

    def _enter_loops(self, exit_block: Block, pred: Block, edge: Builder) -> None:
        """On the reverse of edge pred -> exit_block: restore the IVs of the loops it leaves."""
        for ind in self.inductions.values():
            if pred in ind.loop.blocks and exit_block not in ind.loop.blocks:
                last = exit_value(ind, pred, exit_block)
                edge.store(self.need(ind.phi, exit_block) if last is None else last, self._induction_slot(ind.phi))

    def _readonly(self, load: Instruction) -> bool:
        return self.readonly_root(_strip_pointer(self.original.get(load.operands[0], load.operands[0])))

    def readonly_root(self, root: Value) -> bool:
        """The primal never writes through ``root`` (an argument or global), nor calls anything
        with a pointer (which might)."""
        if not hasattr(self, "_written_roots"):
            roots, unknown = set(), False
            for inst in self.primal.instructions():
                target = inst.operands[1] if inst.opcode == "store" else (
                    inst.operands[0] if inst.opcode in _WRITES else None)
                if is_uniform_add(inst):          # writes its pointer operand, nothing else
                    target = inst.operands[0]
                elif inst.opcode == "call" and any(o.type.is_pointer for o in inst.operands):
                    unknown = True
                if target is not None:
                    roots.add(_strip_pointer(self.original.get(target, target)))
            self._written_roots, self._writes_unknown = roots, unknown or any(
                not isinstance(r, (Argument, GlobalVariable)) for r in roots)
        return (not self._writes_unknown and isinstance(root, (Argument, GlobalVariable))
                and root not in self._written_roots)

    # ---- reverse CFG
    def _reverse_blocks(self) -> None:
        reaches = {self.exit}
        changed = True
        while changed:
            changed = False
            for b in self.blocks:
                if b not in reaches and any(s in reaches for s in b.successors):
                    reaches.add(b)
                    changed = True
        self.live = [b for b in self.blocks if b in reaches]
        self.rev: dict[Block, Block] = {}
        self.rev_body: dict[Block, Block] = {}
        self.pop_builders: dict[Block, Builder] = {}
        self.needed: dict = {}
        for block in reversed(self.live):
            head = self.fn.add_block(f"{block.name}.rev")
            body = self.fn.add_block(f"{block.name}.rev.body")
            Builder(head).br(body)
            self.rev[block], self.rev_body[block] = head, body
            pop = Builder()
            pop.position_before_terminator(head)
            self.pop_builders[block] = pop
        self.exit_branch.opcode, self.exit_branch.blocks = "br", [self.rev[self.exit]]
        self.came_from: dict[Block, Instruction] = {}
        self.reverse_edges: dict[Block, dict[Block, Block]] = {}   # a join -> {predecessor: its reverse edge}

    def _came_from(self, block: Block) -> Instruction:
        """An i32 phi at the top of ``block``: the index of the predecessor that led in."""
        if block not in self.came_from:
            incoming = []
            for k, p in enumerate(self.preds[block]):
                incoming += [(const(i32, k), p)] * sum(1 for s in p.terminator.blocks if s is block)
            phi = Instruction("phi", i32, [v for v, _ in incoming], blocks=[p for _, p in incoming])
            phi.name = self.fn.fresh_name(f"{block.name}.from")
            block.insert(0, phi)
            self.came_from[block] = phi
        return self.came_from[block]

    def _branch_tree(self, block: Block, preds: list[Block] | None = None):
        """How the forward sweep chose among a merge's predecessors, when the merge joins a
        tree of (nested) two-way branches: a predecessor (a leaf), or ``(branch, on_true,
        on_false)``. None when it is not such a tree (the came-from index is then recorded)."""
        preds = self.preds[block] if preds is None else preds
        if len(preds) == 1:
            return preds[0]
        branch_block = preds[0]
        for p in preds[1:]:
            branch_block = self.dom._intersect(branch_block, p)
        term = branch_block.terminator
        if (term is None or term.opcode != "br" or len(term.blocks) != 2 or term.blocks[0] is term.blocks[1]
                or self.loops.containing[branch_block] != self.loops.containing[block]
                or not self._recomputable(term.operands[0])):
            return None
        sides: list[list[Block]] = [[], []]
        for p in preds:
            side = self._branch_side(term, p, block)
            if side is None:
                return None
            sides[side].append(p)
        if not sides[0] or not sides[1]:
            return None
        on_true, on_false = self._branch_tree(block, sides[0]), self._branch_tree(block, sides[1])
        if on_true is None or on_false is None:
            return None
        return term, on_true, on_false

    def _dispatch(self, block: Block, tree, b: Builder, targets: dict[Block, Block], memo: dict) -> None:
        """Branch to the reverse of the predecessor the forward sweep came from by re-deciding
        ``tree``'s branches in the same nesting: a nested condition is recomputed only below
        the arm that evaluated it, so nothing runs speculatively (no load through an index
        that an outer branch ruled out, such as a -1 neighbor slot)."""
        if isinstance(tree, Block):
            b.br(targets[tree])
            return
        term, on_true, on_false = tree
        condition = self._rebuild(term.operands[0], block, b, memo)
        arms = []
        for side, subtree in (("t", on_true), ("f", on_false)):
            if isinstance(subtree, Block):
                arms.append(targets[subtree])
                continue
            arm = self.fn.add_block(f"{block.name}.rev.{side}.{term.parent.name}")
            self._dispatch(block, subtree, Builder(arm), targets, dict(memo))
            arms.append(arm)
        b.cbranch(condition, *arms)

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
        if depth >= _MAX_RECOMPUTE_DEPTH or not (v.opcode in _RECOMPUTABLE or _is_pure_math_call(v)):
            return False
        if v.opcode == "load" and not self._readonly(v):
            return False
        return all(self._recomputable(o, depth + 1) for o in v.operands)

    def _branch_side(self, term: Instruction, pred: Block, merge: Block) -> int | None:
        """0/1: which successor of ``term`` every path into ``pred`` (then ``merge``) took."""
        for k, successor in enumerate(term.blocks):
            if pred is term.parent and successor is merge:
                return k
            if (successor is not merge and self.preds[successor] == [term.parent]
                    and self.dom.dominates(successor, pred)):
                return k
        return None

    def _reverse_block(self, block: Block) -> None:
        b = Builder(self.rev_body[block])
        if self.refills is not None:         # block kernels' tiles: refill.py
            b = self.refills.emit(block, b)
        if block is self.exit and self.returns_float:
            self.add_adjoint(self.ret_phi, self.fn.args[len(self.fn.args) - 1], b)
        for inst in reversed(list(block.instructions)):      # the entry block grows allocas
            if inst in self.forward_insts and inst.opcode != "phi" and not inst.is_terminator:
                b.location = inst.location
                self._reverse_instruction(inst, block, b)
        phi_adjoints = [(phi, self.take_adjoint(phi, b)) for phi in block.phis if self.has_adjoint(phi)]
        preds = self.preds[block]
        if not preds:
            self.final = b          # the end of the reverse sweep; closed by build()
            return
        header_inductions = [i for i in self.inductions.values() if i.loop.header is block]
        ind = header_inductions[0] if header_inductions else None
        targets = []
        for k, p in enumerate(preds):
            edge = b if len(preds) == 1 else Builder(self.fn.add_block(f"{block.name}.rev.from.{p.name}"))
            for phi, adj in phi_adjoints:
                self.add_adjoint(phi.operands[phi.blocks.index(p)], adj, edge)
            self._enter_loops(block, p, edge)
            for step_back in header_inductions:      # every induction of the loop, not only the tested one
                if p is step_back.loop.latches[0]:
                    slot = self._induction_slot(step_back.phi)
                    edge.store(edge.sub(edge.load(step_back.phi.type, slot), const(step_back.phi.type, step_back.step)),
                               slot)
            self._jump_to_reverse(edge, block, p)
            targets.append(edge.block)
        if len(preds) > 1:
            self.reverse_edges[block] = dict(zip(preds, targets))
        if len(preds) > 1 and ind is not None:
            first = b.icmp("eq", self.need(ind.phi, block), self.need(ind.start, block), "first.iteration")
            b.cbranch(first, targets[preds.index(ind.preheader)], targets[preds.index(ind.loop.latches[0])])
        elif len(preds) > 1:
            tree = self._branch_tree(block)
            if tree is not None:
                self._dispatch(block, tree, b, dict(zip(preds, targets)), {})
                return
            index = self.need(self._came_from(block), block)
            cases = [const(i32, k) for k in range(1, len(preds))]
            b.emit("switch", void, [index, *cases], blocks=[targets[0], *targets[1:]])

    def _jump_to_reverse(self, edge: Builder, block: Block, p: Block) -> None:
        """Branch from ``block``'s reverse to ``p``'s. The reverse of a loop is entered only
        through one head block per loop: the reverse edges of the loop's exits (several with a
        ``break``) and its reverse back edge all set the loop's selector and go to the head,
        which switches to the right reverse block. Without it a loop with two exits would be
        entered at two places in reverse: irreducible, and not differentiable again."""
        chain = [loop for loop in self.loops.containing[p] if block not in loop.blocks and self._needs_head(loop)]
        chain.sort(key=lambda loop: -len(loop.blocks))                  # outermost first
        back_edge = next((loop for loop in self.loops.containing[p]
                          if loop.header is block and p in loop.latches and self._needs_head(loop)), None)
        if back_edge is not None:
            chain.insert(0, back_edge)
        target = self.rev[p]
        for loop in reversed(chain):
            target = self._loop_head(loop, edge, target)
        edge.br(target)

    def _needs_head(self, loop) -> bool:
        """Whether the loop's reverse would be entered at more than one block: it is left from
        several blocks (a ``break`` besides the loop test)."""
        live = set(self.live)
        leaving = {b for b in loop.blocks if any(s not in loop.blocks and s in live for s in b.successors)}
        return len(leaving) > 1

    def _loop_head(self, loop, edge: Builder, target: Block) -> Block:
        """Make ``loop``'s reverse head switch to ``target`` (set on ``edge``); returns the head."""
        head = self.loop_heads.get(loop)
        if head is None:
            slot = self.entry.alloca(i32, f"{loop.header.name}.rev.to")
            block = self.fn.add_block(f"{loop.header.name}.rev.head")
            selector = Builder(block).load(i32, slot, "to")
            switch = Builder(block).emit("switch", void, [selector], blocks=[])
            head = self.loop_heads[loop] = (block, slot, switch)
        block, slot, switch = head
        if target not in switch.blocks:
            if switch.blocks:
                switch.operands.append(const(i32, len(switch.blocks)))
            switch.blocks.append(target)
        edge.store(const(i32, switch.blocks.index(target)), slot)
        return block

    def _reverse_instruction(self, inst: Instruction, block: Block, b: Builder) -> None:
        op = inst.opcode
        if op == "store":
            return self._reverse_store(inst, block, b)
        if op == "atomicrmw":
            return self._reverse_atomic(inst, block, b)
        if op == "call" and getattr(inst.callee, "name", "").startswith("llvm.memset"):
            # memory overwritten by constants: the adjoints of what it held are dropped
            if inst.operands[0] in self.shadow:
                b.call(inst.callee, [self.need(self.shadow[inst.operands[0]], block), const(i8, 0),
                                     self.need(inst.operands[2], block), inst.operands[3]])
            return None
        if op == "call" and getattr(inst.callee, "name", "").startswith(("llvm.memcpy", "llvm.memmove")):
            return reverse_copy(self, inst, block, b)
        if op == "call" and getattr(inst.callee, "name", "").startswith(UNIFORM_ADD_PREFIX):
            return self._reverse_uniform_add(inst, block, b)
        heap = heap_function(inst)
        if heap is not None:
            return reverse_heap(self, inst, heap, block, b)
        if op == "call" and getattr(inst.callee, "name", "") in REPLAYED_CALLS:    # block barriers (blocks.py)
            b.call(inst.callee, list(inst.operands))
            return None
        if (op == "call" and not getattr(inst.callee, "name", "").startswith(_IGNORED_CALLS)
                and any(o in self.shadow for o in inst.operands)):
            raise DifferentiationError(f"{describe(inst)} receives a pointer to differentiated memory; inline it "
                                       f"first (canonicalize inlines alwaysinline helpers)")
        if not self.has_adjoint(inst):
            return None
        adj = self.take_adjoint(inst, b)
        if op == "load":
            return accumulate(self, inst.operands[0], adj, block, b, origin=inst)
        if op == "freeze":
            return self.add_adjoint(inst.operands[0], adj, b)
        override = REVERSE_OVERRIDES.get(rule_key(inst))
        ctx = RuleContext(b, self.module, primal=lambda v: self.need(v, block))
        custom = find_custom(self.module, inst.callee) if op == "call" else None
        if custom is None and op == "call" and getattr(inst.callee, "name", "").startswith("llvm.fma."):
            return self._reverse_fma(inst, adj, block, b)
        if custom is not None:
            contributions = custom_cotangents(ctx, inst, custom, adj)
        else:
            contributions = (override(ctx, inst, adj) if override is not None
                             else reverse_contributions(ctx, rule_for(inst), inst, adj, strong=inst in self.maybe_zero))
        for operand, delta in zip(inst.operands, contributions):
            self.add_adjoint(operand, delta, b)

    def _reverse_fma(self, inst: Instruction, adj: Value, block: Block, b: Builder) -> None:
        """``r = fma(x, y, z)``: the adjoints of x and y are accumulated fused too, ``dx = fma(y, dr, dx)``
        (one rounding, as the primal asked for; ``llvm.fma`` is correctly rounded on every target),
        that of z is ``dz += dr``. Other products and sums keep their own roundings."""
        x, y, z = inst.operands
        for operand, other in ((x, y), (y, x)):
            if self.has_adjoint(operand):
                slot = self.adjoint_slot(operand)
                before = b.load(operand.type, slot)
                fused = b.call(inst.callee, [self.need(other, block), adj, before])
                if inst in self.maybe_zero:      # a structural zero adjoint adds nothing, even to a NaN factor
                    is_zero = RuleContext(b, self.module).fcmp("oeq", adj, zero_of(adj.type))
                    fused = b.select(is_zero, before, fused)
                b.store(fused, slot)
        self.add_adjoint(z, adj, b)

    def _reverse_store(self, inst: Instruction, block: Block, b: Builder) -> None:
        value, pointer = inst.operands
        if pointer not in self.shadow:
            return
        shadow = self.need(self.shadow[pointer], block)
        if not is_float_type(value.type):      # an integer overwrote the location: its adjoint is dropped
            b.store(zero_of(value.type), shadow, align=inst.align)
            return
        if self.log is not None:
            self.log.note_readback(self.shadow[pointer], inst)
        if self._stored_by_others(pointer, block):
            # other threads may store the same element (every thread writing its block's result): one
            # of them takes the seed; a load then a store of zero would hand it to all that read first
            seed = b.atomicrmw("xchg", shadow, zero_of(value.type), name=SEED_EXCHANGE)
            if self.has_adjoint(value):
                self.add_adjoint(value, seed, b)
            return
        if self.has_adjoint(value):
            self.add_adjoint(value, b.load(value.type, shadow, "d.stored", align=inst.align), b)
        b.store(zero_of(value.type), shadow, align=inst.align)

    def _stored_by_others(self, pointer: Value, block: Block) -> bool:
        """Whether other threads of the launch store the element ``pointer`` addresses too (store_seeds.py),
        outside a block's shared arrays (where the race check allows one writer of an element between two
        barriers, which the reverse sweep replays in order)."""
        if self.classifier is None or self.classifier.classify(pointer, block) is AddressClass.PRIVATE:
            return False
        roots = pointer_roots(pointer)
        if roots is not None and roots <= {self.fn.args[k] for k in self.parallel.block_shared_args}:
            return False
        threads = {self.fn.args[k] for k in self.parallel.thread_args}
        return stored_by_the_block(pointer, threads, block, self.dom, self.preds)

    def _reverse_atomic(self, inst: Instruction, block: Block, b: Builder) -> None:
        pointer, value = inst.operands
        if pointer not in self.shadow or not is_float_type(value.type):
            return
        if inst.op not in ("fadd", "fsub") or self.has_adjoint(inst) and self.fn.users().get(inst):
            raise DifferentiationError(f"cannot differentiate {describe(inst)} on differentiated memory "
                                       f"(only atomic fadd/fsub whose old value is unused)")
        if self.log is not None:
            self.log.note_readback(self.shadow[pointer], inst)
        seed = b.load(value.type, self.need(self.shadow[pointer], block), "d.atomic")
        self.add_adjoint(value, seed if inst.op == "fadd" else b.fneg(seed), b)

    def _reverse_uniform_add(self, inst: Instruction, block: Block, b: Builder) -> None:
        """An adjoint kernel's ``*p += v`` (reverse over reverse): ``v̄ += shadow(p)[0]``."""
        pointer, value = inst.operands
        if pointer in self.shadow and is_float_type(value.type):
            seed = b.load(value.type, self.need(self.shadow[pointer], block), "d.uniform")
            self.add_adjoint(value, seed, b)

    # ---- tape placement
    def _finish(self) -> ReverseResult:
        self.tape.prune(self._remove_dead_reloads())
        # pruning removed entry-block slots before the entry builder's insertion index: place it
        # again, at the end of the entry block (which dominates every push and pop of the tape)
        self.entry.position_before_terminator(self.fn.entry)
        self.tape.emit_writes()
        result = ReverseResult(self.fn, stats=ReverseStats(deferred_sites=self.deferred.sites,
                                                           deferred_adds=len(self.deferred.sums)))
        alive = {id(inst) for inst in self.fn.instructions()}
        for clone, block in self.recomputed_loads:
            if id(clone) in alive:
                result.stats.recomputed_loads[PER_ITERATION if self.loops.in_loop(block) else PER_THREAD] += 1
        self._tape_bytes: dict[int, int] | None = None
        self._place_tape(result)
        if self.log is not None and self.log.used:
            attach_log(self, result, self._tape_bytes)
        return result

    def _place_tape(self, result: ReverseResult) -> None:
        if not self.tape.uses_stack():
            if self.tape.cursor_slot is not None:
                self.tape.cursor_slot.parent.instructions.remove(self.tape.cursor_slot)
            return
        nbytes = self.tape.static_bytes(self.loops.visit_bound)
        if nbytes is not None and nbytes <= self.static_tape_limit:
            base = self.tape.static_stack(nbytes)
            result.stats.tape_bytes = nbytes
        else:
            base = self._dynamic_tape(result)
            result.stats.tape_bytes = None
        self.entry.store(base, self.tape.cursor_slot)

    def _remove_dead_reloads(self) -> set:
        """Delete unused recomputations and reloads in the reverse blocks' headers (to a fixed
        point); returns the set of values still used."""
        heads = set(self.rev.values())
        forward = set(self.blocks)
        sweep = [b for b in self.fn.blocks if b not in forward and b not in heads]
        while True:
            used = {o for inst in self.fn.instructions() for o in inst.operands}
            dead = [inst for block in heads for inst in block.instructions
                    if inst not in used and inst.opcode not in ("store", "br", "switch", "call")
                    and not inst.name.startswith("tape.")]       # tape slots: Tape.prune
            # partials of inactive operands (x * 0.5's for 0.5): unused, but their reloads would stay taped
            dead += [inst for block in sweep for inst in block.instructions
                     if inst not in used and inst.opcode in _RECOMPUTABLE and inst.opcode != "load"
                     and not inst.name.startswith("tape.")]
            if not dead:
                return used
            for inst in dead:
                inst.parent.instructions.remove(inst)

    def _dynamic_tape(self, result: ReverseResult) -> Value:
        """Take the tape from the launcher (trailing args) and generate the count function."""
        fn = self.fn
        tape = Argument(ptr, "tape", len(fn.args))
        offset = Argument(i64, "tape_offset", len(fn.args) + 1)
        fn.args += [tape, offset]
        fn.function_type = FunctionType(void, fn.function_type.params + (ptr, i64))
        base = self.entry.gep(i8, tape, [offset], "tape.base", inbounds=False)
        primal_of = {new: old for old, new in self.block_map.items()}
        per_block = {self.primal.blocks.index(primal_of[rec.block]): rec.size
                     for rec in self.tape.stack_records()}
        if self.log is not None and self.log.used:
            self._tape_bytes = per_block           # one counting function for both: attach_log
            return base
        count = add_count_function(self.module, self.primal, f"{fn.name}.tape_count", per_block)
        result.tape = TapeSpec(count.name)
        result.count_function = count
        return base
