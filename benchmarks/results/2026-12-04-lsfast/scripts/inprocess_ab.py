"""Old (main's) and new least_squares LM kernels for the decay fit, in one process, timed alternately
on the same curves (min and median of the launches), plus their results compared."""
import importlib.util, os, sys, time
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE); sys.path.insert(0, "examples/fitting"); sys.path.insert(0, "examples/chemistry")
import numpy as np
import adoffload as ado
import decay_fits
from adoffload.optimize import generate
from adoffload.optimize.inputs import ArgSpec

N, M = 3, 40
template = open(os.path.join(HERE, "old_template.txt")).read().split('"""', 1)[1].rsplit('"""', 1)[0]
template = template.replace("least_squares_steps", "old_steps")
import old_steps
copies = ("    d0 = ado.zeros((40,), ado.f64)\n    for j0_0 in range(40):\n        d0[j0_0] = a0[j0_0]\n"
          "    d1 = ado.zeros((40,), ado.f64)\n    for j1_0 in range(40):\n        d1[j1_0] = a1[i, j1_0]\n")
body = template.format(name="old_lm", T="ado.f64", N=N, M=M, params="a0: ado.In[ado.f64, 1], a1: ado.In[ado.f64, 2], ",
                       copies=copies, call=", d0, d1", allocate=old_steps.ALLOCATE.format(T="ado.f64", N=N, M=M).replace("least_squares_steps", "old_steps"),
                       r_index=3, gauss_newton="False")
source = "import adoffload as ado\nimport old_steps\n" + body
path = os.path.join(HERE, "old_lm_kernel.py")
open(path, "w").write(source)
spec = importlib.util.spec_from_file_location("old_lm_kernel", path)
mod = importlib.util.module_from_spec(spec); spec.loader.exec_module(mod)
mod.fun = decay_fits.decay
old = ado.kernel(mod.old_lm)
specs = (ArgSpec("shared_array", "ado.f64", (40,)), ArgSpec("batch_array", "ado.f64", (40,)))
new = generate.least_squares_kernel(decay_fits.decay, N, M, np.dtype(np.float64), specs, False)

count = int(sys.argv[1]) if len(sys.argv) > 1 else 20000
reps = int(sys.argv[2]) if len(sys.argv) > 2 else 15
device = sys.argv[3] if len(sys.argv) > 3 else "cpu"
t, true, y = decay_fits.make_data(count, M, 0.02, 1)
x0 = np.tile(decay_fits.START, (count, 1))

def outs():
    return [np.empty((count, N)), np.empty(count), np.empty((count, M)), np.empty((count, N)),
            np.empty(count, np.int64), np.empty(count, np.int64), np.empty(count, np.int64), np.empty(count, np.int64)]

results = {}
for name, k in (("old", old), ("new", new)):
    o = outs()
    k(x0, t, y, 1e-8, 1e-8, 1e-8, 300, *o, grid=count, device=device)
    results[name] = o
times = {"old": [], "new": []}
for _ in range(reps):
    for name, k in (("old", old), ("new", new)):
        o = outs()
        began = time.perf_counter()
        k(x0, t, y, 1e-8, 1e-8, 1e-8, 300, *o, grid=count, device=device)
        times[name].append(time.perf_counter() - began)
print(f"{count} curves on {device}, {reps} launches each (numpy in and out), alternating; load {os.getloadavg()}")
for name in times:
    ts = np.array(times[name]) / count * 1e6
    print(f"  {name}: us/curve min {ts.min():.3f} median {np.median(ts):.3f}")
print("  median ratio old/new %.2f, min ratio %.2f" % (np.median(times["old"]) / np.median(times["new"]),
                                                        min(times["old"]) / min(times["new"])))
a, b = results["old"], results["new"]
print("  max |x old - x new|", np.abs(a[0] - b[0]).max(), "status equal", (a[4] == b[4]).mean(),
      "nfev old/new", a[6].mean(), b[6].mean(), "njev", a[7].mean(), b[7].mean())

if len(sys.argv) > 4:           # write the sm_90 PTX of both kernels there
    for name, k in (("old", old), ("new", new)):
        open(os.path.join(sys.argv[4], f"lm_{name}.ptx"), "w").write(k.compiled("nvptx", arch="sm_90").ptx)
