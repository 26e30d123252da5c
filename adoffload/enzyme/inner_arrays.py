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

Loops of the helper over the thread's arrays have constant trip counts, so the adjoint's tape is a
local array (up to ``INNER_TAPE_LIMIT`` bytes, within the kernel's local memory limit); a helper that
would need a dynamic tape is refused.
"""
from __future__ import annotations

from ..errors import DifferentiationError
from ..ir.builder import Builder
from ..ir.core import Argument, Constant, Function, Module, StructType, VoidType, const
from .activity import CONST, DUP
from .forward import forward

ARRAY_PREFIX = "adoffload.inner.array_"
INNER_PREFIX = "adoffload.inner."
INNER_TAPE_LIMIT = 64 * 1024


def call_site(module: Module, placeholder: Function) -> str:
    """``file:line: `` of the first call of the placeholder (for error messages)."""
    for fn in module.functions.values():
        for inst in fn.instructions():
            if inst.opcode == "call" and inst.callee is placeholder and inst.location is not None:
                return f"{inst.location}: "
    return ""


def refuse_nested(helper: Function, where: str, kind: str) -> None:
    for inst in helper.instructions():
        if inst.opcode == "call" and getattr(inst.callee, "name", "").startswith(INNER_PREFIX):
            raise DifferentiationError(f"{where}ado.{kind} of a helper that itself calls ado.grad / "
                                       f"ado.value_and_grad / ado.jvp is not supported (nested derivatives)")


def define_array_placeholder(module: Module, placeholder: Function) -> None:
    kind, positions, wrapper_name = _parse(placeholder.name)
    where = call_site(module, placeholder)
    wrapper = module.functions.get(wrapper_name)
    if kind not in ("grad", "value_and_grad", "jvp") or wrapper is None or wrapper.is_declaration:
        raise DifferentiationError(f"{where}internal error: no wrapper @{wrapper_name} for {placeholder.name}")
    helper_name = wrapper_name.split(".adoffload.inner.wrap")[0]
    refuse_nested(wrapper, where, kind)
    returns = kind != "jvp" or not isinstance(placeholder.return_type, VoidType)
    activity = [DUP if k in positions else CONST for k in range(len(wrapper.args))]
    if returns:
        activity[-1] = DUP
    suffix = "_".join(map(str, positions))
    try:
        if kind == "jvp":
            derivative = forward(module, wrapper, activity, name=f"{wrapper.name}.fwd.{suffix}")
        else:
            derivative = _reverse(module, wrapper, activity, f"{wrapper.name}.rev.{suffix}")
    except DifferentiationError as exc:
        raise DifferentiationError(f"{where}ado.{kind}({helper_name}): {exc}") from None
    _emit_body(placeholder, kind, wrapper, derivative, returns)
    for fn in (placeholder, derivative, wrapper):
        fn.linkage = "internal"
        fn.attributes.discard("noinline")
        fn.attributes.discard("optnone")
        fn.attributes.add("alwaysinline")


def _parse(name: str):
    kind, positions, wrapper = name[len(ARRAY_PREFIX):].split(".", 2)
    return kind, tuple(int(p) for p in positions.split("_")), wrapper


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


def _emit_body(placeholder: Function, kind: str, wrapper: Function, derivative: Function,
               returns: bool) -> None:
    placeholder.args = [Argument(ty, f"x{k}", k) for k, ty in enumerate(placeholder.function_type.params)]
    primal_count = len(wrapper.args) - (1 if returns else 0)
    primal, shadows = placeholder.args[:primal_count], placeholder.args[primal_count:]
    b = Builder(placeholder.add_block("entry"))
    if not returns:
        b.call(derivative, list(primal) + list(shadows))
        b.ret()
        return
    t = _result_type(placeholder, wrapper, kind)
    value, tangent = b.alloca(t), b.alloca(t)
    b.store(const(t, 0.0), value)
    b.store(const(t, 1.0 if kind != "jvp" else 0.0), tangent)
    b.call(derivative, list(primal) + [value] + list(shadows) + [tangent])
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
