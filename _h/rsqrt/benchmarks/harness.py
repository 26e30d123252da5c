"""Timing: one wall-clock timer for every side, medians with IQR and min/max, environment records.

Our kernels and the hand-written CUDA baselines are launched through the same runtime on
the same stream, and JAX programs are waited for with ``block_until_ready``; all of them go
through ``time_calls``, so their ratio is measured in one run, the same way (shared/BENCHMARKS.md).
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
    q1_ms: float = float("nan")
    q3_ms: float = float("nan")
    min_ms: float = float("nan")
    max_ms: float = float("nan")

    @classmethod
    def of(cls, samples_ms: list[float]) -> "Timing":
        q1, _, q3 = statistics.quantiles(samples_ms, n=4) if len(samples_ms) > 1 else (samples_ms[0],) * 3
        return cls(statistics.median(samples_ms), max(samples_ms) - min(samples_ms), len(samples_ms),
                   q1, q3, min(samples_ms), max(samples_ms))

    def columns(self, prefix: str) -> dict:
        """``{prefix}_ms`` (median) and its spread: IQR, min and max, for a result row."""
        return {f"{prefix}_ms": self.median_ms, f"{prefix}_iqr_ms": self.q3_ms - self.q1_ms,
                f"{prefix}_min_ms": self.min_ms, f"{prefix}_max_ms": self.max_ms}


# The one timer of every side (ours, hand-written CUDA, jax.numpy, jax-md): the same warm-up, the
# same repetitions, each repetition ``batch`` calls back to back then one wait for the device, on
# the host's wall clock. Per-call time = elapsed / batch, so launch costs overlap with device work
# as they do in a real program; every side pays its own dispatch cost the same way.
REPS, BATCH, WARMUP = 20, 10, 3


def time_calls(call, wait, reps: int = REPS, batch: int = BATCH, warmup: int = WARMUP) -> Timing:
    """Time ``call()`` (which enqueues work); ``wait(result)`` blocks until the device is done."""
    for _ in range(warmup):
        wait(call())
    samples = []
    for _ in range(reps):
        t0 = time.perf_counter()
        for _ in range(batch - 1):
            call()
        wait(call())
        samples.append((time.perf_counter() - t0) * 1e3 / batch)
    return Timing.of(samples)


def time_jax(fn, *args, reps: int = REPS, batch: int = BATCH, warmup: int = WARMUP) -> Timing:
    """``time_calls`` for a jitted JAX function (waits with ``jax.block_until_ready``)."""
    import jax
    return time_calls(lambda: fn(*args), jax.block_until_ready, reps, batch, warmup)


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


def run_cases(cases) -> list[dict]:
    """Run ``(name, run)`` pairs in order, printing each row as JSON; a case that raises is a row
    with ``agree: False`` and its error, never a missing one."""
    import json
    rows = []
    for name, run in cases:
        try:
            row = run()
        except Exception as exc:          # reported in the row, never hidden
            row = {"case": name, "agree": False, "error": f"{type(exc).__name__}: {str(exc)[:400]}"}
        rows.append(row)
        print(json.dumps(row), flush=True)
    return rows


def write_rows(path, rows: list[dict]) -> int:
    """``rows`` with the environment (and JAX's backend) as JSON at ``path``; exit status 0 when
    every row agrees with its reference."""
    import json
    import jax
    try:
        env = environment()
    except Exception as exc:
        env = {"error": str(exc)}
    env["jax_backend"] = jax.default_backend()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"environment": env, "rows": rows}, indent=1))
    return 0 if all(r.get("agree") for r in rows) else 1


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
