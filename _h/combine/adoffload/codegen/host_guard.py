"""Failure paths of foreign host code become Python exceptions, not a dead process.

A Rust crate's IR declares its panics (``core::panicking::panic_bounds_check``, ``unwrap_failed``:
``noreturn`` functions its std library defines) and the .ll does not define them. Every bounds
checked slice access reaches one, so without them no such function could run on the host. Here
each missing ``noreturn`` function (and Rust's unwinding personality) gets a stub that jumps
back, with ``longjmp``, to a wrapper around the called function (``<name>.guarded``, which set the
jump target with ``setjmp`` in a per-thread slot); the wrapper returns the stub's number and the
caller raises ``ForeignPanicError`` naming the failure function. The abandoned frames run no
destructors (Rust's panic=abort would not run them either); memory they allocated leaks.
"""
from __future__ import annotations

import ctypes
import threading

import llvmlite.binding as llvm

from ..errors import CompilationError, ForeignPanicError

_LOCK = threading.Lock()
_STUBS: dict[str, int] = {}          # failure function -> its number (the longjmp value is number + 1)
_ENGINES: list = []                  # the stubs' code stays alive for the process
_KEY: list[int] = []                 # the pthread key of the per-thread jump target
PERSONALITIES = ("rust_eh_personality",)
JMP_BUF_WORDS = 64                   # glibc's jmp_buf is 25 words on x86-64, 39 on aarch64


def _key() -> int:
    if not _KEY:
        key = ctypes.c_uint()
        if ctypes.CDLL(None).pthread_key_create(ctypes.byref(key), None) != 0:
            raise CompilationError("could not create the thread key of guarded host calls (pthread_key_create)")
        _KEY.append(key.value)
    return _KEY[0]


def is_failure_path(fn) -> bool:
    """A declared function that never returns (or a personality, called only while unwinding)."""
    words = b" ".join(fn.attributes).split()
    return b"noreturn" in words or fn.name in PERSONALITIES


def provide_failure_stubs(module: llvm.ModuleRef, missing: list[str]) -> tuple[list[str], bool]:
    """Give each missing failure function of ``module`` a stub's address; returns the names still
    missing and whether any stub serves this module (its entry points must then be guarded)."""
    failing = [name for name in missing if is_failure_path(module.get_function(name))]
    with _LOCK:
        new = [name for name in failing if name not in _STUBS]
        if new:
            _compile_stubs(new, len(_STUBS))
        stubbed = any(fn.is_declaration and fn.name in _STUBS for fn in module.functions)  # earlier modules' too
    return [name for name in missing if name not in failing], stubbed


def _compile_stubs(names: list[str], first: int) -> None:
    key = _key()
    lines = ["declare ptr @pthread_getspecific(i32)", "declare void @longjmp(ptr, i32) noreturn",
             "declare void @abort() noreturn"]
    for k, _ in enumerate(names, start=first):
        lines.append(f"""define void @"adoffload.failure.{k}"() noreturn {{
entry:
  %buf = call ptr @pthread_getspecific(i32 {key})
  %none = icmp eq ptr %buf, null
  br i1 %none, label %unguarded, label %jump
jump:
  call void @longjmp(ptr %buf, i32 {k + 1})
  unreachable
unguarded:
  call void @abort()
  unreachable
}}""")
    stubs = llvm.parse_assembly("\n".join(lines))
    target = llvm.Target.from_default_triple().create_target_machine()
    engine = llvm.create_mcjit_compiler(stubs, target)
    engine.finalize_object()
    _ENGINES.append(engine)
    for k, name in enumerate(names, start=first):
        llvm.add_symbol(name, engine.get_function_address(f"adoffload.failure.{k}"))
        _STUBS[name] = k


def guard(module: llvm.ModuleRef, names: list[str]) -> None:
    """Link ``<name>.guarded(args..., ptr %result) -> i32`` wrappers for ``names`` into ``module``:
    0 when the function returned (its result stored at %result), else the failure's number + 1."""
    key = _key()
    lines = ["declare ptr @pthread_getspecific(i32)", "declare i32 @pthread_setspecific(i32, ptr)",
             "declare i32 @_setjmp(ptr) returns_twice"]
    for name in names:
        fn = module.get_function(name)
        result, *params = [str(t) for t in fn.global_value_type.elements]
        lines.append(f'declare {result} @"{name}"({", ".join(params)})')
        args = ", ".join(f"{t} %a{k}" for k, t in enumerate(params))
        store = "" if result == "void" else f"store {result} %v, ptr %result\n  "
        value = "" if result == "void" else "%v = "
        lines.append(f"""define i32 @"{name}.guarded"({args}{", " if args else ""}ptr %result) {{
entry:
  %buf = alloca [{JMP_BUF_WORDS} x i64], align 16
  %prev = call ptr @pthread_getspecific(i32 {key})
  %set = call i32 @pthread_setspecific(i32 {key}, ptr %buf)
  %jumped = call i32 @_setjmp(ptr %buf) returns_twice
  %failed = icmp ne i32 %jumped, 0
  br i1 %failed, label %failure, label %run
run:
  {value}call {result} @"{name}"({args})
  {store}%reset = call i32 @pthread_setspecific(i32 {key}, ptr %prev)
  ret i32 0
failure:
  %reset.f = call i32 @pthread_setspecific(i32 {key}, ptr %prev)
  ret i32 %jumped
}}""")
    wrappers = llvm.parse_assembly("\n".join(lines))
    wrappers.triple, wrappers.data_layout = module.triple, module.data_layout
    module.link_in(wrappers)


def guarded_callable(address: int, name: str, restype, argtypes):
    """A Python callable for ``<name>.guarded`` at ``address``: returns the function's result, or
    raises ForeignPanicError naming the failure function it reached."""
    raw = ctypes.CFUNCTYPE(ctypes.c_int32, *argtypes, ctypes.c_void_p)(address)

    def call(*args):
        out = (restype or ctypes.c_int64)()
        code = raw(*args, ctypes.addressof(out))
        if code:
            failure = next((n for n, k in _STUBS.items() if k == code - 1), "?")
            raise ForeignPanicError(f"@{name} reached @{failure} (a failure path: a Rust panic such as an "
                                    f"index out of bounds, or an abort) and was stopped there; its results "
                                    f"and anything it wrote are incomplete")
        return out.value if restype is not None else None
    return call
