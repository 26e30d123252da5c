"""How much of a fit is the residual: a kernel that evaluates the decay residual 12 times per thread."""
import sys, time
sys.path.insert(0, "examples/fitting"); sys.path.insert(0, "examples/chemistry")
import numpy as np, adoffload as ado
import decay_fits

@ado.kernel
def evals(x0: ado.In[ado.f64, 2], t: ado.In[ado.f64, 1], yy: ado.In[ado.f64, 2], out: ado.Out[ado.f64]):
    i = ado.tid() + 0
    x = ado.zeros(3, ado.f64)
    y = ado.zeros(40, ado.f64)
    r = ado.zeros(40, ado.f64)
    for j in range(40):
        y[j] = yy[i, j]
    for j in range(3):
        x[j] = x0[i, j]
    s = 0.0
    for rep in range(12):
        x[1] = x[1] + 1e-3
        decay_fits.decay(x, t, y, r)
        s += r[rep]
    out[i] = s

n = 20000
t, true, y = decay_fits.make_data(n, 40, 0.02, 1)
x0 = np.tile(decay_fits.START, (n, 1)); out = np.zeros(n)
evals(x0, t, y, out, grid=n)
ts = []
for _ in range(9):
    b = time.perf_counter(); evals(x0, t, y, out, grid=n); ts.append(time.perf_counter() - b)
print("12 residual evaluations: us/curve median", np.median(ts) / n * 1e6)
