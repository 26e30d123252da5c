"""CUDA C kernels compiled by clang, run on the host CPU (barriers through the host block split):
primal results against numpy, derivatives against central differences and <Jv,w> = <v,J^T w>."""
import numpy as np
import pytest

import adoffload as ado

from .checks import check_derivatives
from .sources import KERNELS


@pytest.fixture(scope="module")
def mod():
    return ado.from_cuda(KERNELS)


def lj_reference(pos, eps, sigma):
    d = pos[:, None] - pos[None]
    r2 = (d ** 2).sum(-1)
    np.fill_diagonal(r2, np.inf)
    s6 = (sigma * sigma / r2) ** 3
    return ((24 * eps * (2 * s6 * s6 - s6) / r2)[..., None] * d).sum(1), (2 * eps * (s6 * s6 - s6)).sum()


def test_the_module_lists_its_kernels(mod):
    assert {"saxpy", "block_sum", "stencil", "newton_sqrt", "lj", "warp_sum"} <= set(mod.names())


def test_saxpy(mod):
    k = mod.kernel("saxpy", a=ado.f32, x=ado.In[ado.f32], y=ado.InOut[ado.f32], n=ado.i32)
    rng = np.random.default_rng(0)
    x, y = rng.random(1000, dtype=np.float32), rng.random(1000, dtype=np.float32)
    expected = np.float32(2.5) * x + y
    k(np.float32(2.5), x, y, 1000, blocks=8, threads=128)       # 1024 threads, 24 guarded off
    np.testing.assert_allclose(y, expected, rtol=2e-7)     # clang CUDA contracts a*x+y into an fma


def test_grid_stride_loop_reads_grid_dim(mod):
    k = mod.kernel("daxpy", a=ado.f64, x=ado.In[ado.f64], y=ado.InOut[ado.f64], n=ado.i32)
    x, y = np.arange(1000.0), np.ones(1000)
    k(3.0, x, y, 1000, blocks=2, threads=64)                   # 128 threads, each takes ~8 elements
    np.testing.assert_allclose(y, 3.0 * x + 1.0, rtol=1e-15)


def test_shared_memory_block_reduction(mod):
    k = mod.kernel("block_sum", x=ado.In[ado.f32], out=ado.Out[ado.f32], n=ado.i32)
    x = np.random.default_rng(1).random(1000, dtype=np.float32)
    out = np.zeros(8, np.float32)
    k(x, out, 1000, blocks=8, threads=128)
    partial = np.add.reduceat(np.pad(x.astype(np.float64) ** 2, (0, 24)), np.arange(0, 1024, 128))
    np.testing.assert_allclose(out, partial, rtol=1e-5)


def test_warp_shuffle_reduction(mod):
    k = mod.kernel("warp_sum", x=ado.In[ado.f64], out=ado.Out[ado.f64])
    x = np.random.default_rng(2).standard_normal(256)
    out = np.zeros(4)
    k(x, out, blocks=4, threads=64)
    np.testing.assert_allclose(out, x.reshape(4, 64).sum(1), rtol=1e-13)


def test_two_dimensional_stencil(mod):
    k = mod.kernel("stencil", u=ado.In[ado.f64], v=ado.Out[ado.f64], nx=ado.i32, ny=ado.i32)
    ny, nx = 20, 37
    u = np.random.default_rng(3).random((ny, nx))
    v = np.zeros_like(u)
    k(u, v, nx, ny, blocks=(3, 3), threads=(16, 8))            # 2-D arrays are passed flattened
    c = u[1:-1, 1:-1]
    expected = np.zeros_like(u)
    expected[1:-1, 1:-1] = 0.25 * (u[:-2, 1:-1] + u[2:, 1:-1] + u[1:-1, :-2] + u[1:-1, 2:]) - np.sin(c) * c
    np.testing.assert_allclose(v, expected, rtol=1e-14, atol=1e-15)


def test_data_dependent_loop(mod):
    k = mod.kernel("newton_sqrt", a=ado.In[ado.f64], r=ado.Out[ado.f64], n=ado.i32)
    a = np.random.default_rng(4).random(300) * 100 + 0.01
    r = np.zeros_like(a)
    k(a, r, 300, blocks=3, threads=128)
    np.testing.assert_allclose(r, np.sqrt(a), rtol=1e-12)


def test_lennard_jones_with_atomics(mod):
    k = mod.kernel("lj", pos=ado.In[ado.f64], force=ado.Out[ado.f64], energy=ado.Out[ado.f64], n=ado.i32,
                   eps=ado.f64, sigma=ado.f64)
    pos = np.random.default_rng(5).random((20, 3)) * 4
    force, energy = np.zeros((20, 3)), np.zeros(1)
    k(pos, force, energy, 20, 1.0, 0.9, blocks=1, threads=32)
    f_ref, e_ref = lj_reference(pos, 1.0, 0.9)
    np.testing.assert_allclose(force, f_ref, rtol=1e-12, atol=1e-9)
    np.testing.assert_allclose(energy[0], e_ref, rtol=1e-12)


# --- derivatives ------------------------------------------------------------------------------

def test_saxpy_derivatives(mod):
    k = mod.kernel("daxpy", a=ado.f64, x=ado.In[ado.f64], y=ado.InOut[ado.f64], n=ado.i32)
    rng = np.random.default_rng(6)
    values = dict(a=np.float64(1.5), x=rng.standard_normal(300), y=rng.standard_normal(300), n=300)
    _, grads = check_derivatives(k, ["a", "x"], values, dict(blocks=2, threads=64))
    assert grads["a"].shape == (1,)


def test_block_reduction_derivatives(mod):
    k = mod.kernel("block_sum_d", x=ado.In[ado.f64], out=ado.Out[ado.f64], n=ado.i32)
    values = dict(x=np.random.default_rng(7).standard_normal(300), out=np.zeros(3), n=300)
    _, grads = check_derivatives(k, ["x"], values, dict(blocks=3, threads=128))
    assert np.all(grads["x"] != 0)


def test_warp_shuffle_derivatives(mod):
    k = mod.kernel("warp_sum", x=ado.In[ado.f64], out=ado.Out[ado.f64])
    values = dict(x=np.random.default_rng(8).standard_normal(128), out=np.zeros(2))
    _, grads = check_derivatives(k, ["x"], values, dict(blocks=2, threads=64), seed=1)


def test_stencil_derivatives(mod):
    k = mod.kernel("stencil", u=ado.In[ado.f64], v=ado.Out[ado.f64], nx=ado.i32, ny=ado.i32)
    values = dict(u=np.random.default_rng(9).random((12, 21)), v=np.zeros((12, 21)), nx=21, ny=12)
    check_derivatives(k, ["u"], values, dict(blocks=(2, 2), threads=(16, 8)))


def test_data_dependent_loop_derivatives(mod):
    k = mod.kernel("newton_sqrt", a=ado.In[ado.f64], r=ado.Out[ado.f64], n=ado.i32)
    a = np.random.default_rng(10).random(100) * 10 + 0.5
    _, grads = check_derivatives(k, ["a"], dict(a=a, r=np.zeros(100), n=100), dict(blocks=1, threads=128))


def test_lennard_jones_derivatives(mod):
    k = mod.kernel("lj", pos=ado.In[ado.f64], force=ado.Out[ado.f64], energy=ado.Out[ado.f64], n=ado.i32,
                   eps=ado.f64, sigma=ado.f64)
    pos = np.random.default_rng(11).random((12, 3)) * 3
    values = dict(pos=pos, force=np.zeros((12, 3)), energy=np.zeros(1), n=12, eps=np.float64(1.0),
                  sigma=np.float64(0.8))
    check_derivatives(k, ["pos", "sigma"], values, dict(blocks=1, threads=32))


def test_second_order_hessian_vector_product(mod):
    """jvp(vjp(k)): the tangent of the gradient against central differences of the gradient."""
    k = mod.kernel("stencil", u=ado.In[ado.f64], v=ado.Out[ado.f64], nx=ado.i32, ny=ado.i32)
    rng = np.random.default_rng(12)
    u, w, du = rng.random((12, 21)), rng.standard_normal((12, 21)), rng.standard_normal((12, 21))
    launch = dict(blocks=(2, 2), threads=(16, 8))

    def gradient(u):
        g = np.zeros_like(u)
        ado.vjp(k, wrt=["u"])(u, np.zeros_like(u), 21, 12, d_u=g, d_v=w.copy(), **launch)
        return g
    hvp = np.zeros_like(u)
    ado.jvp(ado.vjp(k, wrt=["u"]), wrt=["u"])(u, np.zeros_like(u), 21, 12, d_u=np.zeros_like(u), d_v=w.copy(),
                                              d2_u=du, d2_v=np.zeros_like(u), d_d_u=hvp, d_d_v=np.zeros_like(u),
                                              **launch)
    h = 1e-5
    expected = (gradient(u + h * du) - gradient(u - h * du)) / (2 * h)
    assert np.abs(expected).max() > 0.1
    np.testing.assert_allclose(hvp, expected, rtol=1e-6, atol=1e-8)


def test_forward_mode_with_several_tangents(mod):
    k = mod.kernel("daxpy", a=ado.f64, x=ado.In[ado.f64], y=ado.InOut[ado.f64], n=ado.i32)
    rng = np.random.default_rng(13)
    x, y, dx = rng.standard_normal(100), rng.standard_normal(100), rng.standard_normal((3, 100))
    dy = np.zeros((3, 100))
    ado.jvp(k, wrt=["x"], width=3)(2.0, x, y, 100, d_x=dx, d_y=dy, blocks=1, threads=64)
    np.testing.assert_allclose(dy, 2.0 * dx, rtol=1e-15)


def test_ptx_of_the_adjoint_has_real_barriers_and_shuffles(mod):
    """The NVIDIA build (no GPU needed): shared memory, bar.sync and shfl.sync in the reverse kernel."""
    k = mod.kernel("warp_sum", x=ado.In[ado.f64], out=ado.Out[ado.f64])
    ptx = ado.vjp(k, wrt=["x"]).specialize((64,)).compiled("nvptx", arch="sm_90").ptx
    assert "bar.sync" in ptx and "shfl.sync" in ptx and ".shared" in ptx


def test_tiled_matmul_with_2d_shared_tiles_and_its_derivatives():
    from .sources import TILED_MATMUL
    k = ado.from_cuda(TILED_MATMUL).kernel("matmul", A=ado.In[ado.f64], B=ado.In[ado.f64], C=ado.Out[ado.f64],
                                           n=ado.i32, k=ado.i32, m=ado.i32)
    rng = np.random.default_rng(14)
    A, B = rng.standard_normal((10, 13)), rng.standard_normal((13, 9))
    values = dict(A=A, B=B, C=np.zeros((10, 9)), n=10, k=13, m=9)
    launch = dict(blocks=(2, 2), threads=(8, 8))                # ragged edges: guards in the tile loads
    from .checks import run
    np.testing.assert_allclose(run(k, values, launch)["C"], A @ B, rtol=1e-13)
    check_derivatives(k, ["A", "B"], values, launch)


SHUFFLES = r"""
__global__ void ldg_vector(const float* x, float* y) {     // __ldg, float4 loads (128-bit)
  int t = threadIdx.x;
  float4 q = __ldg(reinterpret_cast<const float4*>(x) + t / 4);
  float parts[4] = {q.x, q.y, q.z, q.w};
  y[t] = parts[t % 4] * 2.0f + __ldg(&x[t]);
}
__global__ void shuffles(const float* x, float* down, float* up, float* xo, float* idx, int* iv) {
  int t = threadIdx.x, i = blockIdx.x * blockDim.x + t;
  float v = x[i];
  down[i] = __shfl_down_sync(0xffffffffu, v, 3, 8);
  up[i] = __shfl_up_sync(0xffffffffu, v, 2, 8);
  xo[i] = __shfl_xor_sync(0xffffffffu, v, 5);
  idx[i] = __shfl_sync(0xffffffffu, v, (t * 7) % 32);
  iv[i] = __shfl_xor_sync(0xffffffffu, t * 3, 1);
}
"""


def test_ldg_and_vector_loads():
    k = ado.from_cuda(SHUFFLES).kernel("ldg_vector", x=ado.In[ado.f32], y=ado.Out[ado.f32])
    x, y = np.arange(64, dtype=np.float32), np.zeros(64, np.float32)
    k(x, y, blocks=1, threads=64)
    np.testing.assert_array_equal(y, 3 * x)


def test_shuffle_flavours_follow_cuda_semantics():
    k = ado.from_cuda(SHUFFLES).kernel("shuffles", x=ado.In[ado.f32], down=ado.Out[ado.f32], up=ado.Out[ado.f32],
                                       xo=ado.Out[ado.f32], idx=ado.Out[ado.f32], iv=ado.Out[ado.i32])
    x = np.random.default_rng(15).random(128, dtype=np.float32)
    outs = [np.zeros(128, np.float32) for _ in range(4)] + [np.zeros(128, np.int32)]
    k(x, *outs, blocks=2, threads=64)
    t = np.arange(128) % 64
    lane, warp_base = t % 32, np.arange(128) - t % 32
    down_src = np.where(lane % 8 + 3 < 8, lane + 3, lane)
    up_src = np.where(lane % 8 >= 2, lane - 2, lane)
    np.testing.assert_array_equal(outs[0], x[warp_base + down_src])
    np.testing.assert_array_equal(outs[1], x[warp_base + up_src])
    np.testing.assert_array_equal(outs[2], x[warp_base + (lane ^ 5)])
    np.testing.assert_array_equal(outs[3], x[warp_base + (t * 7) % 32])
    np.testing.assert_array_equal(outs[4], ((t - lane) + (lane ^ 1)) * 3)


def test_the_cuda_thread_index_makes_adjoint_updates_private(mod):
    """`blockIdx.x * blockDim.x + threadIdx.x` (32-bit) folds back into the thread id, so the race
    analysis proves d_x[i] private: no atomic in the adjoint (d_a, the same for all, is reduced)."""
    k = mod.kernel("saxpy", a=ado.f32, x=ado.In[ado.f32], y=ado.InOut[ado.f32], n=ado.i32)
    text = ado.vjp(k, wrt=["a", "x"]).specialize((128,)).module_text()
    assert "atomicrmw fadd" not in text and "uniform_fadd" in text


DYNAMIC_SHARED = r"""
__global__ void dsum(const double* x, double* out) {
  extern __shared__ double s[];
  int t = threadIdx.x;
  s[t] = x[blockIdx.x * blockDim.x + t];
  __syncthreads();
  for (int h = blockDim.x / 2; h > 0; h >>= 1) { if (t < h) s[t] += s[t + h]; __syncthreads(); }
  if (t == 0) out[blockIdx.x] = s[0];
}
"""


def test_dynamic_shared_memory_is_sized_by_the_launch():
    k = ado.from_cuda(DYNAMIC_SHARED).kernel("dsum", x=ado.In[ado.f64], out=ado.Out[ado.f64])
    x, out = np.random.default_rng(16).standard_normal(256), np.zeros(4)
    k(x, out, blocks=4, threads=64, shared_bytes=64 * 8)                 # <<<4, 64, 512>>>
    np.testing.assert_allclose(out, x.reshape(4, 64).sum(1), rtol=1e-13)
    with pytest.raises(ado.Error, match="out of bounds .* shared array #0"):
        k(x, out, blocks=4, threads=64, shared_bytes=32 * 8)             # too little: caught, not overrun
    with pytest.raises(ado.Error, match="launch it with shared_bytes="):
        k(x, out, blocks=4, threads=64)
    check_derivatives(k, ["x"], dict(x=x, out=out), dict(blocks=4, threads=64, shared_bytes=512))


def test_double_buffered_shared_memory_and_its_derivatives():
    """Pointers that switch between two __shared__ buffers are checked against the one they point into."""
    from .sources import DOUBLE_BUFFERED
    from .checks import run
    k = ado.from_cuda(DOUBLE_BUFFERED).kernel("smooth", x=ado.In[ado.f64], y=ado.Out[ado.f64], steps=ado.i32)
    x = np.random.default_rng(17).random(128)
    values, launch = dict(x=x, y=np.zeros(128), steps=3), dict(blocks=2, threads=64)
    a = x.reshape(2, 64).copy()
    for _ in range(3):
        a = 0.25 * np.roll(a, 1, 1) + 0.5 * a + 0.25 * np.roll(a, -1, 1) ** 2
    np.testing.assert_allclose(run(k, values, launch)["y"], a.reshape(-1), rtol=1e-14)
    check_derivatives(k, ["x"], values, launch)


def test_three_dimensional_blocks_and_grids():
    """threadIdx/blockIdx .x/.y/.z against numpy's indices; the shared slot of linear thread id t."""
    mod = ado.from_cuda(r"""
__global__ void where(int* out, int nx, int ny) {
  int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y;
  int z = blockIdx.z * blockDim.z + threadIdx.z;
  __shared__ int s[64];
  int t = threadIdx.x + 4 * (threadIdx.y + 4 * threadIdx.z);
  s[t] = t;
  __syncthreads();
  out[(z * ny + y) * nx + x] = x + 100 * y + 10000 * z + 1000000 * (s[63 - t] == 63 - t);
}""")
    out = np.zeros((8, 12, 16), np.int32)
    mod.kernel("where", out=ado.Out[ado.i32], nx=ado.i32, ny=ado.i32)(out, 16, 12, blocks=(4, 3, 2), threads=(4, 4, 4))
    z, y, x = np.meshgrid(np.arange(8), np.arange(12), np.arange(16), indexing="ij")
    np.testing.assert_array_equal(out, x + 100 * y + 10000 * z + 1000000)
