"""The CUDA device, on cuda-python's driver API (``cuda.bindings.driver``).

* Context: the device's *primary* context, retained, so buffers and modules are shared
  with JAX, CuPy and PyTorch in the same process; it is made current on the calling
  thread before each call.
* Modules: PTX text (str or bytes), cubin or fatbin via ``cuModuleLoadDataEx``; the JIT's
  error log goes into the exception.
* Launch: kernels take the flattened params directly, ``kernelParams[i] = &slots[i]``;
  the block size comes from ``cuOccupancyMaxPotentialBlockSize`` unless given.
* Everything else (memory, launch geometry, faults) is shared with HIP in gpu.py.
"""
from __future__ import annotations

import threading

from ..errors import ArgumentError, DeviceError, DeviceNotFoundError
from .check import check, invoke
from .gpu import GpuDevice

ELF_MAGIC, FATBIN_MAGIC = b"\x7fELF", b"\x50\xed\x55\xba"
LOG_BYTES = 16384

_init_lock = threading.Lock()
_init_error: str | None = None
_initialized = False
_SUCCESS = None                      # cu.CUresult.CUDA_SUCCESS once the driver is loaded


def driver():
    """The cuda-python driver module, or DeviceNotFoundError saying how to get it."""
    try:
        from cuda.bindings import driver as cu
    except ImportError as exc:
        raise DeviceNotFoundError("CUDA devices need cuda-python: pip install 'adoffload[cuda]' "
                                  f"(import failed: {exc})") from exc
    return cu


def initialize():
    """``cuInit`` once per process; every failure becomes DeviceNotFoundError."""
    global _initialized, _init_error
    cu = driver()
    with _init_lock:
        if _initialized:
            return cu
        if _init_error is not None:
            raise DeviceNotFoundError(_init_error)
        try:
            result = cu.cuInit(0)
        except Exception as exc:     # cuda-python raises when libcuda.so cannot be loaded
            _init_error = f"no NVIDIA driver: cuInit could not load libcuda ({type(exc).__name__}: {exc})"
            raise DeviceNotFoundError(_init_error) from exc
        try:
            check(result, "cuInit", "no usable CUDA GPU (is the NVIDIA driver installed and a GPU visible?)")
        except DeviceError as exc:
            _init_error = str(exc)
            raise DeviceNotFoundError(_init_error) from exc
        _initialized = True
        return cu


def cuda_device_count() -> int:
    return invoke(initialize().cuDeviceGetCount)


def image_bytes(image) -> bytes:
    """PTX text gets its terminating NUL; cubin and fatbin pass unchanged."""
    if isinstance(image, str):
        return image.encode() + b"\0"
    if isinstance(image, (bytes, bytearray, memoryview)):
        data = bytes(image)
        if data[:4] in (ELF_MAGIC, FATBIN_MAGIC) or data.endswith(b"\0"):
            return data
        return data + b"\0"
    raise ArgumentError(f"a CUDA module image is PTX text or cubin/fatbin bytes, got {type(image).__name__}")


class CudaDevice(GpuDevice):
    kind = "cuda"
    NO_EXTRA = 0                     # cuda-python wants an int here, not None
    DRIVER_NAMES = {
        "alloc": "cuMemAlloc", "free": "cuMemFree", "mem_info": "cuMemGetInfo",
        "htod": "cuMemcpyHtoD", "dtoh": "cuMemcpyDtoH",
        "htod_async": "cuMemcpyHtoDAsync", "dtoh_async": "cuMemcpyDtoHAsync",
        "memset": "cuMemsetD8", "memset_async": "cuMemsetD8Async",
        "module_unload": "cuModuleUnload", "get_function": "cuModuleGetFunction",
        "launch": "cuLaunchKernel", "synchronize": "cuCtxSynchronize",
        "stream_destroy": "cuStreamDestroy", "stream_sync": "cuStreamSynchronize",
        "event_destroy": "cuEventDestroy", "event_record": "cuEventRecord",
        "event_sync": "cuEventSynchronize", "event_elapsed": "cuEventElapsedTime",
    }

    def __init__(self, ordinal: int = 0):
        global _SUCCESS
        self.lib = cu = initialize()
        _SUCCESS = cu.CUresult.CUDA_SUCCESS
        count = invoke(cu.cuDeviceGetCount)
        if not 0 <= ordinal < count:
            raise DeviceNotFoundError(f"cuda:{ordinal} requested but {count} CUDA device(s) found")
        self.ordinal = ordinal
        self._device = invoke(cu.cuDeviceGet, ordinal)
        self.name = invoke(cu.cuDeviceGetName, 256, self._device).split(b"\0")[0].decode()
        self.compute_capability = (self._attribute("COMPUTE_CAPABILITY_MAJOR"),
                                   self._attribute("COMPUTE_CAPABILITY_MINOR"))
        self.total_memory = int(invoke(cu.cuDeviceTotalMem, self._device))
        self._context = invoke(cu.cuDevicePrimaryCtxRetain, self._device)
        self._setup_common()

    def _attribute(self, name: str) -> int:
        attribute = getattr(self.lib.CUdevice_attribute, "CU_DEVICE_ATTRIBUTE_" + name)
        return int(invoke(self.lib.cuDeviceGetAttribute, attribute, self._device))

    def properties(self) -> dict:
        version = int(invoke(self.lib.cuDriverGetVersion))
        return {"name": self.name, "compute_capability": self.compute_capability,
                "total_memory": self.total_memory,
                "multiprocessors": self._attribute("MULTIPROCESSOR_COUNT"),
                "driver_cuda_version": f"{version // 1000}.{version % 1000 // 10}"}

    @property
    def arch(self) -> str:
        """The PTX target name of this GPU, e.g. 'sm_90'."""
        return "sm_{}{}".format(*self.compute_capability)

    # --- hooks ---------------------------------------------------------------------------
    def activate(self) -> None:
        result = self.lib.cuCtxSetCurrent(self._context)
        status = result[0]
        if status is not _SUCCESS and int(status):      # bindings that make a new enum object per call
            check(result, "cuCtxSetCurrent")

    def _mapped_host_alloc(self, nbytes: int) -> tuple[int, int] | None:
        """Page-locked host memory mapped into this device's address space (launch status records)."""
        cu = self.lib
        if not self._attribute("CAN_MAP_HOST_MEMORY"):
            return None
        host = int(self.call(cu.cuMemHostAlloc, nbytes,
                             cu.CU_MEMHOSTALLOC_DEVICEMAP | cu.CU_MEMHOSTALLOC_PORTABLE))
        return host, int(self.call(cu.cuMemHostGetDevicePointer, host, 0))

    def _pinned_host_alloc(self, nbytes: int) -> int | None:
        """Page-locked host memory (the staging buffers of large copies); None where the driver
        refuses it (then the driver's own pageable copies run)."""
        from ..errors import Error
        try:
            return int(self.call(self.lib.cuMemHostAlloc, nbytes, self.lib.CU_MEMHOSTALLOC_PORTABLE))
        except Error:
            return None

    def _create_stream(self):
        flags = self.lib.CUstream_flags.CU_STREAM_NON_BLOCKING.value
        return self.call(self.lib.cuStreamCreate, flags)

    def _wrap_stream(self, handle):
        cu = self.lib
        if handle is None:
            return cu.CUstream(0)
        return handle if isinstance(handle, cu.CUstream) else cu.CUstream(int(handle))

    def _create_event(self):
        return self.call(self.lib.cuEventCreate, self.lib.CUevent_flags.CU_EVENT_DEFAULT.value)

    def _occupancy_block(self, function_handle) -> int:
        _, block = self.call(self.lib.cuOccupancyMaxPotentialBlockSize, function_handle, None, 0, 0)
        return int(block)

    def _occupancy_blocks(self, function_handle, block: int) -> int:
        """Blocks of ``block`` threads of the function resident on one multiprocessor."""
        return int(self.call(self.lib.cuOccupancyMaxActiveBlocksPerMultiprocessor, function_handle, block, 0))

    @property
    def multiprocessors(self) -> int:
        if not hasattr(self, "_multiprocessors"):
            self._multiprocessors = self._attribute("MULTIPROCESSOR_COUNT")
        return self._multiprocessors

    def _load_image(self, image):
        cu, data = self.lib, image_bytes(image)
        log = bytearray(LOG_BYTES)
        options = [cu.CUjit_option.CU_JIT_ERROR_LOG_BUFFER, cu.CUjit_option.CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES]
        try:
            result = cu.cuModuleLoadDataEx(data, len(options), options, [log, LOG_BYTES])
        except (TypeError, ValueError):          # a binding that wants other option values
            return self.call(cu.cuModuleLoadData, data)
        if int(result[0]) != 0:
            text = bytes(log).split(b"\0")[0].decode(errors="replace").strip()
            check(result, "cuModuleLoadDataEx", text or "the driver gave no JIT log")
        return result[1]

    def _reset_context(self) -> None:
        check(self.lib.cuDevicePrimaryCtxReset(self._device), "cuDevicePrimaryCtxReset")
        self._context = invoke(self.lib.cuDevicePrimaryCtxRetain, self._device)
        self.activate()
