"""Row launches of rank-2/3 grids (codegen/rows.py): the entry's logic run on this CPU, the launch
policy, and the PTX and launch plumbing that carry them.

The entry is built for an emulated target whose launch indices (``ctaid.x * ntid.x + tid.x``,
``ctaid.y``, ``ctaid.z``, ``nctaid.z``) and linear id are global variables, and called once per
GPU thread of a launch: every element must be written exactly once, by the thread whose tids
name it, for row launches (with surplus blocks in every direction) and linear ones alike.
"""
from __future__ import annotations

import ctypes
import itertools

import numpy as np
import pytest
from llvmlite import ir

import adoffload as ado
from adoffload.codegen import abi, rows
from adoffload.codegen.host import HostProgram
from adoffload.errors import GridError


@ado.kernel
def mark3(out: ado.InOut[ado.i64], n1: ado.i64, n2: ado.i64):
    i, j, k = ado.tid()
    out[(i * n1 + j) * n2 + k] += i * 10000 + j * 100 + k + 1


@ado.kernel
def mark2(out: ado.InOut[ado.i64], n1: ado.i64):
    i, j = ado.tid()
    out[i * n1 + j] += i * 100 + j + 1


def _global(m: ir.Module, name: str) -> ir.GlobalVariable:
    if name in m.globals:
        return m.globals[name]
    gv = ir.GlobalVariable(m, ir.IntType(64), name)
    gv.initializer = ir.Constant(ir.IntType(64), 0)
    return gv


class EmulatedEntry:
    """The GPU entry of ``kernel`` for an emulated target, JIT-compiled for this CPU."""
    NAMES = ("linear", "x", "y", "z", "nz")

    def __init__(self, monkeypatch, kernel):
        monkeypatch.setitem(abi.GPU_CALLING_CONVENTION, "emulated", "ccc")
        monkeypatch.setitem(abi._LINEAR_ID, "emulated", lambda m, b: b.load(_global(m, "emu.linear")))
        monkeypatch.setitem(rows.LAUNCH_INDICES, "emulated",
                            lambda m, b: tuple(b.load(_global(m, f"emu.{n}")) for n in self.NAMES[1:]))
        flat = [f.llvm_type for f in kernel.signature.flat_params()]
        rank = kernel.signature.grid_rank
        module = abi.add_gpu_entry(kernel.module_text(), kernel.body_name, flat, rank, "emulated", noalias=True)
        assert f"!{rows.ROW_LAUNCH_MARK} =" in module
        self.program = HostProgram(module)
        ctype = {"ptr": ctypes.c_void_p, "i64": ctypes.c_int64}
        self.entry = self.program.function(abi.kernel_entry_name(kernel.body_name), None,
                                           *[ctype[t] for t in flat], *[ctypes.c_int64] * rank, ctypes.c_void_p)
        engine = self.program._engine
        self.globals = {n: ctypes.c_int64.from_address(engine.get_global_value_address(f"emu.{n}"))
                        for n in self.NAMES}

    def _set(self, **values):
        for name, value in values.items():
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


def _expected3(g):
    i, j, k = np.meshgrid(*(np.arange(n) for n in g), indexing="ij")
    return (i * 10000 + j * 100 + k + 1).reshape(-1)


@pytest.mark.parametrize("grid", [(2, 3, 5), (3, 1, 8), (2, 2, 1)])
def test_rank3_row_launch_writes_every_element_once(monkeypatch, grid):
    entry = EmulatedEntry(monkeypatch, mark3)
    block = 4
    tight = (-(-grid[2] // block), grid[1], grid[0])
    for blocks in (tight, (tight[0] + 1, tight[1] + 1, tight[2] + 2)):     # surplus blocks return
        out = np.zeros(int(np.prod(grid)), np.int64)
        status = entry.row_launch([out.ctypes.data, out.size, grid[1], grid[2]], grid, blocks, block)
        assert status[0] == 0
        np.testing.assert_array_equal(out, _expected3(grid))


def test_rank3_linear_launch_still_decomposes(monkeypatch):
    entry = EmulatedEntry(monkeypatch, mark3)
    grid = (3, 2, 5)
    out = np.zeros(30, np.int64)
    status = entry.linear_launch([out.ctypes.data, 30, 2, 5], grid, 32)     # 2 threads past the grid
    assert status[0] == 0
    np.testing.assert_array_equal(out, _expected3(grid))


def test_rank2_row_launch(monkeypatch):
    entry = EmulatedEntry(monkeypatch, mark2)
    grid = (3, 7)
    expected = (np.arange(3)[:, None] * 100 + np.arange(7)[None, :] + 1).reshape(-1)
    for blocks in ((2, 1, 3), (3, 1, 4), (2, 2, 3)):       # y > 0 is past a rank-2 row launch
        out = np.zeros(21, np.int64)
        status = entry.row_launch([out.ctypes.data, 21, 7], grid, blocks, 4)
        assert status[0] == 0
        np.testing.assert_array_equal(out, expected)


def test_row_launch_reports_an_out_of_bounds_access(monkeypatch):
    entry = EmulatedEntry(monkeypatch, mark3)
    grid = (2, 2, 4)
    out = np.zeros(15, np.int64)               # one element short: thread (1, 1, 3) writes out[15]
    status = entry.row_launch([out.ctypes.data, 15, 2, 4], grid, (1, 2, 2), 4)
    assert list(status[:4]) == [1, 0, 15, 0]
    np.testing.assert_array_equal(out, _expected3(grid)[:15])


def test_row_blocks_policy():
    assert rows.row_blocks((102, 102, 6450), 256) == (26, 102, 102)        # basic_nested_init at 2^26
    assert rows.row_blocks((1000, 1024), 256) == (4, 1, 1000)
    assert rows.row_blocks((1, 64, 4096), 256) is None      # z == 1 would read as a linear launch
    assert rows.row_blocks((64, 4096), 256) == (16, 1, 64)
    assert rows.row_blocks((64, 3, 300), 256) is None       # 212 of 512 threads per row idle
    assert rows.row_blocks((70000, 2, 4096), 256) is None   # past the hardware's z limit
    assert rows.row_blocks((4, 70000, 4096), 256) is None
    assert rows.row_blocks((4096,), 256) is None
    assert rows.row_blocks((4, 0, 256), 256) is None          # an empty grid launches nothing


def test_gpu_launch_checks_a_callers_grid_of_blocks():
    from adoffload.runtime.gpu import _check_blocks
    assert _check_blocks((26, 102, 102), 26 * 102 * 102 * 256, 256) == (26, 102, 102)
    with pytest.raises(GridError, match="fewer than"):
        _check_blocks((26, 102, 101), 26 * 102 * 102 * 256, 256)
    with pytest.raises(GridError, match="up to 65535"):
        _check_blocks((1, 70000, 2), 10, 256)


def test_ptx_says_which_entries_take_row_launches():
    nested = mark3.compiled("nvptx", arch="sm_90", noalias=True)
    assert nested.row_launch and "%ctaid.z" in nested.ptx and "%nctaid.z" in nested.ptx

    @ado.kernel
    def flat(out: ado.Out[ado.f64]):
        i = ado.tid()
        out[i] = 1.0

    @ado.kernel
    def total2(m: ado.In[ado.f64, 2], s: ado.InOut[ado.f64]):
        i, j = ado.tid()
        ado.atomic_add(s, 0, m[i, j])

    assert not flat.compiled("nvptx", arch="sm_90").row_launch
    reduction = total2.compiled("nvptx", arch="sm_90")
    assert reduction.grid_stride and not reduction.row_launch      # it loops over linear ids
