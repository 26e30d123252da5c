import sys, time, threading, numpy as np
import adoffload as ado
from adoffload import codegen
from adoffload.optimize import generate, lbfgs, fire
from adoffload.optimize.inputs import prepare
from adoffload.chemistry.kernels import lj_cluster_energy
specs, _ = prepare((1.0, 1.0), 4096, np.dtype(np.float64), "x", False)
ks = [generate.minimize_kernel(lj_cluster_energy, m, 114, np.dtype(np.float64), specs, s)
      for m, s in ((lbfgs, {"H": 6}), (fire, {"G": 3}))]
def build(k):
    flat = [f.llvm_type for f in k.signature.flat_params()]
    codegen.compile_for_target(k.module_text(), k.body_name, flat, 1, "nvptx", "sm_90", cache=False, noalias=True)
for k in ks: build(k)   # warm up (initialization)
t = time.perf_counter(); [build(k) for k in ks]; serial = time.perf_counter() - t
t = time.perf_counter(); th = [threading.Thread(target=build, args=(k,)) for k in ks]; [x.start() for x in th]; [x.join() for x in th]
par = time.perf_counter() - t
print(f"LLVM (entry + O3 + PTX) of lbfgs and fire: serial {serial:.2f}s, two threads {par:.2f}s")
# a pure-Python spin while one thread compiles: how much does the compile slow it?
def spin(seconds):
    n = 0; end = time.perf_counter() + seconds
    while time.perf_counter() < end: n += 1
    return n
t = time.perf_counter(); alone = spin(0.5)
th = threading.Thread(target=build, args=(ks[0],)); th.start(); t = time.perf_counter(); busy = spin(0.5); th.join()
print(f"python spin while compiling: {busy/alone:.2f} of its speed alone")
