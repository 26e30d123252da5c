"""Launches whose arrays already live on the GPU (DeviceArray, CuPy and JAX arrays through
DLPack) on a real CUDA device: used in place, no staging copies, Out arrays zeroed on the
device, results visible to the array's owner. Skipped without a CUDA GPU (test_device_path.py
checks the same launcher path on the host in CI)."""
from __future__ import annotations

import numpy as np
import pytest

import adoffload as ado


@ado.kernel
def axpy_and_sum(a: ado.f32, x: ado.In[ado.f32], y: ado.InOut[ado.f32], total: ado.Out[ado.f32]):
    i = ado.tid()
    y[i] = a * x[i] + y[i]
    ado.atomic_add(total, 0, x[i])


def _expected(n):
    x = np.arange(n, dtype=np.float32)
    return x, 2.0 * x + 1.0, float(x.sum())


def test_device_arrays_are_used_in_place(cuda):
    from adoffload.runtime.dlpack import DeviceArray
    n = 1000
    x_host, y_expected, total_expected = _expected(n)
    x = DeviceArray.from_numpy(x_host, device=cuda)
    y = DeviceArray.from_numpy(np.ones(n, np.float32), device=cuda)
    total = DeviceArray.from_numpy(np.full(1, 123.0, np.float32), device=cuda)   # must be zeroed first
    axpy_and_sum(2.0, x, y, total, grid=n, device="cuda")
    np.testing.assert_array_equal(y.to_numpy(), y_expected)
    assert total.to_numpy()[0] == pytest.approx(total_expected, rel=1e-6)
    for array in (x, y, total):
        cuda.free(array.buffer)


def test_cupy_arrays_are_used_in_place(cuda):
    cupy = pytest.importorskip("cupy")
    n = 4097
    x_host, y_expected, total_expected = _expected(n)
    x, y, total = cupy.asarray(x_host), cupy.ones(n, cupy.float32), cupy.full(1, 5.0, cupy.float32)
    pointer = y.data.ptr
    axpy_and_sum(2.0, x, y, total, grid=n, device="cuda")
    assert y.data.ptr == pointer
    np.testing.assert_array_equal(cupy.asnumpy(y), y_expected)
    assert float(total[0]) == pytest.approx(total_expected, rel=1e-6)


def test_mixed_host_and_device_arguments(cuda):
    cupy = pytest.importorskip("cupy")
    n = 300
    x_host, y_expected, total_expected = _expected(n)
    y = cupy.ones(n, cupy.float32)
    total = np.zeros(1, np.float32)                   # a host array in the same launch: copied back
    axpy_and_sum(2.0, x_host, y, total, grid=n, device="cuda")
    np.testing.assert_array_equal(cupy.asnumpy(y), y_expected)
    assert total[0] == pytest.approx(total_expected, rel=1e-6)


def test_jax_gpu_arrays_are_read_in_place(cuda):
    jax = pytest.importorskip("jax")
    if not any(d.platform == "gpu" for d in jax.devices()):
        pytest.skip("JAX has no GPU backend here")
    import jax.numpy as jnp
    n = 64
    x_host, y_expected, total_expected = _expected(n)
    x = jax.device_put(jnp.asarray(x_host), jax.devices("gpu")[0])
    y = np.ones(n, np.float32)
    total = np.zeros(1, np.float32)
    axpy_and_sum(2.0, x, y, total, grid=n, device="cuda")
    np.testing.assert_array_equal(y, y_expected)
    assert total[0] == pytest.approx(total_expected, rel=1e-6)


def test_wrong_dtype_on_the_device_is_refused(cuda):
    cupy = pytest.importorskip("cupy")
    x = cupy.arange(8, dtype=cupy.float64)
    with pytest.raises(ado.ArgumentError, match="float32"):
        axpy_and_sum(2.0, x, cupy.ones(8, cupy.float32), cupy.zeros(1, cupy.float32), grid=8, device="cuda")
