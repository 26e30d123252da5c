"""f64s moved as i64 (Rust's slice::swap, reverse: ptr::swap copies bytes) are retyped to double
moves at import (ir/float_moves.py) so the AD engine follows them, only where the memory is known
to hold that float: every other access through it is of the float type of the integer's width."""
from __future__ import annotations

import numpy as np
import pytest

import adoffload as ado
from adoffload import enzyme as ez
from adoffload.errors import DifferentiationError

# x[0] <-> x[n-1] swapped through i64, then sum_k (k+1) * x[k]^2 read as double
SWAP = """
define double @f(ptr %x, i64 %n) {
entry:
  %last = add i64 %n, -1
  %q = getelementptr double, ptr %x, i64 %last
  %a = load i64, ptr %x
  %b = load i64, ptr %q
  store i64 %b, ptr %x
  store i64 %a, ptr %q
  br label %loop
loop:
  %k = phi i64 [ 0, %entry ], [ %k1, %loop ]
  %s = phi double [ 0.0, %entry ], [ %s1, %loop ]
  %p = getelementptr ELEMENT, ptr %x, i64 %k
  %v = load ELEMENT, ptr %p
  %vd = CONVERT
  %w = uitofp i64 %k to double
  %w1 = fadd double %w, 1.0
  %sq = fmul double %vd, %vd
  %t = fmul double %sq, %w1
  %s1 = fadd double %s, %t
  %k1 = add i64 %k, 1
  %more = icmp ult i64 %k1, %n
  br i1 %more, label %loop, label %done
done:
  ret double %s1
}
"""


def _source(element: str) -> str:
    convert = {"double": "fadd double %v, 0.0", "i64": "sitofp i64 %v to double",
               "float": "fpext float %v to double"}[element]
    return SWAP.replace("ELEMENT", element).replace("CONVERT", convert)


def _loads(fn):
    return {str(i.type) for i in fn.ir.instructions() if i.opcode == "load"}


def test_a_swap_of_doubles_is_differentiated():
    fn = ado.from_llvm(_source("double"))["f"]
    assert _loads(fn) == {"double"}
    x = np.array([0.5, -1.0, 2.0, 0.3])
    swapped = x[[3, 1, 2, 0]]
    weights = np.arange(1.0, 5.0)
    assert fn(x.copy(), 4) == pytest.approx(float(np.sum(weights * swapped ** 2)))
    expected = (2 * weights * swapped)[[3, 1, 2, 0]]            # d/dx of the value at x's own index
    grad = np.zeros(4)
    ez.autodiff(ez.Reverse, fn, ez.Duplicated(x.copy(), grad), 4)
    np.testing.assert_allclose(grad, expected, rtol=1e-15)
    forward = [ez.autodiff(ez.Forward, fn, ez.Duplicated(x.copy(), np.eye(4)[k]), 4) for k in range(4)]
    np.testing.assert_allclose(forward, expected, rtol=1e-15)


def test_integers_stay_integers():
    """The memory is read as i64 elsewhere: the moves are of integers and are left as they are."""
    fn = ado.from_llvm(_source("i64"))["f"]
    assert _loads(fn) == {"i64"}


def test_a_float_of_another_width_stays_refused():
    """Two f32 moved as one i64 are not one double: not retyped, and the derivative is refused."""
    fn = ado.from_llvm(_source("float"))["f"]
    assert "i64" in _loads(fn)
    with pytest.raises(DifferentiationError, match="float bits carried as an integer"):
        ez.autodiff(ez.Reverse, fn, ez.Duplicated(np.ones(4, np.float32), np.zeros(4, np.float32)), 4)


def test_moves_alone_say_nothing_of_the_type():
    """Memory only moved (never read as a float) is left alone."""
    text = _source("double").replace("%p = getelementptr double, ptr %x", "%p = getelementptr double, ptr %y")
    text = text.replace("define double @f(ptr %x, i64 %n)", "define double @f(ptr %x, ptr %y, i64 %n)")
    fn = ado.from_llvm(text)["f"]
    assert "i64" in _loads(fn)
