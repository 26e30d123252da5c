import sys, time, json, os
import numpy as np
sys.path.insert(0, "examples/fitting")
import jax
jax.config.update("jax_enable_x64", True)
from adoffload.optimize import minimize, least_squares, shared
from adoffload.chemistry.kernels import lj_cluster_energy
from adoffload.chemistry.optimize import random_cluster
import decay_fits
cfg = {"block": os.environ.get("ADOFFLOAD_EXP_BLOCK", "32"), "resident": os.environ.get("ADOFFLOAD_EXP_RESIDENT", "-")}
gpu = jax.devices("gpu")[0]
t, _, y = decay_fits.make_data(10**6, 40, 0.02, 0)
x0 = np.tile(decay_fits.START, (10**6, 1))
tj, yj, xj = (jax.device_put(a, gpu) for a in (t, y, x0))
f = jax.jit(lambda x, tt, yy: least_squares(decay_fits.decay, x, args=(shared(tt), yy), m=40, ftol=1e-8, xtol=1e-8, gtol=1e-8).x)
f(xj, tj, yj).block_until_ready()
ts = []
for rep in range(3):
    t0 = time.perf_counter(); f(xj, tj, yj).block_until_ready(); ts.append(time.perf_counter() - t0)
print(json.dumps(dict(cfg, case="fits1e6-device", s=min(ts))), flush=True)
with jax.default_device(jax.devices("cpu")[0]):
    keys = jax.random.split(jax.random.PRNGKey(0), 32768)
    X = np.asarray(jax.vmap(lambda k: random_cluster(k, 38))(keys)).reshape(32768, 114)
for method in ["fire", "lbfgs"]:
    opts = {"dt_start": 0.005, "dt_max": 0.05, "max_step": 0.1, "group": 3, "gtol": 1e-5} if method == "fire" else {"gtol": 1e-5, "maxcor": 6}
    for B in [16384, 32768]:
        ts = []
        for rep in range(2):
            t0 = time.perf_counter()
            r = minimize(lj_cluster_energy, X[:B], args=(1.0, 1.0), method=method, maxiter=800, device="cuda", options=opts)
            ts.append(time.perf_counter() - t0)
        print(json.dumps(dict(cfg, case=f"lj38-{method}-{B}", first=ts[0], s=ts[1], best=float(np.min(r.fun)), hits=int(np.sum(r.fun < -173.928427 + 1e-4)))), flush=True)
