"""A size-bucketed caching allocator shared by the CUDA and HIP devices.

Driver allocations (``cuMemAlloc``) are slow and synchronize the device, so freed blocks
are kept in per-size free lists and handed out again. Sizes are rounded up to a bucket:
the next power of two up to 1 MiB, a multiple of 2 MiB above that (so a 1 GiB buffer
wastes at most 2 MiB, and a 600-byte one 424 bytes). When the driver reports out of
memory, the cache is returned to the driver and the allocation retried once; if it still
fails, ``OutOfMemoryError`` is raised and nothing has been allocated.

The allocator does not know when the device has finished using a block: callers free a
buffer only after the work using it is ordered before any reuse (all our work goes to
streams of one context, and reuse happens in stream order on the default stream; work on
other streams must synchronize before freeing).
"""
from __future__ import annotations

import threading
from collections import defaultdict
from dataclasses import dataclass
from typing import Callable

from ..errors import DeviceError, OutOfMemoryError

SMALL_LIMIT = 1 << 20          # below this, power-of-two buckets
LARGE_GRANULE = 2 << 20        # above it, multiples of 2 MiB
MIN_BLOCK = 512                # CUDA aligns allocations to at least 256 bytes anyway


def bucket_size(nbytes: int) -> int:
    """The block size a request of ``nbytes`` is served from."""
    nbytes = max(int(nbytes), 1)
    if nbytes <= SMALL_LIMIT:
        return max(MIN_BLOCK, 1 << (nbytes - 1).bit_length())
    return -(-nbytes // LARGE_GRANULE) * LARGE_GRANULE


@dataclass
class AllocatorStats:
    in_use_bytes: int = 0        # bytes handed out and not yet released
    cached_bytes: int = 0        # bytes held in free lists
    driver_allocations: int = 0  # calls to the driver's allocate
    reuses: int = 0              # requests served from the cache


class CachingAllocator:
    """Hands out device blocks, reusing released ones of the same bucket.

    ``driver_alloc(nbytes) -> ptr`` must raise ``OutOfMemoryError`` when the device is
    full; ``driver_free(ptr)`` returns a block to the driver. ``max_cached_bytes`` bounds
    what the free lists may hold (None: unbounded).
    """

    def __init__(self, driver_alloc: Callable[[int], int], driver_free: Callable[[int], None],
                 max_cached_bytes: int | None = None):
        self._driver_alloc, self._driver_free = driver_alloc, driver_free
        self.max_cached_bytes = max_cached_bytes
        self._free: dict[int, list[int]] = defaultdict(list)
        self._live: dict[int, int] = {}           # ptr -> block size, for double-free checks
        self._lock = threading.Lock()
        self.stats = AllocatorStats()

    def allocate(self, nbytes: int) -> tuple[int, int]:
        """A block of at least ``nbytes``: returns ``(ptr, block_size)``."""
        size = bucket_size(nbytes)
        with self._lock:
            blocks = self._free.get(size)
            if blocks:
                ptr = blocks.pop()
                self.stats.cached_bytes -= size
                self.stats.reuses += 1
            else:
                ptr = self._allocate_from_driver(size, nbytes)
            self._live[ptr] = size
            self.stats.in_use_bytes += size
            return ptr, size

    def _allocate_from_driver(self, size: int, requested: int) -> int:
        try:
            ptr = self._driver_alloc(size)
        except OutOfMemoryError:
            self._release_cache()
            try:
                ptr = self._driver_alloc(size)
            except OutOfMemoryError as exc:
                raise OutOfMemoryError(
                    f"device out of memory allocating {requested} bytes (block {size}); "
                    f"{self.stats.in_use_bytes} bytes are in use by adoffload buffers, the cache was "
                    f"emptied; driver said: {exc}") from exc
        self.stats.driver_allocations += 1
        return ptr

    def release(self, ptr: int) -> None:
        """Return a block to the cache (or to the driver once the cache is full)."""
        with self._lock:
            size = self._live.pop(ptr, None)
            if size is None:
                raise DeviceError(f"release of a device block {ptr:#x} that is not allocated (double free?)")
            self.stats.in_use_bytes -= size
            if self.max_cached_bytes is not None and self.stats.cached_bytes + size > self.max_cached_bytes:
                self._driver_free(ptr)
                return
            self._free[size].append(ptr)
            self.stats.cached_bytes += size

    def _release_cache(self) -> None:
        for blocks in self._free.values():
            while blocks:
                self._driver_free(blocks.pop())
        self.stats.cached_bytes = 0

    def empty_cache(self) -> None:
        """Give every cached block back to the driver."""
        with self._lock:
            self._release_cache()

    def forget_all(self) -> None:
        """Drop every record without calling the driver (after a context reset freed it all)."""
        with self._lock:
            self._free.clear()
            self._live.clear()
            self.stats = AllocatorStats()

    def owns(self, ptr: int) -> bool:
        return ptr in self._live
