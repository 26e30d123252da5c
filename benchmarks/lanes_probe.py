"""Probe (session 7): LJ energy + forces and the force-matching gradient with G lanes per atom at each
size, against the one-thread kernel (results: benchmarks/results/2026-12-01-h200-session7/probe).

    PYTHONPATH=. python benchmarks/lanes_probe.py [ATOMS ...]
"""
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).parents[1]))
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
jax.config.update("jax_enable_x64", True)
import adoffload as ado
from adoffload.chemistry import kernels as K
import lanes_probe_kernels as L
import chemistry as C
from harness import time_jax

dev = jax.devices("gpu")[0] if jax.default_backend() == "gpu" else jax.devices("cpu")[0]
sizes = [int(s) for s in sys.argv[1:]] or [10976, 108000, 1048576]
for n_req in sizes:
    S = C.System(n_req, dev)
    pos, nb, n = S.pos, S.nl.neighbors, S.n
    box = jax.device_put(jnp.full(3, S.edge), dev)
    variants = [("one thread/atom", K.lj_energy_forces, 1, n)]
    for G, B in ((2, 128), (4, 128), (8, 128), (8, 256), (16, 128), (32, 128)):
        variants.append((f"G={G} block={B}", L.make(G, B), G, -(-n * G // B) * B))
    for name, kern, G, grid in variants:
        try:
            f = ado.jax_kernel(kern, grid=grid, out_shapes={"e": (n,), "forces": (n, 3)})
            ef = jax.jit(lambda p, f=f: f(p, box, nb, 1.0, 1.0, 2.5))
            def loss(th, f=f):
                r = f(pos, box, nb, th[0], th[1], 2.5)
                return jnp.mean(r[1] ** 2)
            g = jax.jit(jax.grad(loss))
            th = jnp.array([1.0, 1.0])
            r = ef(pos); diff = float(jnp.max(jnp.abs(r[1] - S.reference_forces)))
            t_ef = time_jax(ef, pos); t_g = time_jax(g, th)
            print(json.dumps({"atoms": n, "variant": name, "ef_ms": round(t_ef.median_ms, 4), "fit_ms": round(t_g.median_ms, 4),
                              "ef_min": round(t_ef.min_ms, 4), "fit_min": round(t_g.min_ms, 4), "force_diff": diff,
                              "grad": [float(x) for x in g(th)]}), flush=True)
        except Exception as err:
            print(json.dumps({"atoms": n, "variant": name, "error": f"{type(err).__name__}: {str(err)[:300]}"}), flush=True)
    del S
