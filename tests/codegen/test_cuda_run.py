"""Run generated PTX on an NVIDIA GPU through the driver API (skips where there is none)."""
import ctypes
import math

import numpy as np
import pytest

from adoffload.language import status as abi_status
from adoffload.codegen import abi, compile_for_target, kernel_symbol

from . import bodies

driver = pytest.importorskip("cuda.bindings.driver", reason="cuda-python not installed")


def _check(result):
    err, *rest = result if isinstance(result, tuple) else (result,)
    if err != driver.CUresult.CUDA_SUCCESS:
        raise RuntimeError(f"CUDA driver call failed: {err}")
    return rest[0] if len(rest) == 1 else rest


def _gpu_available():
    try:
        _check(driver.cuInit(0))
        return _check(driver.cuDeviceGetCount()) > 0
    except Exception:
        return False


pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not _gpu_available(), reason="no NVIDIA GPU / driver")]


@pytest.fixture(scope="module")
def context():
    device = _check(driver.cuDeviceGet(0))
    ctx = _check(driver.cuDevicePrimaryCtxRetain(device))
    _check(driver.cuCtxSetCurrent(ctx))
    major = _check(driver.cuDeviceGetAttribute(driver.CUdevice_attribute.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, device))
    yield f"sm_{major}0"
    _check(driver.cuDevicePrimaryCtxRelease(device))


def run(ptx_text, body_name, host_arrays, flat_values, flat_types, grid, block=128):
    """Copy arrays in, launch, copy arrays out; flat_values holds array indices as ('array', k)."""
    module = _check(driver.cuModuleLoadData(ptx_text.encode() + b"\0"))
    fn = _check(driver.cuModuleGetFunction(module, kernel_symbol(body_name, "nvptx").encode()))
    device_ptrs = []
    for a in host_arrays:
        d = _check(driver.cuMemAlloc(max(a.nbytes, 8)))
        _check(driver.cuMemcpyHtoD(d, a.ctypes.data, a.nbytes))
        device_ptrs.append(d)
    status = _check(driver.cuMemAlloc(32))
    _check(driver.cuMemsetD8(status, 0, 32))
    values = [int(device_ptrs[v[1]]) if isinstance(v, tuple) else v for v in flat_values]
    slots = abi.pack_slots(values, flat_types, grid, int(status))
    params = (ctypes.c_void_p * len(slots))(*[slots.ctypes.data + 8 * k for k in range(len(slots))])
    total = int(np.prod(grid))
    _check(driver.cuLaunchKernel(fn, (total + block - 1) // block, 1, 1, block, 1, 1, 0, 0,
                                 ctypes.addressof(params), 0))
    _check(driver.cuCtxSynchronize())
    for a, d in zip(host_arrays, device_ptrs):
        _check(driver.cuMemcpyDtoH(a.ctypes.data, d, a.nbytes))
        _check(driver.cuMemFree(d))
    record = abi_status.new_record()
    _check(driver.cuMemcpyDtoH(record.ctypes.data, status, 32))
    _check(driver.cuMemFree(status))
    _check(driver.cuModuleUnload(module))
    return record


def test_axpy_and_status(context):
    n = 1000
    x, y = np.arange(n, dtype=np.float32), np.ones(n, np.float32)
    out = np.zeros(n, np.float32)
    ptx = compile_for_target(bodies.AXPY, "axpy", bodies.AXPY_TYPES, 1, "nvptx", context, cache=False)
    rec = run(ptx, "axpy", [x, y, out], [2.0, ("a", 0), n, ("a", 1), n, ("a", 2), n], bodies.AXPY_TYPES, [n])
    assert rec[0] == 0
    np.testing.assert_array_equal(out, 2 * x + 1)
    short = np.zeros(n - 1, np.float32)
    rec = run(ptx, "axpy", [x, y, short], [2.0, ("a", 0), n, ("a", 1), n, ("a", 2), n - 1], bodies.AXPY_TYPES, [n])
    assert list(rec) == [abi_status.OUT_OF_BOUNDS, 3, n - 1, 0]


@pytest.mark.parametrize("flag", [False, True])
def test_grid2_bool_i32_and_by_reference(context, flag):
    shape = (37, 41)
    out = np.zeros(shape)
    ptx = compile_for_target(bodies.GRID2, "grid2", bodies.GRID2_TYPES, 2, "nvptx", context, cache=False, noalias=True)
    run(ptx, "grid2", [out], [0.5, flag, -3, ("a", 0), *shape], bodies.GRID2_TYPES, shape)
    i, j = np.indices(shape)
    np.testing.assert_array_equal(out, 0.5 * (i * 100 + j) - 3 + (0.5 if flag else 0.0))
    # scalars by reference: the scalar slots hold device pointers to the values
    out2 = np.zeros(shape)
    scale, flag_byte, k = np.array([0.5]), np.array([int(flag)], np.int8), np.array([-3], np.int32)
    ptx = compile_for_target(bodies.GRID2, "grid2", bodies.GRID2_TYPES, 2, "nvptx", context, cache=False,
                             scalars_by_reference=[0, 1, 2])
    run(ptx, "grid2", [out2, scale, flag_byte, k], [("a", 1), ("a", 2), ("a", 3), ("a", 0), *shape],
        ["ptr", "ptr", "ptr", "ptr", "i64", "i64"], shape)
    np.testing.assert_array_equal(out2, out)


def test_grid3(context):
    shape = (5, 7, 9)
    out = np.full(shape, -1, np.int64)
    ptx = compile_for_target(bodies.GRID3, "grid3.fwd", bodies.GRID3_TYPES, 3, "nvptx", context, cache=False)
    run(ptx, "grid3.fwd", [out], [("a", 0), *shape], bodies.GRID3_TYPES, shape, block=64)
    i, j, l = np.indices(shape)
    np.testing.assert_array_equal(out, i * 10000 + j * 100 + l)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_libdevice_math(context, dtype):
    ty = "float" if dtype == np.float32 else "double"
    n = 513
    x = np.linspace(-3, 3, n).astype(dtype)
    out = np.zeros((bodies.MATH_OPS, n), dtype)
    ptx = compile_for_target(bodies.math_body(ty), "mathfn", bodies.MATH_TYPES, 1, "nvptx", context, cache=False)
    run(ptx, "mathfn", [x, out], [("a", 0), n, ("a", 1), *out.shape], bodies.MATH_TYPES, [n])
    xd = x.astype(np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        expect = [np.sin(xd), np.exp(xd), np.power(xd, 1.5), [math.erf(v) for v in xd], np.tanh(xd),
                  np.arctan2(xd, 0.75), 1.0 / np.sqrt(xd)]
    tol = 2e-6 if dtype == np.float32 else 1e-14
    for row, e in enumerate(expect):
        np.testing.assert_allclose(out[row], np.asarray(e, dtype), rtol=tol, atol=tol, equal_nan=True)
