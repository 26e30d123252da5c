"""The block-SGEMM kernels of benchmarks/blocks.py and their VJPs under ``jax.jit``, timed with
blocks.py's timer (``--reps`` launches; 0: one launch each, for a profiler to capture with
``ncu -k regex:vjp``). A quick A/B probe, not the benchmark: blocks.py is that.

    PYTHONPATH=. python benchmarks/sgemm_vjp_probe.py --n 4096 --kernels sgemm_static
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

import adoffload as ado

sys.path.insert(0, str(Path(__file__).parent))
import blocks  # noqa: E402


def main() -> None:
    import jax
    import jax.numpy as jnp
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=2048)
    parser.add_argument("--reps", type=int, default=10)
    parser.add_argument("--kernels", nargs="+", default=["sgemm", "sgemm_static"])
    args = parser.parse_args()
    n = args.n
    rng = np.random.default_rng(0)
    A, B, G = (jnp.asarray(rng.standard_normal((n, n)).astype(np.float32)) for _ in range(3))
    for name in args.kernels:
        per = 1 if name == "matmul16" else blocks.TM
        ours = ado.jax_kernel(getattr(blocks, name), grid=lambda A, B, p=per: (A.shape[0] // p, B.shape[1] // p),
                              out_shapes=lambda A, B: {"C": (A.shape[0], B.shape[1])})
        primal = jax.jit(ours)
        vjp = jax.jit(lambda A, B, G, f=ours: jax.vjp(f, A, B)[1](G))
        for label, f, xs in (("primal", primal, (A, B)), ("vjp", vjp, (A, B, G))):
            if args.reps == 0:
                jax.block_until_ready(f(*xs))
                continue
            t = blocks.time_jax(f, xs, args.reps)
            print(f"{name} {label} n={n}: median {t['median_ms']:.3f} ms (spread {t['spread_ms']:.3f}, {t['reps']} reps)")


if __name__ == "__main__":
    main()
