"""The per-launch status record a kernel writes when it cannot finish a thread safely.

Four i64 words: ``{code, param_index, index, dim}``. The first thread to fail wins (an
atomic exchange on ``code``); the launcher turns the record into an exception.
"""
from __future__ import annotations

import numpy as np

from .errors import BoundsError, KernelFaultError

OK, OUT_OF_BOUNDS, TRAP, DIVERGED = 0, 1, 2, 3      # DIVERGED: a block's threads at different barriers (host)
WORDS = 4
SHARED_INDEX_BASE = -1_000_000      # param_index of a block kernel's shared array n: SHARED_INDEX_BASE - n


def new_record() -> np.ndarray:
    return np.zeros(WORDS, dtype=np.int64)


def raise_for_status(record, signature, values=None) -> None:
    """Raise the error a status record describes (no-op for OK); ``values`` give the arrays' shapes."""
    code, param_index, index, dim = (int(v) for v in record[:WORDS])
    if code == OK:
        return
    if code == OUT_OF_BOUNDS:
        p = signature.params[param_index] if 0 <= param_index < len(signature.params) else None
        if p is not None:
            name = f"array '{p.name}'"
        elif param_index <= SHARED_INDEX_BASE:
            name = f"shared array #{SHARED_INDEX_BASE - param_index}"
        elif param_index < 0:
            name = f"local array #{-1 - param_index}"
        else:
            name = f"array #{param_index}"
        shape = ""
        if p is not None and values is not None and hasattr(values[param_index], "shape"):
            shape = f" with shape {tuple(values[param_index].shape)}"
        raise BoundsError(f"kernel '{signature.name}': index {index} is out of bounds for axis {dim} of "
                          f"{name}{shape}; the access was skipped and no memory outside the array was touched")
    if code == TRAP:
        raise KernelFaultError(f"kernel '{signature.name}': an assert failed at line {index} of its source; "
                               f"the failing thread stopped there (other threads ran to completion) and "
                               f"the device remains usable")
    if code == DIVERGED:
        raise KernelFaultError(f"kernel '{signature.name}': the threads of block {index} reached different barriers "
                               f"(control flow that is not uniform across the block); the block was stopped")
    raise KernelFaultError(f"kernel '{signature.name}' stopped with status code {code}")
