"""Failure paths of foreign host code become Python exceptions, not a dead process.

A Rust crate's IR declares its panics (``core::panicking::panic_bounds_check``, ``unwrap_failed``:
``noreturn`` functions its std library defines) and the .ll does not define them. Every bounds
checked slice access reaches one, so without them no such function could run on the host. Here
each missing ``noreturn`` function (and Rust's unwinding personality) gets a stub that jumps
back, with ``longjmp``, to a wrapper around the called function (``<name>.guarded``, which set the
jump target with ``setjmp`` in a per-thread slot); the wrapper returns the stub's number and the
caller raises ``ForeignPanicError`` naming the failure function. The abandoned frames run no
destructors (Rust's panic=abort would not run them either); memory they allocated leaks.

C++ code throws instead: an exception that leaves the called function would reach the ctypes frame
and terminate the process. Where a module can throw (``throws_cxx``), the wrapper calls the function
with ``invoke`` and catches everything (``catch ptr null``), and the caller raises
``ForeignPanicError`` naming the exception's type and, for a ``std::exception``, its ``what()``.
"""
from __future__ import annotations

import ctypes
import threading

import llvmlite.binding as llvm

from ...errors import CompilationError, ForeignPanicError

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


THROWN = -1                          # a guarded wrapper's code for a C++ exception it caught
THROWN_BYTES = 256                   # %thrown: the exception's std::type_info*, then what()'s text


def throws_cxx(module: llvm.ModuleRef) -> bool:
    """Whether C++ exceptions can leave the module's functions (it has C++ landing pads or throws):
    one that reached a ctypes frame would terminate the process."""
    names = {f.name for f in module.functions}
    return bool(names & {"__gxx_personality_v0", "__cxa_throw", "__cxa_rethrow"})


def guard(module: llvm.ModuleRef, names: list[str], catch_cxx: bool = False) -> None:
    """Link ``<name>.guarded(args..., ptr %result, ptr %thrown) -> i32`` wrappers for ``names`` into
    ``module``: 0 when the function returned (its result stored at %result), else the failure's
    number + 1, or THROWN (``catch_cxx``) for a C++ exception, whose ``std::type_info*`` is stored at
    %thrown and, for a ``std::exception``, its ``what()`` text after it."""
    key = _key()
    lines = ["declare ptr @pthread_getspecific(i32)", "declare i32 @pthread_setspecific(i32, ptr)",
             "declare i32 @_setjmp(ptr) returns_twice"]
    if catch_cxx:
        lines += ["declare i32 @__gxx_personality_v0(...)", "declare ptr @__cxa_begin_catch(ptr)",
                  "declare void @__cxa_end_catch()", "declare ptr @__cxa_current_exception_type()",
                  "declare i32 @llvm.eh.typeid.for.p0(ptr)", "declare ptr @strncpy(ptr, ptr, i64)",
                  "@_ZTISt9exception = external constant ptr"]
    for name in names:
        fn = module.get_function(name)
        result, *params = [str(t) for t in fn.global_value_type.elements]
        lines.append(f'declare {result} @"{name}"({", ".join(params)})')
        args = ", ".join(f"{t} %a{k}" for k, t in enumerate(params))
        store = "" if result == "void" else f"store {result} %v, ptr %result\n  "
        value = "" if result == "void" else "%v = "
        call = (f"{value}invoke {result} @\"{name}\"({args}) to label %returned unwind label %caught"
                if catch_cxx else f"{value}call {result} @\"{name}\"({args})\n  br label %returned")
        lines.append(f"""define i32 @"{name}.guarded"({args}{", " if args else ""}ptr %result, ptr %thrown)\
{" personality ptr @__gxx_personality_v0" if catch_cxx else ""} {{
entry:
  %buf = alloca [{JMP_BUF_WORDS} x i64], align 16
  %prev = call ptr @pthread_getspecific(i32 {key})
  %set = call i32 @pthread_setspecific(i32 {key}, ptr %buf)
  %jumped = call i32 @_setjmp(ptr %buf) returns_twice
  %failed = icmp ne i32 %jumped, 0
  br i1 %failed, label %failure, label %run
run:
  {call}
returned:
  {store}%reset = call i32 @pthread_setspecific(i32 {key}, ptr %prev)
  ret i32 0
failure:
  %reset.f = call i32 @pthread_setspecific(i32 {key}, ptr %prev)
  ret i32 %jumped
{_CATCH.format(key=key, code=THROWN, room=THROWN_BYTES - 9) if catch_cxx else ""}}}""")
    wrappers = llvm.parse_assembly("\n".join(lines))
    wrappers.triple, wrappers.data_layout = module.triple, module.data_layout
    module.link_in(wrappers)


# the landing pad of a wrapper that catches C++ exceptions: the type, and what() of a std::exception
_CATCH = """caught:
  %pad = landingpad {{ ptr, i32 }} catch ptr @_ZTISt9exception catch ptr null
  %exception = extractvalue {{ ptr, i32 }} %pad, 0
  %selector = extractvalue {{ ptr, i32 }} %pad, 1
  %object = call ptr @__cxa_begin_catch(ptr %exception)
  %type = call ptr @__cxa_current_exception_type()
  store ptr %type, ptr %thrown
  %text.at = getelementptr i8, ptr %thrown, i64 8
  store i8 0, ptr %text.at
  %std = call i32 @llvm.eh.typeid.for.p0(ptr @_ZTISt9exception)
  %is.std = icmp eq i32 %selector, %std
  br i1 %is.std, label %message, label %caught.done
message:
  %vtable = load ptr, ptr %object
  %what.slot = getelementptr ptr, ptr %vtable, i64 2
  %what = load ptr, ptr %what.slot
  %text = call ptr %what(ptr %object)
  %copied = call ptr @strncpy(ptr %text.at, ptr %text, i64 {room})
  br label %caught.done
caught.done:
  call void @__cxa_end_catch()
  %reset.c = call i32 @pthread_setspecific(i32 {key}, ptr %prev)
  ret i32 {code}
"""


def guarded_callable(address: int, name: str, restype, argtypes):
    """A Python callable for ``<name>.guarded`` at ``address``: returns the function's result, or
    raises ForeignPanicError naming the failure function it reached or the C++ exception it threw."""
    raw = ctypes.CFUNCTYPE(ctypes.c_int32, *argtypes, ctypes.c_void_p, ctypes.c_void_p)(address)

    def call(*args):
        out = (restype or ctypes.c_int64)()
        thrown = ctypes.create_string_buffer(THROWN_BYTES)
        code = raw(*args, ctypes.addressof(out), ctypes.addressof(thrown))
        if code == THROWN:
            raise ForeignPanicError(f"@{name} threw the C++ exception {_thrown_text(thrown)}, which nothing in it "
                                    f"caught; its results and anything it wrote are incomplete")
        if code:
            failure = next((n for n, k in _STUBS.items() if k == code - 1), "?")
            raise ForeignPanicError(f"@{name} reached @{failure} (a failure path: a Rust panic such as an "
                                    f"index out of bounds, or an abort) and was stopped there; its results "
                                    f"and anything it wrote are incomplete")
        return out.value if restype is not None else None
    return call


def _thrown_text(thrown) -> str:
    """``<type> ("<what()>")`` of the exception a wrapper caught (the type demangled where the
    loaded C++ runtime offers ``__cxa_demangle``)."""
    info = ctypes.c_void_p.from_buffer(thrown).value
    mangled = ctypes.string_at(ctypes.c_void_p.from_address(info + 8).value) if info else b"?"
    mangled = mangled.lstrip(b"*")          # (a type local to one object file)
    kind = mangled.decode(errors="replace")
    try:
        demangle = ctypes.CDLL(None).__cxa_demangle
        demangle.restype, status = ctypes.c_void_p, ctypes.c_int()
        plain = demangle(mangled, None, None, ctypes.byref(status))     # a type's mangling demangles as is
        if plain and status.value == 0:
            kind = ctypes.string_at(plain).decode(errors="replace")
            ctypes.CDLL(None).free(ctypes.c_void_p(plain))
    except AttributeError:
        pass
    text = thrown.raw[8:].split(b"\0", 1)[0].decode(errors="replace")
    return f"{kind} ({text!r})" if text else kind
