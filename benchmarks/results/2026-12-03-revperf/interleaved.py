"""Interleaved timing on one host: ours (ado.vjp, one thread) and Warp's Tape adjoint, call after call."""
import os, sys, time, json
import numpy as np
import jax; jax.config.update("jax_enable_x64", True)
import adoffload
from adoffload.runtime.host import HostDevice
from benchmarks.suites.user_kernels import System, vjp_call
from benchmarks.kernels.user import ENERGIES
from benchmarks.peers import warp_peer
pot = sys.argv[1]
rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 15
s = System(20000, jax.devices("cpu")[0])
pos, nbr, box, *_ = s.arguments(pot)
n = s.n
arrays = (pos, nbr, np.zeros(n), np.zeros_like(pos), np.ones(n))
sides = {"ours one thread": vjp_call(pot, arrays, box, HostDevice(workers=1)),
         "ours all cores": vjp_call(pot, (pos, nbr, np.zeros(n), np.zeros_like(pos), np.ones(n)), box, "cpu"),
         "warp": warp_peer.TapeGradient(pot, pos, nbr, box, ENERGIES[pot][1])}
for f in sides.values():
    f(); f()
eref, fref = s.reference(pot)
err = np.abs(-arrays[3] - fref).max() / np.abs(fref).max()
ts = {k: [] for k in sides}
load0 = os.getloadavg()
for _ in range(rounds):
    for k, f in sides.items():
        t0 = time.perf_counter(); f(); ts[k].append((time.perf_counter() - t0) * 1e3)
out = {"engine": os.path.dirname(os.path.dirname(adoffload.__file__)), "potential": pot, "atoms": n,
       "load_start": load0, "load_end": os.getloadavg(), "force_rel_err": float(err),
       **{k: {"median_ms": float(np.median(v)), "min_ms": float(min(v))} for k, v in ts.items()}}
out["ratio_one_thread_median"] = out["ours one thread"]["median_ms"] / out["warp"]["median_ms"]
out["ratio_one_thread_min"] = out["ours one thread"]["min_ms"] / out["warp"]["min_ms"]
out["ratio_all_cores_median"] = out["ours all cores"]["median_ms"] / out["warp"]["median_ms"]
print(json.dumps(out))
