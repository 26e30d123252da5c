"""Faults and bad inputs of from_cuda kernels (issue 30), from the user's side: each one is an
adoffload.Error naming the kernel, the array or parameter and (with line tables) the source line,
never a dead process, a read past an array or a silently wrong value."""
import numpy as np
import pytest

import adoffload as ado
from adoffload.errors import BoundsError, CudaTranslationError, ForeignCompileError, KernelFaultError

from .checks import check_derivatives, needs_clang
from .sources import FAULTS

LINES = {name: n for n, text in enumerate(FAULTS.splitlines(), 1) for name in ("a[threadIdx.x + k]", "p[threadIdx.x]",
         "x[i] / d", "x[i] % d", "x[threadIdx.x] / d", "j * j") if name in text}


@pytest.fixture(scope="module")
def mod():
    return ado.from_cuda(FAULTS, options=["-gline-tables-only"])


def test_a_local_array_read_out_of_bounds_is_a_bounds_error(mod):
    k = mod.kernel("local_window", x=ado.In[ado.f64], y=ado.Out[ado.f64], k=ado.i32)
    x = np.arange(1.0, 5.0)
    y = np.zeros(4)
    k(x, y, 0, blocks=1, threads=4)
    np.testing.assert_array_equal(y, x * x)
    for shift in (1, 1_000_000, -5):                 # was a read of the thread's stack, or a segfault
        with pytest.raises(BoundsError, match="kernel 'local_window': index .* out of bounds .* local array #0"):
            k(x, np.zeros(4), shift, blocks=1, threads=4)
    y[:] = 0
    k(x, y, 0, blocks=1, threads=4)                  # later launches work
    np.testing.assert_array_equal(y, x * x)


def test_derivatives_through_a_checked_local_array(mod):
    k = mod.kernel("local_window", x=ado.In[ado.f64], y=ado.Out[ado.f64], k=ado.i32)
    values = dict(x=np.array([0.5, 1.5, -2.0, 3.0]), y=np.zeros(3), k=1)
    check_derivatives(k, ["x"], values, dict(blocks=1, threads=3))


def test_a_null_pointer_access_is_an_error_naming_the_line(mod):
    k = mod.kernel("maybe_null", x=ado.In[ado.f32], y=ado.Out[ado.f32], n=ado.i32)
    x, y = np.arange(4, dtype=np.float32) + 1, np.full(4, 7, np.float32)
    k(x, y, 1, blocks=1, threads=4)
    np.testing.assert_array_equal(y, x)
    line = LINES["p[threadIdx.x]"]
    with pytest.raises(BoundsError, match=f"kernel 'maybe_null': a load or store through a null pointer .* at line "
                                          f"{line} of <cuda source>"):
        k(x, y, 0, blocks=1, threads=4)              # was silently zeros: clang deleted the read as undefined


def test_a_literal_null_dereference_is_an_error():
    k = ado.from_cuda("__global__ void f(float* y) { const float* p = nullptr; y[threadIdx.x] = p[1]; }").kernel(
        "f", y=ado.Out[ado.f32])
    with pytest.raises(BoundsError, match="null pointer \\(element 1\\) at a line not known .*-gline-tables-only"):
        k(np.zeros(4, np.float32), blocks=1, threads=4)


@pytest.mark.parametrize("bounds_check", [True, False])
def test_integer_division_by_zero_is_a_kernel_fault(mod, bounds_check):
    k = mod.kernel("divide", x=ado.In[ado.i32], q=ado.Out[ado.i32], r=ado.Out[ado.i32], d=ado.i32,
                   bounds_check=bounds_check)
    x = np.array([-7, 7, 2**31 - 1, -2**31], np.int32)
    q, r = np.zeros(4, np.int32), np.zeros(4, np.int32)
    k(x, q, r, 3, blocks=1, threads=4)
    np.testing.assert_array_equal(q, np.trunc(x / 3).astype(np.int32))   # C truncates
    np.testing.assert_array_equal(r, x - 3 * q)
    with pytest.raises(KernelFaultError, match=f"kernel 'divide': integer division or modulo by zero \\('/' or '%'\\) "
                                               f"at line {LINES['x[i] / d']} of <cuda source>"):
        k(x, q, r, 0, blocks=1, threads=4)           # was SIGFPE: a dead process
    with pytest.raises(KernelFaultError, match="integer overflow .*most negative integer divided by -1"):
        k(x, q, r, -1, blocks=1, threads=4)
    k(x[:3].copy(), q[:3], r[:3], -1, blocks=1, threads=3)     # -1 without INT_MIN is fine
    np.testing.assert_array_equal(q[:3], -x[:3])


def test_64_bit_division_by_zero_is_a_kernel_fault(mod):
    k = mod.kernel("divide_long", x=ado.In[ado.i64], q=ado.Out[ado.i64], d=ado.i64)
    with pytest.raises(KernelFaultError, match=f"division or modulo by zero .* line {LINES['x[threadIdx.x] / d']} "):
        k(np.arange(4, dtype=np.int64), np.zeros(4, np.int64), 0, blocks=1, threads=4)


def test_signed_overflow_in_index_arithmetic_is_a_kernel_fault(mod):
    k = mod.kernel("squared_index", x=ado.In[ado.f32], y=ado.Out[ado.f32], j=ado.i32)
    x, y = np.arange(100, dtype=np.float32), np.zeros(4, np.float32)
    k(x, y, 9, blocks=1, threads=4)
    np.testing.assert_array_equal(y, x[81:85])
    # 65536 * 65536 wraps to 0 in 32 bits: x[0] would be read, inside the array, so no bounds check sees it
    with pytest.raises(KernelFaultError, match=f"kernel 'squared_index': integer overflow in a multiplication of "
                                               f"index arithmetic at line {LINES['j * j']} of <cuda source>"):
        k(x, y, 65536, blocks=1, threads=4)
    with pytest.raises(KernelFaultError, match="integer overflow in a multiplication"):
        k(x, y, 46341, blocks=1, threads=4)          # 46341**2 = 2**31 + 77207: just past INT_MAX


def test_a_pointer_declared_with_another_dtype_is_refused(mod):
    with pytest.raises(CudaTranslationError, match="kernel 'maybe_null': parameter 'x' was declared "
                                                   "ado.In\\[ado.f64, 1\\] \\(8-byte elements\\), but the kernel "
                                                   "accesses it as float \\(4-byte elements\\); declare it "
                                                   "ado.In\\[ado.f32\\]"):
        mod.kernel("maybe_null", x=ado.In[ado.f64], y=ado.Out[ado.f32], n=ado.i32)   # was garbage, silently
    with pytest.raises(CudaTranslationError, match="parameter 'y' was declared ado.Out\\[ado.f32, 1\\].*as double"):
        mod.kernel("local_window", x=ado.In[ado.f64], y=ado.Out[ado.f32], k=ado.i32)
    with pytest.raises(CudaTranslationError, match="parameter 'q' was declared ado.Out\\[ado.i32, 1\\].*as i64"):
        mod.kernel("divide_long", x=ado.In[ado.i64], q=ado.Out[ado.i32], d=ado.i64)


def test_same_sized_reinterpretation_is_accepted():
    """A float array updated through its bits (atomicCAS on (int*)p) is still an f32 array."""
    k = ado.from_cuda(r"""
__global__ void fmax_atomic(float* m, const float* x) {
  int* bits = (int*)m;
  int old = *bits;
  while (__int_as_float(old) < x[threadIdx.x]) {
    int seen = atomicCAS(bits, old, __float_as_int(x[threadIdx.x]));
    if (seen == old) break;
    old = seen;
  }
}""").kernel("fmax_atomic", m=ado.InOut[ado.f32], x=ado.In[ado.f32])
    m, x = np.zeros(1, np.float32), np.random.default_rng(3).random(64, dtype=np.float32)
    k(m, x, blocks=1, threads=64)
    assert m[0] == x.max()


@needs_clang
@pytest.mark.parametrize("call, why", [
    ('printf("%f\\n", y[0]);', "printf is not supported in adoffload's CUDA: adoffload kernels cannot print"),
    ("float* p = (float*)malloc(16); y[0] = p[0];", "malloc is not supported .*cannot allocate memory"),
    ("y[0] = clock64();", "clock64 is not supported .*no clocks"),
    ("assert(y[0] > 0);", "assert is not supported"),
    ("y[0] = __shfl_down(y[0], 1);", "__shfl_down is not supported .*use the _sync form"),
])
def test_unsupported_calls_are_named_with_their_line(call, why):
    with pytest.raises(ForeignCompileError, match=f"<cuda source>:3: {why}"):
        ado.from_cuda(f"__global__ void f(float* y) {{\n  y[1] = 2.0f;\n  {call}\n}}")


@needs_clang
def test_a_header_overload_mismatch_lists_candidates_without_macro_noise():
    with pytest.raises(ForeignCompileError) as info:
        ado.from_cuda("__global__ void f(short* y) {\n  atomicAdd(y, (short)1);\n}")
    message = str(info.value)
    assert "<cuda source>:2: no atomicAdd of adoffload's CUDA header takes these argument types" in message
    assert "ado_cuda.h:" in message and "candidate function not viable: no known conversion from 'short *'" in message
    assert "expanded from macro" not in message and "__ADO_ATOMIC" not in message


def test_operator_new_is_refused_by_name():
    source = ("__global__ void f(const float* x, float* y, int n) {\n  float* p = new float[n];\n"
              "  for (int i = 0; i < n; ++i) p[i] = x[i];\n  y[threadIdx.x] = p[n - 1 - threadIdx.x];\n"
              "  delete[] p;\n}")
    k = ado.from_cuda(source, options=["-gline-tables-only"]).kernel("f", x=ado.In[ado.f32], y=ado.Out[ado.f32],
                                                                     n=ado.i32)
    with pytest.raises(CudaTranslationError, match="kernel 'f' calls operator new\\[\\] at <cuda source>:2: kernels "
                                                   "cannot allocate memory"):
        k.specialize((4,))


def test_the_ptx_of_a_cuda_kernel_and_of_its_derivative(mod):
    """What docs/cuda.md shows: a kernel's PTX for one block shape, and its VJP's."""
    k = mod.kernel("local_window", x=ado.In[ado.f64], y=ado.Out[ado.f64], k=ado.i32)
    ptx = k.specialize((128,)).compiled("nvptx", arch="sm_90").ptx
    assert ".visible .entry" in ptx and ".target sm_90" in ptx
    vjp_ptx = ado.vjp(k, wrt=["x"]).specialize((128,)).compiled("nvptx", arch="sm_90").ptx
    assert ".visible .entry" in vjp_ptx and vjp_ptx != ptx


@pytest.mark.gpu
def test_faults_on_the_gpu(mod, cuda):
    """The same faults on an NVIDIA GPU, where an integer division by zero does not trap and a local
    or wrapped index would read another element: each is reported as on the host, and the device stays
    usable."""
    window = mod.kernel("local_window", x=ado.In[ado.f64], y=ado.Out[ado.f64], k=ado.i32)
    x = np.arange(1.0, 5.0)
    with pytest.raises(BoundsError, match="local array #0"):
        window(x, np.zeros(4), 1, blocks=1, threads=4, device="cuda")
    divide = mod.kernel("divide", x=ado.In[ado.i32], q=ado.Out[ado.i32], r=ado.Out[ado.i32], d=ado.i32)
    xi = np.array([-7, 7, 5, 9], np.int32)
    with pytest.raises(KernelFaultError, match=f"division or modulo by zero .* line {LINES['x[i] / d']} "):
        divide(xi, np.zeros(4, np.int32), np.zeros(4, np.int32), 0, blocks=1, threads=4, device="cuda")
    with pytest.raises(BoundsError, match="null pointer"):
        mod.kernel("maybe_null", x=ado.In[ado.f32], y=ado.Out[ado.f32], n=ado.i32)(
            x.astype(np.float32), np.zeros(4, np.float32), 0, blocks=1, threads=4, device="cuda")
    with pytest.raises(KernelFaultError, match="integer overflow in a multiplication"):
        mod.kernel("squared_index", x=ado.In[ado.f32], y=ado.Out[ado.f32], j=ado.i32)(
            np.arange(100, dtype=np.float32), np.zeros(4, np.float32), 65536, blocks=1, threads=4, device="cuda")
    y = np.zeros(4)
    window(x, y, 0, blocks=1, threads=4, device="cuda")
    np.testing.assert_array_equal(y, x * x)


def test_faults_under_jax_name_the_fault_and_line(mod):
    """On JAX's CPU device the call itself raises (docs/jax.md); a GPU handler records the fault for
    ``adoffload.jax.check_errors()`` instead, so this pins the host device."""
    jax = pytest.importorskip("jax")
    jnp = pytest.importorskip("jax.numpy")
    with jax.default_device(jax.devices("cpu")[0]):
        _faults_under_jax(mod, jnp)


def _faults_under_jax(mod, jnp):
    k = mod.kernel("divide", x=ado.In[ado.i32], q=ado.Out[ado.i32], r=ado.Out[ado.i32], d=ado.i32)
    f = ado.jax_kernel(k, blocks=1, threads=4, out_shapes={"q": 4, "r": 4})
    q, r = f(jnp.arange(4, dtype=jnp.int32), 3)
    np.testing.assert_array_equal(np.asarray(q), np.arange(4) // 3)
    with pytest.raises(Exception, match=f"kernel 'divide': integer division or modulo by zero .* at line "
                                        f"{LINES['x[i] / d']} of its source"):
        np.asarray(f(jnp.arange(4, dtype=jnp.int32), 0)[0])
    null = ado.jax_kernel(mod.kernel("maybe_null", x=ado.In[ado.f32], y=ado.Out[ado.f32], n=ado.i32),
                          blocks=1, threads=4, out_shapes={"y": 4})
    with pytest.raises(Exception, match=f"kernel 'maybe_null': a load or store through a null pointer at line "
                                        f"{LINES['p[threadIdx.x]']} of its source"):
        np.asarray(null(jnp.ones(4, jnp.float32), 0))


def test_index_overflow_on_threads_that_only_run_a_branch_speculatively_is_no_fault():
    """Warp 1 runs warp 0's ``if`` too (its shuffles must be reached by the whole block, speculate.py)
    and its t * k overflows there, but it makes none of the branch's accesses: no fault; warp 0's
    own overflow is one."""
    k = ado.from_cuda(r"""
__global__ void spec_index(const float* x, float* out, int k) {
  int t = threadIdx.x;
  if (t < 32) {
    float v = x[(t * k) >> 26];
    for (int d = 16; d > 0; d >>= 1) v += __shfl_down_sync(0xffffffffu, v, d);
    if (t == 0) out[blockIdx.x] = v;
  }
}""").kernel("spec_index", x=ado.In[ado.f32], out=ado.Out[ado.f32], k=ado.i32)
    x, out = np.arange(32, dtype=np.float32), np.zeros(1, np.float32)
    k(x, out, 1 << 26, blocks=1, threads=64)        # 63 * 2**26 does not fit an int; 31 * 2**26 does
    assert out[0] == x.sum()
    with pytest.raises(KernelFaultError, match="integer overflow in a multiplication of index arithmetic"):
        k(x, out, 1 << 27, blocks=1, threads=64)    # 16 * 2**27 = 2**31, on warp 0
