"""The counting kernel of a reverse kernel on a GPU, full clone vs control slice (issue 31 item 2).

usage: python tmp_probe/gpu_tapesize.py full|slice  (run each in its own process and cache dir;
gpu_tapesize.sh does). Prints the median time of the whole vjp launch (counting kernel, device
prefix sum, the adjoint) and the gradient's checksum, which must agree between the two."""
import os, sys, time, statistics
import numpy as np
if sys.argv[1] == "full":
    import adoffload.enzyme.counting as counting
    counting.slice_to_control = lambda fn, observed=(): False     # the counting function before the slice
import adoffload as ado

@ado.kernel
def rows(x: ado.In[ado.f64], w: ado.In[ado.f64], C: ado.i64, out: ado.Out[ado.f64]):
    """Per thread a nonlinear recurrence over a runtime length C: its adjoint tapes every step."""
    i = ado.tid()
    acc = 0.0
    for k in range(C):
        acc = ado.tanh(acc * w[k] + x[i * C + k])
    out[i] = acc

DEVICE = os.environ.get("DEVICE", "cuda")
vjp = ado.vjp(rows, ["x", "w"])
rng = np.random.default_rng(0)
for n, C in ((1 << 14, 256), (1 << 16, 768)):
    x, w = rng.uniform(-1, 1, n * C), rng.uniform(-1, 1, C)
    seed = rng.standard_normal(n)
    times = []
    for rep in range(6):
        d_x, d_w = np.zeros(n * C), np.zeros(C)
        t = time.perf_counter()
        vjp(x, w, C, np.zeros(n), d_x, d_w, seed.copy(), grid=n, device=DEVICE)
        times.append(time.perf_counter() - t)
    print(f"{sys.argv[1]} n={n} C={C}: vjp launch median {1e3 * statistics.median(times[1:]):.2f} ms "
          f"(first {1e3 * times[0]:.0f} ms), checksum d_x {d_x.sum():.12e} d_w {d_w.sum():.12e}", flush=True)
