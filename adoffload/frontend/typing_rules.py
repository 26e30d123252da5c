"""Type rules of the kernel language, as small tables and functions (no IR here).

Promotion of binary arithmetic operands (``a op b``):

=====================  ==============================================================
operands               result
=====================  ==============================================================
i32 op i64             i64 (the wider integer)
f32 op f64             f64 (the wider float; write ``ado.f32(...)`` to stay in f32)
int op float           the float type (``i64 * f32`` is f32)
bool in arithmetic     KernelTypeError (cast with ``int(b)``)
literal op typed       the literal adopts the typed operand's type: ``a * 2.0`` with
                       ``a: f32`` is f32; ``i + 1`` with ``i: i32`` is i32; an int
                       literal with a float operand becomes that float; a float literal
                       with an int operand gives the *default float*
literal op literal     folded at compile time in Python
=====================  ==============================================================

The *default float* of a kernel is f32 when every float parameter is f32 (an "f32 kernel"),
otherwise f64. It types float literals that stand alone (``acc = 0.0``), ``float(x)``, and
``/`` between integers. So an f32 kernel never silently computes in f64; f64 enters only
through an f64 parameter or an explicit ``ado.f64(...)``. Standalone int literals are i64.

Other rules: ``/`` on ints gives the default float (like Python, true division); ``//`` and
``%`` follow Python floor semantics (also for negative operands and floats); ``int(x)`` is
i64 (truncating toward zero), ``float(x)`` the default float, ``bool(x)`` is ``x != 0``.
A variable keeps the type of its first assignment; later assignments (and stores into array
elements) accept the same type, a literal, or a widening within the same kind (i32 -> i64,
f32 -> f64); anything else is a KernelTypeError asking for an explicit cast.
Integers are fixed-width: ``+ - * **`` and ``<<`` wrap modulo 2**bits (Python's ints do not;
docs/language.md). Integer ``//`` or ``%`` by zero and ``MIN // -1`` stop the thread (KernelFaultError),
as do a negative shift count and ``int()`` of a NaN, an infinity or a float outside the target type;
shifts by the bit width or more give Python's result modulo 2**bits (expressions.py ``shift``).
"""
from __future__ import annotations

from ..language.types import ScalarType, bool_, f32, f64, i32, i64

INT_LIMITS = {i32: (-2**31, 2**31 - 1), i64: (-2**63, 2**63 - 1)}


def kind(t: ScalarType) -> str:
    return "bool" if t is bool_ else ("float" if t.is_float else "int")


def literal_kind(value) -> str:
    return "bool" if isinstance(value, bool) else ("int" if isinstance(value, int) else "float")


def promote(a: ScalarType, b: ScalarType) -> ScalarType | None:
    """Result type of arithmetic between two typed operands, or None when not allowed (bool)."""
    ka, kb = kind(a), kind(b)
    if "bool" in (ka, kb):
        return None
    if ka == kb:
        return a if a.bits >= b.bits else b
    return a if ka == "float" else b


def literal_adopts(value, other: ScalarType, default_float: ScalarType) -> ScalarType | None:
    """The type a literal takes next to a typed operand (None: not allowed)."""
    lk, ok = literal_kind(value), kind(other)
    if ok == "bool":
        return bool_ if lk == "bool" else None
    if lk == "bool":
        return None
    if lk == "float" and ok == "int":
        return default_float
    return other


def default_literal_type(value, default_float: ScalarType) -> ScalarType:
    return {"bool": bool_, "int": i64, "float": default_float}[literal_kind(value)]


def assignable(value_type: ScalarType, target: ScalarType) -> bool:
    """Can a typed value be stored into a variable/element of type `target` without a cast?"""
    if value_type == target:
        return True
    return (kind(value_type) == kind(target) != "bool") and value_type.bits < target.bits


def literal_assignable(value, target: ScalarType) -> bool:
    lk, tk = literal_kind(value), kind(target)
    if tk == "bool":
        return lk == "bool"
    if tk == "int":
        return lk == "int" and fits(value, target)
    return lk in ("int", "float")


def fits(value: int, t: ScalarType) -> bool:
    low, high = INT_LIMITS.get(t, (None, None))
    return low is None or low <= value <= high


def kernel_default_float(param_dtypes) -> ScalarType:
    """f32 when every float parameter (scalar or array element) is f32, else f64."""
    floats = {t for t in param_dtypes if t.is_float}
    return f32 if floats == {f32} else f64

