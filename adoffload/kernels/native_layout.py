"""Where CPython and numpy keep the fields a native launch entry reads (native_entry.py), measured here.

A native entry reads an argument's type (``PyObject.ob_type``) and, of a numpy array, its data
pointer, ``nd``, ``dimensions`` pointer, ``descr`` and ``flags`` straight from the objects, as
numpy's own C API macros do. Nothing is taken on trust: each offset is found by reading probe
objects with ctypes and comparing against what Python and numpy report for them (``type(x)``,
``a.ctypes.data``, ``a.ndim``, ``a.shape``, ``a.dtype``, ``a.flags.num``); a field must be found at
exactly one offset inside the ndarray object (``np.ndarray.__basicsize__``) for every probe, and
the header's type field at one offset for objects of several types. ``LAYOUT`` is the result, or
None with ``LAYOUT_PROBLEM`` saying what disagreed: then no native entry is made and every launch
takes the Python path (another Python implementation, a numpy that changed its struct).
"""
from __future__ import annotations

import ctypes
import os
from dataclasses import dataclass

import numpy as np

from ..runtime.host import DATA_OFFSET

_POINTER = ctypes.sizeof(ctypes.c_void_p)


@dataclass(frozen=True)
class ObjectLayout:
    """Byte offsets inside the objects (64-bit pointers, 32-bit ints where numpy has ``int``)."""
    type: int        # PyObject.ob_type
    data: int        # PyArrayObject_fields.data (char *)
    nd: int          # .nd (int)
    dimensions: int  # .dimensions (npy_intp *)
    descr: int       # .descr (PyArray_Descr *)
    flags: int       # .flags (int)


def _probe_arrays() -> list[np.ndarray]:
    """Arrays that differ in every field a native entry reads (rank, dtype, flags, shape)."""
    base = np.arange(120, dtype=np.float64)
    frozen = np.arange(7, dtype=np.int32)
    frozen.flags.writeable = False
    return [base, base.reshape(4, 5, 6), base[::2], np.zeros((3, 4), np.float32)[1:], frozen,
            np.zeros((2, 3, 1, 5, 2), np.int8), np.ones((5, 3), np.complex128, order="F"),
            np.empty(0, np.uint16), np.zeros((), np.int64), np.zeros((6, 7), np.bool_)[:, 1:]]


def _read(kind, address: int):
    return kind.from_address(address).value


def _unique(name: str, candidates: list[int]) -> int:
    if len(candidates) != 1:
        raise LookupError(f"numpy's ndarray field '{name}' found at {len(candidates)} offsets ({candidates}), "
                          f"not exactly one")
    return candidates[0]


class _ReadCheck:
    """``readable(address, nbytes)``: whether those bytes can be read, asked of the kernel (a write of
    them to a pipe fails with EFAULT where they are not mapped), so that probing a field that is not a
    pointer never dereferences garbage."""

    def __enter__(self):
        self.fds = os.pipe()
        return self.readable

    def __exit__(self, *exc):
        for fd in self.fds:
            os.close(fd)

    def readable(self, address: int, nbytes: int) -> bool:
        if address < 4096:
            return False
        try:
            written = os.write(self.fds[1], (ctypes.c_char * nbytes).from_address(address))
        except OSError:
            return False
        os.read(self.fds[0], 1 << 16)
        return written == nbytes


def _type_offset() -> int:
    objects = [1.5, 7, "text", (1, 2), np.zeros(3), np.float32(2.0), None, [], {}]
    found = [offset for offset in range(0, 4 * _POINTER, _POINTER)
             if all(_read(ctypes.c_void_p, id(o) + offset) == id(type(o)) for o in objects)]
    return _unique("ob_type", found)


def measure_layout() -> ObjectLayout:
    """The offsets, measured on probe objects; raises LookupError when any field is not found at
    exactly one place."""
    if _POINTER != 8 or ctypes.sizeof(ctypes.c_int) != 4 or np.dtype(np.intp).itemsize != 8:
        raise LookupError("native launch entries are written for 64-bit pointers and 32-bit ints")
    type_offset = _type_offset()
    arrays = _probe_arrays()
    size = np.ndarray.__basicsize__
    pointer_offsets = range(0, size - _POINTER + 1, _POINTER)
    int_offsets = range(0, size - 4 + 1, 4)

    def all_at(offset: int, test) -> bool:
        return all(test(a, id(a) + offset) for a in arrays)

    data = _unique("data", [o for o in pointer_offsets
                            if all_at(o, lambda a, p: (_read(ctypes.c_void_p, p) or 0) == a.ctypes.data)])
    if DATA_OFFSET is not None and data != DATA_OFFSET:
        raise LookupError(f"ndarray data found at offset {data}, runtime/host.py measured {DATA_OFFSET}")
    nd = _unique("nd", [o for o in int_offsets if all_at(o, lambda a, p: _read(ctypes.c_int32, p) == a.ndim)])

    with _ReadCheck() as readable:
        def shape_at(a, p) -> bool:
            if a.ndim == 0:
                return True
            dims, nbytes = _read(ctypes.c_void_p, p), 8 * a.ndim
            return bool(dims) and readable(dims, nbytes) and tuple((ctypes.c_int64 * a.ndim).from_address(dims)) == a.shape
        dimensions = _unique("dimensions", [o for o in pointer_offsets if all_at(o, shape_at)])
    descr = _unique("descr", [o for o in pointer_offsets
                              if all_at(o, lambda a, p: _read(ctypes.c_void_p, p) == id(a.dtype))])
    flags = _unique("flags", [o for o in int_offsets
                              if all_at(o, lambda a, p: _read(ctypes.c_int32, p) == a.flags.num)])
    fields = {"nd": nd, "dimensions": dimensions, "descr": descr, "flags": flags, "data": data}
    spans = sorted((offset, offset + (4 if name in ("nd", "flags") else _POINTER)) for name, offset in fields.items())
    if any(a[1] > b[0] for a, b in zip(spans, spans[1:])) or spans[0][0] < type_offset + _POINTER:
        raise LookupError(f"ndarray fields found at overlapping offsets {fields}")
    return ObjectLayout(type_offset, data, nd, dimensions, descr, flags)


def _measured() -> tuple[ObjectLayout | None, str | None]:
    try:
        return measure_layout(), None
    except (LookupError, ValueError, OverflowError, TypeError) as exc:
        return None, str(exc)


LAYOUT, LAYOUT_PROBLEM = _measured()
