"""User-given derivatives of helper functions, found by name next to the helper.

The front end emits a helper with a custom derivative as a ``noinline`` function ``@h`` plus
``@h.adoffload.jvp(x1..xn, dx1..dxn) -> dy`` and/or ``@h.adoffload.vjp(x1..xn, dy) -> {dx1..dxn}``
(a plain ``dx1`` when n == 1). Arguments and results are float scalars (a struct of them when
the helper returns a tuple). The mode engines call these instead of differentiating ``@h``.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..errors import DifferentiationError
from ..ir.core import Constant, Function, Instruction, Module, StructType, Value
from .activity import is_float_type
from .rules import RuleContext, constant

JVP_SUFFIX = ".adoffload.jvp"
VJP_SUFFIX = ".adoffload.vjp"


@dataclass(frozen=True)
class CustomDerivative:
    helper: Function
    jvp: Function | None
    vjp: Function | None


def find_custom(module: Module, callee: Value | None) -> CustomDerivative | None:
    """The custom derivative registered for ``callee`` in ``module``, or None."""
    if not isinstance(callee, Function):
        return None
    jvp = module.functions.get(callee.name + JVP_SUFFIX)
    vjp = module.functions.get(callee.name + VJP_SUFFIX)
    if jvp is None and vjp is None:
        return None
    return CustomDerivative(callee, jvp, vjp)


def _zero_like(v: Value) -> Constant:
    return constant(v.type, 0.0)


def custom_tangent(ctx: RuleContext, inst: Instruction, custom: CustomDerivative,
                   tangents: list[Value | None]) -> Value | None:
    """Forward mode through a custom derivative: the jvp, or for a scalar result the vjp with dy = 1.

    A vjp gives one row of the Jacobian when the helper returns one scalar, so
    ``dy = Σ vjp(x, 1)_i · dx_i``; helpers returning tuples need a jvp for forward mode.
    """
    if all(t is None for t in tangents):
        return None
    args = [ctx.primal(a) for a in inst.operands]
    if custom.jvp is not None:
        dx = [t if t is not None else _zero_like(a) for a, t in zip(args, tangents)]
        return ctx.builder.call(custom.jvp, args + dx)
    if isinstance(inst.type, StructType):
        raise DifferentiationError(
            f"helper @{custom.helper.name} returns a tuple and has only a custom vjp; forward mode needs a jvp")
    row = ctx.builder.call(custom.vjp, args + [constant(inst.type, 1.0)])
    partials = vjp_results(ctx, row, len(args))
    total = None
    for p, t in zip(partials, tangents):
        total = ctx.add(total, ctx.scale(p, t))
    return total


def custom_cotangents(ctx: RuleContext, inst: Instruction, custom: CustomDerivative,
                      adjoint: Value) -> list[Value | None]:
    """Reverse mode through a custom derivative: the vjp, or for a jvp-only helper
    ``dx_i = Σ_j dy_j · jvp(x, e_i)_j`` (one jvp call per argument)."""
    args = [ctx.primal(a) for a in inst.operands]
    struct = isinstance(inst.type, StructType)
    count = len(inst.type.elements) if struct else 1
    dys = vjp_results(ctx, adjoint, count) if struct else [adjoint]
    if custom.vjp is not None:
        return vjp_results(ctx, ctx.builder.call(custom.vjp, args + dys), len(args))
    cotangents: list[Value | None] = []
    for i, a in enumerate(args):
        unit = [constant(b.type, 1.0 if k == i else 0.0) for k, b in enumerate(args)]
        column = vjp_results(ctx, ctx.builder.call(custom.jvp, args + unit), count) if struct else \
            [ctx.builder.call(custom.jvp, args + unit)]
        total = None
        for partial, dy in zip(column, dys):
            total = ctx.add(total, ctx.mul(partial, dy))
        cotangents.append(total)
    return cotangents


# Aggregates (a tuple-returning helper's struct result). Forward mode treats them as linear ops
# (forward.py); reverse mode moves the adjoint between a field and the whole value.
def extractvalue_reverse(ctx: RuleContext, inst: Instruction, adjoint: Value) -> list[Value | None]:
    agg = inst.operands[0]
    zero = Constant(agg.type, None, kind="zero")
    return [ctx.builder.emit("insertvalue", agg.type, [zero, adjoint], indices=tuple(inst.indices))]


def insertvalue_reverse(ctx: RuleContext, inst: Instruction, adjoint: Value) -> list[Value | None]:
    value = inst.operands[1]
    if not is_float_type(value.type):
        return [adjoint, None]
    field = ctx.builder.emit("extractvalue", value.type, [adjoint], indices=tuple(inst.indices))
    rest = ctx.builder.emit("insertvalue", inst.type, [adjoint, ctx.const(value.type, 0.0)],
                            indices=tuple(inst.indices))
    return [rest, field]


def vjp_results(ctx: RuleContext, result: Value, n: int) -> list[Value]:
    """The n cotangents a vjp call returned (a struct of n floats, or one float when n == 1)."""
    if not isinstance(result.type, StructType):
        return [result]
    return [ctx.builder.emit("extractvalue", result.type.elements[k], [result], indices=(k,)) for k in range(n)]
