"""Launches that do not wait for their kernels (kernels/launch_run.py ``_launch_in_place``) and the
status ring their errors go through (runtime/status_ring.py), checked on the host.

``QueueingGpu`` is the host-backed fake GPU of tests/gpu/test_device_path.py with the asynchronous
API of a CUDA device: ``launch_prepared`` and ``zero`` only queue their work, which runs when the
fake synchronizes (``synchronize``, a copy to or from the host, a synchronous launch), as a GPU
would run it later. So a test sees when an error is reported, not only that it is.
"""
from __future__ import annotations

import ctypes
import types

import numpy as np
import pytest

import adoffload as ado
from adoffload.runtime.dlpack import DeviceArray
from adoffload.runtime.host import HostDevice
from adoffload.runtime.status_ring import RECORD_BYTES, StatusRing
from tests.gpu.test_device_path import HostBackedGpu, fake_gpu  # noqa: F401  (fake_gpu: the fixture it extends)


class QueueingGpu(HostBackedGpu):
    def __init__(self, ring_count: int = 8):
        super().__init__()
        self.queue: list = []
        self.syncs = 0
        self.memory = (ctypes.c_int64 * (ring_count * RECORD_BYTES // 8))()
        address = ctypes.addressof(self.memory)
        self.ring = StatusRing(address, address, ring_count, self._drain)
        self.ring.closed = True             # the fake's memory dies with the test: nothing to report at exit

    # --- the asynchronous API of GpuDevice ---------------------------------------------------
    def status_ring(self):
        return self.ring

    def prepare_launch(self, function, total_threads, block_size=None, blocks=None):
        return types.SimpleNamespace(function=function, threads=total_threads)

    def launch_prepared(self, prepared, params, slot_count, zero=()):
        for ptr, nbytes in zero:
            self.zero(ptr, nbytes)
        pointers = (ctypes.c_uint64 * slot_count).from_address(params)
        slots = np.array([ctypes.c_uint64.from_address(p).value for p in pointers], np.uint64)
        self.queue.append(lambda: HostDevice.launch(self, prepared.function, prepared.threads, slots))
        self.launches += 1

    def zero(self, ptr, nbytes):
        self.queue.append(lambda: ctypes.memset(ptr, 0, nbytes))

    def scratch(self, nbytes):
        return self.allocate(nbytes).ptr

    def release_scratch(self, ptr):
        self.free(self.live[ptr])

    def launch_checked(self, prepared, slots_address, slot_count, status_ptr, status_words, record_address):
        self._drain()
        ctypes.memset(status_ptr, 0, 8 * status_words)
        slots = np.array((ctypes.c_uint64 * slot_count).from_address(slots_address), np.uint64)
        self.launch(prepared.function, prepared.threads, slots)
        ctypes.memmove(record_address, status_ptr, 8 * status_words)

    def synchronize(self):
        self._drain()
        self.ring.check()

    def _drain(self):
        self.syncs += 1
        queue, self.queue = self.queue, []
        for work in queue:
            work()

    def copy_to_device(self, buf, array, stream=None):
        self._drain()
        super().copy_to_device(buf, array, stream)

    def copy_to_host(self, buf, array, stream=None):
        self._drain()
        super().copy_to_host(buf, array, stream)
        self.ring.check()


@pytest.fixture
def queueing_gpu(fake_gpu, monkeypatch):
    monkeypatch.delenv("ADOFFLOAD_SYNC_LAUNCH", raising=False)
    device = QueueingGpu()
    device.requested = fake_gpu.requested
    arrays = []

    def array(values):
        arrays.append(DeviceArray.from_numpy(np.asarray(values, np.float64), device=device))
        return arrays[-1]
    device.array = array
    yield device
    device.queue.clear()
    for a in arrays:
        device.free(a.buffer)
    assert not device.live, f"{len(device.live)} device buffer(s) leaked"


@ado.kernel
def shifted(x: ado.In[ado.f64], out: ado.Out[ado.f64]):
    i = ado.tid()
    out[i] = x[i + 1]


@ado.kernel
def total_of(x: ado.In[ado.f64], total: ado.Out[ado.f64]):
    i = ado.tid()
    ado.atomic_add(total, 0, x[i])


def test_a_launch_on_device_arrays_returns_before_its_kernel_runs(queueing_gpu):
    x, out = queueing_gpu.array(np.arange(9.0)), queueing_gpu.array(np.zeros(8))
    shifted(x, out, grid=8, device=queueing_gpu)
    shifted(x, out, grid=8, device=queueing_gpu)       # the cached plan: no full path
    assert len(queueing_gpu.queue) == 2, "queued, not run: the launch did not wait"
    np.testing.assert_array_equal(out.to_numpy(), np.arange(1.0, 9.0))
    assert not queueing_gpu.queue


def test_a_bounds_error_is_raised_at_synchronize_naming_the_launch(queueing_gpu):
    x, out = queueing_gpu.array(np.arange(8.0)), queueing_gpu.array(np.zeros(8))
    shifted(x, out, grid=7, device=queueing_gpu)        # a good launch first: the plan
    queueing_gpu.synchronize()
    shifted(x, out, grid=8, device=queueing_gpu)       # thread 7 reads x[8]
    with pytest.raises(ado.BoundsError) as info:
        queueing_gpu.synchronize()
    text = str(info.value)
    assert "kernel 'shifted': index 8 is out of bounds for axis 0 of array 'x' with shape (8,)" in text, text
    assert "reported after the launch" in text and "ADOFFLOAD_SYNC_LAUNCH=1" in text, text
    np.testing.assert_array_equal(out.to_numpy()[:7], np.arange(1.0, 8.0))   # every other thread ran
    queueing_gpu.synchronize()                          # reported once, then forgotten
    shifted(x, out, grid=7, device=queueing_gpu)        # and the device still works
    np.testing.assert_array_equal(out.to_numpy()[:7], np.arange(1.0, 8.0))


def test_the_next_launch_raises_an_earlier_error_and_does_not_run(queueing_gpu):
    x, out = queueing_gpu.array(np.arange(8.0)), queueing_gpu.array(np.zeros(8))
    total = queueing_gpu.array(np.zeros(1))
    shifted(x, out, grid=8, device=queueing_gpu)
    queueing_gpu._drain()                               # the GPU ran it; nobody has looked yet
    with pytest.raises(ado.BoundsError, match="kernel 'shifted': index 8 .*reported after the launch"):
        total_of(x, total, grid=8, device=queueing_gpu)
    assert not queueing_gpu.queue, "the launch that found the error queued nothing"
    total_of(x, total, grid=8, device=queueing_gpu)
    assert total.to_numpy()[0] == 28.0


def test_a_copy_to_the_host_reports_the_error_of_the_launch_it_waited_for(queueing_gpu):
    x, out = queueing_gpu.array(np.arange(8.0)), queueing_gpu.array(np.zeros(8))
    shifted(x, out, grid=8, device=queueing_gpu)
    with pytest.raises(ado.BoundsError, match="index 8"):
        out.to_numpy()


def test_the_earliest_failed_launch_is_reported_and_later_ones_counted(queueing_gpu):
    x, out = queueing_gpu.array(np.arange(8.0)), queueing_gpu.array(np.zeros(8))
    short = queueing_gpu.array(np.arange(5.0))
    shifted(short, out, grid=8, device=queueing_gpu)    # index 5 of x
    shifted(x, out, grid=8, device=queueing_gpu)                            # index 8 of x
    with pytest.raises(ado.BoundsError) as info:
        queueing_gpu.synchronize()
    text = str(info.value)
    assert "index 5 is out of bounds for axis 0 of array 'x' with shape (5,)" in text, text
    assert "1 later launch on the device failed too" in text, text


def test_out_arrays_are_zeroed_in_order_with_the_queued_kernels(queueing_gpu):
    x, total = queueing_gpu.array(np.arange(8.0)), queueing_gpu.array(np.full(1, 99.0))
    for _ in range(3):
        total_of(x, total, grid=8, device=queueing_gpu)   # each launch starts its Out array at zero
    assert total.to_numpy()[0] == 28.0


def test_a_full_ring_waits_once_and_reuses_its_records(queueing_gpu):
    x, total = queueing_gpu.array(np.arange(8.0)), queueing_gpu.array(np.zeros(1))
    count = queueing_gpu.ring.count
    syncs = queueing_gpu.syncs
    for _ in range(2 * count + 1):
        total_of(x, total, grid=8, device=queueing_gpu)
    assert queueing_gpu.syncs - syncs == 2, "one wait per full ring, none per launch"
    assert total.to_numpy()[0] == 28.0


def test_an_error_in_a_full_ring_is_raised_by_the_launch_that_needs_its_record(queueing_gpu):
    x, out = queueing_gpu.array(np.arange(8.0)), queueing_gpu.array(np.zeros(8))
    shifted(x, out, grid=7, device=queueing_gpu)
    queueing_gpu.synchronize()
    shifted(x, out, grid=8, device=queueing_gpu)         # fails once the fake runs it
    for _ in range(queueing_gpu.ring.count - queueing_gpu.ring.next):
        shifted(x, out, grid=7, device=queueing_gpu)     # nothing ran yet: the record still reads zero
    assert queueing_gpu.ring.next == queueing_gpu.ring.count
    with pytest.raises(ado.BoundsError, match="index 8"):
        shifted(x, out, grid=7, device=queueing_gpu)     # the ring is full: wait, and report


def test_the_synchronous_switch_reports_at_the_launch(queueing_gpu, monkeypatch):
    monkeypatch.setenv("ADOFFLOAD_SYNC_LAUNCH", "1")
    x, out = queueing_gpu.array(np.arange(8.0)), queueing_gpu.array(np.zeros(8))
    with pytest.raises(ado.BoundsError) as info:
        shifted(x, out, grid=8, device=queueing_gpu)
    assert "reported after the launch" not in str(info.value)
    monkeypatch.setenv("ADOFFLOAD_SYNC_LAUNCH", "0")
    shifted(x, out, grid=8, device=queueing_gpu)          # the same plan, asynchronous again
    assert len(queueing_gpu.queue) == 1
    with pytest.raises(ado.BoundsError, match="reported after the launch"):
        queueing_gpu.synchronize()


def test_numpy_arrays_on_the_gpu_still_wait_and_report_at_the_launch(queueing_gpu):
    with pytest.raises(ado.BoundsError) as info:
        shifted(np.arange(8.0), np.zeros(8), grid=8, device=queueing_gpu)
    assert "reported after the launch" not in str(info.value)


def test_unreported_errors_are_collected_at_exit():
    memory = (ctypes.c_int64 * (4 * RECORD_BYTES // 8))()
    address = ctypes.addressof(memory)
    waits = []
    ring = StatusRing(address, address, 4, lambda: waits.append(1))
    ring.closed = True

    def report(record, later):
        raise ado.BoundsError(f"index {record[2]} of launch {record[1]}")
    with ring.lock:
        first, second = ring.take(report), ring.take(report)
    assert second - first == RECORD_BYTES
    ctypes.c_int64.from_address(second).value = 1
    ctypes.c_int64.from_address(second + 8).value = 1
    ctypes.c_int64.from_address(second + 16).value = 42
    assert ring.is_set()
    assert ring.pending_errors() == ["BoundsError: index 42 of launch 1"] and waits == [1]
    assert not ring.is_set() and ring.next == 0
    ring.check()                                          # nothing left: no wait, no error
    assert waits == [1]


def test_the_quick_check_of_device_arrays_still_refuses_what_the_plan_refuses(queueing_gpu):
    x, out = queueing_gpu.array(np.arange(9.0)), queueing_gpu.array(np.zeros(8))
    shifted(x, out, grid=8, device=queueing_gpu)
    assert shifted._last_plan.quick_sources, "DeviceArrays on a device with a status ring: the quick check"
    shifted(x, out, grid=8, device=queueing_gpu)
    with pytest.raises(ado.ArgumentError, match="share memory"):
        shifted(out, out, grid=8, device=queueing_gpu)              # written and read: refused
    x32 = DeviceArray.from_numpy(np.arange(9, dtype=np.float32), device=queueing_gpu)
    with pytest.raises(ado.ArgumentError, match="expected dtype float64"):
        shifted(x32, out, grid=8, device=queueing_gpu)
    queueing_gpu.free(x32.buffer)
    np.testing.assert_array_equal(out.to_numpy(), np.arange(1.0, 9.0))


def test_a_refused_scalar_through_the_quick_check_leaves_device_arrays_alone(queueing_gpu):
    @ado.kernel
    def weighted_total(w: ado.i32, x: ado.In[ado.f64], total: ado.Out[ado.f64]):
        i = ado.tid()
        ado.atomic_add(total, 0, ado.f64(w) * x[i])
    x, total = queueing_gpu.array(np.arange(8.0)), queueing_gpu.array(np.zeros(1))
    weighted_total(2, x, total, grid=8, device=queueing_gpu)
    assert weighted_total._last_plan.quick_sources
    assert total.to_numpy()[0] == 56.0
    with pytest.raises(ado.ArgumentError, match="does not fit in ado.i32"):
        weighted_total(2**31, x, total, grid=8, device=queueing_gpu)
    assert not queueing_gpu.queue and total.to_numpy()[0] == 56.0, "nothing zeroed or launched"
    queueing_gpu.synchronize()
