"""Rules for LLVM's vector lane operations and reductions (SLP- and loop-vectorized clang -O2/-O3 code).

All three are linear, so each rule routes the result's adjoint lanes back to the lanes they were
read from: ``extractelement`` scatters one lane, ``insertelement`` splits the adjoint between the
vector and the inserted scalar, ``shufflevector`` sums the adjoint lanes that read each source
lane (a mask lane of -1 is poison and reads nothing). Forward mode applies the op to tangents.
"""
from __future__ import annotations

from ..ir.core import Constant, Instruction, Value, VectorType, const, i32
from .activity import is_float_type
from .rules import Rule, RuleContext, register


def _zero(t) -> Constant:
    return Constant(t, None, kind="zero")


def extractelement_reverse(ctx: RuleContext, inst: Instruction, adjoint: Value) -> list[Value | None]:
    vector, index = inst.operands
    b = ctx.builder
    return [b.emit("insertelement", vector.type, [_zero(vector.type), adjoint, ctx.primal(index)]), None]


def insertelement_reverse(ctx: RuleContext, inst: Instruction, adjoint: Value) -> list[Value | None]:
    vector, scalar, index = inst.operands
    b, lane = ctx.builder, ctx.primal(index)
    rest = b.emit("insertelement", vector.type, [adjoint, ctx.const(scalar.type, 0.0), lane])
    part = b.emit("extractelement", scalar.type, [adjoint, lane]) if is_float_type(scalar.type) else None
    return [rest, part, None]


def shufflevector_reverse(ctx: RuleContext, inst: Instruction, adjoint: Value) -> list[Value | None]:
    a = inst.operands[0]
    width = a.type.count
    b = ctx.builder
    sources: list[list[Value | None]] = [[None] * width, [None] * width]
    for out_lane, read in enumerate(inst.indices):
        if read < 0:
            continue
        part = b.emit("extractelement", a.type.element, [adjoint, const(i32, out_lane)])
        side, lane = divmod(read, width)
        sources[side][lane] = ctx.add(sources[side][lane], part)
    results: list[Value | None] = []
    for side in sources:
        if all(x is None for x in side):
            results.append(None)
            continue
        vec: Value = _zero(VectorType(a.type.element, width))
        for lane, x in enumerate(side):
            if x is not None:
                vec = b.emit("insertelement", vec.type, [vec, x, const(i32, lane)])
        results.append(vec)
    return results


# ----------------------------------------------------------------------------- reductions
# ``llvm.vector.reduce.fadd(start, v)`` = start + the lanes of v (any order: the derivative is the
# same); ``llvm.vector.reduce.fmax``/``fmin``/``fmaximum``/``fminimum(v)`` pick one lane, and the
# derivative flows through the first lane equal to the result (one lane, as a scalar max gives it
# to one operand). A NaN result matches no lane: no derivative, as for a NaN anywhere else.

def _lanes(ctx: RuleContext, vector: Value) -> list[Value]:
    b = ctx.builder
    return [b.emit("extractelement", vector.type.element, [vector, const(i32, k)]) for k in range(vector.type.count)]


def _reduce_fadd_forward(ctx: RuleContext, inst: Instruction, tangents: list[Value | None]) -> Value | None:
    total = tangents[0]
    if tangents[1] is not None:
        for lane in _lanes(ctx, tangents[1]):
            total = ctx.add(total, lane)
    return total


def _reduce_fadd_reverse(ctx: RuleContext, inst: Instruction, adjoint: Value) -> list[Value | None]:
    vector_type = inst.operands[1].type
    splat: Value = _zero(vector_type)
    for k in range(vector_type.count):
        splat = ctx.builder.emit("insertelement", vector_type, [splat, adjoint, const(i32, k)])
    return [adjoint, splat]


def _chosen_lanes(ctx: RuleContext, inst: Instruction) -> list[Value]:
    """One i1 per lane: the first lane whose value equals the reduction's result."""
    from ..ir.core import i1
    result = ctx.result(inst)
    chosen, earlier = [], None
    for lane in _lanes(ctx, ctx.operand(inst, 0)):
        equal = ctx.fcmp("oeq", lane, result)
        pick = equal if earlier is None else ctx.builder.emit(
            "and", i1, [equal, ctx.builder.emit("xor", i1, [earlier, Constant(i1, 1)])])
        earlier = equal if earlier is None else ctx.builder.emit("or", i1, [earlier, equal])
        chosen.append(pick)
    return chosen


def _pick_forward(ctx: RuleContext, inst: Instruction, tangents: list[Value | None]) -> Value | None:
    if tangents[0] is None:
        return None
    total: Value = ctx.const(inst.type, 0.0)
    for pick, lane in zip(_chosen_lanes(ctx, inst), _lanes(ctx, tangents[0])):
        total = ctx.select(pick, lane, total)
    return total


def _pick_reverse(ctx: RuleContext, inst: Instruction, adjoint: Value) -> list[Value | None]:
    vector_type = inst.operands[0].type
    zero = ctx.const(inst.type, 0.0)
    routed: Value = _zero(vector_type)
    for k, pick in enumerate(_chosen_lanes(ctx, inst)):
        routed = ctx.builder.emit("insertelement", vector_type, [routed, ctx.select(pick, adjoint, zero), const(i32, k)])
    return [routed]


register("call:vector.reduce.fadd", Rule(forward=_reduce_fadd_forward, reverse=_reduce_fadd_reverse))
for _name in ("fmax", "fmin", "fmaximum", "fminimum"):
    register(f"call:vector.reduce.{_name}", Rule(forward=_pick_forward, reverse=_pick_reverse))
