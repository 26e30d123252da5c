"""Vector reductions of vectorized code (``llvm.vector.reduce.*``), forward and reverse.

clang -O2/-O3 turns a max loop into ``llvm.vector.reduce.fmax`` (the differential tester's
refusals of the last round); fast-math sums become ``llvm.vector.reduce.fadd``. Checked against
central differences of the primal and against each other (<J v, w> = <v, J^T w>).
"""
from __future__ import annotations

import numpy as np
import pytest

import adoffload as ado
from adoffload import enzyme as ez
from adoffload.testing import differential

MAX_LOOP = ("#include <math.h>\n"
            "double vmax(int n, const double* x) {\n"
            "    double m = -INFINITY; for (int i = 0; i < n; i++) m = fmax(m, x[i] * x[i]); return 3.0 * m; }\n")

REDUCE_IR = """
define double @mix(ptr %x, double %s) {
entry:
  %v = load <4 x double>, ptr %x, align 8
  %sq = fmul <4 x double> %v, %v
  %sum = call reassoc double @llvm.vector.reduce.fadd.v4f64(double %s, <4 x double> %sq)
  %lo = call double @llvm.vector.reduce.fmin.v4f64(<4 x double> %v)
  %hi = call double @llvm.vector.reduce.fmaximum.v4f64(<4 x double> %v)
  %a = fmul double %sum, %lo
  %b = fmul double %a, %hi
  ret double %b
}
declare double @llvm.vector.reduce.fadd.v4f64(double, <4 x double>)
declare double @llvm.vector.reduce.fmin.v4f64(<4 x double>)
declare double @llvm.vector.reduce.fmaximum.v4f64(<4 x double>)
"""


def _fd(fn, x, *rest, h=1e-6):
    g = np.zeros_like(x)
    for j in range(x.size):
        up, down = x.copy(), x.copy()
        up[j] += h
        down[j] -= h
        g[j] = (fn(up, *rest) - fn(down, *rest)) / (2 * h)
    return g


@pytest.mark.skipif(not differential.clang_available(), reason="the ziglang wheel (clang) is not installed")
@pytest.mark.parametrize("opt", [0, 1, 2, 3])
def test_a_max_loop_vectorized_into_reduce_fmax(opt):
    ir = differential.compile_c(MAX_LOOP, opt)
    if opt >= 2:
        assert "llvm.vector.reduce.fmax" in ir            # the construct under test is really there
    fn = ado.from_llvm(ir)["vmax"]
    x = np.array([0.3, -0.8, 1.1, 0.45, -0.2, 0.9, -1.3, 0.1, 0.7, -0.6, 1.2])     # 11: vector body + remainder
    expected = np.zeros_like(x)
    expected[6] = 3.0 * 2 * x[6]                          # |x|^2 is largest at x[6] = -1.3
    np.testing.assert_allclose(_fd(lambda v: fn(len(v), v), x), expected, rtol=1e-6, atol=1e-6)
    dx = np.zeros_like(x)
    ez.autodiff(ez.Reverse, fn, len(x), ez.Duplicated(x.copy(), dx))
    np.testing.assert_allclose(dx, expected, rtol=1e-12)
    v = np.random.default_rng(1).standard_normal(x.size)
    tangent = ez.autodiff(ez.Forward, fn, len(x), ez.Duplicated(x.copy(), v))
    assert tangent == pytest.approx(float(expected @ v), rel=1e-12)


def test_reduce_fadd_fmin_fmaximum_in_both_modes():
    fn = ado.from_llvm(REDUCE_IR)["mix"]
    x, s = np.array([0.7, -0.4, 1.3, 0.2]), 0.25
    expected = _fd(lambda v, s: fn(v, s), x, s)
    dx = np.zeros_like(x)
    _, d_s = ez.autodiff(ez.Reverse, fn, ez.Duplicated(x.copy(), dx), ez.Active(s))   # one entry per argument
    np.testing.assert_allclose(dx, expected, rtol=1e-7)
    assert d_s == pytest.approx(x.min() * x.max(), rel=1e-12)
    v = np.array([0.5, -1.0, 0.25, 2.0])
    tangent = ez.autodiff(ez.Forward, fn, ez.Duplicated(x.copy(), v), ez.Const(s))
    assert tangent == pytest.approx(float(expected @ v), rel=1e-7)
