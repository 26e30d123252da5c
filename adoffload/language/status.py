"""The per-launch status record a kernel writes when it cannot finish a thread safely.

Four i64 words: ``{code, param_index, index, dim}``. The first thread to fail wins (an
atomic exchange on ``code``); the launcher turns the record into an exception. Codes 2-4
(assert, integer division by zero, integer overflow), 6 (null pointer), 7 (a variable read before
any assignment) and 8 (a value Python would reject) store the source line in ``index`` (0: not known).
Once the record is set, host launches stop claiming new chunks of threads.
"""
from __future__ import annotations

import linecache

import numpy as np

from ..errors import BoundsError, KernelFaultError

OK, OUT_OF_BOUNDS, TRAP, DIVISION_BY_ZERO, INTEGER_OVERFLOW, DIVERGED = 0, 1, 2, 3, 4, 5  # DIVERGED: a block's threads at different barriers (host)
NULL_POINTER = 6          # {6, -1, source line or 0, element index}: an access through a null pointer (from_cuda)
UNASSIGNED = 7            # {7, -1, source line, -1}: a variable read on a path that never assigned it
INVALID_VALUE = 8         # {8, -1, source line, k}: what Python refuses (ValueError...), INVALID_KINDS[k - 1]
INVALID_KINDS = ("a negative shift count (Python: ValueError)",
                 "a range() step of zero (Python: ValueError)",
                 "a float that is NaN, infinite or outside the integer type's range converted to an integer "
                 "(Python: ValueError, OverflowError, or an int too large for the type)",
                 "a range() whose value after the last would pass the limit of its integer type (the loop "
                 "counter would wrap; Python's ints do not)")
SHIFT_COUNT, RANGE_STEP, FLOAT_TO_INT, RANGE_LIMIT = 1, 2, 3, 4     # INVALID_VALUE's dim
# INTEGER_OVERFLOW's dim: -1 for MIN // -1; k + 1 for a signed (or unsigned) wrap of OVERFLOW_KINDS[k] in
# the index arithmetic of a from_cuda kernel (sources/cuda/faults.py)
OVERFLOW_KINDS = ("add", "sub", "mul", "shl")
WORDS = 4
SHARED_INDEX_BASE = -1_000_000      # param_index of a block kernel's shared array n: SHARED_INDEX_BASE - n


def new_record() -> np.ndarray:
    return np.zeros(WORDS, dtype=np.int64)


def raise_for_status(record, signature, values=None, source_file: str | None = None,
                     shared_names=()) -> None:
    """Raise the error a status record describes (no-op for OK); ``values`` give the arrays' shapes,
    ``source_file`` the file the kernel was written in (named beside a source line), ``shared_names``
    a block kernel's shared arrays in order (named beside their number)."""
    code, param_index, index, dim = (int(v) for v in record[:WORDS])
    if code == OK:
        return
    if code == OUT_OF_BOUNDS:
        p = signature.params[param_index] if 0 <= param_index < len(signature.params) else None
        if p is not None:
            name = f"array '{p.name}'"
        elif param_index <= SHARED_INDEX_BASE:
            n = SHARED_INDEX_BASE - param_index
            name = f"shared array #{n}" + (f" ('{shared_names[n]}')" if n < len(shared_names) else "")
        elif param_index < 0:
            name = f"local array #{-1 - param_index}"
        else:
            name = f"array #{param_index}"
        shape = ""
        if p is not None and values is not None and hasattr(values[param_index], "shape"):
            shape = f" with shape {tuple(values[param_index].shape)}"
        raise BoundsError(f"kernel '{signature.name}': index {index} is out of bounds for axis {dim} of "
                          f"{name}{shape}; the access was skipped and no memory outside the array was touched")
    where = f"line {index}" + (f" of {source_file}" if source_file else " of its source")
    if index <= 0 and code in (TRAP, DIVISION_BY_ZERO, INTEGER_OVERFLOW, NULL_POINTER, UNASSIGNED, INVALID_VALUE):
        where = ("a line not known (the source was compiled without line tables; from_cuda(..., "
                 "options=['-gline-tables-only']) names it)")
    elif code in (TRAP, DIVISION_BY_ZERO, INTEGER_OVERFLOW, UNASSIGNED, INVALID_VALUE) and source_file:
        text = linecache.getline(source_file, index).strip()
        where += f" ({text})" if text else ""
    stopped = ("the failing thread stopped there (threads not yet started were not run) and the device "
               "remains usable")
    if code == TRAP:
        raise KernelFaultError(f"kernel '{signature.name}': an assert failed at {where}; {stopped}")
    if code == UNASSIGNED:
        raise KernelFaultError(f"kernel '{signature.name}': a variable was read at {where} on a path that had not "
                               f"assigned it (Python would raise UnboundLocalError); {stopped}")
    if code == INVALID_VALUE:
        what = INVALID_KINDS[dim - 1] if 1 <= dim <= len(INVALID_KINDS) else "a value Python would reject"
        raise KernelFaultError(f"kernel '{signature.name}': {what} at {where}; {stopped}")
    if code == DIVISION_BY_ZERO:
        spelled = "'/' or '%'" if source_file and source_file.startswith("<") else "'//' or '%'"   # C or Python
        raise KernelFaultError(f"kernel '{signature.name}': integer division or modulo by zero "
                                   f"({spelled}) at {where}; {stopped}")
    if code == INTEGER_OVERFLOW and 1 <= dim <= len(OVERFLOW_KINDS):
        operation = {"add": "an addition", "sub": "a subtraction", "mul": "a multiplication",
                     "shl": "a left shift"}[OVERFLOW_KINDS[dim - 1]]
        raise KernelFaultError(f"kernel '{signature.name}': integer overflow in {operation} of index arithmetic "
                               f"at {where} (C's signed int arithmetic must not wrap; the access would have read "
                               f"or written another element); {stopped}")
    if code == NULL_POINTER:
        raise BoundsError(f"kernel '{signature.name}': a load or store through a null pointer (element {dim}) at "
                          f"{where}; the access was skipped and {stopped}")
    if code == INTEGER_OVERFLOW:
        raise KernelFaultError(f"kernel '{signature.name}': integer overflow at {where} (the most "
                                   f"negative integer divided by -1 does not fit in its type); {stopped}")
    if code == DIVERGED:
        raise KernelFaultError(f"kernel '{signature.name}': the threads of block {index} reached different barriers "
                               f"(control flow that is not uniform across the block); the block was stopped")
    raise KernelFaultError(f"kernel '{signature.name}' stopped with status code {code}")
