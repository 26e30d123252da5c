"""Block kernels on an NVIDIA GPU (skipped without one): the same checks as on the host CPU, with
real shared memory, bar.sync and 32-lane shuffles; results compared with the host's."""
import numpy as np
import pytest

import adoffload as ado

from . import kernels
from .warp_kernels import PAIRS

N = 128


def test_tiled_matmul_and_its_derivatives(cuda):
    rng = np.random.default_rng(0)
    A, B = rng.standard_normal((16, 24)), rng.standard_normal((24, 32))
    C = np.zeros((16, 32))
    kernels.tiled_matmul(A, B, C, grid=(16, 32), device="cuda")
    np.testing.assert_allclose(C, A @ B, rtol=1e-12, atol=1e-12)
    w = rng.standard_normal((16, 32))
    gA, gB = np.zeros_like(A), np.zeros_like(B)
    ado.vjp(kernels.tiled_matmul, ("A", "B"))(A, B, np.zeros((16, 32)), gA, gB, w.copy(), grid=(16, 32),
                                              device="cuda")
    np.testing.assert_allclose(gA, w @ B.T, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(gB, A.T @ w, rtol=1e-12, atol=1e-12)



@pytest.mark.parametrize("dtype", ["f32", "f64"])
@pytest.mark.parametrize("shape", sorted(kernels.REGISTER_SGEMM_SHAPES))
def test_batched_shadow_tile_adds_give_the_matmul_gradient(cuda, shape, dtype):
    """The register-tiled matmul's adjoint on the GPU, whose rows of shadow-tile adds are batched
    (codegen/gpu/shared_batches.py: transposed reductions over lane groups of 2 to 16 lanes), against
    numpy's gradient."""
    side, tm, bk = kernels.REGISTER_SGEMM_SHAPES[shape]
    t = getattr(ado, dtype)
    np_t = np.float32 if dtype == "f32" else np.float64
    kernel = kernels.make_register_sgemm(side, tm, bk, t)
    n, k = 2 * side * tm, 3 * bk
    rng = np.random.default_rng(3)
    A, B, w = (rng.standard_normal(s).astype(np_t) for s in ((n, k), (k, n), (n, n)))
    grid = (n // tm, n // tm)
    C = np.zeros((n, n), np_t)
    kernel(A, B, C, grid=grid, device="cuda")
    tol = 1e-4 if dtype == "f32" else 1e-12
    np.testing.assert_allclose(C, A @ B, rtol=tol, atol=tol)
    gA, gB = np.zeros_like(A), np.zeros_like(B)
    ado.vjp(kernel, ("A", "B"))(A, B, np.zeros_like(C), gA, gB, w.copy(), grid=grid, device="cuda")
    np.testing.assert_allclose(gA, w @ B.T, rtol=tol, atol=tol)
    np.testing.assert_allclose(gB, A.T @ w, rtol=tol, atol=tol)


@pytest.mark.parametrize("dtype", ["f32", "f64"])
def test_warp_aggregated_shadow_tile_adds_match_the_host(cuda, dtype):
    """8x8 blocks (whole warps): each adjoint add into a shadow tile element comes from 8 lanes of
    a row (xor 1, 2, 4) or of a column (xor 8, 16); codegen/gpu/shared_atomics.py combines them."""
    kernel = kernels.TILED_MATMUL_8[dtype]
    real = np.float32 if dtype == "f32" else np.float64
    rng = np.random.default_rng(4)
    A, B, w = (rng.standard_normal(s).astype(real) for s in ((32, 24), (24, 16), (32, 16)))
    reverse = ado.vjp(kernel, ("A", "B"))
    results = []
    for device in ("cuda", "cpu"):
        gA, gB = np.zeros_like(A), np.zeros_like(B)
        reverse(A, B, np.zeros((32, 16), real), gA, gB, w.copy(), grid=(32, 16), device=device)
        results.append((gA, gB))
    tol = 1e-4 if dtype == "f32" else 1e-12
    for got in results:
        np.testing.assert_allclose(got[0], w.astype(np.float64) @ B.T, rtol=tol, atol=tol)
        np.testing.assert_allclose(got[1], A.T.astype(np.float64) @ w, rtol=tol, atol=tol)


@pytest.mark.parametrize("steps", [0, 3])
def test_barriers_in_loops_match_the_host(cuda, steps):
    x = np.random.default_rng(1).standard_normal(64)
    on_gpu, on_host = np.zeros(64), np.zeros(64)
    kernels.smooth(x, on_gpu, steps, grid=64, device="cuda")
    kernels.smooth(x, on_host, steps, grid=64)
    np.testing.assert_allclose(on_gpu, on_host, rtol=1e-14)


def test_mirror_and_broadcast(cuda):
    x = np.arange(16.0)
    y = np.zeros(16)
    kernels.reverse_in_block(x, y, grid=16, device="cuda")
    np.testing.assert_array_equal(y, x.reshape(2, 8)[:, ::-1].reshape(-1))
    w = np.random.default_rng(2).standard_normal(16)
    g_gpu, g_host = np.zeros(16), np.zeros(16)
    ado.vjp(kernels.broadcast_first, "x")(x, np.zeros(16), g_gpu, w.copy(), grid=16, device="cuda")
    ado.vjp(kernels.broadcast_first, "x")(x, np.zeros(16), g_host, w.copy(), grid=16)
    np.testing.assert_allclose(g_gpu, g_host, rtol=1e-13)


@pytest.mark.parametrize("name", sorted(PAIRS))
def test_warp_and_block_operations_and_derivatives(cuda, name):
    block, plain = PAIRS[name]
    dtype = np.float32 if name == "f32" else np.float64
    rng = np.random.default_rng(3)
    x, dx, w = (rng.standard_normal(N).astype(dtype) for _ in range(3))
    tol = 2e-4 if dtype == np.float32 else 1e-12

    def run(kernel, device):
        y = np.zeros(N, dtype)
        kernel(x, y, grid=N, device=device)
        return y

    def jvp(kernel, device):
        y, dy = np.zeros(N, dtype), np.zeros(N, dtype)
        ado.jvp(kernel, "x")(x, y, dx, dy, grid=N, device=device)
        return dy

    def vjp(kernel, device):
        gx = np.zeros(N, dtype)
        ado.vjp(kernel, "x")(x, np.zeros(N, dtype), gx, w.copy(), grid=N, device=device)
        return gx
    for f in (run, jvp, vjp):
        np.testing.assert_allclose(f(block, "cuda"), f(plain, "cpu"), rtol=tol, atol=tol)


@pytest.mark.parametrize("name", ["sgemm_static", "sgemm_prefetch"])
def test_benchmark_sgemm_lean_vjps_give_the_matmul_gradient(cuda, name):
    """benchmarks/kernels/blocks.py's register-tiled SGEMMs (16x16 blocks, 8x8 outputs a thread): their lean
    VJPs on the GPU, whose shadow-tile batches skip the lane-group check (analysis/lane_groups.py
    proves every address), against numpy."""
    from benchmarks.kernels import blocks
    n, k = 256, 64
    rng = np.random.default_rng(8)
    A, B, G = (rng.standard_normal(s).astype(np.float32) for s in ((n, k), (k, n), (n, n)))
    gA, gB = np.zeros_like(A), np.zeros_like(B)
    reverse = ado.vjp(getattr(blocks, name), ["A", "B"], primal_outputs=False)
    reverse(A, B, np.zeros((n, n), np.float32), gA, gB, G, grid=(n // 8, n // 8), device="cuda")
    np.testing.assert_allclose(gA, G.astype(np.float64) @ B.T, rtol=1e-4, atol=1e-3)
    np.testing.assert_allclose(gB, A.T.astype(np.float64) @ G, rtol=1e-4, atol=1e-3)


def test_checked_grouped_adds_give_the_matmul_gradient(cuda):
    """The tiled matmul summed in a loaded order (kernels.permuted_tiled_matmul): its shadow-tile
    addresses are not proven, so the grouped adds check their lane groups at run time; on the GPU
    as on the host."""
    rng = np.random.default_rng(9)
    A, B, w = rng.standard_normal((16, 24)), rng.standard_normal((24, 32)), rng.standard_normal((16, 32))
    order = rng.permutation(8).astype(np.int64)
    for device in ("cuda", "cpu"):
        gA, gB = np.zeros_like(A), np.zeros_like(B)
        ado.vjp(kernels.permuted_tiled_matmul, ("A", "B"))(A, B, order, np.zeros((16, 32)), gA, gB, w.copy(),
                                                             grid=(16, 32), device=device)
        np.testing.assert_allclose(gA, w @ B.T, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(gB, A.T @ w, rtol=1e-12, atol=1e-12)
