"""The table of tests/ad/test_foreign_numba_hunt.py: each case is a function of numba_hunt_functions.py,
the numba signature and options of its ``@cfunc`` entry (compiled when a test first asks for it, so
collecting the tests compiles nothing) and the arguments with their roles (rust_hunt_cases: ``int``,
``real``, ``in``, ``out``, ``inout``).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from functools import cache

import numba
import numpy as np
from numba import cfunc, types

from . import numba_hunt_functions as fns
from .rust_hunt_cases import IN, INOUT, INT, OUT, REAL, Case

F64, F32, I32, I64 = types.float64, types.float32, types.intc, types.int64
P64, P32, PI32, PI64 = types.CPointer(F64), types.CPointer(F32), types.CPointer(I32), types.CPointer(I64)


@dataclass
class NumbaCase:
    name: str
    py: object                      # the Python function @cfunc compiles
    signature: object               # numba signature of the C entry
    params: list                    # [(role, value)] as rust_hunt_cases.Case
    dtype: type = np.float64
    options: dict = field(default_factory=dict)     # @cfunc options: fastmath, boundscheck, error_model
    rounds_through_f32: bool = False                # float64 code that rounds through f32: f32's tolerances

    def case(self) -> Case:
        return Case(self.name, self.params, self.dtype, self.rounds_through_f32)


# ----------------------------------------------------------------------------- the table

# numpy records (structs): all-float ones are passed as float64 arrays of their words, so the roles of
# rust_hunt_cases apply; BODY_MIXED holds an integer field too (test_foreign_numba_hunt.py tests it alone).
BODY = np.dtype([("h", np.float64), ("v", np.float64), ("k", np.float64), ("m", np.float64)])
BODY_MIXED = np.dtype([("h", np.float64), ("v", np.float64), ("k", np.int64), ("m", np.float64)])
PBODY, PBODY_MIXED = types.CPointer(numba.from_dtype(BODY)), types.CPointer(numba.from_dtype(BODY_MIXED))


def _cases() -> list[NumbaCase]:
    rng = np.random.default_rng(23)
    u = lambda *shape, lo=-1.0, hi=1.0: rng.uniform(lo, hi, shape)
    f32 = lambda a: a.astype(np.float32)
    lower = np.tril(u(4, 4, lo=-0.3, hi=0.3)) + np.eye(4) * 2.0
    pts = (np.array([(i % 2, (i // 2) % 2, i // 4) for i in range(5)], np.float64) + u(5, 3, lo=-0.1, hi=0.1))
    fm = {'fastmath': True}
    return [
        NumbaCase("nb_sum_sq", fns.nb_sum_sq, F64(P64, I32), [(IN, u(7)), (INT, 7)]),
        NumbaCase("nb_axpy_inplace", fns.nb_axpy_inplace, types.void(F64, P64, P64, I32),
                  [(REAL, 0.7), (IN, u(6)), (INOUT, u(6)), (INT, 6)]),
        NumbaCase("nb_axpy32", fns.nb_axpy32, types.void(F32, P32, P32, I32),
                  [(REAL, 0.7), (IN, f32(u(9))), (INOUT, f32(u(9))), (INT, 9)], np.float32),
        NumbaCase("nb_logsumexp", fns.nb_logsumexp, F64(P64, I64), [(IN, u(6)), (INT, 6)]),
        NumbaCase("nb_softplus_out", fns.nb_softplus_out, types.void(P64, P64, I32),
                  [(IN, np.array([-2.0, 0.3, 25.0, 1.1, -0.7])), (OUT, np.zeros(5)), (INT, 5)]),
        NumbaCase("nb_math_mix", fns.nb_math_mix, F64(F64, F64), [(REAL, 0.8), (REAL, 1.3)]),
        NumbaCase("nb_special", fns.nb_special, F64(F64, F64), [(REAL, 0.4), (REAL, 2.3)]),
        NumbaCase("nb_kinks", fns.nb_kinks, F64(F64, F64), [(REAL, -0.6), (REAL, 1.7)]),
        NumbaCase("nb_clip", fns.nb_clip, types.void(P64, P64, I32, F64, F64),
                  [(IN, np.array([-1.3, -0.2, 0.4, 0.9, 1.6, 0.05])), (OUT, np.zeros(6)), (INT, 6), (REAL, -0.5),
                   (REAL, 0.8)]),
        NumbaCase("nb_np_sum", fns.nb_np_sum, F64(P64, I32), [(IN, u(6)), (INT, 6)]),
        NumbaCase("nb_np_sum_view", fns.nb_np_sum_view, F64(P64, I32), [(IN, u(6)), (INT, 6)]),
        NumbaCase("nb_np_dot", fns.nb_np_dot, F64(P64, P64, I32), [(IN, u(5)), (IN, u(5)), (INT, 5)]),
        NumbaCase("nb_np_zeros_scratch", fns.nb_np_zeros_scratch, F64(P64, I32), [(IN, u(5)), (INT, 5)]),
        NumbaCase("nb_np_empty_int_scratch", fns.nb_np_empty_int_scratch, F64(P64, I32), [(IN, u(5)), (INT, 5)]),
        NumbaCase("nb_np_sqrt_array", fns.nb_np_sqrt_array, F64(P64, I32), [(IN, u(5, lo=0.2, hi=2.0)), (INT, 5)]),
        NumbaCase("nb_np_exprs", fns.nb_np_exprs, F64(P64, P64, I32), [(IN, u(6)), (IN, u(6)), (INT, 6)]),
        NumbaCase("nb_np_cumsum", fns.nb_np_cumsum, F64(P64, I32), [(IN, u(6)), (INT, 6)]),
        NumbaCase("nb_np_2d_scratch", fns.nb_np_2d_scratch, F64(P64, I32), [(IN, u(5)), (INT, 5)]),
        NumbaCase("nb_np_helper_array", fns.nb_np_helper_array, F64(P64, I32, F64), [(IN, u(6)), (INT, 6), (REAL, 0.7)]),
        NumbaCase("nb_np_sort", fns.nb_np_sort, F64(P64, P64, I32), [(IN, u(7)), (IN, u(7)), (INT, 7)]),
        NumbaCase("nb_np_copy_update", fns.nb_np_copy_update, types.void(P64, P64, I32),
                  [(IN, u(6)), (OUT, np.zeros(6)), (INT, 6)]),
        NumbaCase("nb_strided", fns.nb_strided, F64(P64, I32), [(IN, u(9)), (INT, 9)]),
        NumbaCase("nb_transpose", fns.nb_transpose, F64(P64, I32, I32), [(IN, u(12)), (INT, 3), (INT, 4)]),
        NumbaCase("nb_scratch_reuse", fns.nb_scratch_reuse, types.void(P64, P64, I32, I32),
                  [(IN, u(5)), (INOUT, u(5)), (INT, 5), (INT, 3)]),
        NumbaCase("nb_branches", fns.nb_branches, types.void(P64, P64, I32),
                  [(IN, np.array([-1.2, -0.3, 0.1, 0.7, 2.0, -0.8])), (OUT, np.zeros(6)), (INT, 6)]),
        NumbaCase("nb_early_return", fns.nb_early_return, F64(P64, I32, F64),
                  [(IN, np.array([0.5, -0.7, 0.9, 1.2, 0.3])), (INT, 5), (REAL, 1.5)]),
        NumbaCase("nb_while_newton", fns.nb_while_newton, types.void(P64, P64, I32),
                  [(IN, u(5, lo=0.5, hi=4.0)), (OUT, np.zeros(5)), (INT, 5)]),
        NumbaCase("nb_gather", fns.nb_gather, types.void(P64, PI64, P64, I32),
                  [(IN, u(6)), (INT, np.array([3, 0, 0, 5, 2, 4], np.int64)), (OUT, np.zeros(6)), (INT, 6)]),
        NumbaCase("nb_scatter_add", fns.nb_scatter_add, types.void(P64, PI32, P64, I32, I32),
                  [(IN, u(6)), (INT, np.array([1, 0, 1, 2, 1, 0], np.int32)), (INOUT, u(3)), (INT, 6), (INT, 3)]),
        NumbaCase("nb_norm32", fns.nb_norm32, F32(P32, I32), [(IN, f32(u(7))), (INT, 7)], np.float32),
        NumbaCase("nb_softmax32", fns.nb_softmax32, types.void(P32, P32, I32),
                  [(IN, f32(u(6))), (OUT, np.zeros(6, np.float32)), (INT, 6)], np.float32),
        NumbaCase("nb_tuple_helper", fns.nb_tuple_helper, F64(P64, I32), [(IN, u(5)), (INT, 5)]),
        NumbaCase("nb_tuple_index", fns.nb_tuple_index, F64(P64, I32), [(IN, u(7)), (INT, 7)]),
        NumbaCase("nb_forward_subst", fns.nb_forward_subst, types.void(P64, P64, I32),
                  [(IN, lower.ravel()), (INOUT, u(4)), (INT, 4)]),
        NumbaCase("nb_triangle_pairs", fns.nb_triangle_pairs, F64(P64, I32), [(IN, pts.ravel()), (INT, 5)]),
        NumbaCase("nb_iir_inplace", fns.nb_iir_inplace, types.void(P64, I32, F64), [(INOUT, u(6)), (INT, 6), (REAL, 0.6)]),
        NumbaCase("nb_cumprod", fns.nb_cumprod, types.void(P64, P64, I32),
                  [(IN, u(5, lo=0.5, hi=1.5)), (OUT, np.zeros(5)), (INT, 5)]),
        NumbaCase("nb_horner", fns.nb_horner, F64(P64, I32, F64), [(IN, u(5)), (INT, 5), (REAL, 0.7)]),
        NumbaCase("nb_matvec", fns.nb_matvec, types.void(P64, P64, P64, I32, I32),
                  [(IN, u(12)), (IN, u(4)), (OUT, np.zeros(3)), (INT, 3), (INT, 4)]),
        NumbaCase("nb_stencil", fns.nb_stencil, types.void(P64, P64, I32, F64),
                  [(IN, u(6)), (OUT, np.zeros(6)), (INT, 6), (REAL, 0.5)]),
        NumbaCase("nb_normalize_inplace", fns.nb_normalize_inplace, types.void(P64, I32),
                  [(INOUT, u(5, lo=0.2, hi=1.0)), (INT, 5)]),
        NumbaCase("nb_powers", fns.nb_powers, F64(P64, I32, F64), [(IN, u(5, lo=0.3, hi=1.5)), (INT, 5), (REAL, 1.7)]),
        NumbaCase("nb_int_power", fns.nb_int_power, F64(P64, I32, I32), [(IN, u(5)), (INT, 5), (INT, 5)]),
        NumbaCase("nb_sigmoid_stable", fns.nb_sigmoid_stable, types.void(P64, P64, I32),
                  [(IN, np.array([-3.0, -0.4, 0.2, 1.5, 4.0])), (OUT, np.zeros(5)), (INT, 5)]),
        NumbaCase("nb_bin_by_int", fns.nb_bin_by_int, types.void(P64, P64, I32, I32),
                  [(IN, np.array([0.11, 0.52, 0.37, 0.93, 0.71, 0.26])), (INOUT, u(4)), (INT, 6), (INT, 4)]),
        NumbaCase("nb_welford", fns.nb_welford, F64(P64, I32), [(IN, u(7)), (INT, 7)]),
        NumbaCase("nb_complex", fns.nb_complex, F64(P64, P64, I32), [(IN, u(4)), (IN, u(4)), (INT, 4)]),
        NumbaCase("nb_break", fns.nb_break, F64(P64, I32, F64),
                  [(IN, np.array([0.3, -0.2, 0.5, 1.4, 0.2])), (INT, 5), (REAL, 1.0)]),
        NumbaCase("nb_checked_sum", fns.nb_checked_sum, F64(P64, I32), [(IN, u(6)), (INT, 6)]),
        NumbaCase("nb_checked_stencil", fns.nb_checked_stencil, types.void(P64, P64, I32),
                  [(IN, u(6)), (OUT, np.zeros(6)), (INT, 6)], options={'boundscheck': True}),
        NumbaCase("nb_fast_dot", fns.nb_fast_dot, F64(P64, P64, I32), [(IN, u(11)), (IN, u(11)), (INT, 11)], options=fm),
        NumbaCase("nb_fast_math", fns.nb_fast_math, types.void(P64, P64, I32),
                  [(IN, u(9)), (OUT, np.zeros(9)), (INT, 9)], options=fm),
        NumbaCase("nb_fast_sum32", fns.nb_norm32, F32(P32, I32), [(IN, f32(u(13))), (INT, 13)], np.float32, fm),
        NumbaCase("nb_divide_python", fns.nb_divide, types.void(P64, P64, P64, I32),
                  [(IN, u(5)), (IN, u(5, lo=0.5, hi=2.0)), (OUT, np.zeros(5)), (INT, 5)]),
        NumbaCase("nb_divide_numpy", fns.nb_divide, types.void(P64, P64, P64, I32),
                  [(IN, u(5)), (IN, u(5, lo=0.5, hi=2.0)), (OUT, np.zeros(5)), (INT, 5)],
                  options={'error_model': 'numpy'}),
        NumbaCase("nb_f32_mixed", fns.nb_f32_mixed, F32(P32, I32, F32), [(IN, f32(u(6))), (INT, 6), (REAL, 0.6)],
                  np.float32),
        NumbaCase("nb_2d_rows", fns.nb_2d_rows, F64(P64, I32, I32), [(IN, u(12)), (INT, 3), (INT, 4)]),
        NumbaCase("nb_reverse_view", fns.nb_reverse_view, types.void(P64, P64, I32),
                  [(IN, u(6)), (OUT, np.zeros(6)), (INT, 6)]),
        NumbaCase("nb_slice_sum", fns.nb_slice_sum, F64(P64, I32), [(IN, u(6)), (INT, 6)]),
        NumbaCase("nb_record_like", fns.nb_record_like, F64(P64, I32, F64),
                  [(IN, u(12, lo=0.2, hi=1.0)), (INT, 3), (REAL, 9.8)]),
        NumbaCase("nb_raise", fns.nb_raise, F64(P64, I32), [(IN, u(6)), (INT, 6)]),
        NumbaCase("nb_np_scalars", fns.nb_np_scalars, F64(F64, F64), [(REAL, 0.7), (REAL, 1.3)]),
        NumbaCase("nb_floordiv", fns.nb_floordiv, F64(P64, I32, I32), [(IN, u(6)), (INT, 6), (INT, 4)]),
        NumbaCase("nb_closure", fns.nb_closure, F64(P64, I32, F64), [(IN, u(6)), (INT, 6), (REAL, 1.3)]),
        NumbaCase("nb_records", fns.nb_records, F64(PBODY, I32, F64), [(IN, u(16, lo=0.2, hi=1.0)), (INT, 4), (REAL, 9.8)]),
        NumbaCase("nb_record_write", fns.nb_record_write, types.void(PBODY, I32, F64),
                  [(INOUT, u(16, lo=0.2, hi=1.0)), (INT, 4), (REAL, 0.1)]),
        NumbaCase("nb_bits_abs", fns.nb_bits_abs, types.void(P64, I32), [(INOUT, u(6)), (INT, 6)]),
        NumbaCase("nb_bits_read", fns.nb_bits_read, F64(P64, I32), [(IN, u(6)), (INT, 6)]),
        NumbaCase("nb_bubble_pass", fns.nb_bubble_pass, types.void(P64, I32), [(INOUT, u(6)), (INT, 6)]),
        NumbaCase("nb_iterate", fns.nb_iterate, F64(P64, P64, I32), [(IN, u(5)), (IN, u(5)), (INT, 5)]),
        NumbaCase("nb_fortran_view", fns.nb_fortran_view, F64(P64, I32, I32), [(IN, u(12)), (INT, 3), (INT, 4)]),
        NumbaCase("nb_math2", fns.nb_math2, F64(F64, F64), [(REAL, 0.6), (REAL, 1.4)]),
        NumbaCase("nb_round_trunc", fns.nb_round_trunc, F64(F64, F64), [(REAL, 1.37), (REAL, 0.61)]),
        NumbaCase("nb_frexp_ldexp", fns.nb_frexp_ldexp, F64(F64, F64), [(REAL, 3.3), (REAL, 0.61)]),
        NumbaCase("nb_gauss_seidel", fns.nb_gauss_seidel, types.void(P64, I32, I32), [(INOUT, u(6)), (INT, 6), (INT, 3)]),
        NumbaCase("nb_swap_ends", fns.nb_swap_ends, types.void(P64, I32), [(INOUT, u(7)), (INT, 7)]),
        NumbaCase("nb_argmax", fns.nb_argmax, F64(P64, I32), [(IN, u(6)), (INT, 6)]),
        NumbaCase("nb_tuple_recurrence", fns.nb_tuple_recurrence, F64(F64, F64, I32), [(REAL, 0.3), (REAL, 0.8), (INT, 5)]),
        NumbaCase("nb_recursive", fns.nb_recursive, F64(F64, I32), [(REAL, 0.9), (INT, 4)]),
        NumbaCase("nb_generator", fns.nb_generator, F64(P64, I32), [(IN, u(6)), (INT, 6)]),
        NumbaCase("nb_global_array", fns.nb_global_array, F64(P64, I32), [(IN, u(7)), (INT, 7)]),
        NumbaCase("nb_isnan_guard", fns.nb_isnan_guard, F64(P64, I32), [(IN, u(6, lo=0.2, hi=3.0)), (INT, 6)]),
        NumbaCase("nb_continue", fns.nb_continue, types.void(P64, P64, I32),
                  [(IN, np.array([0.4, -0.3, 1.2, -0.9, 0.8])), (OUT, np.zeros(5)), (INT, 5)]),
        NumbaCase("nb_f32_roundtrip", fns.nb_f32_roundtrip, F64(P64, I32), [(IN, u(5)), (INT, 5)],
                  rounds_through_f32=True),
        NumbaCase("nb_reversed_loop", fns.nb_reversed_loop, types.void(P64, P64, I32),
                  [(IN, u(6)), (OUT, np.zeros(6)), (INT, 6)]),
        NumbaCase("nb_int_gather_neg", fns.nb_int_gather_neg, F64(P64, PI64, I32),
                  [(IN, u(5)), (INT, np.array([-1, 2, -5, 0, 4], np.int64)), (INT, 5)]),
        NumbaCase("nb_where_scalar", fns.nb_where_scalar, types.void(P64, P64, I32),
                  [(IN, np.array([0.4, -0.3, 1.2, -0.9, 0.8])), (OUT, np.zeros(5)), (INT, 5)]),
        NumbaCase("nb_checked_gather", fns.nb_checked_gather, F64(P64, PI32, I32),
                  [(IN, u(5)), (INT, np.array([4, 2, -5, 0, 4], np.int32)), (INT, 5)], options={'boundscheck': True}),
        NumbaCase("nb_cond_store", fns.nb_cond_store, types.void(P64, P64, I32, F64),
                  [(IN, np.array([0.4, -0.3, 1.2, 0.9, 0.15])), (INOUT, np.array([0.1, 0.7, 0.2, 0.9, 0.6])), (INT, 5),
                   (REAL, 1.1)]),
    ]


def _big_cases() -> list[NumbaCase]:
    """Loops long enough (37) to run numba's vector bodies (this CPU's width), their epilogues and
    remainders: the short cases above run only the scalar remainder loops."""
    rng = np.random.default_rng(29)
    n = 37
    u = lambda *shape, lo=-1.0, hi=1.0: rng.uniform(lo, hi, shape)
    f32 = lambda a: a.astype(np.float32)
    fm = {'fastmath': True}
    idx = rng.integers(0, n, n)
    return [
        NumbaCase("big_sum_sq", fns.nb_sum_sq, F64(P64, I32), [(IN, u(n)), (INT, n)]),
        NumbaCase("big_axpy_inplace", fns.nb_axpy_inplace, types.void(F64, P64, P64, I32),
                  [(REAL, 0.7), (IN, u(n)), (INOUT, u(n)), (INT, n)]),
        NumbaCase("big_axpy32", fns.nb_axpy32, types.void(F32, P32, P32, I32),
                  [(REAL, 0.7), (IN, f32(u(n))), (INOUT, f32(u(n))), (INT, n)], np.float32),
        NumbaCase("big_logsumexp", fns.nb_logsumexp, F64(P64, I64), [(IN, u(n)), (INT, n)]),
        NumbaCase("big_clip", fns.nb_clip, types.void(P64, P64, I32, F64, F64),
                  [(IN, u(n, lo=-1.5, hi=1.5)), (OUT, np.zeros(n)), (INT, n), (REAL, -0.5), (REAL, 0.8)]),
        NumbaCase("big_branches", fns.nb_branches, types.void(P64, P64, I32),
                  [(IN, u(n, lo=-2.0, hi=2.0)), (OUT, np.zeros(n)), (INT, n)]),
        NumbaCase("big_gather", fns.nb_gather, types.void(P64, PI64, P64, I32),
                  [(IN, u(n)), (INT, idx.astype(np.int64)), (OUT, np.zeros(n)), (INT, n)]),
        NumbaCase("big_scatter_add", fns.nb_scatter_add, types.void(P64, PI32, P64, I32, I32),
                  [(IN, u(n)), (INT, (idx % 5).astype(np.int32)), (INOUT, u(5)), (INT, n), (INT, 5)]),
        NumbaCase("big_norm32", fns.nb_norm32, F32(P32, I32), [(IN, f32(u(n))), (INT, n)], np.float32),
        NumbaCase("big_softmax32", fns.nb_softmax32, types.void(P32, P32, I32),
                  [(IN, f32(u(n))), (OUT, np.zeros(n, np.float32)), (INT, n)], np.float32),
        NumbaCase("big_iir_inplace", fns.nb_iir_inplace, types.void(P64, I32, F64), [(INOUT, u(n)), (INT, n), (REAL, 0.6)]),
        NumbaCase("big_stencil", fns.nb_stencil, types.void(P64, P64, I32, F64),
                  [(IN, u(n)), (OUT, np.zeros(n)), (INT, n), (REAL, 0.5)]),
        NumbaCase("big_normalize_inplace", fns.nb_normalize_inplace, types.void(P64, I32),
                  [(INOUT, u(n, lo=0.2, hi=1.0)), (INT, n)]),
        NumbaCase("big_powers", fns.nb_powers, F64(P64, I32, F64), [(IN, u(n, lo=0.3, hi=1.5)), (INT, n), (REAL, 1.7)]),
        NumbaCase("big_sigmoid_stable", fns.nb_sigmoid_stable, types.void(P64, P64, I32),
                  [(IN, u(n, lo=-4.0, hi=4.0)), (OUT, np.zeros(n)), (INT, n)]),
        NumbaCase("big_fast_dot", fns.nb_fast_dot, F64(P64, P64, I32), [(IN, u(n)), (IN, u(n)), (INT, n)], options=fm),
        NumbaCase("big_fast_math", fns.nb_fast_math, types.void(P64, P64, I32),
                  [(IN, u(n)), (OUT, np.zeros(n)), (INT, n)], options=fm),
        NumbaCase("big_fast_sum32", fns.nb_norm32, F32(P32, I32), [(IN, f32(u(n))), (INT, n)], np.float32, fm),
        NumbaCase("big_divide_numpy", fns.nb_divide, types.void(P64, P64, P64, I32),
                  [(IN, u(n)), (IN, u(n, lo=0.5, hi=2.0)), (OUT, np.zeros(n)), (INT, n)],
                  options={'error_model': 'numpy'}),
        NumbaCase("big_f32_mixed", fns.nb_f32_mixed, F32(P32, I32, F32), [(IN, f32(u(n))), (INT, n), (REAL, 0.6)],
                  np.float32),
        NumbaCase("big_reverse_view", fns.nb_reverse_view, types.void(P64, P64, I32),
                  [(IN, u(n)), (OUT, np.zeros(n)), (INT, n)]),
        NumbaCase("big_matvec", fns.nb_matvec, types.void(P64, P64, P64, I32, I32),
                  [(IN, u(3 * n)), (IN, u(n)), (OUT, np.zeros(3)), (INT, 3), (INT, n)]),
        NumbaCase("big_continue", fns.nb_continue, types.void(P64, P64, I32),
                  [(IN, u(n)), (OUT, np.zeros(n)), (INT, n)]),
        NumbaCase("big_checked_gather", fns.nb_checked_gather, F64(P64, PI32, I32),
                  [(IN, u(n)), (INT, (idx - n // 2).astype(np.int32)), (INT, n)], options={'boundscheck': True}),
        NumbaCase("big_cond_store", fns.nb_cond_store, types.void(P64, P64, I32, F64),
                  [(IN, u(n)), (INOUT, u(n, lo=0.0, hi=1.0)), (INT, n), (REAL, 1.1)]),
        NumbaCase("big_cumprod", fns.nb_cumprod, types.void(P64, P64, I32),
                  [(IN, u(n, lo=0.8, hi=1.2)), (OUT, np.zeros(n)), (INT, n)]),
        NumbaCase("big_softplus_out", fns.nb_softplus_out, types.void(P64, P64, I32),
                  [(IN, u(n, lo=-3.0, hi=3.0)), (OUT, np.zeros(n)), (INT, n)]),
        NumbaCase("big_complex", fns.nb_complex, F64(P64, P64, I32), [(IN, u(n)), (IN, u(n)), (INT, n)]),
        NumbaCase("big_tuple_index", fns.nb_tuple_index, F64(P64, I32), [(IN, u(n)), (INT, n)]),
        NumbaCase("big_global_array", fns.nb_global_array, F64(P64, I32), [(IN, u(n)), (INT, n)]),
        NumbaCase("big_iterate", fns.nb_iterate, F64(P64, P64, I32), [(IN, u(n)), (IN, u(n)), (INT, n)]),
    ]


CASES = {case.name: case for case in _cases() + _big_cases()}
# Run only with ADOFFLOAD_NUMBA_HUNT=all (test_foreign_numba_hunt.py), to keep CI's share near a minute:
# long-loop variants whose loops do not vectorize or repeat a short case's vector code, short cases a long
# one covers, a refusal that repeats another's reason, and numpy calls numba takes seconds to compile.
EXTRA = frozenset({"big_sum_sq", "big_norm32", "big_iir_inplace", "big_normalize_inplace", "big_powers",
                   "big_sigmoid_stable", "big_fast_math", "big_matvec", "big_cumprod",
                   "big_softplus_out", "big_complex", "big_tuple_index", "big_global_array", "big_iterate",
                   "nb_slice_sum", "nb_where_scalar", "nb_np_sort", "nb_np_copy_update", "nb_np_exprs",
                   "nb_np_2d_scratch", "nb_divide_numpy", "big_reverse_view", "nb_fast_dot", "nb_softmax32",
                   "nb_strided",
                   "nb_np_sqrt_array", "nb_np_empty_int_scratch", "nb_isnan_guard", "nb_checked_sum",
                   "big_axpy_inplace", "nb_cond_store", "nb_clip", "nb_np_sum_view", "nb_cumprod", "nb_2d_rows",
                   "nb_record_like", "nb_logsumexp", "nb_fast_sum32", "nb_axpy32", "nb_gather", "nb_scatter_add",
                   "nb_branches", "nb_stencil", "nb_checked_gather", "nb_f32_mixed"})


@cache
def compiled(name: str):
    """The ``numba.cfunc`` of a case, compiled on first use."""
    case = CASES[name]
    return cfunc(case.signature, **case.options)(case.py)
