"""Row launches (codegen/gpu/rows.py) and versioned bounds checks (uniform_checks.py) on a real CUDA
device, through the launcher: results equal numpy's, out-of-bounds accesses still raise
BoundsError naming the parameter and index. Skips without a CUDA GPU."""
from __future__ import annotations

import numpy as np
import pytest

import adoffload as ado
from adoffload.errors import BoundsError

pytestmark = pytest.mark.gpu


@ado.kernel
def nested(arr: ado.Out[ado.f64], ni: ado.i64, nj: ado.i64):
    k, j, i = ado.tid()
    arr[i + ni * (j + nj * k)] = float(i) + 1000.0 * float(j) + 1e6 * float(k)


@ado.kernel
def plane(m: ado.Out[ado.f64, 2]):
    i, j = ado.tid()
    m[i, j] = float(i) * 10000.0 + float(j)


@ado.kernel
def shifted(px: ado.InOut[ado.f64], cx: ado.In[ado.f64], off: ado.i64):
    i = ado.tid()
    a = cx[i + off * 2]
    b = a - px[i + off * 2]
    px[i + off * 2] = a
    px[i + off * 3] = b - px[i + off * 3]


@pytest.fixture
def launches(cuda, monkeypatch):
    """The ``blocks`` argument of every launch geometry the launcher prepares on the device (None: a
    1-D launch); the launcher prepares one per kernel variant and argument signature."""
    seen = []
    original = cuda.prepare_launch

    def prepare_launch(function, total_threads, block_size=None, blocks=None):
        seen.append(blocks)
        return original(function, total_threads, block_size, blocks)
    monkeypatch.setattr(cuda, "prepare_launch", prepare_launch)
    return seen


# rows of 8192 and 4096 fill whole blocks (row launches); a first extent of 1 and a row of 17 launch 1-D
@pytest.mark.parametrize("dims,rows", [((3, 5, 8192), True), ((7, 1, 4096), True), ((1, 4, 3000), False),
                                       ((2, 3, 17), False)])
def test_rank3_grid_matches_numpy(launches, dims, rows):
    nk, nj, ni = dims
    arr = np.full(ni * nj * nk, -1.0)
    nested(arr, ni, nj, grid=(nk, nj, ni), device="cuda")
    k, j, i = np.meshgrid(np.arange(nk), np.arange(nj), np.arange(ni), indexing="ij")
    np.testing.assert_array_equal(arr, (i + 1000.0 * j + 1e6 * k).reshape(-1))
    assert (launches[-1] is not None) == rows


def test_rank2_grid_matches_numpy(launches):
    m = np.zeros((33, 8192))
    plane(m, grid=m.shape, device="cuda")
    np.testing.assert_array_equal(m, np.arange(33)[:, None] * 10000.0 + np.arange(8192)[None, :])
    assert launches[-1] is not None and launches[-1][1:] == (1, 33)


def test_row_launch_still_reports_bounds(cuda):
    arr = np.zeros(3 * 5 * 2048 - 1)
    with pytest.raises(BoundsError, match=f"index {arr.size} .* array 'arr'"):
        nested(arr, 2048, 5, grid=(3, 5, 2048), device="cuda")


def test_versioned_checks_in_and_out_of_bounds(cuda):
    n, off = 100_000, 100_000
    rng = np.random.default_rng(1)
    px, cx = rng.uniform(size=4 * n), rng.uniform(size=4 * n)
    expected = px.copy()
    a = cx[2 * off:2 * off + n]
    b = a - expected[2 * off:2 * off + n]
    expected[2 * off:2 * off + n] = a
    expected[3 * off:3 * off + n] = b - expected[3 * off:3 * off + n]
    got = px.copy()
    shifted(got, cx, off, grid=(n,), device="cuda")
    np.testing.assert_array_equal(got, expected)
    short = px[:3 * off + n - 1].copy()          # the last thread's second access is one past the end
    with pytest.raises(BoundsError, match=f"index {3 * off + n - 1} .* array 'px'"):
        shifted(short, cx, off, grid=(n,), device="cuda")
