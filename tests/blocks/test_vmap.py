"""jax.vmap of block kernels (adoffload/kernels/batching.py): the batch is a leading grid axis of block
extent 1 (grid rank 3: folded into axis 0), so blocks, shared memory, barriers and warps never mix
batch elements. Checked against a Python loop over the batch and against plain jnp, through
grad, jacfwd, jacrev and hessian, for kernels in our language and CUDA-source kernels. On a GPU
machine JAX's default device is the GPU, so the same tests exercise the CUDA handlers there."""
import numpy as np
import pytest

jax = pytest.importorskip("jax")
jax.config.update("jax_enable_x64", True)
import jax.numpy as jnp  # noqa: E402

import adoffload as ado  # noqa: E402

from . import kernels  # noqa: E402
from .warp_kernels import BLOCK, PAIRS, W  # noqa: E402


def _loop(f, *batches):
    """f applied to each batch element, stacked: what vmap must equal."""
    return np.stack([np.asarray(f(*xs)) for xs in zip(*batches)])


def _matmul(kernel):
    return ado.jax_kernel(kernel, out_shapes=lambda A, B: {"C": (A.shape[0], B.shape[1])})


def _warp_refs():
    """jnp versions of tests/blocks/warp_kernels.py (warps of W lanes, blocks of BLOCK threads)."""
    def per(x, n):
        return x.reshape(-1, n)

    def wsum(x):
        return (per(x * x, W).sum(axis=1, keepdims=True) * per(x, W)).reshape(-1)

    def wmax(x):
        return (per(jnp.sin(x), W).max(axis=1, keepdims=True) * per(x, W)).reshape(-1)

    def bsum(x):
        return (per(x * x, BLOCK).sum(axis=1, keepdims=True) * per(x, BLOCK)).reshape(-1)

    def shuffle(x):
        i = np.arange(x.shape[0])
        v = x[(i // W) * W + (i % W // 2 + 7) % W]
        return v * v * x
    return {"warp_sum": wsum, "warp_max": wmax, "block_sum": bsum, "shuffle": shuffle}


WARP_REFS = _warp_refs()


# ----------------------------------------------------------------------------- values

def test_vmap_of_a_shared_memory_exchange_equals_a_loop():
    f = ado.jax_kernel(kernels.reverse_in_block)
    x = np.random.default_rng(0).standard_normal((3, 16))
    got = jax.jit(jax.vmap(f))(x)
    np.testing.assert_array_equal(got, _loop(f, x))
    np.testing.assert_array_equal(got, x.reshape(3, 2, 8)[:, :, ::-1].reshape(3, 16))
    jaxpr = str(jax.make_jaxpr(jax.vmap(f))(x))
    assert "while" not in jaxpr and "scan" not in jaxpr        # one batched kernel, not a loop


@pytest.mark.parametrize("in_axes", [(0, None), (None, 0), (0, 0), (1, None)])
def test_vmap_of_the_tiled_matmul_matches_jnp(in_axes):
    rng = np.random.default_rng(1)
    A = rng.standard_normal((3, 8, 8) if in_axes[0] == 0 else (8, 3, 8) if in_axes[0] == 1 else (8, 8))
    B = rng.standard_normal((3, 8, 4) if in_axes[1] == 0 else (8, 4))
    f = _matmul(kernels.tiled_matmul)
    got = jax.vmap(f, in_axes=in_axes)(A, B)
    expected = jax.vmap(lambda a, b: jnp.dot(a, b, precision="highest"), in_axes=in_axes)(A, B)
    np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-13)


@pytest.mark.parametrize("name", sorted(WARP_REFS))
def test_vmap_of_warp_and_block_operations_equals_a_loop_and_jnp(name):
    block, _ = PAIRS[name]
    f = ado.jax_kernel(block)
    x = np.random.default_rng(2).standard_normal((3, 2 * BLOCK))
    got = jax.vmap(f)(x)
    np.testing.assert_array_equal(got, _loop(f, x))
    np.testing.assert_allclose(got, jax.vmap(WARP_REFS[name])(x), rtol=1e-13, atol=1e-13)


def test_vmap_with_a_batched_trip_count_around_barriers():
    """smooth's barriers sit in a loop of ``steps`` rounds: per batch element a different count,
    uniform inside each block since a block holds one element."""
    f = ado.jax_kernel(kernels.smooth)
    x = np.random.default_rng(3).standard_normal((3, 32))
    steps = np.array([0, 2, 5])
    got = jax.vmap(f)(x, steps)
    np.testing.assert_array_equal(got, _loop(f, x, steps))


def _cube_reference(x):
    g0, g1, g2 = x.shape
    xb = x.reshape(g0 // 2, 2, g1 // 2, 2, g2 // 8, 8)
    mirrored = jnp.sin(xb)[:, ::-1, :, ::-1, :, ::-1]
    block_sum = xb.sum(axis=(1, 3, 5), keepdims=True)
    bi, bj, bk = np.meshgrid(np.arange(g0 // 2), np.arange(g1 // 2), np.arange(g2 // 8), indexing="ij")
    code = (100 * bi + 10 * bj + bk)[:, None, :, None, :, None]
    return (mirrored * xb + block_sum + code).reshape(x.shape)


def test_vmap_of_a_grid_rank_three_block_kernel_folds_the_batch_into_whole_blocks():
    f = ado.jax_kernel(kernels.cube_mirror)
    x = np.random.default_rng(4).standard_normal((3, 4, 2, 16))
    got = jax.vmap(f)(x)
    np.testing.assert_array_equal(got, _loop(f, x))
    np.testing.assert_allclose(got, jax.vmap(_cube_reference)(x), rtol=1e-13, atol=1e-13)


def test_vmap_of_vmap_of_a_block_kernel():
    f = ado.jax_kernel(kernels.reverse_in_block)
    x = np.random.default_rng(5).standard_normal((2, 3, 16))
    np.testing.assert_array_equal(jax.vmap(jax.vmap(f))(x), x.reshape(2, 3, 2, 8)[..., ::-1].reshape(2, 3, 16))


# ----------------------------------------------------------------------------- derivatives

@pytest.mark.parametrize("name", ["warp_max", "block_sum"])       # a lane picked by value; a block-wide sum
def test_vmap_of_grad_equals_a_loop_of_grads(name):
    f, ref = ado.jax_kernel(PAIRS[name][0]), WARP_REFS[name]
    x = np.random.default_rng(6).standard_normal((3, 2 * BLOCK))

    def loss(fn):
        return lambda x: jnp.sum(jnp.sin(fn(x)))
    got = jax.vmap(jax.grad(loss(f)))(x)
    np.testing.assert_allclose(got, _loop(jax.grad(loss(f)), x), rtol=1e-14, atol=1e-14)
    np.testing.assert_allclose(got, jax.vmap(jax.grad(loss(ref)))(x), rtol=1e-10, atol=1e-10)


def _matmul_pair(kernel, prepare):
    """sin(kernel(A, B)) and the same with jnp, for a fixed B."""
    B = np.random.default_rng(7).standard_normal((4, 8))
    f = _matmul(kernel)
    return (lambda A: jnp.sin(f(A, B))), (lambda A: jnp.sin(jnp.dot(prepare(A), B, precision="highest")))


def test_jacfwd_and_jacrev_of_the_tiled_matmul_match_jnp():
    """jacfwd batches the tangent kernel, jacrev the adjoint (a tile refilled, no tape)."""
    ours, theirs = _matmul_pair(kernels.tiled_matmul, lambda A: A)
    A = np.random.default_rng(8).standard_normal((8, 4))
    for transform in (jax.jacfwd, jax.jacrev):
        np.testing.assert_allclose(transform(ours)(A), transform(theirs)(A), rtol=1e-12, atol=1e-13)


def test_hessian_and_vmap_of_grad_through_a_dynamic_tape_match_jnp():
    """The rotated tile keeps a dynamic tape, sized over the batched grid. hessian is jacfwd of
    jacrev: its batch folds into grid axis 0 of the rank-3 adjoint, and the tape's per-thread
    offsets (shaped like the grid) fold with it."""
    ours, theirs = _matmul_pair(kernels.tiled_matmul_rotated, jnp.sin)
    rng = np.random.default_rng(9)
    A, batch = rng.standard_normal((8, 4)), rng.standard_normal((2, 8, 4))
    np.testing.assert_allclose(jax.hessian(lambda A: jnp.sum(ours(A)))(A),
                               jax.hessian(lambda A: jnp.sum(theirs(A)))(A), rtol=1e-11, atol=1e-12)
    got = jax.vmap(jax.grad(lambda A: jnp.sum(ours(A))))(batch)
    np.testing.assert_allclose(got, jax.vmap(jax.grad(lambda A: jnp.sum(theirs(A))))(batch), rtol=1e-12,
                               atol=1e-13)


def test_jacobians_of_a_grid_rank_three_block_kernel_match_jnp():
    f = ado.jax_kernel(kernels.cube_mirror)
    x = np.random.default_rng(10).standard_normal((2, 2, 8))
    for transform in (jax.jacfwd, jax.jacrev):
        np.testing.assert_allclose(transform(f)(x), transform(_cube_reference)(x), rtol=1e-12, atol=1e-13)


# ----------------------------------------------------------------------------- CUDA-source kernels

@pytest.fixture(scope="module")
def cuda_module():
    from tests.foreign_cuda.sources import KERNELS
    return ado.from_cuda(KERNELS)


def test_vmap_of_a_cuda_block_reduction_and_of_its_gradient(cuda_module):
    k = cuda_module.kernel("block_sum_d", x=ado.In[ado.f64], out=ado.Out[ado.f64], n=ado.i32)
    f = ado.jax_kernel(k, blocks=3, threads=128, out_shapes={"out": 3})
    x = np.random.default_rng(11).standard_normal((2, 300))
    got = jax.vmap(f, in_axes=(0, None))(x, 300)
    np.testing.assert_array_equal(got, _loop(lambda xi: f(xi, 300), x))
    np.testing.assert_allclose(got, np.pad(x * x, ((0, 0), (0, 84))).reshape(2, 3, 128).sum(axis=2), rtol=1e-13)
    w = jnp.asarray([1.0, -2.0, 0.5])
    grads = jax.vmap(jax.grad(lambda x: jnp.vdot(f(x, 300), w)))(x)
    np.testing.assert_allclose(grads, 2 * x * np.repeat(np.asarray(w), 128)[:300], rtol=1e-13)


def test_jacfwd_and_jacrev_of_a_cuda_warp_shuffle_kernel(cuda_module):
    k = cuda_module.kernel("warp_sum", x=ado.In[ado.f64], out=ado.Out[ado.f64])
    f = ado.jax_kernel(k, blocks=2, threads=64, out_shapes={"out": 2})
    x = np.random.default_rng(12).standard_normal(128)

    def ours(x):
        return jnp.sin(f(x))

    def theirs(x):
        return jnp.sin(x.reshape(2, 64).sum(axis=1))
    for transform in (jax.jacfwd, jax.jacrev):
        np.testing.assert_allclose(transform(ours)(x), transform(theirs)(x), rtol=1e-12, atol=1e-13)
