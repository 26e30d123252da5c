"""The Python-side cost of a cache-hit CUDA launch on CuPy arrays, measured on the host (issue 31).

The real launcher (kernels/launch.py, launch_run.py, runtime/gpu.py, runtime/cuda.py, status_ring.py)
drives a fake CUDA driver (adoffload.testing.fake_cuda: host memory, a ``cuLaunchKernel`` that only
counts), so what is timed is everything a launch costs besides the driver's own calls: a 16-element
f32 saxpy ``saxpy(a, x, y)`` and its vjp ``saxpy_vjp(a, x, y, d_x, d_y)`` on fake CuPy arrays.

    python -m adoffload.testing.cuda_launch_profile [--number 20000] [--rounds 7] [--profile]
                                                   [--launch-call cuda-python|cupy]

prints one JSON object: best-round microseconds per launch (``primal_us``, ``vjp_us``, interleaved
rounds of ``number`` launches each; ``*_cpu_us``: the same in the thread's CPU time, which a loaded
machine disturbs less), the fake driver's calls per launch, and the load average;
``--profile`` adds a cProfile listing of ``number`` vjp launches.
"""
from __future__ import annotations

import argparse
import json
import os
import time

import numpy as np


def _setup(device, cupy):
    import adoffload as ado
    from benchmarks.kernels.user import saxpy
    reverse = ado.vjp(saxpy, ["x", "y"])
    n = 16
    x, y = cupy.asarray(np.arange(n, dtype=np.float32)), cupy.asarray(np.zeros(n, np.float32))
    dx, dy = cupy.asarray(np.zeros(n, np.float32)), cupy.asarray(np.ones(n, np.float32))
    a = np.float32(2.0)
    calls = {"primal_us": lambda: saxpy(a, x, y, grid=n, device=device),
             "vjp_us": lambda: reverse(a, x, y, dx, dy, grid=n, device=device)}
    return calls


def _cpu_interleaved(calls: dict, number: int, rounds: int) -> dict:
    """Like launch_timing.interleaved, with the calling thread's CPU time (``time.thread_time``): on a
    loaded machine the time the thread was not running is left out."""
    best = {name: float("inf") for name in calls}
    for _ in range(rounds):
        for name, call in calls.items():
            start = time.thread_time()
            for _ in range(number):
                call()
            best[name] = min(best[name], (time.thread_time() - start) / number * 1e6)
    return best


def measure(number: int = 20000, rounds: int = 7, profile: bool = False, launch_call: str = "cuda-python") -> dict:
    from ..runtime import cuda
    # runtime/cuda.py's switch (a tree without it, e.g. a branch point timed for comparison, ignores it)
    LAUNCH_CALL_ENV = getattr(cuda, "LAUNCH_CALL_ENV", "ADOFFLOAD_CUDA_LAUNCH_CALL")  # noqa: N806
    from .fake_cuda import installed
    from .launch_timing import interleaved
    saved = os.environ.get(LAUNCH_CALL_ENV)
    os.environ[LAUNCH_CALL_ENV] = launch_call
    try:
        return _measure(number, rounds, profile, installed, interleaved)
    finally:
        if saved is None:
            os.environ.pop(LAUNCH_CALL_ENV, None)
        else:
            os.environ[LAUNCH_CALL_ENV] = saved


def _measure(number, rounds, profile, installed, interleaved) -> dict:
    with installed() as (device, driver, cupy):
        calls = _setup(device, cupy)
        for call in calls.values():
            call()
        driver.record = False
        before = (driver.count, driver.context_sets)
        result = interleaved(calls, number=number, rounds=rounds)
        cpu = _cpu_interleaved(calls, number, rounds)
        launches = driver.count - before[0]
        out = {name: round(us, 3) for name, us in result.items()}
        out.update({name.replace("_us", "_cpu_us"): round(us, 3) for name, us in cpu.items()})
        out["context_sets_per_launch"] = round((driver.context_sets - before[1]) / max(launches, 1), 3)
        out["launches"] = launches
        if profile:
            import cProfile
            import io
            import pstats
            vjp = calls["vjp_us"]
            profiler = cProfile.Profile()
            profiler.enable()
            for _ in range(number):
                vjp()
            profiler.disable()
            text = io.StringIO()
            pstats.Stats(profiler, stream=text).sort_stats("tottime").print_stats(20)
            out["profile"] = text.getvalue()
    out["load"] = os.getloadavg()
    return out


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--number", type=int, default=20000)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--launch-call", choices=("cuda-python", "cupy"), default="cuda-python",
                        help="queue launches through cuda-python's cuLaunchKernel (as the branch point did) or the fake "
                             "CuPy's launchKernel (a Python function here: only the wrapper's cost is real)")
    args = parser.parse_args(argv)
    start = time.perf_counter()
    out = measure(args.number, args.rounds, args.profile, args.launch_call)
    out["launch_call"] = args.launch_call
    out["seconds"] = round(time.perf_counter() - start, 1)
    profile = out.pop("profile", None)
    print(json.dumps(out))
    if profile:
        print(profile)


if __name__ == "__main__":
    main()
