"""The CUDA launch path on CuPy arrays (kernels/launch_run.py ``run_in_place``, runtime/gpu.py
``launch_prepared``, runtime/status_ring.py), driven through the real CudaDevice by a fake driver
(adoffload.testing.fake_cuda): the kernel parameters a cache-hit launch hands the driver, and every
check of the plan still firing on that path (shapes, shadows, dtypes, layout, device, overlap, the
noalias choice, scalars a slot cannot hold, faults, reset, earlier launches' errors)."""
from __future__ import annotations

import ctypes
import os
import struct

import numpy as np
import pytest

import adoffload as ado
from adoffload.language import status as abi_status
from adoffload.runtime.status_ring import RECORD_BYTES
from adoffload.testing.fake_cuda import installed

N = 16


def saxpy_body(a: ado.f32, x: ado.In[ado.f32], y: ado.InOut[ado.f32]):
    i = ado.tid()
    y[i] = a * x[i] + y[i]


def add_body(x: ado.In[ado.f32], z: ado.In[ado.f32], y: ado.Out[ado.f32]):
    i = ado.tid()
    y[i] = x[i] + z[i]


@pytest.fixture(params=["cupy", "cuda-python"])
def cuda(monkeypatch, request):
    """A CudaDevice on the fake driver; each test runs with launches queued through the (fake) CuPy's
    launchKernel and through cuda-python's cuLaunchKernel (runtime/cuda.py ``LAUNCH_CALL_ENV``)."""
    monkeypatch.delenv("ADOFFLOAD_SYNC_LAUNCH", raising=False)
    monkeypatch.setenv("ADOFFLOAD_CUDA_LAUNCH_CALL", request.param)
    with installed() as (device, driver, cupy):
        device.cupy = cupy
        device.driver = driver

        def array(values, dtype=np.float32, **flags):
            return cupy.ndarray(np.asarray(values, dtype), **flags)
        device.array = array
        # kernels made per test: a kernel keeps its loaded function per device spec, and each test has its own device
        global saxpy, add
        saxpy, add = ado.kernel(saxpy_body), ado.kernel(add_body)
        yield device


def _ptr(a):
    return struct.pack("<Q", a.data.ptr)


def _expected_saxpy(a, x, y, grid=N):
    return [struct.pack("<f", a), _ptr(x), struct.pack("<q", x.shape[0]), _ptr(y), struct.pack("<q", y.shape[0]),
            struct.pack("<q", grid)]


def test_cache_hit_hands_the_driver_the_params_of_the_full_path(cuda):
    x, y = cuda.array(np.arange(N)), cuda.array(np.zeros(N))
    driver = cuda.driver
    for _ in range(3):                       # the first launch builds the plan; the others hit it
        saxpy(np.float32(2.0), x, y, grid=N, device=cuda)
    ring = cuda.status_ring()
    assert len(driver.launches) == 3
    for k, launch in enumerate(driver.launches):
        params = launch["params"]
        assert params[:6] == _expected_saxpy(2.0, x, y), params
        assert struct.unpack("<Q", params[6])[0] == ring.device_address + k * RECORD_BYTES
        assert launch["grid"] == (1, 1, 1) and launch["block"] == (256, 1, 1) and launch["stream"] == 0
    assert saxpy._last_plan.quick_sources, "the launches took the quick check"


def test_the_synchronous_path_packs_the_same_params(cuda, monkeypatch):
    """ADOFFLOAD_SYNC_LAUNCH=1: the slots packed contiguously (launch_checked) equal the frame's."""
    x, y, dx, dy = (cuda.array(np.arange(N) + k) for k in range(4))
    reverse = ado.vjp(saxpy, ["x", "y"])
    reverse(np.float32(3.0), x, y, dx, dy, grid=N, device=cuda)
    reverse(np.float32(3.0), x, y, dx, dy, grid=N, device=cuda)
    monkeypatch.setenv("ADOFFLOAD_SYNC_LAUNCH", "1")
    reverse(np.float32(3.0), x, y, dx, dy, grid=N, device=cuda)
    launches = cuda.driver.launches
    assert len(launches) == 3
    assert launches[0]["params"][:-1] == launches[1]["params"][:-1] == launches[2]["params"][:-1]
    assert launches[0]["params"][:-1] == [struct.pack("<f", 3.0)] + [
        b for a in (x, y, dx, dy) for b in (_ptr(a), struct.pack("<q", N))] + [struct.pack("<q", N)]
    memsets = cuda.driver.memsets
    assert memsets and memsets[-1][2] == 8 * abi_status.WORDS, "the synchronous launch cleared its record"


def test_scalar_changes_and_other_arrays_reach_the_driver(cuda):
    x, y, x2 = cuda.array(np.arange(N)), cuda.array(np.zeros(N)), cuda.array(np.ones(N))
    saxpy(np.float32(2.0), x, y, grid=N, device=cuda)
    saxpy(np.float32(-1.5), x2, y, grid=N, device=cuda)
    saxpy(np.float32(0.25), x, y, grid=N, device=cuda)
    got = [launch["params"][:6] for launch in cuda.driver.launches]
    assert got == [_expected_saxpy(2.0, x, y), _expected_saxpy(-1.5, x2, y), _expected_saxpy(0.25, x, y)]


def test_out_arrays_not_written_in_full_are_zeroed_on_the_fast_path(cuda):
    @ado.kernel
    def half(x: ado.In[ado.f32], y: ado.Out[ado.f32]):
        i = ado.tid()
        y[2 * i] = x[i]
    x, y = cuda.array(np.arange(N)), cuda.array(np.full(2 * N, 7.0))
    for _ in range(2):
        half(x, y, grid=N, device=cuda)
        assert cuda.driver.memsets[-1] == (y.data.ptr, 0, y.nbytes)
        np.testing.assert_array_equal(y.get(), 0.0)
        y = cuda.array(np.full(2 * N, 7.0))


def test_adjacent_out_arrays_are_zeroed_in_one_memset_after_the_context_is_set(cuda):
    @ado.kernel
    def halves(x: ado.In[ado.f32], y: ado.Out[ado.f32], z: ado.Out[ado.f32]):
        i = ado.tid()
        y[2 * i] = x[i]
        z[2 * i + 1] = x[i]
    x = cuda.array(np.arange(N))
    block = cuda.array(np.full(4 * N, 7.0))             # y and z side by side in one allocation
    y, z = cuda.array(np.zeros(2 * N)), cuda.array(np.zeros(2 * N))
    y.data.ptr, z.data.ptr = block.data.ptr, block.data.ptr + 8 * N
    spaced = cuda.array(np.ones(6 * N))                 # two arrays with a gap between them (two
    apart_y, apart_z = cuda.array(np.ones(2 * N)), cuda.array(np.ones(2 * N))   # allocations may touch)
    apart_y.data.ptr, apart_z.data.ptr = spaced.data.ptr, spaced.data.ptr + 16 * N
    driver = cuda.driver
    for k in range(2):
        driver.memsets.clear(), driver.order.clear()
        halves(x, y, z, grid=N, device=cuda)
        assert driver.memsets == [(block.data.ptr, 0, 16 * N)], driver.memsets
        assert driver.order[-3:] == ["context", "memset", "launch"], driver.order
        if k:                                               # a cache hit: nothing else
            assert driver.order == ["context", "memset", "launch"], driver.order
        np.testing.assert_array_equal(block.get(), 0.0)        # the fake runs no kernel: the memset's zeros
        driver.memsets.clear()
        halves(x, apart_y, apart_z, grid=N, device=cuda)
        assert sorted(driver.memsets) == sorted([(apart_y.data.ptr, 0, 8 * N), (apart_z.data.ptr, 0, 8 * N)])
        block = cuda.array(np.full(4 * N, 7.0))
        y.data.ptr, z.data.ptr = block.data.ptr, block.data.ptr + 8 * N
    assert halves._last_plan.quick_sources


def test_zero_ranges_merge_only_adjacent_ranges():
    from adoffload.kernels.launch_run import zero_ranges
    assert zero_ranges([(100, 8), (108, 4), (200, 8), (50, 0)]) == ((100, 12), (200, 8))
    assert zero_ranges([(208, 8), (200, 8), (100, 8)]) == ((100, 8), (200, 16))
    assert zero_ranges([(100, 8), (109, 8)]) == ((100, 8), (109, 8))
    assert zero_ranges([]) == ()


def test_one_context_set_per_cache_hit_launch(cuda):
    x, y = cuda.array(np.arange(N)), cuda.array(np.zeros(N))
    _hit(cuda, saxpy, (np.float32(2.0), x, y))
    cuda.driver.order.clear()
    for _ in range(3):
        saxpy(np.float32(2.0), x, y, grid=N, device=cuda)
    assert cuda.driver.order == ["context", "launch"] * 3


def _hit(cuda, kernel, args, grid=N):
    kernel(*args, grid=grid, device=cuda)
    kernel(*args, grid=grid, device=cuda)
    assert kernel._last_plan.quick_sources


def test_short_shadows_are_refused_after_a_cache_hit(cuda):
    reverse = ado.vjp(saxpy, ["x", "y"])
    x, y, dx, dy = (cuda.array(np.zeros(N)) for _ in range(4))
    _hit(cuda, reverse, (np.float32(1.0), x, y, dx, dy))
    before = len(cuda.driver.launches)
    with pytest.raises(ado.Error, match="d_x"):
        reverse(np.float32(1.0), x, y, cuda.array(np.zeros(N - 1)), dy, grid=N, device=cuda)
    with pytest.raises(ado.Error, match="d_y"):
        reverse(np.float32(1.0), x, y, dx, cuda.array(np.zeros(0)), grid=N, device=cuda)
    assert len(cuda.driver.launches) == before


def test_dtype_layout_and_device_are_checked_after_a_cache_hit(cuda):
    x, y = cuda.array(np.arange(N)), cuda.array(np.zeros(N))
    _hit(cuda, saxpy, (np.float32(2.0), x, y))
    before = len(cuda.driver.launches)
    with pytest.raises(ado.Error, match="'x'"):
        saxpy(np.float32(2.0), cuda.array(np.arange(N), np.float64), y, grid=N, device=cuda)
    with pytest.raises(ado.Error, match="'x'.*contiguous|contiguous.*'x'|'x'"):
        saxpy(np.float32(2.0), cuda.array(np.arange(N), c_contiguous=False), y, grid=N, device=cuda)
    other = cuda.array(np.arange(N))
    other.data.device_id = 1
    with pytest.raises(ado.Error, match="cuda:1"):
        saxpy(np.float32(2.0), other, y, grid=N, device=cuda)
    assert len(cuda.driver.launches) == before


def test_overlap_is_refused_on_the_fast_path_every_time(cuda):
    reverse = ado.vjp(saxpy, ["x", "y"])
    x, y, dx, dy = (cuda.array(np.zeros(N)) for _ in range(4))
    args = (np.float32(1.0), x, y, dx, dy)
    _hit(cuda, reverse, args)
    for _ in range(2):                       # the answer kept for the last addresses never hides an overlap
        with pytest.raises(ado.Error, match="overlap|share"):
            reverse(np.float32(1.0), x, y, dx, y, grid=N, device=cuda)
        reverse(*args, grid=N, device=cuda)
    with pytest.raises(ado.Error, match="overlap|share"):
        saxpy(np.float32(1.0), y, y, grid=N, device=cuda)


def test_the_same_array_twice_takes_the_variant_without_noalias(cuda):
    x, z, y = cuda.array(np.arange(N)), cuda.array(np.ones(N)), cuda.array(np.zeros(N))
    _hit(cuda, add, (x, z, y))
    add(x, x, y, grid=N, device=cuda)
    add(x, z, y, grid=N, device=cuda)
    add(x, x, y, grid=N, device=cuda)
    handles = [launch["handle"] for launch in cuda.driver.launches]
    assert handles[0] == handles[1] == handles[3] != handles[2] == handles[4], handles
    assert sorted(key[0] for key in add._last_plan.variants) == [False, True]


def test_a_scalar_the_slot_cannot_hold_takes_the_full_path(cuda):
    x, y = cuda.array(np.arange(N)), cuda.array(np.zeros(N))
    _hit(cuda, saxpy, (2.0, x, y))
    before = len(cuda.driver.launches)
    with pytest.warns(RuntimeWarning, match="overflow"):
        saxpy(1e300, x, y, grid=N, device=cuda)     # the f32 slot cannot hold it: the full path converts it
    assert len(cuda.driver.launches) == before + 1
    assert cuda.driver.launches[-1]["params"][:6] == _expected_saxpy(float("inf"), x, y)


def test_an_earlier_launch_error_is_raised_by_the_next_launch(cuda):
    x, y = cuda.array(np.arange(N)), cuda.array(np.zeros(N))
    _hit(cuda, saxpy, (np.float32(2.0), x, y))
    status = struct.unpack("<Q", cuda.driver.launches[-1]["params"][6])[0]
    record = (ctypes.c_int64 * abi_status.WORDS).from_address(status)   # the "kernel" fails: thread 3, x[16]
    record[:] = [abi_status.OUT_OF_BOUNDS, 1, 16, 0][:abi_status.WORDS]
    before = len(cuda.driver.launches)
    with pytest.raises(ado.BoundsError, match="kernel 'saxpy_body': index 16 .*array 'x'.*reported after the launch"):
        saxpy(np.float32(2.0), x, y, grid=N, device=cuda)
    assert len(cuda.driver.launches) == before
    saxpy(np.float32(2.0), x, y, grid=N, device=cuda)
    assert len(cuda.driver.launches) == before + 1


def test_a_faulted_or_reset_device_refuses_the_fast_path(cuda):
    x, y = cuda.array(np.arange(N)), cuda.array(np.zeros(N))
    _hit(cuda, saxpy, (np.float32(2.0), x, y))
    cuda.fault = ado.KernelFaultError("an illegal address")
    with pytest.raises(ado.KernelFaultError, match="unusable after an earlier kernel fault"):
        saxpy(np.float32(2.0), x, y, grid=N, device=cuda)
    cuda.fault = None
    cuda.reset()
    with pytest.raises(ado.Error, match="before device.reset"):
        saxpy(np.float32(2.0), x, y, grid=N, device=cuda)


def test_launches_are_queued_through_the_chosen_binding(cuda):
    x, y = cuda.array(np.arange(N)), cuda.array(np.zeros(N))
    _hit(cuda, saxpy, (np.float32(2.0), x, y))
    through_cupy = cuda.driver.cupy_launches
    if os.environ["ADOFFLOAD_CUDA_LAUNCH_CALL"] == "cupy":
        assert through_cupy == len(cuda.driver.launches) == 2
    else:
        assert through_cupy == 0 and len(cuda.driver.launches) == 2


def test_a_failed_launch_call_raises_its_driver_error_and_latches_a_fault(cuda):
    x, y = cuda.array(np.arange(N)), cuda.array(np.zeros(N))
    _hit(cuda, saxpy, (np.float32(2.0), x, y))
    cuda.driver.launch_error = "CUDA_ERROR_ILLEGAL_ADDRESS"
    with pytest.raises(ado.KernelFaultError, match="cuLaunchKernel failed: CUDA_ERROR_ILLEGAL_ADDRESS .*kernel 'saxpy_body"):
        saxpy(np.float32(2.0), x, y, grid=N, device=cuda)
    cuda.driver.launch_error = None
    with pytest.raises(ado.KernelFaultError, match="unusable after an earlier kernel fault"):
        saxpy(np.float32(2.0), x, y, grid=N, device=cuda)
    cuda.fault = None


def test_a_launch_error_that_is_not_a_fault_is_raised_and_not_latched(cuda):
    x, y = cuda.array(np.arange(N)), cuda.array(np.zeros(N))
    _hit(cuda, saxpy, (np.float32(2.0), x, y))
    cuda.driver.launch_error = "CUDA_ERROR_INVALID_VALUE"
    with pytest.raises(ado.DeviceError, match="CUDA_ERROR_INVALID_VALUE"):
        saxpy(np.float32(2.0), x, y, grid=N, device=cuda)
    assert cuda.fault is None
    cuda.driver.launch_error = None
    saxpy(np.float32(2.0), x, y, grid=N, device=cuda)
