"""Every kernel of the table, primal, JVP and VJP, on CUDA and on the host: same results.

The launcher moves numpy arrays to the GPU by intent and back, so the same call runs on
both devices. Float results must agree within the case's tolerance (libdevice vs libm,
FMA contraction and atomic ordering differ); integers must be equal. Primal results are
also checked against the numpy reference. Skips cleanly without a CUDA GPU.
"""
from __future__ import annotations

import pytest

from .table import BY_NAME, arguments, assert_same, run, run_id, runs, variant

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("which", runs(), ids=run_id)
def test_cuda_matches_host(cuda, which):
    name, mode, width = which
    case = BY_NAME[name]
    kernel = variant(case, mode, width)
    values = arguments(case, mode, seed=3, width=width)
    host = run(kernel, values, case.grid, "cpu")
    device = run(kernel, values, case.grid, cuda.spec)
    assert_same(f"{name} {mode}", device, host, case.rtol, case.atol)
    if mode == "primal" and case.reference is not None:
        for key, want in case.reference(values).items():
            assert_same(f"{name} vs numpy", {key: device[key]}, {key: want}, max(case.rtol, 1e-9), 1e-12)


def test_repeated_launches_reuse_compiled_code(cuda):
    case = BY_NAME["ad.recurrence"]
    kernel = variant(case, "vjp")
    values = arguments(case, "vjp")
    first = run(kernel, values, case.grid, cuda.spec)
    compiled = dict(kernel._compiled)
    second = run(kernel, values, case.grid, cuda.spec)
    assert kernel._compiled.keys() == compiled.keys() and all(
        kernel._compiled[key] is value for key, value in compiled.items()), \
        "a second launch with the same shapes compiled again"
    assert_same("recurrence vjp twice", second, first, case.rtol, case.atol)
