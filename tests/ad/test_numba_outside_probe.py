"""numba code written as scientists write it, differentiated as an outside user would.

The functions are ordinary ``@njit`` functions over numpy arrays (``a.shape[0]`` loops, ``a[i, j]``,
``np.sum``/``np.exp``/``np.sqrt`` on arrays, ``np.zeros``/``np.empty`` temporaries, ``math.*``,
data-dependent ``while`` loops, early returns, index arrays, tuples, float32, ``fastmath``,
``boundscheck``, ``error_model="numpy"``, exceptions): an LJ energy on a neighbor list, softmax,
a Horner polynomial, a cumulative sum, a matrix-vector product, Jacobi iterations, an SPH density,
an RK4 step. ``ado.from_numba`` takes a ``numba.cfunc``, so each is called from a small C-ABI entry
that wraps its pointers with ``carray``, as a user has to. Each is checked in both modes against
central differences and against the other mode (<J v, w> = <v, J^T w>; rust_hunt_cases.check).
What the engine cannot differentiate is refused with an error that says what and why.
"""
from __future__ import annotations

import math
import sys
from functools import cache

import numpy as np
import pytest

import adoffload as ado
from adoffload import enzyme as ez

numba = pytest.importorskip("numba", reason="numba is a test dependency (pip install -e '.[test]')")
from numba import carray, cfunc, njit, types  # noqa: E402

from .rust_hunt_cases import IN, INOUT, INT, OUT, REAL, Case, Mismatch, check, skew_reverse_adjoints  # noqa: E402

F64, F32, I64 = types.float64, types.float32, types.int64
P64, P32, PI64, PI32 = types.CPointer(F64), types.CPointer(F32), types.CPointer(I64), types.CPointer(types.int32)
VOID = types.void


# ----------------------------------------------------------------------------- the scientists' functions

@njit
def lj_energy(pos, nbr_i, nbr_j, sigma, eps, rc):
    e = 0.0
    for k in range(nbr_i.shape[0]):
        i, j = nbr_i[k], nbr_j[k]
        d = pos[i] - pos[j]                       # an array temporary per pair
        r2 = d[0] * d[0] + d[1] * d[1] + d[2] * d[2]
        if r2 > rc * rc:
            continue
        s6 = (sigma * sigma / r2) ** 3
        e += 4.0 * eps * (s6 * s6 - s6)
    return e


def lj_entry(pp, ip, jp, n, m, sigma, eps, rc):
    return lj_energy(carray(pp, (n, 3)), carray(ip, (m,)), carray(jp, (m,)), sigma, eps, rc)


@njit
def logsumexp_loop(x):
    m = x[0]
    for i in range(1, x.shape[0]):
        if x[i] > m:
            m = x[i]
    s = 0.0
    for i in range(x.shape[0]):
        s += math.exp(x[i] - m)
    return m + math.log(s)


def logsumexp_entry(xp, n):
    return logsumexp_loop(carray(xp, (n,)))


@njit
def softmax(x, out):
    m = -np.inf
    for i in range(x.shape[0]):
        m = max(m, x[i])
    tmp = np.empty_like(x)
    s = 0.0
    for i in range(x.shape[0]):
        tmp[i] = np.exp(x[i] - m)
        s += tmp[i]
    for i in range(x.shape[0]):
        out[i] = tmp[i] / s


def softmax_entry(xp, yp, n):
    softmax(carray(xp, (n,)), carray(yp, (n,)))


@njit
def horner(c, x):
    r = 0.0
    for k in range(c.shape[0] - 1, -1, -1):
        r = r * x + c[k]
    return r


def horner_entry(cp, nc, xp, yp, n):
    c, x, y = carray(cp, (nc,)), carray(xp, (n,)), carray(yp, (n,))
    for i in range(n):
        y[i] = horner(c, x[i])


@njit
def cumsum(x, out):
    acc = 0.0
    for i in range(x.shape[0]):
        acc += x[i]
        out[i] = acc


def cumsum_entry(xp, yp, n):
    cumsum(carray(xp, (n,)), carray(yp, (n,)))


@njit
def matvec(A, x, y):
    m, n = A.shape
    for i in range(m):
        s = 0.0
        for j in range(n):
            s += A[i, j] * x[j]
        y[i] = s


def matvec_entry(ap, xp, yp, m, n):
    matvec(carray(ap, (m, n)), carray(xp, (n,)), carray(yp, (m,)))


@njit
def norm_rows(A, out):
    for i in range(A.shape[0]):
        out[i] = np.sqrt(np.sum(A[i] ** 2))


def norm_rows_entry(ap, op, m, n):
    norm_rows(carray(ap, (m, n)), carray(op, (m,)))


@njit
def rk4_pendulum(y0, y1, k, dt, nsteps):
    for _ in range(nsteps):
        a0, a1 = y1, -k * math.sin(y0)
        b0, b1 = y1 + dt / 2 * a1, -k * math.sin(y0 + dt / 2 * a0)
        c0, c1 = y1 + dt / 2 * b1, -k * math.sin(y0 + dt / 2 * b0)
        d0, d1 = y1 + dt * c1, -k * math.sin(y0 + dt * c0)
        y0 = y0 + dt / 6 * (a0 + 2 * b0 + 2 * c0 + d0)
        y1 = y1 + dt / 6 * (a1 + 2 * b1 + 2 * c1 + d1)
    return y0, y1


def rk4_entry(yp, k, dt, n):
    y = carray(yp, (2,))
    a, b = rk4_pendulum(y[0], y[1], k, dt, n)
    y[0] = a
    y[1] = b


@njit
def newton_sqrt(a, tol):
    x = a if a > 1 else 1.0
    it = 0
    while abs(x * x - a) > tol and it < 100:       # a data-dependent exit
        x = 0.5 * (x + a / x)
        it += 1
    return x


def newton_entry(ap, op, n):
    a, o = carray(ap, (n,)), carray(op, (n,))
    for i in range(n):
        o[i] = newton_sqrt(a[i], 1e-12)


@njit
def first_above(A, t):
    for i in range(A.shape[0]):
        for j in range(A.shape[1]):
            if A[i, j] > t:
                return A[i, j] * i + math.log(A[i, j])      # an early return from a nested loop
    return 0.0


def first_above_entry(ap, m, n, t):
    return first_above(carray(ap, (m, n)), t)


@njit
def scatter_add(x, idx, y):
    for k in range(idx.shape[0]):
        y[idx[k]] += x[k] * x[k]


def scatter_entry(xp, ip, yp, n, m):
    scatter_add(carray(xp, (n,)), carray(ip, (n,)), carray(yp, (m,)))


@njit
def fancy_gather(x, idx):
    return np.sum(x[idx] ** 2)


def fancy_gather_entry(xp, ip, n, m):
    return fancy_gather(carray(xp, (n,)), carray(ip, (m,)))


@njit
def gather32(x, idx):
    s = 0.0
    for k in range(idx.shape[0]):
        s += x[idx[k]] * math.cos(x[idx[k]])
    return s


def gather32_entry(xp, ip, n, m):
    return gather32(carray(xp, (n,)), carray(ip, (m,)))


@njit
def mean_var(x):
    mu = np.mean(x)
    return mu, np.mean((x - mu) ** 2)


def mean_var_entry(xp, n):
    mu, var = mean_var(carray(xp, (n,)))
    return mu + 3.0 * var


@njit
def norm32(x):
    s = np.float32(0.0)
    for i in range(x.shape[0]):
        s += x[i] * x[i]
    return np.sqrt(s)


def norm32_entry(xp, n):
    return norm32(carray(xp, (n,)))


@njit
def exp_sin32(x, y):
    for i in range(x.shape[0]):
        y[i] = math.exp(x[i]) * math.sin(x[i]) + math.sqrt(abs(x[i]) + 1)


def exp_sin32_entry(xp, yp, n):
    exp_sin32(carray(xp, (n,)), carray(yp, (n,)))


@njit(fastmath=True)
def fast_energy(x, y):
    s = 0.0
    for i in range(x.shape[0]):
        s += x[i] * y[i] / (1.0 + x[i] * x[i]) + math.exp(-x[i] * x[i]) * math.cos(y[i])
    return math.sqrt(s * s + 1.0)


def fast_energy_entry(xp, yp, n):
    return fast_energy(carray(xp, (n,)), carray(yp, (n,)))


@njit(boundscheck=True)
def checked_diff(x, y):
    for i in range(x.shape[0] - 1):
        y[i] = x[i + 1] - x[i]
    y[x.shape[0] - 1] = 0.0


def checked_diff_entry(xp, yp, n):
    checked_diff(carray(xp, (n,)), carray(yp, (n,)))


@njit(boundscheck=True)
def checked_gather(x, idx):
    s = 0.0
    for k in range(idx.shape[0]):
        s += x[idx[k]] ** 2
    return s


def checked_gather_entry(xp, ip, n, m):
    return checked_gather(carray(xp, (n,)), carray(ip, (m,)))


@njit(error_model="numpy")
def reciprocal_mod(x, y):
    for i in range(x.shape[0]):
        y[i] = 1.0 / x[i] + x[i] % 0.7


def reciprocal_mod_entry(xp, yp, n):
    reciprocal_mod(carray(xp, (n,)), carray(yp, (n,)))


@njit
def sqrt_sum(x):
    s = 0.0
    for i in range(x.shape[0]):
        if x[i] < 0:
            raise ValueError("negative input")
        s += math.sqrt(x[i])
    return s


def sqrt_sum_entry(xp, n):
    return sqrt_sum(carray(xp, (n,)))


@njit
def pair_gauss(x):
    d = x[:, None] - x[None, :]              # a 2-D temporary by broadcasting
    return np.sum(np.exp(-d * d))


def pair_gauss_entry(xp, n):
    return pair_gauss(carray(xp, (n,)))


@njit
def gram(x, n):
    g = np.zeros((n, n))
    for i in range(n):
        for j in range(n):
            g[i, j] = x[i] * x[j] + math.tanh(x[i] - x[j])
    return g.sum()


def gram_entry(xp, n):
    return gram(carray(xp, (n,)), n)


@njit
def jacobi(A, b, iters):
    n = b.shape[0]
    x, xn = np.zeros(n), np.zeros(n)
    for _ in range(iters):
        for i in range(n):
            s = b[i]
            for j in range(n):
                if j != i:
                    s -= A[i, j] * x[j]
            xn[i] = s / A[i, i]
        err = 0.0
        for i in range(n):
            err = max(err, abs(xn[i] - x[i]))
            x[i] = xn[i]
        if err < 1e-14:
            break
    return x


def jacobi_entry(ap, bp, xp, n, iters):
    out = carray(xp, (n,))
    out[:] = jacobi(carray(ap, (n, n)), carray(bp, (n,)), iters)


@njit(inline="always")
def _wendland(r, h):
    q = r / h
    if q < 1.0:
        return (1 - q) ** 3 * (1 + 3 * q)
    return 0.0


@njit
def sph_density(pos, m, h):
    n = pos.shape[0]
    rho = np.zeros(n)
    for i in range(n):
        for j in range(n):
            dx, dy = pos[i, 0] - pos[j, 0], pos[i, 1] - pos[j, 1]
            rho[i] += m[j] * _wendland(math.sqrt(dx * dx + dy * dy + 1e-12), h)
    return np.sum(rho ** 2)


def sph_entry(pp, mp, n, h):
    return sph_density(carray(pp, (n, 2)), carray(mp, (n,)), h)


@njit
def recurrence_inplace(x, a):
    for i in range(1, x.shape[0]):
        x[i] = a * x[i - 1] + math.sin(x[i])


def recurrence_entry(xp, n, a):
    recurrence_inplace(carray(xp, (n,)), a)


@njit
def logistic_history(x, r, out):
    k = 0
    while x < 10.0 and k < out.shape[0]:      # leaves on the value: writes as many elements as it runs
        x = r * x * (1.0 + 0.1 * math.sin(x))
        out[k] = x
        k += 1
    return x * k


def history_entry(x0, r, op, n):
    return logistic_history(x0, r, carray(op, (n,)))


@njit
def apply_sum(f, x):                           # an @njit function passed as a value
    s = 0.0
    for i in range(x.shape[0]):
        s += f(x[i])
    return s


_square, _sin_cubed = njit(lambda v: v * v), njit(lambda v: math.sin(v) ** 3)


def apply_entry(xp, n):
    x = carray(xp, (n,))
    return apply_sum(_square, x) + 2 * apply_sum(_sin_cubed, x)


# ----------------------------------------------------------------------------- the table

_rng = np.random.default_rng(7)


def _u(*shape, lo=-1.0, hi=1.0):
    return _rng.uniform(lo, hi, shape)


_POS = np.array([(i % 2, (i // 2) % 2, i // 4) for i in range(6)], np.float64) * 1.1 + _u(6, 3, lo=-0.1, hi=0.1)
_NI, _NJ = np.array([0, 0, 1, 2, 3, 4, 1, 0], np.int64), np.array([1, 2, 3, 3, 5, 5, 4, 5], np.int64)
_A = _u(4, 4, lo=-0.3, hi=0.3) + 3 * np.eye(4)

# name: (entry, signature, options, [(role, value)], dtype)
CASES = {
    "lj_neighbor_list": (lj_entry, F64(P64, PI64, PI64, I64, I64, F64, F64, F64), {},
                         [(IN, _POS), (INT, _NI), (INT, _NJ), (INT, 6), (INT, 8), (REAL, 1.0), (REAL, 0.8), (INT, 1.6)]),
    "logsumexp": (logsumexp_entry, F64(P64, I64), {}, [(IN, _u(7)), (INT, 7)]),
    "softmax_scratch": (softmax_entry, VOID(P64, P64, I64), {}, [(IN, _u(6)), (OUT, np.zeros(6)), (INT, 6)]),
    "horner": (horner_entry, VOID(P64, I64, P64, P64, I64), {},
               [(IN, _u(5)), (INT, 5), (IN, _u(4)), (OUT, np.zeros(4)), (INT, 4)]),
    "cumsum": (cumsum_entry, VOID(P64, P64, I64), {}, [(IN, _u(6)), (OUT, np.zeros(6)), (INT, 6)]),
    "matvec": (matvec_entry, VOID(P64, P64, P64, I64, I64), {},
               [(IN, _u(3, 4)), (IN, _u(4)), (OUT, np.zeros(3)), (INT, 3), (INT, 4)]),
    "norm_rows": (norm_rows_entry, VOID(P64, P64, I64, I64), {}, [(IN, _u(3, 4)), (OUT, np.zeros(3)), (INT, 3), (INT, 4)]),
    "rk4_tuples": (rk4_entry, VOID(P64, F64, F64, I64), {}, [(INOUT, _u(2)), (REAL, 1.3), (REAL, 0.1), (INT, 5)]),
    "newton_while": (newton_entry, VOID(P64, P64, I64), {}, [(IN, _u(4, lo=0.5, hi=3)), (OUT, np.zeros(4)), (INT, 4)]),
    "early_return_2d": (first_above_entry, F64(P64, I64, I64, F64), {},
                        [(IN, _u(3, 3, lo=0.1, hi=1)), (INT, 3), (INT, 3), (INT, 0.8)]),
    "scatter_add": (scatter_entry, VOID(P64, PI64, P64, I64, I64), {},
                    [(IN, _u(6)), (INT, np.array([0, 2, 1, 2, 0, 2], np.int64)), (INOUT, _u(3)), (INT, 6), (INT, 3)]),
    "fancy_index_gather": (fancy_gather_entry, F64(P64, PI64, I64, I64), {},
                           [(IN, _u(5)), (INT, np.array([0, 4, 4, 1], np.int64)), (INT, 5), (INT, 4)]),
    "int32_gather": (gather32_entry, F64(P64, PI32, I64, I64), {},
                     [(IN, _u(5)), (INT, np.array([4, 0, 4, 2], np.int32)), (INT, 5), (INT, 4)]),
    "mean_var_tuple": (mean_var_entry, F64(P64, I64), {}, [(IN, _u(7)), (INT, 7)]),
    "norm_f32": (norm32_entry, F32(P32, I64), {}, [(IN, _u(6).astype(np.float32)), (INT, 6)], np.float32),
    "math_f32": (exp_sin32_entry, VOID(P32, P32, I64), {},
                 [(IN, _u(5).astype(np.float32)), (OUT, np.zeros(5, np.float32)), (INT, 5)], np.float32),
    "fastmath": (fast_energy_entry, F64(P64, P64, I64), {"fastmath": True}, [(IN, _u(5)), (IN, _u(5)), (INT, 5)]),
    "boundscheck_diff": (checked_diff_entry, VOID(P64, P64, I64), {"boundscheck": True},
                         [(IN, _u(6)), (OUT, np.zeros(6)), (INT, 6)]),
    "boundscheck_gather": (checked_gather_entry, F64(P64, PI64, I64, I64), {"boundscheck": True},
                           [(IN, _u(5)), (INT, np.array([4, 0, 4, 2], np.int64)), (INT, 5), (INT, 4)]),
    "error_model_numpy": (reciprocal_mod_entry, VOID(P64, P64, I64), {"error_model": "numpy"},
                          [(IN, _u(6, lo=0.3, hi=2)), (OUT, np.zeros(6)), (INT, 6)]),
    "raise_not_taken": (sqrt_sum_entry, F64(P64, I64), {}, [(IN, _u(6, lo=0.3, hi=2)), (INT, 6)]),
    "broadcast_2d_temporary": (pair_gauss_entry, F64(P64, I64), {}, [(IN, _u(5)), (INT, 5)]),
    "np_zeros_2d": (gram_entry, F64(P64, I64), {}, [(IN, _u(4)), (INT, 4)]),
    "jacobi_break": (jacobi_entry, VOID(P64, P64, P64, I64, I64), {},
                     [(IN, _A), (IN, _u(4)), (OUT, np.zeros(4)), (INT, 4), (INT, 8)]),
    "sph_inlined_kernel": (sph_entry, F64(P64, P64, I64, F64), {},
                           [(IN, _u(5, 2)), (IN, _u(5, lo=0.5, hi=1.5)), (INT, 5), (REAL, 1.1)]),
    "while_writes": (history_entry, F64(F64, F64, P64, I64), {}, [(REAL, 1.1), (REAL, 1.3), (OUT, np.zeros(12)), (INT, 12)]),
    "function_argument": (apply_entry, F64(P64, I64), {}, [(IN, _u(5)), (INT, 5)]),
    "recurrence_in_place": (recurrence_entry, VOID(P64, I64, F64), {}, [(INOUT, _u(6)), (INT, 6), (REAL, 0.6)]),
}


@cache
def compiled(name):
    entry, signature, options, *_ = CASES[name]
    return cfunc(signature, **options)(entry)


def _case(name) -> Case:
    _, _, _, params, *dtype = CASES[name]
    return Case(name, params, dtype[0] if dtype else np.float64)


@pytest.mark.parametrize("name", list(CASES))
def test_derivatives_agree_with_central_differences_and_each_other(name):
    check(ado.from_numba(compiled(name)), _case(name))


def test_the_oracle_catches_a_wrong_gradient(monkeypatch):
    """check() fails when the reverse adjoints are 1% off: the comparisons above are not vacuous."""
    fn = ado.from_numba(compiled("lj_neighbor_list"))
    skew_reverse_adjoints(monkeypatch)
    with pytest.raises(Mismatch, match="<J v, w>"):
        check(fn, _case("lj_neighbor_list"))


# ----------------------------------------------------------------------------- refused, with a reason

@njit
def heat_step(u, alpha):
    n = u.shape[0]
    new = np.zeros(n)
    new[0], new[n - 1] = u[0], u[n - 1]
    for i in range(1, n - 1):
        new[i] = u[i] + alpha * (u[i + 1] - 2 * u[i] + u[i - 1])
    return new


def heat_entry(up, outp, n, alpha, steps):
    cur = carray(up, (n,)).copy()
    for _ in range(steps):
        cur = heat_step(cur, alpha)             # a returned array rebound in a loop
    carray(outp, (n,))[:] = cur


@njit
def rhs(y, k):
    dy = np.empty(2)
    dy[0], dy[1] = y[1], -k * math.sin(y[0]) - 0.1 * y[1]
    return dy


def rk4_arrays_entry(yp, outp, k, dt, nsteps):
    y = carray(yp, (2,)).copy()
    for _ in range(nsteps):
        k1 = rhs(y, k)
        k2 = rhs(y + dt / 2 * k1, k)
        k3 = rhs(y + dt / 2 * k2, k)
        k4 = rhs(y + dt * k3, k)
        y = y + dt / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
    carray(outp, (2,))[:] = y


def np_cumsum_entry(xp, yp, n):
    carray(yp, (n,))[:] = np.cumsum(carray(xp, (n,)))


def shift_add_entry(xp, n):
    x = carray(xp, (n,))
    x[1:] += x[:-1]


def slice_assign_entry(xp, n, rounds):
    x = carray(xp, (n,))
    t = np.empty(n)
    t[:] = x                                   # numba copies x first where it may overlap t
    for _ in range(rounds):
        for i in range(1, n):
            t[i] = math.sin(t[i] * t[i - 1])
    return np.sum(t)


def np_max_entry(xp, n):
    x = carray(xp, (n,))
    m = np.max(x)
    return m + np.log(np.sum(np.exp(x - m)))


def np_dot_entry(xp, wp, n):
    return np.dot(np.exp(carray(xp, (n,))), carray(wp, (n,)))


_ESCAPES = "into an array numba allocated itself .*MemInfo leaves the function's reach.*Duplicated argument"
REFUSED = {   # name: (entry, signature, args for the reverse call, the refusal's pattern)
    "heat_rebinding": (heat_entry, VOID(P64, P64, I64, F64, I64), lambda: (
        ez.Duplicated(np.linspace(0, 1, 6), np.zeros(6)), ez.Duplicated(np.zeros(6), np.ones(6)), 6,
        ez.Active(0.3), 3), "stores the active value .* " + _ESCAPES),
    "rk4_arrays": (rk4_arrays_entry, VOID(P64, P64, F64, F64, I64), lambda: (
        ez.Duplicated(np.array([0.3, 0.1]), np.zeros(2)), ez.Duplicated(np.zeros(2), np.ones(2)), ez.Active(1.3),
        0.1, 3), "copies differentiated memory " + _ESCAPES),
    "np_cumsum": (np_cumsum_entry, VOID(P64, P64, I64), lambda: (
        ez.Duplicated(np.arange(1.0, 5.0), np.zeros(4)), ez.Duplicated(np.zeros(4), np.ones(4)), 4),
        "stores the active value .* " + _ESCAPES),
    "shift_add_overlapping": (shift_add_entry, VOID(P64, I64), lambda: (
        ez.Duplicated(np.arange(1.0, 6.0), np.ones(5)), 5),
        r"@NRT_Free.*either memory the function allocated \('call @NRT_Allocate'.*or memory it did not "
        r"\(argument %.*x\[1:\] \+= x\[:-1\]"),
    "slice_assign_copy": (slice_assign_entry, F64(P64, I64, I64), lambda: (
        ez.Duplicated(np.linspace(0.1, 0.9, 5), np.zeros(5)), 5, 2),
        r"@NRT_Free.*either memory the function allocated .*or memory it did not .*t\[:\] = x"),
    # numba's C helpers, whose bodies are not in the IR: named in the refusal
    "np_max": (np_max_entry, F64(P64, I64), lambda: (ez.Duplicated(np.arange(1.0, 5.0), np.zeros(4)), 4),
               r"@numba_attempt_nocopy_reshape receives a pointer to differentiated memory"),
    "np_dot_blas": (np_dot_entry, F64(P64, P64, I64), lambda: (
        ez.Duplicated(np.arange(1.0, 5.0), np.zeros(4)), ez.Duplicated(np.ones(4), np.zeros(4)), 4),
        r"@numba_xxdot receives a pointer to differentiated memory"),
}


@pytest.mark.parametrize("name", list(REFUSED))
def test_what_cannot_be_differentiated_is_refused_naming_it(name):
    entry, signature, args, pattern = REFUSED[name]
    fn = ado.from_numba(cfunc(signature)(entry))
    with pytest.raises(ado.DifferentiationError, match=pattern):
        ez.autodiff(ez.Reverse, fn, *args())


# ----------------------------------------------------------------------------- exceptions inside

@pytest.mark.parametrize("name, x, idx, error", [
    ("raise_not_taken", np.array([1.0, 4.0, -1.0, 9.0]), None, ValueError),      # raise ValueError taken
    ("boundscheck_gather", np.arange(1.0, 6.0), np.array([1, 7, 2], np.int64), IndexError),   # index 7 of 5
])
def test_an_exception_inside_stops_the_primal_and_both_derivatives_alike(monkeypatch, name, x, idx, error):
    """numba's cfunc reports an exception raised inside as unraisable and returns 0: the host call
    does the same, and so do both derivatives (each reports it again), whose results are those of
    the constant 0 the function returned: nothing is differentiated past the raise."""
    seen = []
    monkeypatch.setattr(sys, "unraisablehook", lambda u: seen.append(u.exc_type))
    fn = ado.from_numba(compiled(name))
    rest = (len(x),) if idx is None else (idx, len(x), len(idx))
    assert fn(x.copy(), *rest) == 0.0 and seen == [error]
    dx = np.zeros_like(x)
    ez.autodiff(ez.Reverse, fn, ez.Duplicated(x.copy(), dx), *rest)
    assert np.all(dx == 0.0) and len(seen) > 1 and set(seen) == {error}
    count = len(seen)
    assert ez.autodiff(ez.Forward, fn, ez.Duplicated(x.copy(), np.ones_like(x)), *rest) == 0.0
    assert len(seen) > count and set(seen) == {error}
