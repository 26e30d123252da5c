"""An experiment (issue 13), not a benchmark: where the block SGEMM's reverse kernel spends its time.

``sgemm_static``'s lean reverse kernel (blocks.time_launches, the kernel alone at 4096^2) took 25 ms
at session 10's end against 4.3 ms for the primal kernel and 2 x 2.7 ms for XLA's two cuBLAS
products. This times it with parts of its PTX removed or replaced -- the results are then wrong,
only the times matter:

* ``no_shared_adds``: the float adds into the shadow shared tiles dropped (on sm_90 each
  ``atom.shared.add.f32`` is a compare-and-swap loop in SASS);
* ``plain_shared_adds``: each such add as a plain load, add, store (what a warp that owns the
  address alone could do);
* ``no_global_adds``: the float atomics into ``d_A``/``d_B`` dropped;
* ``no_lane_combining``: ``match.any``/``shfl`` lane combining before the shared adds dropped
  (every lane then adds its own value: wrong, and racy, but shows what the combining costs);
* ``no_shared_or_global_adds``: both kinds of adds dropped (what the rest of the kernel costs).

The primal kernel is timed alone for reference. Each row: median ms of the launches.

    PYTHONPATH=. python benchmarks/sgemm_ablation.py --n 4096
"""
from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))

_ATOM_SHARED = re.compile(r"(\s*)atom\.shared\.add\.f32\s+(%r\d+),\s*\[([^\]]+)\],\s*(%r\d+);")


def plain_shared_adds(ptx: str) -> str:
    """``atom.shared.add.f32 %d, [a], %v`` -> ``ld.shared.f32 %d, [a]; add.rn.f32 %d, %d, %v;
    st.shared.f32 [a], %d``."""
    def plain(m):
        pad, dst, addr, value = m.groups()
        return (f"{pad}ld.shared.f32 {dst}, [{addr}];{pad}add.rn.f32 {dst}, {dst}, {value};"
                f"{pad}st.shared.f32 [{addr}], {dst};")
    return _ATOM_SHARED.sub(plain, ptx)


def drop(pattern: str):
    return lambda ptx: "\n".join(line for line in ptx.splitlines() if not re.match(pattern, line)) + "\n"


def no_lane_combining(ptx: str) -> str:
    """Every ``activemask`` reads as a partial warp, so each shared add takes its uncombined path."""
    return re.sub(r"activemask\.b32\s+(%r\d+);", r"mov.b32 \1, 2147483647;", ptx)


VARIANTS = {"as_built": None, "no_shared_adds": drop(r"\s*atom\.shared\.add\.f32"),
            "plain_shared_adds": plain_shared_adds,
            "no_global_adds": drop(r"\s*(atom|red)\.global\.add\.f32"),
            "no_lane_combining": no_lane_combining,
            "no_shared_or_global_adds": lambda ptx: drop(r"\s*(atom|red)\.(global|shared)\.add\.f32")(ptx)}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=4096)
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--kernels", nargs="+", default=["sgemm_static"])
    args = parser.parse_args(argv)
    import adoffload as ado
    import blocks
    from harness import Gpu
    gpu = Gpu()
    n = args.n
    rng = np.random.default_rng(0)
    A, B, G = (rng.standard_normal((n, n)).astype(np.float32) for _ in range(3))
    values = {"A": A, "B": B, "C": np.zeros_like(A), "d_A": np.zeros_like(A), "d_B": np.zeros_like(B), "d_C": G}
    grid = (n // blocks.TM, n // blocks.TM)
    for name in args.kernels:
        kernel = getattr(blocks, name)
        row = blocks.time_variants({"kernel": name, "n": n}, kernel, values, grid, args.reps, gpu, {"primal": None})
        reverse = ado.vjp(kernel, ["A", "B"], primal_outputs=False)
        print(json.dumps(blocks.time_variants(row, reverse, values, grid, args.reps, gpu, VARIANTS)), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
