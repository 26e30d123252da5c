"""Launch plans on a real CUDA device (skip without one): repeated launches with DeviceArrays and CuPy
arrays (read through DLPack on every launch) reuse the plan and still see new data, refuse overlaps
and misshapen shadows, report bounds errors through ``GpuDevice.launch_checked``; numpy seeds are
staged in and not copied back (a read-only seed is fine), GPU seeds are used in place."""
from __future__ import annotations

import numpy as np
import pytest

import adoffload as ado
from adoffload.errors import ArgumentError, BoundsError, ShapeError
from adoffload.runtime.dlpack import DeviceArray

pytestmark = pytest.mark.gpu


@ado.kernel
def saxpy(a: ado.f32, x: ado.In[ado.f32], y: ado.In[ado.f32], out: ado.Out[ado.f32]):
    i = ado.tid()
    out[i] = a * x[i] + y[i]


@ado.kernel
def shifted(x: ado.In[ado.f64], out: ado.Out[ado.f64]):
    i = ado.tid()
    out[i] = x[i + 1]


def test_device_arrays_reuse_a_plan_and_see_new_data(cuda):
    n = 1000
    out = DeviceArray.empty(n, np.float32, device=cuda)
    for k in range(4):
        x = DeviceArray.from_numpy(np.arange(n, dtype=np.float32) + k, device=cuda)
        y = DeviceArray.from_numpy(np.full(n, float(k), np.float32), device=cuda)
        saxpy(2.0, x, y, out, grid=n, device="cuda")
        np.testing.assert_array_equal(out.to_numpy(), 2.0 * (np.arange(n) + k) + k)
    with pytest.raises(ArgumentError, match="arrays 'x' and 'out' share memory"):
        saxpy(2.0, out, y, out, grid=n, device="cuda")


def test_bounds_errors_through_a_cached_gpu_plan(cuda):
    x, out = np.arange(9.0), np.zeros(8)
    shifted(x, out, grid=8, device="cuda")
    np.testing.assert_array_equal(out, x[1:])
    for _ in range(3):
        with pytest.raises(BoundsError, match="index 8 is out of bounds for axis 0 of array 'x'"):
            shifted(np.arange(8.0), out, grid=8, device="cuda")
    shifted(x, out, grid=8, device="cuda")
    np.testing.assert_array_equal(out, x[1:])


def test_gpu_shadows_are_checked_and_seeds_handled(cuda):
    n = 256
    gradient = ado.vjp(saxpy, ["a", "x"])
    x = np.linspace(0, 1, n, dtype=np.float32)
    seed = np.ones(n, np.float32)
    seed.flags.writeable = False
    for _ in range(2):
        d_a, d_x = np.zeros(1, np.float32), np.zeros(n, np.float32)
        gradient(2.0, x, x, np.zeros(n, np.float32), d_a=d_a, d_x=d_x, d_out=seed, grid=n, device="cuda")
        np.testing.assert_allclose(d_a, [x.sum()], rtol=1e-5)
        np.testing.assert_array_equal(d_x, 2.0)
        np.testing.assert_array_equal(seed, 1.0)                    # numpy seeds are kept
    dx_short = DeviceArray.empty(n - 1, np.float32, device=cuda)
    with pytest.raises(ShapeError, match=r"'d_x'.*expected a float32 array of shape \(256,\), got shape \(255,\)"):
        gradient(2.0, x, x, np.zeros(n, np.float32), d_a=np.zeros(1, np.float32), d_x=dx_short,
                 d_out=np.ones(n, np.float32), grid=n, device="cuda")
    device_seed = DeviceArray.from_numpy(np.ones(n, np.float32), device=cuda)
    d_x = DeviceArray.from_numpy(np.zeros(n, np.float32), device=cuda)
    gradient(2.0, x, x, np.zeros(n, np.float32), d_a=np.zeros(1, np.float32), d_x=d_x, d_out=device_seed,
             grid=n, device="cuda")
    np.testing.assert_array_equal(d_x.to_numpy(), 2.0)
    np.testing.assert_array_equal(device_seed.to_numpy(), 0.0)     # a seed in GPU memory is used in place


def test_cupy_arrays_through_dlpack(cuda):
    cp = pytest.importorskip("cupy")
    n = 1 << 20
    x, y, out = cp.arange(n, dtype=cp.float32), cp.ones(n, cp.float32), cp.zeros(n, cp.float32)
    for a in (2.0, 3.0, 0.5):
        saxpy(a, x, y, out, grid=n, device="cuda")
        cp.testing.assert_array_equal(out, a * x + y)
    tiny = cp.arange(16, dtype=cp.float32)
    d_x, d_out = cp.zeros(16, cp.float32), cp.ones(16, cp.float32)
    ado.vjp(saxpy, ["x"])(2.0, tiny, tiny, cp.zeros(16, cp.float32), d_x=d_x, d_out=d_out, grid=16, device="cuda")
    cp.testing.assert_array_equal(d_x, 2.0)
    with pytest.raises(ShapeError, match="'d_x'"):
        ado.vjp(saxpy, ["x"])(2.0, tiny, tiny, cp.zeros(16, cp.float32), d_x=cp.zeros(15, cp.float32),
                              d_out=cp.ones(16, cp.float32), grid=16, device="cuda")
