"""Block kernels as JAX custom calls (CPU): values, jvp, vjp, jit, grad, and the grid check."""
import numpy as np
import pytest

jax = pytest.importorskip("jax")
jax.config.update("jax_enable_x64", True)
import jax.numpy as jnp  # noqa: E402

import adoffload as ado  # noqa: E402
from adoffload.errors import GridError  # noqa: E402

from . import kernels  # noqa: E402
from .warp_kernels import PAIRS  # noqa: E402


def _matmul():
    return ado.jax_kernel(kernels.tiled_matmul, out_shapes=lambda A, B: {"C": (A.shape[0], B.shape[1])})


def test_tiled_matmul_value_and_gradients_match_jnp():
    rng = np.random.default_rng(0)
    A, B = rng.standard_normal((8, 12)), rng.standard_normal((12, 8))
    f = jax.jit(_matmul())
    np.testing.assert_allclose(f(A, B), A @ B, rtol=1e-12)

    def loss(A, B):
        return jnp.sum(jnp.sin(f(A, B)))

    def reference(A, B):
        return jnp.sum(jnp.sin(jnp.dot(A, B, precision="highest")))
    for ours, theirs in zip(jax.grad(loss, argnums=(0, 1))(A, B), jax.grad(reference, argnums=(0, 1))(A, B)):
        np.testing.assert_allclose(ours, theirs, rtol=1e-10, atol=1e-12)
    dA, dB = rng.standard_normal(A.shape), rng.standard_normal(B.shape)
    _, tangent = jax.jvp(f, (A, B), (dA, dB))
    np.testing.assert_allclose(tangent, dA @ B + A @ dB, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("name", ["warp_sum", "warp_max", "shuffle", "block_sum", "block_max"])
def test_warp_and_block_operations_under_grad(name):
    block, plain = PAIRS[name]
    x = np.random.default_rng(3).standard_normal(128)

    def loss(kernel):
        f = ado.jax_kernel(kernel)
        return lambda x: jnp.sum(f(x) ** 2)
    np.testing.assert_allclose(jax.jit(jax.grad(loss(block)))(x), jax.grad(loss(plain))(x), rtol=1e-12, atol=1e-12)


def test_grid_must_be_a_multiple_of_the_block():
    f = ado.jax_kernel(kernels.reverse_in_block)
    with pytest.raises(GridError, match=r"multiple"):
        f(np.zeros(12))


def test_gpu_handlers_launch_blocks_of_the_kernels_block_size():
    from adoffload.jax import targets
    block = PAIRS["warp_sum"][0]
    assert block.compiled("nvptx", arch="sm_90").extra["block_threads"] == 64
    text = targets.rocm_handler_ir(block, block_size=64)
    assert "i32 1, i32 1, i32 64, i32 1, i32 1, i32 0" in text
    reverse = ado.vjp(kernels.tiled_matmul_rotated, ("A", "B"))  # dynamic tape: counting kernel too
    assert reverse.tape is not None
    text = targets.rocm_handler_ir(reverse, block_size=16)
    assert text.count("i32 1, i32 1, i32 16, i32 1, i32 1, i32 0") == 2
