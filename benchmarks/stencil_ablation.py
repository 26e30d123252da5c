"""An experiment (issue 13), not a benchmark: why the shared-memory stencil's reverse kernel is ~10x
slower than the plain stencil's on the H200 while its primal is 2x faster.

Nsight Compute (benchmarks/results/2026-12-02-h200-session10/stalls/) shows its warps waiting on
global loads (long scoreboard), at 5% of DRAM bandwidth. This times the reverse kernel launched alone
(blocks.time_launches) with parts of its PTX removed -- results are then wrong, only the times
matter: ``no_seed_zeroing`` drops the stores of 0 into ``d_y`` after its loads (the reverse sweep
clears the output seed it consumed), ``no_global_adds`` the float atomics into ``d_x``,
``no_shared_adds`` those into the shadow tile. Each row: median ms of the launches.

    PYTHONPATH=. python benchmarks/stencil_ablation.py --n 8192
"""
from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))


def drop_seed_zeroing(ptx: str) -> str:
    """Remove ``st.global.b32 [%rdN], 0`` where the line before or two before loaded ``[%rdN]``."""
    lines = ptx.splitlines()
    keep = []
    for k, line in enumerate(lines):
        m = re.match(r"\s*st\.global\.b32\s+\[(%rd\d+)\],\s*0;", line)
        if m and any(re.match(rf"\s*ld\.global\.b32\s+%r\d+,\s*\[{re.escape(m.group(1))}\];", lines[j])
                     for j in range(max(0, k - 3), k)):
            continue
        keep.append(line)
    return "\n".join(keep) + "\n"


def drop(pattern: str):
    return lambda ptx: "\n".join(line for line in ptx.splitlines() if not re.match(pattern, line)) + "\n"


VARIANTS = {"as_built": None, "no_seed_zeroing": drop_seed_zeroing,
            "no_global_adds": drop(r"\s*atom\.global\.add\.f32"), "no_shared_adds": drop(r"\s*atom\.shared\.add\.f32")}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=8192)
    parser.add_argument("--reps", type=int, default=20)
    args = parser.parse_args(argv)
    import adoffload as ado
    import blocks
    from harness import Gpu
    gpu = Gpu()
    n = args.n
    x = np.random.default_rng(2).standard_normal((n, n), np.float32)
    g = np.random.default_rng(3).standard_normal((n, n), np.float32)
    values = {"x": x, "y": np.zeros_like(x), "d_x": np.zeros_like(x), "d_y": g}
    for name, kernel, grid in (("shared", blocks.stencil_shared, (n // blocks.SR, n)),
                               ("plain", blocks.stencil_plain, (n, n))):
        reverse = ado.vjp(kernel, ("x",), primal_outputs=False)
        row = blocks.time_variants({"kernel": name, "n": n}, reverse, values, grid, args.reps, gpu, VARIANTS)
        print(json.dumps(row), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
