"""Arguments that share memory: refused when the kernel writes one of them.

Threads would read elements other threads already overwrote (a stencil ``out[i] = x[i-1] + x[i+1]``
with ``out is x`` returns garbage), and compiled code may assume the arrays are distinct. Arrays only
read may share memory; so may a seed the launcher copies (``copied``: the kernel never sees the
caller's array). The message names both parameters and which one to give a copy of.
"""
from __future__ import annotations

import numpy as np

from ..errors import ArgumentError
from ..language.signature import KernelSignature
from ..runtime.host import data_address
from .arguments import Resident


def check_no_written_overlap(signature: KernelSignature, values: list, copied: frozenset = frozenset()) -> None:
    """Refuse two visible array arguments (``values``, in visible-parameter order) that share
    memory when the kernel writes either of them (``copied`` params count as read)."""
    spans = []
    for param, value in zip(signature.visible_params, values):
        if isinstance(value, np.ndarray) and value.nbytes:
            start = data_address(value)
            spans.append((start, start + value.nbytes, "host", param))
        elif isinstance(value, Resident) and value.nbytes:
            spans.append((value.ptr, value.ptr + value.nbytes, value.device, param))
    spans.sort(key=lambda span: span[:2])
    for k, (start, end, where, param) in enumerate(spans):
        for other_start, _, other_where, other in spans[k + 1:]:
            if other_start >= end:
                break
            if where == other_where and (written(param, copied) or written(other, copied)):
                raise overlap_error(signature.name, param, other, copied)


def written(param, copied: frozenset = frozenset()) -> bool:
    """Whether a launch writes the memory given for ``param``."""
    return param.type.writes and param.name not in copied


def overlap_error(kernel_name: str, first, second, copied: frozenset = frozenset()) -> ArgumentError:
    """The error for ``first`` and ``second`` (Params, at least one written) sharing memory."""
    written_names = [p.name for p in (first, second) if written(p, copied)]
    read = [p.name for p in (first, second) if not written(p, copied)]
    if read:
        fix = (f"Pass a copy of the array given for '{read[0]}' (its .copy(): the kernel then reads the values "
               f"from before the launch) or a separate array for '{written_names[0]}'")
    else:
        fix = (f"Both are written: pass a separate array for one of them (e.g. a copy of the array given "
               f"for '{second.name}')")
    return ArgumentError(
        f"kernel '{kernel_name}': arrays '{first.name}' and '{second.name}' share memory and "
        f"{' and '.join(repr(n) for n in written_names)} {'is' if len(written_names) == 1 else 'are'} written; "
        f"threads could read elements other threads already overwrote. {fix}")


def overlapping_residents(values: list) -> bool:
    """Whether two device-resident arguments share memory."""
    spans = sorted((v.ptr, v.ptr + v.nbytes) for v in values if isinstance(v, Resident) and v.nbytes)
    return any(later[0] < earlier[1] for earlier, later in zip(spans, spans[1:]))
