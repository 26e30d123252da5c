"""Large copies between pageable host memory (numpy arrays) and a GPU, through page-locked buffers.

A synchronous driver copy of pageable memory (``cuMemcpyHtoD``/``DtoH``) stages it itself, on the
calling thread: one CPU memcpy of every byte (and, into fresh memory such as a new numpy array, a
page fault per 4 KiB page) around the DMA. ``Staging`` moves copies of at least ``MIN_BYTES`` in
chunks of ``CHUNK_BYTES`` through ``COUNT`` page-locked buffers of the device instead: the CPU side of
a chunk (a memmove, split over ``threads`` threads: ``ctypes.memmove`` releases the GIL, so the page
faults and copies of the slices run in parallel) overlaps the DMA of its neighbours (async copies on
the default stream, an event per buffer). The bytes are the same; only who copies them changes.

Ordering is that of the synchronous copies it replaces, for the host: both directions are queued on
the default stream (after the work queued before them, before the work queued after) and return when
the copy is complete (``to_host``: the array holds the data; ``to_device``: the device buffer does,
and the host array may be changed). A buffer is refilled only after the event recorded after its
last DMA has completed. One copy at a time per device (a lock): the buffers are the device's.
"""
from __future__ import annotations

import ctypes
import os
import threading

MIN_BYTES = 8 << 20          # smaller copies: the driver's own (latency, not bandwidth, decides them)
CHUNK_BYTES = 16 << 20
COUNT = 3                    # buffers: a chunk's memmove overlaps the DMA of the next two
SLICE_MIN_BYTES = 1 << 20    # a memmove is split over threads only in slices of at least this
PAGE = 4096

_memmove = ctypes.memmove


def default_threads() -> int:
    """Threads that copy a chunk's slices: half the cores, 1 to 8."""
    return max(1, min(8, (os.cpu_count() or 2) // 2))


def slices(nbytes: int, parts: int) -> list[tuple[int, int]]:
    """``(offset, size)`` of up to ``parts`` slices covering ``nbytes`` bytes, page-aligned offsets,
    none smaller than SLICE_MIN_BYTES (except a single slice of a small copy)."""
    parts = max(1, min(parts, nbytes // SLICE_MIN_BYTES))
    step = -(-nbytes // parts)
    step = -(-step // PAGE) * PAGE
    return [(offset, min(step, nbytes - offset)) for offset in range(0, nbytes, step)]


class Staging:
    """The page-locked buffers of one GPU device and the copies through them.

    ``device`` is a GpuDevice (runtime/gpu.py), or anything with its ``activate()``, ``call(role, ...)``
    for ``htod_async``/``dtoh_async``, ``stream_handle(None)`` and ``event()`` (events with
    ``record()`` on the default stream and ``synchronize()``). ``buffers``: host addresses of page-locked
    blocks of ``chunk`` bytes each."""

    def __init__(self, device, buffers: list[int], chunk: int = CHUNK_BYTES, threads: int | None = None):
        if not buffers or chunk < 1:
            raise ValueError("Staging needs at least one buffer of at least one byte")
        self.device, self.buffers, self.chunk = device, list(buffers), int(chunk)
        self.events = [device.event() for _ in self.buffers]
        self.pending = [False] * len(self.buffers)      # an event recorded after a DMA not yet waited for
        self.threads = default_threads() if threads is None else max(1, int(threads))
        self.lock = threading.Lock()
        self._pool = None

    # --- the CPU side: a memmove in slices on several threads ---------------------------------
    def _move(self, dst: int, src: int, nbytes: int) -> None:
        parts = slices(nbytes, self.threads)
        if len(parts) == 1:
            _memmove(dst, src, nbytes)
            return
        pool = self._pool
        if pool is None:
            from concurrent.futures import ThreadPoolExecutor
            pool = self._pool = ThreadPoolExecutor(self.threads - 1, thread_name_prefix="adoffload-staging")
        futures = [pool.submit(_memmove, dst + offset, src + offset, size) for offset, size in parts[1:]]
        offset, size = parts[0]
        _memmove(dst + offset, src + offset, size)
        for future in futures:
            future.result()

    def _wait(self, b: int) -> None:
        if self.pending[b]:
            self.events[b].synchronize()
            self.pending[b] = False

    def _queued(self, b: int) -> None:
        self.events[b].record()
        self.pending[b] = True

    # --- the two directions -------------------------------------------------------------------
    def to_device(self, dst: int, src: int, nbytes: int) -> None:
        """Copy ``nbytes`` from host address ``src`` to device address ``dst``; returns when done."""
        if nbytes <= 0:
            return
        with self.lock:
            try:
                self._to_device(dst, src, nbytes)
            except BaseException:
                self._settle()
                raise

    def _to_device(self, dst: int, src: int, nbytes: int) -> None:
        device, count, chunk = self.device, len(self.buffers), self.chunk
        device.activate()
        stream = device.stream_handle(None)
        last = 0
        for index, offset in enumerate(range(0, nbytes, chunk)):
            b = last = index % count
            size = min(chunk, nbytes - offset)
            self._wait(b)                       # its previous DMA has read it
            self._move(self.buffers[b], src + offset, size)
            device.call("htod_async", dst + offset, self.buffers[b], size, stream)
            self._queued(b)
        self._wait(last)                        # the last chunk's DMA; earlier ones are before it
        for b in range(count):
            self.pending[b] = False             # ordered before the event waited for

    def to_host(self, dst: int, src: int, nbytes: int) -> None:
        """Copy ``nbytes`` from device address ``src`` to host address ``dst``; returns when done."""
        if nbytes <= 0:
            return
        with self.lock:
            try:
                self._to_host(dst, src, nbytes)
            except BaseException:
                self._settle()
                raise

    def _to_host(self, dst: int, src: int, nbytes: int) -> None:
        device, count, chunk = self.device, len(self.buffers), self.chunk
        chunks = [(offset, min(chunk, nbytes - offset)) for offset in range(0, nbytes, chunk)]
        device.activate()
        stream = device.stream_handle(None)

        def queue(index: int) -> None:
            b = index % count
            offset, size = chunks[index]
            # an earlier DMA reading this buffer (to_device) is before this one on the stream
            device.call("dtoh_async", self.buffers[b], src + offset, size, stream)
            self._queued(b)

        for index in range(min(count, len(chunks))):
            queue(index)
        for index, (offset, size) in enumerate(chunks):
            b = index % count
            self._wait(b)                       # this chunk has arrived in the buffer
            self._move(dst + offset, self.buffers[b], size)
            if index + count < len(chunks):
                queue(index + count)

    def _settle(self) -> None:
        """After a copy that stopped part way (an error, Ctrl-C): wait for every DMA it queued, even
        one whose event was not recorded yet, so none touches a buffer the next copy fills; a device
        that cannot wait (a faulted context) refuses the next copy anyway."""
        try:
            self.events[0].record()
            self.events[0].synchronize()
        except Exception:  # noqa: BLE001 - the copy's own error is the one raised
            pass
        self.pending = [False] * len(self.buffers)


__all__ = ["CHUNK_BYTES", "COUNT", "MIN_BYTES", "Staging", "default_threads", "slices"]
