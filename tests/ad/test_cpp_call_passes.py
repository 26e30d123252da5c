"""The C++ call rewrites of from_llvm on small IR: ``invoke`` of operator new with a cleanup pad
(ir/invoked_allocations.py) and virtual calls / calls of chosen functions (ir/indirect_calls.py).
Each positive case is also differentiated; what the rewrites must not touch is left as it was."""
from __future__ import annotations

import numpy as np
import pytest

import adoffload as ado
from adoffload import enzyme as ez
from adoffload.ir import Function
from adoffload.ir.indirect_calls import UNKNOWN_TARGET

# two heap blocks; the second is allocated by invoke (the first is freed on its unwind path)
TWO_BLOCKS = """
@sink = global i64 0
declare ptr @_Znwm(i64)
declare void @_ZdlPv(ptr)
declare i32 @__gxx_personality_v0(...)
define double @f(ptr %x) personality ptr @__gxx_personality_v0 {
entry:
  %a = call ptr @_Znwm(i64 8)
  %v = load double, ptr %x
  %sq = fmul double %v, %v
  store double %sq, ptr %a
  %b = invoke ptr @_Znwm(i64 8) to label %ok unwind label %lp
ok:
  %w = load double, ptr %a
  %c = fmul double %w, %v
  store double %c, ptr %b
  %r = load double, ptr %b
  %address = ptrtoint ptr %b to i64
  store volatile i64 %address, ptr @sink     ; (LLVM would otherwise drop the new/delete pairs)
  call void @_ZdlPv(ptr %b)
  call void @_ZdlPv(ptr %a)
  ret double %r
lp:
  %e = landingpad { ptr, i32 } CLAUSE
  call void @_ZdlPv(ptr %a)
  HANDLER
}
"""


def test_an_invoked_allocation_with_a_cleanup_pad_is_differentiated():
    fn = ado.from_llvm(TWO_BLOCKS.replace("CLAUSE", "cleanup").replace("HANDLER", "resume { ptr, i32 } %e"))["f"]
    calls = [i for i in fn.ir.instructions() if i.opcode in ("call", "invoke") and i.callee.name == "_Znwm"]
    assert [i.opcode for i in calls] == ["call", "call"]
    x, dx = np.array([1.5]), np.zeros(1)
    assert fn(x) == pytest.approx(1.5 ** 3)
    ez.autodiff(ez.Reverse, fn, ez.Duplicated(x, dx))
    assert dx[0] == pytest.approx(3 * 1.5 ** 2)


def test_an_invoked_allocation_the_function_catches_keeps_its_invoke():
    """A catch clause means the function handles std::bad_alloc itself: the invoke stays."""
    handler = """%x.caught = call ptr @__cxa_begin_catch(ptr null)
  call void @__cxa_end_catch()
  ret double -1.0"""
    text = TWO_BLOCKS.replace("CLAUSE", "catch ptr null").replace("HANDLER", handler)
    text = "declare ptr @__cxa_begin_catch(ptr)\ndeclare void @__cxa_end_catch()\n" + text
    fn = ado.from_llvm(text)["f"]
    assert any(i.opcode == "invoke" and i.callee.name == "_Znwm" for i in fn.ir.instructions())


VIRTUAL = """
@vt.a = constant { [3 x ptr] } { [3 x ptr] [ptr null, ptr null, ptr @square] }
@vt.b = constant { [3 x ptr] } { [3 x ptr] [ptr null, ptr null, ptr @cube] }
declare void @register(ptr)
define internal double @square(ptr %this, double %x) {
  %r = fmul double %x, %x
  ret double %r
}
define internal double @cube(ptr %this, double %x) {
  %s = fmul double %x, %x
  %r = fmul double %s, %x
  ret double %r
}
define double @f(i32 %which, double %x, ptr %other) {
entry:
  %obj = alloca ptr
  %pick = icmp eq i32 %which, 0
  br i1 %pick, label %a, label %b
a:
  store ptr getelementptr (i8, ptr @vt.a, i64 16), ptr %obj
  br label %call
b:
  store ptr STORED_B, ptr %obj
  br label %call
call:
  call void @register(ptr %obj)       ; (LLVM then cannot forward the stored vtable to the load)
  %vptr = load ptr, ptr %obj
  %fp = load ptr, ptr %vptr
  %r = call double %fp(ptr %obj, double %x)
  ret double %r
}
"""


def _called(fn) -> set:
    return {i.callee.name if isinstance(i.callee, Function) else "<indirect>"
            for i in fn.ir.instructions() if i.opcode == "call"}


def test_a_virtual_call_on_an_object_the_function_builds_is_dispatched():
    """Both vtables stored into the object are candidates; no match calls the failure function."""
    fn = ado.from_llvm(VIRTUAL.replace("STORED_B", "getelementptr (i8, ptr @vt.b, i64 16)"))["f"]
    assert UNKNOWN_TARGET in _called(fn) and "<indirect>" not in _called(fn)
    assert not {"square", "cube"} & _called(fn)                             # both inlined
    assert sum(i.opcode == "fmul" for i in fn.ir.instructions()) == 2       # x*x (shared), then *x for cube


def test_a_virtual_call_on_an_object_holding_another_pointer_stays_indirect():
    """A pointer that is not a constant vtable address stored into the object: nothing is known."""
    fn = ado.from_llvm(VIRTUAL.replace("STORED_B", "%other"))["f"]
    assert "<indirect>" in _called(fn) and UNKNOWN_TARGET not in _called(fn)


def test_a_call_through_a_choice_of_functions_is_dispatched():
    text = """
define internal double @square(double %x) {
  %r = fmul double %x, %x
  ret double %r
}
define internal double @twice(double %x) {
  %r = fadd double %x, %x
  ret double %r
}
define double @f(i32 %which, double %x) {
  %pick = icmp eq i32 %which, 0
  %fp = select i1 %pick, ptr @square, ptr @twice
  %r = call double %fp(double %x)
  ret double %r
}
"""
    fn = ado.from_llvm(text)["f"]
    for which, expected in ((0, 2 * 0.7), (1, 2.0)):
        assert ez.autodiff(ez.Reverse, fn, which, ez.Active(0.7))[1] == pytest.approx(expected)


@pytest.mark.parametrize("kind", ["x86_fp80", "fp128"])
def test_a_wide_float_constant_the_engine_makes_is_spelled_in_hex(kind):
    """The engine's constants of a long double (its zero tangent, 1.0) are Python floats; LLVM reads
    only hex literals for x86_fp80/fp128: the export spells them so, and they convert back exactly."""
    import ctypes

    from adoffload.codegen.host.program import HostProgram
    from adoffload.ir.llvm_export import wide_float_literal
    for value in (0.0, -0.0, 1.0, -2.5, 0.1, 1e-310, 3e300, float("inf")):
        text = f"define double @f() {{\n  %r = fptrunc {kind} {wide_float_literal(kind, value)} to double\n  ret double %r\n}}"
        program = HostProgram(text, opt_level=0)        # (its code lives as long as the program)
        got = program.function("f", ctypes.c_double)()
        assert got == value and np.signbit(got) == np.signbit(value)
