import sys, numpy as np
sys.path.insert(0, "examples/fitting")
import jax
jax.config.update("jax_enable_x64", True)
from adoffload.optimize import minimize, least_squares, shared
what = sys.argv[1]
if what == "fits":
    import decay_fits
    t, _, y = decay_fits.make_data(10**5, 40, 0.02, 0)
    x0 = np.tile(decay_fits.START, (10**5, 1))
    r = least_squares(decay_fits.decay, x0, args=(shared(t), y), m=40, ftol=1e-8, xtol=1e-8, gtol=1e-8, device="cuda")
else:
    from adoffload.chemistry.kernels import lj_cluster_energy
    from adoffload.chemistry.optimize import random_cluster
    with jax.default_device(jax.devices("cpu")[0]):
        keys = jax.random.split(jax.random.PRNGKey(0), 16384)
        x0 = np.asarray(jax.vmap(lambda k: random_cluster(k, 38))(keys)).reshape(16384, 114)
    r = minimize(lj_cluster_energy, x0, args=(1.0, 1.0), method=what, maxiter=800, device="cuda",
                 options={"dt_start": 0.005, "dt_max": 0.05, "max_step": 0.1, "group": 3, "gtol": 1e-5} if what == "fire" else {"gtol": 1e-5, "maxcor": 6})
print("done", what)
