"""Batch decay fits five ways, each measured two ways: adoffload.optimize.least_squares, optimistix's
LevenbergMarquardt under jax.vmap, a batched Gauss-Newton in jax.numpy (to convergence, and a fixed 20
steps), and scipy.optimize.least_squares (a subset, one by one).

The same curves (decay_fits.make_data), the same start, the same tolerance (1e-8: scipy's ftol = xtol =
gtol, optimistix's rtol = atol, the Gauss-Newton step test |dx| < tol (tol + |x|)). Every batch method
is a function of (x0, y) that JAX jits (ours: ``least_squares`` on JAX arrays, its kernel a custom call),
run two ways (in this order), a row each:

* ``numpy in, numpy out``: numpy arrays in, numpy arrays back, the transfers timed with the solve
  (ours: ``least_squares`` on numpy arrays with ``device=``: x, cost, status and the counts come back
  as numpy arrays, while on a GPU the residuals and gradients stay on the device until read, which this
  benchmark does not do; the JAX methods: the jitted function called with numpy arrays, x and the flags
  converted back with ``np.asarray``);
* ``device-resident``: x0 and y put on the device beforehand (``jax.device_put``), the jitted solve
  timed to ``jax.block_until_ready``, its outputs (x and the converged flags) left there.

For each: the first call (compiling included: a fresh ``jax.jit`` per method and way, so JAX compiles
for each; adoffload's kernel compile cache may serve the second way's first call), the median time per
curve of ``--reps`` further calls on the same curves (benchmarks/timing.py), how many converged, and
the largest difference of its fitted parameters from scipy's on the subset.

    python examples/fitting/benchmark.py                        # host CPU
    python examples/fitting/benchmark.py --device cuda          # adoffload and JAX on the GPU
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from dataclasses import dataclass
from typing import Callable

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "chemistry"))
sys.path.append(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))   # benchmarks/ (its timer)
from common import HelpFormatter  # noqa: E402

import numpy as np  # noqa: E402

import decay_fits  # noqa: E402

TOL = 1e-8
FIXED_STEPS = 20        # the fixed-iteration Gauss-Newton's steps (every curve takes them all)
WAYS = ("numpy in, numpy out", "device-resident")
SHORT = {"numpy": WAYS[0], "device": WAYS[1]}     # --ways names
REPS = 3                # timed calls per method and way (seconds-long solves at a million curves)


def parse(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0], formatter_class=HelpFormatter)
    p.add_argument("--curves", type=int, default=100_000, help="curves fitted by the batch methods")
    p.add_argument("--scipy", type=int, default=300, help="curves of the subset scipy fits one by one")
    p.add_argument("--points", type=int, default=40, help="samples per curve")
    p.add_argument("--device", choices=["cpu", "cuda"], default="cpu", help="where adoffload and JAX run")
    p.add_argument("--skip", nargs="*", default=[], choices=["optimistix", "jnp"], help="peers to leave out")
    p.add_argument("--ways", nargs="*", default=list(SHORT), choices=list(SHORT),
                   help="how the methods are fed: numpy in and out, or device-resident")
    p.add_argument("--reps", type=int, default=REPS, help="timed calls per method and way (the median is shown)")
    p.add_argument("--seed", type=int, default=1, help="random seed")
    return p.parse_args(argv)


def scipy_fits(t, y, x0):
    from scipy.optimize import least_squares
    out, ok = [], []
    for target, start in zip(y, x0):
        r = least_squares(lambda p: p[0] * np.exp(-p[1] * t) + p[2] - target, start, method="lm",
                          ftol=TOL, xtol=TOL, gtol=TOL)
        out.append(r.x)
        ok.append(r.success)
    return np.array(out), np.array(ok)




def jax_device(device: str):
    """The JAX device for ``device`` ('cpu' or 'cuda'), float64 enabled (every JAX method runs in x64)."""
    import jax
    jax.config.update("jax_enable_x64", True)
    return jax.devices("gpu" if device == "cuda" else "cpu")[0]


# --- the methods, each a function of (x0, y) -> (x, converged) that jax.jit takes -------------------------

def _ours(t):
    """adoffload.optimize.least_squares(method='lm') on JAX arrays: its kernel as a JAX custom call."""
    import jax.numpy as jnp
    from adoffload.optimize import least_squares, shared
    tj = jnp.asarray(t)

    def solve(x0, y):
        r = least_squares(decay_fits.decay, x0, args=(shared(tj), y), m=len(t), ftol=TOL, xtol=TOL, gtol=TOL)
        return r.x, r.success
    return solve


def ours_numpy(t, y, x0, device):
    """adoffload.optimize.least_squares on numpy arrays (numpy results; on a GPU the residuals and
    gradients are fetched only when read, and this reads x and success)."""
    from adoffload.optimize import least_squares, shared
    r = least_squares(decay_fits.decay, x0, args=(shared(t), y), m=len(t), ftol=TOL, xtol=TOL, gtol=TOL,
                      device=device)
    return r.x, r.success


def _optimistix(t):
    """optimistix's LevenbergMarquardt (rtol = atol = tol) on one curve, under jax.vmap."""
    import jax
    import jax.numpy as jnp
    import optimistix as optx
    solver = optx.LevenbergMarquardt(rtol=TOL, atol=TOL)
    tj = jnp.asarray(t)

    def one(start, target):
        sol = optx.least_squares(lambda p, a: p[0] * jnp.exp(-p[1] * tj) + p[2] - a, solver, start, args=target,
                                 max_steps=400, throw=False)
        return sol.value, sol.result == optx.RESULTS.successful
    return jax.vmap(one)


def _jnp_gauss_newton_step(t):
    """(step(x, target) -> (x + dx, dx)) for a batch: r and J (jax.jacfwd), (J^T J) dx = -J^T r by jnp.linalg.solve."""
    import jax
    import jax.numpy as jnp
    tj = jnp.asarray(t)

    def residual(p, a):
        return p[0] * jnp.exp(-p[1] * tj) + p[2] - a

    jac = jax.vmap(jax.jacfwd(residual))

    def step(x, target):
        r = jax.vmap(residual)(x, target)
        J = jac(x, target)
        dx = -jnp.linalg.solve(jnp.einsum("bmi,bmj->bij", J, J), jnp.einsum("bmi,bm->bi", J, r)[..., None])[..., 0]
        return x + dx, dx
    return step


def _small(dx, x):
    import jax.numpy as jnp
    return jnp.linalg.norm(dx, axis=1) < TOL * (TOL + jnp.linalg.norm(x, axis=1))


def _gauss_newton(t, max_steps: int = 100):
    """All curves at once, full Gauss-Newton steps until every curve's step is below tolerance
    (a lax.while_loop); no damping (curves whose step blows up fail)."""
    import jax
    import jax.numpy as jnp
    step = _jnp_gauss_newton_step(t)

    def solve(x, target):
        def body(state):
            x, k, done = state
            moved, dx = step(x, target)
            small = _small(dx, x)
            x = jnp.where(done[:, None], x, moved)
            return x, k + 1, done | small | ~jnp.all(jnp.isfinite(dx), axis=1)

        x, _, done = jax.lax.while_loop(lambda s: (s[1] < max_steps) & ~jnp.all(s[2]), body,
                                        (x, 0, jnp.zeros(x.shape[0], bool)))
        return x, done & jnp.all(jnp.isfinite(x), axis=1)
    return solve


def _gauss_newton_fixed(t, steps: int = FIXED_STEPS):
    """All curves at once, exactly ``steps`` full Gauss-Newton steps (lax.fori_loop, nothing tested
    inside the loop: the batched form a JAX user writes first); a curve counts as converged when its
    last step was below tolerance and its parameters are finite."""
    import jax
    import jax.numpy as jnp
    step = _jnp_gauss_newton_step(t)

    def solve(x, target):
        x, dx = jax.lax.fori_loop(0, steps, lambda _, s: step(s[0], target), (x, jnp.full_like(x, jnp.inf)))
        return x, _small(dx, x) & jnp.all(jnp.isfinite(x), axis=1)
    return solve


@dataclass(frozen=True)
class Method:
    """A batch method: ``build(t)`` gives its solve ``(x0, y) -> (x, converged)`` for jax.jit; ``numpy``
    (ours only) is its own numpy path ``(t, y, x0, device) -> (x, converged)``; ``peer`` names the
    package a missing install is reported by (None: ours)."""
    name: str
    build: Callable
    numpy: Callable | None = None
    peer: str | None = None


OURS = "adoffload.optimize least_squares (lm)"
OPTIMISTIX = "optimistix LevenbergMarquardt, vmap"
GN = "Gauss-Newton in jnp, to convergence"
GN_FIXED = f"Gauss-Newton in jnp, {FIXED_STEPS} fixed steps"
METHODS = (Method(OURS, _ours, ours_numpy), Method(OPTIMISTIX, _optimistix, peer="optimistix"),
           Method(GN, _gauss_newton, peer="jnp"), Method(GN_FIXED, _gauss_newton_fixed, peer="jnp"))


def calls(method: Method, way: str, t, y, x0, device: str):
    """``(call, wait)`` of one method fed one way; each call builds nothing (the jitted function is made
    here, once, so its first call compiles and later ones run the compiled code)."""
    import jax
    where = jax_device(device)
    if way == "device-resident":
        solve = jax.jit(method.build(t))
        x0_d, y_d = jax.block_until_ready((jax.device_put(x0, where), jax.device_put(y, where)))
        return (lambda: solve(x0_d, y_d)), jax.block_until_ready
    if method.numpy is not None:
        return (lambda: method.numpy(t, y, x0, device)), _no_wait
    solve = jax.jit(method.build(t))

    def call():
        with jax.default_device(where):
            x, ok = solve(x0, y)
            return np.asarray(x), np.asarray(ok)
    return call, _no_wait


def _no_wait(result):
    return result


def measure(method: Method, way: str, t, y, x0, device: str, reps: int = REPS) -> dict:
    """The first call (compiling included), then ``reps`` timed calls on the same curves
    (benchmarks/timing.time_calls, one call per repetition): first_call_s, us_per_curve (median) with
    its min and IQR, and the last call's x and converged flags as numpy arrays."""
    from benchmarks.timing import time_calls
    call, wait = calls(method, way, t, y, x0, device)
    began = time.perf_counter()
    wait(call())
    first_call = time.perf_counter() - began
    last = [None]

    def timed():
        last[0] = None                # the previous call's outputs go before the next call (memory)
        last[0] = call()
        return last[0]
    timing = time_calls(timed, wait, reps=reps, batch=1, warmup=0)
    x, ok = last[0]
    per_curve = 1e3 / len(y)          # ms per call -> us per curve
    return {"first_call_s": first_call, "us_per_curve": timing.median_ms * per_curve,
            "us_per_curve_min": timing.min_ms * per_curve, "us_per_curve_iqr": (timing.q3_ms - timing.q1_ms) * per_curve,
            "reps": timing.reps, "x": np.asarray(x), "ok": np.asarray(ok)}


def checked(got: dict, reference, reference_ok) -> dict:
    """``converged`` (fraction), ``checked_vs_scipy`` and ``max_diff_vs_scipy`` (on the scipy subset,
    the curves both converged on) of a measured method."""
    subset = len(reference)
    both = got["ok"][:subset] & reference_ok
    return {"converged": float(got["ok"].mean()), "checked_vs_scipy": int(both.sum()),
            "max_diff_vs_scipy": float(np.abs(got["x"][:subset][both] - reference[both]).max()) if both.any() else None}


def rows(t, y, x0, device: str, subset: int, reps: int = REPS, ways=WAYS, skip=()):
    """Every row of the comparison, yielded as measured: scipy's, then each method fed each way (a
    missing peer is a row with ``skipped``, a failing one a row with ``error``)."""
    from benchmarks.results import describe_error
    base = {"case": "fits", "curves": len(y), "points": len(t), "tol": TOL, "device": device}
    began = time.perf_counter()
    scipy_fits(t, y[:1], x0[:1])
    scipy_first = time.perf_counter() - began
    began = time.perf_counter()
    reference, reference_ok = scipy_fits(t, y[:subset], x0[:subset])
    scipy_seconds = time.perf_counter() - began
    yield {**base, "method": "scipy least_squares (lm), one by one", "way": "numpy in, numpy out", "device": "cpu",
           "curves": subset, "first_call_s": scipy_first, "first_call_curves": 1,
           "us_per_curve": scipy_seconds / subset * 1e6, "converged": float(reference_ok.mean())}
    for way in ways:
        for method in METHODS:
            row = {**base, "method": method.name, "way": way}
            if method.peer in skip:
                yield {**row, "skipped": "left out (--skip)"}
                continue
            try:
                got = measure(method, way, t, y, x0, device, reps)
            except ModuleNotFoundError as exc:   # a peer that is not installed (pip install ".[bench]")
                yield {**row, "skipped": f"not installed here: {describe_error(exc, 200)}"}
                continue
            except Exception as exc:  # noqa: BLE001 - a method that fails is its row
                yield {**row, "error": describe_error(exc)}
                continue
            yield {**row, "first_call_curves": len(y), **{k: v for k, v in got.items() if k not in ("x", "ok")},
                   **checked(got, reference, reference_ok)}


def ratios(rows) -> list[dict]:
    """Per way: each method's time per curve, and optimistix's and the fixed-step jnp Gauss-Newton's time
    over it (above 1: this method is faster), all from rows of the same run."""
    out = []
    for way in WAYS:
        timed = {r["method"]: r for r in rows if r.get("case") == "fits" and r.get("way") == way
                 and r.get("us_per_curve") and not r["method"].startswith("scipy")}
        for name, r in timed.items():
            line = {"way": way, "method": name, "us_per_curve": r["us_per_curve"]}
            for peer, label in ((OPTIMISTIX, "optimistix / this"), (GN_FIXED, "jnp GN fixed / this")):
                if peer in timed:
                    line[label] = timed[peer]["us_per_curve"] / r["us_per_curve"]
            out.append(line)
    return out


def main(argv=None):
    args = parse(argv)
    t, true, y = decay_fits.make_data(args.curves, args.points, 0.02, args.seed)
    x0 = np.tile(decay_fits.START, (args.curves, 1))
    subset = min(args.scipy, args.curves)
    print(f"{args.curves} curves of {args.points} points, tolerance {TOL:g}, on {args.device}")
    print(f"{'way':20s} {'method':38s} {'first call s':>12s} {'us/curve':>10s} {'converged':>10s} {'max |x - scipy|':>16s}")
    found = []
    for row in rows(t, y, x0, args.device, subset, args.reps, [SHORT[w] for w in args.ways], args.skip):
        found.append(row)
        if "us_per_curve" not in row:
            print(f"{row['way']:20s} {row['method']:38s} {row.get('skipped') or row.get('error')}")
            continue
        difference = row.get("max_diff_vs_scipy")
        print(f"{row['way']:20s} {row['method']:38s} {row['first_call_s']:12.2f} {row['us_per_curve']:10.3f} "
              f"{row['converged']:10.4f} {'-' if difference is None else f'{difference:.2e}':>16s}"
              + (f"   ({row['curves']} curves, one by one)" if row["method"].startswith("scipy") else ""))
    for line in ratios(found):
        parts = ", ".join(f"{k} {v:.2f}" for k, v in line.items() if k.endswith("/ this"))
        if parts:
            print(f"{line['way']:20s} {line['method']:38s} {parts}")
    return {"rows": found, "ratios": ratios(found)}


if __name__ == "__main__":
    main()
