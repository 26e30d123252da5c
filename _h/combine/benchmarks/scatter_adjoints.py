"""Adjoint kernels with scatter (issue #12 items 3 and 6), timed on the GPU.

    python benchmarks/scatter_adjoints.py --label deferred --out DIR

* LJ energy + forces through the energy kernel's adjoint (``jax.value_and_grad`` of
  ``ForceField.energy``) and the force-matching gradient (reverse over reverse), at 108,000 and
  1,048,576 atoms, with the forces' largest difference from the plain-JAX reference;
* ``basic_if_quad`` and ``lcals_hydro_1d`` (RAJAPerf) at 2^26: primal and vjp launch times.

Run it once with ``ADOFFLOAD_DEFER_ADDS=0`` (per-site shadow updates: an f64 atomic per
neighbor into d_pos[i]) and once without (summed per thread, one atomic after the loop), each
with its own ``ADOFFLOAD_CACHE_DIR`` (derived kernels are cached on disk by their base IR):
benchmarks/gpu_scatter.sh does both. Appends rows to DIR/scatter_adjoints.csv (one timer:
harness.time_calls, median and IQR of 20 repetitions of 10 calls).
"""
from __future__ import annotations

import argparse
import csv
import os
import sys
from pathlib import Path

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))

COLUMNS = ["label", "defer_adds", "measure", "size", "median_ms", "iqr_ms", "min_ms", "max_ms", "max_force_diff",
           "error"]


def _timing(t) -> dict:
    return dict(median_ms=t.median_ms, iqr_ms=t.q3_ms - t.q1_ms, min_ms=t.min_ms, max_ms=t.max_ms)


def lj_rows(sizes, device, rows, measure: str) -> None:
    """``measure``: chemistry.EF_ADJOINT (energy and forces through the energy kernel's adjoint)
    or chemistry.FIT (the force-matching gradient: reverse over reverse)."""
    import jax
    import jax.numpy as jnp
    from chemistry import EF_ADJOINT, System
    from harness import time_jax
    for n in sizes:
        system = System(n, device)
        ff = system.forcefield("adoffload")
        pos, neighbors = system.pos, system.nl.neighbors
        try:
            if measure == EF_ADJOINT:
                fn = jax.jit(jax.value_and_grad(ff.energy))
                rows.append(dict(measure=measure, size=system.n, **_timing(time_jax(fn, pos, neighbors)),
                                 max_force_diff=system.force_diff(-fn(pos, neighbors)[1])))
            else:
                fn = jax.jit(jax.grad(lambda params: jnp.mean(ff.forces(pos, neighbors, params) ** 2)))
                rows.append(dict(measure=measure, size=system.n, **_timing(time_jax(fn, ff.parameters))))
        except Exception as exc:        # noqa: BLE001 - a failing case is a row
            rows.append(dict(measure=measure, size=system.n, error=f"{type(exc).__name__}: {str(exc)[:300]}"))
        del system
        jax.clear_caches()


def rajaperf_rows(rows, names=("basic_if_quad", "lcals_hydro_1d"), n=1 << 26) -> None:
    import numpy as np
    import adoffload as ado
    from harness import Gpu
    from rajaperf import OurLaunch, _derived_values
    from rajaperf_kernels import CASES
    gpu = Gpu()
    modules: dict = {}            # one driver JIT per distinct PTX (rajaperf.OurLaunch)
    for case in [c for c in CASES if c.name in names]:
        host = case.make(n, np.random.default_rng(0))
        grid = case.grid(n)
        for mode in ("primal", "vjp"):
            k = case.kernel if mode == "primal" else ado.vjp(case.kernel, case.wrt)
            values = host if mode == "primal" else _derived_values(k, host, "vjp")
            dev = gpu.upload(values)
            try:
                rows.append(dict(measure=f"{case.name} {mode}", size=n,
                                 **_timing(gpu.time(OurLaunch(gpu, k, dev, values, grid, modules)))))
            except Exception as exc:    # noqa: BLE001
                rows.append(dict(measure=f"{case.name} {mode}", size=n, error=f"{type(exc).__name__}: {str(exc)[:300]}"))
            finally:
                gpu.free(dev)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--label", required=True)
    parser.add_argument("--sizes", type=int, nargs="*", default=[108_000, 1_048_576])
    args = parser.parse_args(argv)
    import jax
    jax.config.update("jax_enable_x64", True)
    try:
        device = jax.devices("gpu")[0]
    except RuntimeError:
        device = None
    from chemistry import EF_ADJOINT, FIT
    rows = _Rows(Path(args.out), args.label)
    lj_rows(args.sizes, device or jax.devices("cpu")[0], rows, EF_ADJOINT)
    if device is not None:
        rajaperf_rows(rows)
    lj_rows(args.sizes, device or jax.devices("cpu")[0], rows, FIT)
    return 0


class _Rows(list):
    """Rows appended to DIR/scatter_adjoints.csv as they come (a run cut short keeps its rows)."""

    def __init__(self, out: Path, label: str):
        super().__init__()
        out.mkdir(parents=True, exist_ok=True)
        self.path, self.label = out / "scatter_adjoints.csv", label

    def append(self, r: dict) -> None:
        r = {"label": self.label, "defer_adds": os.environ.get("ADOFFLOAD_DEFER_ADDS", "1"), **r}
        super().append(r)
        new = not self.path.exists()
        with self.path.open("a", newline="") as f:
            writer = csv.DictWriter(f, COLUMNS)
            if new:
                writer.writeheader()
            writer.writerow(r)
        print(r, flush=True)


if __name__ == "__main__":
    sys.exit(main())
