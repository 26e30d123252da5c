"""Binding and checking one launch's arguments: every problem is an ``adoffload.Error`` naming the parameter.

``bind_arguments`` matches positional and keyword arguments to the visible parameters and checks
each (dtype, rank, layout, alignment, writability, scalar kinds and ranges); arrays already in GPU
memory become ``Resident`` values. ``normalize_grid`` checks the grid. The launcher's plans
(launch_plan.py) run these once per argument signature and cache what they proved.
"""
from __future__ import annotations

import ctypes
import numbers

import numpy as np

from ..errors import ArgumentError, GridError
from ..language.signature import KernelSignature
from ..language.types import ArrayType, ScalarType

MAX_THREADS = 2**62


def bind_arguments(signature: KernelSignature, args: tuple, kwargs: dict, copied: frozenset = frozenset()) -> list:
    """Match positional and keyword arguments to the visible parameters, in parameter order.
    ``copied``: names of written params whose numpy arrays the launcher replaces by a copy (a
    reverse kernel's seeds): those may be read-only."""
    params = signature.visible_params
    if len(args) > len(params):
        raise ArgumentError(f"kernel '{signature.name}' takes {len(params)} arguments "
                            f"({', '.join(p.name for p in params)}), got {len(args)}")
    bound = list(args) + [_MISSING] * (len(params) - len(args))
    names = [p.name for p in params]
    for key, value in kwargs.items():
        if key not in names:
            raise ArgumentError(f"kernel '{signature.name}' has no parameter '{key}' "
                                f"(parameters: {', '.join(names)})")
        k = names.index(key)
        if bound[k] is not _MISSING:
            raise ArgumentError(f"kernel '{signature.name}': parameter '{key}' given twice")
        bound[k] = value
    missing = [names[k] for k, v in enumerate(bound) if v is _MISSING]
    if missing:
        launcher_own = [name for name in missing if name in ("grid", "device")]
        hint = (f"; {' and '.join(repr(n) for n in launcher_own)} {'is' if len(launcher_own) == 1 else 'are'} "
                f"also the launcher's own keyword{'s' if len(launcher_own) > 1 else ''} (grid=, device=), so "
                f"pass {'that parameter' if len(launcher_own) == 1 else 'those parameters'} by position"
                if launcher_own else "")
        raise ArgumentError(f"kernel '{signature.name}' is missing argument(s): {', '.join(missing)}{hint}")
    return [check_argument(signature, p, v, p.name in copied) for p, v in zip(params, bound)]


_MISSING = object()


def check_argument(signature: KernelSignature, param, value, copied: bool = False):
    """``value`` checked against ``param`` (numpy scalars for scalars, a Resident for a GPU array);
    ``copied``: the launcher passes the kernel a copy of a numpy array, so it may be read-only."""
    where = f"kernel '{signature.name}', parameter '{param.name}'"
    if isinstance(param.type, ArrayType):
        return _check_array(where, param.type, value, copied)
    return _check_scalar(where, param.type, value)


class Resident:
    """An array argument already in GPU memory (a DeviceArray, or a CuPy/JAX/PyTorch GPU array
    through DLPack): launches on its device use it in place, with no copies. ``ordered``: work on it
    is ordered with the device's default stream, where the launcher queues its launches (our own
    DeviceArrays; CuPy arrays while CuPy works on its null stream), so a launch need not wait for
    the kernel before returning (launch_run.py); arrays of other producers are launched synchronously."""
    __slots__ = ("device", "ptr", "shape", "dtype", "owner", "ordered")

    def __init__(self, device: str, ptr: int, shape: tuple[int, ...], dtype: np.dtype, owner: object,
                 ordered: bool = False):
        self.device, self.ptr, self.shape, self.dtype, self.owner, self.ordered = \
            device, ptr, shape, dtype, owner, ordered

    def __repr__(self) -> str:
        return f"Resident({self.device}, {self.ptr:#x}, {self.shape}, {self.dtype})"

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def nbytes(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64)) * self.dtype.itemsize


def _resident(where: str, value) -> Resident | None:
    """``value`` as a Resident when it lives in GPU memory, else None."""
    from ..runtime.dlpack import DeviceArray, as_device_array
    reader = fast_reader(type(value))
    resident = reader(value) if reader is not None else None
    if resident is not None:
        return resident
    if isinstance(value, DeviceArray):
        if value.device.kind == "cpu":
            return None
        return Resident(value.device.spec, value.ptr, value.shape, value.dtype, value, True)
    if not hasattr(value, "__dlpack_device__") or int(value.__dlpack_device__()[0]) == 1:   # 1: DLPack CPU
        return None
    external = as_device_array(value)
    if not external.c_contiguous:
        raise ArgumentError(f"{where}: the device array is not C-contiguous (strides {external.strides})")
    return Resident(external.device, external.ptr, tuple(external.shape), np.dtype(external.dtype), external)


_UNKNOWN = object()
_READERS: dict = {}          # argument type -> its fast reader (None: DeviceArray or DLPack)


def fast_reader(kind):
    """``read(value) -> Resident | None`` for arrays of type ``kind`` read without DLPack (CuPy's), or None."""
    reader = _READERS.get(kind, _UNKNOWN)
    if reader is _UNKNOWN:
        reader = _READERS.setdefault(kind, _reader_for(kind))
    return reader


def _reader_for(kind):
    """A reader of CuPy's ndarray through its own attributes (a DLPack capsule costs more than the
    rest of a launch); None for every other type."""
    if kind.__name__ != "ndarray" or not kind.__module__.startswith("cupy"):
        return None
    import cupy
    current_stream = cupy.cuda.get_current_stream
    prefix = "hip:" if getattr(cupy.cuda.runtime, "is_hip", False) else "cuda:"
    specs: dict[int, str] = {}

    def read(value) -> Resident | None:
        # CuPy on another stream than its null stream (the default stream our launches use): DLPack,
        # whose producer orders that stream's work before ours, and a synchronous launch
        if current_stream().ptr != 0 or not value.flags.c_contiguous:
            return None
        memory = value.data
        spec = specs.get(memory.device_id)
        if spec is None:
            spec = specs[memory.device_id] = prefix + str(memory.device_id)
        return Resident(spec, memory.ptr, value.shape, value.dtype, value, True)
    return read


def _check_array(where: str, expected: ArrayType, value, copied: bool = False):
    if not isinstance(value, np.ndarray):
        if isinstance(value, (numbers.Number, np.generic)):
            raise ArgumentError(f"{where}: expected an array {expected!r}, got the scalar {value!r}")
        resident = _resident(where, value)
        if resident is not None:
            _check_layout(where, expected, resident)
            return resident
        value = _host_array(where, expected, value, expected.writes and not copied)
    if type(value) is not np.ndarray and isinstance(value, np.ma.MaskedArray):
        raise ArgumentError(f"{where}: a masked array: the kernel would read and write its data and ignore its "
                            f"mask; pass its data with the masked elements filled in (x.filled(value)), or "
                            f"np.ma.getdata(x) to use the data as it is")
    _check_layout(where, expected, value)
    if not value.flags.c_contiguous:
        raise ArgumentError(f"{where}: the array is not C-contiguous (strides {value.strides}); "
                            f"pass np.ascontiguousarray(...)")
    if not value.flags.aligned:
        raise ArgumentError(f"{where}: the array's data address {value.ctypes.data:#x} is not a multiple of "
                            f"its element size {value.itemsize} (a misaligned view, e.g. np.frombuffer with "
                            f"an odd offset); kernels may use aligned loads, so pass an aligned copy: "
                            f"np.require(x, requirements='CA')")
    if expected.writes and not copied and not value.flags.writeable:
        raise ArgumentError(f"{where}: the array is read-only but the kernel writes it ({expected!r})")
    return value


def _host_array(where: str, expected: ArrayType, value, written: bool) -> np.ndarray:
    """A host array-like as the numpy array the kernel gets: through DLPack where the object exports
    itself (zero-copy, as the protocol promises), else through ``__array__``. ``written``: the kernel
    writes it, so an ``__array__`` that hands out a fresh copy on each call is refused (the results
    would go into a temporary and be lost)."""
    from ..runtime.dlpack import DeviceArray
    if isinstance(value, DeviceArray):      # one in host memory: a view of it (no DLPack capsule, no deleter)
        if value.buffer.freed:
            raise ArgumentError(f"{where}: the DeviceArray was freed")
        if not value.nbytes:
            return np.empty(value.shape, value.dtype)
        memory = (ctypes.c_char * value.nbytes).from_address(value.ptr)
        return np.frombuffer(memory, value.dtype).reshape(value.shape)
    if hasattr(value, "__dlpack__"):
        try:
            return np.from_dlpack(value)
        except (AttributeError, BufferError, TypeError, ValueError, RuntimeError):
            if not hasattr(value, "__array__"):
                raise ArgumentError(f"{where}: {type(value).__name__} does not export its data through DLPack "
                                    f"for numpy (np.from_dlpack fails); pass a numpy array") from None
    if not hasattr(value, "__array__"):
        raise ArgumentError(f"{where}: expected a numpy array {expected!r}, got {type(value).__name__}")
    try:
        array = np.asarray(value)
    except (TypeError, ValueError, RuntimeError, BufferError) as exc:
        raise ArgumentError(f"{where}: np.asarray of this {type(value).__name__} failed ({type(exc).__name__}: "
                            f"{exc}); pass a numpy array {expected!r}") from exc
    if written and isinstance(array, np.ndarray) and array.nbytes and not np.shares_memory(array, np.asarray(value)):
        raise ArgumentError(f"{where}: the kernel writes it ({expected!r}), but np.asarray of this "
                            f"{type(value).__name__} gives a new copy on each call, so the results would be lost; "
                            f"pass a numpy array and read the results from it")
    return array


def _check_layout(where: str, expected: ArrayType, value) -> None:
    if value.dtype != expected.dtype.dtype:
        raise ArgumentError(f"{where}: expected dtype {expected.dtype.dtype} ({expected!r}), got {value.dtype}")
    if value.ndim != expected.ndim:
        raise ArgumentError(f"{where}: expected a {expected.ndim}-D array, got {value.ndim}-D with shape {value.shape}")


def _check_scalar(where: str, expected: ScalarType, value):
    if isinstance(value, np.ndarray):
        if value.ndim == 0:
            value = value[()]
        else:
            raise ArgumentError(f"{where}: expected a scalar {expected!r}, got an array of shape {value.shape}")
    if expected.is_float:
        if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
            raise ArgumentError(f"{where}: expected a float {expected!r}, got {type(value).__name__} {value!r}")
        return _float_scalar(where, expected, value)
    if expected is not None and expected.name == "bool_":
        if not isinstance(value, (bool, np.bool_, numbers.Integral)):
            raise ArgumentError(f"{where}: expected a bool, got {type(value).__name__} {value!r}")
        return np.bool_(value)
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral):
        raise ArgumentError(f"{where}: expected an integer {expected!r}, got {type(value).__name__} {value!r}")
    info = np.iinfo(expected.dtype)
    if not info.min <= int(value) <= info.max:
        raise ArgumentError(f"{where}: {value} does not fit in {expected!r}")
    return expected.dtype.type(value)


def _float_scalar(where: str, expected: ScalarType, value):
    """``value`` (a real number) as the float type ``expected``. A finite value beyond its range
    rounds to inf with numpy's RuntimeWarning, as numpy does; an int too large for a double
    (``2**2000``) is an ArgumentError naming the parameter, not numpy's bare OverflowError."""
    try:
        return expected.dtype.type(value)
    except OverflowError:
        raise ArgumentError(f"{where}: {value} does not fit in {expected!r}") from None


def normalize_grid(signature: KernelSignature, grid) -> tuple[int, ...]:
    """The grid as a tuple of grid_rank non-negative ints (an int is accepted for rank 1)."""
    rank = signature.grid_rank
    if isinstance(grid, numbers.Integral) and not isinstance(grid, bool):
        grid = (int(grid),)
    try:
        if isinstance(grid, (str, bytes)) or not all(isinstance(g, numbers.Integral) and not isinstance(g, bool)
                                                     for g in grid):
            raise TypeError
        grid = tuple(int(g) for g in grid)
    except TypeError:
        raise GridError(f"kernel '{signature.name}': grid must be an int or a tuple of ints, got {grid!r}") from None
    if len(grid) != rank:
        raise GridError(f"kernel '{signature.name}' uses a {rank}-D grid (ado.tid() gives {rank} "
                        f"index{'es' if rank > 1 else ''}), got grid={grid}")
    if any(g < 0 for g in grid):
        raise GridError(f"kernel '{signature.name}': grid sizes must be >= 0, got {grid}")
    total = 1
    for g in grid:
        total *= g
    if total > MAX_THREADS:
        raise GridError(f"kernel '{signature.name}': grid {grid} has {total} threads, more than {MAX_THREADS}")
    return grid


def derivative_wrt(mode: str, wrt) -> tuple:
    """``ado.jvp``/``ado.vjp``'s ``wrt`` as a tuple of names: one name, or an iterable of them."""
    if isinstance(wrt, str):
        return (wrt,)
    try:
        return tuple(wrt)
    except TypeError:
        raise ArgumentError(f"ado.{mode}(kernel, wrt): wrt names the parameters to differentiate, a name or a "
                            f"list of names (e.g. wrt=['x']); got {type(wrt).__name__} {wrt!r}") from None


def derivative_width(mode: str, width) -> int:
    """``ado.jvp``'s ``width=`` (tangents at once) as an int; its range is checked where it is used."""
    if isinstance(width, (bool, np.bool_)) or not isinstance(width, numbers.Integral):
        raise ArgumentError(f"ado.{mode}: width= is the number of tangents, an int >= 1; got "
                            f"{type(width).__name__} {width!r}")
    return int(width)
