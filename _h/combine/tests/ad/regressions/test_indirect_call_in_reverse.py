"""Found with numba's IR (tests/ad/test_foreign_numba.py): the reverse derivative of a function
with an indirect call -- numba's cfunc wrapper calls a function pointer loaded from its exception
info on the error path -- was invalid IR ("operand %fp of 'call %r' is not defined before use"):
the forward sweep's copy of the call kept the original function's callee value. The call is
inactive (no float flows through it); the derivative is that of the float path.
"""
from __future__ import annotations

import pytest

import adoffload as ado
from adoffload import enzyme as ez

IR = """
define double @f(double %x, ptr %table) {
entry:
  %bad = fcmp olt double %x, 0.0
  br i1 %bad, label %error, label %ok
error:
  %fp = load ptr, ptr %table
  %r = call ptr %fp(ptr %table)
  br label %done
ok:
  %y = fmul double %x, %x
  br label %done
done:
  %out = phi double [ 0.0, %error ], [ %y, %ok ]
  ret double %out
}
"""


def test_reverse_of_a_function_with_an_inactive_indirect_call():
    fn = ado.from_llvm(IR)["f"]
    d_x, _ = ez.autodiff(ez.Reverse, fn, ez.Active(1.5), ez.Const(0))
    assert d_x == pytest.approx(3.0)
    assert ez.autodiff(ez.Forward, fn, ez.Duplicated(1.5, 1.0), ez.Const(0)) == pytest.approx(3.0)
