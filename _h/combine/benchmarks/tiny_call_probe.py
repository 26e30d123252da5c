"""Where the per-call cost of a tiny custom call goes: the tiny-call measurement of
overheads.py repeated under XLA flag variants (each in a fresh process, since XLA reads its
flags once), with an Out array the kernel writes in full (no memset) and one it does not
(a memset per call). Comparing the flag variants shows what CUDA graphs (XLA's command
buffers, on by default) save.

    python benchmarks/tiny_call_probe.py            # prints a markdown table
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time

VARIANTS = {
    "default flags": "",
    "no command buffers": "--xla_gpu_enable_command_buffer=",
}
CHAIN, REPS = 100, 50


def _child() -> None:
    import jax
    import jax.numpy as jnp
    import numpy as np

    import adoffload as ado

    @ado.kernel
    def add_one(x: ado.In[ado.f32], y: ado.Out[ado.f32]):
        i = ado.tid()
        y[i] = x[i] + 1.0

    @ado.kernel
    def add_one_half_written(x: ado.In[ado.f32], y: ado.Out[ado.f32]):
        i = ado.tid()
        if x[i] > -1.0e30:          # a data-dependent write: the handler zeroes y first
            y[i] = x[i] + 1.0

    def chain_of(step):
        def run(x):
            for _ in range(CHAIN):
                x = step(x)
            return x
        return run

    cases = {"custom call, Out written in full": chain_of(ado.jax_kernel(add_one)),
             "custom call, Out zeroed per call": chain_of(ado.jax_kernel(add_one_half_written)),
             "XLA op": chain_of(lambda x: jax.lax.optimization_barrier(x + 1.0))}
    x = jnp.ones(8, jnp.float32)
    result = {}
    for label, fn in cases.items():
        jf = jax.jit(fn)
        np.testing.assert_allclose(np.asarray(jf(x)), 1.0 + CHAIN)
        samples = []
        for _ in range(REPS):
            t0 = time.perf_counter()
            jax.block_until_ready(jf(x))
            samples.append((time.perf_counter() - t0) * 1e6 / CHAIN)
        result[label] = float(np.median(samples))
    print("RESULT " + json.dumps(result))


def main() -> int:
    rows = []
    for name, flags in VARIANTS.items():
        env = dict(os.environ, XLA_FLAGS=flags)
        done = subprocess.run([sys.executable, __file__, "--child"], env=env, capture_output=True,
                              text=True, timeout=300)
        lines = [l for l in done.stdout.splitlines() if l.startswith("RESULT ")]
        if done.returncode or not lines:
            print(f"variant {name!r} failed:\n{done.stderr[-2000:]}", file=sys.stderr)
            continue
        rows.append((name, json.loads(lines[-1][7:])))
    print("| XLA flags | case | us per call |")
    print("|---|---|---|")
    for name, result in rows:
        for case, us in result.items():
            print(f"| {name} | {case} | {us:.2f} |")
    return 0


if __name__ == "__main__":
    if "--child" in sys.argv:
        _child()
    else:
        sys.exit(main())
