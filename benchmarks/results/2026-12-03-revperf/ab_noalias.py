import sys, time, numpy as np, os
import jax; jax.config.update("jax_enable_x64", True)
import adoffload as ado
from adoffload.kernels import launch_run
from adoffload.runtime.host import HostDevice
from benchmarks.suites.user_kernels import System, vjp_call
pot = sys.argv[1] if len(sys.argv) > 1 else "lj"
s = System(20000, jax.devices("cpu")[0])
pos, nbr, box, *_ = s.arguments(pot)
n = s.n
modes = {"noalias": (True, HostDevice(workers=1)), "alias": (False, HostDevice(workers=1))}
calls = {}
for name, (flag, dev) in modes.items():
    arrays = (pos, nbr, np.zeros(n), np.zeros_like(pos), np.ones(n))
    launch_run.HOST_NOALIAS = flag
    c = vjp_call(pot, arrays, box, dev); c(); c()
    calls[name] = (c, arrays, flag)
ts = {k: [] for k in calls}
for r in range(int(os.environ.get("REPS", 20))):
    for k, (c, _, flag) in calls.items():
        launch_run.HOST_NOALIAS = flag
        t0 = time.perf_counter(); c(); ts[k].append(time.perf_counter() - t0)
eref, fref = s.reference(pot)
for k, (c, arr, _) in calls.items():
    print(pot, k, "median %.2f min %.2f ms" % (np.median(ts[k]) * 1e3, min(ts[k]) * 1e3),
          "force err %.1e" % (np.abs(-arr[3] - fref).max() / np.abs(fref).max()))
print("load", os.getloadavg())
