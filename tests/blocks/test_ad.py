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


def test_deterministic_reverse_is_refused_for_now():
    with pytest.raises(ado.Error, match=r"deterministic=True is not available for block kernels"):
        ado.vjp(kernels.broadcast_first, "x", deterministic=True)
