"""Run a compiled kernel body on the host for testing: parse, O2, MCJIT, loop tids in Python.

This checks the front end's semantics without the runtime (built elsewhere): the body is
called directly through ctypes, one call per thread index, with numpy arrays passed as data
pointer + shapes and a 4-word int64 status record.
"""
from __future__ import annotations

import ctypes
import itertools

import llvmlite.binding as llvm
import numpy as np

from adoffload.codegen.host.program import define_host_math
from adoffload.frontend import compile_kernel

llvm.initialize_native_target()
llvm.initialize_native_asmprinter()

CTYPES = {"float": ctypes.c_float, "double": ctypes.c_double, "i32": ctypes.c_int32,
          "i64": ctypes.c_int64, "i1": ctypes.c_bool, "ptr": ctypes.c_void_p}
_KEEP_ALIVE = []     # execution engines must outlive the functions taken from them


def jit_body(llvm_ir: str, name: str, arg_types: list[str], optimize: bool = True):
    module = llvm.parse_assembly(llvm_ir)
    define_host_math(module)        # rsqrt: no libm defines it
    module.verify()
    target_machine = llvm.Target.from_default_triple().create_target_machine()
    if optimize:
        options = llvm.create_pipeline_tuning_options(2)
        builder = llvm.create_pass_builder(target_machine, options)
        builder.getModulePassManager().run(module, builder)
    engine = llvm.create_mcjit_compiler(module, target_machine)
    engine.finalize_object()
    _KEEP_ALIVE.append(engine)
    prototype = ctypes.CFUNCTYPE(None, *[CTYPES[t] for t in arg_types])
    return prototype(engine.get_function_address(name))


class HostKernel:
    """A compiled kernel callable as ``k(*args, grid=n | (n, m) | (n, m, l))``."""

    def __init__(self, pyfunc, **options):
        self.source = compile_kernel(pyfunc, **options)
        self.signature = self.source.signature
        self.body = jit_body(self.source.llvm_ir, self.signature.name,
                             self.signature.body_arg_types())
        self.status = np.zeros(4, dtype=np.int64)

    def flat_arguments(self, args) -> list:
        flat = []
        for param, value in zip(self.signature.params, args, strict=True):
            if param.is_array:
                assert isinstance(value, np.ndarray) and value.flags.c_contiguous
                assert value.dtype == param.type.dtype.dtype and value.ndim == param.type.ndim
                flat.append(value.ctypes.data)
                flat.extend(value.shape)
            else:
                flat.append(param.type.dtype.type(value).item())
        return flat

    def __call__(self, *args, grid, reset_status: bool = True):
        if reset_status:
            self.status[:] = 0
        flat = self.flat_arguments(args)
        status = self.status.ctypes.data
        grid = (grid,) if isinstance(grid, int) else tuple(grid)
        assert len(grid) == self.signature.grid_rank
        for tids in itertools.product(*(range(n) for n in grid)):
            self.body(*tids, *flat, status)
        return self.status


def run(pyfunc, *args, grid, **options):
    """Compile and run once; returns the status record."""
    return HostKernel(pyfunc, **options)(*args, grid=grid)
