"""Foreign-IR constructs the AD engine once got silently wrong or could not compile (found with
the corpus in tests/fixtures/foreign/corpus): a mutable global used as scratch, float bits
through an integer view of memory, landing pads. Each must give the right derivative or a
DifferentiationError."""
from __future__ import annotations

import numpy as np
import pytest

import adoffload as ado
from adoffload.enzyme.api import Active, Duplicated, Forward, Reverse, autodiff
from adoffload.errors import DifferentiationError


def _right_or_refused(mode, fn, args, expected):
    try:
        got = autodiff(mode, fn, *args)
    except DifferentiationError:
        return
    got = got[0] if isinstance(got, tuple) else got
    assert got == pytest.approx(expected, rel=1e-12)


_GLOBAL_SCRATCH = r'''
@buf = internal global [2 x double] zeroinitializer
define double @f(double %x) {
  store double %x, ptr getelementptr inbounds (i8, ptr @buf, i64 8)
  %y = load double, ptr getelementptr inbounds (i8, ptr @buf, i64 8)
  %z = fmul double %y, %y
  ret double %z
}
'''


@pytest.mark.parametrize("mode", ["forward", "reverse"])
def test_active_value_through_a_mutable_global(mode):
    fn = ado.from_llvm(_GLOBAL_SCRATCH, canonical=False)["f"]
    if mode == "forward":
        _right_or_refused(Forward, fn, [Duplicated(1.5, 1.0)], 3.0)
    else:
        _right_or_refused(Reverse, fn, [Active(1.5)], 3.0)


_UNION_BITS = r'''
define double @abs_bits(double %x) {
  %slot = alloca i64, align 8
  store double %x, ptr %slot, align 8
  %bits = load i64, ptr %slot, align 8
  %cleared = and i64 %bits, 9223372036854775807
  store i64 %cleared, ptr %slot, align 8
  %r = load double, ptr %slot, align 8
  ret double %r
}
'''


def test_float_bits_through_an_integer_view_of_memory():
    fn = ado.from_llvm(_UNION_BITS, canonical=False)["abs_bits"]
    _right_or_refused(Forward, fn, [Duplicated(-2.5, 1.0)], -1.0)


_INVOKE = r'''
define i32 @pers(...) { ret i32 0 }
define void @may_throw() { ret void }
define double @f(double %x) personality ptr @pers {
entry:
  invoke void @may_throw() to label %ok unwind label %bad
ok:
  %y = fmul double %x, %x
  ret double %y
bad:
  %lp = landingpad { ptr, i32 } cleanup
  resume { ptr, i32 } %lp
}
'''


@pytest.mark.parametrize("mode", ["forward", "reverse"])
def test_invoke_with_a_landing_pad(mode):
    fn = ado.from_llvm(_INVOKE, canonical=False)["f"]
    if mode == "forward":
        _right_or_refused(Forward, fn, [Duplicated(1.5, 1.0)], 3.0)
    else:
        _right_or_refused(Reverse, fn, [Active(1.5)], 3.0)
