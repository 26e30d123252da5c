"""Reverse mode on straight-line code, branches, memory and every derivative rule."""
from __future__ import annotations

import numpy as np
import pytest

from adoffload.enzyme.reverse import reverse
from adoffload.errors import DifferentiationError
from adoffload.ir import export_module, import_module

from .test_reverse_support import ACTIVE, CONST, DUP, check_reverse, derive

BRANCHES = """
declare double @llvm.sin.f64(double)
define double @f(double %x, double %y) {
entry:
  %c = fcmp olt double %x, %y
  br i1 %c, label %a, label %b
a:
  %m = fmul double %x, %y
  %s = call double @llvm.sin.f64(double %m)
  br label %j
b:
  %d = fdiv double %x, %y
  br label %j
j:
  %p = phi double [%s, %a], [%d, %b]
  %q = fmul double %p, %x
  ret double %q
}
"""


@pytest.mark.parametrize("x, y", [(0.3, 0.7), (1.5, 0.4)])
def test_branches_and_phi(x, y):
    check_reverse(BRANCHES, "f", [ACTIVE, ACTIVE], [x, y], canonical=False)


def test_const_argument_gets_no_shadow():
    module, result = derive(BRANCHES, "f", [ACTIVE, CONST], canonical=False)
    assert [a.name for a in result.function.args] == ["x", "y", "d_x", "dret"]
    check_reverse(BRANCHES, "f", [ACTIVE, CONST], [0.3, 0.7], canonical=False)


MEMORY = """
define void @f(ptr %x, ptr %out, i64 %n) {
entry:
  %p0 = getelementptr double, ptr %x, i64 0
  %p1 = getelementptr double, ptr %x, i64 1
  %a = load double, ptr %p0
  %b = load double, ptr %p1
  %m = fmul double %a, %b
  store double %m, ptr %p0          ; overwrites x[0] after loading it
  %a2 = load double, ptr %p0
  %s = fadd double %a2, %a
  %o = getelementptr double, ptr %out, i64 %n
  store double %s, ptr %o
  ret void
}
"""


def test_memory_overwritten_location():
    x = np.array([1.3, -0.7])
    check_reverse(MEMORY, "f", [DUP, DUP, CONST], [x, np.zeros(3), 2])


SWITCH = """
define double @f(double %x, i32 %k) {
entry:
  switch i32 %k, label %d [ i32 0, label %a
                            i32 1, label %b ]
a:
  %xa = fmul double %x, %x
  br label %j
b:
  %xb = fmul double %x, 3.0
  br label %j
d:
  br label %j
j:
  %p = phi double [%xa, %a], [%xb, %b], [%x, %d]
  %r = fmul double %p, %x
  ret double %r
}
"""


@pytest.mark.parametrize("k", [0, 1, 5])
def test_switch(k):
    check_reverse(SWITCH, "f", [ACTIVE, CONST], [0.8, k], canonical=False)


# one function per rule key: (declaration or "", expression producing %r from %x and %y, x, y)
UNARY = ["sqrt", "exp", "exp2", "log", "log2", "log10", "sin", "cos", "tan", "tanh", "sinh", "cosh",
         "asin", "acos", "atan", "fabs", "floor", "ceil", "trunc", "round"]
LIBM = ["log1p", "expm1", "erf", "erfc"]
BINARY = ["pow", "minnum", "maxnum", "minimum", "maximum", "copysign", "atan2"]


def _unary_src(name, intrinsic=True):
    callee = f"llvm.{name}.f64" if intrinsic else name
    return f"""
declare double @{callee}(double)
define double @f(double %x) {{
entry:
  %r = call double @{callee}(double %x)
  %s = fmul double %r, %x
  ret double %s
}}
"""


@pytest.mark.parametrize("name", UNARY)
def test_unary_intrinsic(name):
    check_reverse(_unary_src(name), "f", [ACTIVE], [0.37], canonical=False, rtol=1e-5)


@pytest.mark.parametrize("name", LIBM + ["sinf"[:-1] + "", "atan"])
def test_libm_name(name):
    check_reverse(_unary_src(name, intrinsic=False), "f", [ACTIVE], [0.37], canonical=False, rtol=1e-5)


@pytest.mark.parametrize("name", BINARY)
def test_binary_intrinsic(name):
    callee = "atan2" if name == "atan2" else f"llvm.{name}.f64"
    src = f"""
declare double @{callee}(double, double)
define double @f(double %x, double %y) {{
entry:
  %r = call double @{callee}(double %x, double %y)
  ret double %r
}}
"""
    check_reverse(src, "f", [ACTIVE, ACTIVE], [0.37, 1.6], canonical=False, rtol=1e-5)


@pytest.mark.parametrize("op", ["fadd", "fsub", "fmul", "fdiv", "frem"])
def test_arithmetic(op):
    src = f"""
define double @f(double %x, double %y) {{
entry:
  %r = {op} double %x, %y
  %s = fmul double %r, %x
  ret double %s
}}
"""
    check_reverse(src, "f", [ACTIVE, ACTIVE], [2.3, 0.7], canonical=False, rtol=1e-5)


def test_fma_fneg_casts_select_in_f32():
    src = """
declare float @llvm.fma.f32(float, float, float)
define double @f(double %x, float %y) {
entry:
  %xf = fptrunc double %x to float
  %m = call float @llvm.fma.f32(float %xf, float %y, float %y)
  %n = fneg float %m
  %c = fcmp olt float %n, 0.0
  %s = select i1 %c, float %n, float %y
  %e = fpext float %s to double
  %r = fmul double %e, %x
  ret double %r
}
"""
    check_reverse(src, "f", [ACTIVE, ACTIVE], [1.25, 0.5], canonical=False, rtol=2e-3, h=1e-3)


def test_powi_and_int_to_float():
    # a constant exponent: MCJIT cannot resolve compiler-rt's __powidf2 for a variable one
    src = """
declare double @llvm.powi.f64.i32(double, i32)
define double @f(double %x, i32 %n) {
entry:
  %p = call double @llvm.powi.f64.i32(double %x, i32 3)
  %nf = sitofp i32 %n to double
  %r = fmul double %p, %nf
  ret double %r
}
"""
    check_reverse(src, "f", [ACTIVE, CONST], [1.3, 3], canonical=False, rtol=1e-5)


def test_atomic_reduction_in_primal():
    src = """
define void @f(ptr %x, ptr %out, i64 %i) {
entry:
  %p = getelementptr double, ptr %x, i64 %i
  %v = load double, ptr %p
  %sq = fmul double %v, %v
  %o = atomicrmw fadd ptr %out, double %sq monotonic
  ret void
}
"""
    check_reverse(src, "f", [DUP, DUP, CONST], [np.array([0.5, -1.5, 2.0]), np.zeros(1), 1])


def test_missing_rule_names_the_op():
    src = """
declare double @mystery(double)
define double @f(double %x) {
entry:
  %r = call double @mystery(double %x)
  ret double %r
}
"""
    module = import_module(src)
    with pytest.raises(DifferentiationError, match="mystery"):
        reverse(module, module["f"], [ACTIVE])


def test_derived_ir_exports_and_verifies():
    module, result = derive(BRANCHES, "f", [ACTIVE, ACTIVE], canonical=False)
    text = export_module(module)
    assert "define void @\"f.reverse\"" in text
    import llvmlite.binding as llvm
    llvm.parse_assembly(text).verify()
