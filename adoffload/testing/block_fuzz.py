"""Random block kernels (block_generator.py) against both AD oracles, on the host CPU.

For each case (``check_case``) one of these outcomes:

* ``pass`` -- for random directions over every float input (a, x, w, z) and random output
  weights: ``ado.jvp`` matches central differences of the primal (or the differences are not
  smooth at the point: two step sizes disagree with each other, noted ``fd skipped``), the
  inner-product identity <J v, w> = <v, J^T w> holds between ``ado.jvp`` and ``ado.vjp``,
  ``ado.vjp(..., deterministic=True)`` equals the default within rounding (or refuses the kernel
  naming the line: noted), the derivative
  kernels' primal outputs equal the primal's, and (``jax=True``) ``jax.jvp``/``jax.vjp`` of
  ``ado.jax_kernel`` equal the numpy launches;
* ``refused`` -- an ``adoffload.Error`` that names the kernel's source line (a clear refusal);
* a failure: ``mismatch`` (a derivative disagrees: the worst bug), ``crash`` (any other
  exception), ``unclear refusal`` (an adoffload.Error naming no line), ``non-finite`` (the
  generator's magnitudes were not bounded: a generator bug).

Long runs (the command line prints the source of every non-pass case)::

    python -m adoffload.testing.block_fuzz --count 200 --seed 1
    python -m adoffload.testing.block_fuzz --count 200 --seed 1 --wave64    # AMD's 64-lane wavefronts
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

from .block_generator import DIFFERENTIABLE_INPUTS, FLOAT_OUTPUTS, GeneratedBlockKernel, generate

FD_STEP = 1e-6
FD_RTOL, FD_ATOL = 1e-5, 1e-6
IDENTITY_RTOL = 1e-10
DETERMINISTIC_RTOL = 1e-10
FAILURES = ("mismatch", "crash", "unclear refusal", "non-finite")


@dataclass
class CaseResult:
    """The outcome of one case, what went wrong (``details``) and the kernel."""
    seed: int
    source: str
    outcome: str = "pass"
    details: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)      # checks skipped or refused on a passing case

    @property
    def ok(self) -> bool:
        return self.outcome not in FAILURES


def load_kernel(kernel: GeneratedBlockKernel, folder: Path, tag: str):
    """Write the source to a file (the front end reads kernels from files) and import it."""
    path = folder / f"adoffload_block_fuzz_{tag}.py"
    path.write_text("import adoffload as ado\n\n\n" + kernel.source)
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return getattr(module, kernel.name)


def grid_of(kernel: GeneratedBlockKernel, rng: np.random.Generator) -> tuple[int, ...]:
    """One or two blocks per axis (at most 512 threads)."""
    blocks = [int(rng.integers(1, 3)) for _ in kernel.block]
    if kernel.threads * int(np.prod(blocks)) > 512:
        blocks = [1] * len(blocks)
    return tuple(b * e for b, e in zip(blocks, kernel.block))


def random_inputs(rng: np.random.Generator, grid) -> dict:
    return {"a": float(rng.uniform(-1.5, 1.5)), "x": rng.uniform(-1, 1, grid), "w": rng.uniform(-1, 1, grid),
            "z": rng.uniform(-1, 1, grid)}


def run_primal(compiled, inputs: dict, grid, device="cpu") -> dict:
    values = {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in inputs.items()}
    values.update(out=np.zeros(grid), acc=np.zeros(1))
    compiled(**values, grid=grid, device=device)
    return {"out": values["out"], "acc": values["acc"], "z": values["z"]}


def run_jvp(forward, inputs: dict, tangent: dict, grid, device="cpu") -> tuple[dict, dict]:
    """(primal outputs, output tangents) of the forward kernel."""
    values = {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in inputs.items()}
    values.update(out=np.zeros(grid), acc=np.zeros(1), d_a=tangent["a"], d_x=tangent["x"].copy(),
                  d_w=tangent["w"].copy(), d_z=tangent["z"].copy(), d_out=np.zeros(grid), d_acc=np.zeros(1))
    forward(**values, grid=grid, device=device)
    return ({"out": values["out"], "acc": values["acc"], "z": values["z"]},
            {"out": values["d_out"], "acc": values["d_acc"], "z": values["d_z"]})


def run_vjp(reverse, inputs: dict, cotangent: dict, grid, device="cpu") -> tuple[dict, dict]:
    """(primal outputs, input gradients) of the reverse kernel seeded with ``cotangent``."""
    values = {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in inputs.items()}
    values.update(out=np.zeros(grid), acc=np.zeros(1), d_a=np.zeros(1), d_x=np.zeros(grid), d_w=np.zeros(grid),
                  d_z=cotangent["z"].copy(), d_out=cotangent["out"].copy(), d_acc=cotangent["acc"].copy())
    reverse(**values, grid=grid, device=device)
    return ({"out": values["out"], "acc": values["acc"], "z": values["z"]},
            {"a": values["d_a"][0], "x": values["d_x"], "w": values["d_w"], "z": values["d_z"]})


def _inner(u: dict, v: dict, names) -> tuple[float, float]:
    """<u, v> over ``names`` and the sum of |terms| (the scale of its rounding)."""
    total = scale = 0.0
    for name in names:
        products = np.asarray(u[name], np.float64) * np.asarray(v[name], np.float64)
        total += float(products.sum())
        scale += float(np.abs(products).sum())
    return total, scale


def _differs(got: dict, want: dict, names, rtol: float, atol: float) -> list[str]:
    bad = []
    for name in names:
        g, w = np.asarray(got[name], np.float64), np.asarray(want[name], np.float64)
        if not np.allclose(g, w, rtol=rtol, atol=atol):
            worst = float(np.max(np.abs(g - w)))
            bad.append(f"{name} (max |diff| {worst:.3g}, max |want| {float(np.max(np.abs(w))):.3g})")
    return bad


def _shifted(inputs: dict, tangent: dict, h: float) -> dict:
    return {k: inputs[k] + h * tangent[k] for k in DIFFERENTIABLE_INPUTS}


def finite_differences(compiled, inputs, tangent, grid, h: float, device="cpu") -> dict:
    plus = run_primal(compiled, _shifted(inputs, tangent, h), grid, device)
    minus = run_primal(compiled, _shifted(inputs, tangent, -h), grid, device)
    return {k: (plus[k] - minus[k]) / (2 * h) for k in FLOAT_OUTPUTS}


def _refusal(result: CaseResult, exc: Exception, stage: str) -> None:
    """An adoffload.Error is a clear refusal when it names a source line of the kernel."""
    from ..errors import Error
    text = f"{stage}: {type(exc).__name__}: {exc}"
    if isinstance(exc, Error):
        named = "line" in str(exc) or ".py:" in str(exc)
        result.outcome = f"refused ({type(exc).__name__})" if named else "unclear refusal"
        result.details.append(text)
    else:
        result.outcome = "crash"
        result.details.append(text + "\n" + traceback.format_exc(limit=6))


def check_case(kernel: GeneratedBlockKernel, seed: int, folder: Path, *, jax: bool = False,
               device: str = "cpu") -> CaseResult:
    """Every check on one generated kernel with inputs drawn from ``seed``, launched on ``device``
    (a host device: 'cpu', or 'cpu:wave64' for AMD's 64-lane wavefronts; the JAX check runs 'cpu')."""
    import adoffload as ado
    result = CaseResult(seed, kernel.source)
    rng = np.random.default_rng(seed)
    grid = grid_of(kernel, rng)
    inputs = random_inputs(rng, grid)
    stage = "primal"
    try:
        compiled = load_kernel(kernel, folder, f"{seed}_{os.getpid()}")
        primal = run_primal(compiled, inputs, grid, device)
        if not all(np.isfinite(primal[k]).all() for k in FLOAT_OUTPUTS):
            result.outcome = "non-finite"
            return result
        tangent = {"a": float(rng.normal()), **{k: rng.normal(size=grid) for k in ("x", "w", "z")}}
        cotangent = {"out": rng.normal(size=grid), "acc": rng.normal(size=1), "z": rng.normal(size=grid)}
        stage = "jvp"
        forward = ado.jvp(compiled, list(DIFFERENTIABLE_INPUTS))
        fwd_primal, jv = run_jvp(forward, inputs, tangent, grid, device)
        stage = "vjp"
        reverse = ado.vjp(compiled, list(DIFFERENTIABLE_INPUTS))
        rev_primal, vjt = run_vjp(reverse, inputs, cotangent, grid, device)
        stage = "deterministic vjp"
        vjt_det = _deterministic(result, compiled, inputs, cotangent, grid, device)
        stage = "finite differences"
        fd = finite_differences(compiled, inputs, tangent, grid, FD_STEP, device)
        fd_small = None
        if _differs(jv, fd, FLOAT_OUTPUTS, FD_RTOL, FD_ATOL):
            fd_small = finite_differences(compiled, inputs, tangent, grid, FD_STEP / 8, device)
        stage = "jax"
        jax_problems = _jax_checks(compiled, inputs, tangent, cotangent, jv, vjt, grid) if jax else []
    except Exception as exc:        # noqa: BLE001 -- any exception is classified
        _refusal(result, exc, stage)
        return result

    problems: list[str] = []
    for what, got in (("jvp kernel's primal", fwd_primal), ("vjp kernel's primal", rev_primal)):
        bad = _differs(got, primal, FLOAT_OUTPUTS, 1e-12, 1e-12)
        if bad:
            problems.append(f"{what} differs from the primal: {', '.join(bad)}")
    lhs, lscale = _inner(jv, cotangent, FLOAT_OUTPUTS)
    rhs, rscale = _inner(tangent, vjt, DIFFERENTIABLE_INPUTS)
    if abs(lhs - rhs) > IDENTITY_RTOL * (lscale + rscale) + 1e-12:
        problems.append(f"identity: <J v, w> = {lhs!r} but <v, J^T w> = {rhs!r}")
    bad = vjt_det is not None and _differs(vjt_det, vjt, DIFFERENTIABLE_INPUTS, DETERMINISTIC_RTOL, 1e-12)
    if bad:
        problems.append(f"deterministic vjp differs from the default: {', '.join(bad)}")
    problems.extend(jax_problems)
    fd_skipped = False
    if fd_small is not None and _differs(jv, fd_small, FLOAT_OUTPUTS, FD_RTOL, FD_ATOL):
        if _differs(fd, fd_small, FLOAT_OUTPUTS, FD_RTOL, FD_ATOL):
            fd_skipped = True           # the step crosses a kink or a branch: no smooth derivative to check
        else:
            problems.append("jvp vs finite differences: " + ", ".join(_differs(jv, fd_small, FLOAT_OUTPUTS,
                                                                                FD_RTOL, FD_ATOL)))
    if problems:
        result.outcome = "mismatch"
        result.details.extend(problems)
    if fd_skipped:
        result.notes.append("fd skipped (not smooth)")
    if jax:
        result.notes.append("jax checked")
    return result


def _deterministic(result: CaseResult, compiled, inputs, cotangent, grid, device="cpu"):
    """J^T w from ``deterministic=True``, or None where that mode refuses the kernel (a note when
    the refusal names the line, else the case's outcome)."""
    import adoffload as ado
    from ..errors import Error
    try:
        reverse = ado.vjp(compiled, list(DIFFERENTIABLE_INPUTS), deterministic=True)
        return run_vjp(reverse, inputs, cotangent, grid, device)[1]
    except Error as exc:
        if "line" in str(exc) or ".py:" in str(exc):
            result.notes.append(f"deterministic refused ({type(exc).__name__})")
            result.details.append(f"deterministic vjp: {type(exc).__name__}: {exc}")
            return None
        raise


def _jax_checks(compiled, inputs, tangent, cotangent, jv, vjt, grid) -> list[str]:
    """jax.jvp / jax.vjp of ado.jax_kernel against the numpy launches' J v and J^T w."""
    import jax
    jax.config.update("jax_enable_x64", True)
    import adoffload as ado
    f = ado.jax_kernel(compiled, grid=grid, out_shapes={"out": grid, "acc": (1,)})
    primals = tuple(np.float64(inputs[k]) if k == "a" else inputs[k] for k in DIFFERENTIABLE_INPUTS)
    tangents = tuple(np.float64(tangent[k]) if k == "a" else tangent[k] for k in DIFFERENTIABLE_INPUTS)
    _, (d_z, d_out, d_acc) = jax.jvp(f, primals, tangents)      # InOut and Out arrays in parameter order
    problems = []
    bad = _differs({"out": d_out, "acc": d_acc, "z": d_z}, jv, FLOAT_OUTPUTS, 1e-10, 1e-12)
    if bad:
        problems.append(f"jax.jvp differs from ado.jvp: {', '.join(bad)}")
    _, pullback = jax.vjp(f, *primals)
    grads = pullback((cotangent["z"], cotangent["out"], cotangent["acc"]))
    bad = _differs(dict(zip(DIFFERENTIABLE_INPUTS, grads)), vjt, DIFFERENTIABLE_INPUTS, 1e-10, 1e-12)
    if bad:
        problems.append(f"jax.vjp differs from ado.vjp: {', '.join(bad)}")
    return problems


# ---- many cases ------------------------------------------------------------------------------

def case_seed(seed: int, index: int) -> int:
    return seed * 1_000_003 + index


def run_cases(count: int, seed: int, folder: Path, *, jax_every: int = 0, on_result=None,
              wave64: bool = False) -> list[CaseResult]:
    """``wave64``: kernels for 64-lane warps, run on the 'cpu:wave64' host (AMD's wavefronts)."""
    results = []
    for index in range(count):
        s = case_seed(seed, index)
        kernel = generate(random.Random(s), warp=64 if wave64 else 32)
        (folder / "current_case.py").write_text(f"# seed {s}\n{kernel.source}")     # survives a crash
        result = check_case(kernel, s, folder, jax=bool(jax_every) and index % jax_every == 0 and not wave64,
                            device="cpu:wave64" if wave64 else "cpu")
        results.append(result)
        if on_result is not None:
            on_result(index, result)
    return results


def summarize(results: list[CaseResult]) -> str:
    outcomes = Counter(r.outcome for r in results)
    notes = Counter(note for r in results for note in r.notes)
    lines = [f"cases: {len(results)}", f"failures: {sum(not r.ok for r in results)}", "outcomes:"]
    lines += [f"  {name}: {count}" for name, count in sorted(outcomes.items())]
    lines += ["notes:"] + [f"  {name}: {count}" for name, count in sorted(notes.items())]
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m adoffload.testing.block_fuzz",
                                     description=__doc__.split("\n")[0])
    parser.add_argument("--count", type=int, default=50)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--jax-every", type=int, default=0, help="also check JAX on every N-th case (0: never)")
    parser.add_argument("--case-timeout", type=float, default=600.0,
                        help="seconds one case may take before the run stops as a hang (its traceback printed)")
    parser.add_argument("--show", action="store_true", help="print every kernel's source")
    parser.add_argument("--wave64", action="store_true",
                        help="64-lane warps (AMD's wavefronts) on the 'cpu:wave64' host; no JAX check")
    args = parser.parse_args(argv)
    import faulthandler
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="adoffload-block-fuzz-") as tmp:
        folder = Path(tmp)
        os.environ.setdefault("ADOFFLOAD_CACHE_DIR", str(folder / "cache"))    # keep the user cache clean
        sys.path.insert(0, tmp)

        def watchdog():
            try:                       # a hang stops the run with its traceback (current_case.py names it)
                faulthandler.dump_traceback_later(args.case_timeout, exit=True)
            except (OSError, ValueError, AttributeError):
                pass                   # stderr without a file descriptor (captured)

        def report(index, result):
            watchdog()
            if args.show or result.outcome != "pass":
                print(f"--- case {index} (seed {result.seed}): {result.outcome}")
                if args.show or not result.ok or result.outcome.startswith("refused"):
                    print(result.source)
                for detail in result.details:
                    print("  " + detail)
            if (index + 1) % 25 == 0:
                print(f"... {index + 1} cases", flush=True)
            sys.stdout.flush()

        watchdog()
        results = run_cases(args.count, args.seed, folder, jax_every=args.jax_every, on_result=report,
                            wave64=args.wave64)
        faulthandler.cancel_dump_traceback_later()
    print(summarize(results))
    print(f"time: {time.perf_counter() - started:.1f} s")
    return 1 if any(not r.ok for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
