"""The launcher's device path (``launch._launch_device``) checked on the host, in CI.

``HostBackedGpu`` is a Device of kind "cuda" whose memory is separate host memory
(fresh allocations are filled with garbage bytes) and whose code is the host build of the
kernel: the launcher believes it drives a GPU, so it copies In/InOut arrays in, zeroes Out
arrays, sizes dynamic tapes with the counting kernel on the "device", copies results and
the status record back and frees everything. Running the whole table through it and
comparing with plain host launches tests that data movement without a GPU.
"""
from __future__ import annotations


import numpy as np
import pytest

import adoffload as ado
from adoffload.runtime.host import HostDevice

from .table import BY_NAME, arguments, assert_same, run, run_id, runs, variant

GARBAGE = 0xA5


class HostBackedGpu(HostDevice):
    kind = "cuda"
    arch = "sm_90"

    def __init__(self):
        super().__init__(workers=4)
        self.name = "host-backed fake GPU"
        self.live: dict[int, object] = {}
        self.launches = 0

    def allocate(self, nbytes):
        buf = super().allocate(nbytes)
        np.frombuffer((np.ctypeslib.as_ctypes_type(np.uint8) * max(nbytes, 1)).from_address(buf.ptr),
                      np.uint8)[:] = GARBAGE
        self.live[buf.ptr] = buf
        return buf

    def free(self, buf):
        assert self.live.pop(buf.ptr, None) is buf, "freed a buffer this device did not allocate (or twice)"
        super().free(buf)

    def launch(self, function, total_threads, slots, block_size=None, stream=None):
        status = int(slots[-1])
        assert status in self.live, "the status record must live in device memory"
        self.launches += 1
        super().launch(function, total_threads, slots, block_size, stream)


@pytest.fixture
def fake_gpu(monkeypatch):
    """The fake device; kernels asked for NVPTX code get their host build instead."""
    from adoffload.kernels.kernel import Kernel
    original = Kernel.compiled
    requested = []

    def compiled(self, target="host", *, arch=None, **options):
        if target == "nvptx":
            requested.append(arch)
            return original(self, "host", **options)
        return original(self, target, arch=arch, **options)
    monkeypatch.setattr(Kernel, "compiled", compiled)
    device = HostBackedGpu()
    device.requested = requested
    yield device
    assert not device.live, f"{len(device.live)} device buffer(s) leaked"


@pytest.mark.parametrize("which", runs(), ids=run_id)
def test_device_path_matches_host(fake_gpu, which):
    name, mode, width = which
    case = BY_NAME[name]
    kernel = variant(case, mode, width)
    values = arguments(case, mode, seed=3, width=width)
    host = run(kernel, values, case.grid, "cpu")
    device = run(kernel, values, case.grid, fake_gpu)
    assert_same(f"{name} {mode}", device, host, case.rtol, case.atol)
    assert fake_gpu.requested and set(fake_gpu.requested) == {"sm_90"}
    # a dynamic tape: the counting kernel, the scan of its counts on the device (tape_scan.py), the kernel
    assert fake_gpu.launches == (2 + scan_launches(int(np.prod(case.grid))) if kernel.tape is not None else 1)


def scan_launches(n: int) -> int:
    """A chunk-sum and a chunk-scan launch per level above the one serial pass."""
    from adoffload.kernels.tape_scan import level_sizes
    return 2 * (len(level_sizes(n)) - 1) + 1


@ado.kernel
def shifted(x: ado.In[ado.f64], out: ado.Out[ado.f64]):
    i = ado.tid()
    out[i] = x[i + 1]


def test_device_path_bounds_error_and_out_arrays_start_at_zero(fake_gpu):
    x = np.arange(10, dtype=np.float64)
    out = np.full(10, 7.0)
    with pytest.raises(ado.BoundsError) as info:
        shifted(x, out, grid=10, device=fake_gpu)
    assert "'x'" in str(info.value) and "index 10" in str(info.value)
    np.testing.assert_array_equal(out[:9], x[1:])
    assert out[9] == 0.0, "an Out array is zeroed on the device, not copied in"
    shifted(x, out[:9].copy(), grid=9, device=fake_gpu)


def test_device_path_zero_grid_launches_nothing(fake_gpu):
    out = np.full(4, 7.0)
    shifted(np.arange(5.0), out, grid=0, device=fake_gpu)
    assert fake_gpu.launches == 0 and (out == 7.0).all()


def test_arrays_already_on_the_device_are_used_in_place(fake_gpu):
    from adoffload.runtime.dlpack import DeviceArray

    @ado.kernel
    def twice(x: ado.In[ado.f64], y: ado.Out[ado.f64], total: ado.Out[ado.f64]):
        i = ado.tid()
        y[i] = 2.0 * x[i]
        ado.atomic_add(total, 0, x[i])

    x = DeviceArray.from_numpy(np.arange(8.0), device=fake_gpu)
    y, total = DeviceArray.empty(8, np.float64, device=fake_gpu), DeviceArray.empty(1, np.float64, device=fake_gpu)
    live = set(fake_gpu.live)
    twice(x, y, total, grid=8, device=fake_gpu)
    assert set(fake_gpu.live) == live, "device-resident arguments need no staging buffers"
    np.testing.assert_array_equal(y.to_numpy(), 2.0 * np.arange(8.0))
    assert total.to_numpy()[0] == 28.0           # zeroed before the launch: it accumulates
    with pytest.raises(ado.ArgumentError, match="lives on cuda:0"):
        twice(x, y, total, grid=8)                # a host launch cannot read device memory
    x32 = DeviceArray.from_numpy(np.arange(8, dtype=np.float32), device=fake_gpu)
    with pytest.raises(ado.ArgumentError, match="expected dtype float64"):
        twice(x32, y, total, grid=8, device=fake_gpu)
    for array in (x, y, total, x32):
        fake_gpu.free(array.buffer)


def test_the_same_device_array_twice_is_not_promised_noalias(fake_gpu, monkeypatch):
    from adoffload.runtime.dlpack import DeviceArray

    @ado.kernel
    def add(x: ado.In[ado.f64], z: ado.In[ado.f64], y: ado.Out[ado.f64]):
        i = ado.tid()
        y[i] = x[i] + z[i]

    a = DeviceArray.from_numpy(np.arange(4.0), device=fake_gpu)
    b = DeviceArray.from_numpy(np.arange(4.0), device=fake_gpu)
    c = DeviceArray.from_numpy(np.zeros(4), device=fake_gpu)
    seen = []
    original = type(add).compiled

    def spy(self, target="host", **options):
        seen.append(options.get("noalias", False))
        return original(self, target, **options)
    monkeypatch.setattr(type(add), "compiled", spy)
    add(a, b, c, grid=4, device=fake_gpu)
    add(a, a, c, grid=4, device=fake_gpu)          # shared, but only read
    assert seen == [True, False]
    np.testing.assert_array_equal(c.to_numpy(), 2 * np.arange(4.0))
    # shared and written is refused before anything runs (tests/test_argument_overlap.py)
    with pytest.raises(ado.ArgumentError, match="share memory"):
        add(a, b, a, grid=4, device=fake_gpu)
    for array in (a, b, c):
        fake_gpu.free(array.buffer)


def test_dynamic_tapes_of_second_derivatives_are_sized_on_the_device(fake_gpu):
    # two tape levels (reverse over reverse) and a shadow tape (forward over reverse), each level's
    # counts scanned on the "device" in place (two chunk levels for 300 threads): as on the host
    from tests.ad.test_second_order import _bounce
    first = ado.vjp(_bounce, ["x"])
    rng = np.random.default_rng(12)
    n = 300
    x, count, v = rng.uniform(0.2, 2.5, n), rng.integers(0, 7, n), rng.standard_normal(n)
    for second in (ado.vjp(first, ["x"]), ado.jvp(first, ["x"])):
        names = [p.name for p in second.signature.visible_params]
        results = []
        for device in ("cpu", fake_gpu):
            values = dict(x=x, count=count, y=np.zeros(n), d_x=np.zeros(n), d_y=np.ones(n))
            values.update({name: np.zeros(n) for name in names[len(values):]})
            values["d_d_x" if second.mode == "vjp" else "d2_x"][:] = v
            second(*[values[k] for k in names], grid=n, device=device)
            results.append(values["d2_x" if second.mode == "vjp" else "d_d_x"])
        assert np.abs(results[0]).max() > 1.0
        np.testing.assert_allclose(results[1], results[0], rtol=1e-13, atol=1e-13)
