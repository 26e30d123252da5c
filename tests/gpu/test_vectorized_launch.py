"""Several elements per GPU thread (codegen/gpu/vectorize.py, abi.add_gpu_entry(elements_per_thread))
on a real CUDA device: every size around the k-groups, f32/f64/i32, misaligned views and
misaligned device pointers (the scalar path), in-place updates, deferred uniform atomics and an
adjoint's reductions, with k forced through ADOFFLOAD_ELEMENTS_PER_THREAD and by the default
policy. Everything is compared with numpy. Skips without a CUDA GPU (the ``cuda`` fixture)."""
from __future__ import annotations

import numpy as np
import pytest

import adoffload as ado
from adoffload.codegen.gpu import vectorize

pytestmark = pytest.mark.gpu

SIZES = (0, 1, 3, 4, 5, 1023, (1 << 20) + 3)


@ado.kernel
def add_f32(a: ado.In[ado.f32], b: ado.In[ado.f32], c: ado.Out[ado.f32]):
    i = ado.tid()
    c[i] = a[i] + b[i]


@ado.kernel
def add_f64(a: ado.In[ado.f64], b: ado.In[ado.f64], c: ado.Out[ado.f64]):
    i = ado.tid()
    c[i] = a[i] + b[i]


@ado.kernel
def add_i32(a: ado.In[ado.i32], b: ado.In[ado.i32], c: ado.Out[ado.i32]):
    i = ado.tid()
    c[i] = a[i] + b[i]


ADD = {np.float32: add_f32, np.float64: add_f64, np.int32: add_i32}


@ado.kernel
def scale_in_place(s: ado.f32, y: ado.InOut[ado.f32]):
    i = ado.tid()
    y[i] = s * y[i] + 1.0


@ado.kernel
def clamp_and_sum(x: ado.In[ado.f64], y: ado.Out[ado.f64], total: ado.Out[ado.f64]):
    i = ado.tid()
    if x[i] > 0.0:
        y[i] = 2.0 * x[i]
    else:
        y[i] = -x[i]
    ado.atomic_add(total, 0, x[i])


@ado.kernel
def weighted_squares(x: ado.In[ado.f64], w: ado.f64, total: ado.InOut[ado.f64]):
    i = ado.tid()
    ado.atomic_add(total, 0, w * x[i] * x[i])


@pytest.fixture(params=["1", "2", "4", "policy"])
def per_thread(request, monkeypatch):
    """k forced through the environment, or left to the policy (4 from 2^20 elements)."""
    if request.param == "policy":
        monkeypatch.delenv(vectorize.ENV_VAR, raising=False)
    else:
        monkeypatch.setenv(vectorize.ENV_VAR, request.param)
    return request.param


def _values(dtype, n, rng):
    if np.dtype(dtype).kind == "i":
        return rng.integers(-1000, 1000, n).astype(dtype)
    return rng.uniform(-1, 1, n).astype(dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32])
def test_stream_add_every_size(cuda, per_thread, dtype):
    rng = np.random.default_rng(7)
    for n in SIZES:
        a, b = _values(dtype, n, rng), _values(dtype, n, rng)
        c = np.full(n, 9, dtype)
        ADD[dtype](a, b, c, grid=n, device="cuda")
        np.testing.assert_array_equal(c, a + b)


def test_policy_compiles_k4_for_big_grids(cuda, monkeypatch):
    monkeypatch.delenv(vectorize.ENV_VAR, raising=False)
    n = (1 << 20) + 3
    a = np.ones(n, np.float32)
    c = np.zeros(n, np.float32)
    add_f32(a, a, c, grid=n, device="cuda")
    assert any(("elements_per_thread", 4) in key[-1] for key in add_f32._compiled)
    np.testing.assert_array_equal(c, 2.0)


def test_misaligned_numpy_views(cuda, per_thread):
    rng = np.random.default_rng(1)
    for n in (5, 1023, (1 << 20) + 3):
        base_a, base_b = _values(np.float32, n + 1, rng), _values(np.float32, n + 3, rng)
        a, b = base_a[1:], base_b[3:]                  # data pointers 4 and 12 bytes past the allocation
        out = np.zeros(n + 1, np.float32)
        c = out[1:]
        add_f32(a, b, c, grid=n, device="cuda")
        np.testing.assert_array_equal(c, a + b)
        assert out[0] == 0


@pytest.mark.parametrize("offset", [0, 4, 8, 12])
def test_misaligned_device_pointers(cuda, per_thread, offset):
    """Arrays already on the device at an offset (a DLPack view): the entry's alignment test
    takes the scalar path, and the result is the same."""
    from adoffload.runtime.device import Buffer
    from adoffload.runtime.dlpack import DeviceArray
    rng = np.random.default_rng(offset)
    n = (1 << 20) + 3
    a_host, b_host = _values(np.float32, n, rng), _values(np.float32, n, rng)
    buffers = [cuda.allocate(n * 4 + 16) for _ in range(3)]
    try:
        views = [DeviceArray(Buffer(buf.ptr + offset, n * 4, cuda), (n,), np.float32) for buf in buffers]
        cuda.copy_to_device(views[0].buffer, a_host)
        cuda.copy_to_device(views[1].buffer, b_host)
        add_f32(views[0], views[1], views[2], grid=n, device="cuda")
        np.testing.assert_array_equal(views[2].to_numpy(), a_host + b_host)
    finally:
        for buf in buffers:
            cuda.free(buf)


def test_in_place_update(cuda, per_thread):
    rng = np.random.default_rng(2)
    for n in SIZES:
        y = _values(np.float32, n, rng)
        expected = np.float32(1.5) * y + np.float32(1.0)
        scale_in_place(1.5, y, grid=n, device="cuda")
        np.testing.assert_allclose(y, expected, rtol=1e-6, atol=1e-6)


def test_branchy_body_and_uniform_atomic_reduction(cuda, per_thread):
    rng = np.random.default_rng(3)
    for n in SIZES[1:]:              # an empty grid launches nothing (Out arrays are not touched)
        x = rng.uniform(-1, 1, n)
        y = np.zeros(n)
        total = np.array([123.0])                     # an Out array: zeroed before the launch
        clamp_and_sum(x, y, total, grid=n, device="cuda")
        np.testing.assert_array_equal(y, np.where(x > 0, 2 * x, -x))
        assert total[0] == pytest.approx(x.sum(), rel=1e-9, abs=1e-9)


def test_adjoint_reductions(cuda, per_thread):
    """The reverse kernel's d_w is a uniform-address reduction over every element."""
    grad = ado.vjp(weighted_squares, ["x", "w"])
    rng = np.random.default_rng(4)
    for n in (1, 5, 1023, (1 << 20) + 3):
        x, w = rng.uniform(-1, 1, n), 0.75
        d_x, d_w = np.zeros(n), np.zeros(1)
        grad(x, w, np.zeros(1), d_x, d_w, np.ones(1), grid=n, device="cuda")
        np.testing.assert_allclose(d_x, 2 * w * x, rtol=1e-12)
        assert d_w[0] == pytest.approx((x * x).sum(), rel=1e-9)
