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


def _cases(grow: int = 0) -> list[Case]:
    """The cases; ``grow`` adds to every run-time size (the fixed N and M stay): the default sizes
    are small for CI, larger ones reach the vector bodies clang -O2/-O3 guard by a minimum trip count."""
    rng = np.random.default_rng(7)
    u = lambda *shape, lo=-1.0, hi=1.0: rng.uniform(lo, hi, shape).ravel()  # noqa: E731
    zeros = lambda *shape: np.zeros(shape).ravel()  # noqa: E731
    s3, s4, s5, s6, s8 = (k + grow for k in (3, 4, 5, 6, 8))

    def spd(n: int) -> np.ndarray:
        a = rng.uniform(-1.0, 1.0, (n, n))
        return (a @ a.T + n * np.eye(n)).ravel()

    def dominant(n: int) -> np.ndarray:
        return (rng.uniform(-1.0, 1.0, (n, n)) + (n + 1.0) * np.eye(n)).ravel()

    def unit_lower(n: int) -> np.ndarray:
        return np.tril(rng.uniform(-1.0, 1.0, (n, n)), -1).ravel() + np.eye(n).ravel()

    return [
        Case("pb_gemm", [(INT, s4), (INT, s5), (INT, s3), (REAL, 1.5), (REAL, 1.2),
                         (INOUT, u(s4, s5)), (IN, u(s4, s3)), (IN, u(s3, s5))]),
        Case("pb_2mm", [(INT, s3), (INT, s4), (INT, s3), (INT, s5), (REAL, 1.5), (REAL, 1.2),
                        (IN, u(s3, s3)), (IN, u(s3, s4)), (IN, u(s4, s5)), (INOUT, u(s3, s5))]),
        Case("pb_3mm", [(IN, u(N, M)), (IN, u(M, N)), (IN, u(N, M)), (IN, u(M, N)), (OUT, zeros(N, N))]),
        Case("pb_atax", [(INT, s5), (INT, s4), (IN, u(s5, s4)), (IN, u(s4)), (OUT, zeros(s4))]),
        Case("pb_atax_static", [(IN, u(N, N)), (IN, u(N)), (OUT, zeros(N))]),
        Case("pb_bicg", [(INT, s4), (INT, s5), (IN, u(s5, s4)), (OUT, zeros(s4)), (OUT, zeros(s5)), (IN, u(s4)),
                         (IN, u(s5))]),
        Case("pb_doitgen", [(INT, 2), (INT, s3), (INT, s4), (INOUT, u(2, s3, s4)), (IN, u(s4, s4)), (OUT, zeros(s4))]),
        Case("pb_mvt", [(INT, s5), (INOUT, u(s5)), (INOUT, u(s5)), (IN, u(s5)), (IN, u(s5)), (IN, u(s5, s5))]),
        Case("pb_gemver", [(INT, s4), (REAL, 1.5), (REAL, 1.2), (INOUT, u(s4, s4)), (IN, u(s4)), (IN, u(s4)),
                           (IN, u(s4)), (IN, u(s4)), (INOUT, u(s4)), (INOUT, u(s4)), (IN, u(s4)), (IN, u(s4))]),
        Case("pb_gesummv", [(INT, s5), (REAL, 1.5), (REAL, 1.2), (IN, u(s5, s5)), (IN, u(s5, s5)), (OUT, zeros(s5)),
                            (IN, u(s5)), (OUT, zeros(s5))]),
        Case("pb_symm", [(INT, s4), (INT, s3), (REAL, 1.5), (REAL, 1.2), (INOUT, u(s4, s3)), (IN, u(s4, s4)),
                         (IN, u(s4, s3))]),
        Case("pb_syrk", [(INT, s4), (INT, s3), (REAL, 1.5), (REAL, 1.2), (INOUT, u(s4, s4)), (IN, u(s4, s3))]),
        Case("pb_syr2k", [(INT, s4), (INT, s3), (REAL, 1.5), (REAL, 1.2), (INOUT, u(s4, s4)), (IN, u(s4, s3)),
                          (IN, u(s4, s3))]),
        Case("pb_trmm", [(INT, s4), (INT, s3), (REAL, 1.5), (IN, unit_lower(s4)), (INOUT, u(s4, s3))]),
        Case("pb_cholesky", [(INOUT, spd(N))]),
        Case("pb_cholesky_loss", [(IN, spd(N))]),
        Case("pb_durbin", [(INT, s5), (IN, u(s5, lo=-0.3, hi=0.3) / (1 + grow)), (OUT, zeros(s5))]),
        Case("pb_gramschmidt", [(INT, s5), (INT, s4), (INOUT, u(s5, s4)), (OUT, zeros(s4, s4)), (OUT, zeros(s5, s4))]),
        Case("pb_lu", [(INT, s5), (INOUT, dominant(s5))]),
        Case("pb_ludcmp", [(INT, s5), (INOUT, dominant(s5)), (IN, u(s5)), (OUT, zeros(s5)), (OUT, zeros(s5))]),
        Case("pb_trisolv", [(INT, s5), (IN, dominant(s5)), (OUT, zeros(s5)), (IN, u(s5))]),
        Case("pb_correlation", [(INT, s4), (INT, s6), (INOUT, u(s6, s4)), (OUT, zeros(s4, s4)), (OUT, zeros(s4)),
                                (OUT, zeros(s4))]),
        Case("pb_covariance", [(INT, s4), (INT, s6), (INOUT, u(s6, s4)), (OUT, zeros(s4, s4)), (OUT, zeros(s4))]),
        Case("pb_covariance_loss", [(INT, s4), (INT, s6), (IN, u(s6, s4)), (IN, u(s4, s4))]),
        Case("pb_deriche", [(INT, s4), (INT, s5), (REAL, 0.25), (IN, u(s4, s5)), (OUT, zeros(s4, s5)),
                            (OUT, zeros(s4, s5)), (OUT, zeros(s4, s5))]),
        Case("pb_adi", [(INT, 2), (INT, s5), (INOUT, u(s5, s5)), (INOUT, u(s5, s5)), (OUT, zeros(s5, s5)),
                        (OUT, zeros(s5, s5))]),
        Case("pb_fdtd_2d", [(INT, 3), (INT, s4), (INT, s5), (INOUT, u(s4, s5)), (INOUT, u(s4, s5)),
                            (INOUT, u(s4, s5)), (IN, u(3))]),
        Case("pb_heat_3d", [(INT, 2), (INT, s4), (INOUT, u(s4, s4, s4)), (INOUT, u(s4, s4, s4))]),
        Case("pb_jacobi_1d", [(INT, 3), (INT, s8), (INOUT, u(s8)), (INOUT, u(s8))]),
        Case("pb_jacobi_2d", [(INT, 2), (INOUT, u(N, N)), (INOUT, u(N, N))]),
        Case("pb_seidel_2d", [(INT, 2), (INT, s5), (INOUT, u(s5, s5))]),
        Case("pb_seidel_loss", [(INT, 2), (INT, s5), (IN, u(s5, s5))]),
        Case("pb_gemm_memalign", [(INT, s4), (REAL, 1.5), (REAL, 1.2), (INOUT, u(s4, s4)), (IN, u(s4, s4)),
                                  (IN, u(s4, s4))]),
        Case("pb_gemm_aligned_alloc", [(INT, s4), (REAL, 1.5), (OUT, zeros(s4, s4)), (IN, u(s4, s4)), (IN, u(s4, s4))]),
        Case("pb_lu_fixed", [(INT, 4), (INOUT, dominant(N))]),
        Case("pb_mvt_wide_sum", [(INT, s5), (INOUT, u(s5)), (IN, u(s5)), (IN, u(s5, s5))]),
        Case("pb_jacobi_converge", [(INT, s8), (INT, 100), (INT, 1e-2), (INOUT, u(s8)), (INOUT, u(s8)),
                                    (IN, u(s8, lo=0.0, hi=0.1))]),
        Case("pb_trisolv_rows", [(INT, s5), (IN, dominant(s5)), (OUT, zeros(s5)), (IN, u(s5))]),
        Case("pb_lu_pivot", [(INT, s5), (INOUT, u(s5, s5)), (INT, np.zeros(s5, np.int32))]),
        Case("pb_grid_laplacian", [(INT, s8), (REAL, 0.5), (IN, u(s8)), (OUT, zeros(s8))]),
        Case("pb_lu_checked", [(INT, s5), (INOUT, dominant(s5))]),
        Case("pb_jacobi_swap", [(INT, 3), (INT, s8), (INOUT, u(s8)), (INOUT, u(s8))]),
        Case("pb_burgers_upwind", [(INT, 3), (INT, s8), (REAL, 0.01), (INOUT, u(s8, lo=-0.9, hi=0.9)),
                                   (OUT, zeros(s8))]),
    ]


def as_float(case: Case) -> Case:
    """The same case for the DATA_TYPE float build (pbf_<name>)."""
    params = [(role, value.astype(np.float32) if isinstance(value, np.ndarray) and role != INT else value)
              for role, value in case.params]
    return replace(case, name="pbf_" + case.name[3:], params=params, dtype=np.float32)


CASES = {case.name: case for case in _cases()}
FLOAT_CASES = {f.name: f for f in map(as_float, CASES.values())}
