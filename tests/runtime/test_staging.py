"""runtime/staging.py: large copies through page-locked buffers give the bytes the driver's copies give.

On the host, against a device whose "DMA" really is deferred: an async copy is queued and runs only
when an event recorded after it is waited for (stream order), so a staging buffer refilled before its
previous DMA had run would be caught as wrong bytes. The CUDA test compares staged copies with the
driver's own on a GPU (skipped without one)."""
from __future__ import annotations

import ctypes

import numpy as np
import pytest

from adoffload.runtime.staging import PAGE, SLICE_MIN_BYTES, Staging, slices


class DeferredEvent:
    def __init__(self, device):
        self.device, self.position = device, None

    def record(self, stream=None):
        self.position = len(self.device.queue)
        return self

    def synchronize(self):
        assert self.position is not None, "waited for an event never recorded"
        self.device.run_until(self.position)


class DeferredDevice:
    """The calls Staging makes, with copies that run late (when an event after them is waited for)."""

    def __init__(self):
        self.queue, self.done, self.calls = [], 0, []

    def activate(self):
        pass

    def stream_handle(self, stream):
        assert stream is None
        return 0

    def event(self):
        return DeferredEvent(self)

    def call(self, role, dst, src, nbytes, stream):
        assert role in ("htod_async", "dtoh_async") and stream == 0
        self.calls.append((role, nbytes))
        self.queue.append((dst, src, nbytes))

    def run_until(self, position):
        while self.done < position:
            dst, src, nbytes = self.queue[self.done]
            ctypes.memmove(dst, src, nbytes)
            self.done += 1

    def drain(self):
        self.run_until(len(self.queue))


def _staging(chunk, count=3, threads=1):
    buffers = [np.zeros(chunk, np.uint8) for _ in range(count)]
    device = DeferredDevice()
    return Staging(device, [b.ctypes.data for b in buffers], chunk, threads), device, buffers


SIZES = [1, 7, 4096, 3 * 4096, 3 * 4096 + 5, 10 * 4096 - 1, 17 * 4096 + 123]


@pytest.mark.parametrize("nbytes", SIZES)
@pytest.mark.parametrize("count", [1, 2, 3])
def test_staged_round_trip_is_the_same_bytes(nbytes, count):
    staging, device, _ = _staging(4096, count)
    source = np.random.default_rng(nbytes).integers(0, 256, nbytes, dtype=np.uint8)
    on_device = np.zeros(nbytes, np.uint8)              # stands for device memory
    staging.to_device(on_device.ctypes.data, source.ctypes.data, nbytes)
    device.drain()
    assert np.array_equal(on_device, source)
    back = np.full(nbytes, 0xAB, np.uint8)
    staging.to_host(back.ctypes.data, on_device.ctypes.data, nbytes)
    assert device.done == len(device.queue)             # to_host returned with every chunk arrived
    assert np.array_equal(back, source)
    chunks = -(-nbytes // 4096)
    assert device.calls == [("htod_async", min(4096, nbytes - 4096 * k)) for k in range(chunks)] + \
        [("dtoh_async", min(4096, nbytes - 4096 * k)) for k in range(chunks)]


def test_to_device_is_complete_on_return_and_the_source_may_change():
    staging, device, _ = _staging(4096, 2)
    source = np.arange(20000, dtype=np.uint8)
    expected = source.copy()
    on_device = np.zeros_like(source)
    staging.to_device(on_device.ctypes.data, source.ctypes.data, source.nbytes)
    assert device.done == len(device.queue)             # every DMA ran before the return
    source[:] = 0
    assert np.array_equal(on_device, expected)


def test_a_staging_buffer_is_refilled_only_after_its_dma():
    """Several copies back to back through two buffers, none drained in between by the test."""
    staging, device, _ = _staging(4096, 2)
    rng = np.random.default_rng(5)
    arrays = [rng.integers(0, 256, n, dtype=np.uint8) for n in (9000, 4096, 100, 13000)]
    targets = [np.zeros_like(a) for a in arrays]
    for a, t in zip(arrays, targets):
        staging.to_device(t.ctypes.data, a.ctypes.data, a.nbytes)
    backs = [np.zeros_like(a) for a in arrays]
    for t, b in zip(targets, backs):
        staging.to_host(b.ctypes.data, t.ctypes.data, t.nbytes)
    for a, b in zip(arrays, backs):
        assert np.array_equal(a, b)


def test_slices_cover_the_copy_on_page_boundaries():
    for nbytes in (1, SLICE_MIN_BYTES - 1, SLICE_MIN_BYTES * 3 + 17, 16 << 20):
        for parts in (1, 2, 3, 8):
            got = slices(nbytes, parts)
            assert got[0][0] == 0 and sum(size for _, size in got) == nbytes
            assert all(a + n == b for (a, n), (b, _) in zip(got, got[1:]))
            assert all(offset % PAGE == 0 for offset, _ in got) and len(got) <= parts
            assert len(got) == 1 or min(size for _, size in got[:-1]) >= SLICE_MIN_BYTES


def test_threaded_moves_give_the_same_bytes():
    chunk = 4 * SLICE_MIN_BYTES
    staging, device, _ = _staging(chunk, 2, threads=3)
    source = np.random.default_rng(1).integers(0, 256, 2 * chunk + 12345, dtype=np.uint8)
    on_device = np.zeros_like(source)
    staging.to_device(on_device.ctypes.data, source.ctypes.data, source.nbytes)
    back = np.empty_like(source)
    staging.to_host(back.ctypes.data, on_device.ctypes.data, source.nbytes)
    assert np.array_equal(on_device, source) and np.array_equal(back, source)
    assert staging._pool is not None                    # the slices did run on the pool


@pytest.mark.gpu
def test_staged_copies_on_cuda_equal_the_drivers(cuda):
    staging = cuda.staging()
    assert staging is not None, "cuMemHostAlloc gave no page-locked memory"
    rng = np.random.default_rng(0)
    for nbytes in (cuda.STAGING_MIN_BYTES, 3 * staging.chunk + 8 * 1000 + 8):
        array = rng.standard_normal(nbytes // 8)
        staged = cuda.allocate(array.nbytes)
        plain = cuda.allocate(array.nbytes)
        cuda.copy_to_device(staged, array)                          # staged (at least STAGING_MIN_BYTES)
        cuda._copy("htod", plain.ptr, array.ctypes.data, array.nbytes, None)      # the driver's
        back_staged, back_plain = np.empty_like(array), np.empty_like(array)
        cuda.copy_to_host(plain, back_staged)                       # staged, from the driver's upload
        cuda._copy("dtoh", back_plain.ctypes.data, staged.ptr, array.nbytes, None)
        assert np.array_equal(back_staged, array) and np.array_equal(back_plain, array)
        cuda.free(staged)
        cuda.free(plain)


class FakeLib:
    """A driver of the cuda-python shape whose device memory is host memory: synchronous copies run at
    once (after the queued work, as the legacy default stream orders them), async ones when an event
    recorded after them, or the context, is synchronized."""

    def __init__(self):
        self.blocks, self.queue, self.done, self.names = {}, [], 0, []
        self.pinned = []

    def _run(self, until):
        while self.done < until:
            dst, src, nbytes = self.queue[self.done]
            ctypes.memmove(dst, src, nbytes)
            self.done += 1

    def cuMemAlloc(self, nbytes):
        block = np.zeros(nbytes, np.uint8)
        self.blocks[block.ctypes.data] = block
        return 0, block.ctypes.data

    def cuMemFree(self, ptr):
        return (0,)

    def cuMemcpyHtoD(self, dst, src, nbytes):
        self.names.append("htod")
        self._run(len(self.queue))
        ctypes.memmove(dst, src, nbytes)
        return (0,)

    cuMemcpyDtoH = cuMemcpyHtoD

    def cuMemcpyHtoDAsync(self, dst, src, nbytes, stream):
        self.names.append("async")
        self.queue.append((dst, src, nbytes))
        return (0,)

    cuMemcpyDtoHAsync = cuMemcpyHtoDAsync

    def cuEventRecord(self, event, stream):
        event[0] = len(self.queue)
        return (0,)

    def cuEventSynchronize(self, event):
        self._run(event[0])
        return (0,)

    def cuCtxSynchronize(self):
        self._run(len(self.queue))
        return (0,)


def _fake_gpu():
    from adoffload.runtime.cuda import CudaDevice
    from adoffload.runtime.gpu import GpuDevice

    class FakeGpu(GpuDevice):
        kind, name = "cuda", "fake"
        DRIVER_NAMES = CudaDevice.DRIVER_NAMES

        def __init__(self):
            self.lib = FakeLib()
            self._setup_common()

        def activate(self):
            pass

        def _create_stream(self):
            return object()

        def _wrap_stream(self, handle):
            return 0

        def _create_event(self):
            return [None]

        def _load_image(self, image):
            raise AssertionError("no modules here")

        def _reset_context(self):
            pass

        def _pinned_host_alloc(self, nbytes):
            block = np.zeros(nbytes, np.uint8)
            self.lib.pinned.append(block)
            return block.ctypes.data
    return FakeGpu()


def test_gpu_device_copies_large_arrays_through_its_staging_and_small_ones_through_the_driver():
    device = _fake_gpu()
    rng = np.random.default_rng(2)
    small = rng.standard_normal(1000)
    large = rng.standard_normal((device.STAGING_MIN_BYTES + 3 * 4096 + 40) // 8)
    for array, staged in ((small, False), (large, True)):
        buf = device.allocate(array.nbytes)
        device.lib.names.clear()
        device.copy_to_device(buf, array)
        back = np.empty_like(array)
        device.copy_to_host(buf, back)
        assert np.array_equal(back, array)
        assert set(device.lib.names) == ({"async"} if staged else {"htod"}), device.lib.names
        device.free(buf)
    assert len(device.lib.pinned) == 1 and device.staging() is device.staging()
    device.STAGING_MIN_BYTES = float("inf")               # staging off: the driver's copies
    buf = device.allocate(large.nbytes)
    device.lib.names.clear()
    device.copy_to_device(buf, large)
    back = np.empty_like(large)
    device.copy_to_host(buf, back)
    assert np.array_equal(back, large) and set(device.lib.names) == {"htod"}


def test_a_device_without_page_locked_memory_keeps_the_drivers_copies():
    device = _fake_gpu()
    device._pinned_host_alloc = lambda nbytes: None
    assert device.staging() is None
    array = np.arange((device.STAGING_MIN_BYTES + 8) // 8, dtype=np.float64)
    buf = device.allocate(array.nbytes)
    device.copy_to_device(buf, array)
    back = np.empty_like(array)
    device.copy_to_host(buf, back)
    assert np.array_equal(back, array) and set(device.lib.names) == {"htod"}


def test_a_copy_stopped_part_way_waits_for_what_it_queued():
    """A DMA queued but not yet followed by its event (Ctrl-C between the two) must not run into a
    buffer the next copy fills: the stopped copy waits for the stream before it raises."""
    staging, device, _ = _staging(4096, 2)
    calls = {"n": 0}
    record = DeferredEvent.record

    def interrupted(event, stream=None):
        calls["n"] += 1
        if calls["n"] == 2:
            raise KeyboardInterrupt
        return record(event, stream)
    source = np.random.default_rng(9).integers(0, 256, 5 * 4096, dtype=np.uint8)
    on_device = np.zeros_like(source)
    DeferredEvent.record = interrupted
    try:
        with pytest.raises(KeyboardInterrupt):
            staging.to_host(np.empty_like(source).ctypes.data, on_device.ctypes.data, source.nbytes)
    finally:
        DeferredEvent.record = record
    assert device.done == len(device.queue)          # everything queued has run
    staging.to_device(on_device.ctypes.data, source.ctypes.data, source.nbytes)
    assert np.array_equal(on_device, source)
