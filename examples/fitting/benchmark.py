"""Batch decay fits four ways: adoffload.optimize.least_squares, optimistix's LevenbergMarquardt under
jax.vmap, a batched Gauss-Newton in jax.numpy, and scipy.optimize.least_squares (a subset, one by one).

The same curves (decay_fits.make_data), the same start, the same tolerance (1e-8: scipy's ftol = xtol =
gtol, optimistix's rtol = atol, the Gauss-Newton step test |dx| < tol (tol + |x|)). For each: the first
call (compiling included, on --first curves), the time per curve of a second call on all of them, how
many converged, and the largest difference of its fitted parameters from scipy's on the subset.

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


def parse(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0], formatter_class=HelpFormatter)
    p.add_argument("--curves", type=int, default=100_000, help="curves fitted by the batch methods")
    p.add_argument("--scipy", type=int, default=300, help="curves of the subset scipy fits one by one")
    p.add_argument("--first", type=int, default=1000, help="curves of the first (compiling) call")
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


def optimistix_fits(t, y, x0, device):
    import jax
    import jax.numpy as jnp
    import optimistix as optx
    solver = optx.LevenbergMarquardt(rtol=TOL, atol=TOL)
    tj = jnp.asarray(t)

    def one(start, target):
        sol = optx.least_squares(lambda p, a: p[0] * jnp.exp(-p[1] * tj) + p[2] - a, solver, start, args=target,
                                 max_steps=400, throw=False)
        return sol.value, sol.result == optx.RESULTS.successful

    with jax.default_device(_jax_device(device)):
        x, ok = jax.jit(jax.vmap(one))(jnp.asarray(x0), jnp.asarray(y))
        return np.asarray(x), np.asarray(ok)


def jnp_gauss_newton(t, y, x0, device, max_steps: int = 100):
    """All curves at once: r and J (jax.jacfwd) of the batch, (J^T J) dx = -J^T r by jnp.linalg.solve,
    until every curve's step is below tolerance; no damping (curves whose step blows up fail)."""
    import jax
    import jax.numpy as jnp
    tj = jnp.asarray(t)

    def residual(p, a):
        return p[0] * jnp.exp(-p[1] * tj) + p[2] - a

    jac = jax.vmap(jax.jacfwd(residual))

    @jax.jit
    def solve(x, target):
        def step(state):
            x, k, done = state
            r = jax.vmap(residual)(x, target)
            J = jac(x, target)
            dx = -jnp.linalg.solve(jnp.einsum("bmi,bmj->bij", J, J), jnp.einsum("bmi,bm->bi", J, r)[..., None])[..., 0]
            small = jnp.linalg.norm(dx, axis=1) < TOL * (TOL + jnp.linalg.norm(x, axis=1))
            x = jnp.where(done[:, None], x, x + dx)
            return x, k + 1, done | small | ~jnp.all(jnp.isfinite(dx), axis=1)

        x, _, done = jax.lax.while_loop(lambda s: (s[1] < max_steps) & ~jnp.all(s[2]), step,
                                        (x, 0, jnp.zeros(x.shape[0], bool)))
        return x, done & jnp.all(jnp.isfinite(x), axis=1)

    with jax.default_device(_jax_device(device)):
        x, ok = solve(jnp.asarray(x0), jnp.asarray(y))
        return np.asarray(x), np.asarray(ok)


def measure(name, run, t, y, x0, first: int):
    began = time.perf_counter()
    run(t, y[:first], x0[:first])
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
    runs = [measure("adoffload.optimize (lm)", lambda t, y, x0: adoffload_fits(t, y, x0, args.device), t, y, x0,
                    args.first)]
    try:
        import optimistix  # noqa: F401
    except ImportError:
        print("note: optimistix is not installed here (pip install optimistix): left out")
        args.skip.append("optimistix")
    if "optimistix" not in args.skip:
        runs.append(measure("optimistix LM, vmap", lambda t, y, x0: optimistix_fits(t, y, x0, args.device), t, y, x0,
                            args.first))
    if "jnp" not in args.skip:
        runs.append(measure("Gauss-Newton in jnp", lambda t, y, x0: jnp_gauss_newton(t, y, x0, args.device), t, y, x0,
                            args.first))
    print(f"{args.curves} curves of {args.points} points, tolerance {TOL:g}, on {args.device}")
    print(f"{'method':28s} {'first call s':>12s} {'us/curve':>10s} {'converged':>10s} {'max |x - scipy|':>16s}")
    print(f"{'scipy least_squares (lm)':28s} {'-':>12s} {scipy_seconds / len(reference) * 1e6:10.1f} "
          f"{reference_ok.mean():10.4f} {'-':>16s}   ({len(reference)} curves, one by one)")
    rows = []
    for run in runs:
        both = run["ok"][subset] & reference_ok
        difference = float(np.abs(run["x"][subset][both] - reference[both]).max()) if both.any() else float("nan")
        print(f"{run['name']:28s} {run['first_call_s']:12.2f} {run['us_per_curve']:10.2f} {run['ok'].mean():10.4f} "
              f"{difference:16.2e}")
        rows.append({k: v for k, v in run.items() if k not in ("x", "ok")} | {"converged": float(run["ok"].mean()),
                                                                             "max_difference": difference})
    return {"scipy_us_per_curve": scipy_seconds / len(reference) * 1e6, "runs": rows}


if __name__ == "__main__":
    main()
