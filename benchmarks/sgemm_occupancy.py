"""An experiment (issue 13), not a benchmark: the block SGEMM's lean reverse kernel with other
``.minnctapersm`` requests than the one codegen/nvptx.resident_threads makes (2 blocks of 256
threads per SM: at most 128 registers, 84 bytes of spills at session 10's code; 1 block: 160
registers, no spills; 3 blocks: 80 registers, 352 bytes of spills). Each variant's kernel is
launched alone (blocks.time_launches) at the same size; prints the median ms of each.

    PYTHONPATH=. python benchmarks/sgemm_occupancy.py --n 4096
"""
from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=4096)
    parser.add_argument("--reps", type=int, default=5)
    args = parser.parse_args(argv)
    import adoffload as ado
    import blocks
    from harness import Gpu
    gpu = Gpu()
    n = args.n
    rng = np.random.default_rng(0)
    A, B, G = (rng.standard_normal((n, n)).astype(np.float32) for _ in range(3))
    values = {"A": A, "B": B, "C": np.zeros_like(A), "d_A": np.zeros_like(A), "d_B": np.zeros_like(B), "d_C": G}
    reverse = ado.vjp(blocks.sgemm_static, ["A", "B"], primal_outputs=False)
    variants = {f"minnctapersm_{k}_ms": lambda ptx, k=k: re.sub(r"\.minnctapersm \d+", f".minnctapersm {k}", ptx)
                for k in (1, 2, 3)}
    row = blocks.time_variants({"kernel": "sgemm_static lean VJP", "n": n}, reverse, values,
                               (n // blocks.TM, n // blocks.TM), args.reps, gpu, variants)
    print(json.dumps(row), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
