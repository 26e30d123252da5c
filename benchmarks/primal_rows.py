"""The RAJAPerf primal rows alone (issue 12: primal / hand-written CUDA at 10^6 and 2^26), fast.

For each kernel and size: ours bounds-checked, ours unchecked and the CUDA baseline
(benchmarks/cuda/rajaperf.cu, nvcc -O3 -arch=sm_90), each checked against numpy once from fresh
inputs, then timed with the harness's one timer (medians of ``reps`` batches). Rank-2/3 kernels
are also timed with a linear launch of the same PTX (``linear_ms``: the launch before
codegen/gpu/rows.py), and every 10^6 row is timed ``--repeat`` times (those rows are launch-overhead
sized, so their spread is reported). No derivatives, no JAX.

    python benchmarks/primal_rows.py --out DIR [--kernels a b ...] [--sizes 1000000 67108864]
                                     [--budget SECONDS]

Writes DIR/primal.md and DIR/primal.json; rows not started within ``--budget`` say so.
"""
from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

from harness import Gpu, environment  # noqa: E402
from rajaperf import (BLOCK, FULL_CHECK_LIMIT, OurLaunch, _Checker, _restore, build_cuda_baselines,  # noqa: E402
                      cuda_launch_grid, ordered_cases)

import adoffload as ado  # noqa: E402

FOCUS = ["basic_nested_init", "basic_pi_reduce", "basic_trap_int", "lcals_diff_predict"]


def measure(gpu, case, n, rng, baselines, modules, reps, repeat) -> dict:
    row = {"kernel": case.name, "n": n}
    dev, launches = {}, []
    try:
        host = case.make(n, rng)
        grid = case.grid(n)
        check = _Checker(case.numpy(host), n)
        dev = gpu.upload(host)
        ours = OurLaunch(gpu, case.kernel, dev, host, grid, modules)
        unchecked = OurLaunch(gpu, ado.kernel(bounds_check=False)(case.kernel.pyfunc), dev, host, grid, modules)
        launches += [ours, unchecked]
        ours()
        row["correct"] = ours.status_code() == 0 and check(gpu, dev, host)
        fn = baselines.function(case.name)
        args = [dev[p.name].ptr if isinstance(host[p.name], np.ndarray) else host[p.name]
                for p in case.kernel.signature.params]
        cuda_args = args if case.name == "basic_nested_init" else args + [n]
        cuda_grid = cuda_launch_grid(case.name, n, host, fn.resident_threads(BLOCK))
        _restore(gpu, dev, host)
        gpu.launch_raw(fn, cuda_grid, (256, 1, 1), cuda_args)
        row["cuda_correct"] = check(gpu, dev, host)
        _restore(gpu, dev, host)

        def cuda():
            gpu.launch_raw(fn, cuda_grid, (256, 1, 1), cuda_args)
        sides = {"ours": ours, "unchecked": unchecked, "cuda": cuda}
        if ours.blocks is not None:                  # the same PTX, launched 1-D (no row launch)
            linear = OurLaunch(gpu, case.kernel, dev, host, grid, modules)
            linear.blocks = None
            launches.append(linear)
            sides["linear"] = linear
        times = {side: [] for side in sides}
        for _ in range(repeat if n <= FULL_CHECK_LIMIT else 1):
            for side, call in sides.items():
                times[side].append(gpu.time(call, reps).median_ms)
        for side, samples in times.items():
            row[f"{side}_ms"] = statistics.median(samples)
            if len(samples) > 1:
                row[f"{side}_runs_ms"] = [round(s, 5) for s in samples]
        row["ratio"] = row["ours_ms"] / row["cuda_ms"]
        row.update(k=ours.k, grid_stride=ours.grid_stride, threads=ours.threads, blocks=ours.blocks,
                   cuda_grid=cuda_grid, ptx_bytes=ours.ptx_bytes)
    except Exception as exc:  # a failing kernel is reported, not hidden
        row["error"] = f"{type(exc).__name__}: {str(exc)[:300]}"
    finally:
        for launch in launches:
            launch.close()
        gpu.free(dev)
    return row


def report(rows: list[dict], env: dict) -> str:
    lines = ["# Primal rows: ours (checked, unchecked) vs hand-written CUDA", "",
             f"Environment: {env}", "", "| kernel | n | correct | cuda_correct | ours_ms | unchecked_ms | linear_ms | "
             "cuda_ms | ours/cuda | threads | blocks | runs (ours, cuda) | error |", "|" + "---|" * 13]
    for r in rows:
        def f(key):
            v = r.get(key)
            return f"{v:.4g}" if isinstance(v, float) else ("" if v is None else str(v))
        runs = f"{r.get('ours_runs_ms', '')} {r.get('cuda_runs_ms', '')}".strip()
        lines.append(f"| {r['kernel']} | {r['n']} | {f('correct')} | {f('cuda_correct')} | {f('ours_ms')} | "
                     f"{f('unchecked_ms')} | {f('linear_ms')} | {f('cuda_ms')} | {f('ratio')} | {f('threads')} | "
                     f"{f('blocks')} | {runs} | {r.get('error', '')} |")
    lines.append("")
    for n in sorted({r["n"] for r in rows}):
        ratios = [r["ratio"] for r in rows if r["n"] == n and "ratio" in r]
        if ratios:
            geo = math.exp(sum(map(math.log, ratios)) / len(ratios))
            lines.append(f"n={n}: primal / CUDA geomean over {len(ratios)} kernels measured here: {geo:.4g}")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", required=True)
    parser.add_argument("--kernels", nargs="*", default=None, help="default: the issue's four, then the rest")
    parser.add_argument("--sizes", nargs="*", type=int, default=[1_000_000, 1 << 26])
    parser.add_argument("--reps", type=int, default=10)
    parser.add_argument("--repeat", type=int, default=3, help="timings of each 10^6-sized row")
    parser.add_argument("--budget", type=float, default=150.0, help="seconds after which no row starts")
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    cases = {c.name: c for c in ordered_cases()}
    names = args.kernels or FOCUS + ["stream_dot"] + [c for c in cases if c not in FOCUS + ["stream_dot"]]
    start = time.perf_counter()
    gpu = Gpu()
    baselines = gpu.device.load_module(build_cuda_baselines(Path("/tmp")).read_bytes())
    rng, modules, rows = np.random.default_rng(0), {}, []
    try:
        env = environment()
    except ImportError as exc:          # the environment record names jax's version
        env = {"environment": f"not recorded: {exc}"}
    for name in names:
        for n in args.sizes:
            if time.perf_counter() - start > args.budget:
                row = {"kernel": name, "n": n, "error": f"not run: budget of {args.budget:.0f} s spent"}
            else:
                t0 = time.perf_counter()
                row = measure(gpu, cases[name], n, rng, baselines, modules, args.reps, args.repeat)
                row["wall_s"] = round(time.perf_counter() - t0, 2)
            rows.append(row)
            print(json.dumps(row, default=str), flush=True)
            (out / "primal.json").write_text(json.dumps(rows, indent=1, default=str))
            (out / "primal.md").write_text(report(rows, env))


if __name__ == "__main__":
    main()
