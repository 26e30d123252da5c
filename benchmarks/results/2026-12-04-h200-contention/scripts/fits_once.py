import os, sys, time
sys.path.insert(0, "examples/fitting"); sys.path.insert(0, "examples/chemistry")
import numpy as np
import decay_fits as df
from adoffload.optimize import least_squares, shared
n = int(os.environ.get("N", 100000))
t, true, y = df.make_data(n, 40, 0.02, 0)
x0 = np.tile(df.START, (n, 1))
for k in range(int(os.environ.get("REPS", 2))):
    t0 = time.perf_counter()
    r = least_squares(df.decay, x0, args=(shared(t), y), m=40, method="lm", ftol=1e-8, xtol=1e-8, gtol=1e-8, device="cuda")
    print("rep", k, "s", time.perf_counter() - t0, "nit mean", r.nit.mean(), "nfev mean", r.nfev.mean(), "ok", r.success.mean())
