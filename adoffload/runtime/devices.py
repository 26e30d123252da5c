"""The process-wide devices: ``get_device(spec)`` makes each one once and every caller shares it (one
context, one allocator per GPU); ``device_count`` and ``available_devices`` say what this process can use."""
from __future__ import annotations

import threading

from ..errors import ArgumentError, DeviceError, DeviceNotFoundError
from .cuda import CudaDevice, cuda_device_count
from .device import _KIND_ALIASES, Device, parse_spec
from .hip import HipDevice, hip_device_count
from .host import HostDevice

# The host device whose block kernels run 64-lane warps, as AMD's wavefronts (HostDevice.warp_size).
WAVE64 = "cpu-wave64"
WAVE64_SPECS = ("cpu:wave64", "host:wave64")
_devices: dict[tuple[str, int], Device] = {}
_devices_lock = threading.Lock()


def _construct(kind: str, ordinal: int) -> Device:
    if kind in ("cpu", WAVE64):
        return HostDevice(warp_size=64 if kind == WAVE64 else 32)
    if kind == "cuda":
        return CudaDevice(ordinal)
    return HipDevice(ordinal)


def get_device(spec="cpu") -> Device:
    """The process-wide device for ``spec``: 'cpu'|'host'|'cuda'|'cuda:N'|'hip'|'hip:N' or a Device.
    'cpu:wave64' is the host running block kernels with AMD's 64-lane wavefronts (a testing aid for
    AMD semantics without an AMD GPU: codegen/host/block_split.py)."""
    if isinstance(spec, Device):
        return spec
    if spec is None:
        spec = "cpu"
    if not isinstance(spec, str):
        raise ArgumentError(f"a device is a string like 'cuda:0' or a Device, got {type(spec).__name__}")
    key = (WAVE64, 0) if spec.strip().lower() in WAVE64_SPECS else parse_spec(spec)
    with _devices_lock:
        device = _devices.get(key)
        if device is None:
            device = _devices[key] = _construct(*key)
        return device


def device_count(kind: str) -> int:
    """How many devices of ``kind`` this process can use (0 where the driver is missing)."""
    kind = _KIND_ALIASES.get(kind, kind)
    if kind == "cpu":
        return 1
    try:
        if kind == "cuda":
            return cuda_device_count()
        if kind == "hip":
            return hip_device_count()
    except DeviceNotFoundError:
        return 0
    raise DeviceNotFoundError(f"unknown device kind '{kind}'")


def available_devices() -> list[Device]:
    """Every device this process can use: the host first, then CUDA, then HIP devices."""
    found = [get_device("cpu")]
    for kind in ("cuda", "hip"):
        for ordinal in range(device_count(kind)):
            try:
                found.append(get_device(f"{kind}:{ordinal}"))
            except DeviceError:
                continue
    return found
