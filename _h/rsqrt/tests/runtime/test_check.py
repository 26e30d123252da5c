"""The driver checker maps driver error names to our exceptions."""
from __future__ import annotations

import enum

import pytest

from adoffload.errors import DeviceError, DeviceNotFoundError, KernelFaultError, OutOfMemoryError
from adoffload.runtime.check import check, invoke, is_sticky

cu = pytest.importorskip("cuda.bindings.driver", reason="cuda-python not installed")


class FakeHipError(enum.IntEnum):
    hipSuccess = 0
    hipErrorOutOfMemory = 2
    hipErrorNoDevice = 100
    hipErrorIllegalAddress = 700
    hipErrorInvalidValue = 1


@pytest.mark.parametrize("name, cls", [
    ("CUDA_ERROR_OUT_OF_MEMORY", OutOfMemoryError),
    ("CUDA_ERROR_ILLEGAL_ADDRESS", KernelFaultError),
    ("CUDA_ERROR_LAUNCH_FAILED", KernelFaultError),
    ("CUDA_ERROR_ASSERT", KernelFaultError),
    ("CUDA_ERROR_MISALIGNED_ADDRESS", KernelFaultError),
    ("CUDA_ERROR_NO_DEVICE", DeviceNotFoundError),
    ("CUDA_ERROR_NOT_INITIALIZED", DeviceNotFoundError),
    ("CUDA_ERROR_INVALID_VALUE", DeviceError),
    ("CUDA_ERROR_INVALID_PTX", DeviceError),
])
def test_cuda_errors_map_to_classes(name, cls):
    status = getattr(cu.CUresult, name)
    with pytest.raises(cls) as info:
        check((status, None), "cuSomething")
    assert type(info.value) is cls
    assert name in str(info.value) and "cuSomething" in str(info.value)
    assert info.value.driver_error == name
    assert ("unusable" in str(info.value)) == (cls is KernelFaultError) == is_sticky(name)


def test_cuda_success_returns_values():
    ok = cu.CUresult.CUDA_SUCCESS
    assert check((ok,), "x") is None
    assert check(ok, "x") is None
    assert check((ok, 7), "x") == 7
    assert check((ok, 1, 2), "x") == (1, 2)


@pytest.mark.parametrize("status, cls", [
    (FakeHipError.hipErrorOutOfMemory, OutOfMemoryError),
    (FakeHipError.hipErrorNoDevice, DeviceNotFoundError),
    (FakeHipError.hipErrorIllegalAddress, KernelFaultError),
    (FakeHipError.hipErrorInvalidValue, DeviceError),
])
def test_hip_errors_map_to_classes(status, cls):
    with pytest.raises(cls, match=status.name):
        check((status, 0), "hipMalloc")
    assert check((FakeHipError.hipSuccess, 5), "hipMalloc") == 5


def test_invoke_names_the_call_and_adds_detail():
    def cuFake(a, b):
        return (cu.CUresult.CUDA_ERROR_INVALID_VALUE, None)
    with pytest.raises(DeviceError, match=r"cuFake failed: CUDA_ERROR_INVALID_VALUE \(1\): bad size"):
        invoke(cuFake, 1, 2, detail="bad size")
