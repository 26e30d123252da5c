"""adoffload.testing.irtext: cutting one function (and what it needs) out of an IR module."""
from __future__ import annotations

import pytest

import adoffload as ado
from adoffload import enzyme as ez
from adoffload.testing import irtext

IR = r"""
@table = internal constant [2 x ptr] [ptr @"sq.quoted", ptr @cube]

define internal double @"sq.quoted"(double %v) {
  %r = fmul double %v, %v
  ret double %r
}

define internal double @cube(double %v) {
  %s = call double @"sq.quoted"(double %v)
  %r = fmul double %s, %v
  ret double %r
}

define double @uses_sq(double %x) {
  %r = call double @"sq.quoted"(double %x)
  ret double %r
}

define double @alone(double %x) {
  %r = fadd double %x, 1.0
  ret double %r
}
"""


def test_subset_keeps_callees_and_what_globals_name_under_quoted_names():
    rest, functions = irtext.split_module(IR)
    assert set(functions) == {"sq.quoted", "cube", "uses_sq", "alone"}
    kept = irtext.split_module(irtext.module_subset(IR, ["uses_sq"]))[1]
    assert set(kept) == {"uses_sq", "sq.quoted", "cube"}       # cube: named by @table
    assert set(irtext.split_module(irtext.module_subset(IR, ["alone"]))[1]) == {"alone", "sq.quoted", "cube"}


def test_function_modules_give_each_function_a_small_module_with_the_same_derivative():
    full = ado.from_llvm(IR)
    mods = irtext.FunctionModules(full, prepare=lambda m: sorted(m.functions))
    small = mods.module_of("uses_sq")
    assert "alone" not in small.names() and "alone" in mods
    assert "alone" not in mods.prepared["uses_sq"]
    assert float(mods["uses_sq"](3.0)) == 9.0
    assert ez.autodiff(ez.Reverse, mods["uses_sq"], ez.Active(3.0)) == pytest.approx((6.0,))
    assert ez.autodiff(ez.Reverse, full["uses_sq"], ez.Active(3.0)) == pytest.approx((6.0,))
    assert mods.module_of("uses_sq") is small                   # built once
    with pytest.raises(ado.Error, match="no function @missing"):
        mods["missing"]
    assert float(mods["alone"](1.0)) == 2.0
