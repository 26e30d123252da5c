"""C from clang at -O0..-O3 through the memory model: recurrences through memory, heap scratch,
copies, float bits in integers, recursion. Each derivative is checked against central differences
and against the other mode (<J v, w> = <v, J^T w>); each refusal names the construct.
"""
from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

import adoffload as ado
from adoffload import enzyme as ez
from adoffload.errors import DifferentiationError
from adoffload.testing.irtext import FunctionModules

pytest.importorskip("ziglang", reason="the C cases are compiled with the clang in the ziglang wheel")

LEVELS = ["-O0", "-O1", "-O2", "-O3"]

SOURCE = r"""
#include <stdlib.h>
#include <string.h>
#include <stdint.h>
#include <stddef.h>

void forward_sub(int N, double* __restrict__ L, double* __restrict__ b, double* __restrict__ out) {
    for (size_t i = 0; i < N; i++) {
        double tmp = b[i];
        if (i > 1) for (size_t j = 0; j < i - 1; j++) tmp -= L[i*N + j] * out[j];
        out[i] = tmp;
    }
}

void prefix_products(const double* x, double* y, int n) {
    y[0] = x[0];
    for (int i = 1; i < n; i++) y[i] = y[i - 1] * x[i] + 0.5 * y[i - 1];
}

double heap_scratch(const double* x, int n) {
    double* s = (double*)malloc(n * sizeof(double));
    for (int i = 0; i < n; i++) s[i] = x[i] * x[i];
    double t = 0;
    for (int i = 0; i < n; i++) t += s[i] * (i + 1);
    free(s);
    return t;
}

double heap_growing(const double* x, int n) {
    int cap = 2;
    double* s = (double*)malloc(cap * sizeof(double));
    for (int i = 0; i < n; i++) {
        if (i >= cap) { cap *= 2; s = (double*)realloc(s, cap * sizeof(double)); }
        s[i] = x[i] * x[i];
    }
    double t = 0;
    for (int i = 0; i < n; i++) t += s[i] * (i + 1);
    free(s);
    return t;
}

double heap_zeroed(const double* x, int n) {
    double* s = (double*)calloc(n + 1, sizeof(double));
    for (int i = 0; i < n; i++) s[i + 1] = s[i] + x[i] * x[i];
    double t = s[n];
    free(s);
    return t * t;
}

void shift_square(double* x, int n) {
    memmove(x + 1, x, (n - 1) * sizeof(double));
    x[0] = 0;
    for (int i = 0; i < n; i++) x[i] *= x[i];
}

typedef struct { double a; int k; double b; } Rec;

double struct_copy(const Rec* r, int n) {
    Rec local[4];
    memcpy(local, r, 4 * sizeof(Rec));
    double t = 0;
    for (int i = 0; i < 4; i++) t += local[i].a * local[i].b * local[i].k;
    return t;
}

static void put_bits(int64_t* slot, double v) { int64_t b; memcpy(&b, &v, 8); *slot = b; }
static double get_bits(const int64_t* slot) { double v; memcpy(&v, slot, 8); return v; }
double bits_roundtrip(double x) { int64_t s; put_bits(&s, x * x); return get_bits(&s) * 3.0; }
double sign_trick(double x) { uint64_t b; memcpy(&b, &x, 8); return (b >> 63) ? -x * x : x * x; }
void bits_through_const(const double* x, double* y, int64_t* scratch, int n) {
    for (int i = 0; i < n; i++) put_bits(&scratch[i], x[i] * x[i]);
    for (int i = 0; i < n; i++) y[i] = get_bits(&scratch[i]) + 1.0;
}

__attribute__((noinline)) static void scale_into(double* y, const double* x, int n, double a) {
    for (int i = 0; i < n; i++) y[i] = a * x[i];
}
double calls_helper(const double* x, double* y, int n) {
    scale_into(y, x, n, 2.0);
    double t = 0;
    for (int i = 0; i < n; i++) t += y[i] * x[i];
    return t;
}

double power_rec(double x, int n) { return n <= 0 ? 1.0 : x * power_rec(x, n - 1); }
double uses_recursion(const double* x) { return power_rec(x[0], 3) + x[1]; }

void frees_its_argument(double* x) { x[0] *= 2.0; free(x); }
"""


def _compile(level: str, tmp_path_factory) -> ado.foreign.ForeignModule:
    folder = tmp_path_factory.mktemp(f"c{level}")
    source, target = folder / "memory.c", folder / "memory.ll"
    source.write_text(SOURCE)
    run = subprocess.run([sys.executable, "-m", "ziglang", "cc", "-fno-sanitize=all", "-S", "-emit-llvm", level,
                          str(source), "-o", str(target)], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    return ado.from_llvm(target.read_text())


@pytest.fixture(scope="module", params=LEVELS)
def module(request, tmp_path_factory):
    """Each function in a module of its own (``FunctionModules``), cut from one import per level:
    the host JIT compiles the whole module, with every derivative made so far, for each new one."""
    return request.param, FunctionModules(_compile(request.param, tmp_path_factory))


def _array_derivatives(fn, make_args, x, out_index=None, wrt=0):
    """(J v, J^T w, FD J v, v, w) for a function of one differentiated array ``x`` (argument
    ``wrt`` of ``make_args``' list), whose output is its float result or the array at ``out_index``."""
    rng = np.random.default_rng(0)
    v, w = rng.standard_normal(x.size), rng.standard_normal(1 if out_index is None else make_args(x)[out_index].size)

    def primal(xx):
        args = make_args(xx.copy())
        result = fn(*args)
        return np.atleast_1d(result if out_index is None else args[out_index]).astype(float)

    h = 1e-6
    fd = (primal(x + h * v) - primal(x - h * v)) / (2 * h)
    # forward
    args = make_args(x.copy())
    shadows = [ez.Duplicated(a, np.zeros_like(a)) if isinstance(a, np.ndarray) and a.dtype == np.float64 else a
               for a in args]
    shadows[wrt] = ez.Duplicated(args[wrt], v.copy())
    tangent = ez.autodiff(ez.Forward, fn, *shadows)
    jv = np.atleast_1d(tangent) if out_index is None else shadows[out_index].shadow
    # reverse
    args = make_args(x.copy())
    shadows = [ez.Duplicated(a, np.zeros_like(a)) if isinstance(a, np.ndarray) and a.dtype == np.float64 else a
               for a in args]
    if out_index is None:
        ez.autodiff(ez.Reverse, fn, *shadows)
        jtw = shadows[wrt].shadow * w[0]
    else:
        shadows[out_index] = ez.Duplicated(args[out_index], w.copy())
        ez.autodiff(ez.Reverse, fn, *shadows)
        jtw = shadows[wrt].shadow
    return np.asarray(jv, float), jtw, fd, v, w


def _check(jv, jtw, fd, v, w):
    np.testing.assert_allclose(jv, fd, rtol=1e-6, atol=1e-6)
    assert np.dot(jv, w) == pytest.approx(np.dot(v, jtw), rel=1e-10, abs=1e-10)


def test_forward_substitution_from_the_issue(module):
    _, mod = module
    N, L, b = 3, np.arange(9.0), np.array([0.1, 0.2, 0.3])
    db = np.zeros(3)
    ez.autodiff(ez.Reverse, mod["forward_sub"], N, ez.Duplicated(L, np.zeros(9)), ez.Duplicated(b, db),
                ez.Duplicated(np.zeros(3), np.array([1e4, 2e4, 3e4])))
    np.testing.assert_allclose(db, [-170000.0, 20000.0, 30000.0])


@pytest.mark.parametrize("n", [4, 7, 16, 21])
def test_forward_substitution_matches_both_oracles(module, n):
    _, mod = module
    rng = np.random.default_rng(n)
    L = rng.standard_normal(n * n) * 0.3
    jv, jtw, fd, v, w = _array_derivatives(mod["forward_sub"], lambda b: [n, L.copy(), b, np.zeros(n)],
                                           rng.standard_normal(n), out_index=3, wrt=2)
    _check(jv, jtw, fd, v, w)


@pytest.mark.parametrize("name,n", [("heap_scratch", 5), ("heap_scratch", 19), ("heap_growing", 9),
                                    ("heap_zeroed", 6)])
def test_heap_scratch_matches_both_oracles(module, name, n):
    _, mod = module
    jv, jtw, fd, v, w = _array_derivatives(mod[name], lambda xx: [xx, n], np.random.default_rng(1).standard_normal(n))
    _check(jv, jtw, fd, v, w)


def test_a_struct_copy_with_an_int_field(module):
    """4 records {double a; int k; double b} copied with memcpy: d/da = b*k, d/db = a*k."""
    _, mod = module
    x = np.zeros(12)
    x[0::3], x[2::3] = [1.0, 2.0, 3.0, 4.0], [5.0, 6.0, 7.0, 8.0]
    x.view(np.int32)[2::6] = [1, 2, 3, 4]
    dx = np.zeros(12)
    ez.autodiff(ez.Reverse, mod["struct_copy"], ez.Duplicated(x, dx), 4)
    np.testing.assert_allclose(dx[0::3], [5.0, 12.0, 21.0, 32.0])
    np.testing.assert_allclose(dx[2::3], [1.0, 4.0, 9.0, 16.0])
    tangent = np.zeros(12)
    tangent[0::3], tangent[2::3] = 1.0, 2.0
    assert ez.autodiff(ez.Forward, mod["struct_copy"], ez.Duplicated(x, tangent), 4) == pytest.approx(
        np.dot(dx[0::3], 1.0 + 0 * dx[0::3]) + np.dot(dx[2::3], 2.0 + 0 * dx[2::3]))


@pytest.mark.parametrize("n", [3, 8])
def test_in_place_memmove_and_recurrences(module, n):
    _, mod = module
    rng = np.random.default_rng(2)
    jv, jtw, fd, v, w = _array_derivatives(mod["shift_square"], lambda xx: [xx, n], rng.standard_normal(n),
                                           out_index=0)
    _check(jv, jtw, fd, v, w)
    jv, jtw, fd, v, w = _array_derivatives(mod["prefix_products"], lambda xx: [xx, np.zeros(n), n],
                                           rng.standard_normal(n), out_index=1)
    _check(jv, jtw, fd, v, w)


def test_a_noinline_helper_taking_pointers_is_differentiated(module):
    _, mod = module
    rng = np.random.default_rng(3)
    jv, jtw, fd, v, w = _array_derivatives(mod["calls_helper"], lambda xx: [xx, np.zeros(6), 6],
                                           rng.standard_normal(6))
    _check(jv, jtw, fd, v, w)


def test_float_bits_in_integers_are_followed_or_refused(module):
    level, mod = module
    assert ez.autodiff(ez.Reverse, mod["bits_roundtrip"], ez.Active(-3.0))[0] == pytest.approx(-18.0)
    assert ez.autodiff(ez.Forward, mod["sign_trick"], ez.Duplicated(-3.0, 1.0)) == pytest.approx(6.0)
    x, y, scratch = np.array([1.0, 2.0]), np.zeros(2), np.zeros(2, np.int64)
    with pytest.raises(DifferentiationError, match="(no shadow|float bits)"):
        ez.autodiff(ez.Reverse, mod["bits_through_const"], ez.Duplicated(x, np.zeros(2)),
                    ez.Duplicated(y, np.ones(2)), scratch, 2)


@pytest.mark.parametrize("mode", ["Forward", "Reverse"])
def test_recursion_and_foreign_frees_are_refused(module, mode):
    _, mod = module
    x = np.array([2.0, 1.0])
    with pytest.raises(DifferentiationError, match="recursive"):
        ez.autodiff(getattr(ez, mode), mod["uses_recursion"], ez.Duplicated(x, np.array([1.0, 0.0])))
    with pytest.raises(DifferentiationError, match="did not allocate"):
        ez.autodiff(getattr(ez, mode), mod["frees_its_argument"], ez.Duplicated(x, np.array([1.0, 0.0])))
