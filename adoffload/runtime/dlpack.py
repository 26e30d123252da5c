"""Zero-copy exchange of arrays with JAX, CuPy, PyTorch and numpy through DLPack.

``as_device_array(obj)`` reads any object with ``__dlpack__``/``__dlpack_device__``
without copying: on the host through ``np.from_dlpack``, on GPUs by reading the
``DLManagedTensor`` in the (legacy, unversioned) capsule with ctypes. ``DeviceArray`` is
our own device buffer with shape and dtype; it exports itself the same way, so
``jax.dlpack.from_dlpack``, ``cupy.from_dlpack`` and ``np.from_dlpack`` can take it.

Ordering: our GPU work goes to the legacy default stream. When a consumer asks for the
data on another stream, ``__dlpack__`` synchronizes the device first (simple and safe).
"""
from __future__ import annotations

import ctypes
import struct
import threading
from dataclasses import dataclass

import numpy as np

from ..errors import ArgumentError, DeviceError
from .device import Buffer, Device
from .devices import get_device

# DLDeviceType codes (dlpack.h)
DL_CPU, DL_CUDA, DL_CUDA_HOST, DL_ROCM, DL_CUDA_MANAGED = 1, 2, 3, 10, 13
_DEVICE_KIND = {DL_CPU: "cpu", DL_CUDA_HOST: "cpu", DL_CUDA: "cuda", DL_CUDA_MANAGED: "cuda", DL_ROCM: "hip"}
_DL_TYPE_OF_KIND = {"cpu": DL_CPU, "cuda": DL_CUDA, "hip": DL_ROCM}

# DLDataTypeCode -> numpy kind letter
_DL_INT, _DL_UINT, _DL_FLOAT, _DL_COMPLEX, _DL_BOOL = 0, 1, 2, 5, 6
_CODE_TO_KIND = {_DL_INT: "i", _DL_UINT: "u", _DL_FLOAT: "f", _DL_COMPLEX: "c", _DL_BOOL: "b"}
_KIND_TO_CODE = {v: k for k, v in _CODE_TO_KIND.items()}


class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", DLDevice), ("ndim", ctypes.c_int32),
                ("dtype", DLDataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


class DLManagedTensor(ctypes.Structure):
    pass


DELETER = ctypes.CFUNCTYPE(None, ctypes.POINTER(DLManagedTensor))
DLManagedTensor._fields_ = [("dl_tensor", DLTensor), ("manager_ctx", ctypes.c_void_p), ("deleter", DELETER)]

_CAPSULE_NAME = ctypes.create_string_buffer(b"dltensor")     # must outlive every capsule
# Private prototypes: ctypes.pythonapi's function objects are shared by every library in the
# process, and another one (seen with JAX/CuPy on Python 3.12) may set their argtypes differently.
_get_pointer = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.py_object, ctypes.c_char_p)(
    ("PyCapsule_GetPointer", ctypes.pythonapi))
_is_valid = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.py_object, ctypes.c_char_p)(("PyCapsule_IsValid", ctypes.pythonapi))
_new_capsule = ctypes.PYFUNCTYPE(ctypes.py_object, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p)(
    ("PyCapsule_New", ctypes.pythonapi))


def numpy_dtype(code: int, bits: int, lanes: int = 1) -> np.dtype:
    kind = _CODE_TO_KIND.get(code)
    if kind is None or lanes != 1:
        raise ArgumentError(f"DLPack dtype (code {code}, {bits} bits, {lanes} lanes) has no numpy equivalent")
    return np.dtype("?") if kind == "b" else np.dtype(f"{kind}{bits // 8}")


def dl_dtype(dtype) -> DLDataType:
    dtype = np.dtype(dtype)
    if dtype.kind not in _KIND_TO_CODE:
        raise ArgumentError(f"dtype {dtype} cannot be exported through DLPack")
    return DLDataType(_KIND_TO_CODE[dtype.kind], dtype.itemsize * 8, 1)


# --- importing ---------------------------------------------------------------------------

@dataclass
class ExternalArray:
    """Another library's array as adoffload sees it. ``strides`` are in bytes (numpy's
    convention); ``owner`` keeps the producer's memory alive while this object lives."""
    device: str
    ptr: int
    shape: tuple[int, ...]
    dtype: np.dtype
    strides: tuple[int, ...]
    owner: object

    def __iter__(self):        # unpacks as (device, ptr, shape, dtype, strides)
        return iter((self.device, self.ptr, self.shape, self.dtype, self.strides))

    @property
    def nbytes(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64)) * self.dtype.itemsize

    @property
    def c_contiguous(self) -> bool:
        return self.strides == _c_strides(self.shape, self.dtype.itemsize)

    def as_buffer(self) -> Buffer:
        """The array's memory as a Buffer of its device (not owned: never free it)."""
        return Buffer(self.ptr, self.nbytes, get_device(self.device), owner=self.owner)


def _c_strides(shape, itemsize: int) -> tuple[int, ...]:
    strides, step = [], itemsize
    for extent in reversed(shape):
        strides.append(step)
        step *= max(extent, 1)
    return tuple(reversed(strides))


def as_device_array(obj, stream=None) -> ExternalArray:
    """Read a DLPack-capable array without copying: (device, ptr, shape, dtype, strides)."""
    if not hasattr(obj, "__dlpack__") or not hasattr(obj, "__dlpack_device__"):
        raise ArgumentError(f"{type(obj).__name__} does not support DLPack (__dlpack__/__dlpack_device__)")
    device_type, device_id = (int(v) for v in obj.__dlpack_device__())
    kind = _DEVICE_KIND.get(device_type)
    if kind is None:
        raise ArgumentError(f"DLPack device type {device_type} is not a CPU, CUDA or ROCm device")
    if kind == "cpu":
        array = np.from_dlpack(obj)
        return ExternalArray("cpu", int(array.ctypes.data), array.shape, array.dtype, array.strides, array)
    return read_capsule(obj.__dlpack__(stream=stream), kind, owner=obj)


def read_capsule(capsule, kind: str, owner=None) -> ExternalArray:
    """Read an unconsumed legacy DLPack capsule with ctypes (the path GPU arrays take)."""
    tensor = DLManagedTensor.from_address(_get_pointer(capsule, b"dltensor")).dl_tensor
    dtype = numpy_dtype(tensor.dtype.code, tensor.dtype.bits, tensor.dtype.lanes)
    shape = tuple(tensor.shape[i] for i in range(tensor.ndim))
    if tensor.strides:
        strides = tuple(tensor.strides[i] * dtype.itemsize for i in range(tensor.ndim))
    else:
        strides = _c_strides(shape, dtype.itemsize)
    ptr = (tensor.data or 0) + tensor.byte_offset
    device = "cpu" if kind == "cpu" else f"{kind}:{tensor.device.device_id}"
    # Keeping the unconsumed capsule alive keeps the producer's memory alive; its destructor
    # calls the producer's deleter when we drop it.
    return ExternalArray(device, ptr, shape, dtype, strides, (capsule, owner))


# DLTensor's fields as bytes: data, device type and id, ndim, dtype code/bits/lanes, shape, strides, byte_offset
_DLTENSOR = struct.Struct("<QiiiBBHQQQ" if ctypes.sizeof(ctypes.c_void_p) == 8 else "<IiiiBBHIIQ")
if _DLTENSOR.size != ctypes.sizeof(DLTensor):
    raise ImportError(f"adoffload's DLPack reader expects a {_DLTENSOR.size}-byte DLTensor, ctypes lays it out in "
                      f"{ctypes.sizeof(DLTensor)}")


def read_gpu_capsule(capsule, owner=None) -> ExternalArray | None:
    """``read_capsule`` for a launcher's hot path: one read of the DLTensor's bytes; None when the
    tensor is not in CUDA or ROCm device memory (the caller then takes the general path)."""
    address = _get_pointer(capsule, b"dltensor")
    data, device_type, device_id, ndim, code, bits, lanes, shape_at, strides_at, byte_offset = \
        _DLTENSOR.unpack(ctypes.string_at(address, _DLTENSOR.size))
    kind = _DEVICE_KIND.get(device_type)
    if kind not in ("cuda", "hip") or ndim < 0:
        return None
    dtype = numpy_dtype(code, bits, lanes)
    shape = struct.unpack(f"<{ndim}q", ctypes.string_at(shape_at, 8 * ndim)) if ndim else ()
    if strides_at:
        strides = tuple(s * dtype.itemsize for s in struct.unpack(f"<{ndim}q", ctypes.string_at(strides_at, 8 * ndim)))
    else:
        strides = _c_strides(shape, dtype.itemsize)
    return ExternalArray(f"{kind}:{device_id}", data + byte_offset, shape, dtype, strides, (capsule, owner))


# --- exporting ---------------------------------------------------------------------------

_exported: dict[int, tuple] = {}        # manager_ctx -> what must live until the deleter runs
_exported_lock = threading.Lock()


def _forget(address: int) -> None:
    with _exported_lock:
        _exported.pop(address, None)


@DELETER
def _deleter(managed) -> None:
    _forget(ctypes.addressof(managed.contents))


# The capsule destructor gets a PyObject* whose refcount is already zero: read it only
# through raw-pointer prototypes, never by turning it back into a Python object.
_raw_is_valid = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_char_p)(
    ("PyCapsule_IsValid", ctypes.pythonapi))
_raw_get_pointer = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p, ctypes.c_char_p)(
    ("PyCapsule_GetPointer", ctypes.pythonapi))


@ctypes.CFUNCTYPE(None, ctypes.c_void_p)
def _capsule_destructor(capsule_ptr) -> None:
    # A capsule nobody consumed still carries its name; then releasing is ours to do.
    if _raw_is_valid(capsule_ptr, b"dltensor"):
        _forget(_raw_get_pointer(capsule_ptr, b"dltensor"))


class DeviceArray:
    """A device buffer with a shape and dtype, exchangeable through DLPack."""

    def __init__(self, buffer: Buffer, shape, dtype):
        self.buffer, self.shape, self.dtype = buffer, tuple(int(s) for s in shape), np.dtype(dtype)
        if self.nbytes > buffer.nbytes:
            raise ArgumentError(f"a {self.shape} {self.dtype} array needs {self.nbytes} bytes, "
                                f"the buffer has {buffer.nbytes}")

    @classmethod
    def empty(cls, shape, dtype, device="cpu") -> "DeviceArray":
        device = get_device(device)
        shape = tuple(int(s) for s in np.atleast_1d(shape)) if np.ndim(shape) else (int(shape),)
        return cls(device.allocate(int(np.prod(shape, dtype=np.int64)) * np.dtype(dtype).itemsize), shape, dtype)

    @classmethod
    def from_numpy(cls, array: np.ndarray, device="cpu") -> "DeviceArray":
        array = np.ascontiguousarray(array)
        device = get_device(device)
        return cls(device.to_device(array), array.shape, array.dtype)

    @property
    def device(self) -> Device:
        return self.buffer.device

    @property
    def ptr(self) -> int:
        return self.buffer.ptr

    @property
    def nbytes(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64)) * self.dtype.itemsize

    def to_numpy(self) -> np.ndarray:
        out = np.empty(self.shape, self.dtype)
        self.device.copy_to_host(self.buffer, out)
        return out

    def __repr__(self) -> str:
        return f"DeviceArray(shape={self.shape}, dtype={self.dtype}, device={self.device.spec})"

    def __dlpack_device__(self) -> tuple[int, int]:
        return _DL_TYPE_OF_KIND[self.device.kind], self.device.ordinal

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        if copy:
            raise BufferError("DeviceArray exports without copying only")
        if dl_device is not None and tuple(dl_device) != self.__dlpack_device__():
            raise BufferError(f"DeviceArray lives on {self.device.spec}; cannot export to {dl_device}")
        if self.buffer.freed:
            raise DeviceError("export of a freed DeviceArray")
        if self.device.kind != "cpu" and stream not in (None, 1):
            self.device.synchronize()        # our work is on the legacy default stream
        return self._capsule()

    def _capsule(self):
        ndim = len(self.shape)
        shape = (ctypes.c_int64 * max(ndim, 1))(*self.shape)
        strides = (ctypes.c_int64 * max(ndim, 1))(*(s // self.dtype.itemsize
                                                    for s in _c_strides(self.shape, self.dtype.itemsize)))
        managed = DLManagedTensor()
        managed.dl_tensor = DLTensor(self.ptr, DLDevice(*self.__dlpack_device__()), ndim,
                                     dl_dtype(self.dtype), shape, strides, 0)
        managed.deleter = _deleter
        with _exported_lock:
            _exported[ctypes.addressof(managed)] = (managed, shape, strides, self)
        return _new_capsule(ctypes.addressof(managed), ctypes.addressof(_CAPSULE_NAME),
                            ctypes.cast(_capsule_destructor, ctypes.c_void_p))
