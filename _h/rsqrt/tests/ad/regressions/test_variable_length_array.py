"""A C99 variable-length array (``double t[n]``: ``alloca double, i64 %n``) got a one-element
shadow: a silent wrong gradient at every optimization level (found by hand-written C, not by the
differential tester, whose programs use malloc for scratch). The shadow now has the array's
element count; where the array may not outlive the reverse sweep (inside a loop, or popped by
``llvm.stackrestore`` at the end of a block scope) reverse mode refuses it by name.
"""
from __future__ import annotations

import numpy as np
import pytest

import adoffload as ado
from adoffload import enzyme as ez
from adoffload.testing import clang

pytestmark = pytest.mark.skipif(not clang.clang_available(),
                                reason="the ziglang wheel (the clang these tests compile C with) is not installed")

SOURCE = r"""
#include <math.h>
double ring(int n, const double* x) {
    double t[n];
    for (int i = 0; i < n; i++) t[i] = sin(x[i]);
    double s = 0;
    for (int i = 0; i < n; i++) s += t[i] * t[(i + 1) % n];
    return s;
}
double per_pass(int n, const double* x) {
    double s = 0;
    for (int k = 1; k <= 3; k++) {
        double t[n];
        for (int i = 0; i < n; i++) t[i] = sin(k * x[i]);
        for (int i = 0; i < n; i++) s += t[i] * t[(i + 1) % n];
    }
    return s;
}
"""
X = np.array([0.3, -0.7, 1.1, 0.4, 0.9])


def _ring_gradient(x):
    t = np.sin(x)
    return np.cos(x) * (np.roll(t, -1) + np.roll(t, 1))


@pytest.mark.parametrize("opt", [0, 2])
def test_both_modes_through_a_variable_length_array(opt):
    f = ado.from_llvm(clang.compile_c(SOURCE, opt))["ring"]
    dx = np.zeros(5)
    ez.autodiff(ez.Reverse, f, ez.Const(5), ez.Duplicated(X.copy(), dx))
    np.testing.assert_allclose(dx, _ring_gradient(X), rtol=1e-13)
    v = np.array([0.2, -1.0, 0.5, 0.3, 2.0])
    jv = ez.autodiff(ez.Forward, f, ez.Const(5), ez.Duplicated(X.copy(), v.copy()))
    assert jv == pytest.approx(np.dot(_ring_gradient(X), v), rel=1e-13)


@pytest.mark.parametrize("opt", [0, 2])
def test_one_array_per_loop_pass(opt):
    f = ado.from_llvm(clang.compile_c(SOURCE, opt))["per_pass"]
    want = sum(k * _ring_gradient(k * X) for k in (1, 2, 3))
    v = np.array([0.2, -1.0, 0.5, 0.3, 2.0])
    jv = ez.autodiff(ez.Forward, f, ez.Const(5), ez.Duplicated(X.copy(), v.copy()))
    assert jv == pytest.approx(np.dot(want, v), rel=1e-12)          # forward mode: one pass at a time
    try:     # an array per pass dies at the pass's end (llvm.stackrestore): refused, or right
        dx = np.zeros(5)
        ez.autodiff(ez.Reverse, f, ez.Const(5), ez.Duplicated(X.copy(), dx))
    except ado.DifferentiationError as exc:
        assert "variable-length stack array" in str(exc) and "stackrestore" in str(exc)
    else:
        np.testing.assert_allclose(dx, want, rtol=1e-12)
