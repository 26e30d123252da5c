"""Batch decay fits five ways: adoffload.optimize.least_squares, optimistix's LevenbergMarquardt under
jax.vmap, a batched Gauss-Newton in jax.numpy (to convergence, and a fixed 20 steps), and
scipy.optimize.least_squares (a subset, one by one).

The same curves (decay_fits.make_data), the same start, the same tolerance (1e-8: scipy's ftol = xtol =
gtol, optimistix's rtol = atol, the Gauss-Newton step test |dx| < tol (tol + |x|)). For each: the first
call (compiling included), the time per curve of a second call on the same curves (JAX's jitted
function kept, so it runs compiled code), how many converged, and the largest difference of its fitted parameters from scipy's on the subset.

    python examples/fitting/benchmark.py                        # host CPU
    python examples/fitting/benchmark.py --device cuda          # adoffload and JAX on the GPU
"""
from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "chemistry"))
from common import HelpFormatter  # noqa: E402

import numpy as np  # noqa: E402

import decay_fits  # noqa: E402

TOL = 1e-8
FIXED_STEPS = 20        # the fixed-iteration Gauss-Newton's steps (every curve takes them all)


def parse(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0], formatter_class=HelpFormatter)
    p.add_argument("--curves", type=int, default=100_000, help="curves fitted by the batch methods")
    p.add_argument("--scipy", type=int, default=300, help="curves of the subset scipy fits one by one")
    p.add_argument("--points", type=int, default=40, help="samples per curve")
    p.add_argument("--device", choices=["cpu", "cuda"], default="cpu", help="where adoffload and JAX run")
    p.add_argument("--skip", nargs="*", default=[], choices=["optimistix", "jnp"], help="peers to leave out")
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


def adoffload_fits(t, y, x0, device):
    from adoffload.optimize import least_squares, shared
    r = least_squares(decay_fits.decay, x0, args=(shared(t), y), m=len(t), ftol=TOL, xtol=TOL, gtol=TOL,
                      device=device)
    return r.x, r.success


def _jax_device(device):
    import jax
    jax.config.update("jax_enable_x64", True)
    return jax.devices("gpu" if device == "cuda" else "cpu")[0]


def _jitted(build):
    """``fits(t, y, x0, device)`` running ``jax.jit(build(t))``, the jitted function made once per
    (t, device) and kept: a second call of the same shapes runs the compiled code."""
    cache = {}

    def fits(t, y, x0, device, *extra):
        import jax
        import jax.numpy as jnp
        key = (tuple(np.asarray(t).tolist()), device, extra)
        if key not in cache:
            cache[key] = jax.jit(build(t, *extra))
        with jax.default_device(_jax_device(device)):
            x, ok = cache[key](jnp.asarray(x0), jnp.asarray(y))
            return np.asarray(x), np.asarray(ok)
    fits.__doc__ = build.__doc__
    return fits


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


optimistix_fits = _jitted(_optimistix)
jnp_gauss_newton = _jitted(_gauss_newton)
jnp_gauss_newton_fixed = _jitted(_gauss_newton_fixed)


def measure(name, run, t, y, x0):
    """Two calls on the same curves: the first compiles (JAX traces and compiles for these shapes,
    adoffload generates and compiles its kernel), the second is timed."""
    began = time.perf_counter()
    run(t, y, x0)
    first_call = time.perf_counter() - began
    began = time.perf_counter()
    x, ok = run(t, y, x0)
    seconds = time.perf_counter() - began
    return {"name": name, "first_call_s": first_call, "us_per_curve": seconds / len(y) * 1e6, "x": x, "ok": ok}


def main(argv=None):
    args = parse(argv)
    t, true, y = decay_fits.make_data(args.curves, args.points, 0.02, args.seed)
    x0 = np.tile(decay_fits.START, (args.curves, 1))
    subset = slice(0, min(args.scipy, args.curves))
    began = time.perf_counter()
    reference, reference_ok = scipy_fits(t, y[subset], x0[subset])
    scipy_seconds = time.perf_counter() - began
    runs = [measure("adoffload.optimize (lm)", lambda t, y, x0: adoffload_fits(t, y, x0, args.device), t, y, x0)]
    try:
        import optimistix  # noqa: F401
    except ImportError:
        print("note: optimistix is not installed here (pip install optimistix): left out")
        args.skip.append("optimistix")
    if "optimistix" not in args.skip:
        runs.append(measure("optimistix LM, vmap", lambda t, y, x0: optimistix_fits(t, y, x0, args.device), t, y, x0))
    if "jnp" not in args.skip:
        runs.append(measure("Gauss-Newton in jnp", lambda t, y, x0: jnp_gauss_newton(t, y, x0, args.device), t, y, x0))
        runs.append(measure(f"Gauss-Newton in jnp, {FIXED_STEPS} steps",
                            lambda t, y, x0: jnp_gauss_newton_fixed(t, y, x0, args.device), t, y, x0))
    print(f"{args.curves} curves of {args.points} points, tolerance {TOL:g}, on {args.device}")
    print(f"{'method':30s} {'first call s':>12s} {'us/curve':>10s} {'converged':>10s} {'max |x - scipy|':>16s}")
    print(f"{'scipy least_squares (lm)':30s} {'-':>12s} {scipy_seconds / len(reference) * 1e6:10.1f} "
          f"{reference_ok.mean():10.4f} {'-':>16s}   ({len(reference)} curves, one by one)")
    rows = []
    for run in runs:
        both = run["ok"][subset] & reference_ok
        difference = float(np.abs(run["x"][subset][both] - reference[both]).max()) if both.any() else float("nan")
        print(f"{run['name']:30s} {run['first_call_s']:12.2f} {run['us_per_curve']:10.2f} {run['ok'].mean():10.4f} "
              f"{difference:16.2e}")
        rows.append({k: v for k, v in run.items() if k not in ("x", "ok")} | {"converged": float(run["ok"].mean()),
                                                                             "max_difference": difference})
    return {"scipy_us_per_curve": scipy_seconds / len(reference) * 1e6, "runs": rows}


if __name__ == "__main__":
    main()
