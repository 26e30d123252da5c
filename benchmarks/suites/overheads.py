"""Overheads: cold and warm compile time (kernel + JVP + VJP, fresh processes), and a tiny custom call in jit.

The compile rows run in fresh Python processes with an empty cache (cold), then the same cache
(warm); ``ms`` is the compile after ``import adoffload``, ``import_ms`` the import. PTX compiles
need no GPU (llvmlite's NVPTX backend and libdevice). The tiny-call rows chain 100 calls of an
8-element kernel inside one ``jax.jit`` against 100 unfused XLA ops. Launch costs from Python
(numpy, CuPy, Numba, Warp) are the user_kernels suite's.
"""
from __future__ import annotations

import os
import tempfile

import numpy as np

from ..timing import time_jax

DEVICES = ("cpu", "cuda")

SOURCE = '''
import adoffload as ado

@ado.kernel
def lj_pair(pos: ado.In[ado.f64, 2], sigma: ado.f64, epsilon: ado.f64, e: ado.Out[ado.f64]):
    i = ado.tid()
    acc = 0.0
    for j in range(pos.shape[0]):
        if j != i:
            dx = pos[i, 0] - pos[j, 0]
            dy = pos[i, 1] - pos[j, 1]
            dz = pos[i, 2] - pos[j, 2]
            s2 = sigma * sigma / (dx * dx + dy * dy + dz * dz)
            s6 = s2 * s2 * s2
            acc += 2.0 * epsilon * (s6 * s6 - s6)
    e[i] = acc
'''


_COMPILE_SCRIPT = """
import importlib.util, json, sys, time
t0 = time.perf_counter()
import adoffload as ado
imported = time.perf_counter()
spec = importlib.util.spec_from_file_location("lj_kernel", sys.argv[1])
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
k = module.lj_pair
for variant in (k, ado.jvp(k, ["pos", "sigma"]), ado.vjp(k, ["pos", "sigma"])):
    variant.compiled(sys.argv[2], arch=None if sys.argv[3] == "-" else sys.argv[3])
done = time.perf_counter()
print(json.dumps({"import_ms": (imported - t0) * 1e3, "ms": (done - imported) * 1e3}))
"""


def compile_times(target: str, arch: str | None, rows: list) -> None:
    """Cold (empty cache) and warm (cache filled by the cold run) compile of kernel + JVP + VJP
    to the target, each in a FRESH Python process (nothing compiled or initialised before it);
    ``ms`` is the compile after ``import adoffload`` (LLVM's initialisation included), ``import_ms``
    the import itself."""
    import json
    import subprocess
    import sys
    repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    with tempfile.TemporaryDirectory() as cache_dir:
        path = os.path.join(cache_dir, "lj_kernel.py")
        with open(path, "w") as f:
            f.write(SOURCE)
        env = {**os.environ, "ADOFFLOAD_CACHE_DIR": cache_dir,
               "PYTHONPATH": repo + os.pathsep + os.environ.get("PYTHONPATH", "")}
        for label in ("cold", "warm"):      # warm: the same program run again in a new process
            measure = f"compile kernel+jvp+vjp ({label}, {target}, fresh process)"
            done = subprocess.run([sys.executable, "-c", _COMPILE_SCRIPT, path, target, arch or "-"],
                                  capture_output=True, text=True, env=env, timeout=300)
            if done.returncode != 0:
                rows.append({"measure": measure, "error": done.stderr.strip()[-300:]})
                continue
            rows.append({"measure": measure, **json.loads(done.stdout.strip().splitlines()[-1])})


def tiny_call(rows: list, platform: str, reps: int = 50) -> None:
    """Per-call cost inside jit: N chained tiny custom calls vs N chained tiny XLA ops."""
    import jax
    import jax.numpy as jnp

    import adoffload as ado

    @ado.kernel
    def add_one(x: ado.In[ado.f32], y: ado.Out[ado.f32]):
        i = ado.tid()
        y[i] = x[i] + 1.0

    f = ado.jax_kernel(add_one)
    chain = 100

    def ours(x):
        for _ in range(chain):
            x = f(x)
        return x

    def xla(x):
        for _ in range(chain):
            x = jax.lax.optimization_barrier(x + 1.0)   # one unfused XLA op per step
        return x

    x = jax.device_put(jnp.ones(8, jnp.float32), jax.devices(platform)[0])
    for label, fn in (("adoffload custom call", ours), ("XLA op", xla)):
        # one wait per jitted call: the chain inside it is what is timed, not dispatch overlap
        t = time_jax(jax.jit(fn), x, reps=reps, batch=1)
        per_call = 1e3 / chain               # ms per jitted call -> us per chained call
        rows.append({"measure": f"tiny call in jit, per call ({label}, {platform})", "us": t.median_ms * per_call,
                     "iqr_us": (t.q3_ms - t.q1_ms) * per_call, "min_us": t.min_ms * per_call,
                     "max_us": t.max_ms * per_call, "reps": t.reps, "chain": chain})
    np.testing.assert_allclose(np.asarray(jax.jit(ours)(x)), 1.0 + chain)


def run(rows, device: str, quick: bool, options) -> None:
    compile_times("host", None, rows)
    if device == "cuda" or not quick:
        compile_times("nvptx", "sm_90", rows)
    tiny_call(rows, "gpu" if device == "cuda" else "cpu", reps=options.reps or (10 if quick else 50))
