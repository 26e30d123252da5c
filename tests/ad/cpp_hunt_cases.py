"""Arguments of the C++ kernels (tests/fixtures/foreign/cpp_hunt/hunt.cpp) for
tests/ad/test_foreign_cpp_hunt.py, in the roles and with the oracles of rust_hunt_cases.py
(``int``: Const; ``real``: an active scalar; ``in``/``out``/``inout``: arrays read / only written /
updated in place). A case's name is its function's, with ``:<variant>`` where one function runs at
two points. The points keep each kernel smooth there: no ties at a min/max/clamp, no point at a
spline knot, a nonsingular matrix, positive masses and square-root arguments, and sizes above the
minimum trip counts of clang's vector bodies (8 or more) where a loop vectorizes."""
from __future__ import annotations

import numpy as np

from .rust_hunt_cases import IN, INOUT, INT, OUT, REAL, Case


def function_of(case_name: str) -> str:
    """The C++ function a case calls."""
    return case_name.split(":")[0]


def _lattice(atoms: int, spacing: float, rng) -> np.ndarray:
    grid = np.array([(i % 2, (i // 2) % 2, i // 4) for i in range(atoms)], np.float64) * spacing
    return (grid + rng.uniform(-0.05, 0.05, grid.shape)).ravel()


def _cases() -> list[Case]:
    rng = np.random.default_rng(23)
    u = lambda *shape, lo=-1.0, hi=1.0: rng.uniform(lo, hi, shape).ravel()  # noqa: E731
    matrix = (np.eye(3) * 2.0 + u(3, 3, lo=-0.4, hi=0.4).reshape(3, 3)).ravel()
    rotation = np.linalg.qr(rng.standard_normal((3, 3)))[0].ravel()
    knots = np.cumsum(u(9, lo=0.3, hi=0.8))
    pivoting = (u(4, 4).reshape(4, 4) + np.diag([0.1, 2.0, 0.3, 1.5])).ravel()       # pivots swap rows
    spd_root = u(4, 4).reshape(4, 4)
    spd = (spd_root @ spd_root.T + 4 * np.eye(4)).ravel()
    away = np.array([-0.83, -0.34, 0.12, 0.37, 0.91, -0.63, 0.55, 0.27, -0.22, 0.74])  # from 0, +-0.1/0.2/0.5, lo/hi
    return [
        Case("cpp_vec3_ops", [(IN, u(3)), (IN, u(3)), (REAL, 0.7)]),
        Case("cpp_rotate", [(IN, rotation), (IN, u(27)), (INT, 9), (OUT, np.zeros(27))]),
        Case("cpp_mat3_det", [(IN, matrix)]),
        Case("cpp_mat3_inverse", [(IN, matrix), (OUT, np.zeros(9))]),
        Case("cpp_solve3", [(IN, matrix), (IN, u(3))]),
        Case("cpp_lj_virtual", [(IN, _lattice(5, 1.1, rng)), (INT, 5), (REAL, 0.8), (REAL, 1.0)]),
        Case("cpp_potential_pick", [(IN, _lattice(4, 1.2, rng)), (INT, 4), (INT, 1), (REAL, 1.3)]),
        Case("cpp_potential_pick:lj", [(IN, _lattice(4, 1.2, rng)), (INT, 4), (INT, 0), (REAL, 1.05)]),
        Case("cpp_morse_pairs", [(IN, _lattice(6, 1.1, rng)), (INT, 6), (REAL, 1.5), (REAL, 1.2), (REAL, 1.0)]),
        Case("cpp_logsumexp", [(IN, u(11)), (INT, 11)]),
        Case("cpp_softmax", [(IN, u(10)), (INT, 10), (OUT, np.zeros(10))]),
        Case("cpp_inner_product", [(IN, u(10)), (IN, u(10)), (INT, 10)]),
        Case("cpp_unrolled_dot", [(IN, u(5)), (IN, u(5))]),
        Case("cpp_complex", [(IN, u(10)), (INT, 5)]),
        Case("cpp_complex_poly", [(REAL, 0.8), (REAL, -0.6)]),
        Case("cpp_cmath_mix", [(REAL, 0.9), (REAL, 1.3)]),
        Case("cpp_clamps", [(IN, away), (INT, 10), (REAL, -0.5), (REAL, 0.6)]),
        Case("cpp_minmax_refs", [(IN, away), (INT, 10)]),
        Case("cpp_unique_ptr", [(IN, u(9)), (INT, 9)]),
        Case("cpp_vector_resize", [(IN, u(9)), (INT, 9)]),
        Case("cpp_for_each", [(IN, u(9)), (INT, 9), (REAL, 0.7)]),
        Case("cpp_std_function", [(IN, u(9)), (INT, 9), (REAL, 0.9)]),
        Case("cpp_newton_cbrt", [(REAL, 2.7)]),
        Case("cpp_newton_kepler", [(IN, u(9, lo=0.2, hi=3.0)), (INT, 9), (REAL, 0.3), (OUT, np.zeros(9))]),
        Case("cpp_rk4", [(INOUT, u(9)), (INT, 9), (REAL, 0.8), (REAL, 0.1), (INT, 3)]),
        Case("cpp_spline", [(IN, knots), (IN, u(9)), (IN, u(9)), (INT, 9), (REAL, float(knots[4] + 0.37 * (knots[5] - knots[4])))]),
        Case("cpp_spline:edge", [(IN, knots), (IN, u(9)), (IN, u(9)), (INT, 9), (REAL, float(knots[-1] + 0.2))]),
        Case("cpp_horner", [(IN, u(9)), (INT, 9), (REAL, 0.7)]),
        Case("cpp_kahan", [(IN, u(12)), (INT, 12)]),
        Case("cpp_median_sort", [(IN, u(9)), (INT, 9)]),
        Case("cpp_median_nth", [(IN, u(9)), (INT, 9)]),
        Case("cpp_checked_sqrt_sum", [(IN, u(9, lo=0.2, hi=2.0)), (INT, 9)]),
        Case("cpp_catch_fallback", [(IN, matrix), (IN, u(3))]),
        Case("cpp_aos", [(IN, np.column_stack([u(4), u(4), u(4, lo=0.5, hi=2.0)]).ravel()), (INT, 4), (REAL, 0.1), (REAL, 9.8)]),
        Case("cpp_soa", [(IN, u(9)), (IN, u(9)), (IN, u(9, lo=0.5, hi=2.0)), (INT, 9), (REAL, 0.05)]),
        Case("cpp_forces", [(IN, _lattice(5, 1.0, rng)), (INT, 5), (OUT, np.zeros(15))]),
        Case("cpp_float_vec", [(IN, u(12).astype(np.float32)), (INT, 4), (REAL, 0.5)], np.float32),
        Case("cpp_static_table", [(IN, u(9)), (INT, 9)]),
        Case("cpp_transform_reduce", [(IN, u(9)), (IN, u(9)), (INT, 9)]),
        Case("cpp_recursive_pow", [(REAL, 1.1), (INT, 5)]),
        Case("cpp_lu_solve", [(IN, pivoting), (IN, u(4)), (INT, 4), (OUT, np.zeros(4))]),
        Case("cpp_cholesky_logdet", [(IN, spd), (INT, 4)]),
        Case("cpp_min_image", [(IN, u(15, lo=0.0, hi=3.0)), (INT, 5), (REAL, 3.1)]),
        Case("cpp_interp_table", [(IN, np.array([0.13, 0.41, 0.77, 0.58, 0.02, 0.95, 0.36, 0.69, 0.21])), (INT, 9),
                                  (IN, u(6)), (INT, 6)]),
        Case("cpp_long_double_sum", [(IN, u(9)), (INT, 9)]),
        Case("cpp_dual_numbers", [(IN, u(9)), (INT, 9)]),
        Case("cpp_static_init", [(IN, u(9)), (INT, 9)]),
        Case("cpp_fast_rsqrt", [(IN, u(9, lo=0.5, hi=4.0).astype(np.float32)), (INT, 9)], np.float32),
        Case("cpp_scan_diff", [(IN, u(9)), (INT, 9), (OUT, np.zeros(9))]),
        Case("cpp_special", [(REAL, 0.7), (REAL, 1.3)]),
        Case("cpp_nan_guard", [(IN, np.r_[u(4), np.nan, u(2), 11.0, u(2)]), (INT, 10)]),
        Case("cpp_complex_float", [(IN, u(8, lo=0.3, hi=1.0).astype(np.float32)), (INT, 4)], np.float32),
        Case("cpp_vector_at", [(IN, u(9)), (INT, 9), (INT, 2)]),
        Case("cpp_optional", [(IN, np.array([0.5, -0.3, 1.7, 0.9, -1.2, 2.2, 0.1, -0.6, 1.1])), (INT, 9)]),
        Case("cpp_member_ptr", [(IN, u(10)), (INT, 5), (INT, 1)]),
        Case("cpp_member_ptr:area", [(IN, u(10)), (INT, 5), (INT, 0)]),
        Case("cpp_gnu_vector", [(IN, u(12)), (INT, 12)]),
        Case("cpp_swap_structs", [(IN, u(15)), (INT, 5)]),
        Case("cpp_vec_of_vec", [(IN, u(12)), (INT, 3), (INT, 4)]),
        Case("cpp_sort_by_key", [(IN, np.array([0.3, -1.2, 0.8, 1.1, -0.2, 0.55, -0.65, 0.95, 0.05])), (INT, 9)]),
        Case("cpp_product", [(IN, u(9, lo=0.5, hi=1.5)), (INT, 9)]),
        Case("cpp_long_double_math", [(REAL, 0.7), (REAL, 1.3)]),
        Case("cpp_heat_pingpong", [(INOUT, u(9)), (INT, 9), (REAL, 0.2), (INT, 5)]),
        Case("cpp_static_scratch", [(IN, u(9)), (INT, 9)]),
        Case("cpp_static_array", [(IN, u(9)), (INT, 9)]),
        Case("cpp_conjugate_gradient", [(IN, spd), (IN, u(4)), (INT, 4), (INT, 3)]),
        Case("cpp_insertion_median", [(IN, np.array([0.3, -1.2, 0.8, 1.1, -0.2, 0.55, -0.65, 0.95, 0.05])), (INT, 9)]),
        Case("cpp_ring_filter", [(IN, u(10)), (INT, 10), (IN, u(4)), (OUT, np.zeros(10))]),
        Case("cpp_push_into", [(IN, u(9)), (INT, 9), (OUT, np.zeros(9))]),
    ]


CASES = {case.name: case for case in _cases()}
