"""Deterministic block kernels on an NVIDIA GPU (device="cuda"; skipped without one): shared-memory
adds in thread order (codegen/gpu/ordered_shared.py) and the contribution log give bitwise-identical
gradients run to run, close to the host's deterministic result and to float64 references. The
default mode's run-to-run spread and both modes' times are printed (``pytest -s``)."""
from __future__ import annotations

import time

import numpy as np
import pytest

from .block_kernels import BLOCK_CASES
from .test_gpu import _cuda_or_none
from .kernels import fingerprint, run_vjp

RUNS = 10
SIZES = {"tile_gather": 4096, "warp_gather": 1 << 16}


pytestmark = [pytest.mark.gpu, pytest.mark.skipif(_cuda_or_none() is None, reason="no CUDA device / driver")]


@pytest.mark.parametrize("case", BLOCK_CASES, ids=lambda c: c.name)
def test_cuda_deterministic_block_gradients_are_bitwise_identical(case):
    args, seeds, grid = case.make(np.random.default_rng(0), SIZES[case.name])
    start = time.perf_counter()
    runs = [run_vjp(case, True, args, seeds, grid, device="cuda") for _ in range(RUNS)]
    det_time = (time.perf_counter() - start) / RUNS
    assert len({fingerprint(r) for r in runs}) == 1, f"{case.name}: deterministic mode varied across GPU runs"
    host = run_vjp(case, True, args, seeds, grid, device="cpu")
    reference = case.reference(args, seeds)
    for name, got in runs[0].items():
        scale = max(1.0, float(np.abs(reference[name]).max()))
        np.testing.assert_allclose(got, reference[name], rtol=1e-5, atol=1e-5 * scale, err_msg=f"{case.name}.{name}")
        np.testing.assert_allclose(got, host[name], rtol=1e-5, atol=1e-5 * scale, err_msg=f"{case.name}.{name}")
    start = time.perf_counter()
    default = [run_vjp(case, False, args, seeds, grid, device="cuda") for _ in range(RUNS)]
    default_time = (time.perf_counter() - start) / RUNS
    print(f"\n[determinism] cuda {case.name} grid={grid}: default mode {len({fingerprint(r) for r in default})} "
          f"distinct results in {RUNS} runs; time per vjp launch (incl. transfers): default "
          f"{default_time * 1e3:.2f} ms, deterministic {det_time * 1e3:.2f} ms; GPU bitwise equal to host: "
          f"{fingerprint(host) == fingerprint(runs[0])}")
