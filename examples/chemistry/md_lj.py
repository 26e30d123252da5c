"""Molecular dynamics of a Lennard-Jones liquid (argon-like reduced units, density 0.8, T 1.0).

NVE (velocity Verlet) then Langevin (BAOAB), forces = -grad of the LJ energy kernel over a
cell-list Verlet neighbor list (on the adoffload backend: the energy kernel's adjoint).
Writes an energy-drift plot and the radial distribution function, and prints throughput
in atom-steps per second (timed after the first, compiling, chunk).

    python examples/chemistry/md_lj.py                    # 10,976 atoms, CPU, < 1 minute
    python examples/chemistry/md_lj.py --device cuda      # 108,000 atoms
"""
from __future__ import annotations

import argparse
import os
import time

from common import HelpFormatter, output_folder, pick_backend, progress, save_plot, setup_jax

# Size presets by device: (fcc cells per side -> 4 n^3 atoms, NVE steps, Langevin steps).
PRESETS = {"cpu": (14, 60, 40), "cuda": (30, 2000, 1000)}


def parse(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0], formatter_class=HelpFormatter)
    p.add_argument("--device", choices=["cpu", "cuda"], default="cpu", help="where JAX and the kernels run")
    p.add_argument("--backend", choices=["auto", "adoffload", "jax"], default="auto",
                   help="adoffload kernels, or the plain-JAX reference; auto: adoffload, unless it cannot "
                        "use the device (said on the console)")
    p.add_argument("--cells", type=int, help="fcc unit cells per side, atoms = 4 cells^3 (default: by device)")
    p.add_argument("--nve-steps", type=int, help="velocity-Verlet steps (default: by device)")
    p.add_argument("--langevin-steps", type=int, help="Langevin steps before NVE (default: by device)")
    p.add_argument("--dt", type=float, default=0.004, help="time step (reduced units)")
    p.add_argument("--density", type=float, default=0.8, help="number density (reduced units)")
    p.add_argument("--kT", type=float, default=1.0, help="temperature (reduced units)")
    p.add_argument("--gamma", type=float, default=1.0, help="Langevin friction")
    p.add_argument("--cutoff", type=float, default=2.5, help="LJ cutoff (sigma)")
    p.add_argument("--skin", type=float, default=0.3, help="neighbor-list skin (sigma)")
    p.add_argument("--chunk", type=int, default=10, help="steps per jitted call (energies recorded per chunk)")
    p.add_argument("--seed", type=int, default=0, help="random seed")
    p.add_argument("--out", default="results/md_lj", help="folder for the plots (created if missing)")
    return p.parse_args(argv)


def main(argv=None):
    args = parse(argv)
    device = setup_jax(args.device)
    import jax
    import numpy as np
    from adoffload.chemistry import ForceField, LennardJones, as_box
    from adoffload.chemistry.dynamics import fcc_lattice, initial_state, maxwell_boltzmann, radial_distribution, run

    backend = pick_backend(args.backend, args.device)
    cells, nve_steps, langevin_steps = PRESETS[args.device]
    cells = args.cells or cells
    nve_steps = args.nve_steps if args.nve_steps is not None else nve_steps
    langevin_steps = args.langevin_steps if args.langevin_steps is not None else langevin_steps
    pos, edge = fcc_lattice(cells, args.density)
    n = len(pos)
    ff = ForceField((LennardJones(cutoff=args.cutoff),), as_box(edge), backend=backend)
    spec = ff.neighbor_list(n, skin=args.skin)
    print(f"LJ liquid: {n} atoms, box {edge:.3f}, density {args.density}, kT {args.kT}, dt {args.dt}, "
          f"cutoff {args.cutoff} + skin {args.skin}, neighbor capacity {spec.capacity}, "
          f"cells {spec.cells_per_side}, backend {backend}, device {device}")

    results = {}
    with jax.default_device(device):
        key_v, key_run = jax.random.split(jax.random.PRNGKey(args.seed))
        # Start from the lattice at 2 kT (about half the kinetic energy flows into potential
        # energy as it melts), and thermalize with Langevin before the NVE run.
        state = initial_state(ff, spec, pos, maxwell_boltzmann(key_v, n, 2.0 * args.kT), key_run)
        stages = [("langevin", langevin_steps), ("nve", nve_steps)]
        for ensemble, steps in stages:
            if steps <= 0:
                continue
            began = time.perf_counter()
            state, record, timed, timed_steps = run(ff, spec, state, steps, args.dt, ensemble=ensemble, kT=args.kT,
                                                    gamma=args.gamma, chunk=args.chunk,
                                                    progress=progress(f"{ensemble:8s}"))
            wall = time.perf_counter() - began
            rate = n * timed_steps / timed if timed_steps else float("nan")
            results[ensemble] = dict(record=record, wall=wall, rate=rate)
            line = f"{ensemble}: {steps} steps in {wall:.1f} s (incl. compile); {rate:.3g} atom-steps/s"
            if ensemble == "nve":
                total = record["total"]
                drift = (total[-1] - total[0]) / n
                spread = (total.max() - total.min()) / n
                results["nve"].update(drift_per_atom=drift, spread_per_atom=spread)
                line += f"; energy drift {drift:+.2e} per atom (max-min {spread:.2e}), T {record['temperature'][-1]:.3f}"
            else:
                line += f"; T {record['temperature'][-1]:.3f}"
            print(line)
        print(f"neighbor-list builds: {int(state.nl.builds)}, largest count {int(state.nl.peak)} / {spec.capacity}")
        r, g = radial_distribution(state.pos, spec.box, state.nl.neighbors, r_max=args.cutoff)
    peak = r[np.argmax(g)]
    print(f"g(r) first peak at r = {peak:.3f}, height {g.max():.2f}")
    results["rdf"] = (r, g)

    out = output_folder(args.out)
    if "nve" in results:
        rec = results["nve"]["record"]
        path = save_plot(os.path.join(out, "energy_drift.png"), lambda fig: _draw_energy(fig, rec, n), size=(6, 6))
        if path:
            print(f"plot: {path}")
    path = save_plot(os.path.join(out, "rdf.png"), lambda fig: _draw_rdf(fig, r, g))
    if path:
        print(f"plot: {path}")
    print(f"output folder: {out}")
    return results


def _draw_energy(fig, record, n):
    """Top: the total energy's drift on its own scale (beside the potential/kinetic exchange,
    a hundred times larger, it was a flat line). Bottom: that exchange."""
    drift_axis, exchange_axis = fig.subplots(2, 1, sharex=True)
    total = record["total"] / n
    drift_axis.plot(record["step"], total - total[0], marker=".", color="C0")
    drift_axis.set_ylabel("total - initial\n(per atom)")
    drift_axis.set_title("velocity Verlet: energy conservation")
    for name, color in (("potential", "C1"), ("kinetic", "C2")):
        values = record[name] / n
        exchange_axis.plot(record["step"], values - values[0], label=f"{name} - initial", color=color)
    exchange_axis.set_xlabel("NVE step")
    exchange_axis.set_ylabel("energy per atom")
    exchange_axis.legend()


def _draw_rdf(fig, r, g):
    ax = fig.add_subplot(1, 1, 1)
    ax.plot(r, g)
    ax.axhline(1.0, color="k", linewidth=0.5)
    ax.set_xlabel("r (sigma)")
    ax.set_ylabel("g(r)")
    ax.set_title("radial distribution function")


if __name__ == "__main__":
    main()
