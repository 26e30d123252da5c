"""Calling IR functions on the host: export a module, JIT-compile it (MCJIT), call through ctypes.

Used by the Enzyme-style API (``autodiff``) and by the tests. Pointer arguments take numpy
arrays (or raw addresses); scalars take Python numbers.
"""
from __future__ import annotations

import ctypes

import numpy as np

from ..codegen.host.program import HostProgram
from ..errors import ArgumentError
from ..ir.builder import Builder
from ..ir.core import FloatType, Function, IntType, Module, PointerType, Type, VoidType
from ..ir.llvm_export import export_module
from ..ir.subset import reachable

_FLOAT_CTYPES = {"float": ctypes.c_float, "double": ctypes.c_double}
_INT_CTYPES = {1: ctypes.c_bool, 8: ctypes.c_int8, 16: ctypes.c_int16, 32: ctypes.c_int32, 64: ctypes.c_int64}


def ctype_of(t: Type):
    if isinstance(t, VoidType):
        return None
    if isinstance(t, FloatType) and t.kind in _FLOAT_CTYPES:
        return _FLOAT_CTYPES[t.kind]
    if isinstance(t, IntType) and t.bits in _INT_CTYPES:
        return _INT_CTYPES[t.bits]
    if isinstance(t, PointerType):
        return ctypes.c_void_p
    raise ArgumentError(f"cannot call a function taking or returning {t} from Python")


class HostFunction:
    """A JIT-compiled IR function callable with numpy arrays and Python scalars."""

    scratch = True      # a counting function: whether it may write the arrays (api._tape copies them)

    def __init__(self, program: HostProgram, fn: Function):
        self.program, self.fn = program, fn
        self.tapes: list[np.ndarray] = []     # a counting function: tapes kept for its derivative (api._tape)
        self.arg_types = [a.type for a in fn.args]
        self._call = program.function(fn.name, ctype_of(fn.return_type), *map(ctype_of, self.arg_types))

    def __call__(self, *args):
        if len(args) != len(self.arg_types):
            raise ArgumentError(f"@{self.fn.name} takes {len(self.arg_types)} arguments, got {len(args)}")
        converted, keep = [], []
        for k, (value, t) in enumerate(zip(args, self.arg_types)):
            if isinstance(t, PointerType):
                if isinstance(value, np.ndarray):
                    if not value.flags.c_contiguous:
                        raise ArgumentError(f"argument {k} of @{self.fn.name} must be a C-contiguous array")
                    keep.append(value)
                    converted.append(value.ctypes.data)
                elif isinstance(value, int) or value is None:
                    converted.append(value)
                else:
                    raise ArgumentError(f"argument {k} of @{self.fn.name} is a pointer: pass a numpy array, "
                                        f"got {type(value).__name__}")
            else:
                converted.append(value)
        return self._call(*converted)


UNIFORM_ADD_PREFIX = "adoffload.uniform_fadd."


def define_uniform_adds(module: Module) -> None:
    """Give declared ``@adoffload.uniform_fadd.*`` (thread-uniform adjoint adds, see analysis/address_classes.py)
    a host body: one atomic add. GPU targets lower them with warp reductions instead."""
    for fn in list(module.functions.values()):
        if fn.name.startswith(UNIFORM_ADD_PREFIX) and fn.is_declaration:
            b = Builder(fn.add_block("entry"))
            b.atomicrmw("fadd", fn.args[0], fn.args[1])
            b.ret()
            fn.linkage = "internal"


def compile_host(module: Module, names: list[str] | None = None, opt_level: int = 2,
                 codegen_level: int = 3, closed_forms: bool = False) -> dict[str, HostFunction]:
    """JIT-compile ``module`` for this CPU; callables for ``names`` (default: every defined function
    the module exports; internal helpers such as the engine's digamma may be inlined away).
    ``opt_level``/``codegen_level``: the IR pipeline's and the backend's levels (see HostProgram);
    ``closed_forms``: the counting functions' pipeline (codegen/optimize.optimize_counting_module)."""
    define_uniform_adds(module)
    # only what ``names`` reach is compiled: big foreign modules stay cheap, unrelated gaps harmless
    exported = [f.name for f in module.functions.values()
                if not f.is_declaration and f.linkage not in ("internal", "private")]
    program = HostProgram(export_module(reachable(module, names) if names is not None else module),
                          opt_level=opt_level, codegen_level=codegen_level, closed_forms=closed_forms,
                          guarded=tuple(names if names is not None else exported))
    names = names if names is not None else exported
    return {name: HostFunction(program, module.functions[name]) for name in names}
