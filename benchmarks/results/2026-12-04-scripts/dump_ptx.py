import sys, numpy as np
sys.argv += []
import adoffload as ado
from adoffload.optimize import generate, lbfgs, fire
from adoffload.optimize.inputs import prepare
from adoffload.chemistry.kernels import lj_cluster_energy
from adoffload.jax import targets
method = {"lbfgs": lbfgs, "fire": fire}[sys.argv[1]]
n, batch = 114, 4096
specs, _ = prepare((1.0, 1.0), batch, np.dtype(np.float64), "x", False)
static = {"H": 6} if method is lbfgs else {"G": 3}
k = generate.minimize_kernel(lj_cluster_energy, method, n, np.dtype(np.float64), specs, static)
open(f"/tmp/{sys.argv[1]}_body.ll", "w").write(k.module_text())
c = targets._gpu_compiled(k, "nvptx", "sm_90", targets.Variant())
open(f"/tmp/{sys.argv[1]}.ptx", "w").write(c.ptx)
