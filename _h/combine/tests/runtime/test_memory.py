"""The caching allocator, driven by a fake driver with a fixed capacity."""
from __future__ import annotations

import pytest

from adoffload.errors import DeviceError, OutOfMemoryError
from adoffload.runtime.memory import CachingAllocator, bucket_size


class FakeDriver:
    def __init__(self, capacity: int):
        self.capacity, self.used, self.next_ptr = capacity, 0, 0x1000
        self.blocks: dict[int, int] = {}
        self.allocs = self.frees = 0

    def alloc(self, nbytes: int) -> int:
        if self.used + nbytes > self.capacity:
            raise OutOfMemoryError("cuMemAlloc failed: CUDA_ERROR_OUT_OF_MEMORY (2)")
        ptr, self.next_ptr = self.next_ptr, self.next_ptr + nbytes
        self.blocks[ptr], self.used = nbytes, self.used + nbytes
        self.allocs += 1
        return ptr

    def free(self, ptr: int) -> None:
        self.used -= self.blocks.pop(ptr)
        self.frees += 1


@pytest.mark.parametrize("nbytes, size", [(0, 512), (1, 512), (512, 512), (513, 1024), (1 << 20, 1 << 20),
                                          ((1 << 20) + 1, 2 << 20), ((5 << 20) + 3, 6 << 20)])
def test_bucket_sizes(nbytes, size):
    assert bucket_size(nbytes) == size


def test_released_blocks_are_reused_by_bucket():
    driver = FakeDriver(1 << 30)
    alloc = CachingAllocator(driver.alloc, driver.free)
    a, size = alloc.allocate(1000)
    assert size == 1024
    alloc.release(a)
    b, _ = alloc.allocate(700)          # same bucket: reused
    c, _ = alloc.allocate(3000)         # other bucket: new
    assert b == a and c != a
    assert driver.allocs == 2 and alloc.stats.reuses == 1
    assert alloc.stats.in_use_bytes == 1024 + 4096 and alloc.stats.cached_bytes == 0


def test_double_release_is_an_error():
    driver = FakeDriver(1 << 20)
    alloc = CachingAllocator(driver.alloc, driver.free)
    ptr, _ = alloc.allocate(10)
    alloc.release(ptr)
    with pytest.raises(DeviceError, match="double free"):
        alloc.release(ptr)


def test_out_of_memory_empties_the_cache_then_retries():
    driver = FakeDriver(8 << 20)
    alloc = CachingAllocator(driver.alloc, driver.free)
    blocks = [alloc.allocate(2 << 20)[0] for _ in range(3)]
    for ptr in blocks:
        alloc.release(ptr)                      # 6 MiB cached, 2 MiB free at the driver
    ptr, size = alloc.allocate(6 << 20)         # fits only once the cache is given back
    assert size == 6 << 20 and driver.frees == 3 and alloc.stats.cached_bytes == 0


def test_out_of_memory_leaks_nothing():
    driver = FakeDriver(4 << 20)
    alloc = CachingAllocator(driver.alloc, driver.free)
    keep, _ = alloc.allocate(2 << 20)
    with pytest.raises(OutOfMemoryError, match="out of memory allocating"):
        alloc.allocate(3 << 20)
    assert driver.used == 2 << 20 and alloc.stats.in_use_bytes == 2 << 20
    alloc.release(keep)
    alloc.empty_cache()
    assert driver.used == 0 and not driver.blocks


def test_cache_limit_returns_extra_blocks_to_the_driver():
    driver = FakeDriver(1 << 30)
    alloc = CachingAllocator(driver.alloc, driver.free, max_cached_bytes=4096)
    ptrs = [alloc.allocate(4096)[0] for _ in range(3)]
    for ptr in ptrs:
        alloc.release(ptr)
    assert alloc.stats.cached_bytes == 4096 and driver.frees == 2
