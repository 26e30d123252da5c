"""Issue 16's slow block-sum VJP, after trip bounds for halving loops and the device prefix sum.

* ``block_sum``: the CUDA-source block sum against ours (benchmarks/cuda_foreign.py's case): our
  ``h = h // 2`` loop now has a static trip bound, so its VJP has a static tape.
* ``block_sum_dynamic``: the same kernel in our language with the loop's start a parameter (its
  bound, 66 header visits, is too many for a static tape), so its VJP needs a dynamic tape: the
  JAX handler counts, scans the 2**24 counts on the device (tape_scan.py) and copies back only
  the total (before: the counts went to the host).
* ``recurrence``: a data-dependent per-thread trip count (a dynamic tape by nature): VJP / primal.

Jitted JAX calls, median of ``--reps``; each case first checks its VJP against another way of
computing it. ``--smoke`` runs tiny sizes on any backend.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import adoffload as ado  # noqa: E402


@ado.kernel(block=128)
def block_sum_dynamic(x: ado.In[ado.f64], start: ado.i64, out: ado.Out[ado.f64]):
    i = ado.tid()
    t = ado.thread_id()
    s = ado.shared(128, ado.f64)
    s[t] = x[i] * x[i]
    ado.sync_threads()
    h = start                  # 64, but a parameter: up to 64 trips, too many for a static tape
    while h > 0:
        if t < h:
            s[t] += s[t + h]
        ado.sync_threads()
        h = h // 2
    if t == 0:
        out[ado.block_id()] = s[0]


@ado.kernel
def recurrence(x: ado.In[ado.f64], steps: ado.In[ado.i64], out: ado.Out[ado.f64]):
    i = ado.tid()
    acc = x[i]
    for j in range(steps[i]):
        acc = ado.sin(acc) * 0.9 + 0.1 * x[i]
    out[i] = acc


def _vjp_ms(f, args, reps):
    import jax
    import jax.numpy as jnp
    from harness import time_jax
    primal = jax.jit(f)
    out = primal(*args)
    vjp = jax.jit(lambda *a: jax.vjp(f, *a)[1](jnp.ones_like(out))[0])
    return vjp, {"primal_ms": time_jax(primal, *args, reps=reps).median_ms,
                 "vjp_ms": time_jax(vjp, *args, reps=reps).median_ms}


def dynamic_block_sum(n: int, reps: int) -> dict:
    import jax.numpy as jnp
    assert ado.vjp(block_sum_dynamic, ["x"]).tape is not None, "the case must keep a dynamic tape"
    call = ado.jax_kernel(block_sum_dynamic, grid=n, out_shapes={"out": n // 128})
    x = jnp.asarray(np.random.default_rng(0).standard_normal(n))
    start = 64
    vjp, row = _vjp_ms(lambda x: call(x, start), (x,), reps)
    np.testing.assert_allclose(np.asarray(vjp(x)), 2 * np.asarray(x), rtol=1e-12)   # d/dx sum(x^2) = 2x
    return {"case": "block_sum_dynamic", "n": n, "agree": True, **row}


def dynamic_recurrence(n: int, reps: int) -> dict:
    import jax
    import jax.numpy as jnp
    call = ado.jax_kernel(recurrence, out_shapes={"out": n})
    rng = np.random.default_rng(1)
    x = jnp.asarray(rng.uniform(0.1, 1.0, n))
    steps = jnp.asarray(rng.integers(0, 8, n))
    vjp, row = _vjp_ms(lambda x: call(x, steps), (x,), reps)

    def reference(x):         # the same recurrence in JAX, steps masked per element
        acc = x
        for j in range(8):
            acc = jnp.where(j < steps, jnp.sin(acc) * 0.9 + 0.1 * x, acc)
        return acc
    expected = jax.vjp(reference, x)[1](jnp.ones_like(x))[0]
    np.testing.assert_allclose(np.asarray(vjp(x)), np.asarray(expected), rtol=1e-11, atol=1e-12)
    return {"case": "recurrence", "n": n, "agree": True, **row}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True, help="directory for halving.json")
    parser.add_argument("--reps", type=int, default=10)
    parser.add_argument("--smoke", action="store_true", help="tiny sizes on any JAX backend")
    args = parser.parse_args(argv)
    import jax
    jax.config.update("jax_enable_x64", True)
    import cuda_foreign
    n = 1 << 12 if args.smoke else 1 << 24
    reps = 2 if args.smoke else args.reps
    assert ado.vjp(cuda_foreign.block_sum_ado, ["x"]).tape is None, "the halving loop must get a static tape"
    cases = [("block_sum", lambda: cuda_foreign.measure(
                 "block_sum", *cuda_foreign.block_sum_case(ado.from_cuda(cuda_foreign.CUDA), {"n": n},
                                                           np.random.default_rng(0)), reps)),
             ("block_sum_dynamic", lambda: dynamic_block_sum(n, reps)),
             ("recurrence", lambda: dynamic_recurrence(n, reps))]
    from harness import run_cases, write_rows
    rows = run_cases(cases)
    return write_rows(args.out / "halving.json", rows)


if __name__ == "__main__":
    raise SystemExit(main())
