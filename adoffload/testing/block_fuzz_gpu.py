"""Random block kernels on an NVIDIA GPU against the same kernels on the host CPU.

The two run different code. The host runs a block as phases of a loop over its threads
(codegen/host/block_split.py). The GPU entry (codegen/blocks.py) has shared arrays in addrspace(3),
``bar.sync``, ``shfl.sync``, the shadow-tile add combining of codegen/gpu/shared_atomics.py, and
lane combining. block_fuzz.py checks the derivatives on the host against both oracles; this
module checks that the GPU computes what the host computes.

For each generated kernel (block_generator.py), the primal, ``ado.jvp`` and ``ado.vjp`` (default
and ``deterministic=True``) run on both devices with the same inputs. Their outputs must agree
within rounding: atomic adds may sum in another order, hence ``rtol`` 1e-9.

A kernel that the host refuses or cannot run is skipped; block_fuzz.py judges those refusals.
``deterministic=True`` may be refused on the GPU alone, with the line named: shared-memory adds
under block-divergent control flow cannot be put in thread order there (they are on the host).
That comparison is then left out. A kernel that runs on the host but fails on the GPU, or gives
other numbers there, is a failure.

    python -m adoffload.testing.block_fuzz_gpu --count 100 --seed 3
"""
from __future__ import annotations

import argparse
import os
import random
import tempfile
import time
import traceback
from pathlib import Path

import numpy as np

from .block_fuzz import (DIFFERENTIABLE_INPUTS, FLOAT_OUTPUTS, case_seed, grid_of, load_kernel, random_inputs,
                         run_jvp, run_primal, run_vjp)
from .block_generator import generate

RTOL, ATOL = 1e-9, 1e-12


def _runs(kernel, inputs, tangent, cotangent, grid, device: str) -> dict:
    import adoffload as ado
    wrt = list(DIFFERENTIABLE_INPUTS)
    out = {"primal": run_primal(kernel, inputs, grid, device),
           "jvp": run_jvp(ado.jvp(kernel, wrt), inputs, tangent, grid, device)[1],
           "vjp": run_vjp(ado.vjp(kernel, wrt), inputs, cotangent, grid, device)[1]}
    try:
        deterministic = ado.vjp(kernel, wrt, deterministic=True)
        out["deterministic vjp"] = run_vjp(deterministic, inputs, cotangent, grid, device)[1]
    except ado.DifferentiationError as exc:
        # refused on every device, or on GPUs only: shared-memory adds under block-divergent
        # control flow cannot be put in thread order there (docs/determinism.md); the refusal names
        # the line. A refusal without a line is not this and stays a failure.
        if ".py:" not in str(exc):
            raise
        out["deterministic refused"] = str(exc)
    return out


def _differences(gpu: dict, host: dict) -> list[str]:
    problems = []
    for what, names in (("primal", FLOAT_OUTPUTS), ("jvp", FLOAT_OUTPUTS), ("vjp", DIFFERENTIABLE_INPUTS),
                        ("deterministic vjp", DIFFERENTIABLE_INPUTS)):
        if what not in host or what not in gpu:
            continue            # a deterministic refusal with its line, on one device or both
        for name in names:
            g, h = np.asarray(gpu[what][name], np.float64), np.asarray(host[what][name], np.float64)
            if not np.allclose(g, h, rtol=RTOL, atol=ATOL):
                problems.append(f"{what} {name}: max |gpu - host| {float(np.max(np.abs(g - h))):.3g} "
                                f"(max |host| {float(np.max(np.abs(h))):.3g})")
    return problems


def compare_case(seed: int, folder: Path) -> tuple[str, list[str], str]:
    """(outcome, problems, source) for the kernel generated from ``seed``: outcome "same",
    "skipped" (the host refuses or cannot run it) or "differs" / "gpu failed"."""
    import adoffload as ado
    kernel = generate(random.Random(seed))
    rng = np.random.default_rng(seed)
    grid = grid_of(kernel, rng)
    inputs = random_inputs(rng, grid)
    tangent = {"a": float(rng.normal()), **{k: rng.normal(size=grid) for k in ("x", "w", "z")}}
    cotangent = {"out": rng.normal(size=grid), "acc": rng.normal(size=1), "z": rng.normal(size=grid)}
    try:
        compiled = load_kernel(kernel, folder, f"gpu_{seed}_{os.getpid()}")
        host = _runs(compiled, inputs, tangent, cotangent, grid, "cpu")
    except ado.Error as exc:
        return "skipped", [f"{type(exc).__name__}: {exc}"], kernel.source
    if not all(np.isfinite(host["primal"][k]).all() for k in FLOAT_OUTPUTS):
        return "skipped", ["non-finite primal"], kernel.source
    try:
        gpu = _runs(compiled, inputs, tangent, cotangent, grid, "cuda")
    except Exception as exc:                            # noqa: BLE001 -- any GPU failure is reported
        return "gpu failed", [f"{type(exc).__name__}: {exc}", traceback.format_exc(limit=3)], kernel.source
    problems = _differences(gpu, host)
    return ("differs" if problems else "same"), problems, kernel.source


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--count", type=int, default=50)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--seconds", type=float, default=None, help="stop starting new cases after this long")
    args = parser.parse_args(argv)
    counts: dict[str, int] = {}
    start = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="adoffload-block-fuzz-gpu-") as tmp:
        for index in range(args.count):
            if args.seconds is not None and time.monotonic() - start > args.seconds:
                break
            seed = case_seed(args.seed, index)
            outcome, problems, source = compare_case(seed, Path(tmp))
            counts[outcome] = counts.get(outcome, 0) + 1
            if outcome in ("differs", "gpu failed"):
                print(f"--- seed {seed}: {outcome}\n" + "\n".join(problems) + "\n" + source, flush=True)
    print("block_fuzz_gpu: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())), flush=True)
    return 1 if counts.get("differs") or counts.get("gpu failed") else 0


if __name__ == "__main__":
    raise SystemExit(main())
