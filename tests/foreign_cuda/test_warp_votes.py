"""Warp votes (__ballot_sync, __any_sync, __all_sync, with __popc/__ffs) and __syncwarp in CUDA
kernels on the host CPU: results against numpy, derivatives through vote-steered branches against
central differences, and what is refused."""
import numpy as np
import pytest

import adoffload as ado
from adoffload.errors import CompilationError, DivergentBarrierError, ForeignCompileError

from .checks import check_derivatives, needs_clang, needs_lld, run
from .sources import WARP_VOTES

VOTES = dict(x=ado.In[ado.f32], ballot=ado.Out[ado.i32], any=ado.Out[ado.i32], all=ado.Out[ado.i32],
             count=ado.Out[ado.i32], masked=ado.Out[ado.i32], n=ado.i32)


@pytest.fixture(scope="module")
def mod():
    return ado.from_cuda(WARP_VOTES)


def warp_ballots(p: np.ndarray) -> np.ndarray:
    """Each 32-lane warp's ballot of predicate ``p``, repeated per lane."""
    bits = (p.reshape(-1, 32).astype(np.uint64) << np.arange(32, dtype=np.uint64)).sum(1)
    return np.repeat(bits.astype(np.uint32), 32)


def votes_input(n_threads: int) -> np.ndarray:
    x = np.random.default_rng(50).standard_normal(n_threads).astype(np.float32)
    x[64:96] = np.abs(x[64:96]) + 0.1            # a warp where all hold
    x[96:128] = -np.abs(x[96:128])               # a warp where none holds
    return x


@pytest.mark.parametrize("language", ["cuda", "hip"])
def test_votes_match_numpy(mod, language):
    k = (mod if language == "cuda" else ado.from_hip(WARP_VOTES)).kernel("votes", **VOTES)
    n, x = 250, votes_input(256)
    outs = {name: np.zeros(n, np.int32) for name in ("ballot", "any", "all", "count", "masked")}
    k(x[:n], *outs.values(), n, blocks=2, threads=128)     # the last warp has 26 live threads
    p = np.zeros(256, bool)
    p[:n] = x[:n] > 0
    ballot = warp_ballots(p)[:n]
    np.testing.assert_array_equal(outs["ballot"].view(np.uint32), ballot)
    np.testing.assert_array_equal(outs["any"], ballot != 0)
    np.testing.assert_array_equal(outs["all"], ballot == 0xFFFFFFFF)
    np.testing.assert_array_equal(outs["count"], [bin(b).count("1") for b in ballot])
    np.testing.assert_array_equal(outs["masked"].view(np.uint32), ballot & 0xFFFF)
    assert outs["all"][64] == 1 and outs["any"][96] == 0      # both kinds of warp are there


def vote_flow_reference(x: np.ndarray, c: float) -> np.ndarray:
    v = x.reshape(-1, 32).copy()
    v = np.where((v > c).any(1, keepdims=True), v * v, v)
    positive = v > 0.5
    rank = np.cumsum(positive, 1) - positive
    return np.where((v < 10).all(1, keepdims=True), v + rank * np.sin(v), v * c).ravel()


def vote_flow_input() -> np.ndarray:
    x = np.random.default_rng(51).random(256) * 2
    x[32:64] += 2.0                              # this warp squares and leaves the all(v < 10) branch
    x[64:96] *= 0.3                              # this one votes no on v > c
    return x


def test_votes_steering_branches_and_their_derivatives(mod):
    k = mod.kernel("vote_flow", x=ado.In[ado.f64], y=ado.Out[ado.f64], c=ado.f64)
    values, launch = dict(x=vote_flow_input(), y=np.zeros(256), c=np.float64(1.5)), dict(blocks=2, threads=128)
    expected = vote_flow_reference(values["x"], 1.5)
    np.testing.assert_allclose(run(k, values, launch)["y"], expected, rtol=1e-14)
    check_derivatives(k, ["x", "c"], values, launch)


def test_votes_of_one_warp_with_unguarded_effects():
    """Only warp 0 votes (its load and store under no branch of their own): every thread runs the
    body, each effect guarded by ``t < 32``."""
    k = ado.from_cuda("""
__global__ void warp0(const double* x, double* y) {
  int t = threadIdx.x, i = blockIdx.x * blockDim.x + t;
  if (t < 32) {
    double v = x[i];
    unsigned b = __ballot_sync(0xffffffffu, v > 0.0);
    y[i] = v * __popc(b) + (__all_sync(0xffffffffu, v > -1.0) ? sin(v) : 0.0);
  }
}""").kernel("warp0", x=ado.In[ado.f64], y=ado.Out[ado.f64])
    x = np.random.default_rng(56).standard_normal(256)
    x[:32] = np.abs(x[:32]) * 0.5 - 0.2             # block 0's warp 0: all above -1
    values, launch = dict(x=x, y=np.zeros(256)), dict(blocks=4, threads=64)
    v = x.reshape(4, 64)[:, :32]
    expected = np.zeros((4, 64))
    expected[:, :32] = v * (v > 0).sum(1, keepdims=True) + np.where((v > -1).all(1, keepdims=True), np.sin(v), 0)
    np.testing.assert_allclose(run(k, values, launch)["y"], expected.ravel(), rtol=1e-14)
    check_derivatives(k, ["x"], values, launch)


def test_warp_aggregated_atomics(mod):
    k = mod.kernel("compact", x=ado.In[ado.f64], out=ado.Out[ado.f64], count=ado.Out[ado.i32], n=ado.i32)
    x = np.random.default_rng(52).standard_normal(250)
    out, count = np.zeros(250), np.zeros(1, np.int32)
    k(x, out, count, 250, blocks=2, threads=128)
    assert count[0] == (x > 0).sum()
    np.testing.assert_array_equal(np.sort(out[:count[0]]), np.sort(2 * x[x > 0]))   # warps in any order


def syncwarp_sum_reference(x: np.ndarray) -> np.ndarray:
    s = x.reshape(-1, 64)
    s = (s[:, :32] + s[:, 32:]) * s[:, 32:]
    return s.sum(1)


def test_syncwarp_orders_a_warp_synchronous_tail(mod):
    k = mod.kernel("syncwarp_sum", x=ado.In[ado.f64], out=ado.Out[ado.f64])
    values, launch = dict(x=np.random.default_rng(53).standard_normal(256), out=np.zeros(4)), dict(blocks=4, threads=64)
    np.testing.assert_allclose(run(k, values, launch)["out"], syncwarp_sum_reference(values["x"]), rtol=1e-13)
    check_derivatives(k, ["x"], values, launch)


def test_syncwarp_in_a_warp_synchronous_branch():
    """Only warp 0 runs the tail: every thread runs it, its effects guarded by ``t < 32``."""
    from .sources import SYNCWARP_TAIL
    k = ado.from_cuda(SYNCWARP_TAIL).kernel("tail_sum", x=ado.In[ado.f64], out=ado.Out[ado.f64])
    values, launch = dict(x=np.random.default_rng(54).standard_normal(256), out=np.zeros(4)), dict(blocks=4, threads=64)
    s = values["x"].reshape(4, 64)
    np.testing.assert_allclose(run(k, values, launch)["out"], (s[:, :32] * s[:, 32:]).sum(1), rtol=1e-13)
    check_derivatives(k, ["x"], values, launch)


def test_syncwarp_after_an_early_return():
    k = ado.from_cuda("""
__global__ void pairs(double* s) {
  int t = threadIdx.x;
  if (t >= 32) return;
  s[t] = s[t] * s[t + 32];
  __syncwarp();
  double v = s[t ^ 1];
  __syncwarp();
  s[t] += v;
}""").kernel("pairs", s=ado.InOut[ado.f64])
    values, launch = dict(s=np.random.default_rng(55).standard_normal(64)), dict(blocks=1, threads=64)
    expected = values["s"].reshape(1, 64).copy()
    a = expected[:, :32] * expected[:, 32:]
    expected[:, :32] = a + a[:, np.arange(32) ^ 1]
    np.testing.assert_allclose(run(k, values, launch)["s"], expected.ravel(), rtol=1e-14)
    check_derivatives(k, ["s"], values, launch)


@pytest.mark.parametrize("body", [
    "for (int k = 0; k < t; ++k) { s[t] += 1.0; __syncwarp(); }",         # a loop each thread leaves apart
    "if (t < 32) { s[t] += s[t + 32]; __syncthreads(); }",                # __syncthreads: never speculated
])
def test_syncwarp_where_threads_part_is_refused_by_name(body):
    k = ado.from_cuda("__global__ void tail(double* s) { int t = threadIdx.x; " + body + " }").kernel(
        "tail", s=ado.InOut[ado.f64])
    what = "__syncthreads\\(\\)" if "__syncthreads" in body else "__syncwarp\\(\\) \\(a barrier of the whole block"
    with pytest.raises(DivergentBarrierError, match=what):
        k.specialize((64,))


@needs_clang
def test_hip_votes_with_64_bit_masks_do_not_compile():
    """HIP's 64-lane spelling would count only 32 lanes here: clang says why instead."""
    with pytest.raises(ForeignCompileError, match="64-bit mask assumes 64-lane wavefronts"):
        ado.from_hip("__global__ void f(unsigned long long* o, const float* x) "
                     "{ o[threadIdx.x] = __ballot_sync(0xffffffffffffffffull, x[threadIdx.x] > 0); }")


def test_votes_need_whole_warps(mod):
    k = mod.kernel("votes", **VOTES)
    x = votes_input(48)
    outs = [np.zeros(48, np.int32) for _ in range(5)]
    with pytest.raises(CompilationError, match="needs whole warps: the block has 48 threads"):
        k(x, *outs, 48, blocks=1, threads=48)


@needs_lld
def test_gpu_code_uses_the_targets_votes(mod):
    k = mod.kernel("vote_flow", x=ado.In[ado.f64], y=ado.Out[ado.f64], c=ado.f64).specialize((128,))
    assert "vote.sync.ballot.b32" in k.compiled("nvptx", arch="sm_90").ptx
    assert k.compiled("amdgpu", arch="gfx942").hsaco[:4] == b"\x7fELF"
