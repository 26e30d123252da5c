"""Struct parameters passed by value (``struct Params { float eps, sigma; }; k(Params p, ...)``).

``ado.struct(eps=ado.f32, sigma=ado.f32)`` declares such a parameter, its fields in the C order
(a field may itself be an ``ado.struct``). The kernel then has one scalar parameter per field,
named ``<param>_<field>`` (``p_eps``, ``p_sigma``; nested: ``p_inner_x``): launches take the
struct as a dict or a sequence of its field values (or the fields by keyword), and derivatives
are taken with respect to its float fields like any scalar (``wrt=["p"]`` means all of them,
``d_p_eps`` their shadows). clang passes such a parameter as a pointer to the struct (NVPTX
``byval``, AMDGPU ``byref``); translate.py rebuilds the struct on the thread's stack from the
fields, and LLVM's SROA turns its loads back into the scalars.
"""
from __future__ import annotations

from dataclasses import dataclass

from ...errors import ArgumentError, CudaTranslationError
from ...ir.builder import Builder
from ...ir.core import Argument, ArrayType, Constant, Function, Instruction, StructType, VectorType, i8, i64
from ...ir.textparse import type_from_string
from ...language.types import ScalarType


@dataclass(frozen=True)
class Struct:
    """A C struct's fields, in order: (name, ado scalar type or Struct)."""
    fields: tuple[tuple[str, "ScalarType | Struct"], ...]

    def flat(self, prefix: str) -> list[tuple[str, ScalarType]]:
        """The scalar fields, named ``<prefix>_<field>`` (nested structs expanded)."""
        out = []
        for name, t in self.fields:
            out += t.flat(f"{prefix}_{name}") if isinstance(t, Struct) else [(f"{prefix}_{name}", t)]
        return out

    def values(self, prefix: str, value, kernel: str, floats_only: bool = False) -> dict:
        """``value`` (a dict of the fields, or a sequence of them in order) as {flat name: value};
        ``floats_only``: of the float fields only (a derivative's shadows ``d_p``)."""
        fields = [(n, t) for n, t in self.fields if not floats_only or isinstance(t, Struct) or t.is_float]
        names = ", ".join(n for n, _ in fields)
        what = f"struct {'shadow' if floats_only else 'parameter'} '{prefix}'"
        if isinstance(value, dict):
            unknown = set(value) - {n for n, _ in fields}
            missing = [n for n, _ in fields if n not in value]
            if unknown or missing:
                wrong = f"missing {', '.join(missing)}" if missing else f"unknown {', '.join(sorted(unknown))}"
                raise ArgumentError(f"kernel '{kernel}': {what} has the fields {names}; {wrong}")
            items = [value[n] for n, _ in fields]
        elif isinstance(value, (tuple, list)):
            if len(value) != len(fields):
                raise ArgumentError(f"kernel '{kernel}': {what} has {len(fields)} fields ({names}); "
                                    f"got {len(value)} values")
            items = list(value)
        else:
            raise ArgumentError(f"kernel '{kernel}': {what} takes a dict of its fields or a tuple of their "
                                f"values in order, got {type(value).__name__}")
        out = {}
        for (name, t), item in zip(fields, items):
            if isinstance(t, Struct):
                out.update(t.values(f"{prefix}_{name}", item, kernel, floats_only))
            else:
                out[f"{prefix}_{name}"] = item
        return out

    def __repr__(self) -> str:
        return "ado.struct(" + ", ".join(f"{n}={t!r}" for n, t in self.fields) + ")"


def struct(**fields) -> Struct:
    """A struct passed by value to a CUDA/HIP kernel: its fields in the C declaration's order, each an
    ado scalar type (``ado.f32``, ``ado.i32``, ...) or a nested ``ado.struct``."""
    if not fields:
        raise ArgumentError("ado.struct() needs at least one field, e.g. ado.struct(eps=ado.f32, sigma=ado.f32)")
    for name, t in fields.items():
        if not isinstance(t, (ScalarType, Struct)):
            raise ArgumentError(f"ado.struct: field '{name}' must be an ado scalar type (ado.f32, ado.i32, ...) or "
                                f"an ado.struct, got {t!r} (pointers in structs are not supported)")
    return Struct(tuple(fields.items()))


def struct_type_of(arg) -> StructType | None:
    """The struct type of a by-value struct parameter (``byval(T)``/``byref(T)``), None otherwise."""
    for attribute in arg.attributes:
        for kind in ("byval(", "byref("):
            if attribute.startswith(kind):
                t = type_from_string(attribute[len(kind):-1])
                return t if isinstance(t, StructType) else None
    return None


def layout(t) -> list[tuple[int, object]]:
    """(byte offset, scalar type) of each scalar in LLVM type ``t``, C alignment (natural, or none in
    packed structs)."""
    out: list[tuple[int, object]] = []
    _layout(t, 0, out)
    return out


def _layout(t, base: int, out: list) -> None:
    if isinstance(t, StructType):
        offset = 0
        for e in t.elements:
            if not t.packed:
                offset = -(-offset // alignment(e)) * alignment(e)
            _layout(e, base + offset, out)
            offset += size(e)
    elif isinstance(t, (ArrayType, VectorType)):
        for k in range(t.count):
            _layout(t.element, base + k * size(t.element), out)
    else:
        out.append((base, t))


def alignment(t) -> int:
    if isinstance(t, StructType):
        return 1 if t.packed else max(alignment(e) for e in t.elements)
    if isinstance(t, ArrayType):
        return alignment(t.element)
    return size(t)


def size(t) -> int:
    if isinstance(t, StructType):
        end = 0
        for e in t.elements:
            if not t.packed:
                end = -(-end // alignment(e)) * alignment(e)
            end += size(e)
        return end if t.packed else -(-end // alignment(t)) * alignment(t)
    if isinstance(t, (ArrayType, VectorType)):
        return t.count * size(t.element)
    bits = getattr(t, "bits", None)
    if bits is None:
        raise CudaTranslationError(f"a struct parameter holds a {t}, which adoffload cannot pass")
    return max(1, bits // 8)


def check(arg, declared: Struct, name: str, kernel: str) -> list[tuple[int, object]]:
    """The declared fields match the struct the kernel takes (as many scalars, equal types, in
    order). Returns the scalars' (offset, LLVM type). Byte fields (``char``, ``bool``, and the byte
    arrays clang spells explicit padding with) have no ado type, so such structs are refused."""
    t = struct_type_of(arg)
    if t is None:
        raise CudaTranslationError(f"kernel '{kernel}': parameter '{name}' was declared {declared!r} but the "
                                   f"kernel's parameter {arg.index} is not a struct passed by value ({arg.type})")
    scalars = layout(t)
    flat = declared.flat(name)
    ir_types = [str(s) for _, s in scalars]
    if len(flat) != len(scalars) or any(ft.llvm != it for (_, ft), it in zip(flat, ir_types)):
        raise CudaTranslationError(f"kernel '{kernel}': struct parameter '{name}' was declared {declared!r} "
                                   f"(scalars: {', '.join(ft.llvm for _, ft in flat)}), but the kernel's struct is "
                                   f"{t} (scalars: {', '.join(ir_types)})")
    return scalars


# --- in the body: the struct rebuilt from its fields (translate.py) --------------------------------

def on_stack(fn: Function, arg: Argument, param, flat: dict, kernel: str):
    """A struct parameter (a pointer to the struct, ``byval``/``byref``) as a stack copy built from
    its scalar fields at the entry, and the stores doing it; SROA later turns it back into scalars."""
    t = struct_type_of(arg)
    scalars = check(arg, param.type, param.name, kernel)
    b = Builder(fn.entry, 0)
    copy = b.alloca(t, f"{param.name}.struct")
    copy.align = alignment(t)
    fields = {}
    for (offset, _), (name, _) in zip(scalars, param.type.flat(param.name)):
        fields[b.store(flat[name], b.gep(i8, copy, [Constant(i64, offset)], f"{name}.field"))] = offset
    return copy, fields


def forward_fields(fn: Function, copy: Instruction, fields: dict) -> None:
    """Loads of a whole field of the stack copy read the field's parameter (the usual case, and
    uniformity.py then sees a value uniform across the block, not a load from private memory). Only
    when the kernel neither writes the copy nor lets its address go anywhere but loads."""
    users = fn.users()
    todo = [copy]
    while todo:
        pointer = todo.pop()
        for user in users.get(pointer, []):
            if user.opcode == "getelementptr" and user.operands[0] is pointer:
                todo.append(user)
            elif not (user.opcode == "load" or (user in fields and user.operands[1] is pointer)):
                return
    stored = {offset: store.operands[0] for store, offset in fields.items()}
    for inst in list(fn.instructions()):
        offset = _offset_in(inst.operands[0], copy) if inst.opcode == "load" else None
        if offset is None or "volatile" in inst.flags:
            continue
        value = stored.get(offset)
        if value is not None and value.type == inst.type:
            _replace_uses(fn, inst, value)
            inst.parent.instructions.remove(inst)
        elif isinstance(inst.type, VectorType):         # <2 x float> of two fields (AMDGPU loads so)
            step = size(inst.type.element)
            items = [stored.get(offset + k * step) for k in range(inst.type.count)]
            if all(item is not None and item.type == inst.type.element for item in items):
                b = Builder()
                b.position_before(inst)
                vector = Constant(inst.type, None, "poison")
                for k, item in enumerate(items):
                    vector = b.emit("insertelement", inst.type, [vector, item, Constant(i64, k)])
                _replace_uses(fn, inst, vector)
                inst.parent.instructions.remove(inst)


def _offset_in(pointer, copy: Instruction) -> int | None:
    """The constant byte offset of ``pointer`` in ``copy`` (``copy`` itself or an i8 GEP of it)."""
    if pointer is copy:
        return 0
    if (isinstance(pointer, Instruction) and pointer.opcode == "getelementptr" and pointer.operands[0] is copy
            and str(pointer.element_type) == "i8" and len(pointer.operands) == 2
            and isinstance(pointer.operands[1], Constant) and isinstance(pointer.operands[1].value, int)):
        return pointer.operands[1].value
    return None


def _replace_uses(fn: Function, old, new) -> None:
    for inst in fn.instructions():
        inst.operands = [new if o is old else o for o in inst.operands]
