"""Forward and reverse derivatives of block kernels with shared memory and barriers (host CPU)."""
import numpy as np
import pytest

import adoffload as ado

from . import kernels


def test_tiled_matmul_jvp_and_vjp():
    rng = np.random.default_rng(0)
    A, B = rng.standard_normal((8, 12)), rng.standard_normal((12, 8))
    dA, dB, w = rng.standard_normal(A.shape), rng.standard_normal(B.shape), rng.standard_normal((8, 8))
    C, dC = np.zeros((8, 8)), np.zeros((8, 8))
    ado.jvp(kernels.tiled_matmul, ("A", "B"))(A, B, C, dA, dB, dC, grid=(8, 8))
    np.testing.assert_allclose(C, A @ B, rtol=1e-12)
    np.testing.assert_allclose(dC, dA @ B + A @ dB, rtol=1e-12, atol=1e-12)
    gA, gB = np.zeros_like(A), np.zeros_like(B)
    ado.vjp(kernels.tiled_matmul, ("A", "B"))(A, B, np.zeros((8, 8)), gA, gB, w.copy(), grid=(8, 8))
    np.testing.assert_allclose(gA, w @ B.T, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(gB, A.T @ w, rtol=1e-12, atol=1e-12)


def test_tiled_matmul_vector_forward_mode():
    rng = np.random.default_rng(1)
    A, B = rng.standard_normal((4, 8)), rng.standard_normal((8, 4))
    dA = rng.standard_normal((2,) + A.shape)
    C, dC = np.zeros((4, 4)), np.zeros((2, 4, 4))
    ado.jvp(kernels.tiled_matmul, "A", width=2)(A, B, C, dA, dC, grid=(4, 4))
    for lane in range(2):
        np.testing.assert_allclose(dC[lane], dA[lane] @ B, rtol=1e-12, atol=1e-12)


def test_reverse_of_a_value_every_thread_reads_from_shared_memory():
    x = np.random.default_rng(2).standard_normal(16)
    w = np.random.default_rng(3).standard_normal(16)
    first = np.repeat(x[::8], 8)
    y, gx = np.zeros(16), np.zeros(16)
    ado.vjp(kernels.broadcast_first, "x")(x, y, gx, w.copy(), grid=16)
    np.testing.assert_allclose(y, np.sin(first) * x, rtol=1e-14)
    expected = np.sin(first) * w
    expected[::8] += np.cos(x[::8]) * (w * x).reshape(2, 8).sum(axis=1)
    np.testing.assert_allclose(gx, expected, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("steps", [1, 3])
def test_smoothing_with_barriers_in_a_loop_against_finite_differences(steps):
    rng = np.random.default_rng(steps)
    x, dx, w = (rng.standard_normal(32) for _ in range(3))
    y, dy = np.zeros(32), np.zeros(32)
    ado.jvp(kernels.smooth, "x")(x, y, steps, dx, dy, grid=32)
    h = 1e-6
    plus, minus = np.zeros(32), np.zeros(32)
    kernels.smooth(x + h * dx, plus, steps, grid=32)
    kernels.smooth(x - h * dx, minus, steps, grid=32)
    np.testing.assert_allclose(dy, (plus - minus) / (2 * h), rtol=1e-7, atol=1e-8)
    gx = np.zeros(32)
    ado.vjp(kernels.smooth, "x")(x, np.zeros(32), steps, gx, w.copy(), grid=32)
    assert abs(np.dot(dy, w) - np.dot(dx, gx)) < 1e-12


def test_mirror_in_block_reverse():
    x, w = np.arange(16.0), np.random.default_rng(4).standard_normal(16)
    gx = np.zeros(16)
    ado.vjp(kernels.reverse_in_block, "x")(x, np.zeros(16), gx, w.copy(), grid=16)
    np.testing.assert_array_equal(gx, w.reshape(2, 8)[:, ::-1].reshape(-1))


def test_second_order_forward_over_reverse():
    """jvp of the vjp of a kernel with a barrier and shared memory (a Hessian-vector product),
    against finite differences of the vjp."""
    rng = np.random.default_rng(5)
    x, v, w = (rng.standard_normal(16) for _ in range(3))
    reverse = ado.vjp(kernels.broadcast_first, "x")

    def gradient(x):
        gx = np.zeros(16)
        reverse(x, np.zeros(16), gx, w.copy(), grid=16)
        return gx
    hvp = ado.jvp(reverse, "x")
    args = dict(x=x, y=np.zeros(16), d_x=np.zeros(16), d_y=w.copy(), d2_x=v, d2_y=np.zeros(16),
                d_d_x=np.zeros(16), d_d_y=np.zeros(16))
    hvp(*[args[p.name] for p in hvp.signature.visible_params], grid=16)
    h = 1e-6
    np.testing.assert_allclose(args["d_d_x"], (gradient(x + h * v) - gradient(x - h * v)) / (2 * h),
                               rtol=1e-6, atol=1e-7)


# ----------------------------------------------------------------------------- refilled tiles (enzyme/refill.py)

def _fd_check(kernel, shapes, grid, out_name="C", inout_c=None, seed=7):
    """<w, d out> of finite differences along (dA, dB) against <(gA, gB), (dA, dB)> from the VJP."""
    rng = np.random.default_rng(seed)
    A, B = rng.standard_normal(shapes[0]), rng.standard_normal(shapes[1])
    dA, dB = rng.standard_normal(A.shape), rng.standard_normal(B.shape)
    out_shape = shapes[2]
    w = rng.standard_normal(out_shape)
    c0 = inout_c if inout_c is not None else np.zeros(out_shape)

    def run(A, B):
        C = c0.copy()
        kernel(A, B, C, grid=grid)
        return C
    h = 1e-6
    fd = np.sum(w * (run(A + h * dA, B + h * dB) - run(A - h * dA, B - h * dB))) / (2 * h)
    gA, gB = np.zeros_like(A), np.zeros_like(B)
    reverse = ado.vjp(kernel, ("A", "B"))
    reverse(A, B, c0.copy(), gA, gB, w.copy(), grid=grid)
    assert abs(fd - (np.sum(gA * dA) + np.sum(gB * dB))) < 1e-6 * max(1.0, abs(fd))
    return reverse, gA, gB


def test_tile_refill_takes_the_tiled_matmul_off_the_tape():
    """The shared tiles are re-filled in the reverse of each step (no tape at all)."""
    assert ado.vjp(kernels.tiled_matmul, ("A", "B")).tape is None


def test_register_tiled_matmul_vjp_refills_shared_and_private_tiles():
    M, K, N = 8, 6, 12
    rng = np.random.default_rng(6)
    A, B, w = rng.standard_normal((M, K)), rng.standard_normal((K, N)), rng.standard_normal((M, N))
    C = np.zeros((M, N))
    kernels.register_tiled_matmul(A, B, C, grid=(M // 2, N // 2))
    np.testing.assert_allclose(C, np.sin(A @ B), rtol=1e-12)
    reverse, gA, gB = _fd_check(kernels.register_tiled_matmul, [(M, K), (K, N), (M, N)], (M // 2, N // 2))
    assert reverse.tape is None
    gA, gB = np.zeros_like(A), np.zeros_like(B)
    reverse(A, B, np.zeros((M, N)), gA, gB, w.copy(), grid=(M // 2, N // 2))
    seed = w * np.cos(A @ B)
    np.testing.assert_allclose(gA, seed @ B.T, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(gB, A.T @ seed, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("name", ["tiled_matmul_rotated", "tiled_matmul_clears_tile", "tiled_matmul_two_phase_fill"])
def test_tiles_that_cannot_be_refilled_stay_on_the_tape(name):
    reverse, _, _ = _fd_check(getattr(kernels, name), [(8, 12), (12, 8), (8, 8)], (8, 8))
    assert reverse.tape is not None


def test_a_fill_that_reads_memory_the_kernel_writes_is_not_refilled():
    c0 = np.random.default_rng(8).standard_normal((8, 8))
    reverse, _, _ = _fd_check(kernels.tiled_matmul_reads_its_output, [(8, 12), (12, 8), (8, 8)], (8, 8), inout_c=c0)
    assert reverse.tape is not None


def _check_sin_matmul(kernel, M, K, N, seed):
    """``kernel`` computes ``sin(A) @ B``: the primal, both oracles (_fd_check and, with forward
    mode, <J v, w> = <v, J^T w>) and the exact gradient; returns the reverse kernel."""
    rng = np.random.default_rng(seed)
    A, B, w = rng.standard_normal((M, K)), rng.standard_normal((K, N)), rng.standard_normal((M, N))
    C = np.zeros((M, N))
    kernel(A, B, C, grid=(M, N))
    np.testing.assert_allclose(C, np.sin(A) @ B, rtol=1e-12)
    reverse, _, _ = _fd_check(kernel, [(M, K), (K, N), (M, N)], (M, N))
    gA, gB = np.zeros_like(A), np.zeros_like(B)
    reverse(A, B, np.zeros((M, N)), gA, gB, w.copy(), grid=(M, N))
    np.testing.assert_allclose(gA, np.cos(A) * (w @ B.T), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(gB, np.sin(A).T @ w, rtol=1e-12, atol=1e-12)
    dA, dB = rng.standard_normal(A.shape), rng.standard_normal(B.shape)
    dC = np.zeros((M, N))
    ado.jvp(kernel, ("A", "B"))(A, B, np.zeros((M, N)), dA, dB, dC, grid=(M, N))
    assert abs(np.sum(w * dC) - (np.sum(gA * dA) + np.sum(gB * dB))) < 1e-10 * max(1.0, abs(np.sum(w * dC)))
    return reverse


def test_prefetched_tiles_are_refilled_from_their_taped_fill_values():
    """A fill whose values are registers loaded in the previous step (a prefetching SGEMM's) is
    refilled with those values from the tape (enzyme/refill.py ``Plan.taped``): both oracles, the
    exact gradient, and the tile's reads recomputed instead of taped."""
    from adoffload.tools.cli import reverse_stats
    from adoffload.enzyme.stats import PER_ITERATION
    reverse = _check_sin_matmul(kernels.prefetched_matmul, 8, 12, 8, seed=11)
    assert reverse_stats(reverse).recomputed_loads[PER_ITERATION] >= 2


def test_fill_values_loaded_in_an_inner_loop_are_not_taken_from_the_tape():
    """The fill's values are loads in a loop inside the step: one taped value per step would give
    every inner iteration the last one. The gradient must still be exact (the reads stay taped)."""
    _check_sin_matmul(kernels.prefetched_matmul_looped_fill, 8, 16, 8, seed=13)


def test_register_sgemm_gradient_on_the_host():
    """The benchmark-shaped register-tiled matmul (kernels.make_register_sgemm, the GPU test's kernel
    for batched shadow-tile adds): both oracles and the exact gradient, without a tape."""
    side, tm, bk = kernels.REGISTER_SGEMM_SHAPES["8x8"]
    kernel = kernels.make_register_sgemm(side, tm, bk, ado.f64)
    n, k = side * tm, 3 * bk
    reverse, _, _ = _fd_check(kernel, [(n, k), (k, n), (n, n)], (n // tm, n // tm))
    assert reverse.tape is None
    rng = np.random.default_rng(12)
    A, B, w = rng.standard_normal((n, k)), rng.standard_normal((k, n)), rng.standard_normal((n, n))
    gA, gB = np.zeros_like(A), np.zeros_like(B)
    reverse(A, B, np.zeros((n, n)), gA, gB, w.copy(), grid=(n // tm, n // tm))
    np.testing.assert_allclose(gA, w @ B.T, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(gB, A.T @ w, rtol=1e-12, atol=1e-12)

def _stencil(x):
    p = np.pad(x, 1)
    return 0.5 * x + 0.125 * (p[:-2, 1:-1] + p[2:, 1:-1] + p[1:-1, :-2] + p[1:-1, 2:])


def test_linear_stencil_adjoint_needs_no_tape():
    """A linear stencil's adjoint needs no primal value: the partials of inactive operands
    (``0.5 * mid``'s for 0.5) must not leave the loads they would have used on the tape (20 rows
    per thread: too many pushes for a static tape, so a tape would show as a dynamic one)."""
    n, m = 2 * kernels.TR, 8
    rng = np.random.default_rng(9)
    x, w = rng.standard_normal((n, m)), rng.standard_normal((n, m))
    y = np.zeros((n, m))
    kernels.stencil_rows(x, y, grid=(n // kernels.SR, m))
    np.testing.assert_allclose(y, _stencil(x), rtol=1e-14, atol=1e-14)
    reverse = ado.vjp(kernels.stencil_rows, "x")
    assert reverse.tape is None
    gx = np.zeros((n, m))
    reverse(x, np.zeros((n, m)), gx, w.copy(), grid=(n // kernels.SR, m))
    np.testing.assert_allclose(gx, _stencil(w), rtol=1e-14, atol=1e-14)     # the stencil is symmetric
