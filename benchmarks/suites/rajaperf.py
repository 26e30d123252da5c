"""RAJAPerf subset, primal kernels on the GPU: ours bounds-checked and unchecked vs hand-written CUDA vs jax.numpy.

Each kernel and size is one row. Our kernel and the CUDA baseline (benchmarks/cuda/rajaperf.cu,
nvcc -O3 -arch=sm_90; the reductions are tuned grid-stride kernels, one atomic per block) run from
the same device buffers on one stream, each checked against numpy once from fresh inputs
(``correct``, ``cuda_correct``; above 2^22 elements at 2^20 sampled positions and both ends:
``checked``), then timed with the one timer. Rank-2/3 kernels are also timed with a linear launch
of the same PTX (``linear_ms``: the launch before codegen/gpu/rows.py). The jnp programs run in f64
(``jax_enable_x64``), like ours and CUDA's. ``--budget S``: cases not started within S seconds are
rows saying so. Derivative columns: the derivatives suite.
"""
from __future__ import annotations

import statistics
import time

import numpy as np

import adoffload as ado

from ..launching import (BLOCK, FULL_CHECK_LIMIT, Checker, OurLaunch, cuda_arguments, cuda_launch_grid,
                         load_cuda_baselines, restore, select_cases)
from ..timing import REPS, time_jax

DEVICES = ("cuda",)
SIZE_KEY = "n"
SIZES, QUICK_SIZES = (1_000_000, 1 << 26), (1 << 20,)


def add_arguments(parser) -> None:
    parser.add_argument("--kernels", nargs="*", help="RAJAPerf cases to run, in that order (default: all, reductions first)")
    parser.add_argument("--sizes", nargs="*", type=int, help="element counts (default: 10^6 and 2^26)")
    parser.add_argument("--big-reps", type=int, help="repetitions above 2^22 elements (default: --reps)")
    parser.add_argument("--repeat", type=int, default=1, help="time each row up to 2^22 elements this many times "
                                                              "(launch-bound rows: their spread between timings)")
    parser.add_argument("--budget", type=float, help="seconds after which no case starts")


def run(rows, device: str, quick: bool, options) -> None:
    import jax
    jax.config.update("jax_enable_x64", True)
    from ..gpu import Gpu
    cases = select_cases(options.kernels)
    sizes = tuple(options.sizes or (QUICK_SIZES if quick else SIZES))
    reps = options.reps or (5 if quick else REPS)
    gpu = Gpu()
    baselines = load_cuda_baselines(gpu)
    rng, modules, start = np.random.default_rng(0), {}, time.perf_counter()
    for case in cases:
        for n in sizes:
            row = {"kernel": case.name, "n": n, "reps": (options.big_reps or reps) if n > FULL_CHECK_LIMIT else reps}
            if options.budget is not None and time.perf_counter() - start > options.budget:
                rows.append({**row, "skipped": f"not run: the suite's budget ({options.budget:.0f} s) was spent"})
                continue
            t0 = time.perf_counter()
            measure_case(row, gpu, case, n, rng, baselines, modules, options.repeat if n <= FULL_CHECK_LIMIT else 1)
            row["wall_s"] = time.perf_counter() - t0
            rows.append(row)


def measure_case(row: dict, gpu, case, n: int, rng, baselines, modules: dict, repeat: int = 1) -> None:
    import jax
    import jax.numpy as jnp
    reps = row["reps"]
    dev, launches = {}, []
    try:
        host = case.make(n, rng)
        grid = case.grid(n)
        check = Checker(case.numpy(host), n)
        row["checked"] = check.how
        dev = gpu.upload(host)
        ours = OurLaunch(gpu, case.kernel, dev, host, grid, modules)
        unchecked = OurLaunch(gpu, ado.kernel(bounds_check=False)(case.kernel.pyfunc), dev, host, grid, modules)
        launches += [ours, unchecked]
        ours()                                          # correctness: one launch from fresh inputs
        row["correct"] = ours.status_code() == 0 and check(gpu, dev, host)
        fn = baselines.function(case.name)
        cuda_args = cuda_arguments(case, dev, host, n)
        cuda_grid = cuda_launch_grid(case.name, n, host, fn.resident_threads(BLOCK))
        restore(gpu, dev, host)
        gpu.launch_raw(fn, cuda_grid, (BLOCK, 1, 1), cuda_args)
        row["cuda_correct"] = check(gpu, dev, host)
        restore(gpu, dev, host)
        sides = {"ours": ours, "unchecked": unchecked,
                 "cuda": lambda: gpu.launch_raw(fn, cuda_grid, (BLOCK, 1, 1), cuda_args)}
        if ours.blocks is not None:                     # the same PTX, launched 1-D (no row launch)
            linear = OurLaunch(gpu, case.kernel, dev, host, grid, modules)
            linear.blocks = None
            launches.append(linear)
            sides["linear"] = linear
        timings = {side: [gpu.time(call, reps) for _ in range(repeat)] for side, call in sides.items()}
        for side, runs in timings.items():
            best = runs[len(runs) // 2] if repeat == 1 else sorted(runs, key=lambda t: t.median_ms)[len(runs) // 2]
            row.update(best.columns(side) if side in ("ours", "cuda") else {f"{side}_ms": best.median_ms})
            if repeat > 1:
                row[f"{side}_runs_ms"] = [round(t.median_ms, 5) for t in runs]
                row[f"{side}_ms"] = statistics.median(t.median_ms for t in runs)
        row.update(ptx_bytes=ours.ptx_bytes, k=ours.k, grid_stride=ours.grid_stride, threads=ours.threads,
                   cuda_blocks=cuda_grid[0], ratio=row["ours_ms"] / row["cuda_ms"])
        row["gbps_ours"] = case.bytes_moved(n) / (row["ours_ms"] * 1e-3) / 1e9
        row["gbps_cuda"] = case.bytes_moved(n) / (row["cuda_ms"] * 1e-3) / 1e9
        if case.jnp is not None:
            jd = {k: jnp.asarray(v) for k, v in host.items()}
            f = jax.jit(lambda d: case.jnp({**d, "n": n}, jnp))
            row.update(**time_jax(f, jd, reps=reps).columns("jnp"))
            del jd
    except Exception as exc:  # a failing kernel is reported, not hidden
        row["error"] = f"{type(exc).__name__}: {str(exc)[:300]}"
    finally:
        for launch in launches:
            launch.close()
        gpu.free(dev)
        jax.clear_caches()


COLUMNS = ["kernel", "n", "correct", "cuda_correct", "ours_ms", "ours_iqr_ms", "unchecked_ms", "linear_ms", "cuda_ms",
           "cuda_iqr_ms", "jnp_ms", "ratio", "gbps_ours", "gbps_cuda", "k", "grid_stride", "threads", "cuda_blocks",
           "reps", "checked", "wall_s", "skipped", "error"]


def report(rows) -> list[str]:
    from ..targets import geomean
    lines = ["`ratio` is ours / CUDA (lower: ours faster); `gbps_*` count the bytes a perfect kernel moves."]
    for n in sorted({r["n"] for r in rows if "n" in r}):
        sized = [r for r in rows if r.get("n") == n]
        ratios = [r["ratio"] for r in sized if r.get("ratio")]
        mean = geomean(ratios)
        lines.append(f"- n = {n}: primal / CUDA geomean over {len(ratios)} of {len(sized)} kernels: "
                     + (f"{mean:.4g}" if mean else "none measured"))
    return lines
