"""The HIP (AMD ROCm) device on hip-python: the CUDA device's body with HIP's names.

No AMD GPU is lent to this project, so this module is checked by import and by the
shared GPU tests only; it loads HSACO code objects (``hipModuleLoadData``) that
codegen links with ld.lld. hip-python is imported lazily: without it (or without a ROCm
driver) ``get_device("hip")`` raises DeviceNotFoundError saying which is missing.
"""
from __future__ import annotations

import threading

from ..errors import ArgumentError, DeviceError, DeviceNotFoundError
from .check import check, invoke
from .gpu import GpuDevice

_init_lock = threading.Lock()
_init_error: str | None = None
_initialized = False


def runtime():
    """hip-python's ``hip`` module, or DeviceNotFoundError saying how to get it."""
    try:
        from hip import hip
    except ImportError as exc:
        raise DeviceNotFoundError("HIP devices need hip-python and a ROCm driver: pip install "
                                  f"'adoffload[amd]' (import failed: {exc})") from exc
    except Exception as exc:   # hip-python raises when libamdhip64.so cannot be loaded
        raise DeviceNotFoundError(f"hip-python is installed but the ROCm runtime could not be loaded "
                                  f"({type(exc).__name__}: {exc})") from exc
    return hip


def initialize():
    """``hipInit`` once per process; every failure becomes DeviceNotFoundError."""
    global _initialized, _init_error
    hip = runtime()
    with _init_lock:
        if _initialized:
            return hip
        if _init_error is not None:
            raise DeviceNotFoundError(_init_error)
        try:
            result = hip.hipInit(0)
            check(result, "hipInit", "no usable AMD GPU (is ROCm installed and a GPU visible?)")
        except DeviceError as exc:
            _init_error = str(exc)
            raise DeviceNotFoundError(_init_error) from exc
        except Exception as exc:
            _init_error = f"hipInit could not run ({type(exc).__name__}: {exc})"
            raise DeviceNotFoundError(_init_error) from exc
        _initialized = True
        return hip


def hip_device_count() -> int:
    return int(invoke(initialize().hipGetDeviceCount))


class HipDevice(GpuDevice):
    kind = "hip"
    DRIVER_NAMES = {
        "alloc": "hipMalloc", "free": "hipFree", "mem_info": "hipMemGetInfo",
        "htod": "hipMemcpyHtoD", "dtoh": "hipMemcpyDtoH",
        "htod_async": "hipMemcpyHtoDAsync", "dtoh_async": "hipMemcpyDtoHAsync",
        "memset": "hipMemsetD8", "memset_async": "hipMemsetD8Async",
        "module_unload": "hipModuleUnload", "get_function": "hipModuleGetFunction",
        "launch": "hipModuleLaunchKernel", "synchronize": "hipDeviceSynchronize",
        "stream_destroy": "hipStreamDestroy", "stream_sync": "hipStreamSynchronize",
        "event_destroy": "hipEventDestroy", "event_record": "hipEventRecord",
        "event_sync": "hipEventSynchronize", "event_elapsed": "hipEventElapsedTime",
    }

    def __init__(self, ordinal: int = 0):
        self.lib = hip = initialize()
        count = int(invoke(hip.hipGetDeviceCount))
        if not 0 <= ordinal < count:
            raise DeviceNotFoundError(f"hip:{ordinal} requested but {count} HIP device(s) found")
        self.ordinal = ordinal
        props = hip.hipDeviceProp_t()
        check(hip.hipGetDeviceProperties(props, ordinal), "hipGetDeviceProperties")
        self.name = _text(props.name)
        self.arch = _text(props.gcnArchName).split(":")[0]      # e.g. 'gfx942'
        self.total_memory = int(props.totalGlobalMem)
        self._setup_common()

    def properties(self) -> dict:
        return {"name": self.name, "arch": self.arch, "total_memory": self.total_memory,
                "driver_version": int(invoke(self.lib.hipDriverGetVersion))}

    # --- hooks ---------------------------------------------------------------------------
    def activate(self) -> None:
        check(self.lib.hipSetDevice(self.ordinal), "hipSetDevice")

    def _create_stream(self):
        return self.call(self.lib.hipStreamCreateWithFlags, self.lib.hipStreamNonBlocking)

    def _wrap_stream(self, handle):
        return None if handle is None else handle      # hip-python takes None/int/hipStream_t

    def _create_event(self):
        return self.call(self.lib.hipEventCreate)

    def _occupancy_block(self, function_handle) -> int:
        _, block = self.call(self.lib.hipModuleOccupancyMaxPotentialBlockSize, function_handle, 0, 0)
        return int(block)

    def _load_image(self, image):
        if not isinstance(image, (bytes, bytearray, memoryview)):
            raise ArgumentError(f"a HIP module image is HSACO code-object bytes, got {type(image).__name__}")
        return self.call(self.lib.hipModuleLoadData, bytes(image))

    def _reset_context(self) -> None:
        self.activate()
        check(self.lib.hipDeviceReset(), "hipDeviceReset")


def _text(value) -> str:
    if isinstance(value, (bytes, bytearray)):
        return value.split(b"\0")[0].decode(errors="replace")
    return str(value)
