"""Block kernels: the language (block shape, indices, shared arrays, barriers) on the host CPU."""
import numpy as np
import pytest

import adoffload as ado
from adoffload.errors import BoundsError, GridError, KernelTypeError, UnsupportedConstructError

from . import kernels
from .kernel_files import load_module


def test_tiled_matmul_matches_numpy():
    rng = np.random.default_rng(0)
    A, B = rng.standard_normal((8, 12)), rng.standard_normal((12, 16))
    C = np.zeros((8, 16))
    kernels.tiled_matmul(A, B, C, grid=(8, 16))
    np.testing.assert_allclose(C, A @ B, rtol=1e-12, atol=1e-12)


def test_barrier_makes_other_threads_writes_visible():
    x = np.arange(24.0)
    y = np.zeros(24)
    kernels.reverse_in_block(x, y, grid=24)
    np.testing.assert_array_equal(y, x.reshape(3, 8)[:, ::-1].reshape(-1))


def _smooth_reference(x, steps, block=16):
    out = []
    for chunk in x.reshape(-1, block):
        s = chunk.copy()
        for _ in range(steps):
            padded = np.concatenate([[0.0], s, [0.0]])
            s = (padded[:-2] + padded[1:-1] + padded[2:]) / 3.0
        out.append(s)
    return np.concatenate(out)


@pytest.mark.parametrize("steps", [0, 1, 5])
def test_barriers_in_a_loop_with_private_arrays(steps):
    x = np.random.default_rng(1).standard_normal(48)
    y = np.zeros(48)
    kernels.smooth(x, y, steps, grid=48)
    np.testing.assert_allclose(y, _smooth_reference(x, steps), rtol=1e-13)


def test_thread_block_and_lane_indices():
    ids = np.zeros((4, 8, 7), np.int64)
    kernels.indices(ids, grid=(4, 8))
    i, j = np.meshgrid(np.arange(4), np.arange(8), indexing="ij")
    np.testing.assert_array_equal(ids[..., 0], i % 2)
    np.testing.assert_array_equal(ids[..., 1], j % 4)
    np.testing.assert_array_equal(ids[..., 2], i // 2)
    np.testing.assert_array_equal(ids[..., 3], j // 4)
    assert (ids[..., 4] == 24).all()
    np.testing.assert_array_equal(ids[..., 5], ((i % 2) * 4 + j % 4) % 32)
    assert (ids[..., 6] == 32).all()


def test_grid_must_be_a_multiple_of_the_block():
    with pytest.raises(GridError, match=r"multiple of it on axis 0"):
        kernels.reverse_in_block(np.zeros(12), np.zeros(12), grid=12)


def test_shared_array_bounds_are_checked():
    with pytest.raises(BoundsError, match=r"index 4 is out of bounds for axis 0 of shared array #0"):
        kernels.shared_out_of_bounds(np.zeros(8), np.zeros(8), grid=8)


_compile = load_module


DIVERGENT = {
    "if on the thread index": """
@ado.kernel(block=4)
def k(x: ado.InOut[ado.f64]):
    i = ado.tid()
    if x[i] > 0.0:
        ado.sync_threads()
""",
    "loop bound from loaded data": """
@ado.kernel(block=4)
def k(x: ado.InOut[ado.f64], n: ado.In[ado.i64]):
    i = ado.tid()
    for s in range(n[i]):
        ado.sync_threads()
""",
    "variable assigned under a divergent branch": """
@ado.kernel(block=4)
def k(x: ado.InOut[ado.f64], n: ado.i64):
    i = ado.tid()
    m = n
    if ado.thread_id() == 0:
        m = 3
    while m > 0:
        ado.warp_sum(x[i])
        m -= 1
""",
    "after a divergent return": """
@ado.kernel(block=4)
def k(x: ado.InOut[ado.f64]):
    i = ado.tid()
    if i >= 3:
        return
    ado.block_sum(x[i])
""",
    "conditional expression on the thread index": """
@ado.kernel(block=4)
def k(x: ado.InOut[ado.f64]):
    i = ado.tid()
    x[i] = ado.block_sum(x[i]) if i > 1 else 0.0
""",
    "short-circuit after loaded data": """
@ado.kernel(block=4)
def k(x: ado.InOut[ado.f64]):
    i = ado.tid()
    if x[i] > 0.0 and ado.block_max(x[i]) > 1.0:
        x[i] = 1.0
""",
    "while test on loaded data": """
@ado.kernel(block=4)
def k(x: ado.InOut[ado.f64]):
    i = ado.tid()
    while ado.warp_sum(x[i]) > x[i]:
        x[i] = x[i] * 0.5
""",
    "loop with a divergent break": """
@ado.kernel(block=4)
def k(x: ado.InOut[ado.f64]):
    i = ado.tid()
    for s in range(10):
        ado.sync_threads()
        if x[i] > s:
            break
""",
}


@pytest.mark.parametrize("case", sorted(DIVERGENT))
def test_barrier_under_divergent_control_flow_is_refused_with_its_line(case, tmp_path):
    with pytest.raises(UnsupportedConstructError, match=r"not uniform across the block") as info:
        _compile(DIVERGENT[case], tmp_path)
    assert info.value.line is not None and "ado." in info.value.source_line


UNIFORM = """
@ado.kernel(block=4)
def k(x: ado.InOut[ado.f64], n: ado.i64):
    i = ado.tid()
    b = ado.block_id()
    total = ado.block_sum(x[i])
    if b == 0 and n > 2:
        ado.sync_threads()
    for s in range(x.shape[0] // 4 + n):
        ado.sync_threads()
    m = len(x)                  # a shape, like x.shape[0] (block fuzzer's finding: was refused)
    for s in range(m // 4):
        ado.sync_threads()
    while total > 1.0:
        total = ado.block_sum(total * 0.125)
    x[i] = total
"""


def test_uniform_conditions_are_accepted(tmp_path):
    module = _compile(UNIFORM, tmp_path)
    x = np.full(8, 1.0)
    module.k(x, 3, grid=8)
    np.testing.assert_array_equal(x, 1.0)      # block sums 4 -> 2 -> 1


def test_block_rank_must_match_the_grid(tmp_path):
    with pytest.raises(KernelTypeError, match=r"block \(4, 4\) has 2 axes but the grid has 1"):
        _compile("""
@ado.kernel(block=(4, 4))
def k(x: ado.InOut[ado.f64]):
    i = ado.tid()
    x[i] = 1.0
""", tmp_path)


def test_shared_only_at_top_level(tmp_path):
    with pytest.raises(UnsupportedConstructError, match=r"top level"):
        _compile("""
@ado.kernel(block=4)
def k(x: ado.InOut[ado.f64]):
    i = ado.tid()
    if i > 0:
        S = ado.shared(4, ado.f64)
""", tmp_path)


def test_block_builtins_need_a_block_kernel(tmp_path):
    with pytest.raises(KernelTypeError, match=r"needs a block kernel"):
        _compile("""
@ado.kernel
def k(x: ado.InOut[ado.f64]):
    i = ado.tid()
    ado.sync_threads()
""", tmp_path)


def test_block_builtins_outside_kernels_raise():
    with pytest.raises(ado.Error, match=r"block kernel"):
        ado.sync_threads()


def test_block_too_large():
    with pytest.raises(KernelTypeError, match=r"more than 1024"):
        ado.kernel(block=(64, 32))
    with pytest.raises(KernelTypeError, match=r"positive int"):
        ado.kernel(block=(4, 0))
