"""Probe (issue 13): where the shared-memory stencil's adjoint spends its time on a GPU.

Times ``jax.vjp`` of ``blocks.stencil_shared`` and ``blocks.stencil_plain`` (benchmarks/blocks.py)
with blocks.py's timer and the block codegen as shipped, or with ``--plain-shared-adds``: float adds into shared arrays
left as plain atomics (no ``match.any`` lane combining, codegen/gpu/shared_atomics.py). An experiment,
not a mode: run each variant in its own process with its own compile cache.

    ADOFFLOAD_CACHE_DIR=$(mktemp -d) PYTHONPATH=. python benchmarks/stencil_probe.py [--plain-shared-adds]
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--plain-shared-adds", action="store_true")
    parser.add_argument("--sizes", type=int, nargs="+", default=[4096, 8192])
    parser.add_argument("--reps", type=int, default=20)
    args = parser.parse_args(argv)
    if args.plain_shared_adds:
        from adoffload.codegen import blocks as codegen_blocks
        codegen_blocks.aggregate_shared_adds = lambda text, body, shared, block=None: (text, frozenset())
    import jax
    import jax.numpy as jnp

    import adoffload as ado
    import blocks
    variants = {"shared": (blocks.stencil_shared, lambda x: (x.shape[0] // blocks.SR, x.shape[1])),
                "plain": (blocks.stencil_plain, None)}
    for n in args.sizes:
        x = jnp.asarray(np.random.default_rng(2).standard_normal((n, n), np.float32))
        g = jnp.asarray(np.random.default_rng(3).standard_normal((n, n), np.float32))
        row = {"n": n, "plain_shared_adds": args.plain_shared_adds}
        results = {}
        for name, (kernel, grid) in variants.items():
            f = ado.jax_kernel(kernel, grid=grid, out_shapes=lambda x: {"y": x.shape})
            vjp = jax.jit(lambda x, g, f=f: jax.vjp(f, x)[1](g)[0])
            results[name] = np.asarray(vjp(x, g))
            row[f"vjp_{name}_ms"] = blocks.time_jax(vjp, (x, g), args.reps)["median_ms"]
        row["same"] = bool(np.allclose(results["shared"], results["plain"], rtol=1e-5, atol=1e-5))
        row["speedup"] = row["vjp_plain_ms"] / row["vjp_shared_ms"]
        print(json.dumps(row), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
