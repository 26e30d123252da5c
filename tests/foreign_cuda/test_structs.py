"""Structs in CUDA kernels on the host CPU: __shared__ arrays of structs (float3, a user's struct)
and struct parameters passed by value (ado.struct), against numpy, with derivatives with respect
to a struct's float fields; and what is refused."""
import numpy as np
import pytest

import adoffload as ado
from adoffload.errors import ArgumentError, CudaTranslationError

from .checks import check_derivatives, run
from .sources import STRUCTS
from .test_cuda_hunt import both_oracles

LJ = ado.struct(eps=ado.f64, sigma=ado.f64)
SCALE = ado.struct(a=ado.f32, shift=ado.i32, b=ado.f32)


@pytest.fixture(scope="module")
def mod():
    return ado.from_cuda(STRUCTS)


def reverse3_reference(x: np.ndarray, a: float, shift: int, b: float) -> np.ndarray:
    blocks = x.reshape(-1, 128, 3)
    v = blocks[:, (127 - np.arange(128) + shift) % 128].reshape(-1, 3)
    return np.stack([a * v[:, 0] + b, a * v[:, 1] ** 2, b * v[:, 2]], 1)


@pytest.mark.parametrize("language", ["cuda", "hip"])
def test_a_float3_tile_and_a_struct_of_mixed_fields(mod, language):
    source = mod if language == "cuda" else ado.from_hip(STRUCTS)      # HIP passes the struct byref
    k = source.kernel("reverse3", s=SCALE, x=ado.In[ado.f32], y=ado.Out[ado.f32])
    x = np.random.default_rng(60).random((256, 3), dtype=np.float32)
    expected = reverse3_reference(x, 2.0, 5, 0.5)
    for given in [((2.0, 5, 0.5),), (dict(a=2.0, shift=5, b=0.5),), (np.float32(2.0), 5, np.float32(0.5))]:
        y = np.zeros_like(x)
        k(*given, x, y, blocks=2, threads=128)        # a tuple, a dict, or the fields one by one
        np.testing.assert_allclose(y, expected, rtol=1e-6)
    y = np.zeros_like(x)
    k(x=x, y=y, s=dict(a=2.0, shift=5, b=0.5), blocks=2, threads=128)
    np.testing.assert_allclose(y, expected, rtol=1e-6)


def atoms() -> np.ndarray:
    """128 atoms on two 4x4x4 grids of spacing 1.1, jittered (no pair too close)."""
    grid = np.stack(np.meshgrid(*[np.arange(4.0)] * 3, indexing="ij"), -1).reshape(-1, 3) * 1.1
    return np.concatenate([grid, grid]) + np.random.default_rng(61).uniform(-0.1, 0.1, (128, 3))


def tile_energy_reference(pos: np.ndarray, eps: float, sigma: float) -> np.ndarray:
    out = []
    for block in pos.reshape(2, 64, 3):
        r2 = ((block[:, None] - block[None]) ** 2).sum(-1)
        np.fill_diagonal(r2, np.inf)
        s6 = (sigma * sigma / r2) ** 3
        out.append((2 * eps * (s6 * s6 - s6)).sum(1))
    return np.concatenate(out)


def test_shared_structs_and_struct_parameters_with_derivatives(mod):
    k = mod.kernel("tile_energy", p=LJ, pos=ado.In[ado.f64], energy=ado.Out[ado.f64])
    assert k.specialize((64,)).shared[0].shape == (64 * 3,)      # Atom tile[64]: its fields, flattened
    values = dict(p_eps=np.float64(1.5), p_sigma=np.float64(0.9), pos=atoms(), energy=np.zeros(128))
    launch = dict(blocks=2, threads=64)
    np.testing.assert_allclose(run(k, values, launch)["energy"], tile_energy_reference(values["pos"], 1.5, 0.9),
                               rtol=1e-13)
    check_derivatives(k, ["p_eps", "p_sigma", "pos"], values, launch)


def test_wrt_a_struct_means_its_float_fields(mod):
    k = mod.kernel("tile_energy", p=LJ, pos=ado.In[ado.f64], energy=ado.Out[ado.f64])
    pos, seed = atoms(), np.random.default_rng(62).standard_normal(128)
    d_eps, d_sigma = np.zeros(1), np.zeros(1)
    ado.vjp(k, wrt=["p"])(dict(eps=1.5, sigma=0.9), pos, np.zeros(128), d_energy=seed.copy(), d_p_eps=d_eps,
                          d_p_sigma=d_sigma, blocks=2, threads=64)
    energy = tile_energy_reference(pos, 1.5, 0.9)
    np.testing.assert_allclose(d_eps, [seed @ energy / 1.5], rtol=1e-12)     # the energy is linear in eps
    h = 1e-6
    slope = (tile_energy_reference(pos, 1.5, 0.9 + h) - tile_energy_reference(pos, 1.5, 0.9 - h)) / (2 * h)
    np.testing.assert_allclose(d_sigma, [seed @ slope], rtol=1e-6)
    shadows = dict(eps=np.zeros(1), sigma=np.zeros(1))
    ado.vjp(k, wrt="p")(dict(eps=1.5, sigma=0.9), pos, np.zeros(128), d_energy=seed.copy(), d_p=shadows,
                        blocks=2, threads=64)
    np.testing.assert_allclose(shadows["eps"], d_eps, rtol=1e-13)    # the shadows as one dict of the float fields
    np.testing.assert_allclose(shadows["sigma"], d_sigma, rtol=1e-13)   # (atomic sums: any order)


def test_struct_declarations_are_checked(mod):
    with pytest.raises(CudaTranslationError, match="'s' was declared ado.struct\\(a=ado.f32, b=ado.f32\\) "
                                                   "\\(scalars: float, float\\), but the kernel's struct is "
                                                   "\\{ float, i32, float \\}"):
        mod.kernel("reverse3", s=ado.struct(a=ado.f32, b=ado.f32), x=ado.In[ado.f32], y=ado.Out[ado.f32])
    with pytest.raises(CudaTranslationError, match="'x' was declared ado.struct.* not a struct passed by value"):
        mod.kernel("reverse3", s=SCALE, x=LJ, y=ado.Out[ado.f32])
    with pytest.raises(ArgumentError, match="field 'v' must be an ado scalar type"):
        ado.struct(v=ado.In[ado.f32])
    k = mod.kernel("reverse3", s=SCALE, x=ado.In[ado.f32], y=ado.Out[ado.f32])
    x = np.zeros((128, 3), np.float32)
    with pytest.raises(ArgumentError, match="struct parameter 's' has the fields a, shift, b; missing b"):
        k(dict(a=1.0, shift=0), x, np.zeros_like(x), blocks=1, threads=128)


def test_struct_fields_may_not_shadow_parameters():
    mod = ado.from_cuda("struct P { float a; };\n"
                        "__global__ void f(P p, float p_a, float* y) { y[threadIdx.x] = p.a * p_a; }")
    with pytest.raises(ArgumentError, match="collide with other parameters: p_a"):
        mod.kernel("f", p=ado.struct(a=ado.f32), p_a=ado.f32, y=ado.Out[ado.f32])


def test_byte_fields_are_refused():
    mod = ado.from_cuda("struct P { float a; bool on; };\n"
                        "__global__ void f(P p, float* y) { y[threadIdx.x] = p.on ? p.a : 0.0f; }")
    with pytest.raises(CudaTranslationError, match="scalars: float, i8"):
        mod.kernel("f", p=ado.struct(a=ado.f32, on=ado.i32), y=ado.Out[ado.f32])


BLOCK_MIN = r"""
struct Best { double v; long long i; };             // a value and its index: mixed fields of 8 bytes
__global__ void block_min(const double* x, double* value, long long* index) {
  __shared__ Best s[64];
  int t = threadIdx.x;
  long long g = blockIdx.x * 64 + t;
  s[t].v = x[g] * x[g]; s[t].i = g;
  __syncthreads();
  for (int h = 32; h > 0; h >>= 1) {
    if (t < h && s[t + h].v < s[t].v) s[t] = s[t + h];
    __syncthreads();
  }
  if (t == 0) { value[blockIdx.x] = s[0].v; index[blockIdx.x] = s[0].i; }
}
"""


def test_shared_structs_of_mixed_fields_of_one_size():
    """A value-and-index reduction runs and has the right derivative (both oracles). The index field
    lives in the shared array of doubles, so its load is an integer load of differentiated memory;
    stored into the integer output, which nothing reads back, it carries no float (it was refused)."""
    k = ado.from_cuda(BLOCK_MIN).kernel("block_min", x=ado.In[ado.f64], value=ado.Out[ado.f64],
                                        index=ado.Out[ado.i64])
    assert k.specialize((64,)).shared[0].dtype == ado.f64
    x = np.random.default_rng(64).standard_normal(256)
    value, index = np.zeros(4), np.zeros(4, np.int64)
    k(x, value, index, blocks=4, threads=64)
    squares = (x * x).reshape(4, 64)
    np.testing.assert_array_equal(value, squares.min(1))
    np.testing.assert_array_equal(index, squares.argmin(1) + 64 * np.arange(4))
    both_oracles(k, ["x"], dict(x=x, value=np.zeros(4), index=np.zeros(4, np.int64)), dict(blocks=4, threads=64))


def test_shared_structs_of_mixed_sizes_are_refused():
    k = ado.from_cuda("""
struct Pair { float v; double w; };
__global__ void f(const float* x, double* out) {
  __shared__ Pair s[32];
  s[threadIdx.x].v = x[threadIdx.x]; s[threadIdx.x].w = 2.0 * x[threadIdx.x];
  __syncthreads();
  out[threadIdx.x] = s[31 - threadIdx.x].v + s[threadIdx.x].w;
}""").kernel("f", x=ado.In[ado.f32], out=ado.Out[ado.f64])
    with pytest.raises(CudaTranslationError, match="structs of such fields all of one size"):
        k.specialize((32,))


def test_a_kernel_writing_its_struct_parameter(mod):
    """The kernel's own copy may change: its loads then read the copy, not the fields."""
    k = ado.from_cuda("""
struct P { double a, b; };
__global__ void f(P p, const double* x, double* y) {
  int i = threadIdx.x;
  if (x[i] > 0.5) p.a = 2.0 * p.b;
  y[i] = p.a * x[i];
}""").kernel("f", p=ado.struct(a=ado.f64, b=ado.f64), x=ado.In[ado.f64], y=ado.Out[ado.f64])
    x = np.random.default_rng(63).random(64)
    values, launch = dict(p_a=np.float64(3.0), p_b=np.float64(0.25), x=x, y=np.zeros(64)), dict(blocks=1, threads=64)
    np.testing.assert_allclose(run(k, values, launch)["y"], np.where(x > 0.5, 0.5, 3.0) * x, rtol=1e-15)
    check_derivatives(k, ["p_a", "p_b", "x"], values, launch)


def test_nested_structs_follow_c_alignment():
    k = ado.from_cuda("""
struct Inner { int n; double w; };
struct P { float a; double b; Inner in; };          // a at 0, b at 8, in.n at 16, in.w at 24
__global__ void f(P p, double* y) { y[threadIdx.x] = p.a + p.b * threadIdx.x + p.in.n * p.in.w; }
""").kernel("f", p=ado.struct(a=ado.f32, b=ado.f64, inner=ado.struct(n=ado.i32, w=ado.f64)), y=ado.Out[ado.f64])
    y = np.zeros(32)
    k(dict(a=1.5, b=2.0, inner=(3, 0.25)), y, blocks=1, threads=32)
    np.testing.assert_array_equal(y, 1.5 + 2.0 * np.arange(32) + 0.75)
    assert [p.name for p in k.specialize((32,)).signature.params][:4] == ["p_a", "p_b", "p_inner_n", "p_inner_w"]


@pytest.mark.parametrize("language", ["cuda", "hip"])
def test_struct_fields_are_uniform_across_the_block(language):
    """A loop bounded by struct fields holds barriers (HIP loads both fields as one <2 x i32>)."""
    source = """
struct Range { int lo, hi; };
__global__ void steps(Range r, const float* x, float* y) {
  __shared__ float s[64];
  int t = threadIdx.x;
  s[t] = x[t];
  __syncthreads();
  for (int k = r.lo; k < r.hi; ++k) { float v = s[(t + 1) % 64]; __syncthreads(); s[t] = v + k; __syncthreads(); }
  y[t] = s[t];
}"""
    mod = ado.from_cuda(source) if language == "cuda" else ado.from_hip(source)
    k = mod.kernel("steps", r=ado.struct(lo=ado.i32, hi=ado.i32), x=ado.In[ado.f32], y=ado.Out[ado.f32])
    x, y = np.arange(64, dtype=np.float32), np.zeros(64, np.float32)
    k((1, 4), x, y, blocks=1, threads=64)
    expected = x.copy()
    for step in range(1, 4):
        expected = np.roll(expected, -1) + step
    np.testing.assert_array_equal(y, expected)
