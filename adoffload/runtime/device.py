"""The vendor-neutral device API: devices, buffers, modules, streams, events, launch.

Three implementations share it: ``host`` (CPU worker threads), ``cuda`` (cuda-python's
driver API) and ``hip`` (hip-python). ``devices.get_device(spec)`` picks one and caches it per
process, so every caller of ``get_device("cuda:0")`` shares one context and one allocator.

Launches use the packed-slot ABI of docs/ARCHITECTURE.md §4: ``slots`` is a numpy uint64
array holding one 8-byte slot per flattened kernel parameter, then the grid dimensions,
then the status pointer; ``total_threads`` is the number of linear threads to run.
"""
from __future__ import annotations

import abc
from dataclasses import dataclass, field

import numpy as np

from ..errors import ArgumentError, DeviceError, DeviceNotFoundError, GridError

KINDS = ("cpu", "cuda", "hip")
# Spellings accepted by get_device, mapped to the canonical kind.
_KIND_ALIASES = {"cpu": "cpu", "host": "cpu", "cuda": "cuda", "gpu": "cuda", "nvidia": "cuda",
                 "hip": "hip", "rocm": "hip", "amd": "hip"}


@dataclass(eq=False)
class Buffer:
    """A block of device memory: ``ptr`` is its device address, ``nbytes`` its size.

    ``capacity`` is what the allocator really reserved (a caching allocator may hand out a
    larger block than asked for); ``nbytes`` is what the caller asked for.
    """
    ptr: int
    nbytes: int
    device: "Device"
    capacity: int = 0
    freed: bool = field(default=False, repr=False)
    owner: object = field(default=None, repr=False)   # keeps host memory alive

    def __post_init__(self):
        self.capacity = max(self.capacity, self.nbytes)


class Stream(abc.ABC):
    """An ordered queue of device work. ``handle`` is the driver's stream (0 = default)."""
    device: "Device"

    @property
    @abc.abstractmethod
    def handle(self) -> int: ...

    @abc.abstractmethod
    def synchronize(self) -> None: ...


class Event(abc.ABC):
    """A marker recorded on a stream; two events give the device time between them."""

    @abc.abstractmethod
    def record(self, stream: Stream | None = None) -> "Event": ...

    @abc.abstractmethod
    def synchronize(self) -> None: ...

    @abc.abstractmethod
    def elapsed_ms(self, later: "Event") -> float:
        """Milliseconds from this event to ``later`` (both recorded and complete)."""


class LoadedModule(abc.ABC):
    """Code loaded on a device; ``function(name)`` gives a launchable handle."""

    def __init__(self, device: "Device"):
        self.device = device
        self._functions: dict[str, object] = {}

    def function(self, name: str):
        if name not in self._functions:
            self._functions[name] = self._lookup(name)
        return self._functions[name]

    @abc.abstractmethod
    def _lookup(self, name: str): ...


class Device(abc.ABC):
    """One device of one kind. Subclasses implement the driver calls."""
    kind: str = ""
    ordinal: int = 0
    name: str = ""

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.spec} '{self.name}'>"

    @property
    def spec(self) -> str:
        return self.kind if self.kind == "cpu" else f"{self.kind}:{self.ordinal}"

    # --- memory ------------------------------------------------------------------------
    @abc.abstractmethod
    def allocate(self, nbytes: int) -> Buffer: ...

    @abc.abstractmethod
    def free(self, buf: Buffer) -> None: ...

    @abc.abstractmethod
    def copy_to_device(self, buf: Buffer, array: np.ndarray, stream: Stream | None = None) -> None: ...

    @abc.abstractmethod
    def copy_to_host(self, buf: Buffer, array: np.ndarray, stream: Stream | None = None) -> None: ...

    @abc.abstractmethod
    def memset(self, buf: Buffer, value: int = 0, stream: Stream | None = None) -> None: ...

    def to_device(self, array: np.ndarray, stream: Stream | None = None) -> Buffer:
        """Allocate a buffer and copy ``array`` into it."""
        array = np.ascontiguousarray(array)
        buf = self.allocate(array.nbytes)
        self.copy_to_device(buf, array, stream)
        return buf

    # --- code --------------------------------------------------------------------------
    @abc.abstractmethod
    def load_module(self, image) -> LoadedModule: ...

    def load(self, image) -> LoadedModule:
        """Alias of ``load_module`` (the name docs/ARCHITECTURE.md §5 uses)."""
        return self.load_module(image)

    @abc.abstractmethod
    def launch(self, function, total_threads: int, slots: np.ndarray,
               block_size: int | None = None, stream: Stream | None = None) -> None: ...

    # --- ordering ----------------------------------------------------------------------
    @abc.abstractmethod
    def synchronize(self) -> None: ...

    @abc.abstractmethod
    def stream(self) -> Stream:
        """A new stream on this device."""

    @abc.abstractmethod
    def event(self) -> Event:
        """A new (unrecorded) timing event on this device."""


# --- shared argument checks ------------------------------------------------------------

def check_slots(slots) -> np.ndarray:
    """The launch slots as a C-contiguous uint64 array (the packed-slot ABI)."""
    if not isinstance(slots, np.ndarray) or slots.dtype != np.uint64 or slots.ndim != 1:
        raise ArgumentError(f"launch slots must be a 1-D numpy uint64 array, got "
                            f"{type(slots).__name__}{getattr(slots, 'dtype', '')}")
    if not slots.flags.c_contiguous:
        raise ArgumentError("launch slots must be C-contiguous")
    return slots


def check_total_threads(total_threads) -> int:
    total = int(total_threads)
    if total != total_threads or total < 0:
        raise GridError(f"the number of threads to launch must be a non-negative integer, got {total_threads!r}")
    return total


def check_copy(buf: Buffer, array: np.ndarray, direction: str) -> None:
    """Copies move whole C-contiguous arrays that fit in the buffer."""
    if buf.freed:
        raise DeviceError(f"copy {direction} a freed buffer")
    if not isinstance(array, np.ndarray) or not array.flags.c_contiguous:
        raise ArgumentError(f"copy {direction} device needs a C-contiguous numpy array")
    if array.nbytes > buf.nbytes:
        raise ArgumentError(f"copy {direction} device: the array has {array.nbytes} bytes, "
                            f"the buffer only {buf.nbytes}")


# --- choosing a device -----------------------------------------------------------------

def parse_spec(spec: str) -> tuple[str, int]:
    """``"cuda:1"`` -> ``("cuda", 1)``; ``"host"`` -> ``("cpu", 0)``."""
    text = spec.strip().lower()
    name, _, number = text.partition(":")
    kind = _KIND_ALIASES.get(name)
    if kind is None:
        raise DeviceNotFoundError(f"unknown device '{spec}': use one of 'cpu', 'cpu:wave64', 'cuda', 'cuda:N', "
                                  f"'hip', 'hip:N'")
    if not number:
        return kind, 0
    if not number.isdigit() or (kind == "cpu" and int(number) != 0):
        raise DeviceNotFoundError(f"bad device ordinal in '{spec}'" + (" (the host's variant with 64-lane warps "
                                                                       "is 'cpu:wave64')" if kind == "cpu" else ""))
    return kind, int(number)
