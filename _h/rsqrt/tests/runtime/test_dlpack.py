"""DLPack import and export on the host: numpy and JAX CPU arrays, without copies."""
from __future__ import annotations

import gc

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from adoffload.errors import ArgumentError
from adoffload.runtime import dlpack
from adoffload.runtime.dlpack import DeviceArray, as_device_array, read_capsule


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32, np.int64, np.uint8, np.bool_])
def test_numpy_round_trip_shares_memory(dtype):
    data = (np.arange(12) % 3).astype(dtype).reshape(3, 4)
    array = DeviceArray.from_numpy(data)
    view = np.from_dlpack(array)
    assert view.ctypes.data == array.ptr and view.dtype == data.dtype
    np.testing.assert_array_equal(view, data)
    seen = as_device_array(array)
    assert tuple(seen) == ("cpu", array.ptr, (3, 4), np.dtype(dtype), data.strides)


def test_capsule_reader_matches_numpy_for_strided_views():
    base = np.arange(24, dtype=np.float64).reshape(4, 6)
    view = base[1:, ::2]
    seen = read_capsule(view.__dlpack__(), "cpu", owner=view)
    assert seen.ptr == view.ctypes.data and seen.shape == view.shape
    assert seen.strides == view.strides and not seen.c_contiguous
    assert read_capsule(base.__dlpack__(), "cpu").c_contiguous


def test_jax_cpu_arrays_import_without_copy():
    x = jax.device_put(jnp.arange(10, dtype=jnp.float32) * 3, jax.devices("cpu")[0])
    seen = as_device_array(x)
    assert seen.device == "cpu" and seen.shape == (10,) and seen.dtype == np.float32
    host = np.ctypeslib.as_array((np.ctypeslib.ctypes.c_float * 10).from_address(seen.ptr))
    np.testing.assert_array_equal(host, np.asarray(x))


def test_jax_imports_our_array():
    array = DeviceArray.from_numpy(np.linspace(0, 1, 7, dtype=np.float32))
    x = jax.dlpack.from_dlpack(array)
    np.testing.assert_array_equal(np.asarray(x), array.to_numpy())
    assert float(jnp.sum(x * 2)) == pytest.approx(7.0)


def test_exports_are_released_when_consumed_or_dropped():
    gc.collect()
    before = len(dlpack._exported)
    array = DeviceArray.from_numpy(np.ones(5, np.float32))
    consumed = np.from_dlpack(array)
    assert len(dlpack._exported) == before + 1
    del consumed
    gc.collect()
    unconsumed = array.__dlpack__()
    del unconsumed
    gc.collect()
    assert len(dlpack._exported) == before


def test_errors():
    with pytest.raises(ArgumentError, match="DLPack"):
        as_device_array([1, 2, 3])
    with pytest.raises(ArgumentError):
        DeviceArray(DeviceArray.empty(4, np.float32).buffer, (5,), np.float32)
    with pytest.raises(ArgumentError):
        dlpack.numpy_dtype(code=4, bits=16)          # bfloat16 has no numpy dtype
    with pytest.raises(BufferError):
        DeviceArray.empty(3, np.int32).__dlpack__(dl_device=(2, 0))
