"""Rust code runs on the host without stand-ins: panics become ForeignPanicError (host_guard.py);
heap blocks from Rust's allocator work too:
the host JIT defines the allocator shims (codegen/host/rust_runtime.py), and the AD engine gives the
blocks shadows (enzyme/memory.py). (At opt-level 0 and 1 a growing Vec calls liballoc's RawVecInner
functions, which the .ll does not contain: ir/rust_alloc.py defines them, tests/ad/test_rust_std.py.)"""
from __future__ import annotations

import ctypes
from pathlib import Path

import llvmlite.binding as llvm
import numpy as np
import pytest

import adoffload as ado
from adoffload import enzyme as ez
from adoffload.codegen.host.rust_runtime import define_allocator_shims, shim_name

FIXTURES = Path(__file__).parents[1] / "fixtures" / "foreign" / "rust_alloc"


def closures(x, y):
    return (x * x + np.sin(x) + (x * y + x)) * y


@pytest.mark.parametrize("opt", [2, 3])
def test_boxed_closures_run_and_differentiate(opt):
    fn = ado.from_llvm((FIXTURES / f"closures_O{opt}.ll").read_text())["rs_closures"]
    x, y = 0.5, 1.5
    assert fn(x, y) == pytest.approx(closures(x, y), rel=1e-14)
    d_x, d_y = ez.autodiff(ez.Reverse, fn, ez.Active(x), ez.Active(y))
    assert d_x == pytest.approx((2 * x + np.cos(x) + y + 1) * y, rel=1e-13)
    assert d_y == pytest.approx(x * x + np.sin(x) + 2 * x * y + x, rel=1e-13)
    tangent = ez.autodiff(ez.Forward, fn, ez.Duplicated(x, 0.3), ez.Duplicated(y, -0.7))
    assert tangent == pytest.approx(0.3 * d_x - 0.7 * d_y, rel=1e-13)


def test_shims_honour_rust_alignment_and_realloc_keeps_the_contents():
    names = {"alloc": "_RNvCsfLfy6EI15iL_7___rustc12___rust_alloc",
             "realloc": "_RNvCsfLfy6EI15iL_7___rustc14___rust_realloc",
             "dealloc": "__rust_dealloc", "zeroed": "__rust_alloc_zeroed"}
    assert shim_name(names["alloc"]) == "__rust_alloc" and shim_name("_RNvCs_7___rustc9___rust_allo") is None
    text = f"""
declare ptr @"{names['alloc']}"(i64, i64)
declare ptr @"{names['realloc']}"(ptr, i64, i64, i64)
declare void @"{names['dealloc']}"(ptr, i64, i64)
declare ptr @"{names['zeroed']}"(i64, i64)
define i64 @probe(i64 %align) {{
  %p = call ptr @"{names['zeroed']}"(i64 24, i64 %align)
  %first = load i64, ptr %p
  store i64 7, ptr %p
  %q = call ptr @"{names['realloc']}"(ptr %p, i64 24, i64 %align, i64 4000)
  %kept = load i64, ptr %q
  %addr = ptrtoint ptr %q to i64
  %mis = urem i64 %addr, %align
  call void @"{names['dealloc']}"(ptr %q, i64 4000, i64 %align)
  %a = mul i64 %kept, 1000
  %b = add i64 %a, %mis
  %c = add i64 %b, %first
  ret i64 %c
}}
"""
    from adoffload.codegen.host.program import HostProgram
    program = HostProgram(text)
    probe = program.function("probe", ctypes.c_int64, ctypes.c_int64)
    for align in (8, 16, 64, 256):
        assert probe(align) == 7000, align            # zeroed, contents kept, aligned (remainder 0)
    module = llvm.parse_assembly('declare void @"other"()')
    assert define_allocator_shims(module, ["other"]) == ["other"]


def test_a_symbol_nothing_defines_is_still_a_clear_error():
    source = (FIXTURES / "closures.rs").read_text()
    assert "rustc --crate-type=cdylib" in source
    with pytest.raises(ado.CompilationError, match="no loaded library defines"):
        fn = ado.from_llvm((FIXTURES / "closures_O2.ll").read_text().replace(
            "ret double", "call void @missing_symbol()\n  ret double", 1) + "\ndeclare void @missing_symbol()\n")
        fn["rs_closures"](0.5, 1.5)


CORPUS = Path(__file__).parents[1] / "fixtures" / "foreign" / "corpus"


@pytest.mark.parametrize("opt", [0, 1, 2, 3])
def test_bounds_checked_rust_runs_and_a_panic_is_an_exception(opt):
    """rs_gather_sum indexes a slice with an index array: every access is bounds-checked and
    reaches core::panicking::panic_bounds_check when out of range. The host defines no panics;
    the guard (codegen/host/guard.py) turns one into ForeignPanicError, and the process lives on."""
    fn = ado.from_llvm((CORPUS / f"rs_O{opt}.ll").read_text())["rs_gather_sum"]
    x = np.array([0.5, 1.0, 1.5, 2.0, 2.5, 3.0])
    idx = np.array([5, 0, 3, 3], np.int64)
    assert fn(x, 6, idx, 4) == pytest.approx(3.0 + 2 * 0.5 + 3 * 2.0 + 4 * 2.0)
    dx = np.zeros(6)
    ez.autodiff(ez.Reverse, fn, ez.Duplicated(x.copy(), dx), 6, idx, 4)
    np.testing.assert_allclose(dx, [2.0, 0.0, 0.0, 7.0, 0.0, 1.0])
    bad = np.array([5, 0, 9, 3], np.int64)
    with pytest.raises(ado.ForeignPanicError, match="panic_bounds_check"):
        fn(x, 6, bad, 4)
    with pytest.raises(ado.ForeignPanicError, match="panic_bounds_check"):     # the derivative too
        ez.autodiff(ez.Reverse, fn, ez.Duplicated(x.copy(), np.zeros(6)), 6, bad, 4)
    assert fn(x, 6, idx, 4) == pytest.approx(18.0)                              # and then it runs again


def test_panics_in_threads_reach_their_own_callers():
    from concurrent.futures import ThreadPoolExecutor
    fn = ado.from_llvm((CORPUS / "rs_O2.ll").read_text())["rs_gather_sum"]
    x = np.linspace(0.5, 3.0, 6)

    def call(k):
        idx = np.array([5, 0, 3, 3 if k % 2 else 40], np.int64)
        try:
            return fn(x, 6, idx, 4)
        except ado.ForeignPanicError:
            return "panic"
    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(call, range(200)))
    assert results[0::2] == ["panic"] * 100
    assert results[1::2] == [pytest.approx(x[5] + 2 * x[0] + 7 * x[3])] * 100


UNWINDING = """
declare i32 @rust_eh_personality(i32, i32, i64, ptr, ptr)
declare ptr @"_RNvCs1_7___rustc12___rust_alloc"(i64, i64)
declare void @"_RNvCs1_7___rustc14___rust_dealloc"(ptr, i64, i64)
define i64 @probe(ptr %f) personality ptr @rust_eh_personality {
entry:
  %p = call ptr @"_RNvCs1_7___rustc12___rust_alloc"(i64 16, i64 8)
  store i64 7, ptr %p
  invoke void %f() to label %ok unwind label %lp
ok:
  %v = load i64, ptr %p
  call void @"_RNvCs1_7___rustc14___rust_dealloc"(ptr %p, i64 16, i64 8)
  ret i64 %v
lp:
  %l = landingpad { ptr, i32 } cleanup
  call void @"_RNvCs1_7___rustc14___rust_dealloc"(ptr %p, i64 16, i64 8)
  resume { ptr, i32 } %l
}
define void @nothing() {
  ret void
}
"""


def test_a_landing_pad_resume_links_and_the_allocator_still_works():
    """Rust built with panic=unwind (rustc's default): a cleanup landing pad ends in ``resume``, which
    the backend lowers to a call of ``_Unwind_Resume``, a symbol no declaration names. It used to stay
    unresolved, and MCJIT then left the program's later relocations unapplied: the allocator shim's
    call of malloc jumped to address 0 (a segfault; rustc's sort_unstable_by, a Vec<Box<dyn Fn>>)."""
    from adoffload.codegen.host.program import HostProgram
    program = HostProgram(UNWINDING)
    probe = program.function("probe", ctypes.c_int64, ctypes.c_void_p)
    assert probe(program.address("nothing")) == 7


def test_an_unresolvable_unwinder_is_a_clear_error(monkeypatch):
    """Where nothing defines ``_Unwind_Resume`` (no libgcc_s), the module is refused naming it."""
    from adoffload.codegen.host import program as host
    real = llvm.address_of_symbol
    monkeypatch.setattr(llvm, "address_of_symbol", lambda name: None if name == "_Unwind_Resume" else real(name))
    module = llvm.parse_assembly(UNWINDING)
    try:
        ctypes.CDLL(None)["_Unwind_Resume"]
        pytest.skip("this process itself defines _Unwind_Resume")
    except AttributeError:
        pass
    assert host._unresolved_libcalls(module) == ["_Unwind_Resume"]
    assert host._unresolved_libcalls(llvm.parse_assembly("define void @f() {\n  ret void\n}")) == []
    with pytest.raises(ado.CompilationError, match="_Unwind_Resume"):
        host.HostProgram(UNWINDING)
