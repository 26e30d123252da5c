"""Running a launch plan (launch_plan.py): per launch, only what the argument values decide.

Per launch: the arrays' data addresses, the refusal of overlapping arrays, copies of numpy seeds,
the slots (packed in one ``struct`` call into a fresh buffer that also holds the host status record),
zeroing Out arrays, the launch, and the status check. On the host a grid that fits one chunk
(runtime/host.py ``chunk_size``) runs on the calling thread with one call of the entry, no pool;
larger ones go through ``HostDevice.launch``. On a GPU, numpy arrays are staged in device buffers
by intent (numpy seeds copied in and not back: the caller's seed is kept), arrays already there are
used in place, and devices with ``launch_checked`` (CUDA, HIP) clear the status record, launch and
read the record back in three driver calls with the geometry the plan prepared.
"""
from __future__ import annotations

import ctypes
import struct

import numpy as np

from ..language import status as abi_status
from ..language.signature import KernelSignature
from ..runtime.host import data_address
from .arguments import Resident
from .hidden_buffers import reduce_contribution_log, with_hidden_arguments
from .overlap import overlap_error

# How each flattened parameter type sits in its 8-byte slot (codegen/abi.py pack_slots).
SLOT_FORMATS = {"float": "f4x", "double": "d", "i1": "?7x", "i8": "b7x", "i32": "i4x", "i64": "q", "ptr": "Q"}
STATUS_WORDS = abi_status.WORDS
_memset = ctypes.memset
_addressof = ctypes.addressof


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
    """The compiled entry loaded on ``dev`` (loaded once per device, not per launch)."""
    loaded = compiled.extra.setdefault("loaded", {})
    if dev.spec not in loaded:
        loaded[dev.spec] = dev.load_module(compiled.artifact).function(compiled.entry_name)
    return loaded[dev.spec]


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


class SlotValueError(Exception):
    """A scalar the slot cannot hold as given: the launcher's full path converts or refuses it."""


class Variant:
    """A compiled variant of a plan, loaded on the plan's device: its slot packing and launch geometry."""

    def __init__(self, plan, compiled):
        from ..codegen.gpu.rows import row_blocks
        from ..codegen.gpu.vectorize import launch_threads, threads
        device, signature = plan.device, plan.signature
        self.compiled, self.signature = compiled, signature
        self.function = loaded_function(device, compiled)
        self.struct = slot_struct(compiled.flat_types, signature.grid_rank)
        self.words = len(compiled.flat_types) + signature.grid_rank + 1
        self.buffer_type = ctypes.c_int64 * (self.words + STATUS_WORDS)
        self.static = not plan.hidden
        template, self.pointer_slots, self.scalar_slots = [], [], []
        for slot, flat in enumerate(signature.flat_params()):
            if flat.role == "array":
                self.pointer_slots.append((slot, flat.param_index))
                template.append(0)
            elif flat.role == "shape":
                template.append(plan.shape_of(flat.param_index)[flat.dim] if self.static else 0)
            else:
                self.scalar_slots.append((slot, flat.param_index))
                template.append(0)
        self.template = template + list(plan.grid) + [0]
        self.inline = plan.on_host and device.chunk_size(plan.total) >= plan.total
        self.prepared = None
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

    def pack(self, buffer, values: list, pointers: list, status_ptr: int) -> None:
        """Pack the slots into ``buffer``: ``values`` and ``pointers`` by param index."""
        slots = self.template.copy()
        if self.static:
            for slot, k in self.pointer_slots:
                slots[slot] = pointers[k]
            for slot, k in self.scalar_slots:
                slots[slot] = values[k]
        else:
            slots[:len(self.compiled.flat_types)] = flat_values(self.signature, values, pointers)
        slots[-1] = status_ptr
        try:
            self.struct.pack_into(buffer, 0, *slots)
        except (struct.error, OverflowError, TypeError) as exc:
            raise SlotValueError(str(exc)) from None


def run_plan(plan, values: list, hidden: dict | None, launch) -> None:
    """Launch ``plan`` with ``values`` (visible, in parameter order). Raises SlotValueError (before
    anything is written) when a scalar must take the full path."""
    arrays, nbytes = plan.arrays, plan.nbytes
    addresses = [0] * len(values)
    for n in arrays:
        value = values[n]
        addresses[n] = value.ptr if type(value) is Resident else data_address(value)
    for a, b in plan.overlap_pairs:
        if addresses[a] < addresses[b] + nbytes[b] and addresses[b] < addresses[a] + nbytes[a]:
            raise overlap_error(plan.signature.name, plan.visible[a], plan.visible[b], plan.copied)
    if plan.total == 0:
        return
    if plan.on_host:
        _run_host(plan, values, addresses, hidden, launch)
    else:
        _run_device(plan, values, addresses, hidden, launch)


def _run_host(plan, values: list, addresses: list, hidden: dict | None, launch) -> None:
    for n in plan.seeds:                # a reverse kernel clears its seed: it gets a copy
        values[n] = values[n].copy()
        addresses[n] = data_address(values[n])
    variant = plan.variant(False)
    if plan.hidden:
        full = with_hidden_arguments(plan.kernel, values, plan.grid, plan.device, hidden or {}, launch)
        zeroed = sorted(plan.zeroed_of(full))
        addresses = [data_address(v) if isinstance(v, np.ndarray) else 0 for v in full]
    else:
        full, zeroed = values, plan.zeroed
    buffer = variant.buffer_type()
    base = _addressof(buffer)
    status_at = base + 8 * variant.words
    variant.pack(buffer, full, addresses, status_at)
    for n in zeroed:
        _memset(addresses[n], 0, full[n].nbytes)
    total = plan.total
    if variant.inline:
        variant.function.entry(base, 0, total)
    else:
        plan.device.launch(variant.function, total, np.frombuffer(buffer, np.uint64, variant.words),
                           status=np.frombuffer(buffer, np.int64, STATUS_WORDS, 8 * variant.words))
    if buffer[variant.words]:
        _raise_status(plan, buffer[variant.words:variant.words + STATUS_WORDS], full)
    if plan.needs_log:
        reduce_contribution_log(plan.kernel, full)


def _run_device(plan, values: list, addresses: list, hidden: dict | None, launch) -> None:
    """Stage numpy arrays by intent, launch, copy written arrays and the status record back."""
    from ..runtime.device import Buffer
    device, kernel = plan.device, plan.kernel
    noalias = True
    for a, b in plan.resident_pairs:    # GPU arrays passed twice (only read): nothing promised to LLVM
        if addresses[a] < addresses[b] + plan.nbytes[b] and addresses[b] < addresses[a] + plan.nbytes[a]:
            noalias = False
            break
    variant = plan.variant(noalias)
    owned: list = []                    # device buffers of dynamic tapes, freed after the launch
    staged: list = []                   # (param, array, buffer, copy back)
    status_ptr = status_buf = None
    record = np.zeros(STATUS_WORDS, np.int64)
    try:
        if plan.hidden:
            full = with_hidden_arguments(kernel, values, plan.grid, device, hidden or {}, launch, owned)
            zeroed = plan.zeroed_of(full)
        else:
            full, zeroed = values, plan.zeroed
        params = plan.signature.params
        pointers = [0] * len(full)
        for k, value in enumerate(full):
            if isinstance(value, Resident):
                if k in zeroed:
                    device.memset(Buffer(value.ptr, value.nbytes, device), 0)
                pointers[k] = value.ptr          # already on the device: used in place
            elif isinstance(value, np.ndarray):
                param = params[k]
                buf = device.allocate(max(value.nbytes, 1))
                seed = param.name in plan.copied
                staged.append((param, value, buf, param.type.writes and not seed))
                if param.type.reads:
                    device.copy_to_device(buf, value)
                else:
                    device.memset(buf, 0)    # always: after a bounds error the array comes back whole
                pointers[k] = buf.ptr
        buffer = variant.buffer_type()
        if variant.prepared is not None:
            status_ptr = device.scratch(8 * STATUS_WORDS)
            variant.pack(buffer, full, pointers, status_ptr)
            device.launch_checked(variant.prepared, _addressof(buffer), variant.words, status_ptr, STATUS_WORDS,
                                  record.ctypes.data)
        else:
            status_buf = device.allocate(record.nbytes)
            device.copy_to_device(status_buf, record)
            variant.pack(buffer, full, pointers, status_buf.ptr)
            slots = np.frombuffer(buffer, np.uint64, variant.words)
            if variant.rows is not None:       # rank 2/3: the block indices are the tids (codegen/rows.py)
                device.launch(variant.function, variant.threads, slots, block_size=variant.block, blocks=variant.rows)
            else:
                device.launch(variant.function, variant.threads, slots, block_size=variant.block)
            device.synchronize()
            device.copy_to_host(status_buf, record)
        for param, value, buf, copy_back in staged:
            if copy_back:
                device.copy_to_host(buf, value)
    finally:
        for _, _, buf, _ in staged:
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


def _raise_status(plan, record, values: list) -> None:
    abi_status.raise_for_status(record, plan.signature, values, source_file=source_file(plan.kernel),
                                shared_names=shared_names(plan.kernel))
