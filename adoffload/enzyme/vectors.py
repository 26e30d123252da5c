"""Reverse rules for LLVM's vector lane operations (SLP- and loop-vectorized clang -O2/-O3 code).

All three are linear, so each rule routes the result's adjoint lanes back to the lanes they were
read from: ``extractelement`` scatters one lane, ``insertelement`` splits the adjoint between the
vector and the inserted scalar, ``shufflevector`` sums the adjoint lanes that read each source
lane (a mask lane of -1 is poison and reads nothing). Forward mode applies the op to tangents.
"""
from __future__ import annotations

from ..ir.core import Constant, Instruction, Value, VectorType, const, i32
from .activity import is_float_type
from .rules import RuleContext


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
