"""Differentiable simulation: recover pair-potential parameters from reference energies and forces.

Reference data come from the true potential on perturbed fcc configurations spread over
densities 0.5-1.0 (a single density leaves the energy and length scales nearly degenerate). From a
perturbed start, Adam (written out below; optax is not a dependency) minimizes the mean
squared error of energies per atom and of forces. The gradient with respect to the
parameters is ``jax.grad`` of that loss: on the adoffload backend it runs the energy
kernel's adjoint for the energy term, and differentiates through the adjoint for the force
term (forces are themselves ``-grad`` of the energy). The configurations are split over
every visible device of the platform (``--devices N`` to use fewer).

    python examples/chemistry/fit_potential.py                     # LJ, CPU, seconds
    python examples/chemistry/fit_potential.py --potential morse
"""
from __future__ import annotations

import argparse
import os
import time

from common import HelpFormatter, output_folder, pick_backend, save_plot, setup_jax

TRUE = {"lj": {"sigma": 1.0, "epsilon": 1.0}, "morse": {"depth": 1.0, "alpha": 1.7, "r0": 1.15}}
START = {"lj": {"sigma": 1.12, "epsilon": 0.7}, "morse": {"depth": 0.7, "alpha": 1.4, "r0": 1.25}}
PRESETS = {"cpu": (6, 4, 200), "cuda": (32, 6, 300)}     # (configurations, fcc cells per side, Adam steps)


def parse(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0], formatter_class=HelpFormatter)
    p.add_argument("--device", choices=["cpu", "cuda"], default="cpu", help="where JAX and the kernels run")
    p.add_argument("--backend", choices=["auto", "adoffload", "jax"], default="auto",
                   help="adoffload kernels, or the plain-JAX reference; auto: adoffload, unless it cannot "
                        "use the device (said on the console)")
    p.add_argument("--devices", type=int, help="how many devices of the platform share the configurations (default: all)")
    p.add_argument("--potential", choices=["lj", "morse"], default="lj", help="the pair potential to fit")
    # energy+forces differentiates the adjoint kernel again (reverse over reverse, a dynamic tape
    # the JAX handler sizes per call).
    p.add_argument("--loss", choices=["energy", "energy+forces"], default="energy",
                   help="fit energies only, or energies and forces (gradients of forces)")
    p.add_argument("--configs", type=int, help="reference configurations (default: by device)")
    p.add_argument("--cells", type=int, help="fcc unit cells per side (default: by device)")
    p.add_argument("--steps", type=int, help="Adam steps (default: by device)")
    p.add_argument("--lr", type=float, default=0.05, help="Adam learning rate (on log parameters)")
    p.add_argument("--seed", type=int, default=0, help="random seed")
    p.add_argument("--out", default="results/fit_potential", help="folder for the plot (created if missing)")
    return p.parse_args(argv)


def adam(lr, b1=0.9, b2=0.999, eps=1e-12):
    """Adam as (init, update) on pytrees."""
    import jax
    import jax.numpy as jnp

    def init(params):
        zeros = jax.tree.map(jnp.zeros_like, params)
        return (zeros, zeros, jnp.asarray(0))

    def update(grads, state, params):
        m, v, t = state
        t = t + 1
        m = jax.tree.map(lambda m, g: b1 * m + (1 - b1) * g, m, grads)
        v = jax.tree.map(lambda v, g: b2 * v + (1 - b2) * g * g, v, grads)
        step = lambda p, m, v: p - lr * (m / (1 - b1 ** t)) / (jnp.sqrt(v / (1 - b2 ** t)) + eps)
        return jax.tree.map(step, params, m, v), (m, v, t)

    return init, update


def main(argv=None):
    args = parse(argv)
    device = setup_jax(args.device)
    import jax
    import jax.numpy as jnp
    import numpy as np
    from adoffload.chemistry import ForceField, LennardJones, Morse, as_box, get_backend
    from adoffload.chemistry.dynamics import fcc_lattice
    from adoffload.chemistry.sharding import describe, over_walkers, padded_size, select_devices, walker_mesh

    backend = pick_backend(args.backend, args.device, second_order=args.loss == "energy+forces")
    n_configs, cells, steps = PRESETS[args.device]
    n_configs, cells, steps = args.configs or n_configs, args.cells or cells, args.steps or steps
    term = LennardJones(cutoff=2.5) if args.potential == "lj" else Morse(cutoff=2.5)
    truth = {term.name: TRUE[args.potential]}
    rng = np.random.default_rng(args.seed)
    # One force field per density (each its own box); each term of the loss is scaled by
    # the spread of its reference values, so energies and forces weigh alike.
    systems = []
    with jax.default_device(device):
        for density in np.linspace(0.5, 1.0, n_configs):
            lattice, edge = fcc_lattice(cells, density)
            ff = ForceField((term,), as_box(edge), backend=backend)
            spec = ff.neighbor_list(len(lattice), skin=0.0)
            pos = jnp.asarray(lattice + rng.normal(0.0, 0.04 / density ** (1 / 3), lattice.shape))
            nl = spec.build(pos)
            spec.check_overflow(nl)
            energy, forces = ff.energy_and_forces(pos, nl.neighbors, truth)
            systems.append((ff, pos, nl.neighbors, energy, forces))
        n_atoms = len(lattice)
        energy_scale = np.var([float(s[3]) / n_atoms for s in systems]) + 1e-12
        force_scale = float(np.mean([np.mean(np.asarray(s[4]) ** 2) for s in systems]))
        use_forces = args.loss == "energy+forces"

        functions = get_backend(backend, adjoint=False)          # jax.grad of the energy runs the adjoints

        def config_loss(params, pos, box, neighbors, ref_energy, ref_forces):
            energy, gradient = jax.value_and_grad(lambda x: term.energy(functions, x, box, neighbors, params[term.name]))(pos)
            value = ((energy - ref_energy) / n_atoms) ** 2 / energy_scale
            return value + jnp.mean((gradient + ref_forces) ** 2) / force_scale if use_forces else value

        # The configurations, stacked (boxes become data) and padded to a multiple of the devices
        # with zero-weight copies, are split over the devices; each evaluates its share.
        devices = select_devices(args.device, args.devices)
        mesh = walker_mesh(devices)
        batch, weights = _stack(systems, padded_size(len(systems), mesh))
        per_config = over_walkers(jax.vmap(config_loss, in_axes=(None, 0, 0, 0, 0, 0)), mesh, shared=(0,))

        def loss(log_params):
            params = {term.name: jax.tree.map(jnp.exp, log_params)}
            return jnp.sum(weights * per_config(params, *batch)) / len(systems)

        init, update = adam(args.lr)
        log_params = jax.tree.map(lambda v: jnp.log(jnp.asarray(v, jnp.float64)), START[args.potential])
        opt = init(log_params)

        @jax.jit
        def train_step(log_params, opt):
            value, grads = jax.value_and_grad(loss)(log_params)
            log_params, opt = update(grads, opt, log_params)
            return log_params, opt, value

        print(f"fit {args.potential} ({args.loss}) to {n_configs} configurations of {n_atoms} atoms, backend {backend}, "
              f"on {describe(devices)}; start {START[args.potential]}")
        began = time.perf_counter()
        history = []
        for s in range(steps):
            log_params, opt, value = train_step(log_params, opt)
            history.append(float(value))
            if s % max(1, steps // 8) == 0 or s == steps - 1:
                now = {k: round(float(jnp.exp(v)), 6) for k, v in log_params.items()}
                print(f"step {s:4d}  loss {history[-1]:.3e}  {now}")
        seconds = time.perf_counter() - began

    fitted = {k: float(jnp.exp(v)) for k, v in log_params.items()}
    errors = {k: abs(fitted[k] - TRUE[args.potential][k]) / TRUE[args.potential][k] for k in fitted}
    print(f"true    {TRUE[args.potential]}")
    print(f"fitted  { {k: round(v, 6) for k, v in fitted.items()} }")
    print(f"largest relative error {max(errors.values()):.2e}; {steps} Adam steps in {seconds:.1f} s")
    out = output_folder(args.out)
    path = save_plot(os.path.join(out, f"fit_{args.potential}_loss.png"), lambda fig: _draw(fig, history))
    if path:
        print(f"plot: {path}")
    print(f"output folder: {out}")
    return {"fitted": fitted, "true": TRUE[args.potential], "relative_errors": errors, "history": history}


def _stack(systems, size):
    """(positions, boxes, neighbor lists padded with -1, energies, forces) stacked over the
    configurations, repeated up to ``size``, and the weights (1 real, 0 padding)."""
    import numpy as np
    padded = [systems[i % len(systems)] for i in range(size)]
    capacity = max(s[2].shape[1] for s in systems)
    neighbors = [np.pad(np.asarray(s[2]), ((0, 0), (0, capacity - s[2].shape[1])), constant_values=-1) for s in padded]
    batch = (np.stack([np.asarray(s[1]) for s in padded]), np.stack([np.asarray(s[0].box) for s in padded]),
             np.stack(neighbors), np.stack([np.asarray(s[3]) for s in padded]), np.stack([np.asarray(s[4]) for s in padded]))
    return batch, (np.arange(size) < len(systems)).astype(np.float64)


def _draw(fig, history):
    ax = fig.add_subplot(1, 1, 1)
    ax.semilogy(history)
    ax.set_xlabel("Adam step")
    ax.set_ylabel("loss")
    ax.set_title("parameter fit")


if __name__ == "__main__":
    main()
