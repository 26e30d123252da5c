"""A CUDA device for the benchmarks: one stream, uploads, raw launches of hand-written kernels,
copy bandwidth, and nvcc builds of the baselines in ``benchmarks/cuda/``."""
from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path

import numpy as np

from .timing import BATCH, REPS, WARMUP, Timing, time_calls

CUDA_SOURCES = Path(__file__).parent / "cuda"


def gpu_available() -> tuple[bool, str]:
    """Whether adoffload's CUDA runtime finds a GPU here, and why not."""
    try:
        from adoffload.runtime import get_device
        get_device("cuda")
        return True, ""
    except Exception as exc:  # noqa: BLE001 - any failure means: no usable GPU
        return False, f"no usable CUDA GPU ({type(exc).__name__}: {str(exc)[:200]})"


def nvcc_cubin(source: str, arch: str = "sm_90") -> bytes:
    """``nvcc -O3 -arch=<arch> -cubin`` of ``benchmarks/cuda/<source>`` (raises ToolNotFoundError
    without nvcc)."""
    from adoffload.errors import ToolNotFoundError
    if shutil.which("nvcc") is None:
        raise ToolNotFoundError("nvcc is not on PATH: the hand-written CUDA baselines cannot be built")
    with tempfile.TemporaryDirectory() as tmp:
        cubin = Path(tmp) / "out.cubin"
        subprocess.run(["nvcc", "-O3", f"-arch={arch}", "-cubin", "-o", str(cubin), str(CUDA_SOURCES / source)],
                       check=True, capture_output=True)
        return cubin.read_bytes()


class Gpu:
    """A CUDA device with one stream and helpers to time launches with events."""

    def __init__(self):
        from adoffload.runtime import get_device
        self.device = get_device("cuda")
        self.stream = self.device.stream()
        self.cu = self.device.lib

    def upload(self, values: dict) -> dict:
        """numpy arrays -> device buffers (scalars pass through)."""
        out = {}
        for name, value in values.items():
            out[name] = self.device.to_device(value) if isinstance(value, np.ndarray) else value
        return out

    def download(self, buf, like: np.ndarray) -> np.ndarray:
        host = np.empty_like(like)
        self.device.synchronize()
        self.device.copy_to_host(buf, host)
        return host

    def time(self, launch, reps: int = REPS, batch: int = BATCH, warmup: int = WARMUP) -> Timing:
        """``time_calls`` for launches on this GPU (waits with a device synchronize)."""
        return time_calls(launch, lambda _: self.device.synchronize(), reps, batch, warmup)

    def free(self, values: dict) -> None:
        """Free the device buffers of an ``upload`` result (a case's memory, before the next case)."""
        for value in values.values():
            if hasattr(value, "ptr"):
                self.device.free(value)
        values.clear()

    def copy_bandwidth(self, nbytes: int = 1 << 31, reps: int = 30) -> float:
        """Device-to-device copy bandwidth in bytes/s (read + write counted)."""
        src, dst = self.device.allocate(nbytes), self.device.allocate(nbytes)
        handle = self.device.stream_handle(self.stream)

        def copy():
            self.device.call(self.cu.cuMemcpyDtoDAsync, dst.ptr, src.ptr, nbytes, handle)
        timing = self.time(copy, reps)
        self.device.free(src)
        self.device.free(dst)
        return 2 * nbytes / (timing.median_ms * 1e-3)

    def launch_raw(self, function, grid: tuple, block: tuple, args: list) -> None:
        """cuLaunchKernel with 8-byte arguments (pointers, int64, double) for hand-written kernels."""
        slots = np.zeros(len(args), np.uint64)
        for k, value in enumerate(args):
            slots[k] = np.float64(value).view(np.uint64) if isinstance(value, float) else np.uint64(value)
        pointers = slots.ctypes.data + 8 * np.arange(len(slots), dtype=np.uint64)
        self.device.call(self.cu.cuLaunchKernel, function.handle, *grid, *block, 0,
                         self.device.stream_handle(self.stream), int(pointers.ctypes.data), 0)
