"""Stores that race between the blocks of a launch (analysis/races/block_stores.py): a derivative launch of
a kernel whose blocks each store their own value to one element is refused; with one block along
that axis, and for the forms that are no race, both derivative oracles hold."""
import numpy as np
import pytest

import adoffload as ado
from adoffload.errors import DifferentiationError

from .kernel_files import load_module
from .test_user_kernels import check_derivatives

RACY = """
@ado.kernel(block=8)
def guarded(x: ado.In[ado.f64], y: ado.Out[ado.f64]):
    i = ado.tid()
    s = ado.block_sum(x[i] * x[i])
    if ado.thread_id() == 0:
        y[0] = s

@ado.kernel(block=8)
def unguarded(x: ado.In[ado.f64], y: ado.Out[ado.f64]):
    i = ado.tid()
    y[0] = ado.block_sum(ado.sin(x[i]))

@ado.kernel(block=8)
def by_position(x: ado.In[ado.f64], y: ado.Out[ado.f64]):
    i = ado.tid()
    t = ado.thread_id()
    S = ado.shared(8, ado.f64)
    S[t] = x[i] * x[i]
    ado.sync_threads()
    y[t] = S[7 - t]

@ado.kernel(block=8)
def accumulate(x: ado.In[ado.f64], y: ado.InOut[ado.f64]):
    i = ado.tid()
    s = ado.block_sum(x[i] * x[i])
    if ado.thread_id() == 0:
        y[0] = y[0] + s

@ado.kernel(block=(1, 8))
def rows(x: ado.In[ado.f64, 2], y: ado.Out[ado.f64]):
    r, c = ado.tid()
    s = ado.block_sum(x[r, c] * x[r, c])
    if ado.thread_id()[1] == 0:
        y[r] = s

@ado.kernel(block=8)
def even_blocks(x: ado.In[ado.f64], flag: ado.In[ado.i64], y: ado.Out[ado.f64]):
    i = ado.tid()
    s = ado.block_sum(x[i] * x[i])
    if ado.block_id() % 2 == 0 and ado.thread_id() == 0:
        y[0] = s
    if flag[ado.block_id()] == 1 and ado.thread_id() == 1:
        y[1] = s

@ado.kernel
def plain_max(x: ado.In[ado.f64], y: ado.Out[ado.f64]):
    i = ado.tid()
    if x[i] > 0.5:
        y[0] = x[i]
"""

FINE = """
@ado.kernel(block=8)
def own_element(x: ado.In[ado.f64], y: ado.Out[ado.f64]):
    i = ado.tid()
    s = ado.block_sum(x[i] * x[i])
    if ado.thread_id() == 0:
        y[ado.block_id()] = s

@ado.kernel(block=8)
def first_block(x: ado.In[ado.f64], y: ado.Out[ado.f64]):
    i = ado.tid()
    s = ado.block_sum(x[i] * x[i])
    if ado.block_id() == 0 and ado.thread_id() == 0:
        y[0] = s

@ado.kernel(block=8)
def first_thread(x: ado.In[ado.f64], y: ado.Out[ado.f64]):
    i = ado.tid()
    s = ado.block_sum(x[i] * x[i])
    if i == 0:
        y[0] = s

@ado.kernel(block=8)
def first_threads(x: ado.In[ado.f64], y: ado.Out[ado.f64]):
    i = ado.tid()
    s = ado.block_sum(x[i] * x[i])
    if i < 8:
        y[0] = s

@ado.kernel(block=8)
def alike(x: ado.In[ado.f64], y: ado.Out[ado.f64], a: ado.f64):
    i = ado.tid()
    y[i] = x[i] * x[i]
    if ado.thread_id() == 0:
        y[0] = a * x[0] * x[0]

@ado.kernel(block=8)
def atomic(x: ado.In[ado.f64], y: ado.InOut[ado.f64]):
    i = ado.tid()
    s = ado.block_sum(x[i] * x[i])
    if ado.thread_id() == 0:
        ado.atomic_add(y, 0, s)
"""


@pytest.fixture(scope="module")
def racy(tmp_path_factory):
    return load_module(RACY, tmp_path_factory.mktemp("racy"), "racy")


@pytest.fixture(scope="module")
def fine(tmp_path_factory):
    return load_module(FINE, tmp_path_factory.mktemp("fine"), "fine")


def _x(n, seed=0):
    return np.random.default_rng(seed).uniform(0.1, 1.0, n)


RACES = [   # kernel, arguments, active, outputs, racing grid, one-block grid, axis
    ("guarded", lambda: {"x": _x(16), "y": np.zeros(1)}, ["x"], ["y"], 16, 8, 0),
    ("unguarded", lambda: {"x": _x(16), "y": np.zeros(1)}, ["x"], ["y"], 16, 8, 0),
    ("by_position", lambda: {"x": _x(16), "y": np.zeros(8)}, ["x"], ["y"], 16, 8, 0),
    ("accumulate", lambda: {"x": _x(16), "y": np.ones(1)}, ["x"], ["y"], 16, 8, 0),
    ("rows", lambda: {"x": _x(48).reshape(3, 16), "y": np.zeros(3)}, ["x"], ["y"], (3, 16), (3, 8), 1),
    ("even_blocks", lambda: {"x": _x(32), "flag": np.ones(4, np.int64), "y": np.zeros(2)}, ["x"], ["y"], 32, 8, 0),
    ("plain_max", lambda: {"x": _x(16), "y": np.zeros(1)}, ["x"], ["y"], 16, 1, 0),
]


@pytest.mark.parametrize("case", RACES, ids=[c[0] for c in RACES])
@pytest.mark.parametrize("mode", ["jvp", "vjp"])
def test_derivative_of_a_store_racing_between_blocks_is_refused(racy, case, mode):
    """(plain_max's derivatives are refused as they are derived: every thread that passes its test
    stores, store_seeds.py's race within a block, whatever the grid.)"""
    name, make, active, outs, grid, _, axis = case
    kernel = getattr(racy, name)
    args = make()
    shadows = {f"d_{p}": np.zeros_like(args[p]) for p in set(active) | set(outs)}
    between = (rf"kernel '{name}' launched on a grid of \d+ (blocks|threads) along axis {axis}: the store to 'y' "
               rf"at .*racy.*:\d+ writes one element from each of them")
    within = rf"cannot differentiate the store at .*racy.*:\d+ in {dict(jvp='forward', vjp='reverse')[mode]} mode: all"
    with pytest.raises(DifferentiationError, match=within if name == "plain_max" else between):
        getattr(ado, mode)(kernel, tuple(active))(**args, **shadows, grid=grid)
    kernel(**make(), grid=grid)                 # the primal stays accepted (its result is whichever block stored last)


@pytest.mark.parametrize("case", RACES[:-1], ids=[c[0] for c in RACES[:-1]])
def test_one_block_along_the_racing_axis_is_no_race(racy, case):
    """(Not plain_max: its reverse mode is refused whatever the grid, see above.)"""
    name, make, active, outs, _, grid, _ = case
    check_derivatives(getattr(racy, name), make(), active, outs, grid)


FINE_CASES = [
    ("own_element", {"y": np.zeros(3)}, []),
    ("first_block", {"y": np.zeros(1)}, []),
    ("first_thread", {"y": np.zeros(1)}, []),
    ("first_threads", {"y": np.zeros(1)}, []),
    ("alike", {"y": np.zeros(24), "a": 1.5}, []),
    ("atomic", {"y": np.ones(1)}, []),
]


@pytest.mark.parametrize("case", FINE_CASES, ids=[c[0] for c in FINE_CASES])
def test_stores_that_do_not_race_between_blocks_are_differentiated(fine, case):
    name, extra, more_active = case
    args = {"x": _x(24), **{k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in extra.items()}}
    check_derivatives(getattr(fine, name), args, ["x"] + more_active, ["y"], 24)


def test_block_results_match_their_definition(fine):
    """own_element holds each block's sum of squares, alike a * x[0]^2 at 0 (every block stores it)."""
    x = _x(24)
    y = np.zeros(3)
    fine.own_element(x, y, grid=24)
    np.testing.assert_allclose(y, (x * x).reshape(3, 8).sum(axis=1), rtol=1e-13)
    y = np.zeros(24)
    fine.alike(x, y, 1.5, grid=24)
    np.testing.assert_allclose(y, np.concatenate([[1.5 * x[0] ** 2], x[1:] ** 2]), rtol=1e-13)
    d_x = np.zeros(24)
    ado.vjp(fine.alike, ("x",))(x=x, y=np.zeros(24), a=1.5, d_x=d_x, d_y=np.ones(24), grid=24)
    np.testing.assert_allclose(d_x, np.concatenate([[3.0 * x[0]], 2 * x[1:]]), rtol=1e-13)


def test_jax_grad_of_a_racing_store_is_refused_and_its_primal_is_not(racy):
    import jax
    import jax.numpy as jnp
    jax.config.update("jax_enable_x64", True)
    f = ado.jax_kernel(racy.guarded, grid=16, out_shapes={"y": (1,)})
    x = jnp.asarray(_x(16))
    assert f(x).shape == (1,)
    with pytest.raises(DifferentiationError, match="kernel 'guarded' launched on a grid of 2 blocks"):
        jax.grad(lambda v: f(v)[0])(x)
    one = ado.jax_kernel(racy.guarded, grid=8, out_shapes={"y": (1,)})
    np.testing.assert_allclose(jax.grad(lambda v: one(v)[0])(x[:8]), 2 * x[:8], rtol=1e-13)


BLOCK_SUMS = r"""
extern "C" __global__ void to_first(const float* x, float* out, int n) {
  __shared__ float s[64];
  int t = threadIdx.x, i = blockIdx.x * blockDim.x + t;
  s[t] = i < n ? x[i] * x[i] : 0.0f;
  __syncthreads();
  for (int k = 32; k > 0; k >>= 1) { if (t < k) s[t] += s[t + k]; __syncthreads(); }
  if (t == 0) out[0] = s[0];
}
extern "C" __global__ void to_own(const float* x, float* out, int n) {
  __shared__ float s[64];
  int t = threadIdx.x, i = blockIdx.x * blockDim.x + t;
  s[t] = i < n ? x[i] * x[i] : 0.0f;
  __syncthreads();
  for (int k = 32; k > 0; k >>= 1) { if (t < k) s[t] += s[t + k]; __syncthreads(); }
  if (t == 0) out[blockIdx.x] = s[0];
}
"""


def test_cuda_block_sum_stored_by_every_block_to_one_element():
    """CUDA's reduction tail ``if (t == 0) out[0] = s[0]`` with 2 blocks: both derivatives refused,
    naming blockIdx.x; with 1 block, and with ``out[blockIdx.x]``, the gradient is 2 x."""
    mod = ado.from_cuda(BLOCK_SUMS)
    x = _x(128).astype(np.float32)
    for name, blocks, outs in (("to_first", 2, 1), ("to_first", 1, 1), ("to_own", 2, 2)):
        k = mod.kernel(name, x=ado.In[ado.f32], out=ado.Out[ado.f32], n=ado.i32)
        n = 64 * blocks
        d_x, seed = np.zeros(n, np.float32), np.ones(outs, np.float32)
        reverse = ado.vjp(k, ["x"])
        if (name, blocks) == ("to_first", 2):
            for derivative, shadows in ((reverse, {"d_x": d_x, "d_out": seed}),
                                        (ado.jvp(k, ["x"]), {"d_x": d_x, "d_out": np.zeros(1, np.float32)})):
                with pytest.raises(DifferentiationError, match=r"CUDA kernel 'to_first' launched with 2 blocks along "
                                                               r"blockIdx.x: the store to 'out'"):
                    derivative(x[:n], np.zeros(outs, np.float32), n, **shadows, blocks=blocks, threads=64)
            continue
        reverse(x[:n], np.zeros(outs, np.float32), n, d_x=d_x, d_out=seed, blocks=blocks, threads=64)
        np.testing.assert_allclose(d_x, 2 * x[:n], rtol=1e-6)
