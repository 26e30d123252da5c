"""A million noisy decay curves fitted at once: first-order kinetics with a baseline, y(t) = A exp(-k t) + c.

Each curve is one small nonlinear least-squares problem (3 parameters, --points samples with
Gaussian noise). All of them go through ``adoffload.optimize.least_squares`` (Levenberg-Marquardt),
in chunks: one kernel launch per chunk in which every thread fits one curve, the Jacobian from
in-kernel forward-mode AD of the residual helper. Prints how many fits converged and how close the
fitted parameters are to the true ones, and plots fitted against true.

    python examples/fitting/decay_fits.py                      # 10^6 curves on the host CPU
    python examples/fitting/decay_fits.py --device cuda        # on an NVIDIA GPU
    python examples/fitting/benchmark.py                       # against optimistix, jnp and scipy
"""
from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "chemistry"))
from common import HelpFormatter, output_folder, progress, save_plot  # noqa: E402

import numpy as np  # noqa: E402

import adoffload as ado  # noqa: E402

PARAMETERS = ("A", "k", "c")
START = (1.0, 1.0, 0.0)          # the same start for every curve


@ado.func
def decay(x, t, y, r):
    """Residuals of y ~ x0 exp(-x1 t) + x2 (written into r)."""
    for j in range(len(r)):
        r[j] = x[0] * ado.exp(-x[1] * t[j]) + x[2] - y[j]


def make_data(count: int, points: int, noise: float, seed: int):
    """(t, true parameters (count, 3), noisy curves (count, points)): amplitudes 0.5-2, rates 0.2-3,
    baselines -0.5-0.5, Gaussian noise of ``noise`` times the amplitude."""
    rng = np.random.default_rng(seed)
    t = np.linspace(0.0, 5.0, points)
    true = np.stack([rng.uniform(0.5, 2.0, count), rng.uniform(0.2, 3.0, count), rng.uniform(-0.5, 0.5, count)], 1)
    y = true[:, :1] * np.exp(-true[:, 1:2] * t) + true[:, 2:]
    y += noise * true[:, :1] * rng.standard_normal((count, points))
    return t, true, y


def fit(t, y, *, device: str = "cpu", chunk: int = 1 << 17, method: str = "lm", tol: float = 1e-8, report=None):
    """Fit every curve of ``y`` (count, points) with adoffload.optimize.least_squares, ``chunk`` per launch."""
    from adoffload.optimize import least_squares, shared
    count = y.shape[0]
    x = np.empty((count, 3))
    status = np.empty(count, np.int64)
    cost = np.empty(count)
    start = np.tile(START, (min(chunk, count), 1))
    for begin in range(0, count, chunk):
        end = min(begin + chunk, count)
        result = least_squares(decay, start[:end - begin], args=(shared(t), y[begin:end]), m=len(t), method=method,
                               ftol=tol, xtol=tol, gtol=tol, device=device)
        x[begin:end], status[begin:end], cost[begin:end] = result.x, result.status, result.cost
        if report is not None:
            report(end, count)
    return x, status, cost


def parse(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0], formatter_class=HelpFormatter)
    p.add_argument("--curves", type=int, default=1_000_000, help="number of curves (problems)")
    p.add_argument("--points", type=int, default=40, help="samples per curve")
    p.add_argument("--noise", type=float, default=0.02, help="noise, relative to the amplitude")
    p.add_argument("--device", default="cpu", help="where the fits run: cpu, cuda, cuda:N, hip")
    p.add_argument("--method", choices=["lm", "gn"], default="lm", help="Levenberg-Marquardt or Gauss-Newton")
    p.add_argument("--chunk", type=int, default=1 << 17, help="curves per kernel launch")
    p.add_argument("--seed", type=int, default=0, help="random seed")
    p.add_argument("--out", default="results/decay_fits", help="folder for the plot (created if missing)")
    return p.parse_args(argv)


def main(argv=None):
    args = parse(argv)
    t, true, y = make_data(args.curves, args.points, args.noise, args.seed)
    print(f"{args.curves} decay curves of {args.points} points, noise {args.noise:g}; least_squares(method="
          f"'{args.method}') on {args.device}, {args.chunk} curves per launch")
    began = time.perf_counter()
    x, status, cost = fit(t, y, device=args.device, chunk=args.chunk, method=args.method,
                          report=progress("fitting"))
    seconds = time.perf_counter() - began
    converged = status > 0
    print(f"converged {int(converged.sum())}/{args.curves}; time {seconds:.1f} s "
          f"({seconds / args.curves * 1e6:.2f} us per fit, compiling included)")
    errors = {}
    for k, name in enumerate(PARAMETERS):
        error = np.abs(x[converged, k] - true[converged, k])
        errors[name] = float(np.median(error))
        print(f"  {name}: median |fitted - true| {errors[name]:.3g}")
    out = output_folder(args.out)
    plot = save_plot(os.path.join(out, "fitted_vs_true.png"), lambda fig: _draw(fig, true, x, converged),
                     size=(10, 3.6))
    if plot:
        print(f"plot: {plot}")
    print(f"output folder: {out}")
    return {"x": x, "true": true, "status": status, "seconds": seconds, "median_errors": errors}


def _draw(fig, true, fitted, converged, shown: int = 20000):
    """One panel per parameter: fitted against true for (up to) ``shown`` converged curves."""
    rng = np.random.default_rng(0)
    rows = np.flatnonzero(converged)
    rows = rows if len(rows) <= shown else rng.choice(rows, shown, replace=False)
    for k, axis in enumerate(fig.subplots(1, 3)):
        axis.scatter(true[rows, k], fitted[rows, k], s=1, alpha=0.3, rasterized=True)
        low, high = true[rows, k].min(), true[rows, k].max()
        axis.plot([low, high], [low, high], "k--", linewidth=0.8)
        axis.set_xlabel(f"true {PARAMETERS[k]}")
        axis.set_ylabel(f"fitted {PARAMETERS[k]}")
    fig.suptitle(f"{int(converged.sum())} fits of A exp(-k t) + c ({len(rows)} shown)")


if __name__ == "__main__":
    main()
