"""What the reverse sweep may re-load instead of taping (reverse_values.written_roots, readonly_root),
how the tape lays its records out (tape.py: fields at their natural size), and the tapes
``ez.autodiff`` keeps between calls (api._tape).

A load of an argument that no write of the function can reach is re-executed in the reverse sweep;
every other load of memory is taped. ``written_roots`` names the arguments a function may write:
through stores, atomics, ``llvm.memset``/``memcpy``/``memmove`` and ``free``/``realloc``, following
the pointer through GEPs, casts, phis and selects to its roots; a write through a pointer it cannot
trace (loaded from memory, an unknown call that gets a pointer) makes every argument written. Each
program runs at -O0..-O3 and its gradient is checked against central differences of the host-run
primal and by the forward/reverse identity <J v, w> = <v, J^T w>; a load wrongly re-executed after
its memory was overwritten gives a wrong gradient there.
"""
from __future__ import annotations

import functools

import numpy as np
import pytest

import adoffload as ado
from adoffload import enzyme as ez
from adoffload.enzyme import api
from adoffload.enzyme.reverse_values import written_roots
from adoffload.testing import differential

from .test_foreign_c import isolated

pytestmark = pytest.mark.skipif(not differential.clang_available(),
                                reason="the ziglang wheel (the clang these tests compile C with) is not installed")

LEVELS = [0, 1, 2, 3]
HEADER = "#include <math.h>\n#include <stdlib.h>\n#include <string.h>\n#include <stddef.h>\n"

# Each: f(double* x, double* y, int n, int k) -> double; the arguments it may write (None: it writes
# through a pointer that cannot be traced, so every argument counts as written), at every level
# (ado.from_llvm promotes -O0's stack slots first).
PROGRAMS = {
    # weights read through a pointer induction, y written through another: w (x) stays unwritten
    "induction": ("""
double f(double* x, double* y, int n, int k) {
    double s = 0.0;
    for (int r = 0; r < k; r++) {
        const double* w = x;
        double* out = y + r;
        for (int i = 0; i < n; i++, w++) { out[0] = out[0] * 0.5 + sin(*w) * (r + 1); s += *w * out[0]; }
    }
    return s;
}""", {"y"}),
    # x read, then written through a select of x and y: both written, the loads of x taped
    "select": ("""
double f(double* x, double* y, int n, int k) {
    double s = 0.0;
    for (int i = 0; i < n; i++) s += x[i] * x[i] * y[i];
    double* p = k > 1 ? x : y;
    for (int i = 0; i < n; i++) p[i] = p[i] * 3.0 + 1.0;
    for (int i = 0; i < n; i++) s += sin(x[i]) * y[i];
    return s;
}""", {"x", "y"}),
    # x read, then overwritten only by memcpy (from y) and memset, and read again
    "memset": ("""
double f(double* x, double* y, int n, int k) {
    double s = 0.0;
    for (int i = 0; i < n; i++) s += exp(0.3 * x[i]) * y[i];
    int m = k < n ? k : n;
    memcpy(x, y, (size_t)m * sizeof(double));
    memset(x + m, 0, (size_t)(n - m) * sizeof(double));
    for (int i = 0; i < n; i++) s += x[i] * x[i] * sin(y[i]);
    return s;
}""", {"x"}),
    # a heap block of the function's own, reallocated and freed: no argument written
    "heap": ("""
double f(double* x, double* y, int n, int k) {
    double* t = (double*)malloc((size_t)n * sizeof(double));
    for (int i = 0; i < n; i++) t[i] = x[i] * y[(i + k) % n];
    t = (double*)realloc(t, (size_t)(2 * n) * sizeof(double));
    for (int i = 0; i < n; i++) t[n + i] = sin(t[i]) * x[i];
    double s = 0.0;
    for (int i = 0; i < 2 * n; i++) s += t[i] * t[i];
    free(t);
    return s;
}""", set()),
    # y written through a row pointer loaded from a table the function fills: not traced
    "table": ("""
double f(double* x, double* y, int n, int k) {
    double* rows[2] = {y, y + n / 2};
    double s = 0.0;
    for (int i = 0; i < n / 2; i++) {
        double* r = rows[i % 2];
        s += x[i] * r[i];
        r[i] = x[i] * x[i] + r[i];
        s += r[i] * x[n - 1 - i];
    }
    return s;
}""", None),
}


@functools.cache
def load(name: str, opt: int):
    return ado.from_llvm(differential.compile_c(HEADER + PROGRAMS[name][0], opt))["f"]


def central_differences(f, x: np.ndarray, h: float = 1e-6) -> np.ndarray:
    return np.array([(f(x + h * e) - f(x - h * e)) / (2 * h) for e in np.eye(x.size)])


def check(fn, n: int, k: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    x, y = rng.uniform(-1.0, 1.0, n), rng.uniform(-1.0, 1.0, n)
    gx, gy = np.zeros(n), np.zeros(n)
    ez.autodiff(ez.Reverse, fn, ez.Duplicated(x.copy(), gx), ez.Duplicated(y.copy(), gy), n, k)
    primal = lambda z: float(fn(z[:n].copy(), z[n:].copy(), n, k))
    fd = central_differences(primal, np.concatenate([x, y]))
    np.testing.assert_allclose(np.concatenate([gx, gy]), fd, rtol=1e-6, atol=1e-7)
    v, w = rng.standard_normal(n), rng.standard_normal(n)
    tangent = ez.autodiff(ez.Forward, fn, ez.Duplicated(x.copy(), v.copy()), ez.Duplicated(y.copy(), w.copy()), n, k)
    assert float(tangent) == pytest.approx(float(gx @ v + gy @ w), rel=1e-11, abs=1e-12)


@pytest.mark.parametrize("name", sorted(PROGRAMS))
@pytest.mark.parametrize("opt", LEVELS)
@isolated
def test_loads_are_reloaded_only_where_nothing_writes_them(name, opt):
    fn = load(name, opt)
    for n, k, seed in ((6, 3, 0), (9, 1, 1), (4, 2, 2)):
        check(fn, n, k, seed)
    roots, unknown = written_roots(fn.ir)
    expected = PROGRAMS[name][1]
    assert unknown == (expected is None)
    if expected is not None:
        assert {"xy"[r.index] for r in roots} == expected


FLOAT_RECURRENCE = """
/* A dynamic tape of mixed widths: floats, doubles, an int index and a data-dependent while loop. */
float g(float* x, double* y, const int* idx, int n) {
    float s = 0.0f;
    for (int i = 0; i < n; i++) {
        int j = idx[i];
        float a = x[j];
        x[j] = sinf(a) * (float)y[i] + a;               /* x[j] overwritten: a is taped */
        double b = y[i];
        int steps = 0;
        while (b * b < 4.0 && steps < 5) { b = b * 1.5 + (double)x[j]; steps++; }
        y[i] = b;
        s += a * (float)b + x[j] * x[j];
    }
    return s;
}
"""


@pytest.mark.parametrize("opt", LEVELS)
@isolated
def test_a_tape_of_floats_doubles_and_indices_packed_at_their_sizes(opt):
    fn = ado.from_llvm(differential.compile_c(HEADER + FLOAT_RECURRENCE, opt))["g"]
    rng = np.random.default_rng(opt)
    for n in (7, 3, 12):             # a larger tape after a smaller one: the kept tape is too small
        idx = rng.permutation(n).astype(np.int32)
        x = rng.uniform(0.2, 1.0, n).astype(np.float32)
        y = rng.uniform(-0.5, 0.5, n)
        gx, gy = np.zeros_like(x), np.zeros_like(y)
        ez.autodiff(ez.Reverse, fn, ez.Duplicated(x.copy(), gx), ez.Duplicated(y.copy(), gy), ez.Const(idx), n)
        v, w = rng.standard_normal(n).astype(np.float32), rng.standard_normal(n)
        tangent = ez.autodiff(ez.Forward, fn, ez.Duplicated(x.copy(), v.copy()), ez.Duplicated(y.copy(), w.copy()),
                              ez.Const(idx), n)
        assert float(tangent) == pytest.approx(float(gx.astype(np.float64) @ v + gy @ w), rel=2e-5, abs=1e-5)
        # central differences in float: along a random direction, step 1e-3
        z = np.concatenate([x.astype(np.float64), y])
        d = rng.standard_normal(2 * n)
        primal = lambda z: float(fn(z[:n].astype(np.float32), z[n:].copy(), idx, n))
        fd = (primal(z + 1e-3 * d) - primal(z - 1e-3 * d)) / 2e-3
        assert float(np.concatenate([gx.astype(np.float64), gy]) @ d) == pytest.approx(fd, rel=5e-3, abs=5e-3)
    (_, _, count), = [v for key, v in api._CACHE.items() if key[0] == id(fn.module.ir) and key[2] == "Reverse"]
    assert count is not None and count.tapes          # a dynamic tape, kept for the next call
