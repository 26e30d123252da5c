"""``python -m benchmarks``: the one entry point of the benchmarks.

    python -m benchmarks --list
    python -m benchmarks SUITE [--device auto|cpu|cuda] [--quick] [--reps N] [--out DIR] [suite options]
    python -m benchmarks report DIR

A run appends its suite's rows to DIR/results.json and DIR/results.csv as they come, with the
environment (date, machine, load, GPU, versions, commit), then writes DIR/report.md from them.
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

# Our runtime, CuPy and JAX share one GPU: JAX must not take 75% of its memory up front.
os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")

from .environment import environment, load_average
from .results import BenchmarkError, ResultStore
from .suites import SUITES, load_suite, summary

DEFAULT_OUT = Path("results") / "latest"      # /results/ is ignored by git


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__.splitlines()[0])
    top.add_argument("--list", action="store_true", help="list the suites and exit")
    commands = top.add_subparsers(dest="command", metavar="SUITE|report")
    report = commands.add_parser("report", help="write DIR/report.md from DIR/results.json")
    report.add_argument("dir", type=Path)
    for name in SUITES:
        module = load_suite(name)
        sub = commands.add_parser(name, help=summary(name), description=module.__doc__,
                                  formatter_class=argparse.RawDescriptionHelpFormatter)
        sub.add_argument("--device", choices=["auto", "cpu", "cuda"], default="auto",
                         help="auto: cuda where adoffload finds a GPU, else cpu")
        sub.add_argument("--quick", action="store_true", help="small sizes and few repetitions (checks the suite)")
        sub.add_argument("--reps", type=int, help="timed repetitions (default: the suite's)")
        sub.add_argument("--out", type=Path, default=DEFAULT_OUT, help=f"results folder (default {DEFAULT_OUT})")
        if hasattr(module, "add_arguments"):
            module.add_arguments(sub)
    return top


def resolve_device(requested: str) -> str:
    if requested != "auto":
        return requested
    from .gpu import gpu_available
    found, why = gpu_available()
    if not found:
        print(f"{why}; running on the host CPU")
    return "cuda" if found else "cpu"


def run_suite(name: str, args: argparse.Namespace) -> int:
    from .report import write_report
    module = load_suite(name)
    device = resolve_device(args.device)
    options = {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()
               if k not in ("command", "list")}
    options["device"] = device
    store = ResultStore(args.out)
    rows = store.start(name, environment(), options)
    try:
        found, why = (True, "")
        if device == "cuda":
            from .gpu import gpu_available
            found, why = gpu_available()
        if device not in module.DEVICES:
            rows.append({"case": "suite", "skipped": f"the {name} suite runs on {' or '.join(module.DEVICES)}, "
                                                     f"not on {device}"})
        elif not found:
            rows.append({"case": "suite", "skipped": f"--device cuda: {why}"})
        else:
            module.run(rows, device=device, quick=args.quick, options=args)
    except BenchmarkError:
        raise                     # asked for something that cannot be run: said on stderr, exit status 2
    except Exception as exc:  # noqa: BLE001 - the suite's failure is a row; the report is still written
        store.fail(name, exc)
    finally:
        store.suites[name]["environment"]["load_average_end"] = load_average()
        store.save()
        path = write_report(args.out)
        print(f"wrote {args.out / 'results.json'}, results.csv and {path}")
    failed = [r for r in rows if "error" in r]
    return 1 if failed else 0


def main(argv=None) -> int:
    args = parser().parse_args(argv)
    try:
        if args.list or args.command is None:
            for name in SUITES:
                print(f"{name:14s} {summary(name)}")
            return 0
        if args.command == "report":
            from .report import write_report
            print(f"wrote {write_report(args.dir)}")
            return 0
        return run_suite(args.command, args)
    except BenchmarkError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
