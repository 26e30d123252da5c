"""One command for every benchmark: ``python benchmarks/run.py [--out DIR] [--quick]``.

Writes ``report.md``, ``results.csv`` (one row per measurement) and ``rajaperf.png`` under
DIR. Without a GPU it says so and runs only the CPU measurements; it never invents numbers.
"""
from __future__ import annotations

import argparse
import csv
import json
import sys
import traceback
from pathlib import Path

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))

from harness import environment  # noqa: E402


def has_gpu() -> bool:
    try:
        from adoffload.runtime import get_device
        get_device("cuda")
        return True
    except Exception as exc:  # noqa: BLE001 - any failure means: no usable GPU
        print(f"no usable CUDA GPU ({type(exc).__name__}: {exc}); GPU benchmarks skipped")
        return False


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", default=str(HERE / "results" / "latest"))
    parser.add_argument("--quick", action="store_true", help="small sizes, few repetitions")
    parser.add_argument("--only", nargs="*", help="suites: rajaperf overheads chemistry bandwidth")
    parser.add_argument("--rajaperf-budget", type=float, default=None,
                        help="seconds for the RAJAPerf suite; cases left when it is spent become 'not run' rows")
    parser.add_argument("--big-reps", type=int, default=None, help="RAJAPerf repetitions above 2^22 elements")
    parser.add_argument("--rajaperf-kernels", nargs="*", help="RAJAPerf cases to run (default: all)")
    parser.add_argument("--rajaperf-sizes", nargs="*", type=int, help="RAJAPerf element counts (default: 10^6 and 2^26)")
    args = parser.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    env = environment()
    gpu = has_gpu()
    suites = set(args.only or ("bandwidth", "rajaperf", "overheads", "chemistry"))
    results: dict[str, list] = {}

    def suite(name, fn):
        if name not in suites:
            return
        rows: list = []
        results[name] = rows          # rows saved as they come (save_progress), not only at the end
        try:
            fn(rows)
        except Exception:  # noqa: BLE001 - report and go on with the other suites
            rows.append({"error": traceback.format_exc(limit=3)[-800:]})
            print(f"suite {name} failed:\n{rows[-1]['error']}")
        results[name] = rows
        save(out, env, results)       # after every suite: a later time-out keeps what was measured

    if gpu:
        from harness import Gpu

        def bandwidth(rows):
            rows.append({"measure": "device-to-device copy (cuMemcpyDtoD, 2 GiB)",
                         "GB/s": Gpu().copy_bandwidth() / 1e9})
        suite("bandwidth", bandwidth)
        import rajaperf
        sizes = tuple(args.rajaperf_sizes or ((1 << 20,) if args.quick else (1_000_000, 1 << 26)))
        suite("rajaperf", lambda rows: rajaperf.run(rows, sizes=sizes, reps=5 if args.quick else rajaperf.REPS,
                                                    big_reps=args.big_reps, deadline_s=args.rajaperf_budget,
                                                    kernels=args.rajaperf_kernels,
                                                    on_row=lambda _row: save_rows(out, env, results)))
    import overheads
    suite("overheads", lambda rows: (overheads.compile_times("host", None, rows),
                                     gpu and overheads.compile_times("nvptx", "sm_90", rows),
                                     overheads.tiny_call(rows, "gpu" if gpu else "cpu")))
    if "chemistry" in suites and (HERE / "chemistry.py").exists():
        import chemistry
        suite("chemistry", lambda rows: chemistry.run(rows, device="cuda" if gpu else "cpu", quick=args.quick))

    save(out, env, results)
    print(f"wrote {out}")
    return 0


def save(out: Path, env: dict, results: dict) -> None:
    from report import write_report
    save_rows(out, env, results)
    write_report(out, env, results)


def save_rows(out: Path, env: dict, results: dict) -> None:
    """results.json and results.csv only (cheap enough after every row; the report and plot are
    written after each suite)."""
    (out / "results.json").write_text(json.dumps({"environment": env, "results": results}, indent=1, default=str))
    write_csv(out / "results.csv", results)


def write_csv(path: Path, results: dict) -> None:
    keys = sorted({k for rows in results.values() for row in rows for k in row})
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=["suite", *keys])
        writer.writeheader()
        for name, rows in results.items():
            for row in rows:
                writer.writerow({"suite": name, **row})


if __name__ == "__main__":
    raise SystemExit(main())
