"""Found with the Rust corpus of tests/ad/test_foreign_rust_hunt.py (``hr_byval3``): a struct
passed by value across the C ABI (rustc: ``extern "C" fn f(p: V3, k: f64)``, a 24-byte struct,
``ptr byval([24 x i8])``) read garbage when called from Python, and so did its derivatives:
ctypes passed the array's address in a register, the function read the struct from the stack.
The result was silently wrong (about 1e-310), the reverse gradient silently zero.
Fixed: the host program calls such functions through a wrapper taking plain pointers, whose call
passes them ``byval`` (codegen/host/byval.py), so LLVM makes the copy as a C caller would.
"""
from __future__ import annotations

import numpy as np
import pytest

import adoffload as ado
from adoffload import enzyme as ez
from adoffload.errors import ForeignPanicError

SOURCE = """
declare void @panic_bounds() noreturn

define double @energy(ptr byval([24 x i8]) align 8 %p, double %k) {
entry:
  %x = load double, ptr %p
  %yp = getelementptr i8, ptr %p, i64 8
  %y = load double, ptr %yp
  %zp = getelementptr i8, ptr %p, i64 16
  %z = load double, ptr %zp
  store double 0.0, ptr %p                 ; the function's own copy: the caller's struct is unchanged
  %xy = fmul double %x, %y
  %kxy = fmul double %k, %xy
  %zz = fmul double %z, %z
  %r = fadd double %kxy, %zz
  ret double %r
}

define double @component(ptr byval([24 x i8]) align 8 %p, i64 %i) {
entry:
  %inside = icmp ult i64 %i, 3
  br i1 %inside, label %read, label %fail
read:
  %ep = getelementptr double, ptr %p, i64 %i
  %e = load double, ptr %ep
  %r = fmul double %e, %e
  ret double %r
fail:
  call void @panic_bounds()
  unreachable
}
"""


def test_the_struct_is_read_and_the_callers_copy_kept():
    module = ado.from_llvm(SOURCE)
    p = np.array([0.5, 2.0, 3.0])
    assert module["energy"](p, 1.7) == pytest.approx(1.7 * 0.5 * 2.0 + 9.0)
    np.testing.assert_array_equal(p, [0.5, 2.0, 3.0])


def test_guarded_calls_with_a_struct_by_value():
    """A module with failure paths calls through host_guard's wrapper, which wraps the byval one."""
    fn = ado.from_llvm(SOURCE)["component"]
    assert fn(np.array([0.5, 2.0, 3.0]), 1) == 4.0
    with pytest.raises(ForeignPanicError, match="panic_bounds"):
        fn(np.array([0.5, 2.0, 3.0]), 3)


def test_derivatives_of_a_struct_by_value():
    fn = ado.from_llvm(SOURCE)["energy"]
    p, k = np.array([0.5, 2.0, 3.0]), 1.7
    expected = np.array([k * p[1], k * p[0], 2 * p[2]])
    grad = np.zeros(3)
    _, dk = ez.autodiff(ez.Reverse, fn, ez.Duplicated(p.copy(), grad), ez.Active(k))
    np.testing.assert_allclose(grad, expected, rtol=1e-15)
    assert dk == pytest.approx(p[0] * p[1], rel=1e-15)
    v = np.array([0.3, -1.1, 0.7])
    tangent = ez.autodiff(ez.Forward, fn, ez.Duplicated(p.copy(), v.copy()), ez.Duplicated(k, 0.0))
    assert tangent == pytest.approx(float(expected @ v), rel=1e-14)


def test_an_internal_function_with_a_struct_by_value_needs_no_wrapper():
    """Only exported functions get wrappers: a declaration cannot be linked to a local definition."""
    text = """
define internal double @first(ptr byval([16 x i8]) align 8 %p) {
  %x = load double, ptr %p
  ret double %x
}
define double @g(ptr %q) {
  %r = call double @first(ptr byval([16 x i8]) align 8 %q)
  ret double %r
}
"""
    import ctypes

    from adoffload.codegen.host.program import HostProgram
    program = HostProgram(text, opt_level=0)          # unoptimized: @first stays a function of its own
    assert program.byref == {}
    x = np.array([2.5, 1.0])
    assert program.function("g", ctypes.c_double, ctypes.c_void_p)(x.ctypes.data) == 2.5
