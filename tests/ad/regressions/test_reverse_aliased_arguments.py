"""Found with the Rust corpus (tests/ad/test_foreign_rust_hunt.py, ``hr_raw_update`` at -O2/-O3):
a raw-pointer kernel ``x[i] -= lr * g[i] / (1 + |g[i]|)`` called as ``f(x, x)`` (legal for raw
pointers, and for C without ``restrict``) got a silently wrong reverse gradient: the reverse sweep
re-reads ``g``, which the function never writes through ``g``, from memory, where the forward
sweep had overwritten it through ``x`` (``update`` below with w = [1, 2, -1] gave [0.745, 3.958,
-0.52] for (1 - 2 lr x) w = [0.7, 3.44, 0.2]). Fixed: ``autodiff(Reverse, ...)`` refuses two array
arguments that share memory when the function may write through either (ArgumentError naming
them), as kernel launches do; read-only sharing and forward mode stay allowed.
"""
from __future__ import annotations

import numpy as np
import pytest

import adoffload as ado
from adoffload import enzyme as ez
from adoffload.errors import ArgumentError

SOURCE = """
define void @update(ptr %x, ptr %g, i64 %n, double %lr) {
entry:
  br label %loop
loop:
  %i = phi i64 [ 0, %entry ], [ %i1, %loop ]
  %gp = getelementptr double, ptr %g, i64 %i
  %gi = load double, ptr %gp
  %xp = getelementptr double, ptr %x, i64 %i
  %xi = load double, ptr %xp
  %g2 = fmul double %gi, %gi
  %step = fmul double %lr, %g2
  %new = fsub double %xi, %step
  store double %new, ptr %xp
  %i1 = add i64 %i, 1
  %more = icmp ult i64 %i1, %n
  br i1 %more, label %loop, label %done
done:
  ret void
}

define double @dot(ptr %x, ptr %y, i64 %n) {
entry:
  br label %loop
loop:
  %i = phi i64 [ 0, %entry ], [ %i1, %loop ]
  %s = phi double [ 0.0, %entry ], [ %s1, %loop ]
  %xp = getelementptr double, ptr %x, i64 %i
  %yp = getelementptr double, ptr %y, i64 %i
  %a = load double, ptr %xp
  %b = load double, ptr %yp
  %ab = fmul double %a, %b
  %s1 = fadd double %s, %ab
  %i1 = add i64 %i, 1
  %more = icmp ult i64 %i1, %n
  br i1 %more, label %loop, label %done
done:
  ret double %s1
}
"""


def test_reverse_refuses_a_written_array_passed_twice():
    fn = ado.from_llvm(SOURCE)["update"]
    x, dx = np.array([0.5, -1.2, 2.0]), np.ones(3)
    with pytest.raises(ArgumentError, match="%x and %g of @update share memory"):
        ez.autodiff(ez.Reverse, fn, ez.Duplicated(x, dx), ez.Duplicated(x, dx), 3, ez.Active(0.3))
    with pytest.raises(ArgumentError, match="share memory"):          # overlapping views too
        buffer = np.array([0.5, -1.2, 2.0, 0.7])
        ez.autodiff(ez.Reverse, fn, ez.Duplicated(buffer[1:], np.ones(3)), ez.Duplicated(buffer[:3], np.ones(3)),
                    3, ez.Active(0.3))


def test_forward_mode_follows_the_aliased_memory():
    """x_i <- x_i - lr x_i^2 when g is x: the tangent is (1 - 2 lr x_i) v_i."""
    fn = ado.from_llvm(SOURCE)["update"]
    x, v, lr = np.array([0.5, -1.2, 2.0]), np.array([0.3, 0.1, -0.2]), 0.3
    shared, tangent = x.copy(), v.copy()
    ez.autodiff(ez.Forward, fn, ez.Duplicated(shared, tangent), ez.Duplicated(shared, tangent), 3,
                ez.Duplicated(lr, 0.0))
    np.testing.assert_allclose(shared, x - lr * x * x, rtol=1e-15)
    np.testing.assert_allclose(tangent, (1 - 2 * lr * x) * v, rtol=1e-15)


def test_read_only_sharing_is_allowed_and_right():
    """dot(x, x) with one shadow for both: 2 x."""
    fn = ado.from_llvm(SOURCE)["dot"]
    x, dx = np.array([0.5, -1.2, 2.0]), np.zeros(3)
    ez.autodiff(ez.Reverse, fn, ez.Duplicated(x, dx), ez.Duplicated(x, dx), 3)
    np.testing.assert_allclose(dx, 2 * x, rtol=1e-15)
