"""Dump PTX of the user kernels' primal and lean vjp (as the JAX GPU path compiles them) and count per-loop instructions."""
import re, sys, os
import adoffload as ado
from adoffload.jax.targets import gpu_options
from adoffload.jax.targets import Variant
from benchmarks.kernels.user import ENERGIES

out = sys.argv[1] if len(sys.argv) > 1 else "tmp_probe/ptx"
os.makedirs(out, exist_ok=True)
names = sys.argv[2:] or ["lj", "morse"]
for name in names:
    k = ENERGIES[name][0]
    # primal and lean vjp as ado.jax_kernel's GPU call builds them (jax/targets.gpu_options: no noalias
    # for the vjp, whose d_pos is InOut); the full vjp as the CuPy launcher builds it (noalias: no overlap)
    for label, kern, launcher in (("primal", k, False), ("vjp", ado.vjp(k, ["pos"], primal_outputs=False), False),
                                  ("vjp_full", ado.vjp(k, ["pos"]), True)):
        proven = kern.candidate_facts
        if launcher:
            c = kern.compiled("nvptx", arch="sm_90", proven=proven, noalias=True)
        else:
            opts = gpu_options(kern, Variant(frozenset(), proven))
            c = kern.compiled("nvptx", arch="sm_90", scalars_by_reference=True, **opts)
        path = f"{out}/{name}_{label}.ptx"
        open(path, "w").write(c.ptx)
        open(f"{out}/{name}_{label}.ll", "w").write(kern.module_text(proven & kern.candidate_facts))
        print(path, len(c.ptx.splitlines()))
