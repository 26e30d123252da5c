"""AMD's 64-lane wavefronts on the host CPU (the ``cpu:wave64`` device): values against numpy, JVP
against central differences, VJP against the JVP (<J v, w> = <v, J^T w>), deterministic=True
against the default, and the refusals AMD's definitions imply (warp operations need whole
wavefronts). Every kernel here gives different answers with 32-lane warps (checked too)."""
import random

import numpy as np
import pytest

import adoffload as ado
from adoffload.errors import CompilationError, DeviceNotFoundError
from adoffload.runtime import get_device
from adoffload.testing import block_fuzz
from adoffload.testing.block_generator import generate

from tests.foreign_cuda.checks import check_derivatives
from . import wave64_kernels as K

N = 384                                        # whole blocks of 128 and of 96 threads
WAVE64 = "cpu:wave64"


def _x(seed=0):
    return np.random.default_rng(seed).uniform(-1.5, 1.5, N)


def _run(kernel, x, device=WAVE64):
    y = np.zeros(N, x.dtype)
    kernel(x, y, grid=N, device=device)
    return y


def _jvp(kernel, x, dx):
    y, dy = np.zeros(N), np.zeros(N)
    ado.jvp(kernel, "x")(x, y, dx, dy, grid=N, device=WAVE64)
    return y, dy


def _vjp(kernel, x, w, deterministic=False):
    y, gx = np.zeros(N), np.zeros(N)
    ado.vjp(kernel, "x", deterministic=deterministic)(x, y, gx, w.copy(), grid=N, device=WAVE64)
    return y, gx


def test_the_device_is_the_host_with_64_lane_warps():
    device = get_device(WAVE64)
    assert device.kind == "cpu" and device.warp_size == 64 and get_device("cpu").warp_size == 32
    assert get_device("host:wave64") is device and device is not get_device("cpu")
    with pytest.raises(DeviceNotFoundError, match="cpu:wave64"):
        get_device("cpu:1")
    lane, size = np.zeros(N, np.int64), np.zeros(N, np.int64)
    K.lanes(_x(), lane, size, grid=N, device=WAVE64)
    np.testing.assert_array_equal(lane, np.arange(N) % 64)
    assert set(size) == {64}
    K.lanes(_x(), lane, size, grid=N)
    np.testing.assert_array_equal(lane, np.arange(N) % 32)


@pytest.mark.parametrize("name", sorted(K.CASES))
def test_values_match_numpy_with_64_lanes_and_differ_from_32(name):
    kernel, reference = K.CASES[name]
    x = _x()
    got = _run(kernel, x)
    np.testing.assert_allclose(got, reference(x, 64), rtol=1e-13, atol=1e-13)
    np.testing.assert_allclose(_run(kernel, x, "cpu"), reference(x, 32), rtol=1e-13, atol=1e-13)
    assert not np.allclose(got, reference(x, 32))


def test_a_reduction_written_for_32_lanes_counts_each_wavefront_twice():
    x = _x().astype(np.float32)
    np.testing.assert_allclose(_run(K.warp_partials, x), K.ref_warp_partials(x, 64), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(_run(K.warp_partials, x, "cpu"), K.ref_warp_partials(x, 32), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("name", sorted(K.CASES))
def test_derivatives_against_central_differences_and_each_other(name):
    kernel, reference = K.CASES[name]
    rng = np.random.default_rng(1)
    x, dx, w = _x(2), rng.standard_normal(N), rng.standard_normal(N)
    y, tangent = _jvp(kernel, x, dx)
    np.testing.assert_allclose(y, reference(x, 64), rtol=1e-13, atol=1e-13)
    h = 1e-6
    fd = (reference(x + h * dx, 64) - reference(x - h * dx, 64)) / (2 * h)
    np.testing.assert_allclose(tangent, fd, rtol=1e-6, atol=1e-6)
    y, gradient = _vjp(kernel, x, w)
    np.testing.assert_allclose(y, reference(x, 64), rtol=1e-13, atol=1e-13)
    assert abs(np.dot(tangent, w) - np.dot(dx, gradient)) <= 1e-10 * (1 + np.abs(tangent * w).sum())
    _, ordered = _vjp(kernel, x, w, deterministic=True)
    np.testing.assert_allclose(ordered, gradient, rtol=1e-12, atol=1e-12)


def test_warp_operations_need_whole_wavefronts():
    """96 threads are whole 32-lane warps but not whole wavefronts: refused as the AMDGPU target
    refuses them (codegen/blocks.py), naming the line; fine with 32 lanes."""
    x = _x()
    np.testing.assert_allclose(_run(K.warp_sum_96, x, "cpu"), np.repeat(x.reshape(-1, 32).sum(axis=1), 32))
    with pytest.raises(CompilationError, match=r"multiple of the warp size 64.*wave64.*wave64_kernels.py:\d+"):
        _run(K.warp_sum_96, x)


def test_warp_size_is_a_host_option():
    with pytest.raises(CompilationError, match="host option"):
        K.wsum.compiled("amdgpu", warp_size=64)
    with pytest.raises(CompilationError, match="32.*or 64"):
        K.wsum.compiled("host", warp_size=16)
    assert K.wsum.compiled("host", warp_size=32) is K.wsum.compiled("host")


# Fuzzer seeds whose kernels have warp exchanges in blocks of whole wavefronts (outcome: pass).
FUZZ_SEEDS = [2, 3, 5]


@pytest.mark.parametrize("seed", FUZZ_SEEDS)
def test_random_block_kernels_pass_both_oracles_with_64_lanes(seed, tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(tmp_path))
    kernel = generate(random.Random(seed), warp=64)
    assert kernel.threads % 64 == 0
    result = block_fuzz.check_case(kernel, seed, tmp_path, device=WAVE64)
    assert result.outcome == "pass", "\n".join([kernel.source, result.outcome] + result.details)


# --- CUDA/HIP sources: their warps have 32 lanes (warpSize); on AMD a wavefront's halves ------------

LANE_RANK = r"""
__global__ void lane_rank(const float* x, int* lane, int* rank) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  int l = __nvvm_read_ptx_sreg_laneid();
  unsigned b = __ballot_sync(0xffffffffu, x[i] > 0.0f);
  lane[i] = l;
  rank[i] = __popc(b & ((1u << l) - 1u));
}
"""


def test_cuda_lane_register_counts_lanes_of_a_32_lane_warp():
    """%laneid was the wavefront's lane (0..63) while warpSize, the shuffles and the ballots count
    32-lane warps: ``1u << lane`` overflowed and a lane's rank among its ballot was wrong on AMD.
    It is now the lane in the caller's 32 lanes."""
    k = ado.from_cuda(LANE_RANK).kernel("lane_rank", x=ado.In[ado.f32], lane=ado.Out[ado.i32], rank=ado.Out[ado.i32])
    x = np.random.default_rng(3).standard_normal(256).astype(np.float32)
    positive = (x > 0).reshape(-1, 32)
    rank = (np.cumsum(positive, axis=1) - positive).ravel()
    for device in ("cpu", WAVE64):
        lane, got = np.zeros(256, np.int32), np.zeros(256, np.int32)
        k(x, lane, got, blocks=2, threads=128, device=device)
        np.testing.assert_array_equal(lane, np.arange(256) % 32)
        np.testing.assert_array_equal(got, rank)


def test_cuda_shuffles_and_votes_mean_the_same_on_wavefronts():
    """The header's shuffles (width 32) and ballots read the caller's 32-lane half of a wavefront,
    so CUDA sources give on 64-lane wavefronts exactly what they give on 32-lane warps."""
    from tests.foreign_cuda.sources import KERNELS, WARP_VOTES
    votes = ado.from_cuda(WARP_VOTES).kernel("votes", x=ado.In[ado.f32], ballot=ado.Out[ado.i32],
                                             any=ado.Out[ado.i32], all=ado.Out[ado.i32], count=ado.Out[ado.i32],
                                             masked=ado.Out[ado.i32], n=ado.i32)
    x = np.random.default_rng(4).standard_normal(256).astype(np.float32)
    outs = {}
    for device in ("cpu", WAVE64):
        outs[device] = [np.zeros(250, np.int32) for _ in range(5)]
        votes(x[:250], *outs[device], 250, blocks=2, threads=128, device=device)
    for a, b in zip(*outs.values()):
        np.testing.assert_array_equal(a, b)
    total = ado.from_cuda(KERNELS).kernel("warp_sum", x=ado.In[ado.f64], out=ado.Out[ado.f64])
    x = np.random.default_rng(5).standard_normal(256)
    out = np.zeros(4)
    total(x, out, blocks=4, threads=64, device=WAVE64)
    np.testing.assert_allclose(out, x.reshape(4, 64).sum(axis=1), rtol=1e-13)
    check_derivatives(total, ["x"], dict(x=x, out=np.zeros(4)), dict(blocks=4, threads=64), device=WAVE64)


# --- the passes that combine lanes are NVPTX-only: the AMD entry has no 32-lane assumption ------------

def test_amd_adjoint_adds_stay_per_thread_and_are_right_on_wavefronts():
    """Lane combining (codegen/gpu/lane_combining.py), warp-aggregated shared adds (shared_atomics.py)
    and the uniform-add shuffle tree (analysis/address_classes.py) assume 32-lane warps and run on NVPTX only:
    the AMDGPU entry of an adjoint with shadow-tile and uniform-address adds keeps one plain atomic
    per thread and no NVVM operation. The same adjoint on 64-lane wavefronts against numpy."""
    from adoffload.codegen import blocks
    from adoffload.analysis.address_classes import lower_uniform_adds_text
    reverse = ado.vjp(K.scaled_tile, ("a", "x"))
    text = reverse.module_text()
    assert "adoffload.uniform_fadd" in text
    flat = [f.llvm_type for f in reverse.signature.flat_params()]
    shared = tuple((a.nbytes, a.zero) for a in reverse.shared)
    entries = {target: blocks.add_block_gpu_entry(lower_uniform_adds_text(text, target), reverse.body_name, flat, 1,
                                                  target, reverse.block, shared, arch=arch)
               for target, arch in (("amdgpu", "gfx942"), ("nvptx", "sm_90"))}
    assert "match.any" in entries["nvptx"] and "shfl" in entries["nvptx"]        # the NVPTX lowering is there
    amd = entries["amdgpu"]
    assert "nvvm" not in amd and "shared_fadd" not in amd and "match" not in amd
    assert amd.count("atomicrmw fadd") == 3 and "ret i32 64" in amd
    rng = np.random.default_rng(8)
    a, x, w = 0.7, _x(9), rng.standard_normal(N)
    i = np.arange(N)
    nxt = i - i % K.BLOCK + (i + 1) % K.BLOCK
    prev = i - i % K.BLOCK + (i - 1) % K.BLOCK
    da, gx = np.zeros(1), np.zeros(N)
    y = np.zeros(N)
    reverse(a, x, y, da, gx, w.copy(), grid=N, device=WAVE64)
    np.testing.assert_allclose(y, a * x[nxt] * x, rtol=1e-14)
    np.testing.assert_allclose(da[0], np.sum(w * x[nxt] * x), rtol=1e-12)
    np.testing.assert_allclose(gx, a * (w * x[nxt] + w[prev] * x[prev]), rtol=1e-12, atol=1e-12)


def test_a_wavefront_spans_two_rows_of_a_2d_block():
    rng = np.random.default_rng(10)
    x, dx, w = (rng.standard_normal((8, 64)) for _ in range(3))

    def reference(x, W):
        y = np.empty_like(x)
        for bi in range(0, x.shape[0], 4):
            for bj in range(0, x.shape[1], 32):
                block = x[bi:bi + 4, bj:bj + 32]
                lanes = block.reshape(-1, W)          # a block's row-major threads, W per warp
                total = np.repeat(np.sin(lanes).sum(axis=1), W).reshape(block.shape)
                mirrored = lanes[:, (63 - np.arange(W)) % W].reshape(block.shape)
                y[bi:bi + 4, bj:bj + 32] = total * block + mirrored
        return y
    for device, W in (("cpu", 32), (WAVE64, 64)):
        y = np.zeros_like(x)
        K.rows_wsum(x, y, grid=x.shape, device=device)
        np.testing.assert_allclose(y, reference(x, W), rtol=1e-13, atol=1e-13)
    y, dy = np.zeros_like(x), np.zeros_like(x)
    ado.jvp(K.rows_wsum, "x")(x, y, dx, dy, grid=x.shape, device=WAVE64)
    h = 1e-6
    np.testing.assert_allclose(dy, (reference(x + h * dx, 64) - reference(x - h * dx, 64)) / (2 * h),
                               rtol=1e-6, atol=1e-6)
    gx = np.zeros_like(x)
    ado.vjp(K.rows_wsum, "x")(x, np.zeros_like(x), gx, w.copy(), grid=x.shape, device=WAVE64)
    assert abs(np.sum(dy * w) - np.sum(dx * gx)) <= 1e-10 * (1 + np.abs(dy * w).sum())
