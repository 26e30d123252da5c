"""The device table itself, checked on the host: CPU results match the numpy references,
and the JVP and VJP arguments it builds satisfy <J v, w> = <v, Jᵀ w>. The CUDA parity tests
compare against these host runs, so the table must be right first."""
from __future__ import annotations

import numpy as np
import pytest

from .table import BY_NAME, CASES, arguments, run, variant


@pytest.mark.parametrize("case", [c for c in CASES if c.reference is not None], ids=repr)
def test_host_primal_matches_numpy(case):
    values = arguments(case, "primal")
    got = run(case.kernel, values, case.grid, "cpu")
    for key, want in case.reference(values).items():
        np.testing.assert_allclose(got[key], want, rtol=max(case.rtol, 1e-9), atol=1e-12,
                                   err_msg=f"{case.name}: {key}")


def _dot(a, b) -> float:
    return float(np.sum(np.asarray(a, np.float64) * np.asarray(b, np.float64)))


@pytest.mark.parametrize("case", [c for c in CASES if c.wrt], ids=repr)
def test_host_jvp_and_vjp_arguments_are_adjoint(case):
    jvp, vjp = variant(case, "jvp"), variant(case, "vjp")
    v, w = arguments(case, "jvp", seed=1), arguments(case, "vjp", seed=1)
    jv, adj = run(jvp, v, case.grid, "cpu"), run(vjp, w, case.grid, "cpu")
    base = {p.name: p for p in case.kernel.signature.params}
    shadows = [p.name for p in jvp.signature.visible_params[len(base):]]
    outputs = [s for s in shadows if base[s[2:]].is_array and base[s[2:]].type.writes]
    lhs = sum(_dot(jv[s], w[s]) for s in outputs)
    rhs = sum(_dot(v[s], adj[s]) for s in shadows)
    tol = 1e-4 if case.kernel.signature.params[0].dtype.dtype == np.float32 else 1e-9
    assert np.isclose(lhs, rhs, rtol=tol, atol=tol), f"{case.name}: <Jv, w> = {lhs}, <v, Jᵀw> = {rhs}"


def test_table_covers_the_brief():
    names = set(BY_NAME)
    assert {"ad.saxpy_f32", "ad.lj_all_pairs", "ad.recurrence", "ad.sum_of_squares", "ad.grid2_scale", "ad.grid3_square",
            "ad.math_f32", "ad.math_f64"} <= names
    assert sum(n.startswith("rajaperf.") for n in names) >= 18
    assert variant(BY_NAME["ad.recurrence"], "vjp").tape is not None, "the recurrence's adjoint needs a dynamic tape"
    ranks = {len(c.grid) for c in CASES}
    assert ranks == {1, 2, 3}
