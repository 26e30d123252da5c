"""The LM kernel of the decay fit compiled for sm_90: its __local_depot sizes and local loads/stores."""
import re, sys
sys.path.insert(0, "examples/fitting"); sys.path.insert(0, "examples/chemistry")
import numpy as np
import decay_fits
from adoffload.optimize import generate
from adoffload.optimize.inputs import ArgSpec
specs = (ArgSpec("shared_array", "ado.f64", (40,)), ArgSpec("batch_array", "ado.f64", (40,)))
k = generate.least_squares_kernel(decay_fits.decay, 3, 40, np.dtype(np.float64), specs, False)
ptx = k.compiled("nvptx", arch="sm_90").ptx
open(sys.argv[1] if len(sys.argv) > 1 else "/tmp/lm.ptx", "w").write(ptx)
print("local depots:", re.findall(r"\.local \.align \d+ \.b8\s+__local_depot\w*\[(\d+)\]", ptx))
print("ld.local", len(re.findall(r"ld\.local", ptx)), "st.local", len(re.findall(r"st\.local", ptx)),
      "ex2/exp calls", len(re.findall(r"__nv_exp|ex2\.approx", ptx)), "lines", ptx.count("\n"))
