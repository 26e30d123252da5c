"""Probe (session 7): where the host time of a small energy + forces call goes (10,976 atoms)."""
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).parents[1]))
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
jax.config.update("jax_enable_x64", True)
import chemistry as C  # noqa: E402
from harness import time_jax  # noqa: E402


def enqueue_us(fn, *args, calls=200):
    """Host time per call while the device keeps up (no wait inside the loop)."""
    jax.block_until_ready(fn(*args))
    t0 = time.perf_counter()
    for _ in range(calls):
        r = fn(*args)
    t1 = time.perf_counter()
    jax.block_until_ready(r)
    return (t1 - t0) / calls * 1e6


S = C.System(int(sys.argv[1]) if len(sys.argv) > 1 else 10976, jax.devices("gpu")[0])
ff = S.forcefield("adoffload")
pos, nb = S.pos, S.nl.neighbors
params = jax.device_put(ff.parameters, S.device)
variants = {
    "ef(pos, nb)": (jax.jit(ff.energy_and_forces), (pos, nb)),
    "ef(pos, nb, params)": (jax.jit(ff.energy_and_forces), (pos, nb, params)),
    "forces only": (jax.jit(lambda p, n: ff.energy_and_forces(p, n)[1]), (pos, nb)),
    "energy only (sum)": (jax.jit(lambda p, n: ff.energy_and_forces(p, n)[0]), (pos, nb)),
    "sum of forces^2": (jax.jit(lambda p, n: jnp.sum(ff.energy_and_forces(p, n)[1] ** 2)), (pos, nb)),
    "fit grad": (jax.jit(jax.grad(C.force_loss(ff, pos, nb))), (params,)),
    "plain jnp (pos*2, sum)": (jax.jit(lambda p, n: (jnp.sum(p), p * 2.0)), (pos, nb)),
}
for name, (fn, args) in variants.items():
    t = time_jax(fn, *args)
    print(f"{name:28s} wall {t.median_ms * 1e3:7.1f} us/call   host enqueue {enqueue_us(fn, *args):7.1f} us/call", flush=True)
