"""The library's chemistry: LJ energy + forces, neighbor lists, an MD step, force matching; vs plain JAX, jax-md, CUDA.

adoffload's ForceField against the same physics in plain JAX, in jax-md and in hand-written CUDA.

    python -m benchmarks chemistry --out DIR [--device cpu|cuda] [--quick] [--sides ...] [--measures ...]
        [--max-atoms 'jax-md Dense=108000' ...] [--isolate SECONDS [--budget SECONDS]]

Every side computes the truncated-and-shifted LJ (sigma = epsilon = 1, cutoff 2.5, skin 0.3,
float64) on the same fcc-lattice liquid (density 0.8, positions jittered):

* ``adoffload``: ``ForceField.energy_and_forces`` under ``jax.jit`` (the fused kernel: a gather
  over the full list, pair force from ``ado.value_and_grad`` of the pair potential, one launch),
  and for comparison ``jax.value_and_grad`` of the energy (energy kernel, then its adjoint);
* ``jax``: the same ``ForceField`` with the plain-JAX reference (``chemistry/reference.py``);
* ``jax-md <format>``: jax-md's pair machinery and neighbor lists (``jaxmd_lj.py``), when installed;
* ``cuda``: ``cuda/lj.cu``, one thread per atom over our neighbor list (the ceiling; per-atom
  energies and forces, no total), on the GPU when nvcc is found.

One timer for all (``timing.time_calls``: same warm-up, repetitions and batch, host wall clock
after the device is done); each size is reported on its own, with median, IQR, min and max; a
side that fails is an error row; device memory is released between sides. Each side's forces
are compared with the plain-JAX reference's (``max_force_diff``), and the force-matching
gradient with the reference's (``grad_rel_diff``).

A side need not run every size: ``--max-atoms SIDE=N`` skips it above N atoms (a row says so),
and ``--isolate SECONDS`` runs each (size, side) in a child process with that time limit, so a
side that exhausts device memory or runs past its limit is an error row with the reason and the
rest are still measured (the child streams its rows as it goes: rows measured before a timeout
are kept); ``--budget SECONDS`` bounds the whole isolated run the same way (no child outlives
it). The report files are rewritten after every side, so a run cut short by an outer
time limit still leaves every size measured so far. The library's fused kernel is a recognised,
hand-tuned path; the user_kernels suite times kernels written the way a user writes them.
"""
from __future__ import annotations

import gc
import json
import re
import sys
from pathlib import Path

from ..results import BenchmarkError
from ..timing import BATCH, REPS, time_jax

DEVICES = ("cpu", "cuda")
SIZE_KEY = "atoms"

SIZES = {"cpu": (4_000,), "cuda": (10_976, 108_000, 1_048_576)}     # 4 n^3 (n = 10, 14, 30, 64)
QUICK_SIZES = {"cpu": (256,), "cuda": (108_000,)}
CUTOFF, SKIN, DENSITY = 2.5, 0.3, 0.8

EF = "LJ energy + forces"
EF_ADJOINT = "LJ energy + forces (energy kernel, then its adjoint)"
BUILD = "neighbor-list build"
STEP = "MD step (Verlet, list kept)"
FIT = "force-matching loss gradient (LJ parameters)"
MEASURE_KEYS = {"ef": EF, "ef_adjoint": EF_ADJOINT, "build": BUILD, "step": STEP, "fit": FIT}
SIDES = ["adoffload", "jax", "jax-md Dense", "jax-md Sparse", "jax-md OrderedSparse", "cuda"]
COLUMNS = ["measure", "atoms", "side", "median_ms", "iqr_ms", "min_ms", "max_ms", "reps", "batch",
           "max_force_diff", "grad_rel_diff", "atom_steps_per_s", "error"]
FIT_PARAMS = {"sigma": 1.0, "epsilon": 1.0}


def force_loss(ff, pos, neighbors):
    """The force-matching loss of every side: mean squared force, a function of the LJ parameters."""
    import jax.numpy as jnp

    def loss(params):
        return jnp.mean(ff.forces(pos, neighbors, params) ** 2)
    return loss


class System:
    """The benchmark's liquid at one size, with our neighbor list and the reference forces."""

    def __init__(self, n_atoms: int, device, measures=None):
        import jax
        import jax.numpy as jnp
        from adoffload.chemistry import ForceField, LennardJones, as_box
        from adoffload.chemistry.dynamics import fcc_lattice
        pos, edge = fcc_lattice(round((n_atoms / 4) ** (1 / 3)), DENSITY)
        pos = pos + 0.05 * jax.random.normal(jax.random.PRNGKey(0), pos.shape, dtype=jnp.float64)
        self.edge, self.n = float(edge), len(pos)
        self.pos = jax.device_put(jnp.asarray(pos), device)
        self.device, self.measures = device, measures       # measures: None = all
        self.forcefield = lambda backend: ForceField((LennardJones(cutoff=CUTOFF),), as_box(edge), backend=backend)
        self.spec = self.forcefield("jax").neighbor_list(self.n, skin=SKIN)
        self.nl = jax.jit(self.spec.build)(self.pos)
        self.spec.check_overflow(self.nl)
        self.reference_forces = jax.jit(self.forcefield("jax").energy_and_forces)(self.pos, self.nl.neighbors)[1]
        self._reference_gradient = None

    def grad_diff(self, gradient) -> float:
        """Largest relative difference of a force-matching gradient ({sigma, epsilon}) from the reference's."""
        import jax
        if self._reference_gradient is None:
            ff = self.forcefield("jax")
            self._reference_gradient = jax.jit(jax.grad(force_loss(ff, self.pos, self.nl.neighbors)))(
                {ff.terms[0].name: dict(FIT_PARAMS)})[ff.terms[0].name]
        return max(abs(float(gradient[k]) - float(v)) / max(abs(float(v)), 1e-300)
                   for k, v in self._reference_gradient.items())

    def force_diff(self, forces) -> float:
        import jax.numpy as jnp
        return float(jnp.max(jnp.abs(jnp.asarray(forces) - self.reference_forces)))


def row(measure, system, side, timing=None, batch=BATCH, **extra) -> dict:
    out = {"measure": measure, "atoms": system.n, "side": side, **extra}
    if timing is not None:
        out.update(median_ms=timing.median_ms, iqr_ms=timing.q3_ms - timing.q1_ms, min_ms=timing.min_ms,
                   max_ms=timing.max_ms, reps=timing.reps, batch=batch)
    return out


def attempt(rows, measure, system, side, fn) -> None:
    """Run one case; a failure becomes an error row (never a missing or invented one)."""
    if system.measures is not None and measure not in system.measures:
        return
    try:
        rows.append(fn())
    except Exception as error:        # noqa: BLE001 - one case failing is reported
        rows.append(row(measure, system, side, error=f"{type(error).__name__}: {str(error)[:300]}"))


def forcefield_side(rows, system, backend, reps) -> None:
    """adoffload or the plain-JAX reference, through the same ForceField."""
    import jax
    from adoffload.chemistry.dynamics import initial_state, maxwell_boltzmann, verlet_step
    ff = system.forcefield(backend)
    spec = ff.neighbor_list(system.n, skin=SKIN)
    pos, neighbors = system.pos, system.nl.neighbors
    energy_forces = jax.jit(ff.energy_and_forces)

    def fused():
        t = time_jax(energy_forces, pos, neighbors, reps=reps)
        return row(EF, system, backend, t, max_force_diff=system.force_diff(energy_forces(pos, neighbors)[1]))
    attempt(rows, EF, system, backend, fused)
    if backend == "adoffload":
        by_adjoint = jax.jit(jax.value_and_grad(ff.energy))
        attempt(rows, EF_ADJOINT, system, backend, lambda: row(
            EF_ADJOINT, system, backend, time_jax(by_adjoint, pos, neighbors, reps=reps),
            max_force_diff=system.force_diff(-by_adjoint(pos, neighbors)[1])))
    build = jax.jit(spec.build)
    attempt(rows, BUILD, system, backend, lambda: row(BUILD, system, backend, time_jax(build, pos, reps=reps)))
    key_v, key = jax.random.split(jax.random.PRNGKey(1))

    def md_step():
        state = initial_state(ff, spec, pos, maxwell_boltzmann(key_v, system.n, 1.0), key)
        step = jax.jit(lambda s: verlet_step(ff, spec, s, 0.004))
        t = time_jax(step, state, reps=reps)
        return row(STEP, system, backend, t, atom_steps_per_s=round(system.n / (t.median_ms * 1e-3)))
    attempt(rows, STEP, system, backend, md_step)

    # force matching in the parameters: one vector-forward launch of the fused kernel (jax/scalar_jvp.py)
    gradient = jax.jit(jax.grad(force_loss(ff, pos, neighbors)))
    params = jax.device_put({ff.terms[0].name: dict(FIT_PARAMS)}, system.device)   # a fitting loop keeps them there
    attempt(rows, FIT, system, backend, lambda: row(
        FIT, system, backend, time_jax(gradient, params, reps=reps),
        grad_rel_diff=system.grad_diff(gradient(params)[ff.terms[0].name])))


def jaxmd_side(rows, system, fmt, reps) -> None:
    import jax
    from ..peers.jaxmd_lj import JaxMdLJ
    side = f"jax-md {fmt}"
    try:
        with jax.default_device(system.device):
            peer = JaxMdLJ(system.pos, system.edge, CUTOFF, SKIN, fmt)
    except Exception as error:         # noqa: BLE001
        rows.append(row(EF, system, side, error=f"{type(error).__name__}: {str(error)[:300]}"))
        return
    attempt(rows, EF, system, side, lambda: row(
        EF, system, side, time_jax(peer.energy_and_forces, system.pos, peer.neighbors, reps=reps),
        max_force_diff=system.force_diff(peer.energy_and_forces(system.pos, peer.neighbors)[1])))
    attempt(rows, BUILD, system, side, lambda: row(
        BUILD, system, side, time_jax(peer.rebuild, system.pos, peer.neighbors, reps=reps)))
    params = jax.device_put(dict(FIT_PARAMS), system.device)
    attempt(rows, FIT, system, side, lambda: row(
        FIT, system, side, time_jax(peer.force_loss_gradient, params, system.pos, peer.neighbors, reps=reps),
        grad_rel_diff=system.grad_diff(peer.force_loss_gradient(params, system.pos, peer.neighbors))))


def cuda_side(rows, system, reps) -> None:
    """cuda/lj.cu through adoffload's CUDA runtime, on our neighbor list, timed like the rest: one
    thread per atom, and 2, 4 or 8 lanes per atom (the form our GPU backend picks for small systems);
    each is a row, so the ceiling is the fastest of them at each size."""
    import numpy as np
    from ..gpu import Gpu, nvcc_cubin
    gpu = Gpu()
    module = gpu.device.load_module(nvcc_cubin("lj.cu"))
    functions = {lanes: module.function("lj_energy_forces" + (f"_lanes{lanes}" if lanes > 1 else ""))
                 for lanes in (1, 2, 4, 8)}
    neighbors = np.ascontiguousarray(np.asarray(system.nl.neighbors, dtype=np.int64))
    n, capacity = neighbors.shape
    host = {"pos": np.ascontiguousarray(np.asarray(system.pos)), "box": np.full(3, system.edge),
            "neighbors": neighbors, "e": np.zeros(n), "forces": np.zeros((n, 3))}
    dev = gpu.upload(host)
    try:
        for lanes, function in functions.items():
            side = "cuda" if lanes == 1 else f"cuda {lanes} lanes/atom"
            gpu.device.free(dev["forces"])                  # fresh zeros: no variant reads another's forces
            dev["forces"] = gpu.device.to_device(np.zeros((n, 3)))
            args = [dev["pos"].ptr, dev["box"].ptr, dev["neighbors"].ptr, 1.0, 1.0, CUTOFF, dev["e"].ptr,
                    dev["forces"].ptr, n, capacity]
            blocks = (n * lanes + 127) // 128
            launch = lambda f=function, b=blocks, a=args: gpu.launch_raw(f, (b, 1, 1), (128, 1, 1), a)   # noqa: E731
            launch()
            forces = gpu.download(dev["forces"], host["forces"])
            t = gpu.time(launch, reps)
            rows.append(row(EF + " (per-atom e, no total)", system, side, t, max_force_diff=system.force_diff(forces)))
    finally:
        gpu.free(dev)


def measure_all(rows, device="cpu", quick=False, reps=None, sides=None, measures=None, sizes=None, max_atoms=None,
                after_side=None):
    """Append result rows for every size and side (see the module docstring); ``sides`` and
    ``measures`` (e.g. ``[chemistry.EF]``) select a subset. ``max_atoms``: {side: N}, the sizes a
    side runs at most (larger ones give a skipped row); ``after_side(rows)`` is called after each side."""
    import shutil
    import jax
    jax.config.update("jax_enable_x64", True)
    from adoffload.chemistry import available
    from ..peers.jaxmd_lj import available as jaxmd_available
    platform_name = {"cpu": "cpu", "cuda": "gpu"}[device]
    try:
        jax_device = jax.devices(platform_name)[0]
    except RuntimeError as error:
        rows.append({"measure": "all", "error": f"JAX has no {platform_name} device here: {error}"})
        return rows
    reps = reps or (5 if quick else REPS)
    for n in sizes or (QUICK_SIZES if quick else SIZES)[device]:
        with jax.default_device(jax_device):
            system = System(n, jax_device, measures)
            for side in sides or SIDES:
                limit = (max_atoms or {}).get(side)
                if limit is not None and system.n > limit:
                    rows.append(row("all", system, side, error=f"skipped: {system.n} atoms is above this side's "
                                                                f"limit of {limit} (--max-atoms)"))
                    continue
                try:
                    if side in ("adoffload", "jax"):
                        ok, why = available(side)
                        if not ok:
                            rows.append(row("all", system, side, error=f"backend unavailable: {why}"))
                            continue
                        forcefield_side(rows, system, side, reps)
                    elif side.startswith("jax-md"):
                        ok, why = jaxmd_available()
                        if not ok:
                            rows.append(row("all", system, side, error=why))
                            continue
                        jaxmd_side(rows, system, side.split()[1], reps)
                    elif side == "cuda":
                        if device != "cuda" or shutil.which("nvcc") is None:
                            rows.append(row(EF, system, side, error="needs a CUDA GPU and nvcc"))
                            continue
                        cuda_side(rows, system, reps)
                finally:
                    jax.clear_caches()
                    gc.collect()
                    if after_side is not None:
                        after_side(rows)
            del system
            gc.collect()
    return rows


class StreamedRows(list):
    """A child's rows, each also written as a JSON line as soon as it is appended (kept on a timeout)."""

    def __init__(self, path: Path):
        super().__init__()
        self.path = path

    def append(self, item) -> None:
        super().append(item)
        with open(self.path, "a") as f:
            f.write(json.dumps(item, default=float) + "\n")


def run_isolated(rows, seconds, device, sizes, sides, reps=None, quick=False, max_atoms=None, after_side=None,
                 measure_keys=None, budget=None):
    """``measure_all`` with each (size, side) in a child process limited to ``seconds``: device memory is the
    child's alone, and a side that fails, runs out of memory or past the limit is an error row.
    ``budget``: seconds for the whole run; a child gets at most what is left, and once less than
    10 s is left the remaining sides are rows saying they were not run."""
    import subprocess
    import tempfile
    import time
    deadline = None if budget is None else time.monotonic() + budget
    for n in sizes or (QUICK_SIZES if quick else SIZES)[device]:
        for side in sides or SIDES:
            limit = (max_atoms or {}).get(side)
            if limit is not None and n > limit:
                rows.append({"measure": "all", "atoms": n, "side": side,
                             "error": f"skipped: {n} atoms is above this side's limit of {limit} (--max-atoms)"})
                continue
            left = seconds if deadline is None else min(seconds, int(deadline - time.monotonic()))
            if left < 10:
                rows.append({"measure": "all", "atoms": n, "side": side,
                             "error": f"not run: the run's --budget of {budget} s was spent"})
                continue
            with tempfile.TemporaryDirectory() as tmp:
                stream = Path(tmp) / "rows.jsonl"
                command = [sys.executable, "-m", __name__, "--device", device, "--sizes", str(n),
                           "--sides", side, "--rows-jsonl", str(stream)]
                command += ["--reps", str(reps)] if reps else []
                command += ["--measures", *measure_keys] if measure_keys else []
                try:
                    done = subprocess.run(command, capture_output=True, text=True, timeout=left,
                                          cwd=Path(__file__).resolve().parents[2])
                    failure = None if done.returncode == 0 else \
                        f"child process exited with {done.returncode}: {_last_line(done.stderr)}"
                except subprocess.TimeoutExpired:
                    failure = (f"child process ran past its {left} s limit (--isolate/--budget); "
                               "rows measured before are kept")
                child_rows = [json.loads(line) for line in stream.read_text().splitlines()] if stream.exists() else []
            rows.extend(child_rows)
            if failure is not None:
                atoms = next((r["atoms"] for r in child_rows if "atoms" in r), n)
                rows.append({"measure": "all", "atoms": atoms, "side": side, "error": failure})
            if after_side is not None:
                after_side(rows)
    return rows


def _last_line(text: str) -> str:
    """The child's Python exception line if it printed one (XLA logs lines after it), else its last line."""
    lines = [line for line in (text or "").splitlines() if line.strip()]
    errors = [line for line in lines if re.match(r"^[\w.]+(Error|Exception|Interrupt)\b", line)]
    return (errors or lines or ["(no output)"])[-1][:300]


# (name, numerator side/measure, denominator side/measure, target) -- issue 12's chemistry targets
FASTEST_CUDA = "cuda, fastest of its forms"
RATIOS = [
    ("adoffload fused E+F / hand-written CUDA, its fastest form (time)", ("adoffload", EF),
     (FASTEST_CUDA, EF + " (per-atom e, no total)"), "<= 2"),
    ("jax-md Dense E+F / adoffload fused E+F (speed-up)", ("jax-md Dense", EF), ("adoffload", EF), ">= 4"),
    ("jax-md OrderedSparse E+F / adoffload fused E+F (speed-up)", ("jax-md OrderedSparse", EF), ("adoffload", EF), ">= 4"),
    ("plain JAX E+F / adoffload fused E+F (speed-up)", ("jax", EF), ("adoffload", EF), "(none)"),
    ("adoffload energy kernel + adjoint / fused (time)", ("adoffload", EF_ADJOINT), ("adoffload", EF), "(none)"),
    ("jax-md Dense force-matching grad / adoffload (speed-up)", ("jax-md Dense", FIT), ("adoffload", FIT), ">= 3"),
    ("plain JAX force-matching grad / adoffload (speed-up)", ("jax", FIT), ("adoffload", FIT), "(none)"),
    ("adoffload force-matching grad / adoffload fused E+F (time)", ("adoffload", FIT), ("adoffload", EF), "(none)"),
]


def ratios(rows):
    times = {(r["side"], r["measure"], r["atoms"]): r["median_ms"] for r in rows if "median_ms" in r}
    for (side, measure, n), value in list(times.items()):       # the ceiling: every CUDA form's best
        if side == "cuda" or side.startswith("cuda "):
            best = times.get((FASTEST_CUDA, measure, n))
            times[(FASTEST_CUDA, measure, n)] = value if best is None else min(best, value)
    sizes = sorted({r["atoms"] for r in rows if "atoms" in r})
    out = []
    for n in sizes:
        for name, (sa, ma), (sb, mb), target in RATIOS:
            a, b = times.get((sa, ma, n)), times.get((sb, mb, n))
            out.append({"atoms": n, "ratio": name, "value": a / b if a and b else None, "target": target})
    return out


def max_atoms_limits(items) -> dict:
    """``["SIDE=N", ...]`` -> {side: N} (a BenchmarkError names a malformed item)."""
    limits = {}
    for item in items or ():
        side, _, n = item.rpartition("=")
        if side not in SIDES or not n.isdigit():
            raise BenchmarkError(f"--max-atoms {item!r}: expected SIDE=N with SIDE one of {', '.join(SIDES)}")
        limits[side] = int(n)
    return limits


def _check_sides(sides) -> None:
    for side in sides or ():
        if side not in SIDES:
            raise BenchmarkError(f"unknown side {side!r}; choose from {', '.join(SIDES)}")


def add_arguments(parser) -> None:
    parser.add_argument("--sizes", type=int, nargs="*", help="atom counts (default: the device's three sizes)")
    parser.add_argument("--sides", nargs="*", help="adoffload jax 'jax-md Dense' 'jax-md Sparse' "
                                                   "'jax-md OrderedSparse' cuda (default: all)")
    parser.add_argument("--measures", nargs="*", choices=sorted(MEASURE_KEYS), help="measure only these (default: all)")
    parser.add_argument("--max-atoms", action="append", default=[], metavar="SIDE=N",
                        help="run SIDE only at sizes up to N atoms (repeatable)")
    parser.add_argument("--isolate", type=int, metavar="SECONDS",
                        help="run each (size, side) in a child process with this time limit")
    parser.add_argument("--budget", type=int, metavar="SECONDS",
                        help="with --isolate: seconds for the whole run (later sides become 'not run' rows)")


def run(rows, device: str, quick: bool, options) -> None:
    _check_sides(options.sides)
    max_atoms = max_atoms_limits(options.max_atoms)
    if options.isolate:
        run_isolated(rows, options.isolate, device, options.sizes, options.sides, reps=options.reps, quick=quick,
                     max_atoms=max_atoms, measure_keys=options.measures, budget=options.budget)
    else:
        measures = [MEASURE_KEYS[m] for m in options.measures] if options.measures else None
        measure_all(rows, device=device, quick=quick, reps=options.reps, sides=options.sides, sizes=options.sizes,
                    max_atoms=max_atoms, measures=measures)


COLUMNS = ["measure", "atoms", "side", "median_ms", "iqr_ms", "min_ms", "max_ms", "reps", "batch",
           "max_force_diff", "grad_rel_diff", "atom_steps_per_s"]


def report(rows) -> list[str]:
    from ..report import table
    lines = [f"System: fcc-lattice LJ liquid, density {DENSITY}, cutoff {CUTOFF}, skin {SKIN}, float64; "
             "max_force_diff is against the plain-JAX reference.", ""]
    for n in sorted({r["atoms"] for r in rows if "atoms" in r}):
        lines += [f"Ratios at {n} atoms:", "", table([r for r in ratios(rows) if r["atoms"] == n],
                                                     ["ratio", "value", "target"]), ""]
    return lines


def targets(rows) -> list[dict]:
    from ..targets import meets
    return [{"measure": f"chemistry, {r['atoms']} atoms: {r['ratio']}", "measured": r["value"],
             "target": r["target"], "met": meets(r["value"], r["target"])}
            for r in ratios(rows) if r["target"] not in ("(none)", "")]


def _child(argv=None) -> int:
    """A child of ``--isolate``: one size and side, rows streamed to a JSON-lines file."""
    import argparse
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", required=True)
    parser.add_argument("--sizes", type=int, nargs="*")
    parser.add_argument("--sides", nargs="*")
    parser.add_argument("--reps", type=int)
    parser.add_argument("--measures", nargs="*")
    parser.add_argument("--rows-jsonl", required=True)
    args = parser.parse_args(argv)
    measures = [MEASURE_KEYS[m] for m in args.measures] if args.measures else None
    measure_all(StreamedRows(Path(args.rows_jsonl)), device=args.device, reps=args.reps, sides=args.sides,
                sizes=args.sizes, measures=measures)
    return 0


if __name__ == "__main__":
    sys.exit(_child())
