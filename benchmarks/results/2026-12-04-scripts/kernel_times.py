"""Times of the user kernels' pieces through ado's launcher (numpy on the host, CuPy on CUDA): the primal
energy kernel, the lean vjp (what jax.value_and_grad's transpose launches; here with launch noalias, since
the launcher checks overlap) and the full vjp. Medians of REPS calls of BATCH launches each.
usage: python tmp_probe/kernel_times.py cuda|cpu N [potential ...] > out.jsonl"""
import json, sys, time
import numpy as np
import adoffload as ado
from benchmarks.kernels.user import ENERGIES
from benchmarks.suites.user_kernels import System, PAIR_LIST

device, n = sys.argv[1], int(sys.argv[2])
names = sys.argv[3:] or ["lj", "morse"]
REPS, BATCH = 10, 10
if device == "cuda":
    import cupy as xp
    sync = lambda: xp.cuda.Device().synchronize()      # noqa: E731
else:
    xp, sync = np, (lambda: None)
import jax
jax.config.update("jax_enable_x64", True)
system = System(n, jax.devices("gpu" if device == "cuda" else "cpu")[0])
nbr_np = system.neighbors(PAIR_LIST["radius"], PAIR_LIST["slots"])
for name in names:
    kernel, params = ENERGIES[name]
    pos, nbr = xp.asarray(system.pos), xp.asarray(nbr_np)
    energy, d_pos, seed = xp.zeros(system.n), xp.zeros(system.pos.shape), xp.ones(system.n)
    scalars = [system.box, *params.values()]
    full, lean = ado.vjp(kernel, ["pos"]), ado.vjp(kernel, ["pos"], primal_outputs=False)
    calls = {
        "primal": lambda: kernel(pos, nbr, *scalars, energy, grid=system.n, device=device),
        "lean vjp": lambda: lean(pos, nbr, *scalars, energy, d_pos, seed, grid=system.n, device=device),
        "full vjp": lambda: full(pos, nbr, *scalars, energy, d_pos, seed.copy(), grid=system.n, device=device),
    }
    for label, call in calls.items():
        call(); sync()
        times = []
        for _ in range(REPS):
            t = time.perf_counter()
            for _ in range(BATCH):
                call()
            sync()
            times.append((time.perf_counter() - t) / BATCH * 1e3)
        print(json.dumps({"potential": name, "atoms": system.n, "piece": label, "device": device,
                          "median_ms": float(np.median(times)), "min_ms": float(np.min(times))}), flush=True)
    # the lean gradient against the full one (same engine, other build)
    d_pos.fill(0.0); lean(pos, nbr, *scalars, energy, d_pos, xp.ones(system.n), grid=system.n, device=device)
    g1 = np.asarray(d_pos.get() if device == "cuda" else d_pos).copy()
    d_pos.fill(0.0); full(pos, nbr, *scalars, energy, d_pos, xp.ones(system.n), grid=system.n, device=device)
    g2 = np.asarray(d_pos.get() if device == "cuda" else d_pos)
    print(json.dumps({"potential": name, "lean_vs_full_max_rel": float(np.max(np.abs(g1 - g2)) / np.max(np.abs(g2)))}), flush=True)
