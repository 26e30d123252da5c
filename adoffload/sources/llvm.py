"""Foreign LLVM IR (clang, rustc, numba) as differentiable, host-callable functions.

``ado.from_llvm(text)`` canonicalizes and imports a module; ``mod["lj"]`` is a
``ForeignFunction`` whose ``.ir`` the AD engine differentiates and which can be called on
the host: ``mod["lj"](1.2, 1.0, 1.0)`` JIT-compiles the module once (MCJIT, through the
host code generator) and calls through ctypes. numpy arrays stand for ``ptr`` parameters.
"""
from __future__ import annotations

import ctypes
import threading
from typing import Iterator

import numpy as np

from .. import ir
from ..ir.devirtualize import devirtualize
from ..ir.float_moves import float_moves
from ..ir.frozen_pointers import unfreeze_pointer_arguments
from ..ir.invoked_allocations import calls_for_invoked_allocations
from ..ir.indirect_calls import devirtualize_indirect_calls
from ..ir.masked_memory import scalarize_masked_memory
from ..ir.numba_arrays import separate_numba_arrays
from ..ir.pointer_phis import pointer_phis
from ..ir.rust_alloc import define_raw_vec_functions
from ..ir.posix_memalign import posix_memalign_as_aligned_alloc
from ..errors import ArgumentError, IRError

_CTYPES = {ir.f32: ctypes.c_float, ir.f64: ctypes.c_double, ir.i1: ctypes.c_bool, ir.i8: ctypes.c_int8,
           ir.i16: ctypes.c_int16, ir.i32: ctypes.c_int32, ir.i64: ctypes.c_int64}
_DTYPES = {ir.f32: np.dtype(np.float32), ir.f64: np.dtype(np.float64), ir.i8: np.dtype(np.int8),
           ir.i16: np.dtype(np.int16), ir.i32: np.dtype(np.int32), ir.i64: np.dtype(np.int64)}
_POINTER_FOLLOWERS = frozenset({"getelementptr", "phi", "select", "addrspacecast"})


def from_llvm(source: str | bytes, *, canonical: bool = True) -> "ForeignModule":
    """Import LLVM IR text or bitcode; ``canonical`` runs ``ir.canonicalize`` first, on the
    module prepared for analysis (``ir.prepare_for_analysis``: -O0's ``optnone`` dropped,
    defined functions inlined, stack slots promoted), as Enzyme differentiates optimized IR;
    calls through read-only function tables become direct calls (``ir.devirtualize``)."""
    if not canonical:
        return ForeignModule(ir.import_module(source))
    source, threads = define_raw_vec_functions(source)     # rustc -O0/-O1: Vec growth is liballoc's, declared only
    module = ir.import_module(ir.canonicalize(ir.prepare_for_analysis(source), promote_again=True, thread_jumps=threads))
    for _ in range(MAX_INLINE_ROUNDS):
        # calls that became direct after inlining (a callback passed down, a devirtualized table)
        # are inlined by one more round
        changed = devirtualize(module)
        changed = posix_memalign_as_aligned_alloc(module) or changed   # its slot promoted next round
        changed = calls_for_invoked_allocations(module) or changed     # C++ new's cleanup pads dropped next round
        changed = devirtualize_indirect_calls(module) or changed          # virtual calls, calls of chosen functions
        if not (changed or _inlinable_calls(module)):
            break
        module = ir.import_module(ir.canonicalize(ir.prepare_for_analysis(ir.export_module(module)),
                                                  promote_again=True, thread_jumps=threads))
    pointer_phis(module)        # rustc's Vec pointers rebuilt from integer phis: followed by the AD engine
    float_moves(module)         # f64s moved as i64 (slice::swap) moved as f64: the AD engine follows them
    unfreeze_pointer_arguments(module)   # numba's x[::-1]: a frozen argument is the argument
    scalarize_masked_memory(module)      # AVX masked loads/stores/gathers/scatters: one guarded access per lane
    separate_numba_arrays(module)        # numba's own arrays (np.zeros, x * x): their data a heap block of its own
    return ForeignModule(module)


MAX_INLINE_ROUNDS = 4


def from_numba(cfunc) -> "ForeignFunction":
    """The C-ABI entry of a ``numba.cfunc`` (compiled for an explicit signature), from the LLVM IR
    numba generated for it: callable on the host and differentiable like any foreign function.
    Running it needs numba's runtime, which numba (installed, since it made the IR) provides."""
    inspect, name = getattr(cfunc, "inspect_llvm", None), getattr(cfunc, "native_name", None)
    if not callable(inspect) or not isinstance(name, str) or not name.startswith("cfunc."):
        raise ArgumentError(f"from_numba takes a numba.cfunc, got {type(cfunc).__name__}: compile the function "
                            f"with @numba.cfunc('float64(float64, ...)') (an @njit function can be called "
                            f"from such a cfunc)")
    return from_llvm(inspect())[name]


def _inlinable_calls(module: ir.Module) -> bool:
    """Whether a call of a defined, non-recursive function is left (the inliner runs before the
    passes that turn a function pointer argument into a direct call)."""
    from ..ir.subset import recursive_functions
    recursive = recursive_functions(module)
    return any(isinstance(inst.callee, ir.Function) and not inst.callee.is_declaration
               and inst.callee not in recursive
               for fn in module.functions.values() for inst in fn.instructions() if inst.opcode == "call")


class ForeignModule:
    """An imported module: ``mod["name"]`` gives its functions; ``mod.ir`` is the ir.core Module."""

    def __init__(self, module: ir.Module):
        self.ir = module
        self._programs: dict = {}
        self._program_key: tuple[str, ...] = ()
        self._lock = threading.Lock()

    def __getitem__(self, name: str) -> "ForeignFunction":
        fn = self.ir.functions.get(name)
        if fn is None or fn.is_declaration:
            raise IRError(f"module has no function @{name}; it defines: {', '.join(self.names()) or 'nothing'}")
        return ForeignFunction(self, fn)

    def __contains__(self, name: str) -> bool:
        return name in self.names()

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def names(self) -> list[str]:
        return [n for n, fn in self.ir.functions.items() if not fn.is_declaration]

    def program(self, name: str | None = None):
        """The host JIT of ``name`` and what it reaches (``ir.subset``; the whole module without a
        name), rebuilt only when the module's set of functions changed (e.g. after the AD engine
        added a derivative function to ``self.ir``)."""
        with self._lock:                  # first calls from several threads compile once
            key = tuple(self.ir.functions)
            if key != self._program_key:
                self._programs, self._program_key = {}, key
            if name not in self._programs:
                from ..codegen.host.program import HostProgram  # deferred: JIT machinery loads on first call
                from ..ir.subset import reachable
                text = ir.export_module(self.ir if name is None else reachable(self.ir, [name]))
                self._programs[name] = HostProgram(text, guarded=() if name is None else (name,))
            return self._programs[name]

    def __repr__(self) -> str:
        return f"<ForeignModule {self.ir.name!r}: {', '.join(self.names())}>"


class ForeignFunction:
    """One function of a ForeignModule: ``.ir`` for AD, callable on the host."""

    def __init__(self, module: ForeignModule, fn: ir.Function):
        self.module, self.ir, self.name = module, fn, fn.name
        self._elements: dict[int, ir.Type | None] = {}     # argument index -> the type accessed through it

    def __repr__(self) -> str:
        return f"<ForeignFunction @{self.name}: {self.ir.function_type}>"

    def __call__(self, *args):
        params = self.ir.args
        if len(args) != len(params):
            names = ", ".join(a.name for a in params)
            raise ArgumentError(f"@{self.name}({names}) takes {len(params)} arguments, got {len(args)}")
        converted = [self._convert(k, value) for k, value in enumerate(args)]
        restype = self._ctype(self.ir.return_type, "the return value")
        argtypes = [ctypes.c_void_p if a.type.is_pointer else self._ctype(a.type, f"argument '{a.name}'")
                    for a in params]
        fn = self.module.program(self.name).function(self.name, restype, *argtypes)
        result = fn(*converted)
        return _DTYPES[self.ir.return_type].type(result) if self.ir.return_type in _DTYPES else result

    def _ctype(self, t: ir.Type, what: str):
        if t == ir.void:
            return None
        if t.is_pointer:            # an address comes back as an int (None for null): numba's void cfuncs
            return ctypes.c_void_p
        if t not in _CTYPES:
            raise ArgumentError(f"@{self.name} cannot be called from the host: {what} has type {t}")
        return _CTYPES[t]

    def _convert(self, k: int, value):
        arg = self.ir.args[k]
        label = f"argument {k} ('{arg.name}') of @{self.name}"
        t = arg.type
        if t.is_pointer:
            return self._pointer(arg, value, label)
        if t.is_float:
            if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer, np.floating)):
                raise ArgumentError(f"{label} is {t}; got {type(value).__name__} {value!r}")
            return float(value)
        if isinstance(t, ir.IntType):
            if not isinstance(value, (int, np.integer, bool, np.bool_)):
                raise ArgumentError(f"{label} is {t}; got {type(value).__name__} {value!r} (an integer is needed)")
            value = int(value)
            if not -(1 << (t.bits - 1)) <= value < (1 << t.bits) and t.bits > 1:
                raise ArgumentError(f"{label} is {t}; {value} does not fit")
            return value
        raise ArgumentError(f"{label} has type {t}, which host calls do not support")

    def _pointer(self, arg: ir.Argument, value, label: str):
        if value is None:
            return None
        if not isinstance(value, np.ndarray):
            raise ArgumentError(f"{label} is a pointer; pass a numpy array, got {type(value).__name__}")
        if not value.flags.c_contiguous:
            raise ArgumentError(f"{label} must be C-contiguous (use np.ascontiguousarray)")
        if arg.index not in self._elements:     # a walk of the whole body: once per argument, not per call
            self._elements[arg.index] = accessed_element_type(self.ir, arg)
        element = self._elements[arg.index]
        if element in _DTYPES and value.dtype != _DTYPES[element]:
            raise ArgumentError(f"{label} must have dtype {_DTYPES[element]} (@{self.name} accesses {element} "
                                f"through it), got {value.dtype}")
        return value.ctypes.data


def accessed_element_type(fn: ir.Function, pointer: ir.Value) -> ir.Type | None:
    """The one scalar type loaded or stored through ``pointer`` (following GEPs, phis and
    selects; a vector access counts as its element type), or None when it cannot be decided (no access, several types, passed to a call)."""
    users = fn.users()
    seen, todo, found = {id(pointer)}, [pointer], set()
    while todo:
        value = todo.pop()
        for inst in users.get(value, []):
            if inst.opcode == "load":
                found.add(inst.type)
            elif inst.opcode == "store" and inst.operands[1] is value:
                found.add(inst.operands[0].type)
            elif inst.opcode in ("atomicrmw", "cmpxchg") and inst.operands[0] is value:
                found.add(inst.operands[-1].type)
            elif inst.opcode == "call":
                return None
            elif inst.opcode in _POINTER_FOLLOWERS and inst.type.is_pointer and id(inst) not in seen:
                seen.add(id(inst))
                todo.append(inst)
    found = {t.element if isinstance(t, ir.VectorType) else t for t in found}   # vectorized loops: their lanes
    return found.pop() if len(found) == 1 else None
