"""What an expression evaluates to while lowering a kernel.

* ``Literal``: a compile-time Python number (literals, captured globals, folded constants). It
  is "weak": it adopts the type of the typed operand it meets (see ``typing_rules``).
* ``Scalar``: an LLVM value with its kernel scalar type. ``tid_axis`` is set when the value is
  exactly the unmodified thread index of that grid axis (used to skip proven bounds checks).
* ``ArrayRef``: an array parameter or a local array (data pointer + shape values).
* ``PyObject``: any other compile-time Python object (a module, a builtin, a helper, a type).
* Python tuples of the above are tuple values (helper results, ``tid()`` of a 2-D/3-D grid).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from llvmlite import ir

from ..language.types import ArrayType, ScalarType


@dataclass(frozen=True)
class Literal:
    value: bool | int | float


@dataclass(frozen=True)
class Scalar:
    value: ir.Value
    type: ScalarType
    tid_axis: int | None = None


@dataclass(frozen=True)
class ArrayRef:
    name: str
    type: ArrayType
    pointer: ir.Value
    shape: tuple            # i64 ir.Values (constants for local arrays)
    param_index: int        # kernel parameter index; -1 - n for local array number n

    @property
    def is_local(self) -> bool:
        return self.param_index < 0


@dataclass(frozen=True)
class PyObject:
    obj: Any


def describe(value) -> str:
    """A short human description of a value, for error messages."""
    if isinstance(value, Literal):
        return f"constant {value.value!r}"
    if isinstance(value, Scalar):
        return f"{value.type!r} value"
    if isinstance(value, ArrayRef):
        return f"array '{value.name}' ({value.type!r})"
    if isinstance(value, tuple):
        return f"tuple of {len(value)}"
    if isinstance(value, PyObject):
        return f"Python object {value.obj!r}"
    return repr(value)
