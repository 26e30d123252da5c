"""adoffload.optimize: LJ38 basin hopping to the published minimum; decay fits vs optimistix, jnp and scipy.

    python -m benchmarks optimize --out DIR [--device cpu|cuda] [--quick] [--cases lj fits]
        [--seeds 0 1] [--time-limit SECONDS] [--curves N] [--fit-reps N] [--fits-timeout SECONDS]

Two cases, each a row per run, written as they come:

* ``lj``, the main job: ``examples/chemistry/lj_clusters.py`` (basin hopping, every step's local
  minimizations of all walkers one ``adoffload.optimize.minimize`` launch) in a **fresh process
  with an empty compile cache** (and the CUDA driver's JIT cache off: ``CUDA_CACHE_DISABLE=1``), stopped at the first step whose best energy is within 1e-4 of the
  Cambridge Cluster Database minimum (``--until-reached``) or after ``--time-limit`` seconds.
  ``time_to_minimum_s`` is that step's time from the search's start, compiling included;
  ``script_s`` the whole process (imports, JAX's start-up). A run that does not reach the
  minimum says ``reached: False`` and has no time to it. Full size: LJ38 (-173.928427; on a GPU
  16384 walkers with FIRE (the example's GPU default) and with L-BFGS, and issue 32's 4096 walkers
  with L-BFGS, 60 s of search each at most); ``--quick``: LJ13
  (-44.326801).
* ``lj75``, only when named (``--cases lj75``): the same for LJ75 (-397.492331), from the
  example's default starts at 75 atoms (lattice searching, adoffload.chemistry.lattice_search; the
  host search counts in the time): 16384 walkers with FIRE, at most 300 s of search on a GPU (64
  walkers with L-BFGS, 600 s on the host).
* ``fits``: ``examples/fitting/benchmark.py``'s decay curves ``A exp(-k t) + c`` (40 points, 2%
  noise, the same start for all), tolerance 1e-8 everywhere, fitted by adoffload's
  ``least_squares(method="lm")``, optimistix's ``LevenbergMarquardt`` under ``jax.vmap``, a batched
  Gauss-Newton in jnp to convergence (``lax.while_loop``) and one of a fixed 20 steps
  (``lax.fori_loop``), all jitted in float64, and scipy's ``least_squares(method="lm")`` one curve at
  a time on a subset. Each batch method is measured two ways, a row each (``way``): ``numpy in, numpy
  out`` (the transfers timed with the solve; ours returns every field of its result, the JAX methods
  x and the converged flags) and ``device-resident`` (inputs put on the device beforehand, the jitted
  solve -- ours through its JAX custom call -- timed to ``block_until_ready``, outputs left there).
  Per row: the first call on all the curves (compiling included), the median time per curve of
  ``--fit-reps`` further calls (benchmarks/timing.py), how many converged, and
  ``max_diff_vs_scipy``, the largest parameter difference from scipy's on the subset where both
  converged. scipy: its first fit's time, then per curve. The fits run in a fresh process with an
  empty compile cache; the report gives, per way, optimistix's and the fixed-step Gauss-Newton's
  time over each method's.

One run each (these are seconds-long solves, not microsecond kernels); ``--seeds`` repeats the LJ
case with other seeds.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

DEVICES = ("cpu", "cuda")
ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"

# LJ runs per (device, quick): atoms, walkers, most basin-hopping steps, minimizer, most local iterations
LJ_RUNS = {
    ("cpu", False): [(38, 128, 60, "lbfgs", 600)],
    ("cpu", True): [(13, 32, 10, "lbfgs", 300)],
    ("cuda", False): [(38, 16384, 120, "fire", 800), (38, 16384, 120, "lbfgs", 800), (38, 4096, 120, "lbfgs", 800)],
    ("cuda", True): [(13, 1024, 10, "lbfgs", 300)],
}
TIME_LIMIT = {"cpu": 300.0, "cuda": 60.0}       # seconds of search per LJ run (then it stops, unreached)
# the lj75 case (not run by default): walkers, most steps, minimizer, most local iterations
LJ75_RUN = {"cpu": (64, 2000, "lbfgs", 1500), "cuda": (16384, 1000, "fire", 1500)}
LJ75_TIME_LIMIT = {"cpu": 600.0, "cuda": 300.0}
# fits per (device, quick): curves of the batch methods, of the scipy subset
FIT_SIZES = {("cpu", False): (20_000, 300), ("cpu", True): (400, 20),
             ("cuda", False): (1_000_000, 300), ("cuda", True): (20_000, 20)}
FIT_POINTS, FIT_SEED = 40, 1


def add_arguments(parser) -> None:
    parser.add_argument("--cases", nargs="*", choices=["lj", "fits", "lj75"],
                        help="run these (default: lj and fits; lj75 only when named)")
    parser.add_argument("--seeds", type=int, nargs="*", default=[0], help="LJ basin-hopping seeds (a row each)")
    parser.add_argument("--time-limit", type=float, help="seconds of search per LJ run before it stops "
                                                         f"(default {TIME_LIMIT['cpu']:g} cpu, {TIME_LIMIT['cuda']:g} cuda)")
    parser.add_argument("--curves", type=int, help="curves of the batch fit methods (default: by device)")
    parser.add_argument("--fit-reps", type=int, default=3, help="timed calls per fit method and way")
    parser.add_argument("--fits-timeout", type=float, default=1500.0,
                        help="seconds the fits' process may run (its rows until then are kept, then an error row)")


def _examples_on_path() -> None:
    for folder in (EXAMPLES / "chemistry", EXAMPLES / "fitting"):
        if str(folder) not in sys.path:
            sys.path.insert(0, str(folder))


_LJ_CHILD = """
import json, sys
sys.path.insert(0, sys.argv[1])
import lj_clusters
r = lj_clusters.main(sys.argv[3:])
print("RESULT " + json.dumps({k: r[k] for k in ("best", "published", "seconds", "reached", "steps", "clusters",
                                                "starts", "walkers_at_minimum", "started_to_search")}))
"""


def lj_run(device: str, atoms: int, walkers: int, steps: int, minimizer: str, local: int, seed: int,
           time_limit: float, out: Path) -> dict:
    """One lj_clusters.py search in a fresh process with an empty compile cache."""
    row = {"case": "lj", "atoms": atoms, "walkers": walkers, "minimizer": minimizer, "max_steps": steps,
           "max_local_iterations": local, "seed": seed, "device": device, "time_limit_s": time_limit}
    argv = ["--device", device, "--atoms", str(atoms), "--clusters", str(walkers), "--steps", str(steps),
            "--minimizer", minimizer, "--fire-steps", str(local), "--seed", str(seed), "--until-reached",
            "--time-limit", str(time_limit), "--backend", "adoffload",
            "--out", str(out / f"lj{atoms}_{minimizer}_{walkers}_seed{seed}")]
    with tempfile.TemporaryDirectory() as cache:
        # cold means cold: no compile cache of ours, and none of the CUDA driver's PTX JIT either
        env = {**os.environ, "ADOFFLOAD_CACHE_DIR": cache, "PYTHONUNBUFFERED": "1", "CUDA_CACHE_DISABLE": "1",
               "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
        began = time.perf_counter()
        try:
            done = subprocess.run([sys.executable, "-c", _LJ_CHILD, str(EXAMPLES / "chemistry"), "--", *argv],
                                  capture_output=True, text=True, env=env, timeout=time_limit + 300)
        except subprocess.TimeoutExpired:
            return {**row, "error": f"the process ran past {time_limit + 300:g} s"}
        script = time.perf_counter() - began
    lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    if done.returncode != 0 or not lines:
        tail = (done.stderr.strip() or done.stdout.strip()).splitlines()[-3:]
        return {**row, "error": f"exit status {done.returncode}: {' | '.join(tail)[-400:]}"}
    result = json.loads(lines[-1][len("RESULT "):])
    reached = result["reached"]
    return {**row, "walkers": result["clusters"], "starts": result["starts"], "reached": reached is not None,
            "steps_to_minimum": reached[0] if reached else None,
            "time_to_minimum_s": reached[1] if reached else None,
            # from the script's first line: the kernel built ahead (before the search's clock) counts too
            "minimum_since_start_s": reached[1] + result["started_to_search"] if reached else None,
            "steps_run": result["steps"], "search_s": result["seconds"], "script_s": script,
            "best": result["best"], "published": result["published"],
            "above_published": result["best"] - result["published"],
            "walkers_at_minimum": result["walkers_at_minimum"],
            "minimizations_per_s": result["clusters"] * (result["steps"] + 1) / result["seconds"]}


def fit_rows(rows, device: str, curves: int, subset: int, reps: int = 3) -> None:
    """The decay fits (examples/fitting/benchmark.py ``rows``): each method fed each way a row."""
    _examples_on_path()
    import benchmark as fits        # examples/fitting/benchmark.py
    import decay_fits
    t, _, y = decay_fits.make_data(curves, FIT_POINTS, 0.02, FIT_SEED)
    x0 = np.tile(decay_fits.START, (curves, 1))
    for row in fits.rows(t, y, x0, device, min(subset, curves), reps):
        rows.append(row)


class _PrintedRows(list):
    def append(self, row: dict) -> None:
        print("ROW " + json.dumps(row), flush=True)


_FITS_CHILD = """
import sys
from benchmarks.suites import optimize
optimize.fit_rows(optimize._PrintedRows(), sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]))
"""


def fits_in_a_fresh_process(rows, device: str, curves: int, subset: int, reps: int = 3,
                            timeout: float = 1500.0) -> None:
    """fit_rows in a child process with an empty compile cache, so that every first call compiles
    (adoffload's kernel as well as JAX's functions); its rows come back as JSON lines."""
    with tempfile.TemporaryDirectory() as cache:
        # cold means cold: no compile cache of ours, and none of the CUDA driver's PTX JIT either
        env = {**os.environ, "ADOFFLOAD_CACHE_DIR": cache, "PYTHONUNBUFFERED": "1", "CUDA_CACHE_DISABLE": "1",
               "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
        try:
            done = subprocess.run([sys.executable, "-c", _FITS_CHILD, device, str(curves), str(subset), str(reps)],
                                  capture_output=True, text=True, env=env, timeout=timeout, cwd=ROOT)
            stdout, failure = done.stdout, (None if done.returncode == 0 else
                                            f"exit status {done.returncode}: {done.stderr.strip()[-400:]}")
        except subprocess.TimeoutExpired as expired:
            stdout, failure = (expired.stdout or b"").decode() if isinstance(expired.stdout, bytes) else (
                expired.stdout or ""), f"the fits' process ran past {timeout:g} s (rows before are kept)"
    for line in stdout.splitlines():
        if line.startswith("ROW "):
            rows.append(json.loads(line[len("ROW "):]))
    if failure is not None:
        rows.append({"case": "fits", "method": "all", "device": device, "curves": curves, "error": failure})


def run(rows, device: str, quick: bool, options) -> None:
    cases = options.cases or ["lj", "fits"]
    if "lj" in cases:
        limit = options.time_limit or TIME_LIMIT[device]
        for atoms, walkers, steps, minimizer, local in LJ_RUNS[(device, quick)]:
            for seed in options.seeds:
                rows.append(lj_run(device, atoms, walkers, steps, minimizer, local, seed, limit, Path(options.out)))
    if "lj75" in cases:
        walkers, steps, minimizer, local = LJ75_RUN[device]
        limit = options.time_limit or LJ75_TIME_LIMIT[device]
        for seed in options.seeds:
            rows.append(lj_run(device, 75, walkers, steps, minimizer, local, seed, limit, Path(options.out)))
    if "fits" in cases:
        curves, subset = FIT_SIZES[(device, quick)]
        fits_in_a_fresh_process(rows, device, options.curves or curves, subset, getattr(options, "fit_reps", 3),
                                getattr(options, "fits_timeout", 1500.0))


LJ_COLUMNS = ["atoms", "walkers", "minimizer", "starts", "seed", "time_limit_s", "reached", "steps_to_minimum", "time_to_minimum_s",
              "minimum_since_start_s", "steps_run", "search_s", "script_s", "best", "above_published", "walkers_at_minimum", "minimizations_per_s",
              "device", "error"]
FIT_COLUMNS = ["way", "method", "device", "curves", "first_call_s", "first_call_curves", "us_per_curve",
               "us_per_curve_min", "us_per_curve_iqr", "reps", "converged", "checked_vs_scipy", "max_diff_vs_scipy",
               "skipped", "error"]


def speedups(rows) -> list[dict]:
    """Per way, the per-curve time of each fit method over adoffload's (measured in the same run)."""
    out = []
    for way in _ways(rows):
        fit = [r for r in rows if r.get("case") == "fits" and r.get("us_per_curve") and r.get("way", way) == way
               and not r["method"].startswith("scipy")]
        ours = next((r for r in fit if r["method"].startswith("adoffload")), None)
        if ours is not None:
            out += [{"way": way, "method": r["method"], "time per curve / adoffload's": r["us_per_curve"] / ours["us_per_curve"]}
                    for r in fit if r is not ours]
    return out


def _ways(rows) -> list:
    """The ways of the fit rows in order of appearance (None for rows of a run before there were two)."""
    ways = []
    for r in rows:
        if r.get("case") == "fits" and r.get("way") not in ways and not r.get("method", "").startswith("scipy"):
            ways.append(r.get("way"))
    return ways


def peer_ratios(rows) -> list[dict]:
    """Per way, each method's time per curve and optimistix's and the fixed-step jnp Gauss-Newton's
    time over it (above 1: the method is faster than that peer), from rows of one run."""
    _examples_on_path()
    import benchmark as fits        # examples/fitting/benchmark.py
    return fits.ratios(rows)


def report(rows) -> list[str]:
    from ..report import table
    lines = []
    ratios = speedups(rows)
    if ratios:
        lines += ["Decay fits, time per curve relative to adoffload.optimize (same run, same curves, same way):", "",
                  table(ratios, ["way", "method", "time per curve / adoffload's"]), ""]
    peers = peer_ratios(rows)
    if peers:
        lines += ["Decay fits, optimistix's and the 20-step jnp Gauss-Newton's time per curve over each method's "
                  "(above 1: faster than that peer), per way:", "",
                  table(peers, ["way", "method", "us_per_curve", "optimistix / this", "jnp GN fixed / this"]), ""]
    return lines


def tables(rows) -> list[str]:
    from ..report import table
    parts = []
    for case, columns, title in (("lj", LJ_COLUMNS, "LJ basin hopping (lj_clusters.py, fresh process, cold cache)"),
                                 ("fits", FIT_COLUMNS, "Decay fits (examples/fitting/benchmark.py)")):
        mine = [r for r in rows if r.get("case") == case]
        if mine:
            present = [c for c in columns if any(c in r for r in mine)]
            parts += [f"### {title}", "", table(mine, present), ""]
    rest = [r for r in rows if r.get("case") not in ("lj", "fits")]
    if rest:
        parts += ["### other rows", "", table(rest), ""]
    return parts
