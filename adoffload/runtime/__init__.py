"""One vendor-neutral device API over the host CPU, CUDA (cuda-python) and HIP (hip-python).

``get_device("cpu" | "host" | "cuda" | "cuda:N" | "hip" | "hip:N")`` returns the
process-wide ``Device`` (``devices.py``); see ``device.py`` for the API and docs/ARCHITECTURE.md §4-5 for the
packed-slot launch ABI.
"""
from .device import Buffer, Device, Event, LoadedModule, Stream, parse_spec
from .devices import available_devices, device_count, get_device

__all__ = ["Buffer", "Device", "Event", "LoadedModule", "Stream", "available_devices",
           "device_count", "get_device", "parse_spec"]
