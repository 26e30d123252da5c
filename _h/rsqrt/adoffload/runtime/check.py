"""The one checker every CUDA and HIP driver call goes through.

cuda-python and hip-python return a tuple ``(status, *values)`` (or a bare status).
``check`` returns the values on success and otherwise raises the ``DeviceError`` subclass
the status's name maps to; the message carries the call and the driver's own error name.

Sticky errors. A kernel fault (illegal address, misaligned access, trap/assert, illegal
instruction, hardware stack error, a launch that failed or timed out, an uncorrectable ECC
error) corrupts the CUDA context it happened in: from then on every call in that context
returns the same error, and every allocation and module in it is lost. CUDA's own guidance
is to end the process, and recent drivers enforce it: on an H200 with driver 580,
``cuDevicePrimaryCtxReset`` succeeds but the next ``cuDevicePrimaryCtxRetain`` still returns
CUDA_ERROR_ILLEGAL_ADDRESS. ``CudaDevice.reset()`` tries anyway (it would also destroy the
buffers of JAX and CuPy, which share the primary context) and says so when it fails.
The devices latch the first fault and refuse later calls with a clear message instead of
a cascade of confusing driver errors. The same holds for HIP.
"""
from __future__ import annotations

from ..errors import DeviceError, DeviceNotFoundError, KernelFaultError, OutOfMemoryError

# Error name -> exception class. Names not listed raise plain DeviceError.
CUDA_RULES: dict[str, type[DeviceError]] = {
    "CUDA_ERROR_OUT_OF_MEMORY": OutOfMemoryError,
    "CUDA_ERROR_NO_DEVICE": DeviceNotFoundError,
    "CUDA_ERROR_NOT_INITIALIZED": DeviceNotFoundError,
    "CUDA_ERROR_DEINITIALIZED": DeviceNotFoundError,
    "CUDA_ERROR_INVALID_DEVICE": DeviceNotFoundError,
    "CUDA_ERROR_STUB_LIBRARY": DeviceNotFoundError,
    "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH": DeviceNotFoundError,
    "CUDA_ERROR_ILLEGAL_ADDRESS": KernelFaultError,
    "CUDA_ERROR_LAUNCH_FAILED": KernelFaultError,
    "CUDA_ERROR_LAUNCH_TIMEOUT": KernelFaultError,
    "CUDA_ERROR_ASSERT": KernelFaultError,
    "CUDA_ERROR_HARDWARE_STACK_ERROR": KernelFaultError,
    "CUDA_ERROR_ILLEGAL_INSTRUCTION": KernelFaultError,
    "CUDA_ERROR_MISALIGNED_ADDRESS": KernelFaultError,
    "CUDA_ERROR_INVALID_ADDRESS_SPACE": KernelFaultError,
    "CUDA_ERROR_INVALID_PC": KernelFaultError,
    "CUDA_ERROR_ECC_UNCORRECTABLE": KernelFaultError,
}

HIP_RULES: dict[str, type[DeviceError]] = {
    "hipErrorOutOfMemory": OutOfMemoryError,
    "hipErrorMemoryAllocation": OutOfMemoryError,
    "hipErrorNoDevice": DeviceNotFoundError,
    "hipErrorNotInitialized": DeviceNotFoundError,
    "hipErrorInitializationError": DeviceNotFoundError,
    "hipErrorDeinitialized": DeviceNotFoundError,
    "hipErrorInvalidDevice": DeviceNotFoundError,
    "hipErrorInsufficientDriver": DeviceNotFoundError,
    "hipErrorIllegalAddress": KernelFaultError,
    "hipErrorLaunchFailure": KernelFaultError,
    "hipErrorLaunchTimeOut": KernelFaultError,
    "hipErrorAssert": KernelFaultError,
    "hipErrorIllegalState": KernelFaultError,
    "hipErrorECCNotCorrectable": KernelFaultError,
}

STICKY_NOTE = ("the device context is now unusable (a sticky error: every later call in it fails "
               "and its memory is lost); restart the process (device.reset() may recover on some "
               "drivers, destroying all memory on the device, JAX's and CuPy's included)")


def _rules_for(name: str) -> dict[str, type[DeviceError]]:
    return HIP_RULES if name.startswith("hip") else CUDA_RULES


def error_class(name: str) -> type[DeviceError]:
    """The exception class for a driver error name (``CUDA_ERROR_*`` or ``hipError*``)."""
    return _rules_for(name).get(name, DeviceError)


def is_sticky(name: str) -> bool:
    return error_class(name) is KernelFaultError


def _status_name(status) -> str:
    return getattr(status, "name", None) or f"error {int(status)}"


def raise_error(status, call: str, detail: str = "") -> None:
    """Raise the exception for a failed status (an enum with ``.name`` or an int)."""
    name = _status_name(status)
    cls = error_class(name)
    message = f"{call} failed: {name} ({int(status)})"
    if detail:
        message += f": {detail}"
    if cls is KernelFaultError:
        message += f"; {STICKY_NOTE}"
    error = cls(message)
    error.driver_error, error.call = name, call
    raise error


def check(result, call: str = "driver call", detail: str = ""):
    """Check a driver result; return its values: None, the one value, or a tuple of them."""
    status, values = (result[0], result[1:]) if isinstance(result, tuple) else (result, ())
    if int(status) != 0:
        raise_error(status, call, detail)
    if not values:
        return None
    return values[0] if len(values) == 1 else values


def invoke(function, *args, detail: str = ""):
    """Call a driver function and check its result, naming the call by the function's name."""
    return check(function(*args), getattr(function, "__name__", "driver call"), detail)
