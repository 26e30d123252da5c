"""What from_cuda refuses, and how: clang's errors, mismatched parameters, unchecked pointers,
divergent barriers, out-of-bounds accesses (arrays and __shared__), bad launch shapes."""
import numpy as np
import pytest

import adoffload as ado
from adoffload.errors import ArgumentError, BoundsError, Error, ForeignCompileError, GridError

from .checks import needs_clang

SOURCE = r"""
__global__ void copy(const float* x, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = x[i];
}
__global__ void shift_shared(const float* x, float* y, int k) {
  __shared__ float s[64];
  int t = threadIdx.x;
  s[t + k] = x[t];
  __syncthreads();
  y[t] = s[t];
}
__global__ void divergent_barrier(const float* x, float* y) {
  __shared__ float s[64];
  int t = threadIdx.x;
  s[t] = x[t];
  if (t < 32) { __syncthreads(); y[t] = s[63 - t]; }
}
__global__ void loop_on_loaded_bound(const float* x, float* y, const int* steps) {
  __shared__ float s[64];
  int t = threadIdx.x;
  s[t] = x[t];
  for (int k = 0; k < steps[t]; ++k) { __syncthreads(); s[t] += 1.0f; }
  y[t] = s[t];
}
__global__ void loop_on_uniform_bound(const float* x, float* y, int steps) {
  __shared__ float s[64];
  __shared__ float total;
  int t = threadIdx.x;
  s[t] = x[t];
  if (t == 0) total = steps;
  __syncthreads();
  for (int k = 0; k < (int)total; ++k) { float v = s[(t + 1) % 64]; __syncthreads(); s[t] = v; __syncthreads(); }
  y[t] = s[t];
}
__global__ void warp_branch_with_a_bare_store(const float* x, float* out) {
  float v = x[blockIdx.x * blockDim.x + threadIdx.x];
  if (threadIdx.x < 32) {                           // the store is under no branch of its own
    for (int d = 16; d > 0; d >>= 1) v += __shfl_down_sync(0xffffffffu, v, d);
    out[blockIdx.x * 32 + threadIdx.x] = v;
  }
}
__global__ void shuffle_loop(const float* x, float* out) {  // each thread leaves the loop after its own trips
  float v = x[threadIdx.x];
  for (int k = 0; k < (int)(x[threadIdx.x] * 4.0f); ++k) v += __shfl_down_sync(0xffffffffu, v, 1);
  out[threadIdx.x] = v;
}
__global__ void through_pointer_table(float** table, float* y) { y[threadIdx.x] = table[0][threadIdx.x]; }
__global__ void on_a_watched_flag(const float* x, float* y, volatile int* flag) {
  __shared__ float s[64];
  int t = threadIdx.x;
  s[t] = x[t];
  if (t == 0) flag[blockIdx.x] = 1;                 // another block could set it too: threads may differ
  if (flag[blockIdx.x] != 0) { __syncthreads(); y[t] = s[63 - t]; }
}
__global__ void on_a_volatile_input(const float* x, float* y, volatile const int* flag) {
  __shared__ float s[64];
  int t = threadIdx.x;
  s[t] = x[t];
  if (flag[blockIdx.x] != 0) { __syncthreads(); y[t] = s[63 - t]; }
}
"""


@pytest.fixture(scope="module")
def mod():
    return ado.from_cuda(SOURCE)


@needs_clang
def test_clang_errors_carry_clangs_message():
    with pytest.raises(ForeignCompileError, match="undeclared identifier 'oops'") as info:
        ado.from_cuda("__global__ void f(float* x) { x[0] = oops; }")
    assert isinstance(info.value, Error)


def test_unknown_kernel_names_the_ones_there(mod):
    with pytest.raises(ArgumentError, match="no __global__ function 'cpy'.*copy"):
        mod.kernel("cpy", x=ado.In[ado.f32])


def test_parameters_must_match_the_kernel(mod):
    with pytest.raises(Error, match="has 3 parameters .*2 were declared"):
        mod.kernel("copy", x=ado.In[ado.f32], y=ado.Out[ado.f32])
    with pytest.raises(Error, match="'n' was declared ado.f32 but .* is i32"):
        mod.kernel("copy", x=ado.In[ado.f32], y=ado.Out[ado.f32], n=ado.f32)
    with pytest.raises(Error, match="'x' was declared ado.f32 but .* is ptr"):
        mod.kernel("copy", x=ado.f32, y=ado.Out[ado.f32], n=ado.i32)


def test_array_accesses_are_bounds_checked(mod):
    k = mod.kernel("copy", x=ado.In[ado.f32], y=ado.Out[ado.f32], n=ado.i32)
    with pytest.raises(BoundsError, match="index 50 is out of bounds .* array 'x' with shape \\(50,\\)"):
        k(np.ones(50, np.float32), np.zeros(64, np.float32), 64, blocks=1, threads=64)


def test_shared_accesses_are_bounds_checked(mod):
    k = mod.kernel("shift_shared", x=ado.In[ado.f32], y=ado.Out[ado.f32], k=ado.i32)
    y = np.zeros(64, np.float32)
    k(np.arange(64, dtype=np.float32), y, 0, blocks=1, threads=64)
    np.testing.assert_array_equal(y, np.arange(64))
    with pytest.raises(BoundsError, match="index 64 is out of bounds .* shared array #0"):
        k(np.ones(64, np.float32), y, 1, blocks=1, threads=64)


def test_shuffles_next_to_unguarded_effects_get_guards(mod):
    """Warp 0's body runs on every thread; its load and store are guarded by ``threadIdx.x < 32``."""
    k = mod.kernel("warp_branch_with_a_bare_store", x=ado.In[ado.f32], out=ado.Out[ado.f32])
    x = np.random.default_rng(70).random(128, dtype=np.float32)
    out = np.zeros(64, np.float32)
    k(x, out, blocks=2, threads=64)
    v = x.reshape(2, 64)[:, :32].astype(np.float64)
    lane = np.arange(32)
    for d in (16, 8, 4, 2, 1):
        v = v + v[:, np.where(lane + d < 32, lane + d, lane)]
    np.testing.assert_allclose(out, v.ravel(), rtol=1e-5)


def test_shuffles_in_a_loop_threads_leave_apart_are_refused(mod):
    k = mod.kernel("shuffle_loop", x=ado.In[ado.f32], out=ado.Out[ado.f32])
    with pytest.raises(Error, match="a warp shuffle runs under control flow that is not uniform"):
        k.specialize((64,))


@pytest.mark.parametrize("name", ["divergent_barrier", "loop_on_loaded_bound"])
def test_barriers_under_divergent_control_are_refused(mod, name):
    params = dict(x=ado.In[ado.f32], y=ado.Out[ado.f32])
    if name == "loop_on_loaded_bound":
        params["steps"] = ado.In[ado.i32]
    k = mod.kernel(name, **params)
    with pytest.raises(Error, match="__syncthreads\\(\\) runs under control flow that is not uniform"):
        k.specialize((64,))


def test_a_barrier_under_a_volatile_flag_the_kernel_writes_is_refused(mod):
    k = mod.kernel("on_a_watched_flag", x=ado.In[ado.f32], y=ado.Out[ado.f32], flag=ado.InOut[ado.i32])
    with pytest.raises(Error, match="a volatile load of memory the kernel writes"):
        k.specialize((64,))


def test_a_volatile_flag_nothing_writes_is_uniform(mod):
    k = mod.kernel("on_a_volatile_input", x=ado.In[ado.f32], y=ado.Out[ado.f32], flag=ado.In[ado.i32])
    x, y = np.arange(64, dtype=np.float32), np.zeros(64, np.float32)
    k(x, y, np.array([1], np.int32), blocks=1, threads=64)
    np.testing.assert_array_equal(y, x[::-1])


def test_a_broadcast_loop_bound_is_uniform(mod):
    k = mod.kernel("loop_on_uniform_bound", x=ado.In[ado.f32], y=ado.Out[ado.f32], steps=ado.i32)
    x, y = np.arange(64, dtype=np.float32), np.zeros(64, np.float32)
    k(x, y, 3, blocks=1, threads=64)
    np.testing.assert_array_equal(y, np.roll(x, -3))


def test_pointers_loaded_from_memory_are_refused(mod):
    k = mod.kernel("through_pointer_table", table=ado.In[ado.i64], y=ado.Out[ado.f32])
    with pytest.raises(Error, match="cannot bound-check"):
        k.specialize((32,))


def test_launch_shapes_are_checked(mod):
    k = mod.kernel("copy", x=ado.In[ado.f32], y=ado.Out[ado.f32], n=ado.i32)
    x, y = np.ones(8, np.float32), np.zeros(8, np.float32)
    with pytest.raises(GridError, match="more than 1024"):
        k(x, y, 8, blocks=1, threads=(64, 32))
    with pytest.raises(GridError, match="positive int"):
        k(x, y, 8, blocks=0, threads=8)
    with pytest.raises(GridError, match="2\\*\\*31 threads"):
        k(x, y, 8, blocks=2**22, threads=1024)
    with pytest.raises(GridError, match="blocks=B, threads=T"):
        k(x, y, 8, grid=8)


def test_writing_an_in_array_is_refused(mod):
    k = mod.kernel("copy", x=ado.In[ado.f32], y=ado.In[ado.f32], n=ado.i32)
    with pytest.raises(Error, match="writes array 'y' .*declared ado.In"):
        k.specialize((32,))


def test_template_instances_are_chosen_by_symbol():
    mod = ado.from_cuda("""
template <int K> __global__ void scale(float* x) { x[threadIdx.x] *= K; }
template __global__ void scale<2>(float*);
template __global__ void scale<3>(float*);
""")
    with pytest.raises(ArgumentError, match="names 2 kernels .*_Z5scaleILi2EEvPf"):
        mod.kernel("scale", x=ado.InOut[ado.f32])
    x = np.ones(32, np.float32)
    mod.kernel("_Z5scaleILi3EEvPf", x=ado.InOut[ado.f32])(x, blocks=1, threads=32)
    np.testing.assert_array_equal(x, 3)


@needs_clang
def test_unsupported_cuda_functions_say_so():
    with pytest.raises(ForeignCompileError, match="__activemask is not supported"):
        ado.from_cuda("__global__ void f(unsigned* x) { x[threadIdx.x] = __activemask(); }")


def test_struct_parameters_must_be_declared_as_structs():
    mod = ado.from_cuda("struct P { float a; int n; };\n"
                        "__global__ void f(P p, float* y) { y[threadIdx.x] = p.a * p.n; }")
    with pytest.raises(Error, match="'p'\\) is a struct \\{ float, i32 \\} passed by value; declare it .*ado.struct"):
        mod.kernel("f", p=ado.In[ado.f32], y=ado.Out[ado.f32])


def test_a_selected_pointer_is_checked_against_the_array_it_points_into():
    from .sources import DOUBLE_BUFFERED
    k = ado.from_cuda(DOUBLE_BUFFERED).kernel("pick", p=ado.In[ado.f64], q=ado.In[ado.f64], out=ado.Out[ado.f64],
                                              which=ado.i32, n=ado.i32)
    p, q, out = np.arange(10.0), np.arange(20.0), np.zeros(20)
    k(p, q, out, 0, 20, blocks=1, threads=32)
    np.testing.assert_array_equal(out, q * q)
    with pytest.raises(BoundsError, match="index 10 is out of bounds .* array 'p' with shape \\(10,\\)"):
        k(p, q, out, 1, 20, blocks=1, threads=32)


def test_recursive_device_functions_are_refused_by_name():
    mod = ado.from_cuda("__device__ int fib(int n) { return n < 2 ? n : fib(n - 1) + fib(n - 2); }\n"
                        "__global__ void f(int* y) { y[threadIdx.x] = fib(threadIdx.x % 10); }")
    with pytest.raises(Error, match="calls @_Z3fibi, which could not be inlined"):
        mod.kernel("f", y=ado.Out[ado.i32]).specialize((32,))


@needs_clang
def test_clang_output_is_cached_by_source_and_flags(tmp_path, monkeypatch):
    """A second compile of the same source needs no clang (the GPU machine has none); another
    source, or other flags, does."""
    from adoffload.sources.cuda import compile as cuda_compile
    monkeypatch.setenv("ADOFFLOAD_CACHE_DIR", str(tmp_path))
    source = "__global__ void twice(float* x) { x[threadIdx.x] *= 2.0f; }"
    first = cuda_compile.compile_to_llvm(source)

    def no_clang():
        raise ado.ToolNotFoundError("no clang here")
    monkeypatch.setattr(cuda_compile, "clang_command", no_clang)
    assert cuda_compile.compile_to_llvm(source) == first
    with pytest.raises(ado.ToolNotFoundError):
        cuda_compile.compile_to_llvm(source, options=("-DN=2",))
    with pytest.raises(ado.ToolNotFoundError):
        cuda_compile.compile_to_llvm(source + "\n")


SHARED_FLAG = r"""
__global__ void on_a_volatile_shared_flag(const float* x, float* y) {
  __shared__ float s[64];
  volatile __shared__ int go;
  int t = threadIdx.x;
  s[t] = x[t];
  if (t == 0) go = x[0] > 0.0f;
  __syncthreads();
  if (go) { y[t] = s[63 - t]; __syncthreads(); }   // the race check covers shared memory: alike for all
}
"""


@needs_clang
def test_a_volatile_shared_flag_after_a_barrier_is_uniform():
    k = ado.from_cuda(SHARED_FLAG).kernel("on_a_volatile_shared_flag", x=ado.In[ado.f32], y=ado.Out[ado.f32])
    x, y = np.arange(1, 65, dtype=np.float32), np.zeros(64, np.float32)
    k(x, y, blocks=1, threads=64)
    np.testing.assert_array_equal(y, x[::-1])


def test_debug_info_names_the_temporary_source_in_both_spellings():
    """clang writes the temporary file's path whole, or relative to the temporary root when the
    working directory is under that root too (a checkout in /tmp): both become "<cuda source>"."""
    from pathlib import Path

    from adoffload.sources.cuda.compile import _source_named
    path = Path("/tmp/adoffload-cuda-abc123/kernel.cu")
    text = ('!1 = !DIFile(filename: "/tmp/adoffload-cuda-abc123/kernel.cu", directory: "/work")\n'
            '!13 = !DIFile(filename: "adoffload-cuda-abc123/kernel.cu", directory: "/tmp")\n')
    named = _source_named(text, path, "cuda")
    assert "abc123" not in named and named.count('filename: "<cuda source>"') == 2
