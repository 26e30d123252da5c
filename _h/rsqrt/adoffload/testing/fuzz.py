"""Differential fuzzing: random kernels compiled for the host vs the reference interpreter.

For each case (``check_case``):

1. **values** -- the compiled kernel and the reference (the same source run as Python per
   thread) agree on every output (floats to 1e-9 relative, integers exactly);
2. **identity** -- forward mode (``ado.jvp``) and reverse mode (``ado.vjp``) satisfy the
   inner-product identity ⟨J v, g⟩ = ⟨v, Jᵀ g⟩ for random v, g;
3. **finite differences** -- central differences of the reference along v match J v and
   ⟨·, g⟩ of them match ⟨v, Jᵀ g⟩, whenever both perturbed runs took the same branches and
   kinks as the base run (the reference records them); otherwise the case counts as skipped
   for this check.

Any exception from compiling or launching a valid kernel is a failure too. Long runs::

    python -m adoffload.testing.fuzz --cases 500 --seed 1
"""
from __future__ import annotations

import argparse
import importlib.util
import os
import random
import sys
import tempfile
import time
import traceback
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .generator import DIFFERENTIABLE_INPUTS, FLOAT_OUTPUTS, GeneratedKernel, generate
from .reference import ReferenceKernel

VALUE_RTOL, VALUE_ATOL = 1e-9, 1e-9
FD_STEP, FD_RTOL, FD_ATOL = 1e-5, 1e-5, 1e-6
IDENTITY_RTOL = 1e-9
MAX_THREADS = 8


@dataclass
class CaseResult:
    """What one case checked (``checks``: name -> count) and what went wrong (``failures``)."""
    seed: int
    source: str
    failures: list[str] = field(default_factory=list)
    checks: Counter = field(default_factory=Counter)

    @property
    def ok(self) -> bool:
        return not self.failures


# ---- building and running --------------------------------------------------------------

def load_kernel(kernel: GeneratedKernel, folder: Path, tag: str):
    """Write the source to a file (the front end reads kernels from files) and compile it."""
    import adoffload as ado
    path = folder / f"adoffload_fuzz_{tag}.py"
    path.write_text("import adoffload as ado\n\n\n" + kernel.source)
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return ado.kernel(getattr(module, kernel.name))


def random_inputs(rng: np.random.Generator) -> dict:
    n = int(rng.integers(1, MAX_THREADS + 1))
    return {"a": np.float64(rng.uniform(-1.5, 1.5)), "x": rng.uniform(-1, 1, n), "w": rng.uniform(-1, 1, n),
            "idx": rng.integers(0, n, n).astype(np.int64), "z": rng.uniform(-1, 1, n)}


def fresh_outputs(n: int) -> dict:
    return {"out": np.zeros(n), "acc": np.zeros(n), "iout": np.zeros(n, np.int64)}


def _primal_args(inputs: dict, outputs: dict) -> list:
    z = np.array(inputs["z"], copy=True)
    return [inputs["a"], inputs["x"].copy(), inputs["w"].copy(), inputs["idx"].copy(), z,
            outputs["out"], outputs["acc"], outputs["iout"]]


def run_reference(reference: ReferenceKernel, inputs: dict) -> tuple[dict, list]:
    n = len(inputs["x"])
    outputs = fresh_outputs(n)
    args = _primal_args(inputs, outputs)
    trace = reference.run(args, n)
    outputs["z"] = args[4]
    return outputs, trace


def run_compiled(kernel, inputs: dict) -> dict:
    n = len(inputs["x"])
    outputs = fresh_outputs(n)
    args = _primal_args(inputs, outputs)
    kernel(*args, grid=n)
    outputs["z"] = args[4]
    return outputs


def shifted(inputs: dict, tangent: dict, h: float) -> dict:
    moved = dict(inputs)
    for name in DIFFERENTIABLE_INPUTS:
        moved[name] = inputs[name] + h * tangent[name]
    moved["a"] = np.float64(moved["a"])
    return moved


# ---- the checks ----------------------------------------------------------------------------

def _close(name: str, got, want, rtol: float, atol: float, failures: list, what: str) -> None:
    got, want = np.asarray(got), np.asarray(want)
    if got.dtype.kind in "iu":
        if not np.array_equal(got, want):
            failures.append(f"{what}: {name} differs: compiled {got.tolist()} vs {want.tolist()}")
        return
    same_nan = np.isnan(got) == np.isnan(want)
    ok = same_nan & (np.isnan(got) | np.isclose(got, want, rtol=rtol, atol=atol))
    if not ok.all():
        failures.append(f"{what}: {name} differs: compiled {got.tolist()} vs {want.tolist()}")


def _inner(u: dict, v: dict, names) -> tuple[float, float]:
    """⟨u, v⟩ over ``names`` and the sum of |terms| (the scale for a tolerance)."""
    total = scale = 0.0
    for name in names:
        products = np.asarray(u[name], np.float64) * np.asarray(v[name], np.float64)
        total += float(products.sum())
        scale += float(np.abs(products).sum())
    return total, scale


def check_case(kernel: GeneratedKernel, seed: int, folder: Path) -> CaseResult:
    """Run every check on one generated kernel with inputs drawn from ``seed``."""
    import adoffload as ado
    result = CaseResult(seed, kernel.source)
    failures = result.failures
    rng = np.random.default_rng(seed)
    inputs = random_inputs(rng)
    n = len(inputs["x"])
    reference = ReferenceKernel(kernel.source, kernel.name)
    want, base_trace = run_reference(reference, inputs)
    try:
        compiled = load_kernel(kernel, folder, f"{seed}_{os.getpid()}")
        got = run_compiled(compiled, inputs)
    except Exception as exc:        # noqa: BLE001 -- any exception on a valid kernel is a finding
        failures.append(f"primal: {type(exc).__name__}: {exc}")
        return result
    for name in ("out", "acc", "z", "iout"):
        _close(name, got[name], want[name], VALUE_RTOL, VALUE_ATOL, failures, "values")
    result.checks["values"] += 1
    if failures or not all(np.isfinite(want[k]).all() for k in FLOAT_OUTPUTS):
        result.checks["derivatives skipped (non-finite)"] += not failures
        return result

    tangent = {"a": np.float64(rng.normal()), "x": rng.normal(size=n), "w": rng.normal(size=n),
               "z": rng.normal(size=n)}
    cotangent = {name: rng.normal(size=n) for name in FLOAT_OUTPUTS}
    try:
        jv = forward(ado.jvp(compiled, list(DIFFERENTIABLE_INPUTS)), inputs, tangent, got, failures)
        vjt = reverse(ado.vjp(compiled, list(DIFFERENTIABLE_INPUTS)), inputs, cotangent)
    except Exception as exc:        # noqa: BLE001
        failures.append(f"derivatives: {type(exc).__name__}: {exc}\n{traceback.format_exc(limit=3)}")
        return result
    lhs, lscale = _inner(jv, cotangent, FLOAT_OUTPUTS)
    rhs, rscale = _inner(tangent, vjt, DIFFERENTIABLE_INPUTS)
    if abs(lhs - rhs) > IDENTITY_RTOL * (lscale + rscale) + 1e-12:
        failures.append(f"identity: <J v, g> = {lhs!r} but <v, J^T g> = {rhs!r}")
    result.checks["identity"] += 1

    plus, trace_plus = run_reference(reference, shifted(inputs, tangent, FD_STEP))
    minus, trace_minus = run_reference(reference, shifted(inputs, tangent, -FD_STEP))
    if trace_plus != base_trace or trace_minus != base_trace:
        result.checks["finite differences skipped (path changed)"] += 1
        return result
    fd = {k: (plus[k] - minus[k]) / (2 * FD_STEP) for k in FLOAT_OUTPUTS}
    for name in FLOAT_OUTPUTS:
        _close(name, jv[name], fd[name], FD_RTOL, FD_ATOL, failures, "forward vs finite differences")
    fd_dot, fd_scale = _inner(fd, cotangent, FLOAT_OUTPUTS)
    if abs(fd_dot - rhs) > FD_RTOL * (fd_scale + rscale) + FD_ATOL * n:
        failures.append(f"reverse vs finite differences: <FD v, g> = {fd_dot!r} but <v, J^T g> = {rhs!r}")
    result.checks["finite differences"] += 1
    return result


def forward(jvp_kernel, inputs: dict, tangent: dict, primal: dict, failures: list) -> dict:
    """J v from the forward kernel (its primal outputs are checked against ``primal`` too)."""
    n = len(inputs["x"])
    outputs = fresh_outputs(n)
    args = _primal_args(inputs, outputs)
    d_z = tangent["z"].copy()
    d = {"d_a": tangent["a"], "d_x": tangent["x"].copy(), "d_w": tangent["w"].copy(), "d_z": d_z,
         "d_out": np.zeros(n), "d_acc": np.zeros(n)}
    jvp_kernel(*args, **d, grid=n)
    outputs["z"] = args[4]
    for name in ("out", "acc", "z", "iout"):
        _close(name, outputs[name], primal[name], VALUE_RTOL, VALUE_ATOL, failures, "forward kernel's primal")
    return {"out": d["d_out"], "acc": d["d_acc"], "z": d_z}


def reverse(vjp_kernel, inputs: dict, cotangent: dict) -> dict:
    """Jᵀ g from the reverse kernel (gradients accumulated into zeros)."""
    n = len(inputs["x"])
    args = _primal_args(inputs, fresh_outputs(n))
    d = {"d_a": np.zeros(1), "d_x": np.zeros(n), "d_w": np.zeros(n), "d_z": cotangent["z"].copy(),
         "d_out": cotangent["out"].copy(), "d_acc": cotangent["acc"].copy()}
    vjp_kernel(*args, **d, grid=n)
    return {"a": d["d_a"][0], "x": d["d_x"], "w": d["d_w"], "z": d["d_z"]}


# ---- many cases ------------------------------------------------------------------------

def case_seed(seed: int, index: int) -> int:
    return seed * 1_000_003 + index


def run_cases(cases: int, seed: int, folder: Path, *, max_depth: int = 3, max_statements: int = 6,
              on_result=None) -> list[CaseResult]:
    results = []
    for index in range(cases):
        s = case_seed(seed, index)
        kernel = generate(random.Random(s), max_depth=max_depth, max_statements=max_statements)
        (folder / "current_case.py").write_text(f"# seed {s}\n{kernel.source}")   # survives a crash
        result = check_case(kernel, s, folder)
        results.append(result)
        if on_result is not None:
            on_result(index, result)
    return results


def summarize(results: list[CaseResult]) -> str:
    checks = Counter()
    for r in results:
        checks.update(r.checks)
    failed = [r for r in results if not r.ok]
    lines = [f"cases tried: {len(results)}", f"failures found: {len(failed)}"]
    lines += [f"  {name}: {count}" for name, count in sorted(checks.items())]
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m adoffload.testing.fuzz", description=__doc__.split("\n")[0])
    parser.add_argument("--cases", type=int, default=100)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--max-depth", type=int, default=3)
    parser.add_argument("--max-statements", type=int, default=6)
    parser.add_argument("--show", action="store_true", help="print every kernel's source")
    args = parser.parse_args(argv)
    import faulthandler
    try:
        faulthandler.enable()                 # a crash still names the case (current_case.py)
    except (OSError, ValueError, AttributeError):
        pass                                  # stderr without a file descriptor (captured)
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="adoffload-fuzz-") as tmp:
        folder = Path(tmp)
        os.environ.setdefault("ADOFFLOAD_CACHE_DIR", str(folder / "cache"))   # keep the user cache clean
        sys.path.insert(0, tmp)

        def report(index, result):
            if args.show or not result.ok:
                print(f"--- case {index} (seed {result.seed}): {'ok' if result.ok else 'FAILED'}")
                print(result.source)
                for failure in result.failures:
                    print("  " + failure)
            elif (index + 1) % 50 == 0:
                print(f"... {index + 1} cases", flush=True)

        results = run_cases(args.cases, args.seed, folder, max_depth=args.max_depth,
                            max_statements=args.max_statements, on_result=report)
    print(summarize(results))
    print(f"time: {time.perf_counter() - started:.1f} s")
    return 1 if any(not r.ok for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
