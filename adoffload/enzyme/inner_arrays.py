"""Derivatives of helpers called with array arguments inside kernels (``frontend/array_derivatives.py``).

The placeholder ``@adoffload.inner.array_<kind>.<positions>.<wrapper>`` takes the wrapper's
arguments (without its result slot), then one derivative argument per position (ascending): a
gradient pointer for ``grad``/``value_and_grad``, a tangent (pointer or float) for ``jvp``. The
wrapper ``void @<helper>.adoffload.inner.wrap(args.., ptr status, ptr failed[, ptr result])`` has the
helper inlined (canonicalization ran) with the constant shapes of the thread's arrays. Its derivative:

* ``grad`` / ``value_and_grad``: reverse mode, the positions Dup (their shadows are the gradient
  arrays, which the front end zeroed, so the accumulated adjoint is the gradient), the result slot
  Dup with its shadow seeded with 1.0; everything else Const. The value is read from the slot.
* ``jvp``: forward mode, the positions and the result slot Dup; the tangent of the result is read
  from the result slot's shadow, tangents of written arrays land in their tangent arrays.
* ``jvpw<K>``: forward mode of width K (no result): each tangent array ``(K, *shape)`` is the shadow
  pointer with a lane stride of the argument's element count (a scratch shadow is K times its size).

A float array of the thread that the helper reads but does not differentiate stays Const, unless a
pointer into it meets a shadowed pointer in a phi or select (``x[i] if c else p[j]`` becomes a load
of a select after canonicalization): such an array gets a zeroed scratch shadow of its size (the
``<locals>`` field of the placeholder name), whose contents are dropped.

Loops of the helper over the thread's arrays have constant trip counts, so the adjoint's tape is a
local array (up to ``INNER_TAPE_LIMIT`` bytes, within the kernel's local memory limit); a helper that
would need a dynamic tape is refused.
"""
from __future__ import annotations

from ..errors import DifferentiationError
from ..ir.builder import Builder
from ..ir.core import (Argument, ArrayType, Constant, Function, Instruction, Module, StructType, Value, VoidType,
                       const, i1, i8, i64, void)
from .activity import CONST, DUP, activity_of, pointer_sources
from .forward import forward, pointer_element_type

ARRAY_PREFIX = "adoffload.inner.array_"
INNER_PREFIX = "adoffload.inner."
INNER_TAPE_LIMIT = 64 * 1024


def call_site(module: Module, placeholder: Function) -> str:
    """``file:line: `` of the first call of the placeholder (for error messages); where canonicalization
    dropped the call's own location (LLVM keeps unknown metadata on calls only sometimes), the nearest
    located instruction of its block before it, else after it."""
    for fn in module.functions.values():
        for block in fn.blocks:
            for k, inst in enumerate(block.instructions):
                if inst.opcode != "call" or inst.callee is not placeholder:
                    continue
                around = [inst] + block.instructions[k - 1::-1] if k else [inst]
                for other in around + block.instructions[k + 1:]:
                    if other.location is not None:
                        return f"{other.location}: "
    return ""


def helper_site(wrapper: Function) -> str:
    """`` (helper at file:line)``: the first source location of the helper inlined into its wrapper."""
    for inst in wrapper.instructions():
        if inst.location is not None:
            return f" (helper at {inst.location})"
    return ""


def refuse_nested(helper: Function, where: str, kind: str) -> None:
    for inst in helper.instructions():
        if inst.opcode == "call" and getattr(inst.callee, "name", "").startswith(INNER_PREFIX):
            raise DifferentiationError(f"{where}ado.{kind} of a helper that itself calls ado.grad / "
                                       f"ado.value_and_grad / ado.jvp is not supported (nested derivatives)")


def define_array_placeholder(module: Module, placeholder: Function) -> None:
    kind, positions, local_bytes, wrapper_name = _parse(placeholder.name)
    kind, width = _width(kind)
    where = call_site(module, placeholder)
    wrapper = module.functions.get(wrapper_name)
    if kind not in ("grad", "value_and_grad", "jvp") or wrapper is None or wrapper.is_declaration:
        raise DifferentiationError(f"{where}internal error: no wrapper @{wrapper_name} for {placeholder.name}")
    helper_name = wrapper_name.split(".adoffload.inner.wrap")[0]
    refuse_nested(wrapper, where, kind)
    returns = kind != "jvp" or not isinstance(placeholder.return_type, VoidType)
    if width > 1 and (returns or any(k not in local_bytes for k in positions)):
        raise DifferentiationError(f"{where}internal error: {placeholder.name} has lanes but a result or a "
                                   f"differentiated argument that is not a float array of the thread")
    activity = [DUP if k in positions else CONST for k in range(len(wrapper.args))]
    if returns:
        activity[-1] = DUP
    scratch = _merged_arrays(wrapper, activity, local_bytes)
    for k in scratch:
        activity[k] = DUP
    suffix = "_".join(map(str, positions)) + "".join(f".s{k}" for k in sorted(scratch)) + \
        (f".w{width}" if width > 1 else "")
    try:
        if kind == "jvp":
            derivative = forward(module, wrapper, activity, width=width, name=f"{wrapper.name}.fwd.{suffix}")
        else:
            derivative = _reverse(module, wrapper, activity, f"{wrapper.name}.rev.{suffix}")
    except DifferentiationError as exc:
        raise DifferentiationError(f"{where}ado.{kind}({helper_name}){helper_site(wrapper)}: {exc}") from None
    strides = {k: local_bytes[k] // _element_bytes(wrapper, k) for k in positions + tuple(scratch)} if width > 1 else {}
    _emit_body(module, placeholder, kind, wrapper, derivative, activity,
               {k: local_bytes[k] * width for k in scratch}, returns, strides)
    for fn in (placeholder, derivative, wrapper):
        fn.linkage = "internal"
        fn.attributes.discard("noinline")
        fn.attributes.discard("optnone")
        fn.attributes.add("alwaysinline")


def _width(kind: str) -> tuple[str, int]:
    """``jvpw<K>`` (K tangent lanes: each tangent array ``(K, *shape)``, lane l at ``l * elements``) ->
    ``("jvp", K)``; every other kind has one lane."""
    if kind.startswith("jvpw") and kind[4:].isdigit():
        return "jvp", int(kind[4:])
    return kind, 1


def _element_bytes(wrapper: Function, k: int) -> int:
    """The size of the float elements that wrapper argument ``k`` (a pointer) is accessed as."""
    t = pointer_element_type(wrapper, wrapper.args[k])
    bits = getattr(t, "bits", None) or {"double": 64, "float": 32, "half": 16}.get(str(t))
    if not bits:
        raise DifferentiationError(f"internal error: lanes of an argument accessed as {t}")
    return bits // 8


def _parse(name: str):
    kind, positions, locals_, wrapper = name[len(ARRAY_PREFIX):].split(".", 3)
    local_bytes = {} if locals_ == "none" else \
        {int(k): int(n) for k, n in (item.split("x") for item in locals_.split("_"))}
    return kind, tuple(int(p) for p in positions.split("_")), local_bytes, wrapper


def _argument_root(pointer: Value):
    """The argument a pointer is derived from through GEPs, casts, phis and selects (None: several, or none)."""
    roots, seen, work = set(), set(), [pointer]
    while work:
        p = work.pop()
        if p in seen:
            continue
        seen.add(p)
        if isinstance(p, Argument):
            roots.add(p)
        elif isinstance(p, Instruction) and pointer_sources(p):
            work.extend(pointer_sources(p))
        else:
            return None
    return roots.pop() if len(roots) == 1 else None


def _merged_arrays(wrapper: Function, activity: list, local_bytes: dict) -> set[int]:
    """Const float arrays of the thread (``local_bytes``) a pointer of which meets a shadowed one in a
    phi or select, to a fixed point (each one made Dup may shadow further merges)."""
    activity, found = list(activity), set()
    while True:
        info = activity_of(wrapper, activity)
        new = set()
        for inst in wrapper.instructions():
            if inst.opcode not in ("phi", "select") or not inst.type.is_pointer:
                continue
            sources = pointer_sources(inst)
            if not any(info.has_shadow(v) for v in sources):
                continue
            for v in sources:
                root = _argument_root(v) if not info.has_shadow(v) else None
                if root is not None and root.index in local_bytes and activity[root.index] is CONST:
                    new.add(root.index)
        if not new:
            return found
        for k in new:
            activity[k] = DUP
        found |= new


def _reverse(module: Module, wrapper: Function, activity, name: str) -> Function:
    from .reverse import reverse
    existing = module.functions.get(name)
    if existing is not None:
        return existing
    result = reverse(module, wrapper, activity, name=name, static_tape_limit=INNER_TAPE_LIMIT)
    if result.tape is not None or result.log is not None:
        module.functions.pop(name, None)
        raise DifferentiationError(
            f"the helper's adjoint needs a dynamic tape (a loop whose trip count depends on the data or "
            f"on a kernel parameter's shape, or more than {INNER_TAPE_LIMIT // 1024} KiB of values to "
            f"keep); loop over the thread's own arrays, write the derivative with @ado.func(vjp=...), "
            f"or split the helper")
    return result.function


def _result_type(placeholder: Function, wrapper: Function, kind: str):
    ret = placeholder.return_type
    if kind == "value_and_grad":
        return ret
    if kind == "jvp":
        return ret.elements[0]
    slot = wrapper.args[-1]
    for inst in wrapper.instructions():
        if inst.opcode == "store" and inst.operands[1] is slot:
            return inst.operands[0].type
    raise DifferentiationError(f"internal error: @{wrapper.name} never stores its result")


def _emit_body(module: Module, placeholder: Function, kind: str, wrapper: Function, derivative: Function, activity: list,
               scratch: dict, returns: bool, strides: dict | None = None) -> None:
    """``strides``: with lanes, each shadowed argument's lane stride in elements (the derivative takes
    it after the shadow pointer)."""
    placeholder.args = [Argument(ty, f"x{k}", k) for k, ty in enumerate(placeholder.function_type.params)]
    primal_count = len(wrapper.args) - (1 if returns else 0)
    primal, given = placeholder.args[:primal_count], iter(placeholder.args[primal_count:])
    b = Builder(placeholder.add_block("entry"))
    if returns:
        t = _result_type(placeholder, wrapper, kind)
        value, tangent = b.alloca(t), b.alloca(t)
        b.store(const(t, 0.0), value)
        b.store(const(t, 1.0 if kind != "jvp" else 0.0), tangent)
    shadows = []
    for k, act in enumerate(activity):
        if act is CONST:
            continue
        if k in scratch:
            area = b.alloca(ArrayType(i8, scratch[k]))
            area.align = 16
            b.call_intrinsic(module, "llvm.memset.p0.i64", void,
                             [area, const(i8, 0), const(i64, scratch[k]), const(i1, 0)])
            shadows.append(area)
        elif returns and k == len(activity) - 1:
            shadows.append(tangent)
        else:
            shadows.append(next(given))
        if strides:
            shadows.append(const(i64, strides[k]))
    b.call(derivative, list(primal) + ([value] if returns else []) + shadows)
    if not returns:
        b.ret()
        return
    if kind == "grad":
        b.ret()
        return
    y = b.load(t, value)
    if kind == "value_and_grad":
        b.ret(y)
        return
    ret = placeholder.return_type
    aggregate = Constant(ret, None, kind="undef")
    for k, field in enumerate((y, b.load(t, tangent))):
        aggregate = b.emit("insertvalue", ret, [aggregate, field], indices=(k,))
    b.ret(aggregate)


__all__ = ["ARRAY_PREFIX", "call_site", "define_array_placeholder", "refuse_nested", "StructType"]
