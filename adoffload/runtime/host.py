"""The host device: memory is numpy, kernels are native host entries run on worker threads.

A host entry has the signature ``void @k.host(ptr slots, i64 start, i64 end)`` and runs
the linear threads ``[start, end)``. ``launch`` splits the grid into chunks and runs them
on a persistent thread pool; ctypes releases the GIL around each foreign call, so the
chunks really run in parallel. Launches are synchronous: when ``launch`` returns, every
thread has finished (streams and events exist so that code written for GPUs runs here).
A launch stops claiming chunks once the kernel's status record is set, or on Ctrl-C.
"""
from __future__ import annotations

import ctypes
import itertools
import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor, wait

import numpy as np

from ..errors import ArgumentError, DeviceError
from .device import (Buffer, Device, Event, LoadedModule, Stream, check_copy, check_slots,
                     check_total_threads)

HOST_ENTRY = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64)
ALIGNMENT = 64               # bytes; a cache line, and enough for any vector load
INLINE_THRESHOLD = 32        # grids this small run on the calling thread, no pool round trip
CHUNKS_PER_WORKER = 4        # more chunks than workers evens out uneven per-thread work
MAX_CHUNK = 1 << 18          # threads per chunk at most: status and Ctrl-C are checked between chunks

_in_worker = threading.local()

# numpy's ``PyArrayObject_fields.data`` sits right after the object header (PyArray_DATA reads it
# there in every compiled extension); read directly it costs a quarter of ``a.ctypes.data``.
# ``DATA_OFFSET`` is None where a probe at import disagrees with ``ctypes.data`` (another Python
# implementation, a numpy that moved it): then ``data_address`` asks numpy.
_HEADER_BYTES = 2 * ctypes.sizeof(ctypes.c_void_p)


def _probe_data_offset() -> int | None:
    base = np.arange(64, dtype=np.float64)
    frozen = base[3:9]
    frozen.flags.writeable = False
    probes = (base, base[5:], base[::2], frozen, np.zeros((3, 4), np.float32)[1:], np.empty(0, np.int8),
              np.zeros((), np.int32))
    try:
        if all(ctypes.c_void_p.from_address(id(a) + _HEADER_BYTES).value == a.ctypes.data for a in probes):
            return _HEADER_BYTES
    except (OverflowError, ValueError, TypeError):
        pass
    return None


DATA_OFFSET = _probe_data_offset()
read_pointer = ctypes.c_void_p.from_address


def data_address(array: np.ndarray) -> int:
    """The address of ``array``'s first element (a numpy array of exactly the ndarray type)."""
    if DATA_OFFSET is not None and type(array) is np.ndarray:
        return read_pointer(id(array) + DATA_OFFSET).value or 0
    return int(array.ctypes.data)


def _mark_worker() -> None:
    _in_worker.active = True


class HostFunction:
    """A host entry point: its symbol name, address and ctypes callable."""

    def __init__(self, name: str, address: int, module: "HostModule"):
        self.name, self.address, self.module = name, address, module
        self.entry = HOST_ENTRY(address)

    def __repr__(self) -> str:
        return f"<HostFunction {self.name} at {self.address:#x}>"


class HostModule(LoadedModule):
    """Wraps a compiled host program (anything with ``.address(name)``, or a name->address mapping)."""

    def __init__(self, device: "HostDevice", program):
        super().__init__(device)
        if not (hasattr(program, "address") or hasattr(program, "__getitem__")):
            raise ArgumentError("a host module image must expose .address(name) (a compiled host "
                                f"program) or map names to addresses; got {type(program).__name__}")
        self.program = program          # keeps the JIT engine (and so the code) alive

    def _lookup(self, name: str) -> HostFunction:
        try:
            address = self.program.address(name) if hasattr(self.program, "address") else self.program[name]
        except (KeyError, LookupError) as exc:
            raise DeviceError(f"host module has no function '{name}'") from exc
        if not address:
            raise DeviceError(f"host module has no function '{name}' (address 0)")
        return HostFunction(name, int(address), self)


class HostStream(Stream):
    """Host work is synchronous, so a host stream only has to exist."""

    def __init__(self, device: "HostDevice"):
        self.device = device

    @property
    def handle(self) -> int:
        return 0

    def synchronize(self) -> None:
        pass


class HostEvent(Event):
    def __init__(self):
        self.time: float | None = None

    def record(self, stream: Stream | None = None) -> "HostEvent":
        self.time = time.perf_counter()
        return self

    def synchronize(self) -> None:
        pass

    def elapsed_ms(self, later: "HostEvent") -> float:
        if self.time is None or later.time is None:
            raise DeviceError("elapsed_ms needs two recorded events")
        return (later.time - self.time) * 1e3


class HostDevice(Device):
    """The host CPU. ``warp_size``: the lanes of a warp in block kernels, 32 (NVIDIA's) or 64
    (``get_device("cpu:wave64")``: AMD's wavefronts, to test AMD semantics on the host)."""
    kind = "cpu"

    def __init__(self, workers: int | None = None, warp_size: int = 32):
        self.ordinal = 0
        self.workers = max(1, workers or os.cpu_count() or 1)
        self.warp_size = warp_size
        self.name = f"host CPU ({self.workers} worker threads)" + (
            ", 64-lane warps (AMD wavefront emulation)" if warp_size == 64 else "")
        self._pool: ThreadPoolExecutor | None = None
        self._pool_lock = threading.Lock()

    # --- memory ------------------------------------------------------------------------
    def allocate(self, nbytes: int) -> Buffer:
        nbytes = int(nbytes)
        if nbytes < 0:
            raise ArgumentError(f"cannot allocate {nbytes} bytes")
        raw = np.empty(max(nbytes, 1) + ALIGNMENT, dtype=np.uint8)
        offset = -raw.ctypes.data % ALIGNMENT
        storage = raw[offset:offset + max(nbytes, 1)]
        return Buffer(int(storage.ctypes.data), nbytes, self, owner=storage)

    def as_buffer(self, array: np.ndarray) -> Buffer:
        """A buffer over an existing C-contiguous array, without copying (host memory is device memory)."""
        if not isinstance(array, np.ndarray) or not array.flags.c_contiguous:
            raise ArgumentError("as_buffer needs a C-contiguous numpy array")
        return Buffer(int(array.ctypes.data), array.nbytes, self, owner=array)

    def view(self, buf: Buffer, dtype, shape) -> np.ndarray:
        """The buffer's bytes as a numpy array (no copy)."""
        dtype = np.dtype(dtype)
        count = int(np.prod(shape, dtype=np.int64))
        if count * dtype.itemsize > buf.nbytes:
            raise ArgumentError(f"a {shape} {dtype} view needs {count * dtype.itemsize} bytes, the buffer has {buf.nbytes}")
        raw = (ctypes.c_uint8 * max(buf.nbytes, 1)).from_address(buf.ptr)
        return np.frombuffer(raw, dtype=dtype, count=count).reshape(shape)

    def free(self, buf: Buffer) -> None:
        buf.freed, buf.owner = True, None

    def copy_to_device(self, buf: Buffer, array: np.ndarray, stream: Stream | None = None) -> None:
        check_copy(buf, array, "to")
        ctypes.memmove(buf.ptr, array.ctypes.data, array.nbytes)

    def copy_to_host(self, buf: Buffer, array: np.ndarray, stream: Stream | None = None) -> None:
        check_copy(buf, array, "from")
        if not array.flags.writeable:
            raise ArgumentError("copy from device into a read-only array")
        ctypes.memmove(array.ctypes.data, buf.ptr, array.nbytes)

    def memset(self, buf: Buffer, value: int = 0, stream: Stream | None = None) -> None:
        if buf.freed:
            raise DeviceError("memset of a freed buffer")
        ctypes.memset(buf.ptr, int(value), buf.nbytes)

    # --- code --------------------------------------------------------------------------
    def load_module(self, image) -> HostModule:
        return HostModule(self, image)

    def _get_pool(self) -> ThreadPoolExecutor:
        with self._pool_lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(self.workers, thread_name_prefix="adoffload-host",
                                                initializer=_mark_worker)
            return self._pool

    def chunk_size(self, total: int, block_size: int | None = None) -> int:
        """Threads per chunk: ``block_size``, or an even split into up to CHUNKS_PER_WORKER
        chunks per worker, at most MAX_CHUNK threads (so a launch can stop between chunks)."""
        if block_size:
            return int(block_size)
        if total <= INLINE_THRESHOLD:
            return max(total, 1)
        count = min(self.workers * CHUNKS_PER_WORKER, total) if self.workers > 1 else 1
        return min(-(-total // count), MAX_CHUNK)

    def one_thread(self, total: int) -> bool:
        """Whether ``launch`` of ``total`` threads (no block size) runs every chunk on the calling
        thread: one worker, or one chunk. Its kernel's atomics then need not be atomic
        (codegen/host/serial.py)."""
        return self.workers == 1 or self.chunk_size(total) >= total

    def chunks(self, total: int, block_size: int | None = None) -> list[tuple[int, int]]:
        """How ``[0, total)`` is split (see ``chunk_size``)."""
        if total <= 0:
            return []
        size = self.chunk_size(total, block_size)
        return [(start, min(start + size, total)) for start in range(0, total, size)]

    def launch(self, function: HostFunction, total_threads: int, slots: np.ndarray,
               block_size: int | None = None, stream: Stream | None = None,
               status: np.ndarray | None = None) -> None:
        """Run ``[0, total_threads)`` in chunks on the calling thread and the pool.

        Chunks are claimed one at a time; none is started once ``status[0]`` (the kernel's
        status record, language/status.py) is set, so a failing launch stops early. A
        KeyboardInterrupt (Ctrl-C) on the calling thread stops the claiming too: the running
        chunks finish, then it propagates."""
        if not isinstance(function, HostFunction):
            raise ArgumentError(f"the host device launches HostFunction handles, got {type(function).__name__}")
        slots = check_slots(slots)
        total = check_total_threads(total_threads)
        if total == 0:
            return
        address = slots.ctypes.data
        size = self.chunk_size(total, block_size)
        count = -(-total // size)
        claim, stop = itertools.count(), threading.Event()

        def work():
            while not stop.is_set():
                k = next(claim)            # atomic under the GIL
                if k >= count or (status is not None and status[0] != 0):
                    return
                start = k * size
                function.entry(address, start, min(start + size, total))

        # Inside a pool worker (a kernel launched from a kernel's callback) run inline: waiting
        # on the pool from the pool could deadlock.
        helpers = 0 if getattr(_in_worker, "active", False) else min(self.workers, count) - 1
        futures = []
        try:
            if helpers > 0:
                pool = self._get_pool()
                futures = [pool.submit(work) for _ in range(helpers)]
            work()                                   # the caller works too instead of idling
            for future in futures:
                future.result()
        except BaseException:
            stop.set()
            wait(futures)
            raise

    # --- ordering ----------------------------------------------------------------------
    def synchronize(self) -> None:
        pass

    def stream(self) -> HostStream:
        return HostStream(self)

    def event(self) -> HostEvent:
        return HostEvent()
