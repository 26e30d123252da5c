"""Running a launch plan (launch_plan.py): per launch, only what the argument values decide.

Per launch: the arrays' data addresses, the refusal of overlapping arrays, copies of numpy seeds,
the slots (packed in one ``struct`` call into a fresh buffer that also holds the host status record),
zeroing Out arrays, the launch, and the status check. On the host a grid that fits one chunk
(runtime/host.py ``chunk_size``) runs on the calling thread with one call of the entry, no pool;
larger ones go through ``HostDevice.launch``. On a GPU, numpy arrays are staged in device buffers
by intent (numpy seeds copied in and not back: the caller's seed is kept), arrays already there are
used in place, and devices with ``launch_checked`` (CUDA, HIP) clear the status record, launch and
read the record back in three driver calls with the geometry the plan prepared. A launch whose arrays
are all on the device and ordered with its default stream (``Resident.ordered``) does not wait, on a
device with a status ring (runtime/status_ring.py: CUDA): it takes the ring's next record, queues the
kernel (``GpuDevice.launch_prepared``) and returns; its error is raised later, by the next launch,
``synchronize()`` or copy to the host (``ADOFFLOAD_SYNC_LAUNCH=1``: every launch waits).
"""
from __future__ import annotations

import ctypes
import operator
import struct
import threading

import numpy as np

from ..errors import Error
from ..language import status as abi_status
from ..language.signature import KernelSignature
from ..runtime.host import DATA_OFFSET, read_pointer, data_address
from .arguments import Resident
from .hidden_buffers import reduce_contribution_log, with_hidden_arguments
from .environment import environment_key, environment_value
from .overlap import overlap_error

# How each flattened parameter type sits in its 8-byte slot (codegen/slots.py pack_slots).
SLOT_FORMATS = {"float": "f4x", "double": "d", "i1": "?7x", "i8": "b7x", "i32": "i4x", "i64": "q", "ptr": "Q"}
STATUS_WORDS = abi_status.WORDS
_memset = ctypes.memset
_addressof = ctypes.addressof
_StatusRecord = ctypes.c_int64 * STATUS_WORDS
_get_ident = threading.get_ident
SYNC_ENV = "ADOFFLOAD_SYNC_LAUNCH"     # "1": GPU launches on device arrays wait and report their own errors
_SYNC_KEY = environment_key(SYNC_ENV)
_SYNC_ON = ("1", b"1")


def slot_struct(flat_types: list[str], grid_rank: int) -> struct.Struct:
    """The packing of one launch's slots: the flattened params, the grid, the status pointer."""
    return struct.Struct("<" + "".join(SLOT_FORMATS[t] for t in flat_types) + "q" * grid_rank + "Q")


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


def loaded_function(dev, compiled):
    """The compiled entry loaded on ``dev`` (loaded once per device, not per launch). CUDA: ptxas's
    cubin (else the driver JIT), -O1's first where -O3's is not cached; the function switches to the
    -O3 module when a background thread has loaded it (codegen/gpu/tiered.py, GpuFunction.swap)."""
    loaded = compiled.extra.setdefault("loaded", {})
    if dev.spec not in loaded:
        if compiled.target == "nvptx" and getattr(dev, "kind", None) == "cuda":
            module, upgrade = compiled.load_cuda_tiered(dev.arch, dev.load_module)
            function = loaded[dev.spec] = module.function(compiled.entry_name)
            if upgrade is not None:
                upgrade.start(_swapper(dev, compiled, function))
            compiled.extra.setdefault("upgrades", {})[dev.spec] = upgrade
        else:
            loaded[dev.spec] = dev.load_module(compiled.artifact).function(compiled.entry_name)
    return loaded[dev.spec]


def _swapper(dev, compiled, function):
    """What the -O3 upgrade thread calls with the cubin: load it (``load_module`` makes the device's
    context current on that thread) and swap the function over."""
    def replace(image):
        function.swap(dev.load_module(image).function(compiled.entry_name), compiled.extra.get("block_threads"))
    return replace


def source_file(kernel) -> str | None:
    """The file a kernel (or the kernel it was derived from) was written in, if any."""
    while kernel is not None:
        named = getattr(kernel, "source_name", None)     # a foreign source: "<cuda source>"
        if named:
            return named
        pyfunc = getattr(kernel, "pyfunc", None)
        if pyfunc is not None:
            return pyfunc.__code__.co_filename
        kernel = getattr(kernel, "base", None) or getattr(kernel, "derived", None)
    return None


def shared_names(kernel) -> list[str]:
    """Source names of a block kernel's shared arrays, in order (CUDA ``__shared__`` globals demangled)."""
    from ..analysis.races.messages import shared_array_name
    return [shared_array_name(s.name) for s in getattr(kernel, "shared", None) or ()]


class SlotValueError(Exception):
    """A scalar the slot cannot hold as given: the launcher's full path converts or refuses it."""


class Variant:
    """A compiled variant of a plan, loaded on the plan's device: its slot packing and launch geometry."""

    def __init__(self, plan, compiled):
        from ..codegen.gpu.rows import row_blocks
        from ..codegen.gpu.vectorize import launch_threads, threads
        device, signature = plan.device, plan.signature
        self.compiled, self.signature, self.grid = compiled, signature, plan.grid
        self.function = loaded_function(device, compiled)
        self.struct = slot_struct(compiled.flat_types, signature.grid_rank)
        self.words = len(compiled.flat_types) + signature.grid_rank + 1
        self.buffer_type = ctypes.c_int64 * self.words
        self.static = not plan.hidden
        if self.static:
            # slot k is item indices[k] of (one item per param: its scalar or its data address) + constants
            params = len(signature.params)
            self.constants, indices = [0], []      # constants[0]: the status pointer
            for flat in signature.flat_params():
                if flat.role == "shape":
                    indices.append(params + len(self.constants))
                    self.constants.append(plan.shape_of(flat.param_index)[flat.dim])
                else:
                    indices.append(flat.param_index)
            for g in plan.grid:
                indices.append(params + len(self.constants))
                self.constants.append(g)
            self.params = params
            self.slots_of = operator.itemgetter(*indices, params)
            # a frame's layout (GPU launches in place): one slot per param (its scalar or data address) and
            # the status pointer, packed per launch in one call from the sources as they are; then the
            # constants (shapes, grid), written once per frame. kernelParams point at each in flat order.
            self.frame_struct = struct.Struct("<" + "".join(
                SLOT_FORMATS[compiled.flat_types[k]] for k, flat in enumerate(signature.flat_params())
                if flat.role != "shape") + "Q")
            self.frame_order = [*indices, params]      # flat slot -> its place (the items of ``slots``)
        self.entry = getattr(self.function, "entry", None)
        self.inline = plan.on_host and device.chunk_size(plan.total) >= plan.total
        self.prepared = None
        self.frames: dict = {}
        if not plan.on_host:
            self.block = compiled.extra.get("block_threads") or (self.function.auto_block_size()
                                                                 if hasattr(self.function, "auto_block_size") else None)
            self.threads = threads(plan.total, compiled.elements_per_thread)
            if compiled.grid_stride and hasattr(self.function, "resident_threads"):
                # the entry loops over the grid: one resident wave (codegen/grid_stride.py)
                self.threads = launch_threads(compiled, plan.total, self.function.resident_threads(self.block))
            self.rows = row_blocks(plan.grid, self.block) if compiled.row_launch and self.block else None
            if hasattr(device, "launch_checked"):
                self.prepared = device.prepare_launch(self.function, self.threads, self.block, self.rows)

    def frame(self) -> tuple:
        """``(slot buffer, the address of the kernelParams array pointing into it, that array)`` of the
        calling thread, reused launch after launch (the driver copies the values during the launch call):
        the layout of ``frame_struct`` with the constants in place (a static variant's). The caller holds
        the tuple until its launch is queued (another thread may drop the frames meanwhile)."""
        hit = self.frames.get(_get_ident())
        if hit is None:
            if len(self.frames) > 64:
                self.frames.clear()
            buffer = self.buffer_type()
            address = _addressof(buffer)
            for k, constant in enumerate(self.constants[1:]):      # after the params' slots and the status
                buffer[self.params + 1 + k] = constant
            params = (ctypes.c_void_p * self.words)(*(address + 8 * slot for slot in self.frame_order))
            hit = self.frames[_get_ident()] = (buffer, _addressof(params), params)
        return hit

    def pack_frame(self, buffer, sources: list, status_ptr: int) -> None:
        """The per-launch slots of a frame (``frame``): each param's scalar or data address, the status."""
        try:
            self.frame_struct.pack_into(buffer, 0, *sources, status_ptr)
        except (struct.error, OverflowError, TypeError) as exc:
            raise SlotValueError(str(exc)) from None

    def slots(self, sources: list, values: list, status_ptr: int) -> tuple:
        """The slot values in order. ``sources``: per param, its scalar or the address the kernel gets
        for its data; ``values``: the params' values (their shapes, for a plan with hidden buffers)."""
        if self.static:
            items = sources + self.constants
            items[self.params] = status_ptr
            return self.slots_of(items)
        return (*flat_values(self.signature, values, sources), *self.grid, status_ptr)

    def packed(self, sources: list, values: list, status_ptr: int) -> bytes:
        """The slots as bytes (host entries only read their slots: the entry gets these bytes' buffer)."""
        try:
            return self.struct.pack(*self.slots(sources, values, status_ptr))
        except (struct.error, OverflowError, TypeError) as exc:
            raise SlotValueError(str(exc)) from None

    def pack_into(self, buffer, sources: list, values: list, status_ptr: int) -> None:
        """The slots packed into ``buffer`` (a ctypes array: GPU launches pass each slot's address)."""
        try:
            self.struct.pack_into(buffer, 0, *self.slots(sources, values, status_ptr))
        except (struct.error, OverflowError, TypeError) as exc:
            raise SlotValueError(str(exc)) from None


def check_overlap(plan, sources: list) -> None:
    """Refuse a launch whose written arrays overlap another array of it (the plan's pairs)."""
    addresses = [sources[n] for n in plan.arrays]
    if addresses == plan.overlap_free:        # the same addresses as a launch that passed: the same answer
        return
    nbytes = plan.nbytes
    for a, b in plan.overlap_pairs:
        if sources[a] < sources[b] + nbytes[b] and sources[b] < sources[a] + nbytes[a]:
            raise overlap_error(plan.signature.name, plan.visible[a], plan.visible[b], plan.copied)
    plan.overlap_free = addresses


def _no_resident_overlap(plan, sources: list) -> bool:
    """Whether no two GPU arrays passed for reading share memory: only then are they noalias to LLVM."""
    nbytes = plan.nbytes
    return not any(sources[a] < sources[b] + nbytes[b] and sources[b] < sources[a] + nbytes[a]
                   for a, b in plan.resident_pairs)


def run_plan(plan, values: list, hidden: dict | None, launch) -> None:
    """Launch ``plan`` with ``values`` (visible, in parameter order). Raises SlotValueError (before
    anything is written) when a scalar must take the full path."""
    sources = list(values)               # arrays become their data addresses
    for n in plan.arrays:
        value = values[n]
        kind = type(value)
        if kind is np.ndarray and DATA_OFFSET is not None:       # runtime/host.py data_address, inlined
            sources[n] = read_pointer(id(value) + DATA_OFFSET).value or 0
        else:
            sources[n] = value.ptr if kind is Resident else data_address(value)
    if plan.overlap_pairs:
        check_overlap(plan, sources)
    if plan.total == 0:
        return
    if not plan.on_host:
        return _run_device(plan, values, sources, hidden, launch)
    for n in plan.seeds:                 # a reverse kernel clears its seed: it gets a copy
        values[n] = values[n].copy()
        sources[n] = data_address(values[n])
    # no visible array the launch writes shares memory with another (checked above) and hidden buffers
    # are the launcher's own: the body's pointers are noalias (launcher-filled tapes: not promised)
    variant = plan.variant(not plan.hidden)
    if plan.hidden:
        full = with_hidden_arguments(plan.kernel, values, plan.grid, plan.device, hidden or {}, launch)
        zeroed = [(n, full[n].nbytes) for n in sorted(plan.zeroed_of(full))]
        sources = [data_address(v) if isinstance(v, np.ndarray) else v for v in full]
    else:
        full, zeroed = values, plan.zeroed_bytes
    status = _StatusRecord()
    slots = variant.packed(sources, full, _addressof(status))
    for n, size in zeroed:
        _memset(sources[n], 0, size)
    if variant.inline:
        variant.entry(slots, 0, plan.total)
    else:
        plan.device.launch(variant.function, plan.total, np.frombuffer(slots, np.uint64),
                           status=np.frombuffer(status, np.int64))
    if status[0]:
        _raise_status(plan, list(status), full)
    if plan.needs_log:
        reduce_contribution_log(plan.kernel, full)


def _run_device(plan, values: list, sources: list, hidden: dict | None, launch) -> None:
    """Stage numpy arrays by intent, launch, copy written arrays and the status record back; a launch
    on arrays all in place and ordered with the default stream does not wait (``_launch_in_place``)."""
    device, kernel = plan.device, plan.kernel
    variant = plan.variant(_no_resident_overlap(plan, sources))
    ring = device.status_ring() if variant.prepared is not None else None
    if ring is not None:
        ring.check()                     # an earlier launch's error comes first
        if plan.in_place and environment_value(_SYNC_KEY) not in _SYNC_ON:
            for n in plan.arrays:
                if not values[n].ordered:
                    break
            else:
                return _launch_in_place(plan, variant, sources, ring, _addresses_checked(plan, sources)[2])
    from ..runtime.device import Buffer
    owned: list = []                     # device buffers of dynamic tapes, freed after the launch
    staged: list = []                    # (array, buffer, copy back)
    status_ptr = status_buf = None
    record = np.zeros(STATUS_WORDS, np.int64)
    try:
        if plan.hidden:
            full = with_hidden_arguments(kernel, values, plan.grid, device, hidden or {}, launch, owned)
            zeroed = plan.zeroed_of(full)
            sources = [v.ptr if isinstance(v, Resident) else v for v in full]
        else:
            full, zeroed = values, plan.zeroed
        params = plan.signature.params
        for k, value in enumerate(full):
            if isinstance(value, np.ndarray):    # its own device buffer, filled by intent
                param = params[k]
                buf = device.allocate(max(value.nbytes, 1))
                staged.append((value, buf, param.type.writes and param.name not in plan.copied))
                if param.type.reads:
                    device.copy_to_device(buf, value)
                else:
                    device.memset(buf, 0)    # always: after a bounds error the array comes back whole
                sources[k] = buf.ptr
        buffer = variant.buffer_type()
        status_ptr = device.scratch(8 * STATUS_WORDS) if variant.prepared is not None else None
        if status_ptr is None:
            status_buf = device.allocate(record.nbytes)
        variant.pack_into(buffer, sources, full, status_ptr if status_ptr is not None else status_buf.ptr)
        for k in zeroed:                     # arrays already on the device, zeroed once the slots are packed
            value = full[k]
            if isinstance(value, Resident):
                device.memset(Buffer(value.ptr, value.nbytes, device), 0)
        if status_ptr is not None:
            device.launch_checked(variant.prepared, _addressof(buffer), variant.words, status_ptr, STATUS_WORDS,
                                  record.ctypes.data)
        else:
            device.copy_to_device(status_buf, record)
            slots = np.frombuffer(buffer, np.uint64, variant.words)
            if variant.rows is not None:        # rank 2/3: the block indices are the tids (codegen/gpu/rows.py)
                device.launch(variant.function, variant.threads, slots, block_size=variant.block, blocks=variant.rows)
            else:
                device.launch(variant.function, variant.threads, slots, block_size=variant.block)
            device.synchronize()
            device.copy_to_host(status_buf, record)
        for value, buf, copy_back in staged:
            if copy_back:
                device.copy_to_host(buf, value)
    finally:
        for _, buf, _ in staged:
            device.free(buf)
        if status_buf is not None:
            device.free(status_buf)
        if status_ptr is not None:
            device.release_scratch(status_ptr)
        for array in owned:
            device.free(array.buffer)
    if record[0]:
        _raise_status(plan, record, full)
    if plan.needs_log:
        reduce_contribution_log(kernel, full)


def run_in_place(plan, sources: list) -> bool:
    """Launch an in-place plan (every array on the GPU, ordered with the default stream) with the slot
    sources its quick check read (signature_match.in_place_matcher), without waiting for the kernel;
    False where ADOFFLOAD_SYNC_LAUNCH asks for a launch that waits (the caller takes run_plan's path)."""
    if environment_value(_SYNC_KEY) in _SYNC_ON:
        return False
    seen = _addresses_checked(plan, sources)
    if plan.total == 0:
        return True
    ring = plan.device.status_ring()
    ring.check()                         # an earlier launch's error comes first
    _launch_in_place(plan, plan.variant(seen[1]), sources, ring, seen[2])
    return True


def _addresses_checked(plan, sources: list) -> tuple:
    """``(addresses, noalias, zeroed ranges)`` of a launch on GPU arrays, after refusing overlaps: which
    variant runs (``noalias``: no two GPU arrays share memory) and the ``(address, bytes)`` ranges of
    its Out arrays to zero (adjacent arrays merged: one memset). All depend only on the arrays'
    addresses: the last addresses checked and their answers are kept on the plan, so a launch on the
    same arrays as the one before compares one tuple."""
    addresses_of = plan.__dict__.get("addresses_of")
    if addresses_of is None:
        addresses_of = plan.addresses_of = (operator.itemgetter(*plan.arrays) if len(plan.arrays) > 1 else
                                            (lambda s, k=plan.arrays[0]: (s[k],)) if plan.arrays else lambda s: ())
    addresses = addresses_of(sources)
    seen = plan.__dict__.get("seen_addresses")
    if seen is not None and seen[0] == addresses:
        return seen
    if plan.overlap_pairs:
        check_overlap(plan, sources)               # raises for a written array overlapping another
    seen = plan.seen_addresses = (addresses, _no_resident_overlap(plan, sources),   # one tuple: read whole
                                  zero_ranges([(sources[n], size) for n, size in plan.zeroed_bytes]))
    return seen


def zero_ranges(ranges: list[tuple[int, int]]) -> tuple[tuple[int, int], ...]:
    """Non-empty ``(address, bytes)`` ranges by address, each run of adjacent ones as one range (the
    arrays zeroed never overlap: the launch refused that first)."""
    merged: list[list[int]] = []
    for ptr, nbytes in sorted(r for r in ranges if r[1]):
        if merged and merged[-1][0] + merged[-1][1] == ptr:
            merged[-1][1] += nbytes
        else:
            merged.append([ptr, nbytes])
    return tuple((ptr, nbytes) for ptr, nbytes in merged)


def _launch_in_place(plan, variant, sources: list, ring, zero: tuple) -> None:
    """Queue the zeroing of ``zero`` and the launch with a record of the device's status ring
    (runtime/status_ring.py) and return: its error, if any, is raised at the next launch on the
    device, its next synchronous copy to the host or ``synchronize()``, naming this launch's kernel."""
    buffer, params, _kept = variant.frame()
    report = plan.__dict__.get("report") or _deferred_report(plan)
    lock = ring.lock
    lock.acquire()                       # not ``with``: acquire/release cost half as much
    try:
        variant.pack_frame(buffer, sources, ring.take(report))     # a SlotValueError zeroes and launches nothing
        plan.device.launch_prepared(variant.prepared, params, variant.words, zero)
    finally:
        lock.release()


class _Shaped:
    __slots__ = ("shape",)

    def __init__(self, shape):
        self.shape = shape


def _deferred_report(plan):
    """``report(record, later)`` for the status ring: raises the launch's error, saying it was reported late."""
    shaped = [_Shaped(plan.shapes[k]) if k in plan.shapes else None for k in range(len(plan.signature.params))]

    def report(record, later: int) -> None:
        try:
            _raise_status(plan, record, shaped)
        except Error as exc:
            more = f"; {later} later launch{'es' if later > 1 else ''} on the device failed too" if later else ""
            raise type(exc)(f"{exc} [reported after the launch: a launch on arrays already on {plan.device.spec} "
                            f"returns before its kernel ends, and its error surfaces at the next launch there, its "
                            f"synchronize() or a copy to the host; {SYNC_ENV}=1 makes every launch wait and report "
                            f"its own]{more}") from None
    plan.report = report
    return report


def status_reporter(plan):
    """``report(address)``: raises the error of the status record at ``address`` (a native entry's,
    native_entry.py, read while the entry waits), naming the arrays' shapes as the Python path does."""
    shaped = [_Shaped(plan.shapes[k]) if k in plan.shapes else None for k in range(len(plan.signature.params))]

    def report(address: int) -> None:
        _raise_status(plan, list(_StatusRecord.from_address(address)), shaped)
    return report


def _raise_status(plan, record, values: list) -> None:
    abi_status.raise_for_status(record, plan.signature, values, source_file=source_file(plan.kernel),
                                shared_names=shared_names(plan.kernel))
