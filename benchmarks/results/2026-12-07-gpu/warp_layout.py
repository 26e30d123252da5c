"""minimize's two layouts, one problem per thread and one per warp, timed on the same batches.

    PYTHONPATH=. python benchmarks/results/2026-12-07-gpu/warp_layout.py --out DIR [--device cuda] [--quick]

Cases: Rosenbrock (n = 64, 256, 1024; batch 64 and 4096) with L-BFGS (maxcor 10) and BFGS, a fixed
iteration budget (``--maxiter``, default 100: most problems stop there, so both layouts do the same
number of iterations), and LJ75 (n = 225, random starts, gtol 1e-5, maxiter 2000) at batch 64 with
L-BFGS, BFGS and FIRE (atoms of 3 coordinates). Each case: one warm-up call (the compile), then the median of 3 timed calls of
``minimize`` with numpy inputs (the copies to and from the device included, alike for both layouts).
A case that fails (the thread layout's state above the 512 KiB local-memory limit, too little device
memory) is a printed row with its error, not a crash. Writes DIR/warp_layout.jsonl (one JSON object a
row) and prints a table (``thr/wrp``: the thread layout's time over the warp layout's). ``--quick``: small sizes (n = 8 and 40, LJ13), for checking it on the host.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np

import adoffload as ado
from adoffload.optimize import minimize


@ado.func
def rosen(x):
    s = 0.0
    for i in range(len(x) - 1):
        s += 100.0 * (x[i + 1] - x[i] * x[i]) ** 2 + (1.0 - x[i]) ** 2
    return s


def cases(quick: bool, maxiter: int):
    from adoffload.chemistry.kernels import lj_cluster_energy
    sizes, batches, atoms, lj_batch = ((8, 40), (4, 16), 13, 4) if quick else ((64, 256, 1024), (64, 4096), 75, 64)
    for method in ("lbfgs", "bfgs"):
        for n in sizes:
            for batch in batches:
                if method == "bfgs" and batch * n * n * 8 > 8 << 30:
                    yield dict(problem="rosen", method=method, n=n, batch=batch, skip="inverse Hessians over 8 GiB")
                    continue
                yield dict(problem="rosen", method=method, n=n, batch=batch, fun=rosen, args=(),
                           x0=np.random.default_rng(n + batch).uniform(-1.5, 1.5, (batch, n)),
                           maxiter=maxiter, options={})
    side = (atoms / 0.9) ** (1 / 3)
    for method in ("lbfgs", "bfgs", "fire"):
        x0 = np.random.default_rng(atoms).uniform(0.0, side, (lj_batch, 3 * atoms))
        options = {"gtol": 1e-5, "group": 3} if method == "fire" else {"gtol": 1e-5}
        yield dict(problem=f"lj{atoms}", method=method, n=3 * atoms, batch=lj_batch, fun=lj_cluster_energy,
                   args=(1.0, 1.0), x0=x0, maxiter=2000, options=options)


def run(case: dict, layout: str, device: str, reps: int) -> dict:
    row = {k: case[k] for k in ("problem", "method", "n", "batch")} | {"layout": layout, "device": device}
    if "skip" in case:
        return row | {"error": "skipped: " + case["skip"]}
    call = lambda: minimize(case["fun"], case["x0"], args=case["args"], method=case["method"],  # noqa: E731
                            maxiter=case["maxiter"], options=case["options"], device=device, layout=layout)
    try:
        start = time.perf_counter()
        result = call()
        row["first_call_s"] = time.perf_counter() - start
        times = []
        for _ in range(reps):
            start = time.perf_counter()
            result = call()
            times.append(time.perf_counter() - start)
    except Exception as exc:                      # a failed case is a row
        return row | {"error": f"{type(exc).__name__}: {str(exc)[:300]}"}
    row.update(median_s=statistics.median(times), times_s=times, nit_mean=float(np.mean(result.nit)),
               nfev_mean=float(np.mean(result.nfev)), success=float(np.mean(result.success)),
               status={int(s): int(c) for s, c in zip(*np.unique(result.status, return_counts=True))},
               fun_mean=float(np.mean(result.fun)))
    return row


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", required=True, help="folder for warp_layout.jsonl")
    parser.add_argument("--device", default="cuda", help="cuda (default), cuda:N or cpu")
    parser.add_argument("--quick", action="store_true", help="small sizes (a check on the host)")
    parser.add_argument("--maxiter", type=int, default=None, help="Rosenbrock's iteration budget (100; --quick 30)")
    parser.add_argument("--reps", type=int, default=3, help="timed calls per case (the median is kept)")
    args = parser.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    maxiter = args.maxiter or (30 if args.quick else 100)
    began = time.perf_counter()
    rows = []
    header = f"{'problem':8} {'method':6} {'n':>5} {'batch':>6} {'layout':7} {'median s':>9} {'nit':>7} {'ok':>5}  note"
    print(header, flush=True)
    with open(out / "warp_layout.jsonl", "w") as sink:
        for case in cases(args.quick, maxiter):
            pair = []
            for layout in ("thread", "warp"):
                row = run(case, layout, args.device, args.reps)
                pair.append(row)
                sink.write(json.dumps(row) + "\n")
                sink.flush()
                rows.append(row)
                if "error" in row:
                    print(f"{row['problem']:8} {row['method']:6} {row['n']:5} {row['batch']:6} {layout:7} "
                          f"{'failed':>9} {'':>7} {'':>5}  {row['error'][:110]}", flush=True)
                else:
                    print(f"{row['problem']:8} {row['method']:6} {row['n']:5} {row['batch']:6} {layout:7} "
                          f"{row['median_s']:9.4f} {row['nit_mean']:7.1f} {row['success']:5.2f}  "
                          f"first call {row['first_call_s']:.1f} s", flush=True)
            if all("median_s" in r for r in pair):
                print(f"{'':8} {'':6} {'':5} {'':6} {'thr/wrp':7} {pair[0]['median_s'] / pair[1]['median_s']:9.2f}",
                      flush=True)
    print(f"total {time.perf_counter() - began:.0f} s; rows in {out / 'warp_layout.jsonl'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
