"""GPU probe 1: LJ38 minimize time vs walkers; decay-fit kernel time vs transfers."""
import sys, time, json
import numpy as np
sys.path.insert(0, "examples/fitting")
import jax
jax.config.update("jax_enable_x64", True)
import jax.numpy as jnp
from adoffload.optimize import minimize, least_squares, shared
from adoffload.chemistry.kernels import lj_cluster_energy
from adoffload.chemistry.optimize import random_cluster

def clusters(B, n=38, seed=0):
    with jax.default_device(jax.devices("cpu")[0]):
        keys = jax.random.split(jax.random.PRNGKey(seed), B)
        return np.asarray(jax.vmap(lambda k: random_cluster(k, n))(keys)).reshape(B, 3 * n)

FIRE = {"dt_start": 0.005, "dt_max": 0.05, "max_step": 0.1, "group": 3}
which = sys.argv[1:] or ["lj", "fits"]
if "lj" in which:
    for method in ["lbfgs", "fire"]:
        for B in [4096, 16384, 65536]:
            x0 = clusters(B)
            opts = dict(FIRE, gtol=1e-5) if method == "fire" else {"gtol": 1e-5, "maxcor": 6}
            times = []
            for rep in range(2):
                t0 = time.perf_counter()
                r = minimize(lj_cluster_energy, x0, args=(1.0, 1.0), method=method, maxiter=800, device="cuda", options=opts)
                times.append(time.perf_counter() - t0)
            print(json.dumps({"case": "lj38-min", "method": method, "walkers": B, "first_s": times[0], "warm_s": times[1],
                              "nit_mean": float(np.mean(r.nit)), "nit_max": int(np.max(r.nit)), "nfev_mean": float(np.mean(r.nfev)),
                              "success": float(np.mean(r.success)), "best": float(np.min(r.fun))}), flush=True)
if "fits" in which:
    import decay_fits
    for curves in [10**5, 10**6]:
        t, _, y = decay_fits.make_data(curves, 40, 0.02, 0)
        x0 = np.tile(decay_fits.START, (curves, 1))
        for rep in range(2):
            t0 = time.perf_counter()
            r = least_squares(decay_fits.decay, x0, args=(shared(t), y), m=len(t), ftol=1e-8, xtol=1e-8, gtol=1e-8, device="cuda")
            dt = time.perf_counter() - t0
        print(json.dumps({"case": "fits-numpy", "curves": curves, "s": dt, "us_per_curve": dt / curves * 1e6,
                          "nfev_mean": float(np.mean(r.nfev)), "nit_mean": float(np.mean(r.nit))}), flush=True)
        try:
            gpu = jax.devices("gpu")[0]
            tj, yj, xj = (jax.device_put(a, gpu) for a in (t, y, x0))
            f = jax.jit(lambda x, tt, yy: least_squares(decay_fits.decay, x, args=(shared(tt), yy), m=40, ftol=1e-8, xtol=1e-8, gtol=1e-8).x)
            f(xj, tj, yj).block_until_ready()
            ts = []
            for rep in range(3):
                t0 = time.perf_counter(); f(xj, tj, yj).block_until_ready(); ts.append(time.perf_counter() - t0)
            print(json.dumps({"case": "fits-jax-device", "curves": curves, "s": min(ts), "us_per_curve": min(ts) / curves * 1e6}), flush=True)
        except Exception as e:
            print(json.dumps({"case": "fits-jax-device", "error": repr(e)[:500]}), flush=True)
