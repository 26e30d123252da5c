"""LLVM IR that numba generated (``numba.cfunc``): loaded, run on the host, differentiated.

numba writes IR unlike clang's: a numba-ABI inner function (status code, result through a
pointer, exception info) wrapped by the C-ABI ``cfunc.*`` entry, whose error paths call
numba's runtime and the Python C API through an indirect call. Each derivative is checked
against central differences and against the other mode (<J v, w> = <v, J^T w>).
"""
import math
import sys

import numpy as np
import pytest

import adoffload as ado
from adoffload import enzyme as ez

numba = pytest.importorskip("numba", reason="numba is a test dependency (pip install -e '.[test]')")
from numba import carray, cfunc, njit, types  # noqa: E402

F64P, F32P = types.CPointer(types.float64), types.CPointer(types.float32)


@cfunc("float64(float64, float64, float64)")
def lj(r2, sigma, eps):
    s2 = sigma * sigma / r2
    s6 = s2 * s2 * s2
    return 4.0 * eps * (s6 * s6 - s6)


@njit(inline="never")
def morse(r, d, a, r0):
    e = math.exp(-a * (r - r0))
    return d * (1.0 - e) ** 2


@cfunc(types.float64(F64P, types.intc, types.float64, types.float64))
def cluster_energy(xp, n, d, a):
    """Pairwise Morse energy of n atoms in 3-D, with a cutoff (a branch) and an @njit helper."""
    x = carray(xp, (n, 3))
    e = 0.0
    for i in range(n):
        for j in range(i + 1, n):
            r = math.sqrt((x[i, 0] - x[j, 0]) ** 2 + (x[i, 1] - x[j, 1]) ** 2 + (x[i, 2] - x[j, 2]) ** 2)
            if r < 2.5:
                e += morse(r, d, a, 1.0)
    return e


@cfunc(types.void(F64P, F64P, types.intc, types.float64))
def smooth(xp, yp, n, alpha):
    """Writes an output array: a recurrence through memory (y[i] depends on y[i-1])."""
    x, y = carray(xp, (n,)), carray(yp, (n,))
    y[0] = x[0]
    for i in range(1, n):
        y[i] = alpha * y[i - 1] + (1.0 - alpha) * math.tanh(x[i])


@cfunc(types.float32(F32P, types.intc))
def soft_max32(xp, n):
    x = carray(xp, (n,))
    m = x[0]
    for i in range(1, n):
        m = max(m, x[i])
    s = np.float32(0.0)
    for i in range(n):
        s += math.exp(x[i] - m)
    return m + math.log(s)


def _fd(f, x, v, h):
    return (f(x + h * v) - f(x - h * v)) / (2 * h)


def test_scalar_function_matches_its_analytic_gradient():
    f = ado.from_numba(lj)
    r2, sigma, eps = 1.2, 1.1, 0.9
    assert f(r2, sigma, eps) == pytest.approx(lj.ctypes(r2, sigma, eps), rel=1e-15)
    s6 = (sigma * sigma / r2) ** 3
    want = (4 * eps * (-12 * s6 * s6 + 6 * s6) / (2 * r2),
            4 * eps * (12 * s6 * s6 - 6 * s6) / sigma, 4 * (s6 * s6 - s6))
    got = ez.autodiff(ez.Reverse, f, ez.Active(r2), ez.Active(sigma), ez.Active(eps))
    np.testing.assert_allclose(got, want, rtol=1e-12)
    tangent = ez.autodiff(ez.Forward, f, ez.Duplicated(r2, 1.0), ez.Duplicated(sigma, 0.5), ez.Const(eps))
    assert tangent == pytest.approx(want[0] + 0.5 * want[1], rel=1e-12)


def test_its_error_path_runs_as_numba_runs_it(monkeypatch):
    # numba's cfunc reports a ZeroDivisionError as unraisable and returns 0: the same here
    f = ado.from_numba(lj)
    seen = []
    monkeypatch.setattr(sys, "unraisablehook", lambda u: seen.append(u.exc_type))
    assert f(0.0, 1.0, 1.0) == 0.0
    assert seen == [ZeroDivisionError]


def test_nested_loops_with_a_cutoff_and_an_njit_helper():
    f = ado.from_numba(cluster_energy)
    rng = np.random.default_rng(3)
    n = 7
    x = rng.uniform(0, 2.2, (n, 3))
    d, a = 0.8, 1.3

    def energy(xx):
        return f(np.ascontiguousarray(xx), n, d, a)

    assert energy(x) == pytest.approx(cluster_energy.ctypes(x.ctypes.data_as(cluster_energy.ctypes.argtypes[0]),
                                                            n, d, a), rel=1e-14)
    dx = np.zeros_like(x)
    _, _, dd, da = ez.autodiff(ez.Reverse, f, ez.Duplicated(x.copy(), dx), ez.Const(n), ez.Active(d), ez.Active(a))
    v = rng.standard_normal(x.shape)
    assert np.sum(dx * v) == pytest.approx(_fd(energy, x, v, 1e-6), rel=1e-6)
    assert dd == pytest.approx((f(x, n, d + 1e-6, a) - f(x, n, d - 1e-6, a)) / 2e-6, rel=1e-6)
    assert da == pytest.approx((f(x, n, d, a + 1e-6) - f(x, n, d, a - 1e-6)) / 2e-6, rel=1e-6)
    jv = ez.autodiff(ez.Forward, f, ez.Duplicated(x.copy(), v.copy()), ez.Const(n), ez.Const(d), ez.Const(a))
    assert jv == pytest.approx(np.sum(dx * v), rel=1e-10)          # <J v, 1> = <v, J^T 1>


def test_an_output_array_with_a_recurrence_through_memory():
    f = ado.from_numba(smooth)
    rng = np.random.default_rng(4)
    n, alpha = 9, 0.7
    x = rng.standard_normal(n)
    y = np.zeros(n)
    f(x, y, n, alpha)
    want = np.zeros(n)
    want[0] = x[0]
    for i in range(1, n):
        want[i] = alpha * want[i - 1] + (1 - alpha) * np.tanh(x[i])
    np.testing.assert_allclose(y, want, rtol=1e-14)
    v, w = rng.standard_normal(n), rng.standard_normal(n)
    dy = np.zeros(n)
    ez.autodiff(ez.Forward, f, ez.Duplicated(x.copy(), v.copy()), ez.Duplicated(np.zeros(n), dy), ez.Const(n),
                ez.Const(alpha))

    def out(xx):
        yy = np.zeros(n)
        f(xx, yy, n, alpha)
        return yy

    np.testing.assert_allclose(dy, _fd(out, x, v, 1e-6), rtol=1e-6, atol=1e-9)
    dx, seed = np.zeros(n), w.copy()
    _, _, _, d_alpha = ez.autodiff(ez.Reverse, f, ez.Duplicated(x.copy(), dx), ez.Duplicated(np.zeros(n), seed),
                                   ez.Const(n), ez.Active(alpha))
    assert np.dot(dx, v) == pytest.approx(np.dot(w, dy), rel=1e-12)
    fd_alpha = (np.dot(w, _alpha_out(f, x, n, alpha + 1e-6)) - np.dot(w, _alpha_out(f, x, n, alpha - 1e-6))) / 2e-6
    assert d_alpha == pytest.approx(fd_alpha, rel=1e-6)


def _alpha_out(f, x, n, alpha):
    y = np.zeros(n)
    f(x.copy(), y, n, alpha)
    return y


def test_float32_with_max_exp_and_log():
    f = ado.from_numba(soft_max32)
    x = np.array([0.3, -1.2, 2.0, 0.7, 1.9], np.float32)
    want = float(np.log(np.sum(np.exp(x.astype(np.float64)))))
    assert f(x, 5) == pytest.approx(want, rel=1e-6)
    dx = np.zeros(5, np.float32)
    ez.autodiff(ez.Reverse, f, ez.Duplicated(x.copy(), dx), ez.Const(5))
    soft = np.exp(x.astype(np.float64)) / np.sum(np.exp(x.astype(np.float64)))
    np.testing.assert_allclose(dx, soft, rtol=1e-5, atol=1e-6)


def test_from_numba_refuses_what_is_not_a_cfunc():
    with pytest.raises(ado.ArgumentError, match="numba.cfunc"):
        ado.from_numba(morse)


@cfunc(types.float64(F64P, types.intc))
def with_scratch(xp, n):
    x = carray(xp, (n,))
    t = np.empty(n)                      # allocated by numba's memory manager (NRT)
    for i in range(n):
        t[i] = math.sin(x[i])
    s = 0.0
    for i in range(n):
        s += t[i] * t[(i + 1) % n]
    return s


def test_an_array_numba_allocates_is_a_heap_block_with_a_shadow():
    # NRT memory is reached through a MemInfo whose data pointer the function loads back; where
    # the MemInfo stays in the function, ir/numba_arrays.py gives the data a block of its own
    # (aligned_alloc / free), which the engine shadows like any heap block.
    f = ado.from_numba(with_scratch)
    x = np.linspace(0.1, 1.0, 6)
    s = np.sin(x)
    assert f(x, 6) == pytest.approx(np.sum(s * np.roll(s, -1)), rel=1e-14)
    dx = np.zeros(6)
    ez.autodiff(ez.Reverse, f, ez.Duplicated(x.copy(), dx), ez.Const(6))
    np.testing.assert_allclose(dx, np.cos(x) * (np.roll(s, -1) + np.roll(s, 1)), rtol=1e-13)
    v = np.cos(np.arange(6.0))
    assert ez.autodiff(ez.Forward, f, ez.Duplicated(x.copy(), v), ez.Const(6)) == pytest.approx(np.dot(dx, v),
                                                                                                rel=1e-12)
