"""Lean derivative kernels (enzyme/lean.py) on the GPU, vectorized launch included: the lean JVP and
adjoint of RAJAPerf kernels (stencils with atomics, branches, vector groups and a partial tail) give
the host's derivatives."""
from __future__ import annotations

import numpy as np
import pytest

import adoffload as ado

from benchmarks.kernels.rajaperf import CASES

pytestmark = pytest.mark.gpu
LEAN = ["stream_copy", "basic_if_quad", "lcals_eos", "lcals_hydro_1d", "lcals_planckian"]


_n = 4099        # not a whole number of vector groups or warps


def _run(kernel, values, device):
    values = {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in values.items()}
    kernel(**values, grid=_n, device=device)
    return values


@pytest.mark.parametrize("name", LEAN)
def test_lean_derivatives_on_the_gpu_match_the_host(cuda, name):
    case = next(c for c in CASES if c.name == name)
    host = case.make(_n, np.random.default_rng(1))
    rng = np.random.default_rng(2)
    marker = {p.name: np.full_like(host[p.name], 7.0) for p in case.kernel.signature.params
              if p.is_array and p.type.intent == "out"}
    for derive in (ado.jvp, ado.vjp):
        k = derive(case.kernel, case.wrt, primal_outputs=False)
        values = dict(host, **marker)
        for p in k.signature.params[len(case.kernel.signature.params):]:
            base = host[p.name[2:]]
            values[p.name] = (rng.standard_normal(np.shape(base)) if np.ndim(base) else
                              np.zeros(1) if p.is_array else float(rng.standard_normal()))
        gpu, cpu = _run(k, values, "cuda"), _run(k, values, "cpu")
        for p in k.signature.params:
            if p.is_array:
                np.testing.assert_allclose(gpu[p.name], cpu[p.name], rtol=1e-11, atol=1e-11,
                                           err_msg=f"{k.name}: {p.name}")
