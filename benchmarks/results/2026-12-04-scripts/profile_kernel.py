"""cProfile of only the LJ38 minimize kernel's generation + nvptx compile (imports excluded)."""
import cProfile, pstats, sys, time
import numpy as np
import adoffload as ado
from adoffload.optimize import generate, lbfgs, fire
from adoffload.optimize.inputs import prepare
from adoffload.chemistry.kernels import lj_cluster_energy
from adoffload.jax import targets
from adoffload.codegen import targets as ct
ct.initialize()
method = {"lbfgs": lbfgs, "fire": fire}[sys.argv[1]]
specs, _ = prepare((1.0, 1.0), 4096, np.dtype(np.float64), "x", False)
static = {"H": 6} if method is lbfgs else {"G": 3}
def work():
    k = generate.minimize_kernel(lj_cluster_energy, method, 114, np.dtype(np.float64), specs, static)
    t, c = time.perf_counter(), time.process_time()
    targets._gpu_compiled(k, "nvptx", "sm_90", targets.Variant())
    return time.perf_counter() - t, time.process_time() - c
if "--profile" in sys.argv:
    cProfile.run("work()", "/tmp/k.prof")
    p = pstats.Stats("/tmp/k.prof"); p.sort_stats(sys.argv[3] if len(sys.argv) > 3 else "cumulative").print_stats(40)
else:
    t, cpu = time.perf_counter(), time.process_time()
    (c, c_cpu) = work()
    total, total_cpu = time.perf_counter() - t, time.process_time() - cpu
    print(f"{sys.argv[1]}: kernel generation + front end + AD {total - c:.2f} s (CPU {total_cpu - c_cpu:.2f} s), "
          f"codegen to PTX {c:.2f} s (CPU {c_cpu:.2f} s)")
