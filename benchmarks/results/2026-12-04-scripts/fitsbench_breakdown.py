"""Where the time of adoffload.optimize.least_squares' numpy path goes on CUDA (fitsbench, issue 32 item 4).

    PYTHONPATH=. python tmp_probe/fitsbench_breakdown.py OUT_FILE.jsonl 100000 1000000

Per curve count: the decay fits of examples/fitting (40 points, tol 1e-8), ours on numpy arrays with
device='cuda', three configurations, 3 timed calls each after one warm-up (medians):
  * before: what main does: driver's pageable copies (STAGING_MIN_BYTES = inf), messages as a
    fixed-width str array (astype(str)), optimality by np.max(np.abs(g), axis=1);
  * after, 1 thread: this branch with the staging's memmoves on the calling thread only;
  * after: this branch.
Each call is split by wrapping the device's methods the launcher calls: h2d (copy_to_device),
d2h (copy_to_host), memset, alloc/free, kernel (launch_checked: clear the record, launch, read it
back, which waits for the kernel), and the API's messages and optimality; "other" is the rest (argument
checks, launch plan, result). Then raw copies of curves x 40 float64: H2D from a resident numpy array
and D2H into a fresh (np.empty) and a touched array, the driver's vs staged, and D2H into page-locked
memory (the DMA alone). One JSON object a line, and a summary on stdout.
"""
from __future__ import annotations

import json
import os
import statistics
import sys
import time

os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
sys.path.insert(0, "examples/fitting")
sys.path.insert(0, "examples/chemistry")

import numpy as np  # noqa: E402

import decay_fits  # noqa: E402
from adoffload.optimize import api, least_squares, result, shared  # noqa: E402
from adoffload.optimize.status import MESSAGES  # noqa: E402
from adoffload.runtime import get_device  # noqa: E402

TOL = 1e-8
OUT = open(sys.argv[1], "a")
SIZES = [int(a) for a in sys.argv[2:]] or [100_000, 1_000_000]
dev = get_device("cuda")


def emit(row):
    OUT.write(json.dumps(row) + "\n")
    OUT.flush()
    print(json.dumps(row), flush=True)


def old_messages(status):
    status = np.asarray(status)
    out = np.empty(status.shape, dtype=object)
    for code, text in MESSAGES.items():
        out[status == code] = text
    return out.astype(str)


def old_optimality(g):
    return np.max(np.abs(g), axis=1)


class Clock:
    def __init__(self):
        self.spent = {}

    def wrap(self, owner, name, label):
        original = getattr(owner, name)

        def timed(*args, **kwargs):
            began = time.perf_counter()
            try:
                return original(*args, **kwargs)
            finally:
                self.spent[label] = self.spent.get(label, 0.0) + time.perf_counter() - began
        setattr(owner, name, timed)
        return original


def configure(name):
    """Set the configuration; returns a function that undoes it."""
    saved_min = dev.STAGING_MIN_BYTES
    staging = dev.staging()
    saved_threads = staging.threads if staging else None
    saved_messages, saved_optimality = result.messages, api.max_abs_rows
    if name == "before":
        dev.STAGING_MIN_BYTES = float("inf")
        result.messages, api.max_abs_rows = old_messages, old_optimality
    elif name == "after, 1 thread" and staging:
        staging.threads = 1

    def undo():
        dev.STAGING_MIN_BYTES = saved_min
        if staging:
            staging.threads = saved_threads
        result.messages, api.max_abs_rows = saved_messages, saved_optimality
    return undo


def one_call(t, y, x0):
    clock = Clock()
    originals = [(dev, n, clock.wrap(dev, n, label)) for n, label in
                 (("copy_to_device", "h2d"), ("copy_to_host", "d2h"), ("memset", "memset"), ("allocate", "alloc/free"),
                  ("free", "alloc/free"), ("launch_checked", "kernel"))]
    originals += [(result, "messages", clock.wrap(result, "messages", "messages")),
                  (api, "max_abs_rows", clock.wrap(api, "max_abs_rows", "optimality"))]
    began = time.perf_counter()
    try:
        r = least_squares(decay_fits.decay, x0, args=(shared(t), y), m=len(t), ftol=TOL, xtol=TOL, gtol=TOL,
                          device="cuda")
        total = time.perf_counter() - began
    finally:
        for owner, name, original in originals:
            if owner is dev:
                delattr(dev, name)          # back to the class's method
            else:
                setattr(owner, name, original)
    spent = clock.spent
    spent["other"] = total - sum(spent.values())
    spent["total"] = total
    return r, spent


def breakdown(curves):
    t, _, y = decay_fits.make_data(curves, 40, 0.02, 1)
    x0 = np.tile(decay_fits.START, (curves, 1))
    began = time.perf_counter()
    reference = least_squares(decay_fits.decay, x0, args=(shared(t), y), m=40, ftol=TOL, xtol=TOL, gtol=TOL,
                              device="cuda")
    emit({"curves": curves, "what": "first call (compiles unless cached)", "s": time.perf_counter() - began})
    for name in ("before", "after, 1 thread", "after"):
        undo = configure(name)
        try:
            one_call(t, y, x0)          # warm-up of this configuration
            calls = []
            for _ in range(3):
                r, spent = one_call(t, y, x0)
                calls.append(spent)
                same = all(np.array_equal(r[k], reference[k]) for k in ("x", "cost", "fun", "grad", "status", "nit"))
                del r
        finally:
            undo()
        row = {"curves": curves, "config": name, "identical_to_first_call": same}
        for key in calls[0]:
            row[key + "_ms"] = statistics.median(c.get(key, 0.0) for c in calls) * 1e3
        row["total_us_per_curve"] = row["total_ms"] * 1e3 / curves
        emit(row)


def raw_copies(curves):
    nbytes = curves * 40 * 8
    source = np.random.default_rng(0).standard_normal(curves * 40)
    buf = dev.allocate(nbytes)
    staging = dev.staging()

    def timed(label, fn, reps=3, moved=nbytes):
        samples = []
        for _ in range(reps):
            began = time.perf_counter()
            fn()
            samples.append(time.perf_counter() - began)
        ms = statistics.median(samples) * 1e3
        emit({"curves": curves, "raw": label, "MB": moved / 1e6, "ms": ms, "GB_per_s": moved / ms / 1e6})

    saved = dev.STAGING_MIN_BYTES
    try:
        dev.STAGING_MIN_BYTES = float("inf")
        timed("H2D driver (pageable, resident source)", lambda: dev.copy_to_device(buf, source))
        timed("D2H driver into fresh np.empty", lambda: dev.copy_to_host(buf, np.empty_like(source)))
        touched = np.ones_like(source)
        timed("D2H driver into touched array", lambda: dev.copy_to_host(buf, touched))
        dev.STAGING_MIN_BYTES = saved
        timed("H2D staged", lambda: dev.copy_to_device(buf, source))
        timed("D2H staged into fresh np.empty", lambda: dev.copy_to_host(buf, np.empty_like(source)))
        timed("D2H staged into touched array", lambda: dev.copy_to_host(buf, touched))
        back = np.empty_like(source)
        dev.copy_to_host(buf, back)
        emit({"curves": curves, "raw": "staged round trip identical", "ok": bool(np.array_equal(back, source))})
        if staging:
            chunk = min(staging.chunk, nbytes)

            def dma_only():
                for offset in range(0, nbytes - chunk + 1, chunk):
                    dev.call("dtoh", staging.buffers[0], buf.ptr + offset, chunk)
            timed("D2H into page-locked memory (DMA only, 16 MiB pieces)", dma_only, moved=nbytes // chunk * chunk)
            touched_fresh = np.ones_like(source)

            def memmove_only():
                staging._move(touched_fresh.ctypes.data, source.ctypes.data, nbytes)
            timed(f"host memmove, {staging.threads} threads (touched)", memmove_only)
            timed(f"host memmove, {staging.threads} threads (into fresh np.empty)",
                  lambda: staging._move(np.empty_like(source).ctypes.data, source.ctypes.data, nbytes))
    finally:
        dev.STAGING_MIN_BYTES = saved
        dev.free(buf)
    status = np.random.default_rng(1).integers(-3, 5, curves)
    for label, fn in (("messages, before (astype(str))", old_messages), ("messages, after", result.messages)):
        began = time.perf_counter()
        fn(status)
        emit({"curves": curves, "raw": label, "ms": (time.perf_counter() - began) * 1e3})


if __name__ == "__main__":
    emit({"what": "environment", "cpus": os.cpu_count(), "staging_threads": dev.staging().threads if dev.staging() else None,
          "thp": open("/sys/kernel/mm/transparent_hugepage/enabled").read().strip()
          if os.path.exists("/sys/kernel/mm/transparent_hugepage/enabled") else None, "gpu": dev.name})
    for curves in SIZES:
        breakdown(curves)
        raw_copies(curves)
