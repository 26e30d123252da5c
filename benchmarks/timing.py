"""The one timer of every benchmark side: warm-up, repetitions, median with IQR and min/max.

Our kernels, the hand-written CUDA baselines, JAX programs and the peers (jax-md, Warp, Numba,
CuPy) all go through ``time_calls``, so a ratio is measured in one run, the same way
(shared/BENCHMARKS.md).
"""
from __future__ import annotations

import statistics
import time
from dataclasses import dataclass


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

    def fields(self) -> dict:
        """The columns of a long-format row: ``median_ms``, ``iqr_ms``, ``min_ms``, ``max_ms``, ``reps``."""
        return {"median_ms": self.median_ms, "iqr_ms": self.q3_ms - self.q1_ms, "min_ms": self.min_ms,
                "max_ms": self.max_ms, "reps": self.reps}

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
