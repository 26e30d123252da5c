"""The host (CPU) target: MCJIT-compiled machine code for the native CPU at O3."""
from __future__ import annotations

import ctypes
import ctypes.util
import functools
import re

import llvmlite.binding as llvm

from ...errors import CompilationError
from .numba_runtime import load_numba_runtime, needs_numba_runtime
from ..optimize import optimize_counting_module, optimize_module
from ..targets import host_target_machine, initialize

# libm functions LLVM may lower math intrinsics to; registered explicitly in case the
# process's own symbol table does not export them to MCJIT.
_LIBM_SYMBOLS = ("sin", "cos", "tan", "exp", "exp2", "log", "log2", "log10", "pow", "tanh", "atan2",
                 "erf", "erfc", "sinh", "cosh", "asin", "acos", "atan", "expm1", "log1p", "cbrt",
                 "fmod", "hypot", "lgamma", "tgamma")

# Device math names no libm defines, given their IEEE meaning on the host: name -> (LLVM type, body).
# ``rsqrt`` is 1/sqrt correctly rounded twice (libdevice and ocml approximate it on GPUs).
_HOST_MATH = {
    "rsqrt": ("double", "%s = call double @llvm.sqrt.f64(double %x)\n  %r = fdiv double 1.0, %s"),
    "rsqrtf": ("float", "%s = call float @llvm.sqrt.f32(float %x)\n  %r = fdiv float 1.0, %s"),
}

# a thread_local global, or one placed in a TLS section
_THREAD_LOCAL = re.compile(r'^@\S+\s*=[^"]*?\bthread_local\b|section "\.t(data|bss)\b')

# compiler-rt builtins the backend itself calls (they appear in no declaration): llvm.powi with a
# variable exponent, C complex products/quotients, i128 arithmetic and conversions, half-precision
# conversions; and the unwinder's ``_Unwind_Resume``, which a landing pad's ``resume`` becomes (rustc's
# cleanups: any Rust built with panic=unwind). Without them MCJIT jumps to address 0 (worse: once
# one symbol is unresolved it leaves the module's later relocations unapplied, so a call of malloc
# jumped to 0 too). libgcc_s provides them on Linux.
_BUILTINS = ("_Unwind_Resume", "__powidf2", "__powisf2", "__muldc3", "__mulsc3", "__divdc3", "__divsc3",
             "__multi3", "__divti3", "__modti3", "__udivti3", "__umodti3", "__floattidf", "__floattisf",
             "__floatuntidf", "__floatuntisf", "__fixdfti", "__fixsfti", "__fixunsdfti", "__fixunssfti",
             "__extendhfsf2", "__truncsfhf2", "__truncdfhf2")


@functools.cache
def _register_builtins() -> None:
    for path in (ctypes.util.find_library("gcc_s"), "libgcc_s.so.1"):
        try:
            lib = ctypes.CDLL(path) if path else None
        except OSError:
            continue
        if lib is None:
            continue
        for name in _BUILTINS:
            fn = getattr(lib, name, None)
            if fn is not None and not llvm.address_of_symbol(name):
                llvm.add_symbol(name, ctypes.cast(fn, ctypes.c_void_p).value)
        return


@functools.cache
def _register_libm() -> None:
    path = ctypes.util.find_library("m")
    if path is None:
        return
    libm = ctypes.CDLL(path)
    for base in _LIBM_SYMBOLS:
        for name in (base, base + "f"):
            if llvm.address_of_symbol(name):
                continue
            fn = getattr(libm, name, None)
            if fn is not None:
                llvm.add_symbol(name, ctypes.cast(fn, ctypes.c_void_p).value)


@functools.cache
def _load_cxx_runtime() -> bool:
    """C++ code calls operator new/delete and the Itanium ABI's ``__cxa_*`` (exceptions), which
    this Python process may not have loaded: take them from the system's C++ runtime."""
    path = ctypes.util.find_library("stdc++")
    if path is None:
        return False
    try:
        llvm.load_library_permanently(path)
    except RuntimeError:
        return False
    return True


def define_host_math(module: llvm.ModuleRef) -> list[str]:
    """Define the device math functions of ``_HOST_MATH`` the module declares (with their C
    type) and nothing loaded defines; returns their names. Linked in before the IR pipeline, so
    they inline."""
    defined = []
    for fn in module.functions:
        spec = _HOST_MATH.get(fn.name)
        if spec is None or not fn.is_declaration or llvm.address_of_symbol(fn.name):
            continue
        ty = spec[0]
        if str(fn.global_value_type) != f"{ty} ({ty})":
            continue        # some other function of that name: left to the unresolved-symbol check
        defined.append(fn.name)
    for name in defined:
        ty, body = _HOST_MATH[name]
        lib = llvm.parse_assembly(f"define linkonce_odr {ty} @{name}({ty} %x) nounwind willreturn memory(none) {{\n"
                                  f"  {body}\n  ret {ty} %r\n}}\n")
        lib.triple, lib.data_layout = module.triple, module.data_layout
        module.link_in(lib)
    return defined


def unresolved_functions(module: llvm.ModuleRef) -> list[str]:
    """Functions the module declares that neither LLVM's symbol table nor the process defines."""
    process = ctypes.CDLL(None)
    missing = []
    # (llvm.address_of_symbol also sees libraries loaded by load_library_permanently)
    for fn in module.functions:
        if not fn.is_declaration or fn.name.startswith("llvm.") or llvm.address_of_symbol(fn.name):
            continue
        try:
            process[fn.name]
        except AttributeError:
            missing.append(fn.name)
    return missing


def _unresolved_libcalls(module: llvm.ModuleRef) -> list[str]:
    """Functions the backend calls for an instruction (no declaration names them) that nothing
    defines: ``_Unwind_Resume`` for ``resume`` where libgcc_s is not loaded."""
    if llvm.address_of_symbol("_Unwind_Resume") or not any(
            inst.opcode == "resume" for fn in module.functions for block in fn.blocks for inst in block.instructions):
        return []
    try:
        ctypes.CDLL(None)["_Unwind_Resume"]
    except AttributeError:
        return ["_Unwind_Resume"]
    return []


def unresolved_globals(module: llvm.ModuleRef) -> list[str]:
    """Global variables the module declares (``external global``) that nothing defines: MCJIT would
    place them at address 0, and the first load would crash the process."""
    process = ctypes.CDLL(None)
    missing = []
    for g in module.global_variables:
        if not g.is_declaration or g.linkage == llvm.Linkage.external_weak or llvm.address_of_symbol(g.name):
            continue                  # (an extern_weak global may be absent: its address is null by design)
        try:
            process[g.name]
        except AttributeError:
            missing.append(g.name)
    return missing


def _unresolved_global_hint(names: list[str]) -> str:
    if any(n.startswith(".numba.unresolved$") for n in names):
        return (" numba links such a slot to a function compiled on its own (a recursive @njit function), "
                "whose body is not in this IR")
    return ""


class HostProgram:
    """A module JIT-compiled for this CPU. Keeps its execution engine (and code) alive."""

    def __init__(self, text: str, opt_level: int = 3, optimized: bool = False, codegen_level: int = 3,
                 guarded: tuple = (), closed_forms: bool = False):
        """``opt_level``: the IR pipeline run first (none when ``optimized``); ``codegen_level``:
        the backend's (0 selects instructions about 4x faster, for code that runs once: tests).
        ``guarded``: functions to call through failure guards (host_guard.py) when the module
        has failure paths nothing defines (a Rust crate's panics)."""
        initialize()
        _register_libm()
        _register_builtins()
        self.entry_name: str | None = None       # set by compile_for_target
        self.entry_address: int | None = None
        tm = host_target_machine(fresh=True, codegen_level=codegen_level)   # owned by the engine below
        try:
            module = llvm.parse_assembly(text)
            module.triple = tm.triple
            module.data_layout = str(tm.target_data)
            define_host_math(module)
            module.verify()
        except RuntimeError as exc:
            raise CompilationError(f"host module does not parse or verify: {exc}") from exc
        if not optimized:
            (optimize_counting_module if closed_forms else optimize_module)(module, opt_level, tm)
        thread_locals = [g.name for g in module.global_variables if _THREAD_LOCAL.search(str(g).split("\n")[0])]
        if thread_locals:   # MCJIT aborts the process on them ("allocation of TLS not implemented")
            raise CompilationError(f"the host JIT cannot run code with thread-local globals "
                                   f"({', '.join('@' + n for n in thread_locals)})")
        missing = unresolved_functions(module)
        if missing:
            from .rust_runtime import define_allocator_shims
            missing = define_allocator_shims(module, missing)
        if any(name.startswith(("_Z", "__cxa_", "__gxx_")) for name in missing) and _load_cxx_runtime():
            from .libcxx_compat import define_libcxx_gaps       # libc++'s throw paths: what libstdc++ lacks
            define_libcxx_gaps(module, set(unresolved_functions(module)) | set(unresolved_globals(module)))
            missing = unresolved_functions(module)
        if needs_numba_runtime(missing) and load_numba_runtime():
            missing = unresolved_functions(module)
        from .byval import byval_wrappers
        from .guard import guard, provide_failure_stubs, throws_cxx
        missing, has_failures = provide_failure_stubs(module, missing)
        missing += _unresolved_libcalls(module)
        throws = throws_cxx(module) and _load_cxx_runtime()
        defined = {f.name for f in module.functions if not f.is_declaration}
        self.byref = byval_wrappers(module)      # ctypes calls of structs passed by value go through these
        self.guarded = frozenset(n for n in guarded if (has_failures or throws) and n in defined)
        if self.guarded:
            guard(module, sorted(self.byref.get(n, n) for n in self.guarded), catch_cxx=throws)
        if missing:
            raise CompilationError(f"the host code calls {', '.join('@' + n for n in missing)}, which no "
                                   f"loaded library defines; refusing to run it (the call would jump to "
                                   f"address 0). Define it in the module or load a library providing it.")
        data = unresolved_globals(module)
        if data:
            raise CompilationError(f"the host code reads {', '.join('@' + n for n in data)}, which no loaded library "
                                   f"defines; refusing to run it (the read would be at address 0)."
                                   f"{_unresolved_global_hint(data)}")
        self.optimized_ir = str(module)
        self._engine = llvm.create_mcjit_compiler(module, tm)
        self._engine.finalize_object()
        self._engine.run_static_constructors()

    def address(self, name: str) -> int:
        addr = self._engine.get_function_address(name)
        if not addr:
            raise CompilationError(f"host program has no function @{name}")
        return addr

    def global_address(self, name: str) -> int:
        """The address of the global variable ``@name`` (one with external linkage)."""
        addr = self._engine.get_global_value_address(name)
        if not addr:
            raise CompilationError(f"host program has no global @{name}")
        return addr

    def function(self, name: str, restype, *argtypes):
        """A ctypes callable for ``name`` (a CFUNCTYPE, so calls release the GIL); through its
        failure guard when it has one (a failure path raises ForeignPanicError)."""
        target = getattr(self, "byref", {}).get(name, name)    # host_byval.py: byval parameters
        if name in getattr(self, "guarded", ()):
            from .guard import guarded_callable
            return guarded_callable(self.address(target + ".guarded"), name, restype, argtypes)
        return ctypes.CFUNCTYPE(restype, *argtypes)(self.address(target))

    def entry(self, name: str):
        """The ``void(ptr slots, i64 start, i64 end)`` host entry as a ctypes callable."""
        return self.function(name, None, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64)
