"""Activity analysis: which values carry a derivative and which pointers have a shadow.

A value is *active* when it depends on an active input (forward reachability, "varied")
**and** can influence an active output (backward reachability, "useful"); only active values
get tangents or adjoints. Pointers derived from a Dup pointer argument (GEP, casts,
phi/select of pointers) are *shadowed*: they have a shadow pointer derived the same way from
the shadow argument. Float loads through a shadowed pointer are varied; a store through one
is an output. Private memory (an ``alloca``, or a heap block from an allocation function,
memory.py) becomes shadowed once an active value or a shadowed pointer is stored or copied into
it, or once a pointer into it is merged (phi/select) with a shadowed pointer. A pointer loaded from
private memory whose every content is a shadowed pointer is shadowed (pointer_memory.py).
Integers, comparisons, indices and branch conditions are never active.
"""
from __future__ import annotations

import enum
from dataclasses import dataclass, field

from ..errors import DifferentiationError
from ..ir.core import (ArrayType, Function, Instruction, StructType, Type, Value, VectorType)
from .pointer_memory import PointerTables, is_placeholder_pointer, memory_roots, pointer_sources  # noqa: F401


class Activity(enum.Enum):
    CONST = "const"     # no derivative
    DUP = "dup"         # a pointer with a shadow pointer, or a float scalar with a tangent/adjoint slot
    ACTIVE = "active"   # a float scalar whose adjoint is returned/accumulated (reverse mode)

    def __repr__(self) -> str:
        return f"Activity.{self.name}"


CONST, DUP, ACTIVE = Activity.CONST, Activity.DUP, Activity.ACTIVE


def is_float_type(t: Type) -> bool:
    """Whether values of type ``t`` can carry a derivative (floats, float vectors, aggregates of them)."""
    if isinstance(t, (StructType,)):
        return any(is_float_type(e) for e in t.elements)
    if isinstance(t, (ArrayType, VectorType)):
        return is_float_type(t.element)
    return bool(t.is_float)


_SHADOW_WRITES = frozenset({"store", "atomicrmw"})


def _pointer_operand(inst: Instruction) -> Value | None:
    if inst.opcode == "load":
        return inst.operands[0]
    if inst.opcode == "store":
        return inst.operands[1]
    if inst.opcode in ("atomicrmw", "cmpxchg"):
        return inst.operands[0]
    return None


def _differentiable_operands(inst: Instruction) -> list[Value]:
    """Operands through which a derivative can flow into ``inst``'s result."""
    op = inst.opcode
    if op == "select":
        return inst.operands[1:]
    if op in ("load", "alloca", "getelementptr", "fcmp", "icmp", "br", "switch"):
        return []
    if op == "store":
        return inst.operands[:1]
    if op == "atomicrmw":
        return inst.operands[1:]
    return list(inst.operands)


@dataclass
class ActivityInfo:
    """The result of ``analyze``: active values and shadowed pointers of one function."""
    function: Function
    arg_activity: list[Activity]
    varied: set[Value] = field(default_factory=set)
    useful: set[Value] = field(default_factory=set)
    shadowed: set[Value] = field(default_factory=set)
    shadow_roots: list[Instruction] = field(default_factory=list)   # allocas and heap blocks

    def is_active(self, value: Value) -> bool:
        """Carries a derivative: a float value that depends on an active input and reaches an output."""
        return value in self.varied and value in self.useful

    def has_shadow(self, value: Value) -> bool:
        """A pointer with a shadow pointer (derived from a Dup argument or a shadowed alloca)."""
        return value in self.shadowed

    @property
    def shadow_pointer_roots(self) -> list[Value]:
        """Where shadow pointers come from: Dup pointer arguments, then shadowed allocas and heap blocks."""
        args = [a for a, act in zip(self.function.args, self.arg_activity) if act is not CONST and a.type.is_pointer]
        return args + list(self.shadow_roots)

    def writes_shadow(self, inst: Instruction) -> bool:
        """A store/atomic whose target memory has a shadow (its shadow must be written too)."""
        ptr = _pointer_operand(inst)
        return inst.opcode in _SHADOW_WRITES and ptr is not None and ptr in self.shadowed

    @property
    def active_values(self) -> set[Value]:
        return self.varied & self.useful


def derived_attributes(arg) -> set[str]:
    """A primal argument's attributes for the same argument of a derived function: all but those
    that speak of the primal's return value (``returned``: derived functions return void or a tangent)."""
    return {a for a in arg.attributes if a.split("(")[0] != "returned"}


def _check_arg_activity(fn: Function, arg_activity: list[Activity]) -> None:
    if len(arg_activity) != len(fn.args):
        raise DifferentiationError(
            f"@{fn.name} takes {len(fn.args)} arguments but {len(arg_activity)} activities were given")
    for arg, act in zip(fn.args, arg_activity):
        if not isinstance(act, Activity):
            raise DifferentiationError(f"activity of argument %{arg.name} of @{fn.name} must be an Activity, got {act!r}")
        if act is CONST:
            continue
        if arg.type.is_pointer:
            if act is ACTIVE:
                raise DifferentiationError(
                    f"argument %{arg.name} of @{fn.name} is a pointer: mark it Dup (with a shadow), not Active")
        elif not is_float_type(arg.type):
            raise DifferentiationError(
                f"argument %{arg.name} of @{fn.name} has type {arg.type}, which carries no derivative: mark it Const")


def _forward_pass(fn: Function, info: ActivityInfo) -> None:
    """Varied values and shadowed pointers, to a fixed point (loops and private memory need several rounds)."""
    varied, shadowed = info.varied, info.shadowed
    for arg, act in zip(fn.args, info.arg_activity):
        if act is not CONST:
            (shadowed if arg.type.is_pointer else varied).add(arg)

    tables = PointerTables(fn)

    def shadow_root_of(pointer: Value) -> bool:
        grew = False
        for root in tables.roots(pointer):
            if root not in shadowed:
                shadowed.add(root)
                info.shadow_roots.append(root)
                grew = True
        return grew

    changed = True
    while changed:
        changed = False
        for inst in fn.instructions():
            if inst.opcode == "store" and (inst.operands[0] in varied or inst.operands[0] in shadowed):
                changed |= shadow_root_of(inst.operands[1])     # an active value, or a pointer with a shadow
            elif _is_copy(inst) and inst.operands[1] in shadowed:
                changed |= shadow_root_of(inst.operands[0])
            elif inst.type.is_pointer and inst.opcode in ("phi", "select") and any(
                    o in shadowed for o in pointer_sources(inst)):
                for o in pointer_sources(inst):
                    changed |= shadow_root_of(o)
            elif inst in shadowed and _resized_block(inst) is not None:      # realloc: its shadow resizes the old one
                changed |= shadow_root_of(_resized_block(inst))
            if inst in varied or inst in shadowed:
                continue
            became = _forward_transfer(inst, varied, shadowed, tables)
            if became == "shadowed":
                shadowed.add(inst)
                changed = True
            elif became == "varied":
                varied.add(inst)
                changed = True


def _resized_block(inst: Instruction) -> Value | None:
    from .memory import heap_function
    entry = heap_function(inst)
    return inst.operands[entry.pointer] if entry is not None and entry.kind == "realloc" else None


def _is_copy(inst: Instruction) -> bool:
    return inst.opcode == "call" and getattr(inst.callee, "name", "").startswith(("llvm.memcpy", "llvm.memmove"))


def _forward_transfer(inst: Instruction, varied: set, shadowed: set, tables: PointerTables) -> str | None:
    op = inst.opcode
    if inst.type.is_pointer:
        from .memory import heap_function
        entry = heap_function(inst)
        if entry is not None and entry.kind == "realloc":       # the block moves with its contents
            return "shadowed" if inst.operands[entry.pointer] in shadowed else None
        if op == "load":           # a pointer kept in memory: its shadow is kept in the shadow memory
            return "shadowed" if inst.operands[0] in shadowed and tables.holds_shadowed(inst.operands[0], shadowed) else None
        return "shadowed" if any(s in shadowed for s in pointer_sources(inst)) else None
    if not is_float_type(inst.type):
        return None
    if op == "load":
        return "varied" if inst.operands[0] in shadowed else None
    if op == "atomicrmw":
        return "varied" if inst.operands[0] in shadowed or inst.operands[1] in varied else None
    if any(v in varied for v in _differentiable_operands(inst)):
        return "varied"
    return None


def _backward_pass(fn: Function, info: ActivityInfo) -> None:
    """Useful values: those with a data path to a returned float or a write into shadowed memory."""
    useful, work = info.useful, []
    for inst in fn.instructions():
        if inst.opcode == "ret" and inst.operands and is_float_type(inst.operands[0].type):
            work.append(inst.operands[0])
        elif info.writes_shadow(inst) and is_float_type(written_value(inst).type):
            work.append(written_value(inst))
        elif is_uniform_add(inst) and inst.operands[0] in info.shadowed:
            work.append(inst.operands[1])     # an adjoint's reduction into shadowed memory
    while work:
        value = work.pop()
        if value in useful:
            continue
        useful.add(value)
        if isinstance(value, Instruction):
            work.extend(v for v in _differentiable_operands(value) if is_float_type(v.type))


def is_uniform_add(inst: Instruction) -> bool:
    """A call of the uniform-address add intrinsic that derived kernels use (analysis/address_classes.py)."""
    from ..analysis.address_classes import UNIFORM_ADD_PREFIX
    return inst.opcode == "call" and getattr(inst.callee, "name", "").startswith(UNIFORM_ADD_PREFIX)


def written_value(inst: Instruction) -> Value:
    """The value a store or atomicrmw writes to memory."""
    return inst.operands[0] if inst.opcode == "store" else inst.operands[1]


def activity_of(fn: Function, arg_activity: list[Activity]) -> ActivityInfo:
    """Activity of every value of ``fn`` given one Activity per argument (soundness.analyze also checks
    that the engine handles everything it found active)."""
    arg_activity = list(arg_activity)
    _check_arg_activity(fn, arg_activity)
    info = ActivityInfo(fn, arg_activity)
    _forward_pass(fn, info)
    _backward_pass(fn, info)
    return info
