"""The kernel table the device suite runs: RAJAPerf cases, two front-end cases, the AD kernels.

A ``DeviceCase`` knows how to make fresh inputs, its grid, the parameters its derivatives
are taken with respect to and (where one exists) a numpy reference for the primal. Every
case runs in three modes: ``primal``, ``jvp`` and ``vjp`` (the last two only with ``wrt``);
``variant`` gives the kernel of a mode and ``arguments`` its full argument dict, shadows
included, built deterministically from a seed so two devices get identical inputs.
"""
from __future__ import annotations

import importlib.util
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np

import adoffload as ado

from . import kernels as K

ROOT = Path(__file__).resolve().parents[2]
MODES = ("primal", "jvp", "vjp")


def _load(name: str, path: Path):
    """Import a module by path once (benchmarks/ is not a package)."""
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module          # dataclasses look their module up while it executes
        spec.loader.exec_module(module)
    return sys.modules[name]


@dataclass(frozen=True)
class DeviceCase:
    name: str
    kernel: object
    make: Callable[[np.random.Generator], dict]
    grid: tuple
    wrt: tuple = ()
    reference: Callable[[dict], dict] | None = None     # inputs -> {output: expected primal}
    rtol: float = 1e-10                                   # device vs host, relative ...
    atol: float = 1e-12                                   # ... and absolute, times the output's scale
    widths: tuple = (1,)                                  # JVP vector widths to run

    @property
    def modes(self) -> tuple:
        return MODES if self.wrt else ("primal",)

    def __repr__(self) -> str:
        return self.name


def variant(case: DeviceCase, mode: str, width: int = 1):
    """The kernel that ``mode`` runs: the primal, ``ado.jvp`` or ``ado.vjp`` of it."""
    if mode == "primal":
        return case.kernel
    if mode == "jvp":
        return ado.jvp(case.kernel, list(case.wrt), width=width)
    return ado.vjp(case.kernel, list(case.wrt))


def arguments(case: DeviceCase, mode: str, seed: int = 0, width: int = 1) -> dict:
    """Fresh arguments for ``variant(case, mode)``: primal inputs, then shadows.

    JVP: tangents for the shadowed inputs (random), zeros for output tangents. VJP: random
    seeds for the adjoints of arrays the primal writes, zeros for pure inputs' adjoints and
    the one-element accumulators of active scalars.
    """
    rng = np.random.default_rng(seed)
    values = case.make(rng)
    if mode == "primal":
        return values
    k = variant(case, mode, width)
    primal = {p.name: p for p in case.kernel.signature.params}
    for p in k.signature.visible_params[len(primal):]:
        base = primal[p.name[2:]]
        value = values[base.name]
        dtype = base.dtype.dtype
        if mode == "jvp":
            shape = np.shape(value) if width == 1 else (width,) + np.shape(value)
            wanted = base.type.reads if base.is_array else True
            values[p.name] = (rng.standard_normal(shape).astype(dtype) if wanted
                              else np.zeros(shape, dtype))
            if not p.is_array:
                values[p.name] = float(values[p.name])
        elif base.is_array:
            values[p.name] = (rng.standard_normal(value.shape).astype(dtype) if base.type.writes
                              else np.zeros_like(value))
        else:
            values[p.name] = np.zeros(1, dtype)
    return values


def copy(values: dict) -> dict:
    return {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in values.items()}


def run(kernel, values: dict, grid, device: str) -> dict:
    """Run ``kernel`` on a copy of ``values``; return the copy (arrays hold the results)."""
    values = copy(values)
    kernel(**values, grid=grid, device=device)
    return values


def assert_same(name: str, got: dict, expected: dict, rtol: float, atol: float) -> None:
    """Every array equal (integers) or close (floats, atol scaled by the array's magnitude)."""
    for key, want in expected.items():
        if not isinstance(want, np.ndarray):
            continue
        have = got[key]
        message = f"{name}: array '{key}' differs between devices"
        if np.issubdtype(want.dtype, np.floating):
            scale = float(np.max(np.abs(want))) if want.size else 0.0
            np.testing.assert_allclose(have, want, rtol=rtol, atol=atol * max(scale, 1.0), err_msg=message)
        else:
            np.testing.assert_array_equal(have, want, err_msg=message)


# --- the cases -------------------------------------------------------------------------------

N = 1000               # not a multiple of any block size: the last block is partial


def _rajaperf_cases() -> list[DeviceCase]:
    bench = _load("adoffload_bench_rajaperf_kernels", ROOT / "benchmarks" / "kernels" / "rajaperf.py")
    cases = []
    for c in bench.CASES:
        cases.append(DeviceCase(f"rajaperf.{c.name}", c.kernel, lambda rng, c=c: c.make(N, rng), c.grid(N),
                                tuple(c.wrt), c.numpy))
    return cases


def _frontend_cases() -> list[DeviceCase]:
    front = _load("adoffload_frontend_rajaperf_kernels", ROOT / "tests" / "frontend" / "rajaperf_kernels.py")
    nested, predict = front.KERNELS["NESTED_INIT"], front.KERNELS["DIFF_PREDICT"]
    n = 37
    return [
        DeviceCase("frontend.nested_init_3d", ado.kernel(nested.kernel), lambda rng: nested.make_args(n, rng),
                   nested.grid(n), (), lambda a: front.reference("NESTED_INIT", a, n)),
        DeviceCase("frontend.diff_predict_2d", ado.kernel(predict.kernel), lambda rng: predict.make_args(N, rng),
                   (N,), ("px", "cx"), predict.reference),
    ]


def _uniform(rng, shape, lo=0.5, hi=1.5, dtype=np.float64):
    return rng.uniform(lo, hi, shape).astype(dtype)


def _ad_cases() -> list[DeviceCase]:
    f32 = np.float32
    return [
        DeviceCase("ad.saxpy_f32", K.saxpy,
                   lambda r: dict(a=1.5, x=_uniform(r, N, dtype=f32), y=_uniform(r, N, dtype=f32),
                                  out=np.zeros(N, f32)),
                   (N,), ("a", "x", "y"), lambda d: dict(out=d["a"] * d["x"] + d["y"]),
                   # d_a sums 1000 f32 products in a device-dependent order
                   rtol=2e-5, atol=2e-5, widths=(1, 2)),
        DeviceCase("ad.lj_all_pairs", K.lj_all_pairs,
                   lambda r: dict(pos=K.lattice(64, r), sigma=1.0, epsilon=0.5, e=np.zeros(64)),
                   (64,), ("pos", "sigma", "epsilon"),
                   lambda d: dict(e=K.lj_reference(d["pos"], d["sigma"], d["epsilon"])), rtol=1e-9, atol=1e-11),
        DeviceCase("ad.recurrence", K.recurrence,
                   lambda r: dict(x=_uniform(r, 300, 0.2, 1.2), steps=r.integers(0, 13, 300), out=np.zeros(300)),
                   (300,), ("x",), lambda d: dict(out=K.recurrence_reference(d["x"], d["steps"])),
                   rtol=1e-11, atol=1e-13),
        DeviceCase("ad.sum_of_squares", K.sum_of_squares,
                   lambda r: dict(x=_uniform(r, 4099), w=0.75, total=np.array([0.25])),
                   (4099,), ("x", "w"), lambda d: dict(total=d["total"] + d["w"] * np.sum(d["x"] ** 2)),
                   rtol=1e-10, atol=1e-12),
        DeviceCase("ad.grid2_scale", K.grid2_scale,
                   lambda r: dict(x=_uniform(r, (33, 47)), w=_uniform(r, 47), c=0.125, out=np.zeros((33, 47))),
                   (33, 47), ("x", "w", "c"),
                   lambda d: dict(out=d["x"] * d["w"] ** 2 + d["c"] * np.subtract.outer(np.arange(33), np.arange(47))),
                   widths=(1, 2)),
        DeviceCase("ad.grid3_square", K.grid3_square,
                   lambda r: dict(x=_uniform(r, (5, 7, 9), dtype=f32), out=np.zeros((5, 7, 9), f32)),
                   (5, 7, 9), ("x",),
                   lambda d: dict(out=d["x"] ** 2 + np.add.outer(np.add.outer(np.arange(5), 2 * np.arange(7)),
                                                                3 * np.arange(9)).astype(f32)),
                   rtol=1e-6, atol=1e-6),
        DeviceCase("ad.math_f32", K.math_f32,
                   lambda r: dict(x=_uniform(r, N, dtype=f32), y=_uniform(r, N, dtype=f32), out=np.zeros(N, f32)),
                   (N,), ("x", "y"), lambda d: dict(out=K.math_reference(d["x"], d["y"])),
                   rtol=2e-5, atol=2e-6),
        DeviceCase("ad.math_f64", K.math_f64,
                   lambda r: dict(x=_uniform(r, N), y=_uniform(r, N), out=np.zeros(N)),
                   (N,), ("x", "y"), lambda d: dict(out=K.math_reference(d["x"], d["y"])),
                   rtol=1e-12, atol=1e-14, widths=(1, 2)),
    ]


CASES: list[DeviceCase] = _rajaperf_cases() + _frontend_cases() + _ad_cases()
BY_NAME = {c.name: c for c in CASES}


def runs() -> list[tuple[str, str, int]]:
    """(case name, mode, JVP width) for every run of the table."""
    out = []
    for case in CASES:
        for mode in case.modes:
            for width in (case.widths if mode == "jvp" else (1,)):
                out.append((case.name, mode, width))
    return out


def run_id(run: tuple) -> str:
    name, mode, width = run
    return f"{name}-{mode}" + (f"{width}" if width > 1 else "")
