"""Cases and the two oracles for tests/ad/test_foreign_rust_hunt.py (tests/fixtures/foreign/rust_hunt).

A case names a function of hunt.rs and its arguments, each with a role: ``int`` (a Const integer),
``real`` (an active float scalar), ``in`` (an array read), ``out`` (an array only written) and
``inout`` (read and written in place). ``check`` differentiates the function both ways and compares
the forward tangent ``J v`` with central differences (three step sizes that must agree, as
adoffload/testing/differential.py does), and forward with reverse through <J v, w> = <v, J^T w>.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from adoffload import enzyme as ez

INT, REAL, IN, OUT, INOUT = "int", "real", "in", "out", "inout"
TOLERANCES = {np.float64: dict(step=1e-5, fd=2e-5, identity=1e-10),
              np.float32: dict(step=4e-3, fd=2e-2, identity=2e-4)}


@dataclass
class Case:
    name: str
    params: list            # [(role, value)]: an int, a float or an array (out: its zeros; int: Const indices)
    dtype: type = np.float64
    rounds_through_f32: bool = False   # float64 code that rounds through f32: f32's tolerances


def _lattice(atoms: int, spacing: float, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    grid = np.array([(i % 2, (i // 2) % 2, i // 4) for i in range(atoms)], np.float64) * spacing
    return (grid + rng.uniform(-0.05, 0.05, grid.shape)).ravel()


def _cases() -> list[Case]:
    rng = np.random.default_rng(11)
    u = lambda *shape, lo=-1.0, hi=1.0: rng.uniform(lo, hi, shape)  # noqa: E731
    f32 = lambda a: a.astype(np.float32)  # noqa: E731
    particles = np.concatenate([np.r_[u(3), u(3), rng.uniform(0.5, 2.0)] for _ in range(3)])
    tri = np.array([1.0, 0.1, 0.0, 0.0, 0.0, 0.1, 0.2, 1.1, -0.1]) + u(9, lo=-0.05, hi=0.05)
    early = np.array([0.2, -0.4, 0.3, 1.7, 0.1, 2.2])
    return [
        Case("hr_chain_energy", [(IN, np.cumsum(u(6, lo=0.8, hi=1.2))), (INT, 6), (REAL, 3.0), (REAL, 1.0)]),
        Case("hr_lj_energy", [(IN, _lattice(5, 1.1, 3)), (INT, 5), (REAL, 0.7), (REAL, 1.0)]),
        Case("hr_logsumexp", [(IN, u(7)), (INT, 7)]),
        Case("hr_softmax32", [(IN, f32(u(6))), (INT, 6), (OUT, np.zeros(6, np.float32))], np.float32),
        Case("hr_laplacian", [(IN, u(7)), (INT, 7), (REAL, 0.5), (OUT, np.zeros(7))]),
        Case("hr_matvec", [(IN, u(12)), (INT, 3), (INT, 4), (IN, u(4)), (IN, u(3)), (OUT, np.zeros(3))]),
        Case("hr_horner", [(IN, u(5)), (INT, 5), (REAL, 0.7)]),
        Case("hr_angle", [(IN, tri), (REAL, 2.0), (REAL, 1.2)]),
        Case("hr_cumsum", [(IN, u(6)), (INT, 6), (OUT, np.zeros(6))]),
        Case("hr_normalize", [(INOUT, u(5, lo=0.2, hi=1.0)), (INT, 5)]),
        Case("hr_dot4", [(IN, u(11)), (IN, u(11)), (INT, 11)]),
        Case("hr_axpy32", [(REAL, 0.8), (IN, f32(u(9))), (INOUT, f32(u(9))), (INT, 9)], np.float32),
        Case("hr_math", [(REAL, 0.9), (REAL, 1.3)]),
        Case("hr_generic", [(IN, u(6)), (INT, 6), (REAL, 0.8)]),
        Case("hr_particles", [(IN, particles), (INT, 3), (REAL, 9.8)]),
        Case("hr_polar", [(IN, u(8, lo=0.2, hi=1.0)), (INT, 4)]),
        Case("hr_boxed", [(IN, u(7)), (INT, 7)]),
        Case("hr_vec_zeros", [(IN, u(6)), (INT, 6)]),
        Case("hr_recurrence", [(IN, u(6)), (INT, 6), (REAL, 0.6)]),
        Case("hr_table", [(IN, u(4)), (INT, 4), (IN, u(3)), (INT, 3)]),
        Case("hr_early_return", [(IN, early), (INT, 6), (REAL, 1.0)]),
        Case("hr_match", [(IN, u(7)), (INT, 7), (INT, 1)]),
        Case("hr_permute", [(IN, u(6)), (INT, 6), (IN, u(6))]),
        Case("hr_raw_update", [(INOUT, u(6)), (IN, u(6)), (INT, 6), (REAL, 0.1)]),
        Case("hr_range32", [(IN, f32(u(7))), (INT, 7)], np.float32),
        Case("hr_gyration", [(IN, _lattice(4, 1.0, 5)), (INT, 4)]),
        Case("hr_arc_length", [(IN, u(10)), (INT, 5)]),
        Case("hr_cbrt_newton", [(IN, u(4, lo=1.5, hi=8.0)), (INT, 4), (OUT, np.zeros(4))]),
        Case("hr_lanes8", [(IN, f32(u(19))), (INT, 19), (REAL, 1.3)], np.float32),
        Case("hr_total_cmp", [(IN, np.array([0.3, -1.2, 0.8, 1.1, -0.2])), (INT, 5)]),
        Case("hr_bits_abs", [(IN, u(6)), (INT, 6)]),
        Case("hr_welford", [(IN, u(7)), (INT, 7)]),
        Case("hr_sorted_weights", [(IN, u(6)), (INT, 6)]),
        Case("hr_adapters", [(IN, u(7)), (INT, 7)], rounds_through_f32=True),      # sin in f32
        Case("hr_sse2", [(IN, u(6)), (INT, 3)]),
        Case("hr_rounding", [(REAL, 1.37), (REAL, 0.61)]),
        Case("hr_libm", [(REAL, 0.7), (REAL, 1.4)]),
        Case("hr_swap_relu", [(INOUT, u(6)), (INT, 6)]),
        Case("hr_springs", [(IN, np.cumsum(u(5, lo=0.8, hi=1.3))), (INT, 5), (REAL, 2.0)]),
        Case("hr_powi_var", [(IN, u(6)), (INT, 6), (REAL, 1.2)]),
        Case("hr_iir_inplace", [(INOUT, u(6)), (INT, 6), (REAL, 0.7)]),
        Case("hr_copy_within", [(INOUT, u(7)), (INT, 7)]),
        Case("hr_rotate", [(IN, u(6)), (INT, 6), (INT, 2)]),
        Case("hr_fill_bins", [(IN, u(7)), (INT, 7), (OUT, np.zeros(3)), (INT, 3)]),
        Case("hr_extend", [(IN, u(5)), (INT, 5)]),
        Case("hr_midpoint", [(REAL, 1.3), (REAL, 0.55)]),
        Case("hr_byval3", [(IN, u(3)), (REAL, 1.7)]),
        Case("hr_fn_table", [(IN, u(5)), (INT, 5), (INT, 1)]),
        Case("hr_get_or", [(IN, u(5)), (INT, 5), (INT, 2)]),
        Case("hr_sqrt_relu32", [(IN, f32(u(9))), (INT, 9), (OUT, np.zeros(9, np.float32))], np.float32),
        Case("hr_sret", [(OUT, np.zeros(3)), (REAL, 0.4), (REAL, -0.9), (REAL, 1.3), (REAL, 0.8)]),
        Case("hr_pairwise", [(IN, u(7)), (INT, 7)]),
        Case("hr_black_box", [(REAL, 0.7)]),
        Case("hr_verlet", [(INOUT, np.arange(5.0) + u(5, lo=-0.1, hi=0.1)), (INOUT, u(5, lo=-0.2, hi=0.2)), (INT, 5),
                           (REAL, 1.5), (REAL, 0.05), (INT, 4)]),
        Case("hr_unit_vectors", [(INOUT, u(9, lo=0.3, hi=1.0)), (INT, 3)]),
        Case("hr_scan", [(IN, u(6)), (INT, 6)]),
        Case("hr_vec_of_vecs", [(IN, u(4)), (INT, 4)]),
        Case("hr_gather_inplace", [(INOUT, u(6)), (INT, 6), (INT, np.array([3, 0, 0, 5, 2, 4], np.int32))]),
        Case("hr_scatter_add", [(IN, u(6)), (INT, 6), (INT, np.array([1, 0, 1, 2, 1, 0], np.int32)),
                                (INOUT, u(3)), (INT, 3)]),
        Case("hr_mirror_inplace", [(INOUT, u(7)), (INT, 7)]),
        Case("hr_break_option", [(IN, np.array([0.2, 0.4, 0.9, 0.1, -0.8, 0.3])), (INT, 6), (REAL, 0.5)]),
    ]


CASES = {case.name: case for case in _cases()}


class Mismatch(AssertionError):
    """A silently wrong derivative: the bug these tests hunt."""


def _fresh(case: Case, shift: float = 0.0, v=None) -> list:
    args = []
    for k, (role, value) in enumerate(case.params):
        if role in (IN, INOUT):
            moved = value.astype(np.float64) + (shift * v[k] if v is not None else 0.0)
            args.append(moved.astype(case.dtype))
        elif role == OUT:
            args.append(np.zeros_like(value))
        elif role == REAL:
            args.append(float(case.dtype(value + (shift * v[k] if v is not None else 0.0))))
        else:
            args.append(value)
    return args


def _outputs(case: Case, ret, args) -> np.ndarray:
    parts = [np.atleast_1d(np.float64(ret))] if ret is not None else []
    parts += [np.asarray(a, np.float64) for (role, _), a in zip(case.params, args) if role in (OUT, INOUT)]
    return np.concatenate(parts) if parts else np.zeros(0)


def _central(fn, case: Case, v, h: float) -> np.ndarray:
    up, down = _fresh(case, h, v), _fresh(case, -h, v)
    return (_outputs(case, fn(*up), up) - _outputs(case, fn(*down), down)) / (2 * h)


def check(fn, case: Case, seed: int = 1) -> None:
    """Raise Mismatch when forward mode, reverse mode and central differences disagree (a
    DifferentiationError from the engine passes through: a refusal is allowed)."""
    tol = TOLERANCES[np.float32 if case.rounds_through_f32 else case.dtype]
    rng = np.random.default_rng(seed)
    v = {k: (rng.standard_normal(np.shape(value)) if role != REAL else float(rng.standard_normal()))
         for k, (role, value) in enumerate(case.params) if role in (REAL, IN, INOUT)}
    base_args = _fresh(case)
    ret = fn(*base_args)
    base = _outputs(case, ret, base_args)
    returns = ret is not None
    w_out = {k: rng.standard_normal(np.shape(value)).astype(case.dtype)
             for k, (role, value) in enumerate(case.params) if role in (OUT, INOUT)}

    fwd_args, fwd_shadows = _fresh(case), {}
    call = []
    for k, (role, _) in enumerate(case.params):
        if role == REAL:
            call.append(ez.Duplicated(fwd_args[k], float(case.dtype(v[k]))))
        elif role in (IN, INOUT, OUT):
            fwd_shadows[k] = v[k].astype(case.dtype) if role != OUT else np.zeros_like(fwd_args[k])
            call.append(ez.Duplicated(fwd_args[k], fwd_shadows[k]))
        else:
            call.append(fwd_args[k])
    tangent = ez.autodiff(ez.Forward, fn, *call)
    jv = _outputs(case, tangent if returns else None,
                  [fwd_shadows.get(k) for k in range(len(case.params))])
    if not np.allclose(_outputs(case, ret, fwd_args), base, rtol=1e-6, atol=1e-6):
        raise Mismatch(f"{case.name}: the forward derivative's primal outputs differ from the primal run")

    rev_args, adjoints = _fresh(case), {}
    call = []
    for k, (role, _) in enumerate(case.params):
        if role == REAL:
            call.append(ez.Active(rev_args[k]))
        elif role in (IN, INOUT, OUT):
            adjoints[k] = w_out[k].copy() if role != IN else np.zeros_like(rev_args[k])
            call.append(ez.Duplicated(rev_args[k], adjoints[k]))
        else:
            call.append(rev_args[k])
    active = ez.autodiff(ez.Reverse, fn, *call)
    for k, (role, _) in enumerate(case.params):
        if role == REAL:
            adjoints[k] = active[k]
    if not np.allclose(_outputs(case, ret, rev_args), base, rtol=1e-6, atol=1e-6):
        raise Mismatch(f"{case.name}: the reverse derivative's primal outputs differ from the primal run")

    weights = np.concatenate(([np.ones(1)] if returns else [])
                             + [w_out[k].astype(np.float64).ravel() for k in sorted(w_out)])
    lhs = float(np.dot(jv, weights))
    terms = [np.asarray(v[k], np.float64) * np.asarray(adjoints[k], np.float64) for k in v]
    rhs = float(sum(np.sum(t) for t in terms))
    scale = float(np.sum(np.abs(jv * weights)) + sum(np.sum(np.abs(t)) for t in terms))
    if not (np.isfinite(lhs) and np.isfinite(rhs)) or abs(lhs - rhs) > tol["identity"] * max(scale, 1e-300):
        raise Mismatch(f"{case.name}: <J v, w> = {lhs!r} but <v, J^T w> = {rhs!r}")

    h = tol["step"]
    fd = _central(fn, case, v, h)
    others = [_central(fn, case, v, 2 * h), _central(fn, case, v, h / 4)]
    fd_scale = max(1.0, float(np.max(np.abs(fd), initial=0.0)))
    if not all(np.max(np.abs(fd - o), initial=0.0) <= tol["fd"] * fd_scale / 2 for o in others):
        raise AssertionError(f"{case.name}: central differences disagree between step sizes (a kink "
                             f"near the point): {fd} vs {others}")
    if not np.all(np.isfinite(jv)) or np.max(np.abs(jv - fd), initial=0.0) > tol["fd"] * fd_scale:
        raise Mismatch(f"{case.name}: J v = {jv} but central differences give {fd}")


def skew_reverse_adjoints(monkeypatch, factor: float = 1.01) -> None:
    """Make ``check``'s reverse mode return every Duplicated adjoint times ``factor``: a test that
    ``check`` then fails shows the oracles are not vacuous for its kernels."""
    right = ez.autodiff

    def skewed(mode, f, *args):
        result = right(mode, f, *args)
        if mode is ez.Reverse:
            for a in args:
                if isinstance(a, ez.Duplicated):
                    a.shadow[...] *= factor
        return result
    monkeypatch.setattr(ez, "autodiff", skewed)
