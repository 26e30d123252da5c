"""What the CUDA and HIP devices share: memory, modules, launch, streams, events, faults.

The two drivers have the same shape (``cuMemAlloc``/``hipMalloc``, ``cuLaunchKernel``/
``hipModuleLaunchKernel`` with identical arguments, ...), so a subclass only supplies
``DRIVER_NAMES`` (role -> driver function name) and a few hooks: ``activate``,
``_create_stream``, ``_wrap_stream``, ``_create_event``, ``_occupancy_block``,
``_load_image`` and ``_reset_context``. Every driver call goes through ``call``, i.e. through
``check.invoke``, and latches sticky kernel faults (see check.py).
"""
from __future__ import annotations

import abc
import ctypes
import threading
import weakref
from dataclasses import dataclass

import numpy as np

from ..errors import ArgumentError, DeviceError, Error, GridError, KernelFaultError
from .check import check, invoke
from .device import (Buffer, Device, Event, LoadedModule, Stream, check_copy, check_slots,
                     check_total_threads)
from .memory import CachingAllocator
from .staging import CHUNK_BYTES, MIN_BYTES, Staging
from .staging import COUNT as STAGING_COUNT

DEFAULT_BLOCK = 256
_RING_LOCK = threading.Lock()
_STAGING_LOCK = threading.Lock()
MAX_GRID_X = 2**31 - 1
MAX_GRID_Y = 65535

ROLES = ("alloc", "free", "htod", "dtoh", "htod_async", "dtoh_async", "memset", "memset_async",
         "mem_info", "module_unload", "get_function", "launch", "stream_destroy", "stream_sync",
         "event_destroy", "event_record", "event_sync", "event_elapsed", "synchronize")


def launch_grid(total_threads: int, block: int, max_x: int = MAX_GRID_X, max_y: int = MAX_GRID_Y):
    """``(grid_x, grid_y)`` blocks covering ``total_threads`` threads of ``block`` each.

    A 1-D grid while the block count fits in x (2^31-1 blocks); beyond that a 2-D grid.
    Contract for GPU entries: the linear thread id is
    ``(ctaid.y * nctaid.x + ctaid.x) * ntid.x + tid.x``, and threads whose id is past the
    logical grid return (rounding up always launches a few extra threads).
    ``total_threads`` counts GPU threads, not logical ones: an entry compiled with
    ``elements_per_thread=k`` (codegen/gpu/vectorize.py) covers the grid with ``ceil(total / k)``.
    """
    blocks = -(-total_threads // block)
    if blocks <= max_x:
        return blocks, 1
    grid_y = -(-blocks // max_x)
    if grid_y > max_y:
        raise GridError(f"{total_threads} threads need {blocks} blocks of {block}: more than the "
                        f"{max_x} x {max_y} a grid can hold")
    return -(-blocks // grid_y), grid_y


def _check_blocks(blocks, total_threads: int, block: int) -> tuple[int, int, int]:
    """A caller's grid of blocks as three ints, or a GridError saying what does not fit."""
    grid = tuple(int(b) for b in blocks)
    if len(grid) != 3 or min(grid) < 1 or grid[0] > MAX_GRID_X or max(grid[1:]) > MAX_GRID_Y:
        raise GridError(f"a grid of blocks must be three counts of at least 1, x up to {MAX_GRID_X} and "
                        f"y, z up to {MAX_GRID_Y}; got {blocks}")
    if grid[0] * grid[1] * grid[2] * block < total_threads:
        raise GridError(f"a grid of {grid} blocks of {block} threads holds fewer than the {total_threads} "
                        "threads of the launch")
    return grid


@dataclass(frozen=True)
class PreparedLaunch:
    """What a launch of one function at one size needs besides its slots (``GpuDevice.prepare_launch``)."""
    function: "GpuFunction"
    grid: tuple[int, int, int]
    block: int
    stream: object
    detail: str


class GpuStream(Stream):
    def __init__(self, device: "GpuDevice", handle=None):
        self.device = device
        self._owned = handle is None
        self._stream = device._create_stream() if self._owned else device._wrap_stream(handle)
        if self._owned:
            weakref.finalize(self, device.quietly, "stream_destroy", self._stream)

    @property
    def handle(self):
        return self._stream

    def synchronize(self) -> None:
        self.device.activate()
        self.device.call("stream_sync", self._stream)


class GpuEvent(Event):
    def __init__(self, device: "GpuDevice"):
        self.device = device
        self._event = device._create_event()
        weakref.finalize(self, device.quietly, "event_destroy", self._event)

    def record(self, stream: Stream | None = None) -> "GpuEvent":
        self.device.activate()
        self.device.call("event_record", self._event, self.device.stream_handle(stream))
        return self

    def synchronize(self) -> None:
        self.device.call("event_sync", self._event)

    def elapsed_ms(self, later: "GpuEvent") -> float:
        later.synchronize()
        return float(self.device.call("event_elapsed", self._event, later._event))


class GpuFunction:
    """A kernel in a loaded module; remembers its automatic block size."""

    def __init__(self, name: str, handle, module: "GpuModule"):
        self.name, self.handle, self.module = name, handle, module
        self._auto_block: int | None = None

    def auto_block_size(self) -> int:
        """The occupancy calculator's block size (DEFAULT_BLOCK where it is unavailable)."""
        if self._auto_block is None:
            try:
                self._auto_block = int(self.module.device._occupancy_block(self.handle)) or DEFAULT_BLOCK
            except (Error, TypeError, AttributeError, ValueError):
                self._auto_block = DEFAULT_BLOCK
        return self._auto_block

    def resident_threads(self, block: int) -> int | None:
        """Threads of this kernel the whole GPU holds at once in blocks of ``block`` (the occupancy
        calculator times the multiprocessors): the launch size of a grid-stride entry
        (codegen/gpu/grid_stride.py). None where the driver does not say."""
        device = self.module.device
        try:
            per_multiprocessor = int(device._occupancy_blocks(self.handle, int(block)))
            return per_multiprocessor * int(block) * int(device.multiprocessors) or None
        except (Error, TypeError, AttributeError, ValueError):
            return None

    def __repr__(self) -> str:
        return f"<{self.module.device.kind} function {self.name}>"


class GpuModule(LoadedModule):
    def __init__(self, device: "GpuDevice", handle):
        super().__init__(device)
        self.handle, self.generation = handle, device.generation
        weakref.finalize(self, device.unload_quietly, handle, device.generation)

    def _lookup(self, name: str) -> GpuFunction:
        device = self.device
        device.check_generation(self)
        device.activate()
        handle = device.call("get_function", self.handle, name.encode(),
                             detail=f"no kernel named '{name}' in the module?")
        return GpuFunction(name, handle, self)


class GpuDevice(Device):
    """The shared body of CudaDevice and HipDevice. Subclasses set ``lib`` in __init__."""
    DRIVER_NAMES: dict[str, str] = {}
    NO_EXTRA: object = None          # the launch call's empty ``extra`` argument

    def _setup_common(self) -> None:
        missing = set(ROLES) - set(self.DRIVER_NAMES)
        assert not missing, f"{type(self).__name__}.DRIVER_NAMES lacks {sorted(missing)}"
        self.generation = 0           # bumped by reset(): older buffers and modules are dead
        self.fault: KernelFaultError | None = None
        self.allocator = CachingAllocator(self._driver_alloc, self._driver_free)
        self._ring = None             # status_ring(): made on first use; False where the device has none
        self._staging = None          # staging(): made on first use; False where the device has none

    # --- hooks ---------------------------------------------------------------------------
    @abc.abstractmethod
    def activate(self) -> None: ...

    @abc.abstractmethod
    def _create_stream(self): ...

    @abc.abstractmethod
    def _wrap_stream(self, handle): ...

    @abc.abstractmethod
    def _create_event(self): ...

    def _occupancy_block(self, function_handle) -> int:
        return DEFAULT_BLOCK

    @abc.abstractmethod
    def _load_image(self, image): ...

    def _mapped_host_alloc(self, nbytes: int) -> tuple[int, int] | None:
        """``(host address, device address)`` of page-locked host memory the device can write, or
        None where this device offers none (its launches then wait for their kernels)."""
        return None

    def _pinned_host_alloc(self, nbytes: int) -> int | None:
        """The host address of ``nbytes`` of page-locked memory (staging buffers, runtime/staging.py),
        or None where this device offers none (its large copies then go through the driver's own)."""
        return None

    @abc.abstractmethod
    def _reset_context(self) -> None: ...

    # --- the checker, with the sticky-fault latch ----------------------------------------
    def driver_function(self, role: str):
        return getattr(self.lib, self.DRIVER_NAMES[role])

    def refuse_if_faulted(self) -> None:
        if self.fault is not None:
            raise KernelFaultError(f"{self.spec} is unusable after an earlier kernel fault: {self.fault}")

    def call(self, role_or_function, *args, detail: str = ""):
        """Call a driver function (by role name or directly) through the checker."""
        self.refuse_if_faulted()
        function = (self.driver_function(role_or_function) if isinstance(role_or_function, str)
                    else role_or_function)
        try:
            return invoke(function, *args, detail=detail)
        except KernelFaultError as exc:
            self.fault = exc
            raise

    def quietly(self, role: str, *args) -> None:
        """Cleanup calls (finalizers) never raise, and are skipped on a faulted context."""
        try:
            if self.fault is None:
                self.activate()
                invoke(self.driver_function(role), *args)
        except Exception:
            pass

    # --- memory --------------------------------------------------------------------------
    def _driver_alloc(self, nbytes: int) -> int:
        self.activate()
        return int(self.call("alloc", nbytes))

    def _driver_free(self, ptr: int) -> None:
        self.quietly("free", ptr)

    def allocate(self, nbytes: int) -> Buffer:
        nbytes = int(nbytes)
        if nbytes < 0:
            raise ArgumentError(f"cannot allocate {nbytes} bytes")
        self.refuse_if_faulted()
        ptr, size = self.allocator.allocate(nbytes)
        buf = Buffer(ptr, nbytes, self, capacity=size)
        # A buffer dropped without free() still returns its block to the cache.
        buf.owner = weakref.finalize(buf, self._release, ptr, self.generation)
        return buf

    def _release(self, ptr: int, generation: int) -> None:
        if generation == self.generation:
            self.allocator.release(ptr)

    def free(self, buf: Buffer) -> None:
        if buf.freed:
            raise DeviceError(f"buffer at {buf.ptr:#x} freed twice")
        buf.freed = True
        buf.owner()                  # a finalizer runs once: returns the block to the cache

    def to_device(self, array: np.ndarray, stream: Stream | None = None) -> Buffer:
        array = np.ascontiguousarray(array)
        buf = self.allocate(array.nbytes)
        try:
            self.copy_to_device(buf, array, stream)
        except BaseException:
            self.free(buf)
            raise
        return buf

    def stream_handle(self, stream):
        if isinstance(stream, GpuStream):
            return stream.handle
        return self._wrap_stream(stream)       # None (default stream) or a raw foreign stream

    def _copy(self, role: str, dst: int, src: int, nbytes: int, stream) -> None:
        self.activate()
        if stream is None:
            self.call(role, dst, src, nbytes)
        else:
            self.call(role + "_async", dst, src, nbytes, self.stream_handle(stream))

    # Synchronous copies of at least this many bytes go through page-locked staging buffers
    # (runtime/staging.py); an instance may set its own (a float('inf') turns staging off).
    STAGING_MIN_BYTES = MIN_BYTES

    def staging(self):
        """The device's Staging (runtime/staging.py), made on first use, or None where it has no
        page-locked host memory to give."""
        staging = self._staging
        if staging is None:
            with _STAGING_LOCK:
                staging = self._staging
                if staging is None:
                    self.refuse_if_faulted()
                    self.activate()
                    host = self._pinned_host_alloc(STAGING_COUNT * CHUNK_BYTES)
                    staging = self._staging = False if host is None else \
                        Staging(self, [host + k * CHUNK_BYTES for k in range(STAGING_COUNT)], CHUNK_BYTES)
        return staging or None

    def copy_to_device(self, buf: Buffer, array: np.ndarray, stream: Stream | None = None) -> None:
        check_copy(buf, array, "to")
        nbytes = array.nbytes
        if nbytes:
            staging = self.staging() if stream is None and nbytes >= self.STAGING_MIN_BYTES else None
            if staging is not None:
                staging.to_device(buf.ptr, array.ctypes.data, nbytes)
            else:
                self._copy("htod", buf.ptr, array.ctypes.data, nbytes, stream)

    def copy_to_host(self, buf: Buffer, array: np.ndarray, stream: Stream | None = None) -> None:
        check_copy(buf, array, "from")
        if not array.flags.writeable:
            raise ArgumentError("copy from device into a read-only array")
        nbytes = array.nbytes
        if nbytes:
            staging = self.staging() if stream is None and nbytes >= self.STAGING_MIN_BYTES else None
            if staging is not None:
                staging.to_host(array.ctypes.data, buf.ptr, nbytes)
            else:
                self._copy("dtoh", array.ctypes.data, buf.ptr, nbytes, stream)
        if stream is None and self._ring:
            self._ring.check()       # the copy waited for earlier launches: report their errors now

    def memset(self, buf: Buffer, value: int = 0, stream: Stream | None = None) -> None:
        if buf.freed:
            raise DeviceError("memset of a freed buffer")
        if buf.nbytes:
            self._copy("memset", buf.ptr, int(value), buf.nbytes, stream)

    def memory_info(self) -> tuple[int, int]:
        """``(free, total)`` device bytes, as the driver sees them."""
        self.activate()
        return tuple(int(v) for v in self.call("mem_info"))

    # --- code ----------------------------------------------------------------------------
    def load_module(self, image) -> GpuModule:
        self.refuse_if_faulted()
        self.activate()
        return GpuModule(self, self._load_image(image))

    def unload_quietly(self, handle, generation: int) -> None:
        if generation == self.generation:
            self.quietly("module_unload", handle)

    def check_generation(self, module: GpuModule) -> None:
        if module.generation != self.generation:
            raise DeviceError(f"this module was loaded on {self.spec} before device.reset(); load it again")

    def launch(self, function: GpuFunction, total_threads: int, slots: np.ndarray,
               block_size: int | None = None, stream: Stream | None = None,
               blocks: tuple[int, int, int] | None = None) -> None:
        """Launch ``total_threads`` threads in blocks of ``block_size`` (the occupancy calculator's
        size by default), on a grid of ``launch_grid`` blocks; ``blocks``: the grid of blocks
        ``(x, y, z)`` the caller chose instead (a row launch of an entry that accepts one,
        codegen/gpu/rows.py), covering at least ``total_threads``."""
        if not isinstance(function, GpuFunction) or function.module.device is not self:
            raise ArgumentError(f"{self.spec} launches functions loaded on it, got {function!r}")
        slots = check_slots(slots)
        total = check_total_threads(total_threads)
        if total == 0:
            return
        self.check_generation(function.module)
        block = int(block_size or function.auto_block_size())
        grid = launch_grid(total, block) + (1,) if blocks is None else _check_blocks(blocks, total, block)
        pointers = slots.ctypes.data + 8 * np.arange(len(slots), dtype=np.uint64)   # &slots[i]
        self.activate()
        # The driver copies the parameter values during the call: slots may change afterwards.
        self.call("launch", function.handle, *grid, block, 1, 1, 0,
                  self.stream_handle(stream), int(pointers.ctypes.data), self.NO_EXTRA,
                  detail=f"kernel '{function.name}', grid {grid}, block {block}")

    def prepare_launch(self, function: GpuFunction, total_threads: int, block_size: int | None = None,
                       blocks: tuple[int, int, int] | None = None) -> PreparedLaunch:
        """The geometry ``launch`` would choose, computed once for a launcher's plan (kernels/launch_plan.py)."""
        if not isinstance(function, GpuFunction) or function.module.device is not self:
            raise ArgumentError(f"{self.spec} launches functions loaded on it, got {function!r}")
        total = check_total_threads(total_threads)
        block = int(block_size or function.auto_block_size())
        grid = launch_grid(total, block) + (1,) if blocks is None else _check_blocks(blocks, total, block)
        return PreparedLaunch(function, grid, block, self.stream_handle(None),
                              f"kernel '{function.name}', grid {grid}, block {block}")

    def scratch(self, nbytes: int) -> int:
        """A device block from the cache, without a Buffer: the caller returns it with ``release_scratch``
        once the work using it is done (a launch's status record)."""
        self.refuse_if_faulted()
        return self.allocator.allocate(nbytes)[0]

    def release_scratch(self, ptr: int) -> None:
        self.allocator.release(ptr)

    def launch_checked(self, prepared: PreparedLaunch, slots_address: int, slot_count: int, status_ptr: int,
                       status_words: int, record_address: int) -> None:
        """Clear the status record at ``status_ptr``, launch ``prepared`` with the packed slots at
        ``slots_address``, and copy the record back to host memory at ``record_address``; the copy
        waits for the kernel (all on the default stream), so on return it has finished."""
        self.check_generation(prepared.function.module)
        nbytes = 8 * status_words
        self.activate()
        self.call("memset", status_ptr, 0, nbytes)
        params = (ctypes.c_void_p * slot_count)(*range(slots_address, slots_address + 8 * slot_count, 8))
        self.call("launch", prepared.function.handle, *prepared.grid, prepared.block, 1, 1, 0, prepared.stream,
                  ctypes.addressof(params), self.NO_EXTRA, detail=prepared.detail)
        self.call("dtoh", record_address, status_ptr, nbytes)

    def status_ring(self):
        """The device's StatusRing (runtime/status_ring.py) for launches that do not wait for their
        kernels, or None where it has no mapped host memory."""
        ring = self._ring
        if ring is None:
            with _RING_LOCK:
                ring = self._ring
                if ring is None:
                    from .status_ring import DEFAULT_COUNT, RECORD_BYTES, StatusRing
                    self.refuse_if_faulted()
                    self.activate()
                    memory = self._mapped_host_alloc(DEFAULT_COUNT * RECORD_BYTES)
                    ring = self._ring = (False if memory is None else
                                         StatusRing(*memory, DEFAULT_COUNT, self._raw_synchronize))
        return ring or None

    def launch_prepared(self, prepared: PreparedLaunch, params: ctypes.c_void_p, slot_count: int) -> None:
        """Queue ``prepared`` on its stream with the kernel parameters at ``params`` (the address of an
        array of ``slot_count`` pointers to the slots, as ``kernelParams``) and return without waiting."""
        if self.fault is not None:
            self.refuse_if_faulted()
        if prepared.function.module.generation != self.generation:
            self.check_generation(prepared.function.module)
        self.activate()
        function = self._launch_function
        result = function(prepared.function.handle, *prepared.grid, prepared.block, 1, 1, 0, prepared.stream,
                          params.value, self.NO_EXTRA)
        if int(result[0] if isinstance(result, tuple) else result):
            try:
                check(result, getattr(function, "__name__", "launch"), prepared.detail)
            except KernelFaultError as exc:
                self.fault = exc             # latched as every call does
                raise

    @property
    def _launch_function(self):
        function = self.__dict__.get("_launch_fn")
        if function is None:
            function = self.__dict__["_launch_fn"] = self.driver_function("launch")
        return function

    def zero(self, ptr: int, nbytes: int) -> None:
        """Queue the zeroing of ``nbytes`` device bytes at ``ptr`` on the default stream."""
        if nbytes:
            self.call("memset", ptr, 0, nbytes)

    # --- ordering ------------------------------------------------------------------------
    def synchronize(self) -> None:
        """Wait for all work on the device; then raise the error of an earlier asynchronous launch that failed."""
        self._raw_synchronize()
        if self._ring:
            self._ring.check()

    def _raw_synchronize(self) -> None:
        self.activate()
        self.call("synchronize")

    def stream(self, handle=None) -> GpuStream:
        """A new non-blocking stream, or a wrapper over a foreign raw stream ``handle``."""
        self.activate()
        return GpuStream(self, handle)

    def event(self) -> GpuEvent:
        self.activate()
        return GpuEvent(self)

    def reset(self) -> None:
        """Try to recover from a sticky fault by resetting the device's primary context.

        Every buffer and module on this device, ours and those of JAX/CuPy in this
        process, is destroyed; reload modules and reallocate afterwards. Recent NVIDIA
        drivers keep the fault for the whole process (seen with driver 580 on an H200:
        the reset succeeds, the next retain still returns CUDA_ERROR_ILLEGAL_ADDRESS);
        then this raises KernelFaultError and only a new process can use the GPU.
        """
        fault = self.fault
        self.generation += 1
        self.allocator.forget_all()
        if self._ring:
            self._ring.closed = True      # its mapped memory goes with the context
        self._ring = None
        self._staging = None          # its page-locked buffers go with the context too
        try:
            self._reset_context()
        except Error as exc:
            self.fault = fault or exc
            raise KernelFaultError(f"{self.spec} could not be recovered in this process ({exc}); "
                                   "restart the process to use the GPU again") from exc
        self.fault = None
