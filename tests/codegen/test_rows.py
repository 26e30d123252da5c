"""Row launches of rank-2/3 grids (codegen/gpu/rows.py): the entry's logic run on this CPU, the launch
policy, and the PTX and launch plumbing that carry them.

The entry is built for an emulated target whose launch indices (``ctaid.x * ntid.x + tid.x``,
``ctaid.y``, ``ctaid.z``, ``nctaid.z``) and linear id are global variables, and called once per
GPU thread of a launch: every element must be written exactly once, by the thread whose tids
name it, for row launches (with surplus blocks in every direction) and linear ones alike.
"""
from __future__ import annotations

import numpy as np
import pytest

import adoffload as ado
from adoffload.codegen.gpu import rows
from adoffload.errors import GridError

from .emulated import EmulatedEntry


@ado.kernel
def mark3(out: ado.InOut[ado.i64], n1: ado.i64, n2: ado.i64):
    i, j, k = ado.tid()
    out[(i * n1 + j) * n2 + k] += i * 10000 + j * 100 + k + 1


@ado.kernel
def mark2(out: ado.InOut[ado.i64], n1: ado.i64):
    i, j = ado.tid()
    out[i * n1 + j] += i * 100 + j + 1


def _expected3(g):
    i, j, k = np.meshgrid(*(np.arange(n) for n in g), indexing="ij")
    return (i * 10000 + j * 100 + k + 1).reshape(-1)


@pytest.mark.parametrize("grid", [(2, 3, 5), (3, 1, 8), (2, 2, 1)])
def test_rank3_row_launch_writes_every_element_once(monkeypatch, grid):
    entry = EmulatedEntry(monkeypatch, mark3, rows=True)
    block = 4
    tight = (-(-grid[2] // block), grid[1], grid[0])
    for blocks in (tight, (tight[0] + 1, tight[1] + 1, tight[2] + 2)):     # surplus blocks return
        out = np.zeros(int(np.prod(grid)), np.int64)
        status = entry.row_launch([out.ctypes.data, out.size, grid[1], grid[2]], grid, blocks, block)
        assert status[0] == 0
        np.testing.assert_array_equal(out, _expected3(grid))


def test_rank3_linear_launch_still_decomposes(monkeypatch):
    entry = EmulatedEntry(monkeypatch, mark3, rows=True)
    grid = (3, 2, 5)
    out = np.zeros(30, np.int64)
    status = entry.linear_launch([out.ctypes.data, 30, 2, 5], grid, 32)     # 2 threads past the grid
    assert status[0] == 0
    np.testing.assert_array_equal(out, _expected3(grid))


def test_rank2_row_launch(monkeypatch):
    entry = EmulatedEntry(monkeypatch, mark2, rows=True)
    grid = (3, 7)
    expected = (np.arange(3)[:, None] * 100 + np.arange(7)[None, :] + 1).reshape(-1)
    for blocks in ((2, 1, 3), (3, 1, 4), (2, 2, 3)):       # y > 0 is past a rank-2 row launch
        out = np.zeros(21, np.int64)
        status = entry.row_launch([out.ctypes.data, 21, 7], grid, blocks, 4)
        assert status[0] == 0
        np.testing.assert_array_equal(out, expected)


def test_row_launch_reports_an_out_of_bounds_access(monkeypatch):
    entry = EmulatedEntry(monkeypatch, mark3, rows=True)
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


@ado.kernel
def pairs(out: ado.InOut[ado.i64], n1: ado.i64):
    i, j = ado.tid()
    out[i * n1 + j] += 1
    out[i * n1 + j + 1] += 2


@pytest.mark.parametrize("short", [0, 1])
def test_row_launch_with_versioned_checks(monkeypatch, short):
    entry = EmulatedEntry(monkeypatch, pairs, rows=True)
    assert ".unchecked" in entry.module                       # two argument-decided checks
    grid = (3, 6)
    size = 3 * 6 + 1 - short
    out = np.zeros(size, np.int64)
    status = entry.row_launch([out.ctypes.data, size, 6], grid, (2, 1, 3), 4)
    expected = np.zeros(19, np.int64)
    for i in range(3):
        for j in range(6):
            expected[i * 6 + j] += 1
            expected[i * 6 + j + 1] += 2
    if short:
        expected[18] -= 2                                     # the last thread's second access failed
        assert list(status) == [1, 0, 18, 0]
    else:
        assert status[0] == 0
    np.testing.assert_array_equal(out, expected[:size])
