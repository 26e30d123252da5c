"""A GPU entry built for an emulated target and run on this CPU, one call per GPU thread.

The target's launch indices (``ctaid.x * ntid.x + tid.x``, ``ctaid.y``, ``ctaid.z``,
``nctaid.z``: codegen/gpu/rows.py) and linear id are global variables the test sets before each
call, so an entry's thread mapping and checks run exactly as built, launch shape by launch shape.
"""
from __future__ import annotations

import ctypes
import itertools

import numpy as np
from llvmlite import ir

from adoffload.codegen import abi
from adoffload.codegen.gpu import rows as rows_module
from adoffload.codegen.host.program import HostProgram


def _global(m: ir.Module, name: str) -> ir.GlobalVariable:
    if name in m.globals:
        return m.globals[name]
    gv = ir.GlobalVariable(m, ir.IntType(64), name)
    gv.initializer = ir.Constant(ir.IntType(64), 0)
    return gv


class EmulatedEntry:
    """The GPU entry of ``kernel`` for an emulated target, JIT-compiled for this CPU."""
    NAMES = ("linear", "x", "y", "z", "nz")

    def __init__(self, monkeypatch, kernel, rows: bool = False):
        monkeypatch.setitem(abi.GPU_CALLING_CONVENTION, "emulated", "ccc")
        monkeypatch.setitem(abi._LINEAR_ID, "emulated", lambda m, b: b.load(_global(m, "emu.linear")))
        monkeypatch.setitem(rows_module.LAUNCH_INDICES, "emulated",
                            lambda m, b: tuple(b.load(_global(m, f"emu.{n}")) for n in self.NAMES[1:]))
        flat = [f.llvm_type for f in kernel.signature.flat_params()]
        rank = kernel.signature.grid_rank
        module = abi.add_gpu_entry(kernel.module_text(), kernel.body_name, flat, rank, "emulated", noalias=True)
        assert (f"!{rows_module.ROW_LAUNCH_MARK} =" in module) == rows
        self.module = module
        self.program = HostProgram(module)
        ctype = {"ptr": ctypes.c_void_p, "i64": ctypes.c_int64, "double": ctypes.c_double}
        self.entry = self.program.function(abi.kernel_entry_name(kernel.body_name), None,
                                           *[ctype[t] for t in flat], *[ctypes.c_int64] * rank, ctypes.c_void_p)
        engine = self.program._engine
        addresses = {n: engine.get_global_value_address(f"emu.{n}") for n in self.NAMES}
        self.globals = {n: ctypes.c_int64.from_address(a) for n, a in addresses.items() if a}  # used ones

    def _set(self, **values):
        for name, value in values.items():
            if name in self.globals:
                self.globals[name].value = value

    def row_launch(self, args: list, grid: tuple, blocks: tuple, block: int) -> np.ndarray:
        status = np.zeros(4, np.int64)
        bx, by, bz = blocks
        for z, y, x in itertools.product(range(bz), range(by), range(bx * block)):
            self._set(x=x, y=y, z=z, nz=bz, linear=-1)        # the linear id must not be used
            self.entry(*args, *grid, status.ctypes.data)
        return status

    def linear_launch(self, args: list, grid: tuple, threads: int) -> np.ndarray:
        status = np.zeros(4, np.int64)
        for linear in range(threads):
            self._set(linear=linear, x=-1, y=-1, z=-1, nz=1)  # nctaid.z == 1: a linear launch
            self.entry(*args, *grid, status.ctypes.data)
        return status
