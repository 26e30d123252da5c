"""Chemistry benchmark: LJ energy + forces, neighbor-list build and an MD step, adoffload vs plain JAX.

    python benchmarks/chemistry.py --out benchmarks/results/chemistry [--device cpu|cuda] [--quick]

Both sides compute the same physics (adoffload/chemistry: kernels vs reference.py) on the
same fcc-lattice LJ liquid (density 0.8, cutoff 2.5, skin 0.3), each inside ``jax.jit``,
timed with ``block_until_ready`` after warm-up. jax-md is not a baseline: it cannot be
installed on the (offline) GPU machine. A side that cannot run here is reported as skipped
with its reason; no number is ever filled in. Also callable from ``benchmarks/run.py`` as
``run(rows, device=..., quick=...)``.
"""
from __future__ import annotations

import argparse
import csv
import datetime
import platform
import statistics
import sys
import time
from pathlib import Path

SIZES = {"cpu": (4_000, 10_976), "cuda": (10_976, 108_000, 1_048_576)}     # 4 n^3 (n = 10, 14, 30, 64)
QUICK_SIZES = {"cpu": (4_000,), "cuda": (108_000,)}


def _time(fn, reps, warmup=2):
    for _ in range(warmup):
        fn()
    samples = []
    for _ in range(reps):
        began = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - began) * 1e3)
    return statistics.median(samples), max(samples) - min(samples), len(samples)


def _cells_for(n_atoms):
    return round((n_atoms / 4) ** (1 / 3))


def measure(n_atoms, backend, device, reps, only=None):
    """Rows for one size and backend: LJ energy+forces, neighbor build, one Verlet step, and the
    gradient of a force-matching loss in the LJ parameters (a second derivative)."""
    import jax
    import jax.numpy as jnp
    from adoffload.chemistry import ForceField, LennardJones, as_box
    from adoffload.chemistry.dynamics import fcc_lattice, initial_state, maxwell_boltzmann, verlet_step

    pos, edge = fcc_lattice(_cells_for(n_atoms), 0.8)
    pos = pos + 0.05 * jax.random.normal(jax.random.PRNGKey(0), pos.shape, dtype=jnp.float64)
    n = len(pos)
    ff = ForceField((LennardJones(cutoff=2.5),), as_box(edge), backend=backend)
    spec = ff.neighbor_list(n, skin=0.3)
    with jax.default_device(device):
        pos = jnp.asarray(pos)
        build = jax.jit(spec.build)
        nl = build(pos)
        spec.check_overflow(nl)
        if only is not None:
            return [_row("neighbor-list build", n, backend, _time(lambda: jax.block_until_ready(build(pos)), reps))]
        energy_forces = jax.jit(ff.energy_and_forces)
        key_v, key = jax.random.split(jax.random.PRNGKey(1))
        state = initial_state(ff, spec, pos, maxwell_boltzmann(key_v, n, 1.0), key)
        step = jax.jit(lambda s: verlet_step(ff, spec, s, 0.004))
        target = jnp.zeros_like(pos)

        def force_loss(params):        # force matching: the gradient is reverse over reverse
            return jnp.mean((ff.forces(pos, nl.neighbors, params) - target) ** 2)
        force_loss_gradient = jax.jit(jax.grad(force_loss))
        cases = {
            "LJ energy + forces": lambda: jax.block_until_ready(energy_forces(pos, nl.neighbors)),
            "neighbor-list build": lambda: jax.block_until_ready(build(pos)),
            "MD step (Verlet, list kept)": lambda: jax.block_until_ready(step(state)),
            "force-matching loss gradient (LJ parameters)":
                lambda: jax.block_until_ready(force_loss_gradient(ff.parameters)),
        }
        rows = []
        for name, fn in cases.items():
            if only is not None and name not in only:
                continue
            try:
                rows.append(_row(name, n, backend, _time(fn, reps)))
            except Exception as error:        # noqa: BLE001 - one case failing is reported, never invented
                rows.append({"measure": name, "atoms": n, "backend": backend,
                             "skipped": f"{type(error).__name__}: {str(error)[:300]}"})
    return rows


def _row(name, n, backend, timing):
    median, spread, count = timing
    return {"measure": name, "atoms": n, "backend": backend, "median_ms": round(median, 4),
            "spread_ms": round(spread, 4), "reps": count,
            "atom_steps_per_s": round(n / (median * 1e-3)) if "step" in name else ""}


def run(rows, device="cpu", quick=False, reps=None):
    """Append result rows (dicts) for every size and backend; skipped sides get a reason row."""
    import jax
    jax.config.update("jax_enable_x64", True)
    from adoffload.chemistry import available
    platform_name = {"cpu": "cpu", "cuda": "gpu"}[device]
    try:
        jax_device = jax.devices(platform_name)[0]
    except RuntimeError as error:
        rows.append({"measure": "all", "skipped": f"JAX has no {platform_name} device here: {error}"})
        return rows
    reps = reps or (5 if quick else 20)
    for n in (QUICK_SIZES if quick else SIZES)[device]:
        for backend in ("adoffload", "jax"):
            ok, why = available(backend)
            only = None
            if not ok:
                rows.append({"measure": "forces and MD step", "atoms": n, "backend": backend, "skipped": why})
                if not available(backend, adjoint=False)[0]:
                    continue
                only = ("neighbor-list build",)          # primal kernels only
            try:
                rows.extend(measure(n, backend, jax_device, reps, only))
            except Exception as error:        # noqa: BLE001 - report, never invent
                rows.append({"measure": "all", "atoms": n, "backend": backend,
                             "skipped": f"{type(error).__name__}: {str(error)[:300]}"})
    rows.append({"measure": "note", "skipped": "jax-md baseline not run: jax-md is not installable on the offline "
                                               "GPU machine; the plain-JAX side is adoffload/chemistry/reference.py"})
    return rows


def environment(device):
    import jax
    import llvmlite
    import numpy as np
    env = {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
           "python": platform.python_version(), "jax": jax.__version__, "llvmlite": llvmlite.__version__,
           "numpy": np.__version__, "requested device": device}
    try:
        env["jax device"] = str(jax.devices({"cpu": "cpu", "cuda": "gpu"}[device])[0].device_kind)
    except RuntimeError:
        env["jax device"] = "none"
    return env


def write(out: Path, env, rows):
    out.mkdir(parents=True, exist_ok=True)
    keys = ["measure", "atoms", "backend", "median_ms", "spread_ms", "reps", "atom_steps_per_s", "skipped"]
    with open(out / "chemistry.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=keys)
        writer.writeheader()
        for row in rows:
            writer.writerow({k: row.get(k, "") for k in keys})
    lines = ["# Chemistry benchmark: adoffload kernels vs the same physics in plain JAX", ""]
    lines += [f"- {k}: {v}" for k, v in env.items()]
    lines += ["- system: fcc-lattice LJ liquid, density 0.8, cutoff 2.5, skin 0.3, float64; "
              "times are medians, spread = max - min over the repetitions", "",
              "| measure | atoms | backend | median ms | spread ms | reps | atom-steps/s |", "|---|---|---|---|---|---|---|"]
    for row in rows:
        if "skipped" in row:
            continue
        lines.append(f"| {row['measure']} | {row['atoms']} | {row['backend']} | {row['median_ms']} | "
                     f"{row['spread_ms']} | {row['reps']} | {row['atom_steps_per_s']} |")
    ratios = _ratios(rows)
    if ratios:
        lines += ["", "| measure | atoms | adoffload / jax time |", "|---|---|---|"]
        lines += [f"| {m} | {n} | {r:.3f} |" for (m, n), r in ratios.items()]
    skipped = [r for r in rows if "skipped" in r]
    if skipped:
        lines += ["", "## Not measured", ""]
        lines += [f"- {r.get('backend', '')} {r.get('atoms', '')}: {r['skipped']}".replace("  ", " ") for r in skipped]
    (out / "chemistry.md").write_text("\n".join(lines) + "\n")


def _ratios(rows):
    times = {(r["measure"], r["atoms"], r["backend"]): r["median_ms"] for r in rows if "median_ms" in r}
    return {(m, n): t / times[(m, n, "jax")] for (m, n, b), t in times.items()
            if b == "adoffload" and (m, n, "jax") in times}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(Path(__file__).parent / "results" / "chemistry"))
    parser.add_argument("--device", choices=["cpu", "cuda", "auto"], default="auto")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--reps", type=int)
    args = parser.parse_args(argv)
    import jax
    device = args.device
    if device == "auto":
        try:
            device = "cuda" if jax.devices("gpu") else "cpu"
        except RuntimeError:
            device = "cpu"
            print("no GPU found by JAX: running the CPU comparison at small sizes")
    rows = run([], device=device, quick=args.quick, reps=args.reps)
    write(Path(args.out), environment(device), rows)
    for row in rows:
        print(row)
    print(f"wrote {args.out}/chemistry.md and chemistry.csv")
    return 0


if __name__ == "__main__":
    sys.exit(main())
