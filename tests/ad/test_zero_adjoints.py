"""A value computed but not used on this execution has a zero adjoint, and 0 · NaN must not make the
gradient NaN (enzyme/zero_adjoints.py).

numba's ``if x[i] < 0: continue; y[i] = sqrt(x[i]) * x[i]`` compiles, with AVX, to a vector body that
takes the square root of every lane and stores the non-negative ones: the reverse sweep multiplied the
skipped lanes' zero adjoints by NaN (on AVX2 hosts even at 5 elements, tests/ad/test_foreign_numba_hunt's
``nb_continue``). The same happens to the arm a select does not choose, to a value hoisted above the
branch that uses it, and to earlier iterations of a value read after its loop. Each case below is written
so that it runs the same on every CPU (LLVM IR by hand, or our own kernels), and checked against the
analytic derivative, central differences and forward mode (<J v, w> = <v, J^T w>)."""
from __future__ import annotations

import numpy as np
import pytest

import adoffload as ado
from adoffload import enzyme as ez

# y[0:4] = x * sqrt(x) where x >= 0 (a masked store of a vector computed on every lane)
MASKED = r"""
declare <4 x double> @llvm.sqrt.v4f64(<4 x double>)
declare void @llvm.masked.store.v4f64.p0(<4 x double>, ptr, i32, <4 x i1>)
define void @f(ptr %x, ptr %y) {
  %v = load <4 x double>, ptr %x, align 8
  %m = fcmp uge <4 x double> %v, zeroinitializer
  %s = call <4 x double> @llvm.sqrt.v4f64(<4 x double> %v)
  %p = fmul <4 x double> %v, %s
  call void @llvm.masked.store.v4f64.p0(<4 x double> %p, ptr %y, i32 8, <4 x i1> %m)
  ret void
}
"""

# the square root hoisted above the branch that uses it (LLVM speculates sqrt)
HOISTED = r"""
declare double @llvm.sqrt.f64(double)
define double @f(ptr %x) {
entry:
  %v = load double, ptr %x, align 8
  %s = call double @llvm.sqrt.f64(double %v)
  %p = fmul double %v, %s
  %c = fcmp ogt double %v, 0.0
  br i1 %c, label %use, label %done
use:
  %q = fmul double %p, 2.0
  br label %done
done:
  %r = phi double [ %q, %use ], [ 0.0, %entry ]
  ret double %r
}
"""

# the last iteration's value read after the loop; earlier iterations' square roots are unused
LAST_ITERATION = r"""
declare double @llvm.sqrt.f64(double)
define double @f(ptr %x, i32 %n) {
entry:
  br label %loop
loop:
  %i = phi i32 [ 0, %entry ], [ %next, %loop ]
  %at = getelementptr double, ptr %x, i32 %i
  %v = load double, ptr %at, align 8
  %s = call double @llvm.sqrt.f64(double %v)
  %p = fmul double %v, %s
  %next = add i32 %i, 1
  %more = icmp slt i32 %next, %n
  br i1 %more, label %loop, label %done
done:
  %last = phi double [ %p, %loop ]
  ret double %last
}
"""

# the unchosen arm of a select overflows (a numerically stable softplus written with a select)
SOFTPLUS = r"""
declare double @llvm.exp.f64(double)
declare double @llvm.log.f64(double)
define double @f(ptr %x) {
  %v = load double, ptr %x, align 8
  %e = call double @llvm.exp.f64(double %v)
  %e2 = fmul double %e, %e
  %one = fadd double %e2, 1.0
  %l = call double @llvm.log.f64(double %one)
  %h = fmul double %l, 0.5
  %big = fcmp ogt double %v, 300.0
  %r = select i1 %big, double %v, double %h
  ret double %r
}
"""


def _x_sqrt_x_grad(x):
    return np.where(x >= 0, 1.5 * np.sqrt(np.maximum(x, 0.0)), 0.0)


def test_masked_lanes_skipped_get_no_nan():
    f = ado.from_llvm(MASKED)["f"]
    x = np.array([0.4, -0.3, 1.2, -0.9])
    dy = np.array([0.7, -1.1, 0.5, 2.0])
    dx = np.zeros(4)
    ez.autodiff(ez.Reverse, f, ez.Duplicated(x, dx), ez.Duplicated(np.zeros(4), dy.copy()))
    np.testing.assert_allclose(dx, _x_sqrt_x_grad(x) * dy * (x >= 0), rtol=1e-14)
    # forward mode and the identity <J v, w> = <v, J^T w>
    v = np.array([0.3, 0.8, -0.2, 0.5])
    ty = np.zeros(4)
    ez.autodiff(ez.Forward, f, ez.Duplicated(x, v), ez.Duplicated(np.zeros(4), ty))
    assert np.all(np.isfinite(ty))
    np.testing.assert_allclose(np.dot(ty, dy), np.dot(v, dx), rtol=1e-13)


@pytest.mark.parametrize("text, point", [(HOISTED, [-0.5]), (HOISTED, [0.8]), (SOFTPLUS, [400.0]),
                                         (SOFTPLUS, [1.3]), (SOFTPLUS, [-2.0])])
def test_a_value_the_taken_path_does_not_use_adds_nothing(text, point):
    f = ado.from_llvm(text)["f"]
    x = np.array(point)
    dx = np.zeros(1)
    ez.autodiff(ez.Reverse, f, ez.Duplicated(x, dx))
    h = 1e-6 * max(1.0, abs(x[0]))
    fd = (f(x + h) - f(x - h)) / (2 * h)
    tangent = ez.autodiff(ez.Forward, f, ez.Duplicated(x, np.ones(1)))
    assert np.isfinite(dx[0]) and np.isfinite(tangent), (dx, tangent)
    np.testing.assert_allclose(dx[0], fd, rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(dx[0], tangent, rtol=1e-14)


def test_earlier_iterations_read_after_the_loop_add_nothing():
    f = ado.from_llvm(LAST_ITERATION)["f"]
    x = np.array([-0.4, -1.0, 0.3, -2.0, 0.81])
    dx = np.zeros(5)
    ez.autodiff(ez.Reverse, f, ez.Duplicated(x, dx), 5)
    want = np.zeros(5)
    want[-1] = 1.5 * np.sqrt(0.81)
    np.testing.assert_allclose(dx, want, rtol=1e-14)


@ado.kernel
def _guarded_sqrt(x: ado.In[ado.f64], y: ado.Out[ado.f64]):
    i = ado.tid()
    y[i] = ado.sqrt(x[i]) * x[i] if x[i] > 0.0 else 0.0


def test_own_kernel_select_of_a_nan_arm():
    x = np.array([0.4, -0.3, 2.0, -5.0, 0.0])
    dy = np.array([1.0, 2.0, -0.5, 1.5, 3.0])
    dx = np.zeros(5)
    ado.vjp(_guarded_sqrt, wrt=["x"])(x, np.zeros(5), d_x=dx, d_y=dy.copy(), grid=5)
    np.testing.assert_allclose(dx, _x_sqrt_x_grad(x) * (x > 0) * dy, rtol=1e-14)
    ty = np.zeros(5)
    v = np.array([0.2, 0.1, -0.3, 0.7, 1.0])
    ado.jvp(_guarded_sqrt, wrt=["x"])(x, np.zeros(5), d_x=v, d_y=ty, grid=5)
    np.testing.assert_allclose(np.dot(ty, dy), np.dot(v, dx), rtol=1e-13)


@ado.kernel
def _straight(a: ado.f64, x: ado.In[ado.f64], y: ado.Out[ado.f64]):
    i = ado.tid()
    y[i] = a * x[i] * ado.exp(x[i])


def test_straight_line_code_keeps_plain_products():
    """No structural zero in straight-line code: its reverse has no strong (selecting) products."""
    from adoffload.enzyme.zero_adjoints import maybe_zero_adjoints
    module, name = _straight.ir()
    fn = module.functions[name]
    assert not maybe_zero_adjoints(fn.blocks)
