"""The values adjoints are made of: their sum (field by field for a struct, a tuple-returning
helper's result), the zero a shadow is cleared with, and the identity an accumulator starts from."""
from __future__ import annotations

from ..ir.builder import Builder
from ..ir.core import Constant, FloatType, StructType, Value, VectorType
from .activity import is_float_type


def add_adjoints(b: Builder, a: Value, d: Value) -> Value:
    """``a + d`` for floats, and field by field for a struct (a tuple-returning helper's result)."""
    if not isinstance(a.type, StructType):
        return b.fadd(a, d)
    out = a
    for k, element in enumerate(a.type.elements):
        if is_float_type(element):
            total = add_adjoints(b, b.emit("extractvalue", element, [a], indices=(k,)),
                                 b.emit("extractvalue", element, [d], indices=(k,)))
            out = b.emit("insertvalue", a.type, [out, total], indices=(k,))
    return out


def zero_of(t) -> Constant:
    return Constant(t, None, kind="zero")


def adjoint_identity(t) -> Constant:
    """What an adjoint accumulator starts from (and is reset to): -0.0 for float and double (and
    vectors of them), the exact identity of ``fadd`` (``-0.0 + x`` is ``x`` bit for bit, so LLVM
    folds the first add away; ``+0.0 + x`` turns x = -0.0 into +0.0 and stays); zero otherwise.
    Adjoints only enter linear operations, so this changes at most the sign of an exactly-zero
    adjoint (an input with no contribution reads -0.0; added into a gradient array starting at
    +0.0 it leaves +0.0)."""
    if isinstance(t, FloatType) and t.kind in ("float", "double"):
        return Constant(t, -0.0)
    if isinstance(t, VectorType) and isinstance(t.element, FloatType) and t.element.kind in ("float", "double"):
        return Constant(t, tuple(Constant(t.element, -0.0) for _ in range(t.count)), kind="aggregate")
    return zero_of(t)
