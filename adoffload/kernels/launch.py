"""Launching a kernel with numpy arrays: check arguments, pick the variant, move data by intent.

Every argument problem is reported before anything runs, naming the parameter. The bounds
facts the grid proves (``x[i]`` with ``grid[0] <= x.shape[0]``) select a variant whose
checks for those accesses are compiled away.
"""
from __future__ import annotations

import numbers
from dataclasses import dataclass

import numpy as np

from ..language import status as abi_status
from ..errors import ArgumentError, GridError
from ..language.signature import KernelSignature
from ..language.types import ArrayType, ScalarType
from .tape_scan import exclusive_scan_on_device

MAX_THREADS = 2**62


def bind_arguments(signature: KernelSignature, args: tuple, kwargs: dict) -> list:
    """Match positional and keyword arguments to the visible parameters, in parameter order."""
    params = signature.visible_params
    if len(args) > len(params):
        raise ArgumentError(f"kernel '{signature.name}' takes {len(params)} arguments "
                            f"({', '.join(p.name for p in params)}), got {len(args)}")
    bound = list(args) + [_MISSING] * (len(params) - len(args))
    names = [p.name for p in params]
    for key, value in kwargs.items():
        if key not in names:
            raise ArgumentError(f"kernel '{signature.name}' has no parameter '{key}' "
                                f"(parameters: {', '.join(names)})")
        k = names.index(key)
        if bound[k] is not _MISSING:
            raise ArgumentError(f"kernel '{signature.name}': parameter '{key}' given twice")
        bound[k] = value
    missing = [names[k] for k, v in enumerate(bound) if v is _MISSING]
    if missing:
        raise ArgumentError(f"kernel '{signature.name}' is missing argument(s): {', '.join(missing)}")
    return [check_argument(signature, p, v) for p, v in zip(params, bound)]


_MISSING = object()


def check_argument(signature: KernelSignature, param, value):
    where = f"kernel '{signature.name}', parameter '{param.name}'"
    if isinstance(param.type, ArrayType):
        return _check_array(where, param.type, value)
    return _check_scalar(where, param.type, value)


@dataclass(frozen=True)
class Resident:
    """An array argument already in GPU memory (a DeviceArray, or a CuPy/JAX/PyTorch GPU array
    through DLPack): launches on its device use it in place, with no copies."""
    device: str
    ptr: int
    shape: tuple[int, ...]
    dtype: np.dtype
    owner: object

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def nbytes(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64)) * self.dtype.itemsize


def _resident(where: str, value) -> Resident | None:
    """``value`` as a Resident when it lives in GPU memory, else None."""
    from ..runtime.dlpack import DeviceArray, as_device_array
    if isinstance(value, DeviceArray):
        if value.device.kind == "cpu":
            return None
        return Resident(value.device.spec, value.ptr, value.shape, value.dtype, value)
    if not hasattr(value, "__dlpack_device__") or int(value.__dlpack_device__()[0]) == 1:   # 1: DLPack CPU
        return None
    external = as_device_array(value)
    if not external.c_contiguous:
        raise ArgumentError(f"{where}: the device array is not C-contiguous (strides {external.strides})")
    return Resident(external.device, external.ptr, tuple(external.shape), np.dtype(external.dtype), external)


def _check_array(where: str, expected: ArrayType, value):
    if not isinstance(value, np.ndarray):
        if isinstance(value, (numbers.Number, np.generic)):
            raise ArgumentError(f"{where}: expected an array {expected!r}, got the scalar {value!r}")
        resident = _resident(where, value)
        if resident is not None:
            _check_layout(where, expected, resident)
            return resident
        if hasattr(value, "__array__") or hasattr(value, "__dlpack__"):
            value = np.asarray(value)
        else:
            raise ArgumentError(f"{where}: expected a numpy array {expected!r}, got {type(value).__name__}")
    _check_layout(where, expected, value)
    if not value.flags.c_contiguous:
        raise ArgumentError(f"{where}: the array is not C-contiguous (strides {value.strides}); "
                            f"pass np.ascontiguousarray(...)")
    if not value.flags.aligned:
        raise ArgumentError(f"{where}: the array's data address {value.ctypes.data:#x} is not a multiple of "
                            f"its element size {value.itemsize} (a misaligned view, e.g. np.frombuffer with "
                            f"an odd offset); kernels may use aligned loads, so pass an aligned copy: "
                            f"np.require(x, requirements='CA')")
    if expected.writes and not value.flags.writeable:
        raise ArgumentError(f"{where}: the array is read-only but the kernel writes it ({expected!r})")
    return value


def _check_layout(where: str, expected: ArrayType, value) -> None:
    if value.dtype != expected.dtype.dtype:
        raise ArgumentError(f"{where}: expected dtype {expected.dtype.dtype} ({expected!r}), got {value.dtype}")
    if value.ndim != expected.ndim:
        raise ArgumentError(f"{where}: expected a {expected.ndim}-D array, got {value.ndim}-D with shape {value.shape}")


def _check_scalar(where: str, expected: ScalarType, value):
    if isinstance(value, np.ndarray):
        if value.ndim == 0:
            value = value[()]
        else:
            raise ArgumentError(f"{where}: expected a scalar {expected!r}, got an array of shape {value.shape}")
    if expected.is_float:
        if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
            raise ArgumentError(f"{where}: expected a float {expected!r}, got {type(value).__name__} {value!r}")
        return expected.dtype.type(value)
    if expected is not None and expected.name == "bool_":
        if not isinstance(value, (bool, np.bool_, numbers.Integral)):
            raise ArgumentError(f"{where}: expected a bool, got {type(value).__name__} {value!r}")
        return np.bool_(value)
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral):
        raise ArgumentError(f"{where}: expected an integer {expected!r}, got {type(value).__name__} {value!r}")
    info = np.iinfo(expected.dtype)
    if not info.min <= int(value) <= info.max:
        raise ArgumentError(f"{where}: {value} does not fit in {expected!r}")
    return expected.dtype.type(value)


def normalize_grid(signature: KernelSignature, grid) -> tuple[int, ...]:
    """The grid as a tuple of grid_rank non-negative ints (an int is accepted for rank 1)."""
    rank = signature.grid_rank
    if isinstance(grid, numbers.Integral) and not isinstance(grid, bool):
        grid = (int(grid),)
    try:
        if isinstance(grid, (str, bytes)) or not all(isinstance(g, numbers.Integral) and not isinstance(g, bool)
                                                     for g in grid):
            raise TypeError
        grid = tuple(int(g) for g in grid)
    except TypeError:
        raise GridError(f"kernel '{signature.name}': grid must be an int or a tuple of ints, got {grid!r}") from None
    if len(grid) != rank:
        raise GridError(f"kernel '{signature.name}' uses a {rank}-D grid (ado.tid() gives {rank} "
                        f"index{'es' if rank > 1 else ''}), got grid={grid}")
    if any(g < 0 for g in grid):
        raise GridError(f"kernel '{signature.name}': grid sizes must be >= 0, got {grid}")
    total = 1
    for g in grid:
        total *= g
    if total > MAX_THREADS:
        raise GridError(f"kernel '{signature.name}': grid {grid} has {total} threads, more than {MAX_THREADS}")
    return grid


def proven_facts(kernel, values: list, grid: tuple[int, ...]) -> frozenset:
    """The candidate bounds facts that this launch's grid and shapes make true."""
    return facts_proven_by(kernel, {k: tuple(v.shape) for k, v in enumerate(values) if _is_array(v)}, grid)


def facts_proven_by(kernel, shapes: dict[int, tuple[int, ...]], grid: tuple[int, ...]) -> frozenset:
    """The candidate bounds facts ``(param, dim, axis)`` (a check ``index < shape[dim]`` on an
    index that is the thread id of ``axis``) that ``grid`` and the array ``shapes`` (by param
    index) make true: the launcher and the JAX lowering compile those checks away."""
    return frozenset((param, dim, axis) for param, dim, axis in kernel.candidate_facts
                     if param in shapes and axis < len(grid) and dim < len(shapes[param])
                     and grid[axis] <= shapes[param][dim])


def flat_values(signature: KernelSignature, values: list, pointers: list[int]) -> list:
    """Values of the flattened parameters: scalars, data pointers, shapes."""
    flat = []
    for fp in signature.flat_params():
        value = values[fp.param_index]
        if fp.role == "array":
            flat.append(pointers[fp.param_index])
        elif fp.role == "shape":
            flat.append(int(value.shape[fp.dim]))
        else:
            flat.append(value)
    return flat


def launch(kernel, args: tuple, kwargs: dict, *, grid, device="cpu", hidden: dict | None = None):
    """Check the arguments, compile (or reuse) the right variant and run it on ``device``.
    ``hidden``: launcher-filled params already filled (a counting kernel of a second-order tape)."""
    from ..analysis.races.block_stores import check_launch
    from ..enzyme.kernels import LOG_PARAM
    from ..runtime import get_device
    signature = kernel.signature
    values = bind_arguments(signature, args, kwargs)
    check_no_written_overlap(signature, values)
    values = keep_seeds(kernel, values)
    grid = normalize_grid(signature, grid)
    check_block_grid(kernel, grid)
    check_launch(kernel, grid)
    total = 1
    for g in grid:
        total *= g
    dev = get_device(device)
    if total == 0:
        return None
    owned: list = []          # device buffers of dynamic tapes, freed after the launch
    try:
        values = with_hidden_arguments(kernel, values, grid, dev, hidden or {}, owned)
        proven = proven_facts(kernel, values, grid)
        target = {"cpu": "host", "cuda": "nvptx", "hip": "amdgpu"}[dev.kind]
        # On a GPU the launcher gives every numpy array its own device buffer; arrays already on the
        # device may overlap (the same array passed twice, only read), and then nothing is promised to LLVM.
        options = {"noalias": True} if dev.kind != "cpu" and not _overlapping_residents(values) else {}
        if getattr(dev, "warp_size", 32) != 32 and getattr(kernel, "block", None) is not None:
            options["warp_size"] = dev.warp_size        # 'cpu:wave64': AMD's 64-lane warps on the host
        # On a GPU, k logical threads per GPU thread where that gives 128-bit accesses (codegen/gpu/vectorize.py)
        from ..codegen.gpu.vectorize import choose_compiled, elements_per_thread, streamed_params, threads
        k = elements_per_thread(signature, total, streamed_params(kernel)) if dev.kind != "cpu" else 1
        compiled = choose_compiled(kernel, target, k, arch=getattr(dev, "arch", None), proven=proven, **options)
        status = abi_status.new_record()
        if dev.kind == "cpu":
            _launch_host(dev, compiled, signature, values, grid, total, status, arrays_to_zero(kernel, values, grid))
        else:
            # the thread count follows what was compiled (the requested k, or 1 where the target ignores it)
            _launch_device(dev, compiled, signature, values, grid, threads(total, compiled.elements_per_thread), status,
                           arrays_to_zero(kernel, values, grid))
        abi_status.raise_for_status(status, signature, values, source_file=source_file(kernel),
                                    shared_names=shared_names(kernel))
        if kernel.tape is not None and LOG_PARAM in kernel.tape.buffers:
            reduce_contribution_log(kernel, values)
    finally:
        for array in owned:
            dev.free(array.buffer)
    return None


def check_block_grid(kernel, grid: tuple[int, ...]) -> None:
    """A block kernel's grid must be a whole number of blocks on every axis (frontend/blocks.py)."""
    block = getattr(kernel, "block", None)
    if block is None:
        return
    bad = [a for a, (g, e) in enumerate(zip(grid, block)) if g % e]
    if bad:
        raise GridError(f"kernel '{kernel.name}' runs in blocks of {tuple(block)} threads; grid {tuple(grid)} is not "
                        f"a multiple of it on axis {', '.join(map(str, bad))} (pad the arrays, or round the grid up "
                        f"and guard the extra threads in the kernel)")


def keep_seeds(kernel, values: list) -> list:
    """A reverse kernel reads the seed ``d_<out>`` of each Out array and clears it as it goes (the
    adjoint of a store); the caller's seed is kept by giving the kernel a copy, so one seed can
    serve several calls. Seeds already in GPU memory (DeviceArray, DLPack) are used in place and
    end up zero."""
    seeds = kernel.seed_params
    if not seeds:
        return values
    return [v.copy() if p.name in seeds and isinstance(v, np.ndarray) else v
            for p, v in zip(kernel.signature.visible_params, values)]


def source_file(kernel) -> str | None:
    """The file a kernel (or the kernel it was derived from) was written in, if any."""
    while kernel is not None:
        pyfunc = getattr(kernel, "pyfunc", None)
        if pyfunc is not None:
            return pyfunc.__code__.co_filename
        kernel = getattr(kernel, "base", None) or getattr(kernel, "derived", None)
    return None


def shared_names(kernel) -> list[str]:
    """Source names of a block kernel's shared arrays, in order (CUDA ``__shared__`` globals demangled)."""
    from ..analysis.races.messages import shared_array_name
    return [shared_array_name(s.name) for s in getattr(kernel, "shared", None) or ()]


def with_hidden_arguments(kernel, visible: list, grid: tuple[int, ...], device, given: dict,
                          owned: list | None = None) -> list:
    """All values in parameter order: the visible ones, and the hidden per-thread buffers a
    reverse kernel needs (enzyme/tape.py), filled level by level (``tape_levels``). With
    ``owned`` on a GPU the buffers are device arrays, appended there for the caller to free."""
    params = kernel.signature.params
    if all(p.name in kernel.signature.visible_names for p in params):
        return visible
    filled = dict(given)
    for counter, buffers, shadows in tape_levels(kernel):
        if all(b in filled for b, _ in buffers):
            continue
        filled.update(sized_buffers(kernel, counter, buffers, shadows, visible, filled, grid, device, owned))
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
                  grid: tuple[int, ...], device, owned: list | None = None) -> dict:
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
        return _sized_on_device(counter, buffers, shadows, scratch, counter_hidden, grid, device, owned)
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


def _sized_on_device(counter, buffers, shadows, scratch, counter_hidden, grid, device, owned: list) -> dict:
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
        return Resident(device.spec, array.ptr, array.shape, array.dtype, array)
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


def check_no_written_overlap(signature: KernelSignature, values: list) -> None:
    """Refuse two array arguments that share memory when the kernel writes either: threads would
    read elements other threads already overwrote (a stencil ``out[i] = x[i-1] + x[i+1]`` with
    ``out is x`` returns garbage), and compiled code may assume they are distinct."""
    spans = []
    for param, value in zip(signature.visible_params, values):
        if isinstance(value, np.ndarray) and value.nbytes:
            spans.append((value.ctypes.data, value.ctypes.data + value.nbytes, "host", param))
        elif isinstance(value, Resident) and value.nbytes:
            spans.append((value.ptr, value.ptr + value.nbytes, value.device, param))
    spans.sort(key=lambda span: span[:2])
    for k, (start, end, where, param) in enumerate(spans):
        for other_start, _, other_where, other in spans[k + 1:]:
            if other_start >= end:
                break
            if where == other_where and (param.type.writes or other.type.writes):
                written = param.name if param.type.writes else other.name
                raise ArgumentError(
                    f"kernel '{signature.name}': arrays '{param.name}' and '{other.name}' share memory and "
                    f"'{written}' is written; threads could read elements other threads already "
                    f"overwrote. Pass a copy (e.g. {other.name}=x.copy()) or separate arrays")


def _overlapping_residents(values: list) -> bool:
    """Whether two device-resident arguments share memory."""
    spans = sorted((v.ptr, v.ptr + v.nbytes) for v in values if isinstance(v, Resident) and v.nbytes)
    return any(later[0] < earlier[1] for earlier, later in zip(spans, spans[1:]))


def _is_array(value) -> bool:
    return isinstance(value, (np.ndarray, Resident))


def _loaded_function(dev, compiled):
    """The compiled entry loaded on ``dev`` (loaded once per device, not per launch)."""
    loaded = compiled.extra.setdefault("loaded", {})
    if dev.spec not in loaded:
        loaded[dev.spec] = dev.load_module(compiled.artifact).function(compiled.entry_name)
    return loaded[dev.spec]


def arrays_to_zero(kernel, values: list, grid: tuple[int, ...]) -> set[int]:
    """Out arrays start at zero on every device and in JAX (kernels may accumulate into them),
    except those this grid makes the kernel write in full (frontend/coverage.py)."""
    from ..frontend.coverage import written_in_full
    return {k for k, (p, v) in enumerate(zip(kernel.signature.params, values))
            if p.is_array and p.type.intent == "out"
            and not written_in_full(kernel.full_writes, k, tuple(v.shape), grid)}


def _launch_host(dev, compiled, signature, values, grid, total, status, zeroed):
    from ..codegen.abi import pack_slots
    for param, value in zip(signature.params, values):
        if isinstance(value, Resident):
            raise ArgumentError(f"kernel '{signature.name}', parameter '{param.name}': the array lives on "
                                f"{value.device}; launch with device='{value.device}' or pass a host array")
    for k in zeroed:
        values[k].fill(0)
    pointers = [v.ctypes.data if isinstance(v, np.ndarray) else 0 for v in values]
    slots = pack_slots(flat_values(signature, values, pointers), compiled.flat_types, grid, status.ctypes.data)
    dev.launch(_loaded_function(dev, compiled), total, slots, status=status)


def _launch_device(dev, compiled, signature, values, grid, threads, status, zeroed):
    """Copy In/InOut arrays to the device, launch ``threads`` GPU threads (the logical grid
    divided by the entry's elements per thread), copy Out/InOut arrays and the status record back."""
    from ..codegen.abi import pack_slots
    from ..codegen.gpu.rows import row_blocks
    buffers, pointers = [], []
    try:
        for k, (param, value) in enumerate(zip(signature.params, values)):
            if isinstance(value, Resident):
                if value.device != dev.spec:
                    raise ArgumentError(f"kernel '{signature.name}', parameter '{param.name}': the array lives "
                                        f"on {value.device}, the launch runs on {dev.spec}")
                if k in zeroed:
                    from ..runtime.device import Buffer
                    dev.memset(Buffer(value.ptr, value.nbytes, dev), 0)
                pointers.append(value.ptr)       # already on the device: used in place
                continue
            if not isinstance(value, np.ndarray):
                pointers.append(0)
                continue
            buf = dev.allocate(max(value.nbytes, 1))
            buffers.append((param, value, buf))
            if param.type.reads:
                dev.copy_to_device(buf, value)
            else:
                dev.memset(buf, 0)    # always: after a bounds error the array comes back whole
            pointers.append(buf.ptr)
        status_buf = dev.allocate(status.nbytes)
        buffers.append((None, status, status_buf))
        dev.copy_to_device(status_buf, status)
        slots = pack_slots(flat_values(signature, values, pointers), compiled.flat_types, grid, status_buf.ptr)
        function = _loaded_function(dev, compiled)
        # (a device's functions may not size blocks themselves: test devices run host code)
        block = compiled.extra.get("block_threads") or (function.auto_block_size()
                                                        if hasattr(function, "auto_block_size") else None)
        if compiled.grid_stride and hasattr(function, "resident_threads"):
            # the entry loops over the grid: one resident wave (codegen/gpu/grid_stride.py)
            from ..codegen.gpu.vectorize import launch_threads
            threads = launch_threads(compiled, int(np.prod(grid, dtype=np.int64)), function.resident_threads(block))
        rows = row_blocks(grid, block) if compiled.row_launch and block else None
        if rows is not None:        # rank 2/3: the block indices are the tids (codegen/gpu/rows.py)
            dev.launch(function, threads, slots, block_size=block, blocks=rows)
        else:
            dev.launch(function, threads, slots, block_size=block)
        dev.synchronize()
        for param, value, buf in buffers:
            if param is None or param.type.writes:
                dev.copy_to_host(buf, value)
    finally:
        for _, _, buf in buffers:
            dev.free(buf)
