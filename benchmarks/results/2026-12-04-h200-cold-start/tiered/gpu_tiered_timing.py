"""Per-minimization times of 16384 LJ38 walkers, one process, cold adoffload cache (issue 32, tiered
assembly): each minimize call timed to block_until_ready, with the tier counters after it, so the
calls before the -O3 swap (ptxas -O1's code) and after it can be told apart.
Usage: python tmp_probe/gpu_tiered_timing.py METHOD CALLS OUT.jsonl   (run by tmp_probe/gpu_tiered.sh)"""
import json
import os
import sys
import time

began = time.perf_counter()
method, calls, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
import jax
jax.config.update("jax_enable_x64", True)
import jax.numpy as jnp
from adoffload.chemistry.kernels import lj_cluster_energy
from adoffload.chemistry.optimize import random_cluster
from adoffload.codegen.gpu import cubin
from adoffload.optimize import minimize

N, WALKERS = 38, 16384
FIRE = {"dt_start": 0.005, "dt_max": 0.05, "max_step": 0.1, "group": 3, "gtol": 1e-5}   # examples/chemistry/lj_clusters.py
options = FIRE if method == "fire" else {"gtol": 1e-5, "maxcor": 6}
keys = jax.random.split(jax.random.PRNGKey(0), WALKERS)
x0 = jax.vmap(lambda k: random_cluster(k, N))(keys).reshape(WALKERS, 3 * N)
jax.block_until_ready(x0)
env = {k: v for k, v in os.environ.items() if k.startswith("ADOFFLOAD_PTXAS")}
with open(out, "a") as f:
    for call in range(calls):
        t = time.perf_counter()
        result = minimize(lj_cluster_energy, x0, args=(1.0, 1.0), method=method, maxiter=800, options=options)
        jax.block_until_ready(result.x)
        row = {"method": method, "env": env, "call": call, "seconds": round(time.perf_counter() - t, 4),
               "since_start": round(time.perf_counter() - began, 3), "best": float(jnp.min(result.fun)),
               **{k: cubin.STATS[k] for k in ("ptxas_runs", "cache_hits", "tiered", "upgrades", "upgrade_failures")}}
        print(json.dumps(row), flush=True)
        f.write(json.dumps(row) + "\n")
