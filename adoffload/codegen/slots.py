"""Packing one launch's arguments into the slots of the entry ABI (codegen/abi.py's module docstring):
one 8-byte slot per flattened parameter, then one per grid dimension, then the status pointer."""
from __future__ import annotations

import struct
from collections.abc import Sequence

import numpy as np

from ..errors import CompilationError

# How a slot is stored: struct format for pack_slots.
_SLOT_FORMAT = {"float": "<f", "double": "<d", "i1": "<B", "i8": "<b", "i32": "<i", "i64": "<q",
                "ptr": "<Q"}


def flat_type_names(flat_params) -> list[str]:
    """Accept LLVM type strings or ``FlatParam`` objects; return the type strings."""
    return [getattr(p, "llvm_type", p) for p in flat_params]


def _address(value) -> int:
    if isinstance(value, np.ndarray):
        return value.ctypes.data
    return int(value)


def pack_slots(flat_values: Sequence, flat_types: Sequence, grid: Sequence[int], status_ptr) -> np.ndarray:
    """The uint64 slot array for one launch: params, grid dims, status pointer.

    Pointer values may be ints (addresses) or numpy arrays (their data address); the caller
    keeps the arrays alive for the launch.
    """
    types = flat_type_names(flat_types)
    if len(flat_values) != len(types):
        raise CompilationError(f"pack_slots: {len(flat_values)} values for {len(types)} flattened params")
    slots = np.zeros(len(types) + len(grid) + 1, dtype=np.uint64)
    raw = slots.view(np.uint8)
    for k, (value, t) in enumerate(zip(flat_values, types)):
        if t not in _SLOT_FORMAT:
            raise CompilationError(f"pack_slots: unsupported flattened parameter type {t!r}")
        v = _address(value) if t == "ptr" else (bool(value) if t == "i1" else value)
        data = struct.pack(_SLOT_FORMAT[t], v)
        raw[8 * k:8 * k + len(data)] = np.frombuffer(data, dtype=np.uint8)
    for a, g in enumerate(grid):
        slots[len(types) + a] = np.uint64(int(g))
    slots[-1] = np.uint64(_address(status_ptr))
    return slots
