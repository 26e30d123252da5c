"""Arguments of the PolyBench-style kernels (tests/fixtures/foreign/polybench/polybench.c) for
tests/ad/test_foreign_polybench.py, in the roles of rust_hunt_cases.py (``int``: Const; ``real``:
an active scalar; ``in``/``out``/``inout``: arrays read / only written / updated in place). The
points keep each algorithm well defined: SPD matrices for Cholesky, diagonally dominant ones for
LU and the triangular solves, |r| < 1 for Levinson-Durbin, deviations above the cut-off for
correlation."""
from __future__ import annotations

from dataclasses import replace

import numpy as np

from .rust_hunt_cases import IN, INOUT, INT, OUT, REAL, Case

N, M = 6, 5       # the fixed sizes of polybench.c


def _cases() -> list[Case]:
    rng = np.random.default_rng(7)
    u = lambda *shape, lo=-1.0, hi=1.0: rng.uniform(lo, hi, shape).ravel()  # noqa: E731
    zeros = lambda count: np.zeros(count)  # noqa: E731

    def spd(n: int) -> np.ndarray:
        a = rng.uniform(-1.0, 1.0, (n, n))
        return (a @ a.T + n * np.eye(n)).ravel()

    def dominant(n: int) -> np.ndarray:
        return (rng.uniform(-1.0, 1.0, (n, n)) + (n + 1.0) * np.eye(n)).ravel()

    def unit_lower(n: int) -> np.ndarray:
        return np.tril(rng.uniform(-1.0, 1.0, (n, n)), -1).ravel() + np.eye(n).ravel()

    return [
        Case("pb_gemm", [(INT, 4), (INT, 5), (INT, 3), (REAL, 1.5), (REAL, 1.2),
                         (INOUT, u(4, 5)), (IN, u(4, 3)), (IN, u(3, 5))]),
        Case("pb_2mm", [(INT, 3), (INT, 4), (INT, 3), (INT, 5), (REAL, 1.5), (REAL, 1.2),
                        (IN, u(3, 3)), (IN, u(3, 4)), (IN, u(4, 5)), (INOUT, u(3, 5))]),
        Case("pb_3mm", [(IN, u(N, M)), (IN, u(M, N)), (IN, u(N, M)), (IN, u(M, N)), (OUT, zeros(N * N))]),
        Case("pb_atax", [(INT, 5), (INT, 4), (IN, u(5, 4)), (IN, u(4)), (OUT, zeros(4))]),
        Case("pb_atax_static", [(IN, u(N, N)), (IN, u(N)), (OUT, zeros(N))]),
        Case("pb_bicg", [(INT, 4), (INT, 5), (IN, u(5, 4)), (OUT, zeros(4)), (OUT, zeros(5)), (IN, u(4)), (IN, u(5))]),
        Case("pb_doitgen", [(INT, 2), (INT, 3), (INT, 4), (INOUT, u(2, 3, 4)), (IN, u(4, 4)), (OUT, zeros(4))]),
        Case("pb_mvt", [(INT, 5), (INOUT, u(5)), (INOUT, u(5)), (IN, u(5)), (IN, u(5)), (IN, u(5, 5))]),
        Case("pb_gemver", [(INT, 4), (REAL, 1.5), (REAL, 1.2), (INOUT, u(4, 4)), (IN, u(4)), (IN, u(4)), (IN, u(4)),
                           (IN, u(4)), (INOUT, u(4)), (INOUT, u(4)), (IN, u(4)), (IN, u(4))]),
        Case("pb_gesummv", [(INT, 5), (REAL, 1.5), (REAL, 1.2), (IN, u(5, 5)), (IN, u(5, 5)), (OUT, zeros(5)),
                            (IN, u(5)), (OUT, zeros(5))]),
        Case("pb_symm", [(INT, 4), (INT, 3), (REAL, 1.5), (REAL, 1.2), (INOUT, u(4, 3)), (IN, u(4, 4)), (IN, u(4, 3))]),
        Case("pb_syrk", [(INT, 4), (INT, 3), (REAL, 1.5), (REAL, 1.2), (INOUT, u(4, 4)), (IN, u(4, 3))]),
        Case("pb_syr2k", [(INT, 4), (INT, 3), (REAL, 1.5), (REAL, 1.2), (INOUT, u(4, 4)), (IN, u(4, 3)),
                          (IN, u(4, 3))]),
        Case("pb_trmm", [(INT, 4), (INT, 3), (REAL, 1.5), (IN, unit_lower(4)), (INOUT, u(4, 3))]),
        Case("pb_cholesky", [(INOUT, spd(N))]),
        Case("pb_cholesky_loss", [(IN, spd(N))]),
        Case("pb_durbin", [(INT, 5), (IN, u(5, lo=-0.3, hi=0.3)), (OUT, zeros(5))]),
        Case("pb_gramschmidt", [(INT, 5), (INT, 4), (INOUT, u(5, 4)), (OUT, zeros(16)), (OUT, zeros(20))]),
        Case("pb_lu", [(INT, 5), (INOUT, dominant(5))]),
        Case("pb_ludcmp", [(INT, 5), (INOUT, dominant(5)), (IN, u(5)), (OUT, zeros(5)), (OUT, zeros(5))]),
        Case("pb_trisolv", [(INT, 5), (IN, dominant(5)), (OUT, zeros(5)), (IN, u(5))]),
        Case("pb_correlation", [(INT, 4), (INT, 6), (INOUT, u(6, 4)), (OUT, zeros(16)), (OUT, zeros(4)),
                                (OUT, zeros(4))]),
        Case("pb_covariance", [(INT, 4), (INT, 6), (INOUT, u(6, 4)), (OUT, zeros(16)), (OUT, zeros(4))]),
        Case("pb_covariance_loss", [(INT, 4), (INT, 6), (IN, u(6, 4)), (IN, u(4, 4))]),
        Case("pb_deriche", [(INT, 4), (INT, 5), (REAL, 0.25), (IN, u(4, 5)), (OUT, zeros(20)), (OUT, zeros(20)),
                            (OUT, zeros(20))]),
        Case("pb_adi", [(INT, 2), (INT, 5), (INOUT, u(5, 5)), (INOUT, u(5, 5)), (OUT, zeros(25)), (OUT, zeros(25))]),
        Case("pb_fdtd_2d", [(INT, 3), (INT, 4), (INT, 5), (INOUT, u(4, 5)), (INOUT, u(4, 5)), (INOUT, u(4, 5)),
                            (IN, u(3))]),
        Case("pb_heat_3d", [(INT, 2), (INT, 4), (INOUT, u(4, 4, 4)), (INOUT, u(4, 4, 4))]),
        Case("pb_jacobi_1d", [(INT, 3), (INT, 8), (INOUT, u(8)), (INOUT, u(8))]),
        Case("pb_jacobi_2d", [(INT, 2), (INOUT, u(N, N)), (INOUT, u(N, N))]),
        Case("pb_seidel_2d", [(INT, 2), (INT, 5), (INOUT, u(5, 5))]),
        Case("pb_seidel_loss", [(INT, 2), (INT, 5), (IN, u(5, 5))]),
    ]


def as_float(case: Case) -> Case:
    """The same case for the DATA_TYPE float build (pbf_<name>)."""
    params = [(role, value.astype(np.float32) if isinstance(value, np.ndarray) and role != INT else value)
              for role, value in case.params]
    return replace(case, name="pbf_" + case.name[3:], params=params, dtype=np.float32)


CASES = {case.name: case for case in _cases()}
FLOAT_CASES = {f.name: f for f in map(as_float, CASES.values())}
