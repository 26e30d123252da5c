"""Host stand-ins for the runtime symbols a foreign .ll declares but no loaded library defines.

A Rust crate's IR calls its allocator shim (``..___rust_alloc``), core's panics and the unwinding
personality; clang's IR calls ``__muldc3`` (compiler-rt) and, with UBSan, ``__ubsan_handle_*``.
Tests that run such functions on the host give them bodies in the imported module:

* the allocator: malloc / calloc / realloc / free;
* UBSan handlers: count their calls in ``@test.ubsan_calls`` (read with ``ubsan_calls()``);
* ``__muldc3``: the textbook complex product (equal to compiler-rt's for finite operands);
* anything else (panics, core's formatting, personality): a trap. The reference inputs never
  panic; a function that reaches a stand-in which is not a failure path is reported by
  ``unavailable`` so that its test skips instead of trapping.
"""
from __future__ import annotations

import re

import llvmlite.binding as llvm

from adoffload import ir
from adoffload.codegen.host.program import unresolved_functions
from adoffload.ir.builder import Builder
from adoffload.ir.core import Constant, Function, GlobalVariable, Module, const, i64, ptr

# Failure paths: calls that only happen when the function panics, traps or unwinds.
_FAILURE = re.compile(r"panic|unwrap_failed|expect_failed|index_fail|len_fail|order_fail|handle_error|"
                      r"handle_alloc_error|capacity_overflow|assert_failed|rust_eh_personality|__ubsan")
_ALLOCATOR = {"___rust_alloc": "malloc", "___rust_alloc_zeroed": "calloc", "___rust_realloc": "realloc",
              "___rust_dealloc": "free", "___rust_no_alloc_shim_is_unstable_v2": None}
UBSAN_COUNTER = "test.ubsan_calls"


def provide_runtime(module: Module) -> dict[str, str]:
    """Define every declared function the host cannot resolve; returns {defined function: why it
    cannot run} for the functions that reach a stand-in which is not a failure path."""
    missing = unresolved_functions(llvm.parse_assembly(ir.export_module(module)))
    counter = GlobalVariable(UBSAN_COUNTER, i64, Constant(i64, 0), linkage="internal")
    module.globals[counter.name] = counter
    reader = Builder(module.get_or_declare("ubsan_calls", ir.FunctionType(i64, ())).add_block("entry"))
    reader.ret(reader.load(i64, counter, align=8))
    opaque = set()
    for name in missing:
        fn = module.functions[name]
        allocator = next((c for suffix, c in _ALLOCATOR.items() if ("_" + name).endswith(suffix)), "")
        if allocator != "":
            _allocator(module, fn, allocator)
        elif name.startswith("__ubsan_handle_"):
            _, b = _define(fn)
            b.atomicrmw("add", counter, const(i64, 1)).align = 8
            b.ret(None if fn.return_type == ir.void else Constant(fn.return_type, None, "undef"))
        elif name == "__muldc3":
            _complex_product(fn)
        else:
            _, b = _define(fn)
            b.call_intrinsic(module, "llvm.trap", ir.void, [])
            b.emit("unreachable", ir.void, [])
            if not _FAILURE.search(name):
                opaque.add(name)
    return {f.name: f"it calls @{callee}, which the .ll does not define (the crate's library does)"
            for f in module.functions.values() if not f.is_declaration
            for callee in [_reaches(f, opaque)] if callee}


def _define(fn: Function) -> tuple[Function, Builder]:
    fn.linkage = "internal"
    return fn, Builder(fn.add_block("entry"))


def _allocator(module: Module, fn: Function, libc: str | None) -> None:
    _, b = _define(fn)
    a = fn.args
    libc_types = {"malloc": (ptr, (i64,)), "calloc": (ptr, (i64, i64)), "realloc": (ptr, (ptr, i64)),
                  "free": (ir.void, (ptr,))}
    if libc is None:
        b.ret()
        return
    result, params = libc_types[libc]
    args = {"malloc": [a[0]] if a else [], "calloc": [const(i64, 1), a[0]] if a else [],
            "realloc": [a[0], a[-1]], "free": [a[0]]}[libc]
    call = b.call_intrinsic(module, libc, result, args)
    b.ret(None if result == ir.void else call)


def _complex_product(fn: Function) -> None:
    _, b = _define(fn)
    x, y, u, v = fn.args                    # (x + iy)(u + iv)
    real = b.fsub(b.fmul(x, u), b.fmul(y, v))
    imag = b.fadd(b.fmul(x, v), b.fmul(y, u))
    pair = b.emit("insertvalue", fn.return_type, [Constant(fn.return_type, None, "undef"), real], indices=(0,))
    b.ret(b.emit("insertvalue", fn.return_type, [pair, imag], indices=(1,)))


def _reaches(fn: Function, targets: set[str]) -> str | None:
    """The first of ``targets`` that ``fn`` calls directly or through defined callees."""
    seen, todo = {fn.name}, [fn]
    while todo:
        for inst in todo.pop().instructions():
            callee = inst.callee if inst.opcode in ("call", "invoke") else None
            if not isinstance(callee, Function) or callee.name in seen:
                continue
            if callee.name in targets:
                return callee.name
            seen.add(callee.name)
            if not callee.is_declaration:
                todo.append(callee)
    return None
