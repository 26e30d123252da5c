"""deterministic=True for block kernels (host CPU): global contributions go to the log, shadow
shared memory is summed in the host block loop's fixed thread order. Bitwise identical run to
run and across worker counts, equal to float64 references and (to rounding) to the default
mode. GPU entries: shared-memory adds in thread order (codegen/gpu/ordered_shared.py), checked here
on the generated PTX; tests/determinism/test_gpu_blocks.py and tests/blocks/test_deterministic_gpu.py
run them on a GPU."""
from __future__ import annotations

import numpy as np
import pytest

import adoffload as ado
from adoffload.errors import DifferentiationError
from adoffload.runtime.host import HostDevice

from .block_kernels import BLOCK_CASES, tile_gather
from .kernels import fingerprint, run_vjp

SIZES = {"tile_gather": 256, "warp_gather": 2048}


def _data(case, seed=0):
    return case.make(np.random.default_rng(seed), SIZES[case.name])


@pytest.mark.parametrize("case", BLOCK_CASES, ids=lambda c: c.name)
def test_block_kernel_gradients_are_bitwise_identical_and_match_float64(case):
    args, seeds, grid = _data(case)
    runs = [run_vjp(case, True, args, seeds, grid, device=HostDevice(4)) for _ in range(6)]
    assert len({fingerprint(r) for r in runs}) == 1, f"{case.name}: deterministic mode varied across runs"
    default = run_vjp(case, False, args, seeds, grid)
    reference = case.reference(args, seeds)
    for name, got in runs[0].items():
        scale = max(1.0, float(np.abs(reference[name]).max()))
        np.testing.assert_allclose(got, reference[name], rtol=1e-5, atol=1e-5 * scale, err_msg=f"{case.name}.{name}")
        np.testing.assert_allclose(got, default[name], rtol=1e-5, atol=1e-5 * scale, err_msg=f"{case.name}.{name}")


@pytest.mark.parametrize("case", BLOCK_CASES, ids=lambda c: c.name)
def test_block_kernel_gradients_do_not_depend_on_the_worker_count(case):
    args, seeds, grid = _data(case, seed=1)
    prints = {workers: fingerprint(run_vjp(case, True, args, seeds, grid, device=HostDevice(workers)))
              for workers in (1, 3, 8)}
    assert len(set(prints.values())) == 1, f"{case.name}: results differ between worker counts"


def test_the_log_holds_global_contributions_only():
    """tile_gather's adjoint scatters into d_x (logged) and adds into the shadow tile d_T (not:
    the reverse sweep reads it back); the log's shadow ids name the kernel's shadow params."""
    k = ado.vjp(tile_gather, ["x"], deterministic=True)
    names = [p.name for p in k.signature.params]
    assert names[-2:] == ["adoffload_log", "adoffload_log_offsets"]
    assert [a.name for a in k.shared] == ["T", "d_T"]


def test_barriers_in_a_loop_and_a_value_all_threads_read():
    """smooth (barriers in a loop of ``steps`` rounds) and broadcast_first (every thread reads
    S[0]: all adds of a block into one shadow element) against the default mode."""
    from tests.blocks import kernels
    rng = np.random.default_rng(2)
    x, w = rng.standard_normal(64), rng.standard_normal(64)
    for kernel, extra in ((kernels.smooth, (3,)), (kernels.broadcast_first, ())):
        results = []
        for det in (False, True, True):
            gx = np.zeros(64)
            ado.vjp(kernel, "x", deterministic=det)(x, np.zeros(64), *extra, gx, w.copy(), grid=64,
                                                    device=HostDevice(3))
            results.append(gx)
        np.testing.assert_array_equal(results[1], results[2])
        np.testing.assert_allclose(results[1], results[0], rtol=1e-12, atol=1e-14)


def test_cuda_source_kernel_deterministic_adjoint():
    from tests.foreign_cuda.sources import TILED_MATMUL
    mod = ado.from_cuda(TILED_MATMUL)
    k = mod.kernel("matmul", A=ado.In[ado.f64], B=ado.In[ado.f64], C=ado.Out[ado.f64], n=ado.i32, k=ado.i32,
                   m=ado.i32)
    rng = np.random.default_rng(3)
    A, B, w = rng.standard_normal((10, 13)), rng.standard_normal((13, 9)), rng.standard_normal((10, 9))
    results = []
    for workers in (1, 3):
        gA, gB = np.zeros_like(A), np.zeros_like(B)
        ado.vjp(k, ["A", "B"], deterministic=True)(A, B, np.zeros((10, 9)), 10, 13, 9, d_A=gA, d_B=gB,
                                                   d_C=w.copy(), blocks=(2, 2), threads=(8, 8),
                                                   device=HostDevice(workers))
        results.append((gA, gB))
    np.testing.assert_array_equal(results[0][0], results[1][0])
    np.testing.assert_array_equal(results[0][1], results[1][1])
    np.testing.assert_allclose(results[0][0], w @ B.T, rtol=1e-12, atol=1e-13)
    np.testing.assert_allclose(results[0][1], A.T @ w, rtol=1e-12, atol=1e-13)


# ----------------------------------------------------------------------------- GPU entries (no GPU needed)

def test_gpu_entry_adds_into_shared_memory_in_thread_order():
    """The default PTX adds into the shadow tile with shared atomics (warp-aggregated); the
    deterministic one has none: ordered adds, two more barriers per site."""
    default = ado.vjp(tile_gather, ["x"]).compiled("nvptx", arch="sm_90").artifact
    ordered = ado.vjp(tile_gather, ["x"], deterministic=True).compiled("nvptx", arch="sm_90").artifact
    assert "atom.shared" in default
    assert "atom.shared" not in ordered
    assert ordered.count("bar.sync") >= default.count("bar.sync") + 4


def _ptxas_available() -> bool:
    try:
        from adoffload.codegen.gpu.tools import find_ptxas
        find_ptxas()
        return True
    except Exception:
        return False


@pytest.mark.skipif(not _ptxas_available(), reason="ptxas (CUDA tools) not installed")
def test_the_ordered_gpu_entry_assembles():
    from adoffload.codegen.gpu.nvptx import ptxas_check
    ptx = ado.vjp(tile_gather, ["x"], deterministic=True).compiled("nvptx", arch="sm_90").artifact
    assert "Compiling entry function 'tile_gather_$_vjp_$_kernel'" in ptxas_check(ptx, "sm_90")


def test_gpu_entry_refuses_shared_adds_under_divergent_control_flow():
    """smooth's adjoint adds into S[t - 1] only where t > 0: not every thread of the block reaches
    that add, so it cannot be put in order with barriers on a GPU (the host runs it)."""
    from tests.blocks import kernels
    k = ado.vjp(kernels.smooth, "x", deterministic=True)
    with pytest.raises(DifferentiationError, match=r"kernels\.py:\d+ runs under control flow that is not uniform"):
        k.compiled("nvptx", arch="sm_90")
    ado.vjp(kernels.smooth, "x").compiled("nvptx", arch="sm_90")      # the default mode compiles


def test_guarded_tile_loads_leave_the_tile_loop_uniform():
    """The CUDA tiled matmul guards its tile loads (``row < n && ac < k ? A[..] : 0``): a
    thread-dependent branch inside the tile loop that never leaves it, so the loop's trip count,
    and the reverse sweep's adds into the shadow tiles, stay uniform: ordered on a GPU."""
    from tests.foreign_cuda.sources import TILED_MATMUL
    k = ado.from_cuda(TILED_MATMUL).kernel("matmul", A=ado.In[ado.f64], B=ado.In[ado.f64], C=ado.Out[ado.f64],
                                           n=ado.i32, k=ado.i32, m=ado.i32)
    ptx = ado.vjp(k, ["A", "B"], deterministic=True).specialize((8, 8)).compiled("nvptx", arch="sm_90").artifact
    assert "atom.shared" not in ptx and ptx.count("bar.sync") > 8


NESTED_BREAK = r"""
__global__ void nested(const double* x, double* y, int n) {
  __shared__ double s[32];
  int t = threadIdx.x;
  int j = 0;
  for (int o = 0; o < n; ++o) {
    for (j = 0; j < 100; ++j) { if (x[t * 100 + j] > 0.5) break; }
    s[t] = j;
  }
  __syncthreads();
  if (j > 3) { __syncthreads(); }
  y[t] = s[(t + 1) % 32];
}
"""


def test_a_thread_dependent_break_out_of_an_inner_loop_still_makes_its_values_vary():
    """The inner loop's ``j`` after a data-dependent break differs between threads, inside the
    outer loop too: a barrier under ``if (j > 3)`` is refused (analysis/uniformity.py)."""
    k = ado.from_cuda(NESTED_BREAK).kernel("nested", x=ado.In[ado.f64], y=ado.Out[ado.f64], n=ado.i32)
    with pytest.raises(ado.Error, match=r"__syncthreads\(\) runs under control flow that is not uniform"):
        k.specialize((32,))
