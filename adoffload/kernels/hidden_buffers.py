"""The launcher-filled buffers of reverse kernels: dynamic tapes, shadow tapes, contribution logs.

A reverse kernel with a dynamic tape (enzyme/tape.py) takes hidden parameters its launcher sizes per
launch: a counting kernel runs the primal and records each thread's bytes, a prefix sum gives each
thread's offset, and the buffers are allocated zeroed (on a GPU, in device memory: tape_scan.py).
A deterministic kernel's contribution log is reduced into its shadows after the launch. The counting
kernels are launched through the ``launch`` callable the caller passes (launch.launch).
"""
from __future__ import annotations

import numpy as np

from ..errors import ArgumentError
from .arguments import Resident
from .tape_scan import exclusive_scan_on_device


def with_hidden_arguments(kernel, visible: list, grid: tuple[int, ...], device, given: dict, launch,
                          owned: list | None = None) -> list:
    """All values in parameter order: the visible ones, and the hidden per-thread buffers a
    reverse kernel needs (enzyme/tape.py), filled level by level (``tape_levels``); ``launch``:
    launch.launch, which runs the counting kernels. With ``owned`` on a GPU the buffers are device
    arrays, appended there for the caller to free."""
    params = kernel.signature.params
    if all(p.name in kernel.signature.visible_names for p in params):
        return visible
    filled = dict(given)
    for counter, buffers, shadows in tape_levels(kernel):
        if all(b in filled for b, _ in buffers):
            continue
        filled.update(sized_buffers(kernel, counter, buffers, shadows, visible, filled, grid, device, launch, owned))
    missing = [p.name for p in params if p.name not in kernel.signature.visible_names and p.name not in filled]
    if missing:
        raise ArgumentError(f"kernel '{kernel.name}' takes launcher-filled buffers it has no way to size: "
                            f"{', '.join(missing)} (launch the kernel it belongs to instead)")
    values, rest = [], iter(visible)
    for p in params:
        values.append(next(rest) if p.name in kernel.signature.visible_names else filled[p.name])
    return values


def tape_levels(kernel) -> list:
    """``(counting kernel, [(buffer, offsets)...], [shadow buffers...])`` per level, in the order
    they must be sized: the base's tape first when ``kernel`` differentiates a reverse kernel with a
    dynamic tape (its shadow tape is laid out like it), then the kernel's own tape and/or log."""
    from ..enzyme.kernels import OFFSETS_PARAM, TAPE_PARAM, TAPE_SHADOW_PARAM
    names = {p.name for p in kernel.signature.params}
    levels = []
    own = kernel.tape.buffers if kernel.tape is not None else ()
    base_counter = getattr(kernel, "base_count_kernel", None)
    if TAPE_PARAM in names and TAPE_PARAM not in own and base_counter is not None:
        levels.append((base_counter, [(TAPE_PARAM, OFFSETS_PARAM)],
                       [TAPE_SHADOW_PARAM] if TAPE_SHADOW_PARAM in names else []))
    if kernel.tape is not None:
        levels.append((kernel.count_kernel, list(zip(kernel.tape.buffers, kernel.tape.offsets)), []))
    return levels


def sized_buffers(kernel, counter, buffers: list, shadows: list, visible: list, filled: dict,
                  grid: tuple[int, ...], device, launch, owned: list | None = None) -> dict:
    """One level of per-thread buffers: count each thread's bytes with ``counter`` (on scratch
    copies of the arrays its primal writes), prefix-sum them over the linear thread index into
    per-thread offsets, allocate each buffer zeroed (and each shadow like the first buffer).

    On a GPU the counts, offsets and tapes stay in device memory (DeviceArrays, appended to
    ``owned`` for the caller to free after the launch) and the counts are scanned there
    (tape_scan.py): only the total comes back to size the buffers. A contribution log is read on
    the host after the launch (reduce_contribution_log), so it is sized on the host."""
    if any(isinstance(v, Resident) for v in visible):
        raise ArgumentError(f"kernel '{kernel.name}' sizes a dynamic tape or a contribution log on the host: "
                            "pass numpy arrays (the launcher moves them), not arrays already on the device")
    primal = counter.signature.visible_params[:-len(buffers)]
    scratch = [v.copy() if isinstance(v, np.ndarray) and p.is_array and p.type.writes else v
               for p, v in zip(primal, visible)]
    counter_hidden = {p.name: filled[p.name] for p in counter.signature.params
                      if p.name not in counter.signature.visible_names}
    from ..enzyme.kernels import LOG_PARAM
    if device.kind != "cpu" and owned is not None and all(b != LOG_PARAM for b, _ in buffers):
        return _sized_on_device(counter, buffers, shadows, scratch, counter_hidden, grid, device, launch, owned)
    counts = [np.zeros(grid, np.int64) for _ in buffers]
    launch(counter, (*scratch, *counts), {}, grid=grid, device=device, hidden=counter_hidden)
    result = {}
    for count, (buffer, offsets_name) in zip(counts, buffers):
        flat = count.reshape(-1)
        offsets = np.zeros_like(count)
        np.cumsum(flat[:-1], out=offsets.reshape(-1)[1:])
        result[buffer] = np.zeros(max(1, int(flat.sum()) // 8), np.int64)
        result[offsets_name] = offsets
    for shadow in shadows:
        result[shadow] = np.zeros_like(result[buffers[0][0]])
    return result


def _sized_on_device(counter, buffers, shadows, scratch, counter_hidden, grid, device, launch, owned: list) -> dict:
    """``sized_buffers`` on a GPU: counts scanned in place into the offsets, buffers zeroed there
    (Resident values: the launch uses them in place)."""
    from ..runtime.device import Buffer
    from ..runtime.dlpack import DeviceArray

    def zeroed(shape) -> DeviceArray:
        array = DeviceArray.empty(shape, np.int64, device=device)
        owned.append(array)
        device.memset(Buffer(array.ptr, array.nbytes, device), 0)
        return array

    def resident(array: DeviceArray) -> Resident:
        return Resident(device.spec, array.ptr, array.shape, array.dtype, array, True)
    counts = [zeroed(grid) for _ in buffers]
    launch(counter, (*scratch, *counts), {}, grid=grid, device=device, hidden=counter_hidden)
    result = {}
    for count, (buffer, offsets_name) in zip(counts, buffers):
        total = exclusive_scan_on_device(DeviceArray(count.buffer, (count.nbytes // 8,), np.int64), device,
                                         counter.scan_kernels(), launch)
        tape = zeroed(max(1, total // 8))
        result[buffer], result[offsets_name] = resident(tape), resident(count)
        for shadow in shadows:
            result[shadow] = resident(zeroed(tape.shape))
    return result


def reduce_contribution_log(kernel, values: list) -> None:
    """After a deterministic reverse kernel's launch: add its contribution log into the shadow
    arrays in (thread, program) order (enzyme/deterministic.py). The log's shadow id k is the
    k-th shadow param: the params after the primal ones, before the hidden ones."""
    from ..enzyme.deterministic import reduce_log
    from ..enzyme.kernels import LOG_PARAM
    spec = kernel.tape
    names = [p.name for p in kernel.signature.params]
    first_shadow = len(kernel.count_kernel.signature.params) - len(spec.counters)
    first_hidden = min(names.index(b) for b in spec.buffers)
    reduce_log(values[names.index(LOG_PARAM)], values[first_shadow:first_hidden])
