"""Forward mode: a derivative function computing the primal and ``width`` tangent lanes.

The primal is cloned instruction by instruction (blocks in reverse post-order, so every
operand's clone exists before its use); after each active instruction its tangent is emitted
from the rule table, one scalar per lane (lanes of k independent SSA values let LLVM's SLP
vectorizer pack them). Symbolic zeros: a zero tangent is None and costs nothing. Pointers
with a shadow get the same GEP/cast/select/phi applied to the shadow; loads read the shadow,
stores write the tangent (0 for an inactive float value), ``atomicrmw fadd`` adds the tangent
atomically. Phis get phis of tangents, filled once every block exists.

Signature of the result (see docs/ARCHITECTURE.md §3): primal args, then per non-Const
arg a shadow — width 1: the shadow pointer / a tangent of the scalar's type; width k:
``ptr`` to k scalar tangents, or the shadow pointer plus an ``i64`` lane stride in elements
(lane l of element e at ``shadow + l*stride + e``). A float result gives its tangent back
(width 1) or writes k lanes to a trailing ``ptr`` (width k, the function is then void).
"""
from __future__ import annotations

import copy

from ..errors import DifferentiationError
from ..ir.builder import Builder
from ..ir.cfg import reachable_blocks
from ..ir.core import (Argument, Block, Constant, FloatType, Function, FunctionType, GlobalVariable, Instruction,
                       Module, Type, Value, VectorType, const, i8, i64, ptr, void)
from .activity import (CONST, Activity, ActivityInfo, derived_attributes, is_float_type,
                       is_placeholder_pointer)
from .soundness import analyze
from .custom import custom_tangent, find_custom
from .memory import (allocation_size, heap_function, shadow_alloc, shadow_free, shadow_realloc, stack_array_count,
                     zeroed_stack_array)
from ..analysis.address_classes import UNIFORM_ADD_PREFIX
from .rules import RULES, Rule, RuleContext, constant, forward_tangent, rule_for, rule_key

# Ops that are linear in their float operands: the tangent is the same op on the tangents.
_LINEAR = frozenset({"extractvalue", "insertvalue", "extractelement", "insertelement", "shufflevector",
                     "freeze"})
_POINTER_OPS = frozenset({"getelementptr", "bitcast", "addrspacecast"})
_MEMORY_INTRINSICS = ("llvm.memcpy", "llvm.memmove", "llvm.memset")
# Calls that never carry derivatives or touch memory in a way AD must mirror.
_IGNORED_CALLS = ("llvm.lifetime", "llvm.assume", "llvm.dbg", "llvm.experimental.noalias",
                  "llvm.invariant", "llvm.prefetch", "llvm.donothing")


def zero_of(t: Type) -> Constant:
    """The zero tangent of type ``t`` as a constant (aggregates: zeroinitializer)."""
    if isinstance(t, (FloatType, VectorType)):
        return constant(t, 0.0)
    return Constant(t, None, kind="zero")


def pointer_element_type(fn: Function, arg: Argument) -> Type:
    """The scalar element type ``arg`` is accessed as (GEP source type, load/store type)."""
    found, work, seen = set(), [arg], set()
    users = fn.users()
    while work:
        p = work.pop()
        if p in seen:
            continue
        seen.add(p)
        for user in users.get(p, []):
            if user.opcode == "getelementptr" and user.operands[0] is p:
                t = user.element_type
                while hasattr(t, "element") and not t.is_float:
                    t = t.element
                found.add(t)
            elif user.opcode == "load":
                found.add(user.type)
            elif user.opcode == "store" and user.operands[1] is p:
                found.add(user.operands[0].type)
            elif user.opcode in ("atomicrmw", "cmpxchg") and user.operands[0] is p:
                found.add(user.operands[-1].type)
            elif user.opcode in ("bitcast", "addrspacecast", "phi", "select"):
                work.append(user)
    found = {t for t in found if t.is_float} or found
    if not found:
        return i8           # never accessed: its lane pointers are never used
    if len(found) != 1:
        raise DifferentiationError(
            f"vector mode needs one element type for pointer argument %{arg.name} of @{fn.name}, found "
            f"{sorted(map(str, found)) or 'none'}")
    return found.pop()


class ForwardPass:
    """Builds one forward derivative function (state of one run; see ``forward``)."""

    def __init__(self, module: Module, fn: Function, info: ActivityInfo, width: int, derived: Function):
        self.module, self.fn, self.info, self.width, self.derived = module, fn, info, width, derived
        self.vmap: dict[Value, Value] = {}
        self.tangents: dict[Value, list[Value | None]] = {}
        self.shadows: dict[Value, list[Value]] = {}
        self.block_map: dict[Block, Block] = {}
        self.deferred_phis: list[tuple[Instruction, Instruction, str, int]] = []
        self.builder = Builder()
        self.ctx = RuleContext(self.builder, module, primal=self.value)
        self.return_lanes: Argument | None = None

    # ---- lookups
    def value(self, v: Value) -> Value:
        if isinstance(v, (Constant, GlobalVariable, Function)):
            return v
        return self.vmap[v]

    def tangent(self, v: Value, lane: int) -> Value | None:
        lanes = self.tangents.get(v)
        return None if lanes is None else lanes[lane]

    def tangent_or_zero(self, v: Value, lane: int) -> Value:
        t = self.tangent(v, lane)
        return t if t is not None else zero_of(v.type)

    def shadow(self, pointer: Value, lane: int, user: Instruction) -> Value:
        if pointer in self.shadows:
            return self.shadows[pointer][lane]
        if is_placeholder_pointer(pointer):
            return pointer
        raise DifferentiationError(
            f"pointer %{getattr(pointer, 'name', '?')} used by {user.opcode} at {user.location or '?'} mixes "
            f"memory with and without a shadow (a Dup and a Const pointer meet in a phi or select)")

    # ---- driver
    def run(self) -> Function:
        order = reachable_blocks(self.fn)
        for block in order:
            self.block_map[block] = self.derived.add_block(block.name)
        self.builder.position_at_end(self.block_map[order[0]])
        self.bind_arguments()
        for block in order:
            self.builder.position_at_end(self.block_map[block])
            for inst in block.instructions:
                self.builder.location = inst.location
                self.visit(inst)
        self.fill_phis()
        return self.derived

    def bind_arguments(self) -> None:
        """Map primal args, and read each non-Const arg's shadow (per lane) from the new args."""
        new_args = iter(self.derived.args)
        for arg in self.fn.args:
            self.vmap[arg] = next(new_args)
        b, w = self.builder, self.width
        for arg, act in zip(self.fn.args, self.info.arg_activity):
            if act is CONST:
                continue
            shadow = next(new_args)
            if arg.type.is_pointer:
                if w == 1:
                    self.shadows[arg] = [shadow]
                else:
                    stride, elem = next(new_args), pointer_element_type(self.fn, arg)
                    self.shadows[arg] = [shadow] + [
                        b.gep(elem, shadow, [b.mul(stride, const(i64, lane))], f"d_{arg.name}.lane{lane}")
                        for lane in range(1, w)]
            elif w == 1:
                self.tangents[arg] = [shadow]
            else:
                self.tangents[arg] = [b.load(arg.type, b.gep(arg.type, shadow, [const(i64, lane)]),
                                             f"d_{arg.name}.{lane}") for lane in range(w)]
        self.return_lanes = next(new_args, None)

    def visit(self, inst: Instruction) -> None:
        if inst.opcode == "ret":
            return self.emit_return(inst)
        clone = self.clone(inst)
        op = inst.opcode
        if op == "phi":
            return self.visit_phi(inst, clone)
        if inst.type.is_pointer and self.info.has_shadow(inst):
            return self.visit_pointer(inst)
        if op == "load":
            if self.info.is_active(inst):
                self.set_lanes(inst, lambda lane: self.builder.load(inst.type, self.shadow(inst.operands[0], lane, inst),
                                                                    f"d_{inst.name}", inst.align))
            return
        if op in ("store", "atomicrmw") and self.info.writes_shadow(inst):
            return self.visit_shadow_write(inst)
        if op == "call":
            return self.visit_call(inst)
        if self.info.is_active(inst):
            self.visit_active(inst)

    def clone(self, inst: Instruction) -> Instruction:
        new = copy.copy(inst)
        new.parent, new.name = None, ""
        new.flags = set(inst.flags)
        new.blocks = [self.block_map[b] for b in inst.blocks if b in self.block_map]
        if inst.opcode == "phi":
            new.operands = []          # filled by fill_phis once every block exists
        else:
            new.operands = [self.value(v) for v in inst.operands]
        if inst.callee is not None and not isinstance(inst.callee, (Function, Constant, GlobalVariable)):
            new.callee = self.vmap[inst.callee]
        self.builder.insert(new, inst.name or "t")
        self.vmap[inst] = new
        return new

    def set_lanes(self, inst: Value, make) -> None:
        lanes = [make(lane) for lane in range(self.width)]
        if any(t is not None for t in lanes):
            self.tangents[inst] = lanes

    # ---- visitors
    def visit_phi(self, inst: Instruction, clone: Instruction) -> None:
        kind = "shadow" if inst.type.is_pointer and self.info.has_shadow(inst) else (
            "tangent" if self.info.is_active(inst) else None)
        self.deferred_phis.append((inst, clone, "", 0))
        if kind is None:
            return
        lanes = []
        for lane in range(self.width):
            phi = self.builder.phi(inst.type, [], f"d_{inst.name}")
            self.deferred_phis.append((inst, phi, kind, lane))
            lanes.append(phi)
        (self.shadows if kind == "shadow" else self.tangents)[inst] = lanes

    def fill_phis(self) -> None:
        for inst, phi, kind, lane in self.deferred_phis:
            incoming = [(v, b) for v, b in zip(inst.operands, inst.blocks) if b in self.block_map]
            phi.blocks = [self.block_map[b] for _, b in incoming]
            if kind == "":
                phi.operands = [self.value(v) for v, _ in incoming]
            elif kind == "shadow":
                phi.operands = [self.shadow(v, lane, inst) for v, _ in incoming]
            else:
                phi.operands = [self.tangent_or_zero(v, lane) for v, _ in incoming]

    def visit_pointer(self, inst: Instruction) -> None:
        """The shadow of a derived pointer: the same GEP/cast/select on the shadow; a zeroed
        private copy of a shadowed ``alloca`` (a local array holding active values)."""
        if inst.opcode == "alloca":
            count = stack_array_count(inst)
            if count is not None:        # alloca T, N (a variable-length array): N zeroed elements
                self.shadows[inst] = [zeroed_stack_array(self.module, self.builder, inst.element_type,
                                                         self.value(count), f"d_{inst.name}", align=inst.align)
                                      for _ in range(self.width)]
                return
            lanes = []
            for lane in range(self.width):
                shadow = self.builder.alloca(inst.element_type, f"d_{inst.name}")
                shadow.align = inst.align     # the primal's accesses, copied to the shadow, claim it
                self.builder.store(zero_of(inst.element_type), shadow)
                # through a GEP: ir export refuses an element store straight into an array alloca
                lanes.append(self.builder.gep(i8, shadow, [const(i64, 0)]))
            self.shadows[inst] = lanes
            return
        heap = heap_function(inst)
        if heap is not None:
            return self.visit_allocation(inst, heap)
        if inst.opcode == "load":        # a pointer kept in memory: its shadow is in the shadow memory
            self.shadows[inst] = [self.builder.load(inst.type, self.shadow(inst.operands[0], lane, inst),
                                                    f"d_{inst.name}", inst.align) for lane in range(self.width)]
            return
        if inst.opcode not in _POINTER_OPS and inst.opcode != "select":
            raise DifferentiationError(f"cannot derive a shadow pointer through {inst.opcode} at {inst.location or '?'}")
        lanes = []
        for lane in range(self.width):
            new = copy.copy(self.vmap[inst])
            new.parent, new.name, new.flags = None, "", set(new.flags)
            new.operands = list(new.operands)
            if inst.opcode == "select":
                new.operands[1] = self.shadow(inst.operands[1], lane, inst)
                new.operands[2] = self.shadow(inst.operands[2], lane, inst)
            else:
                new.operands[0] = self.shadow(inst.operands[0], lane, inst)
            lanes.append(self.builder.insert(new, f"d_{inst.name}"))
        self.shadows[inst] = lanes

    def visit_allocation(self, inst: Instruction, heap) -> None:
        """A heap block holding active values: a zeroed shadow block of the same size beside it
        (``realloc`` resizes the shadow with it; memory.py)."""
        b = self.builder
        size = allocation_size(b, self.vmap[inst])
        if heap.kind == "realloc":
            old = inst.operands[heap.pointer]
            self.shadows[inst] = [b.call(shadow_realloc(self.module), [self.shadow(old, lane, inst), size],
                                         f"d_{inst.name}") for lane in range(self.width)]
        else:
            self.shadows[inst] = [b.call(shadow_alloc(self.module), [size], f"d_{inst.name}")
                                  for lane in range(self.width)]

    def visit_shadow_write(self, inst: Instruction) -> None:
        b = self.builder
        pointer, value = (inst.operands[1], inst.operands[0]) if inst.opcode == "store" else inst.operands
        if not is_float_type(value.type):
            if inst.opcode == "store":           # an integer overwrites the location: its tangent is zero;
                for lane in range(self.width):   # a pointer with a shadow leaves its shadow (pointer_memory.py)
                    kept = self.shadow(value, lane, inst) if self.info.has_shadow(value) else zero_of(value.type)
                    b.store(kept, self.shadow(pointer, lane, inst), inst.align)
            return
        if inst.opcode == "store":
            for lane in range(self.width):
                b.store(self.tangent_or_zero(value, lane), self.shadow(pointer, lane, inst), inst.align)
            return
        if inst.op in ("fadd", "fsub"):
            def make(lane):
                t = self.tangent(value, lane)
                if t is None and not self.info.is_active(inst):
                    return None
                return b.atomicrmw(inst.op, self.shadow(pointer, lane, inst), t if t is not None else zero_of(value.type),
                                   inst.ordering, f"d_{inst.name}")
        elif inst.op == "xchg":
            def make(lane):
                return b.atomicrmw("xchg", self.shadow(pointer, lane, inst), self.tangent_or_zero(value, lane),
                                   inst.ordering, f"d_{inst.name}")
        else:
            raise DifferentiationError(f"cannot differentiate atomicrmw {inst.op} on active memory at "
                                       f"{inst.location or '?'} (supported: fadd, fsub, xchg)")
        self.set_lanes(inst, make)
        if not self.info.is_active(inst):
            self.tangents.pop(inst, None)

    def visit_call(self, inst: Instruction) -> None:
        name = getattr(inst.callee, "name", "")
        if name.startswith(_MEMORY_INTRINSICS):
            return self.visit_memory_intrinsic(inst, name)
        if name.startswith(_IGNORED_CALLS):
            return
        if name.startswith(UNIFORM_ADD_PREFIX):
            return self.visit_uniform_add(inst)
        heap = heap_function(inst)
        if heap is not None and heap.kind == "free":
            freed = inst.operands[heap.pointer]
            if self.info.has_shadow(freed):
                for lane in range(self.width):
                    self.builder.call(shadow_free(self.module), [self.shadow(freed, lane, inst)])
            return
        self.check_no_shadowed_pointer_args(inst)
        if not self.info.is_active(inst):
            return
        custom = find_custom(self.module, inst.callee)
        if custom is not None:
            self.set_lanes(inst, lambda lane: custom_tangent(
                self.ctx, inst, custom, [self.tangent(a, lane) for a in inst.operands]))
        elif rule_key(inst) in RULES or not isinstance(inst.callee, Function) or inst.callee.is_declaration:
            self.visit_active(inst)    # math functions use their rule even when defined (linked libdevice)
        else:
            self.visit_internal_call(inst)

    def visit_uniform_add(self, inst: Instruction) -> None:
        """An adjoint's ``*p += v`` (same p on every thread) is linear: its tangent is the same
        add of the tangent into the shadow (this makes forward-over-reverse work)."""
        pointer, value = inst.operands
        if not self.info.has_shadow(pointer):
            return
        for lane in range(self.width):
            self.builder.call(inst.callee, [self.shadow(pointer, lane, inst), self.tangent_or_zero(value, lane)])

    def check_no_shadowed_pointer_args(self, inst: Instruction) -> None:
        for a in inst.operands:
            if a.type.is_pointer and self.info.has_shadow(a):
                raise DifferentiationError(
                    f"call @{getattr(inst.callee, 'name', '?')} at {inst.location or '?'} receives a pointer to active "
                    f"memory; inline it first (canonicalize inlines alwaysinline helpers)")

    def visit_internal_call(self, inst: Instruction) -> None:
        """A call to a defined function that reads no memory: call its own forward derivative per lane."""
        callee: Function = inst.callee
        if any(i.opcode in ("store", "atomicrmw", "cmpxchg", "call") and not _is_pure_call(i)
               for i in callee.instructions()):
            raise DifferentiationError(
                f"call @{callee.name} at {inst.location or '?'} has side effects and lies on an active path; "
                f"inline it first (canonicalize inlines alwaysinline helpers)")
        activity = [Activity.DUP if a in self.info.varied and is_float_type(a.type) else CONST
                    for a in inst.operands]
        derived = forward(self.module, callee, activity, width=1,
                          name=f"{callee.name}.adoffload.fwd." + "".join(x.value[0] for x in activity))
        args = [self.value(a) for a in inst.operands]

        def make(lane):
            shadows = [self.tangent_or_zero(a, lane) for a, act in zip(inst.operands, activity) if act is not CONST]
            return self.builder.call(derived, args + shadows, f"d_{inst.name}")
        self.set_lanes(inst, make)

    def visit_memory_intrinsic(self, inst: Instruction, name: str) -> None:
        dst = inst.operands[0]
        if not self.info.has_shadow(dst):
            return
        b = self.builder
        for lane in range(self.width):
            args = [self.value(v) for v in inst.operands]
            args[0] = self.shadow(dst, lane, inst)
            if name.startswith("llvm.memset"):
                args[1] = const(args[1].type, 0)
            elif self.info.has_shadow(inst.operands[1]):
                args[1] = self.shadow(inst.operands[1], lane, inst)
            else:                  # copying constant memory into active memory: its tangent is zero
                b.call_intrinsic(self.module, "llvm.memset.p0.i64", void,
                                 [args[0], const(i8, 0), args[2], args[3]])
                continue
            b.call(inst.callee, args)

    def visit_active(self, inst: Instruction) -> None:
        """An active arithmetic/math/linear instruction: its tangent lanes."""
        if inst.opcode in _LINEAR:
            return self.set_lanes(inst, lambda lane: self.linear_clone(inst, lane))
        rule: Rule = rule_for(inst)
        partials = None
        if rule.forward is None and any(self.tangent(a, lane) is not None
                                        for a in inst.operands for lane in range(self.width)):
            partials = rule.partials(self.ctx, inst)
        self.set_lanes(inst, lambda lane: forward_tangent(
            self.ctx, rule, inst, [self.tangent(a, lane) for a in inst.operands], partials))

    def linear_clone(self, inst: Instruction, lane: int) -> Value | None:
        if all(self.tangent(a, lane) is None for a in inst.operands if is_float_type(a.type)):
            return None
        new = copy.copy(self.vmap[inst])
        new.parent, new.name, new.flags = None, "", set(new.flags)
        new.operands = [self.tangent_or_zero(a, lane) if is_float_type(a.type) else self.value(a)
                        for a in inst.operands]
        return self.builder.insert(new, f"d_{inst.name}")

    def emit_return(self, inst: Instruction) -> None:
        b = self.builder
        if not inst.operands or not is_float_type(inst.operands[0].type):
            b.ret()
            return
        result = inst.operands[0]
        if self.width == 1:
            b.ret(self.tangent_or_zero(result, 0))
            return
        for lane in range(self.width):
            b.store(self.tangent_or_zero(result, lane), b.gep(result.type, self.return_lanes, [const(i64, lane)]))
        b.ret()


def _is_pure_call(inst: Instruction) -> bool:
    """A call that writes no memory: a math intrinsic or libm function on floats."""
    if inst.opcode != "call":
        return True
    name = getattr(inst.callee, "name", "")
    return not any(a.type.is_pointer for a in inst.operands) and (
        name.startswith("llvm.") or isinstance(inst.callee, Function) and inst.callee.is_declaration)


def derivative_signature(fn: Function, activity: list[Activity], width: int) -> list[tuple[str, Type]]:
    """(name, type) of the forward derivative's arguments, in order."""
    params = [(a.name, a.type) for a in fn.args]
    for arg, act in zip(fn.args, activity):
        if act is CONST:
            continue
        if arg.type.is_pointer:
            params.append((f"d_{arg.name}", arg.type))
            if width > 1:
                params.append((f"d_{arg.name}.stride", i64))
        else:
            params.append((f"d_{arg.name}", arg.type if width == 1 else ptr))
    if width > 1 and is_float_type(fn.return_type):
        params.append(("d_return", ptr))
    return params


def forward(module: Module, fn: Function, activity: list[Activity], width: int = 1,
            name: str | None = None) -> Function:
    """Add the forward-mode derivative of ``fn`` (``width`` tangent lanes) to ``module`` and return it.

    Reuses an existing function called ``name`` (the default name encodes activity and width).
    """
    if fn.is_declaration:
        raise DifferentiationError(f"cannot differentiate @{fn.name}: it is only declared, its body is not in the module")
    if width < 1:
        raise DifferentiationError(f"vector width must be >= 1, got {width}")
    activity = list(activity)
    name = name or f"{fn.name}.adoffload.fwd.{''.join(a.value[0] for a in activity)}" + (f".w{width}" if width > 1 else "")
    if name in module.functions:
        return module.functions[name]
    info = analyze(fn, activity)
    params = derivative_signature(fn, activity, width)
    returns_tangent = width == 1 and is_float_type(fn.return_type)
    ftype = FunctionType(fn.return_type if returns_tangent else void, tuple(t for _, t in params))
    derived = Function(name, ftype, [Argument(t, n, i) for i, (n, t) in enumerate(params)],
                       attributes={a for a in fn.attributes if a in ("nounwind", "willreturn", "mustprogress")})
    derived.personality = fn.personality          # landing pads (invoke) need the primal's
    for new, old in zip(derived.args, fn.args):
        new.attributes = derived_attributes(old)
    module.add_function(derived)
    try:
        return ForwardPass(module, fn, info, width, derived).run()
    except BaseException:
        del module.functions[name]
        raise
