"""Batch global optimization of Lennard-Jones clusters: basin hopping over many clusters at once.

Every cluster is an independent basin-hopping walker; one step perturbs all atoms,
minimizes with FIRE (forces = -grad of the LJ energy kernel, i.e. its adjoint kernel on
the adoffload backend) and accepts by Metropolis. ``jax.vmap`` runs all walkers together,
split over every visible device of the platform (``--devices N`` to use fewer; under
``jax.distributed``, over the devices of every host: docs/scaling.md).
Prints the lowest energy reached beside the published putative global minimum
(Cambridge Cluster Database: LJ13 -44.326801, LJ38 -173.928427, reduced units).

    python examples/chemistry/lj_clusters.py                          # LJ13, CPU, < 1 minute
    python examples/chemistry/lj_clusters.py --device cuda --atoms 38  # full size
"""
from __future__ import annotations

import argparse
import os
import time

from common import HelpFormatter, output_folder, pick_backend, progress, save_plot, setup_jax

PUBLISHED_MINIMA = {13: -44.326801, 38: -173.928427}
# Size presets: (clusters, basin-hopping steps, FIRE iterations per minimization).
PRESETS = {("cpu", 13): (256, 25, 300), ("cpu", 38): (64, 200, 600),
           ("cuda", 13): (4096, 50, 400), ("cuda", 38): (8192, 400, 800)}


def parse(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0], formatter_class=HelpFormatter)
    p.add_argument("--device", choices=["cpu", "cuda"], default="cpu", help="where JAX and the kernels run")
    p.add_argument("--backend", choices=["auto", "adoffload", "jax"], default="auto",
                   help="adoffload kernels, or the plain-JAX reference; auto: adoffload, unless it cannot "
                        "use the device (said on the console)")
    p.add_argument("--devices", type=int, help="how many devices of the platform share the walkers (default: all)")
    p.add_argument("--atoms", type=int, default=13, help="atoms per cluster (13 and 38 have published minima)")
    p.add_argument("--clusters", type=int, help="walkers run at once (default: by device and size)")
    p.add_argument("--steps", type=int, help="basin-hopping steps (default: by device and size)")
    p.add_argument("--fire-steps", type=int, help="FIRE iterations per local minimization (default: by device and size)")
    p.add_argument("--step-size", type=float, default=0.4, help="largest random displacement per coordinate")
    p.add_argument("--kT", type=float, default=0.8, help="Metropolis temperature (reduced units)")
    p.add_argument("--seed", type=int, default=0, help="random seed")
    p.add_argument("--out", default="results/lj_clusters", help="folder for the plot (created if missing)")
    return p.parse_args(argv)


def main(argv=None):
    args = parse(argv)
    from adoffload.chemistry.sharding import start_distributed
    start_distributed()                  # a no-op unless JAX_COORDINATOR_ADDRESS is set (docs/scaling.md)
    device = setup_jax(args.device)
    import jax
    import jax.numpy as jnp
    import numpy as np
    from adoffload.chemistry import get_backend
    from adoffload.chemistry.optimize import FireOptions, Walker, basin_hopping_step, fire_minimize, random_cluster
    from adoffload.chemistry.sharding import describe, over_walkers, padded_size, select_devices, split_keys, to_host, walker_mesh

    backend_name = pick_backend(args.backend, args.device)
    backend = get_backend(backend_name)
    clusters, steps, fire_steps = PRESETS.get((args.device, args.atoms), PRESETS[(args.device, 38)])
    clusters, steps = args.clusters or clusters, args.steps or steps
    devices = select_devices(args.device, args.devices)
    mesh = walker_mesh(devices)
    if padded_size(clusters, mesh) != clusters:
        print(f"note: {clusters} clusters rounded up to {padded_size(clusters, mesh)}, a multiple of {len(devices)} devices")
        clusters = padded_size(clusters, mesh)
    fire = FireOptions(steps=args.fire_steps or fire_steps)
    n = args.atoms
    container = 0.6 + (3.0 * n / (4.0 * np.pi)) ** (1.0 / 3.0)

    def energy(x):
        return jnp.sum(backend.cluster_lj_energy(x, 1.0, 1.0))

    def start(keys):
        x = jax.vmap(lambda k: random_cluster(k, n))(keys)
        x, e, _ = jax.vmap(lambda xi: fire_minimize(energy, xi, fire))(x)
        e = jnp.where(jnp.isfinite(e), e, jnp.inf)
        return Walker(x, e, x, e)

    def hop(walkers, keys):
        return jax.vmap(lambda w, k: basin_hopping_step(energy, w, k, step_size=args.step_size, kT=args.kT,
                                                        container=container, fire=fire))(walkers, keys)

    print(f"LJ{n}: {clusters} clusters x {steps} basin-hopping steps, FIRE {fire.steps} iterations, "
          f"backend {backend_name}, on {describe(devices)}")
    start, hop = over_walkers(start, mesh), over_walkers(hop, mesh)
    began = time.perf_counter()
    key = jax.random.PRNGKey(args.seed)
    with jax.default_device(device):
        key, sub = jax.random.split(key)
        walkers = start(split_keys(sub, clusters, mesh))
        best_history = [float(jnp.min(walkers.best_energy))]
        bar = progress("basin hopping")
        for s in range(steps):
            key, sub = jax.random.split(key)
            walkers = hop(walkers, split_keys(sub, clusters, mesh))
            best_history.append(float(jnp.min(walkers.best_energy)))
            bar(s + 1, steps)
    seconds = time.perf_counter() - began

    best = best_history[-1]
    found = to_host(walkers.best_energy)
    published = PUBLISHED_MINIMA.get(n)
    print(f"\nlowest energy reached  {best:.6f}")
    if published is not None:
        hits = int(np.sum(found < published + REACHED))
        print(f"published global min.  {published:.6f}   (Cambridge Cluster Database)")
        print(f"difference             {best - published:+.2e}; walkers at the global minimum: {hits}/{clusters}")
    print(f"time {seconds:.1f} s ({clusters * steps * fire.steps / seconds:.3g} cluster-FIRE-iterations/s)")

    out = output_folder(args.out)
    plot = save_plot(os.path.join(out, f"lj{n}_best_energy.png"),
                     lambda fig: _draw(fig, best_history, published, n, found), size=(6, 6))
    if plot:
        print(f"plot: {plot}")
    print(f"output folder: {out}")
    return {"best": best, "published": published, "history": best_history, "seconds": seconds,
            "walkers_at_minimum": int(np.sum(found < (published or -np.inf) + 1e-4))}


def _draw(fig, history, published, n, found):
    """Top: the best energy per step; with a published minimum, its distance above it on a log
    scale (drawn beside the reference line, the trace hid under it). Bottom: where every
    walker's best energy ended."""
    import numpy as np
    trace_axis, walkers_axis = fig.subplots(2, 1)
    steps = np.arange(len(history))
    found = np.asarray(found)
    found = found[np.isfinite(found)]
    if published is None:
        trace_axis.plot(steps, history, marker=".", label="best energy over all walkers")
        trace_axis.set_ylabel("energy (reduced units)")
        walkers_axis.hist(found, bins=30)
        walkers_axis.set_xlabel("each walker's best energy")
    else:
        gap = np.maximum(np.asarray(history) - published, MIN_GAP)
        trace_axis.semilogy(steps, gap, marker=".", label=f"best over all walkers - published ({published})")
        trace_axis.axhline(REACHED, color="k", linestyle="--", linewidth=0.8, label=f"{REACHED:g}: minimum reached")
        trace_axis.set_ylabel("energy above the\npublished minimum")
        walker_gaps = np.maximum(found - published, MIN_GAP)
        walkers_axis.hist(walker_gaps, bins=np.logspace(np.log10(MIN_GAP), np.log10(walker_gaps.max() * 1.01 + MIN_GAP), 30))
        walkers_axis.set_xscale("log")
        walkers_axis.axvline(REACHED, color="k", linestyle="--", linewidth=0.8)
        walkers_axis.set_xlabel(f"each walker's best energy above the minimum (floor {MIN_GAP:g})")
    walkers_axis.set_ylabel("walkers")
    trace_axis.set_xlabel("basin-hopping step")
    trace_axis.set_title(f"LJ{n} basin hopping, {len(found)} walkers")
    trace_axis.legend()


MIN_GAP, REACHED = 1e-7, 1e-4      # plot floor (below the energies' precision); "at the minimum"


if __name__ == "__main__":
    main()
