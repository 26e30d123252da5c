"""A fake CUDA driver and fake CuPy arrays, to drive the real CUDA launch path on a host without a GPU.

``FakeDriver`` stands in for cuda-python's ``cuda.bindings.driver``: the functions a ``CudaDevice``
calls, returning ``(CUresult, *values)`` as the binding does, with the binding's own enums where it
is installed (plain ints otherwise). Device memory is host memory (``cuMemAlloc`` hands out host
addresses), so memsets and copies really happen; a module is its PTX text (a cubin is refused: the launcher then
loads the PTX), whose entries' parameter
sizes are read from it; ``cuLaunchKernel`` runs nothing and records the launch: the function, grid,
block, stream and the bytes of every kernel parameter it was given (what the GPU would receive).

``fake_cupy()`` is a module named ``cupy`` with the parts of CuPy the launcher reads: ``ndarray``
(``data.ptr``, ``data.device_id``, ``shape``, ``dtype``, ``flags.c_contiguous``, ``_c_contiguous``,
``nbytes``, ``__cuda_array_interface__``), ``cuda.get_current_stream()`` (its ``ptr`` settable:
0 is CuPy's null stream), ``cuda.runtime.is_hip`` and ``cuda.driver.launchKernel`` (CuPy's launch
binding: 11 ints, raising ``cuda.driver.CUDADriverError`` with the status; it calls the fake driver). ``installed(...)`` puts both in place for a
``with`` block: a ``CudaDevice`` on the fake driver and ``sys.modules['cupy']``.

Used by tests/runtime/test_cuda_fast_launch.py and adoffload.testing.cuda_launch_profile (the
Python-side cost of a cache-hit launch, measured on the host).
"""
from __future__ import annotations

import contextlib
import ctypes
import re
import sys
import types

import numpy as np

_PARAM_BYTES = {"8": 1, "16": 2, "32": 4, "64": 8, "pred": 1}
_ENTRY = re.compile(r"\.entry\s+([^\s(]+)\s*\((.*?)\)", re.S)
_PARAM = re.compile(r"\.param\s+\.(?:[a-z]*?)(8|16|32|64|pred)\b")


def _real_driver():
    try:
        from cuda.bindings import driver
        return driver
    except ImportError:
        return None


class _Result(int):
    """A CUresult where cuda-python is missing: an int with a name."""

    def __new__(cls, value, name):
        self = super().__new__(cls, value)
        self.name = name
        return self


class FakeDriver:
    """The driver calls of runtime/cuda.py and gpu.py, on host memory; ``launches``: what was launched."""

    def __init__(self, can_map_host: bool = True):
        real = _real_driver()
        self._real = real
        if real is not None:
            self.SUCCESS = real.CUresult.CUDA_SUCCESS
            self.CUresult = real.CUresult
        else:
            self.SUCCESS = _Result(0, "CUDA_SUCCESS")
            self.CUresult = types.SimpleNamespace(CUDA_SUCCESS=self.SUCCESS)
        self.can_map_host = can_map_host
        self.memory: dict[int, object] = {}      # address -> its ctypes buffer (kept alive)
        self.modules: dict[int, dict] = {}       # handle -> {entry name: parameter sizes}
        self.functions: dict[int, tuple[str, list[int]]] = {}
        self.launches: list[dict] = []
        self.memsets: list[tuple[int, int, int]] = []
        self.order: list[str] = []               # "context", "memset", "launch": the calls in order (while recording)
        self.record = True                       # False: count launches only (profiling)
        self.launch_error: str | None = None     # a CUresult name: the next launches fail with it
        self.cupy_launches = 0                   # launches that came through the fake CuPy's launchKernel
        self.count = 0
        self.context_sets = 0

    def __getattr__(self, name):                 # enums and types: the binding's own
        if self._real is not None:
            return getattr(self._real, name)
        raise AttributeError(name)

    # --- init, device, context ----------------------------------------------------------------
    def cuInit(self, flags):
        return (self.SUCCESS,)

    def cuDeviceGetCount(self):
        return (self.SUCCESS, 1)

    def cuDeviceGet(self, ordinal):
        return (self.SUCCESS, ordinal)

    def cuDeviceGetName(self, size, device):
        return (self.SUCCESS, b"fake CUDA device\0")

    def cuDeviceGetAttribute(self, attribute, device):
        name = getattr(attribute, "name", str(attribute))
        values = {"COMPUTE_CAPABILITY_MAJOR": 9, "COMPUTE_CAPABILITY_MINOR": 0, "MULTIPROCESSOR_COUNT": 132,
                  "CAN_MAP_HOST_MEMORY": int(self.can_map_host)}
        return (self.SUCCESS, next((v for k, v in values.items() if name.endswith(k)), 0))

    def cuDeviceTotalMem(self, device):
        return (self.SUCCESS, 1 << 34)

    def cuDevicePrimaryCtxRetain(self, device):
        return (self.SUCCESS, "fake context")

    def cuDevicePrimaryCtxReset(self, device):
        return (self.SUCCESS,)

    def cuCtxSetCurrent(self, context):
        self.context_sets += 1
        if self.record:
            self.order.append("context")
        return (self.SUCCESS,)

    def cuCtxSynchronize(self):
        return (self.SUCCESS,)

    def cuDriverGetVersion(self):
        return (self.SUCCESS, 13000)

    # --- memory ---------------------------------------------------------------------------------
    def _host(self, nbytes: int) -> int:
        buffer = (ctypes.c_uint8 * max(int(nbytes), 1))()
        address = ctypes.addressof(buffer)
        self.memory[address] = buffer
        return address

    def cuMemAlloc(self, nbytes):
        return (self.SUCCESS, self._host(nbytes))

    def cuMemFree(self, ptr):
        self.memory.pop(int(ptr), None)
        return (self.SUCCESS,)

    def cuMemHostAlloc(self, nbytes, flags):
        return (self.SUCCESS, self._host(nbytes))

    def cuMemHostGetDevicePointer(self, host, flags):
        return (self.SUCCESS, host)

    def cuMemGetInfo(self):
        return (self.SUCCESS, 1 << 33, 1 << 34)

    def cuMemcpyHtoD(self, dst, src, nbytes):
        ctypes.memmove(int(dst), int(src), nbytes)
        return (self.SUCCESS,)

    def cuMemcpyDtoH(self, dst, src, nbytes):
        ctypes.memmove(int(dst), int(src), nbytes)
        return (self.SUCCESS,)

    def cuMemcpyHtoDAsync(self, dst, src, nbytes, stream):
        return self.cuMemcpyHtoD(dst, src, nbytes)

    def cuMemcpyDtoHAsync(self, dst, src, nbytes, stream):
        return self.cuMemcpyDtoH(dst, src, nbytes)

    def cuMemsetD8(self, ptr, value, nbytes):
        ctypes.memset(int(ptr), int(value), int(nbytes))
        if self.record:
            self.memsets.append((int(ptr), int(value), int(nbytes)))
            self.order.append("memset")
        return (self.SUCCESS,)

    def cuMemsetD8Async(self, ptr, value, nbytes, stream):
        return self.cuMemsetD8(ptr, value, nbytes)

    # --- modules and launches -------------------------------------------------------------------
    def cuModuleLoadDataEx(self, image, count, options, values):
        return self.cuModuleLoadData(image)

    def cuModuleLoadData(self, image):
        if bytes(image[:4]) in (b"\x7fELF", b"\x50\xed\x55\xba"):      # a cubin or fatbin: PTX only here
            return (self._error("CUDA_ERROR_INVALID_IMAGE", 200),)
        text = bytes(image).split(b"\0")[0].decode(errors="replace")
        entries = {m.group(1): [_PARAM_BYTES[p] for p in _PARAM.findall(m.group(2))] for m in _ENTRY.finditer(text)}
        handle = len(self.modules) + 1
        self.modules[handle] = entries
        return (self.SUCCESS, handle)

    def cuModuleUnload(self, handle):
        return (self.SUCCESS,)

    def cuModuleGetFunction(self, module, name):
        name = name.decode() if isinstance(name, bytes) else name
        sizes = self.modules[module].get(name)
        if sizes is None:
            return (self._error("CUDA_ERROR_NOT_FOUND", 500),)
        handle = 1000 + len(self.functions)
        self.functions[handle] = (name, sizes)
        return (self.SUCCESS, handle)

    def cuOccupancyMaxPotentialBlockSize(self, function, callback, shared, limit):
        return (self.SUCCESS, 132, 256)

    def cuOccupancyMaxActiveBlocksPerMultiprocessor(self, function, block, shared):
        return (self.SUCCESS, 8)

    def cuLaunchKernel(self, function, gx, gy, gz, bx, by, bz, shared, stream, params, extra):
        if self.launch_error is not None:
            return (self._error(self.launch_error, 700),)
        self.count += 1
        if self.record:
            self.order.append("launch")
            name, sizes = self.functions[function]
            pointers = (ctypes.c_void_p * len(sizes)).from_address(int(params))
            self.launches.append({"function": name, "handle": function, "grid": (gx, gy, gz), "block": (bx, by, bz),
                                  "stream": int(stream), "params": [ctypes.string_at(p, n)
                                                                    for p, n in zip(pointers, sizes)]})
        return (self.SUCCESS,)

    def cuStreamCreate(self, flags):
        return (self.SUCCESS, self.CUstream(7) if self._real is not None else 7)

    def cuStreamDestroy(self, stream):
        return (self.SUCCESS,)

    def cuStreamSynchronize(self, stream):
        return (self.SUCCESS,)

    def _error(self, name, value):
        if self._real is not None:
            return getattr(self._real.CUresult, name)
        return _Result(value, name)


# --- fake CuPy ------------------------------------------------------------------------------------
class _Memory:
    __slots__ = ("ptr", "device_id", "owner")

    def __init__(self, ptr, device_id, owner):
        self.ptr, self.device_id, self.owner = ptr, device_id, owner


class _Flags:
    __slots__ = ("c_contiguous",)

    def __init__(self, c_contiguous):
        self.c_contiguous = c_contiguous


class _Stream:
    def __init__(self):
        self.ptr = 0


def fake_cupy(driver: FakeDriver) -> types.ModuleType:
    """A ``cupy`` module over ``driver``'s memory (see the module's docstring)."""
    cupy = types.ModuleType("cupy")
    stream = _Stream()

    class ndarray:                 # noqa: N801 - CuPy's name, which the launcher recognises
        def __init__(self, host: np.ndarray, c_contiguous: bool = True):
            host = np.ascontiguousarray(host)
            ptr = driver._host(host.nbytes)
            ctypes.memmove(ptr, host.ctypes.data, host.nbytes)
            self.data = _Memory(ptr, 0, self)
            self.shape, self.dtype, self.nbytes, self.size = host.shape, host.dtype, host.nbytes, host.size
            self.strides = host.strides
            self._c_contiguous = c_contiguous
            self.flags = _Flags(c_contiguous)

        @property
        def __cuda_array_interface__(self):
            return {"shape": self.shape, "typestr": self.dtype.str, "data": (self.data.ptr, False),
                    "version": 3, "strides": None}

        def get(self) -> np.ndarray:
            out = np.empty(self.shape, self.dtype)
            ctypes.memmove(out.ctypes.data, self.data.ptr, self.nbytes)
            return out

    class CUDADriverError(RuntimeError):
        def __init__(self, status):
            self.status = status
            super().__init__(f"CUDA driver error {status}")

    def launchKernel(*arguments):       # noqa: N802 - CuPy's name; its Cython signature takes 11 C integers
        if len(arguments) != 11 or any(type(a) is not int for a in arguments):
            raise TypeError(f"launchKernel takes 11 ints, got {arguments!r}")
        driver.cupy_launches += 1
        result = driver.cuLaunchKernel(*arguments)
        if int(result[0]):
            raise CUDADriverError(int(result[0]))

    ndarray.__module__ = "cupy._core.core"
    cupy.ndarray = ndarray
    cupy.asarray = ndarray
    cupy.cuda = types.SimpleNamespace(get_current_stream=lambda: stream,
                                      runtime=types.SimpleNamespace(is_hip=False),
                                      driver=types.SimpleNamespace(launchKernel=launchKernel,
                                                                   CUDADriverError=CUDADriverError))
    cupy.stream = stream
    return cupy


@contextlib.contextmanager
def installed(can_map_host: bool = True):
    """``(device, driver, cupy)``: a CudaDevice on a FakeDriver and the fake ``cupy`` in sys.modules
    for the block (the earlier ``cupy`` entry, if any, comes back after it)."""
    from ..kernels import arguments
    from ..runtime import cuda
    driver = FakeDriver(can_map_host)
    saved = (cuda.initialize, sys.modules.get("cupy"), dict(arguments._READERS))
    cuda.initialize = lambda: driver
    cupy = sys.modules["cupy"] = fake_cupy(driver)
    device = None
    try:
        device = cuda.CudaDevice(0)
        yield device, driver, cupy
    finally:
        ring = device.__dict__.get("_ring") if device is not None else None
        if ring:
            ring.closed = True               # its memory goes with the fake: nothing to report at exit
        cuda.initialize = saved[0]
        if saved[1] is None:
            sys.modules.pop("cupy", None)
        else:
            sys.modules["cupy"] = saved[1]
        arguments._READERS.clear()
        arguments._READERS.update(saved[2])
