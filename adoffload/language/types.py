"""Kernel-language types: scalars and array annotations (``ado.f32``, ``ado.In[ado.f32, 2]``).

Scalar types are also callables usable inside kernels as casts (``ado.f32(x)``); outside a
kernel they convert like the numpy scalar type.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class ScalarType:
    """A kernel scalar type: its name, numpy dtype and LLVM IR spelling."""
    name: str
    dtype: np.dtype
    llvm: str           # LLVM IR type name inside kernels: float, double, i32, i64, i1
    is_float: bool
    bits: int

    def __call__(self, value):
        # Outside a kernel: behave like a numpy cast, so helpers are testable in plain Python.
        return self.dtype.type(value)

    def __repr__(self) -> str:
        return f"ado.{self.name}"


f32 = ScalarType("f32", np.dtype(np.float32), "float", True, 32)
f64 = ScalarType("f64", np.dtype(np.float64), "double", True, 64)
i32 = ScalarType("i32", np.dtype(np.int32), "i32", False, 32)
i64 = ScalarType("i64", np.dtype(np.int64), "i64", False, 64)
bool_ = ScalarType("bool_", np.dtype(np.bool_), "i1", False, 1)

SCALAR_TYPES = {t.name: t for t in (f32, f64, i32, i64, bool_)}
_BY_DTYPE = {t.dtype: t for t in (f32, f64, i32, i64, bool_)}


def scalar_type_of_dtype(dtype) -> ScalarType | None:
    return _BY_DTYPE.get(np.dtype(dtype))


@dataclass(frozen=True)
class ArrayType:
    """An array parameter: element type, rank and data-movement intent (in, out, inout)."""
    dtype: ScalarType
    ndim: int
    intent: str

    @property
    def reads(self) -> bool:
        return self.intent in ("in", "inout")

    @property
    def writes(self) -> bool:
        return self.intent in ("out", "inout")

    def __repr__(self) -> str:
        name = {"in": "In", "out": "Out", "inout": "InOut"}[self.intent]
        return f"ado.{name}[{self.dtype!r}, {self.ndim}]"


class _Intent:
    """``In[f32]`` / ``In[f32, 2]``: builds an ArrayType of this intent."""

    def __init__(self, intent: str):
        self.intent = intent

    def __getitem__(self, item) -> ArrayType:
        dtype, ndim = (item if isinstance(item, tuple) else (item, 1))
        name = {"in": "In", "out": "Out", "inout": "InOut"}[self.intent]
        spelled = f"ado.{name}[{', '.join(map(repr, item if isinstance(item, tuple) else (item,)))}]"
        if not isinstance(dtype, ScalarType):
            raise _annotation_error(f"{spelled}: the array element type must be an ado scalar type "
                                    f"(ado.f32, ado.f64, ado.i32, ado.i64, ado.bool_), got {dtype!r}")
        if not isinstance(ndim, int) or isinstance(ndim, bool) or not 1 <= ndim <= 3:
            raise _annotation_error(f"{spelled}: arrays have 1, 2 or 3 dimensions, got ndim {ndim!r}")
        return ArrayType(dtype, ndim, self.intent)


def _annotation_error(message: str):
    """A KernelTypeError located at the annotation being evaluated (the caller's caller)."""
    import linecache
    import sys

    from ..errors import KernelTypeError
    frame = sys._getframe(2)
    filename, line = frame.f_code.co_filename, frame.f_lineno
    return KernelTypeError(message, filename=filename, line=line,
                           source_line=linecache.getline(filename, line) or None)


In = _Intent("in")
Out = _Intent("out")
InOut = _Intent("inout")
