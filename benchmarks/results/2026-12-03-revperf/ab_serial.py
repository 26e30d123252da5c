import sys, time, numpy as np, os
import jax; jax.config.update("jax_enable_x64", True)
import adoffload as ado
from adoffload.runtime.host import HostDevice
from benchmarks.suites.user_kernels import System, vjp_call
pot = sys.argv[1] if len(sys.argv) > 1 else "lj"
s = System(int(sys.argv[2]) if len(sys.argv) > 2 else 20000, jax.devices("cpu")[0])
pos, nbr, box, *_ = s.arguments(pot)
n = s.n
a = HostDevice(workers=1); b = HostDevice(workers=1); b.one_thread = lambda total: False
calls = {}
for name, dev in (("serial", a), ("atomic", b)):
    arrays = (pos, nbr, np.zeros(n), np.zeros_like(pos), np.ones(n))
    calls[name] = (vjp_call(pot, arrays, box, dev), arrays)
    calls[name][0](); calls[name][0]()
ts = {k: [] for k in calls}
for r in range(int(os.environ.get("REPS", 20))):
    for k, (c, _) in calls.items():
        t0 = time.perf_counter(); c(); ts[k].append(time.perf_counter() - t0)
eref, fref = s.reference(pot)
for k, (c, arr) in calls.items():
    print(pot, k, "median %.2f min %.2f ms" % (np.median(ts[k]) * 1e3, min(ts[k]) * 1e3),
          "force err %.1e" % (np.abs(-arr[3] - fref).max() / np.abs(fref).max()))
print("load", os.getloadavg())
