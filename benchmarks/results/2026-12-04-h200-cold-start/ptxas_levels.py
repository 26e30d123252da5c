import sys, time, json, os
import numpy as np
import jax
jax.config.update("jax_enable_x64", True)
from adoffload.optimize import minimize
from adoffload.chemistry.kernels import lj_cluster_energy
from adoffload.chemistry.optimize import random_cluster
with jax.default_device(jax.devices("cpu")[0]):
    keys = jax.random.split(jax.random.PRNGKey(0), 16384)
    X = np.asarray(jax.vmap(lambda k: random_cluster(k, 38))(keys)).reshape(16384, 114)
for method in ["fire", "lbfgs"]:
    opts = {"dt_start": 0.005, "dt_max": 0.05, "max_step": 0.1, "group": 3, "gtol": 1e-5} if method == "fire" else {"gtol": 1e-5, "maxcor": 6}
    ts = []
    for rep in range(3):
        t0 = time.perf_counter()
        r = minimize(lj_cluster_energy, X, args=(1.0, 1.0), method=method, maxiter=800, device="cuda", options=opts)
        ts.append(time.perf_counter() - t0)
    print(json.dumps({"ptxas_opt": os.environ.get("ADOFFLOAD_PTXAS_OPT", "default"), "method": method, "first_s": ts[0],
                      "warm_s": min(ts[1:]), "best": float(np.min(r.fun)), "nit_mean": float(np.mean(r.nit))}), flush=True)
