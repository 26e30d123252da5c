"""Hand-written C through clang -O0..-O3, ``ado.from_llvm`` and ``enzyme.autodiff`` (issue 11, items 1-6).

Each case is a small C function an ordinary programmer writes; each runs at every optimization
level, in forward and reverse mode, against a closed form (the closed forms are checked against
central differences of the host-run primal where the point allows). Enzyme differentiates all of
them, so the only passing outcome is the right derivative: a refusal fails the test too. These
are the acceptance tests of issue 11's engine work (several failed when they were written).
"""
from __future__ import annotations

import faulthandler
import functools
import math
import os
import pickle
import signal
import traceback

import numpy as np
import pytest

import adoffload as ado
from adoffload import enzyme as ez
from adoffload.testing import differential

pytestmark = pytest.mark.skipif(not differential.clang_available(),
                                reason="the ziglang wheel (the clang these tests compile C with) is not installed")

LEVELS = [0, 1, 2, 3]
HEADER = "#include <math.h>\n#include <stdlib.h>\n#include <string.h>\n#include <stddef.h>\n"


def isolated(test):
    """Run the test in a forked child: a derivative that crashes the process (a segfault in JIT code)
    fails this test instead of killing the whole pytest session."""
    if not hasattr(os, "fork"):
        return test

    @functools.wraps(test)
    def wrapper(*args, **kwargs):
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:                                  # child: run, report, never return into pytest
            os.close(read)
            faulthandler.disable()                    # the parent reports a crash in one line
            try:
                test(*args, **kwargs)
                report = None
            except BaseException as exc:              # noqa: BLE001 - everything goes to the parent
                is_assert = isinstance(exc, AssertionError)
                report = (type(exc).__name__, str(exc) if is_assert else
                          "".join(traceback.format_exception_only(type(exc), exc)), is_assert)
            with os.fdopen(write, "wb") as out:
                pickle.dump(report, out)
            os._exit(0)
        os.close(write)
        with os.fdopen(read, "rb") as pipe:
            data = pipe.read()
        _, status = os.waitpid(pid, 0)
        if os.WIFSIGNALED(status):
            pytest.fail(f"the process died with {signal.Signals(os.WTERMSIG(status)).name} (a crash in "
                        f"the compiled derivative)", pytrace=False)
        report = pickle.loads(data) if data else ("?", "the child reported nothing", False)
        if report is not None:
            name, text, is_assert = report
            if is_assert:
                raise AssertionError(text)
            pytest.fail(text, pytrace=False)
    return wrapper


@functools.cache
def load(source: str, opt: int):
    return ado.from_llvm(differential.compile_c(HEADER + source, opt))


def fd_scalar(fn, args: list, k: int, h: float = 1e-6) -> float:
    """Central difference of a scalar-returning host function in its k-th (scalar) argument."""
    up, down = list(args), list(args)
    up[k] += h
    down[k] -= h
    return (float(fn(*up)) - float(fn(*down))) / (2 * h)


def fd_array(fn, args: list, k: int, h: float = 1e-6) -> np.ndarray:
    """Gradient of a scalar-returning host function in the array argument k, by central differences."""
    base = args[k]
    grad = np.zeros_like(base)
    for j in range(base.size):
        up, down = base.copy(), base.copy()
        up[j] += h
        down[j] -= h
        grad[j] = (float(fn(*args[:k], up, *args[k + 1:])) - float(fn(*args[:k], down, *args[k + 1:]))) / (2 * h)
    return grad


def check_array_gradient(fn, n: int, x: np.ndarray, expected: np.ndarray, rtol=1e-7) -> None:
    """``double f(int n, const double* x)``: reverse gradient and forward tangents (basis directions)."""
    dx = np.zeros_like(x)
    ez.autodiff(ez.Reverse, fn, n, ez.Duplicated(x.copy(), dx))
    np.testing.assert_allclose(dx, expected, rtol=rtol, atol=1e-12, err_msg="reverse")
    v = np.random.default_rng(0).standard_normal(x.size)
    tangent = ez.autodiff(ez.Forward, fn, n, ez.Duplicated(x.copy(), v.copy()))
    assert tangent == pytest.approx(float(np.dot(expected, v)), rel=rtol, abs=1e-12), "forward"


X5 = np.array([0.3, -0.8, 1.1, 0.45, -0.2])

# ---------------------------------------------------------------- item 1: loops, branches, reductions, division, fmax

LOOP = "double sumsq(int n, const double* x) { double s = 0; for (int i = 0; i < n; i++) s += x[i] * x[i]; return s; }"
REDUCE = ("double wdot(int n, const double* x, const double* w) {\n"
          "    double s = 0; for (int i = 0; i < n; i++) s += w[i] * sin(x[i]); return s; }")
BRANCH = "double piece(double x) { if (x > 0.0) return x * x; else return 3.0 * x; }"
DIVIDE = "double quot(double x, double y) { return x / y; }"
FMAX = "double mx(double a, double b) { return fmax(a, b) + fmin(a, 2.0 * b); }"


@pytest.mark.parametrize("opt", LEVELS)
@isolated
def test_loop(opt):
    check_array_gradient(load(LOOP, opt)["sumsq"], 5, X5, 2 * X5)


@pytest.mark.parametrize("opt", LEVELS)
@isolated
def test_reduction_with_a_const_weight_array(opt):
    fn = load(REDUCE, opt)["wdot"]
    w = np.array([1.0, 2.0, -1.0, 0.5, 3.0])
    dx = np.zeros(5)
    ez.autodiff(ez.Reverse, fn, 5, ez.Duplicated(X5.copy(), dx), ez.Const(w))
    np.testing.assert_allclose(dx, w * np.cos(X5), rtol=1e-12)
    tangent = ez.autodiff(ez.Forward, fn, 5, ez.Duplicated(X5.copy(), np.ones(5)), ez.Const(w))
    assert tangent == pytest.approx(float(np.sum(w * np.cos(X5))), rel=1e-12)


@pytest.mark.parametrize("opt", LEVELS)
@pytest.mark.parametrize("x,slope", [(0.7, 1.4), (-0.5, 3.0)])
@isolated
def test_branch(opt, x, slope):
    fn = load(BRANCH, opt)["piece"]
    assert ez.autodiff(ez.Reverse, fn, ez.Active(x)) == pytest.approx((slope,))
    assert ez.autodiff(ez.Forward, fn, ez.Duplicated(x, 1.0)) == pytest.approx(slope)


@pytest.mark.parametrize("opt", LEVELS)
@isolated
def test_division(opt):
    fn = load(DIVIDE, opt)["quot"]
    x, y = 1.5, -0.4
    assert ez.autodiff(ez.Reverse, fn, ez.Active(x), ez.Active(y)) == pytest.approx((1 / y, -x / y**2))
    assert ez.autodiff(ez.Forward, fn, ez.Duplicated(x, 1.0), ez.Const(y)) == pytest.approx(1 / y)
    assert ez.autodiff(ez.Forward, fn, ez.Const(x), ez.Duplicated(y, 1.0)) == pytest.approx(-x / y**2)


@pytest.mark.parametrize("opt", LEVELS)
@isolated
def test_fmax_fmin(opt):
    fn = load(FMAX, opt)["mx"]
    a, b = 0.9, 0.3               # fmax picks a, fmin(a, 2b) picks 2b
    assert ez.autodiff(ez.Reverse, fn, ez.Active(a), ez.Active(b)) == pytest.approx((1.0, 2.0))
    assert ez.autodiff(ez.Forward, fn, ez.Duplicated(a, 1.0), ez.Duplicated(b, 1.0)) == pytest.approx(3.0)


# ---------------------------------------------------------------- item 2: triangular forward substitution

FORWARD_SUB = """
void forward_sub(int N, double* __restrict__ L, double* __restrict__ b, double* __restrict__ out) {
    for (size_t i = 0; i < N; i++) {
        double tmp = b[i];
        if (i > 1) for (size_t j = 0; j < i - 1; j++) tmp -= L[i*N + j] * out[j];
        out[i] = tmp;
    }
}
"""


@pytest.mark.parametrize("opt", LEVELS)
@isolated
def test_forward_substitution_of_issue_11(opt):
    fn = load(FORWARD_SUB, opt)["forward_sub"]
    L, b = np.arange(9.0), np.array([0.1, 0.2, 0.3])
    dL, db, dout = np.zeros(9), np.zeros(3), np.array([1e4, 2e4, 3e4])
    ez.autodiff(ez.Reverse, fn, 3, ez.Duplicated(L.copy(), dL), ez.Duplicated(b.copy(), db),
                ez.Duplicated(np.zeros(3), dout))
    np.testing.assert_allclose(db, [-170000.0, 20000.0, 30000.0], rtol=1e-12)
    expected_dL = np.zeros(9)
    expected_dL[6] = -0.1 * 3e4           # out[2] = b[2] - L[6] * out[0]
    np.testing.assert_allclose(dL, expected_dL, rtol=1e-12)
    out_tangent = np.zeros(3)
    ez.autodiff(ez.Forward, fn, 3, ez.Duplicated(L.copy(), np.zeros(9)), ez.Duplicated(b.copy(), np.ones(3)),
                ez.Duplicated(np.zeros(3), out_tangent))
    np.testing.assert_allclose(out_tangent, [1.0, 1.0, 1.0 - 6.0], rtol=1e-12)


# ---------------------------------------------------------------- item 3: heap scratch

MALLOC = """
double scratch_malloc(int n, const double* x) {
    double* t = (double*)malloc((size_t)n * sizeof(double));
    for (int i = 0; i < n; i++) t[i] = x[i] * x[i];
    double s = 0;
    for (int i = 0; i < n; i++) s += t[i] * x[i];
    free(t);
    return s;
}
"""
CALLOC = """
double scratch_calloc(int n, const double* x) {
    double* t = (double*)calloc((size_t)n, sizeof(double));
    for (int i = 0; i < n; i++) t[i] += sin(x[i]);
    double s = 0;
    for (int i = 0; i < n; i++) s += t[i] * t[i];
    free(t);
    return s;
}
"""
REALLOC = """
double scratch_realloc(int n, const double* x) {
    double* t = (double*)malloc(sizeof(double));
    t[0] = x[0];
    t = (double*)realloc(t, (size_t)n * sizeof(double));
    for (int i = 1; i < n; i++) t[i] = t[i - 1] * x[i];
    double r = t[n - 1];
    free(t);
    return r;
}
"""


@pytest.mark.parametrize("opt", LEVELS)
@isolated
def test_malloc_scratch(opt):
    check_array_gradient(load(MALLOC, opt)["scratch_malloc"], 5, X5, 3 * X5**2)


@pytest.mark.parametrize("opt", LEVELS)
@isolated
def test_calloc_scratch(opt):
    check_array_gradient(load(CALLOC, opt)["scratch_calloc"], 5, X5, 2 * np.sin(X5) * np.cos(X5))


@pytest.mark.parametrize("opt", LEVELS)
@isolated
def test_realloc_scratch(opt):
    check_array_gradient(load(REALLOC, opt)["scratch_realloc"], 5, X5, np.prod(X5) / X5)


# ---------------------------------------------------------------- item 4: a double carried as integer bits

BITS = """
static __attribute__((noinline)) void store_bits(long long* dst, double v) { memcpy(dst, &v, sizeof v); }
double carry_bits(int n, const double* x) {
    long long* buf = (long long*)malloc((size_t)n * sizeof(long long));
    for (int i = 0; i < n; i++) store_bits(&buf[i], x[i] * x[i]);
    double s = 0;
    for (int i = 0; i < n; i++) { double v; memcpy(&v, &buf[i], sizeof v); s += v; }
    free(buf);
    return s;
}
"""


@pytest.mark.parametrize("opt", LEVELS)
@isolated
def test_double_carried_as_int64_bits_through_memory_and_a_helper(opt):
    check_array_gradient(load(BITS, opt)["carry_bits"], 5, X5, 2 * X5)


# ---------------------------------------------------------------- item 5: rule edge values

POW = "double powxy(double x, double y) { return pow(x, y); }"


@pytest.mark.parametrize("opt", LEVELS)
@isolated
def test_pow_at_zero_base_has_zero_exponent_derivative(opt):
    fn = load(POW, opt)["powxy"]
    assert ez.autodiff(ez.Reverse, fn, ez.Active(0.0), ez.Active(1.0)) == (1.0, 0.0)   # d/dy 0^y = 0^y log 0 -> 0
    assert ez.autodiff(ez.Forward, fn, ez.Const(0.0), ez.Duplicated(1.0, 1.0)) == 0.0
    assert ez.autodiff(ez.Forward, fn, ez.Duplicated(0.0, 1.0), ez.Duplicated(1.0, 0.0)) == 1.0


@pytest.mark.parametrize("opt", LEVELS)
@isolated
def test_division_by_a_tiny_constant_has_a_finite_tangent(opt):
    fn = load(DIVIDE, opt)["quot"]
    tangent = ez.autodiff(ez.Forward, fn, ez.Duplicated(1.0, 1.0), ez.Duplicated(1e-160, 0.0))
    assert tangent == pytest.approx(1e160)          # d(x/y) = dx/y - x dy/y^2 with dy = 0: no inf * 0
    assert ez.autodiff(ez.Reverse, fn, ez.Active(1.0), ez.Const(1e-160)) == pytest.approx((1e160, None))


# ---------------------------------------------------------------- item 6: code Enzyme differentiates

SPLAT = """
void affine(int n, const double* __restrict__ x, double* __restrict__ y) {
    for (int i = 0; i < n; i++) y[i] = 2.5 * x[i] * x[i] + 1.0;
}
"""
NOINLINE_POINTERS = """
static __attribute__((noinline)) double dot(int n, const double* a, const double* b) {
    double s = 0; for (int i = 0; i < n; i++) s += a[i] * b[i]; return s;
}
double norm2(int n, const double* x) { return dot(n, x, x); }
"""
MEMCPY = """
void copy_square(int n, const double* x, double* y) {
    memcpy(y, x, (size_t)n * sizeof(double));
    for (int i = 0; i < n; i++) y[i] *= y[i];
}
"""
MEMMOVE = """
double shifted(int n, const double* x) {
    double t[16];
    memcpy(t, x, (size_t)n * sizeof(double));
    memmove(t + 1, t, (size_t)(n - 1) * sizeof(double));
    double s = 0;
    for (int i = 0; i < n; i++) s += (i + 1) * t[i] * t[i];
    return s;
}
"""
FUNCTION_TABLE = """
static double square(double v) { return v * v; }
static double cube(double v) { return v * v * v; }
double (*table[2])(double) = { square, cube };
double apply(int k, double x) { return table[k](x); }
"""
FREXP = "double mant(double x) { int e; double m = frexp(x, &e); return m * m * (double)e; }"


@pytest.mark.parametrize("opt", LEVELS)
@isolated
def test_vectorized_loop_with_splat_constants(opt):
    fn = load(SPLAT, opt)["affine"]
    n = 11                             # a vector body and a remainder
    x = np.linspace(-1, 1, n)
    dx, dy = np.zeros(n), np.arange(1.0, n + 1)
    ez.autodiff(ez.Reverse, fn, n, ez.Duplicated(x.copy(), dx), ez.Duplicated(np.zeros(n), dy.copy()))
    np.testing.assert_allclose(dx, 5.0 * x * np.arange(1.0, n + 1), rtol=1e-12)
    tangent = np.zeros(n)
    ez.autodiff(ez.Forward, fn, n, ez.Duplicated(x.copy(), np.ones(n)), ez.Duplicated(np.zeros(n), tangent))
    np.testing.assert_allclose(tangent, 5.0 * x, rtol=1e-12)


@pytest.mark.parametrize("opt", LEVELS)
@isolated
def test_non_inlined_helper_taking_pointers(opt):
    check_array_gradient(load(NOINLINE_POINTERS, opt)["norm2"], 5, X5, 2 * X5)


@pytest.mark.parametrize("opt", LEVELS)
@isolated
def test_memcpy_into_an_output(opt):
    fn = load(MEMCPY, opt)["copy_square"]
    w = np.array([1.0, -2.0, 0.5, 3.0, 1.5])
    dx = np.zeros(5)
    ez.autodiff(ez.Reverse, fn, 5, ez.Duplicated(X5.copy(), dx), ez.Duplicated(np.zeros(5), w.copy()))
    np.testing.assert_allclose(dx, 2 * X5 * w, rtol=1e-12)
    tangent = np.zeros(5)
    ez.autodiff(ez.Forward, fn, 5, ez.Duplicated(X5.copy(), np.ones(5)), ez.Duplicated(np.zeros(5), tangent))
    np.testing.assert_allclose(tangent, 2 * X5, rtol=1e-12)


@pytest.mark.parametrize("opt", LEVELS)
@isolated
def test_memcpy_and_memmove_on_a_stack_buffer(opt):
    fn = load(MEMMOVE, opt)["shifted"]
    # t = (x0, x0, x1, x2, x3): s = 1 x0^2 + 2 x0^2 + 3 x1^2 + 4 x2^2 + 5 x3^2
    expected = np.array([6 * X5[0], 6 * X5[1], 8 * X5[2], 10 * X5[3], 0.0])
    check_array_gradient(fn, 5, X5, expected)
    assert np.allclose(fd_array(fn, [5, X5.copy()], 1), expected, atol=1e-6)


@pytest.mark.parametrize("opt", LEVELS)
@pytest.mark.parametrize("k,slope", [(0, 2 * 1.3), (1, 3 * 1.3**2)])
@isolated
def test_call_through_a_global_table_of_function_pointers(opt, k, slope):
    fn = load(FUNCTION_TABLE, opt)["apply"]
    assert ez.autodiff(ez.Reverse, fn, k, ez.Active(1.3)) == pytest.approx((None, slope))
    assert ez.autodiff(ez.Forward, fn, k, ez.Duplicated(1.3, 1.0)) == pytest.approx(slope)


@pytest.mark.parametrize("opt", LEVELS)
@pytest.mark.parametrize("x", [3.0, -0.3])
@isolated
def test_frexp(opt, x):
    fn = load(FREXP, opt)["mant"]
    m, e = math.frexp(x)
    slope = 2 * m * 2.0**-e * e        # f = m^2 e with m = x 2^-e (e constant near x)
    assert slope == pytest.approx(fd_scalar(fn, [x], 0), rel=1e-6)
    assert ez.autodiff(ez.Reverse, fn, ez.Active(x)) == pytest.approx((slope,))
    assert ez.autodiff(ez.Forward, fn, ez.Duplicated(x, 1.0)) == pytest.approx(slope)


# ---------------------------------------------------------------- found by adoffload.testing.differential

RETURNS_ARGUMENT = "double keep(double a, double* y) { y[0] = a * a; return a; }"
BACKWARD_RECURRENCE = """
void backward(int n, double* y) {
    for (int i = 0; i < n; i++) y[i] = y[i] * y[i];
    for (int i = n - 2; i >= 0; i--) y[i] += 0.5 * y[i + 1];
}
"""
REVERSED_SCRATCH = """
void reversed(int n, double* y) {
    double* t = (double*)malloc((size_t)n * sizeof(double));
    for (int i = 0; i < n; i++) t[i] = y[i] * y[i];
    for (int j = 0; j < n; j++) y[j] += t[n - 1 - j] * t[j];
    free(t);
}
"""
COPY_LOOP = """
void prefix(int n, double* y) {
    double* t = (double*)malloc((size_t)n * sizeof(double));
    for (int i = 0; i < n; i++) t[i] = y[i];            /* clang makes this loop a memcpy */
    for (int j = 1; j < n; j++) t[j] += 0.5 * t[j - 1];
    for (int j = 0; j < n; j++) y[j] += t[j];
    free(t);
}
"""


@pytest.mark.parametrize("opt", LEVELS)
@isolated
def test_function_returning_its_argument(opt):
    """clang marks %a ``returned``; the attribute must not reach the void derivative functions."""
    fn = load(RETURNS_ARGUMENT, opt)["keep"]
    a, w = 0.7, 2.0
    dy = np.array([w])
    adjoints = ez.autodiff(ez.Reverse, fn, ez.Active(a), ez.Duplicated(np.zeros(1), dy))
    assert adjoints == pytest.approx((1 + 2 * a * w, None))
    tangent = np.zeros(1)
    assert ez.autodiff(ez.Forward, fn, ez.Duplicated(a, 1.0), ez.Duplicated(np.zeros(1), tangent)) == pytest.approx(1.0)
    assert tangent[0] == pytest.approx(2 * a)


def _backward_jacobian(y: np.ndarray) -> np.ndarray:
    """d out / d y of BACKWARD_RECURRENCE: out_i = y_i^2 + 0.5 out_{i+1}."""
    n = y.size
    J = np.zeros((n, n))
    for i in range(n):
        for k in range(i, n):
            J[i, k] = 0.5 ** (k - i) * 2 * y[k]
    return J


@pytest.mark.parametrize("opt", LEVELS)
@isolated
def test_backward_recurrence_in_place(opt):
    fn = load(BACKWARD_RECURRENCE, opt)["backward"]
    for n in (3, 5, 7):                 # the vectorized loops' remainders differ with n
        y = np.array([0.3, -0.8, 1.1, 0.45, -0.2, 0.9, 0.1])[:n]
        J, w, v = _backward_jacobian(y), np.arange(1.0, n + 1), np.linspace(-1, 1, n)
        dy = w.copy()
        ez.autodiff(ez.Reverse, fn, n, ez.Duplicated(y.copy(), dy))
        np.testing.assert_allclose(dy, J.T @ w, rtol=1e-12, err_msg=f"reverse, n={n}")
        tangent = v.copy()
        ez.autodiff(ez.Forward, fn, n, ez.Duplicated(y.copy(), tangent))
        np.testing.assert_allclose(tangent, J @ v, rtol=1e-12, err_msg=f"forward, n={n}")


@pytest.mark.parametrize("opt", LEVELS)
@isolated
def test_heap_scratch_read_in_reverse_order(opt):
    fn = load(REVERSED_SCRATCH, opt)["reversed"]
    y = np.array([0.3, -0.8, 1.1, 0.45, -0.2])
    n = y.size
    J = np.eye(n)                       # out_j = y_j + y_{n-1-j}^2 y_j^2
    for j in range(n):
        r = n - 1 - j
        J[j, j] += 2 * y[j] * y[r] ** 2
        J[j, r] += 2 * y[r] * y[j] ** 2
    w = np.arange(1.0, n + 1)
    dy = w.copy()
    ez.autodiff(ez.Reverse, fn, n, ez.Duplicated(y.copy(), dy))
    np.testing.assert_allclose(dy, J.T @ w, rtol=1e-12)
    tangent = np.ones(n)
    ez.autodiff(ez.Forward, fn, n, ez.Duplicated(y.copy(), tangent))
    np.testing.assert_allclose(tangent, J @ np.ones(n), rtol=1e-12)


@pytest.mark.parametrize("opt", LEVELS)
@isolated
def test_forward_mode_through_a_copy_loop(opt):
    """Forward mode first: at -O1 and above the copy is a memcpy, which reverse mode refuses and
    forward mode must not skip."""
    fn = load(COPY_LOOP, opt)["prefix"]
    n = 5
    J = np.eye(n) + np.tril(0.5 ** np.subtract.outer(np.arange(n), np.arange(n)))   # out = y + L y
    tangent = np.ones(n)
    ez.autodiff(ez.Forward, fn, n, ez.Duplicated(np.linspace(-1, 1, n), tangent))
    np.testing.assert_allclose(tangent, J @ np.ones(n), rtol=1e-12)
    dy = np.ones(n)
    ez.autodiff(ez.Reverse, fn, n, ez.Duplicated(np.linspace(-1, 1, n), dy))
    np.testing.assert_allclose(dy, J.T @ np.ones(n), rtol=1e-12)


PAIRS = """
typedef struct { double u, v; } pair;
static __attribute__((noinline)) pair step(pair s, double w) { pair r; r.u = w * s.u; r.v = 0.5 * s.v + w; return r; }
double run_pairs(int n, const double* x) {
    pair s = { 1.0, 0.5 };
    for (int i = 0; i < n; i++) s = step(s, x[i]);
    return s.u + s.v;
}
"""


def _run_pairs(x: np.ndarray) -> float:
    u, v = 1.0, 0.5
    for w in x:
        u, v = w * u, 0.5 * v + w
    return u + v


@pytest.mark.parametrize("opt", LEVELS)
@isolated
def test_struct_returned_by_a_noinline_helper(opt):
    """The host call first (when this was written, at -O1..-O3 the IR reader read clang's
    ``extractvalue {double, double} %s, 1`` with no index, so the exported module did not parse),
    then the gradient."""
    fn = load(PAIRS, opt)["run_pairs"]
    x = np.array([0.3, -0.8, 1.1])
    assert float(fn(3, x.copy())) == pytest.approx(_run_pairs(x), rel=1e-14)
    h = 1e-6
    expected = np.array([(_run_pairs(x + h * e) - _run_pairs(x - h * e)) / (2 * h) for e in np.eye(3)])
    check_array_gradient(fn, 3, x, expected)


# ---------------------------------------------------------------- a callback passed down (direct only after inlining)

CALLBACK = ("typedef double (*rhs_t)(double, double, const double*);\n"
            "static double rhs(double t, double y, const double* p) { return -p[0] * y + sin(p[1] * t); }\n"
            "static double euler(rhs_t f, double y, int n, const double* p) {\n"
            "    double t = 0; for (int i = 0; i < n; i++) { y += 0.05 * f(t, y, p); t += 0.05; } return y; }\n"
            "double integrate(const double* p) { return euler(rhs, 1.0, 20, p); }")


@pytest.mark.parametrize("opt", LEVELS)
@isolated
def test_a_callback_passed_to_a_helper_is_inlined_and_differentiated(opt):
    """At -O0 the call through the function-pointer argument becomes a direct call only after the
    helper is inlined; ado.from_llvm inlines again until no such call is left."""
    fn = load(CALLBACK, opt)["integrate"]
    p = np.array([0.7, 2.0])
    expected = fd_array(fn, [p], 0)
    dp = np.zeros(2)
    ez.autodiff(ez.Reverse, fn, ez.Duplicated(p.copy(), dp))
    np.testing.assert_allclose(dp, expected, rtol=1e-6, atol=1e-8)
