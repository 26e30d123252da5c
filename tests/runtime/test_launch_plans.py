"""The launcher's plans (kernels/launch_plan.py): a launch that repeats an earlier one's argument
signature reuses its checks, variant and slot layout, and every check that depends on the values
still runs on it: overlaps, ranges of scalars, read-only and misaligned arrays, other shapes (new
plans, with their own shadow checks), other binding orders. Tiny grids run on the calling thread."""
from __future__ import annotations

import threading

import numpy as np
import pytest

import adoffload as ado
from adoffload.errors import ArgumentError, GridError, ShapeError
from tests.gpu.test_device_path import fake_gpu  # noqa: F401  (the host-backed fake GPU fixture)


@ado.kernel
def scaled(a: ado.f32, n: ado.i32, x: ado.In[ado.f32], out: ado.Out[ado.f32]):
    i = ado.tid()
    out[i] = a * x[i] + ado.f32(n)


def test_repeated_launches_see_new_data_and_new_arrays():
    for k in range(5):
        x, out = np.arange(16, dtype=np.float32) + k, np.zeros(16, np.float32)
        scaled(2.0, k, x, out, grid=16)
        np.testing.assert_array_equal(out, 2.0 * x + k)
    assert scaled._last_plan is not None, "the launches should share a plan"


def test_a_cached_signature_still_refuses_overlap_and_read_only_outputs():
    x, out = np.ones(16, np.float32), np.zeros(16, np.float32)
    scaled(1.0, 0, x, out, grid=16)
    with pytest.raises(ArgumentError, match="arrays 'x' and 'out' share memory"):
        scaled(1.0, 0, x, x, grid=16)
    buffer = np.zeros(40, np.float32)
    with pytest.raises(ArgumentError, match="share memory"):
        scaled(1.0, 0, buffer[:16], buffer[8:24], grid=16)           # overlapping views, same signature
    frozen = np.zeros(16, np.float32)
    frozen.flags.writeable = False
    with pytest.raises(ArgumentError, match="read-only"):
        scaled(1.0, 0, x, frozen, grid=16)
    scaled(1.0, 0, x, out, grid=16)                                   # and the plan still works


def test_misaligned_and_strided_arrays_are_refused_after_a_good_launch():
    x, out = np.ones(16, np.float32), np.zeros(16, np.float32)
    scaled(1.0, 0, x, out, grid=16)
    raw = np.zeros(16 * 4 + 1, np.uint8)
    misaligned = np.frombuffer(raw.data, np.float32, 16, offset=1)
    with pytest.raises(ArgumentError, match="not a multiple of its element size"):
        scaled(1.0, 0, misaligned, out, grid=16)
    with pytest.raises(ArgumentError, match="not C-contiguous"):
        scaled(1.0, 0, np.ones(32, np.float32)[::2], out, grid=16)


def test_scalars_out_of_range_or_of_the_wrong_kind_are_refused_after_a_good_launch():
    x, out = np.ones(16, np.float32), np.zeros(16, np.float32)
    scaled(1.0, 3, x, out, grid=16)
    out[:] = 7.0
    with pytest.raises(ArgumentError, match="does not fit in ado.i32"):
        scaled(1.0, 2**31, x, out, grid=16)
    assert (out == 7.0).all(), "nothing may run, nor Out arrays be zeroed, before the error"
    with pytest.raises(ArgumentError, match="expected a float"):
        scaled(True, 3, x, out, grid=16)
    with pytest.raises(ArgumentError, match="expected an integer"):
        scaled(1.0, 3.0, x, out, grid=16)
    with pytest.raises(GridError):
        scaled(1.0, 3, x, out, grid=True)
    with pytest.warns(RuntimeWarning, match="overflow"):
        scaled(1e300, 0, x, out, grid=16)                            # rounds to inf, as numpy does
    assert np.isinf(out).all()
    scaled(np.float32(0.5), np.int64(1), x, out, grid=np.int64(16))  # numpy scalars and grid: fine
    np.testing.assert_array_equal(out, 1.5)


def test_keyword_order_and_positions_bind_the_same_params():
    x, out = np.arange(16, dtype=np.float32), np.zeros(16, np.float32)
    for call in (lambda: scaled(2.0, 1, x, out, grid=16), lambda: scaled(2.0, 1, out=out, x=x, grid=16),
                 lambda: scaled(x=x, out=out, n=1, a=2.0, grid=16), lambda: scaled(2.0, out=out, n=1, x=x, grid=16)):
        for _ in range(2):
            out[:] = 0
            call()
            np.testing.assert_array_equal(out, 2.0 * x + 1)


def test_another_shape_gets_its_own_plan_and_shadow_check():
    gradient = ado.vjp(scaled, ["x"])
    for n in (16, 8, 16):
        x, out, d_x = np.ones(n, np.float32), np.zeros(n, np.float32), np.zeros(n, np.float32)
        gradient(2.0, 0, x, out, d_x=d_x, d_out=np.ones(n, np.float32), grid=n)
        np.testing.assert_array_equal(d_x, 2.0)
    with pytest.raises(ShapeError, match="'d_x'"):
        gradient(2.0, 0, np.ones(8, np.float32), np.zeros(8, np.float32), d_x=np.zeros(16, np.float32),
                 d_out=np.ones(8, np.float32), grid=8)


class Wrapped:
    """An array-like (``__array__``) that is no ndarray."""

    def __init__(self, array):
        self.array = array

    def __array__(self, dtype=None, copy=None):
        return self.array


class Sub(np.ndarray):
    pass


def test_zero_d_arrays_array_likes_and_subclasses_take_the_full_path_every_time():
    x, out = np.arange(16, dtype=np.float32), np.zeros(16, np.float32)
    for _ in range(2):
        scaled(np.array(2.0), np.array(1), x, out, grid=16)
        np.testing.assert_array_equal(out, 2.0 * x + 1)
        scaled(1.0, 0, Wrapped(x + 1), out, grid=16)
        np.testing.assert_array_equal(out, x + 1)
        scaled(1.0, 2, x.view(Sub), out.view(Sub), grid=16)
        np.testing.assert_array_equal(out, x + 2)
        with pytest.raises(ArgumentError, match="share memory"):
            scaled(1.0, 2, x.view(Sub), x, grid=16)


def test_plans_per_kernel_are_bounded():
    from adoffload.kernels.launch_plan import MAX_PLANS, plans_of

    @ado.kernel
    def double(x: ado.In[ado.f64], out: ado.Out[ado.f64]):
        i = ado.tid()
        out[i] = 2.0 * x[i]
    for n in range(1, MAX_PLANS + 10):
        out = np.zeros(n)
        double(np.ones(n), out, grid=n)
        assert (out == 2.0).all()
    assert len(plans_of(double)) <= MAX_PLANS


def test_a_tiny_grid_runs_on_the_calling_thread(monkeypatch):
    from adoffload.runtime import get_device
    from adoffload.runtime.host import HostDevice
    x, out = np.arange(16, dtype=np.float32), np.zeros(16, np.float32)
    scaled(1.0, 0, x, out, grid=16)

    def no_pool(self):
        raise AssertionError("a 16-thread launch woke the thread pool")
    monkeypatch.setattr(HostDevice, "_get_pool", no_pool)
    monkeypatch.setattr(HostDevice, "launch", lambda *a, **k: no_pool(None))
    scaled(3.0, 0, x, out, grid=16)
    np.testing.assert_array_equal(out, 3.0 * x)
    if get_device("cpu").workers > 1:
        big = np.ones(1 << 16, np.float32)
        with pytest.raises(AssertionError, match="woke the thread pool"):
            scaled(1.0, 0, big, np.zeros_like(big), grid=big.size)


def test_concurrent_launches_of_one_plan_from_threads():
    errors = []

    def work(k):
        try:
            for j in range(50):
                x, out = np.full(16, float(k * 100 + j), np.float32), np.zeros(16, np.float32)
                scaled(1.0, 0, x, out, grid=16)
                assert (out == x).all()
        except Exception as exc:       # reported below
            errors.append(exc)
    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors


def test_bounds_errors_come_through_a_cached_plan():
    @ado.kernel
    def shifted(x: ado.In[ado.f64], out: ado.Out[ado.f64]):
        i = ado.tid()
        out[i] = x[i + 1]
    x, out = np.arange(9.0), np.zeros(8)
    shifted(x, out, grid=8)
    np.testing.assert_array_equal(out, x[1:])
    with pytest.raises(ado.BoundsError, match="index 8 is out of bounds for axis 0 of array 'x' with shape"):
        shifted(np.arange(8.0), out, grid=8)
    with pytest.raises(ado.BoundsError, match="index 8 is out of bounds"):
        shifted(np.arange(8.0), out, grid=8)          # the same signature again: its plan


def test_data_address_reads_what_numpy_says():
    from adoffload.runtime.host import data_address
    base = np.arange(40, dtype=np.float64)
    frozen = base[5:9]
    frozen.flags.writeable = False
    for array in (base, base[3:], base[::3], frozen, base.reshape(5, 8)[1:, 2:], np.empty(0), np.zeros(()),
                  base.view(Sub), np.zeros(7, np.int8)[1:]):
        assert data_address(array) == array.ctypes.data


def test_a_dynamic_tape_is_sized_anew_on_every_launch_of_a_plan():
    from tests.ad.test_second_order import _bounce

    def reference(x, count):
        c = np.ones_like(x)
        for i in range(len(x)):
            z = x[i]
            for _ in range(count[i]):
                z = z * 0.5 if z > 1.0 else z * 3.0
            c[i] = z / x[i]
        return 3.0 * c * c * x * x
    gradient = ado.vjp(_bounce, ["x"])
    rng = np.random.default_rng(8)
    for top in (2, 9, 0, 5):                       # other tape sizes through the same signature
        x, count = rng.uniform(0.2, 2.5, 40), rng.integers(0, top + 1, 40)
        d_x = np.zeros(40)
        gradient(x, count, np.zeros(40), d_x, np.ones(40), grid=40)
        np.testing.assert_allclose(d_x, reference(x, count), rtol=1e-12)


def test_a_refused_scalar_leaves_device_arrays_alone(fake_gpu):
    from adoffload.runtime.dlpack import DeviceArray

    @ado.kernel
    def weighted_total(w: ado.i32, x: ado.In[ado.f64], total: ado.Out[ado.f64]):
        i = ado.tid()
        ado.atomic_add(total, 0, ado.f64(w) * x[i])
    x = DeviceArray.from_numpy(np.arange(8.0), device=fake_gpu)
    total = DeviceArray.empty(1, np.float64, device=fake_gpu)
    try:
        weighted_total(2, x, total, grid=8, device=fake_gpu)
        assert total.to_numpy()[0] == 56.0
        with pytest.raises(ArgumentError, match="does not fit in ado.i32"):
            weighted_total(2**31, x, total, grid=8, device=fake_gpu)
        assert total.to_numpy()[0] == 56.0, "an Out array on the device was zeroed before the error"
    finally:
        for array in (x, total):
            fake_gpu.free(array.buffer)
