"""Launches the block-SGEMM kernels of benchmarks/blocks.py and their reverse-mode kernels a few
times each on the GPU, for a profiler to capture (``ncu -k regex:...``) and for a quick timing.

    PYTHONPATH=. python benchmarks/sgemm_vjp_probe.py --n 2048 --kernels sgemm sgemm_static
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

import adoffload as ado

sys.path.insert(0, str(Path(__file__).parent))
import blocks  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=2048)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--kernels", nargs="+", default=["sgemm", "sgemm_static"])
    args = parser.parse_args()
    n, grid = args.n, (args.n // blocks.TM, args.n // blocks.TM)
    rng = np.random.default_rng(0)
    A, B, seed = (rng.standard_normal((n, n)).astype(np.float32) for _ in range(3))
    for name in args.kernels:
        kernel = getattr(blocks, name)
        reverse = ado.vjp(kernel, ("A", "B"))
        C, gA, gB = np.zeros((n, n), np.float32), np.zeros((n, n), np.float32), np.zeros((n, n), np.float32)
        for label, launch in (("primal", lambda: kernel(A, B, C, grid=grid, device="cuda")),
                              ("vjp", lambda: reverse(A, B, C, gA, gB, seed, grid=grid, device="cuda"))):
            launch()
            start = time.perf_counter()
            for _ in range(args.reps):
                launch()
            per = (time.perf_counter() - start) / args.reps
            print(f"{name} {label} n={n}: {per * 1e3:.2f} ms per launch (host timer, transfers included)")


if __name__ == "__main__":
    main()
