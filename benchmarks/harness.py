"""Timing on the GPU: device-resident arguments, CUDA events, medians, environment records.

Our kernels and the hand-written CUDA baselines are launched through the same runtime on
the same stream, so their ratio is measured in one run (shared/BENCHMARKS.md).
"""
from __future__ import annotations

import datetime
import platform
import statistics
import subprocess
import time
from dataclasses import dataclass

import numpy as np


@dataclass
class Timing:
    median_ms: float
    spread_ms: float      # (max - min) of the timed repetitions
    reps: int

    @classmethod
    def of(cls, samples_ms: list[float]) -> "Timing":
        return cls(statistics.median(samples_ms), max(samples_ms) - min(samples_ms), len(samples_ms))


def environment() -> dict:
    """What a result file must record: date, GPU, driver, versions."""
    import jax
    import llvmlite
    env = {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
           "python": platform.python_version(), "jax": jax.__version__, "llvmlite": llvmlite.__version__,
           "numpy": np.__version__}
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,clocks.max.sm,memory.total",
                              "--format=csv,noheader"], capture_output=True, text=True, timeout=20).stdout.strip()
        env["gpu"] = out or "none"
    except (OSError, subprocess.SubprocessError):
        env["gpu"] = "none (nvidia-smi not found)"
    return env


def time_host(fn, reps: int = 20, warmup: int = 3) -> Timing:
    """Wall-clock timing of a synchronous host function (fn must block until done)."""
    for _ in range(warmup):
        fn()
    samples = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - t0) * 1e3)
    return Timing.of(samples)


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

    def time(self, launch, reps: int = 50, warmup: int = 5) -> Timing:
        """Median device time of ``launch()`` (each repetition bracketed by events)."""
        for _ in range(warmup):
            launch()
        self.device.synchronize()
        samples = []
        for _ in range(reps):
            start, stop = self.device.event(), self.device.event()
            start.record(self.stream)
            launch()
            stop.record(self.stream)
            stop.synchronize()
            samples.append(start.elapsed_ms(stop))
        return Timing.of(samples)

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
