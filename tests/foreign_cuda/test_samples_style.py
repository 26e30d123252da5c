"""CUDA written in the styles of NVIDIA's samples and the common tutorials (samples_sources.py), on the
host CPU: each kernel matches numpy and its derivatives pass both oracles (test_cuda_hunt.both_oracles:
forward mode against central differences, reverse mode through <J v, w> = <v, J^T w>), or it is refused
with an adoffload.Error naming the construct. Four kernels here were refused before this file's fixes:
the samples' SharedMemory<T> (an ``int`` extern __shared__ buffer holding floats had no shadow),
reduce1's strided index (its stride's values were unknown: clang doubles it in the loop header and
tests the old value in the latch), the bank-conflict-free up-sweep (a thread's poison address counted
as a run) and the whole scan (its stride and its thread count are stepped together: the race check
now simulates a loop's counters as one state). Threads of a block storing different values to one global
element were accepted (a race: the primal changed from run to run and forward and reverse mode disagreed);
they are refused now (analysis/races/global_writes.py). One warp per row with whole warps returning before
the shuffles (warp_row_softmax) was refused; its counted column loops now run speculatively (speculate.py)."""
import numpy as np
import pytest

import adoffload as ado
from adoffload.errors import (BoundsError, CudaTranslationError, ForeignCompileError,
                              SharedMemoryRaceError, ToolNotFoundError)

from .checks import needs_clang, run
from .samples_sources import PAIRED_COUNTERS, SAMPLES, STRIDE_SETS
from .test_cuda_hunt import both_oracles
from .test_cuda_hunt2 import check_primal

f32, f64, i32 = ado.f32, ado.f64, ado.i32
In, Out = ado.In, ado.Out


@pytest.fixture(scope="module")
def mod():
    try:
        return ado.from_cuda(SAMPLES)
    except ToolNotFoundError as exc:        # no clang and no cached IR of this source (ADOFFLOAD_CACHE_DIR)
        pytest.skip(f"no clang and no cached clang IR of the samples' source: {exc}")


def per_block(v, size):
    return v.reshape(-1, size)


def first_add_ref(v):
    """reduce_first_add: two loads summed, then a halving tree in which each active thread squares its
    running sum before adding its partner's stored square."""
    x, n, out = v["g_idata"].astype(np.float64), v["n"], []
    for b in range(2):
        i = b * 128 + np.arange(64)
        mine = np.where(i < n, x[np.minimum(i, n - 1)], 0) + np.where(i + 64 < n, x[np.minimum(i + 64, n - 1)], 0)
        stored = mine * mine
        h = 32
        while h > 0:
            mine[:h] = mine[:h] * mine[:h] + stored[h:2 * h]
            stored[:h] = mine[:h]
            h //= 2
        out.append(mine[0])
    return {"g_odata": np.array(out)}


def upsweep_ref(v):
    """The up-sweep leaves element i holding the sum of its subtree: the lowest set bit of i + 1 elements."""
    x = per_block(v["g_idata"], 256)
    low = (np.arange(1, 257) & -np.arange(1, 257))
    csum = np.concatenate([np.zeros((x.shape[0], 1)), np.cumsum(x, 1)], 1)
    i = np.arange(256)
    return {"g_odata": ((csum[:, i + 1] - csum[:, i + 1 - low]) * x).ravel()}


def prescan_ref(v):
    x = per_block(v["g_idata"], 256)
    exclusive = np.concatenate([np.zeros((x.shape[0], 1)), np.cumsum(x, 1)[:, :-1]], 1)
    return {"g_odata": (exclusive * x).ravel()}


def conv_rows_ref(v):
    src = v["d_Src"].astype(np.float64)
    taps = np.array([0.02, 0.05, 0.1, 0.2, 0.26, 0.2, 0.1, 0.05, 0.02], np.float32).astype(np.float64)
    padded, w = np.pad(src, ((0, 0), (4, 4))), src.shape[1]
    r = sum(taps[4 - j] * padded[:, 4 + j:4 + j + w] for j in range(-4, 5))
    return {"d_Dst": r * r}


def float4_ref(v):
    x = v["x"].astype(np.float64).reshape(-1, 64, 4)[:, ::-1]
    a, b, c, d = x[..., 0], x[..., 1], x[..., 2], x[..., 3]
    return {"y": np.stack([d * a, c * b, b + c * c, a * d], -1).ravel()}


def stencil_ref(v):
    p = v["in"].astype(np.float64)
    return {"out": sum(p[3 + o:131 + o] * (o + 4) for o in range(-3, 4)) * p[3:131]}


def cases():
    """name: (parameters, values, launch, wrt, reference(values) -> {output: expected})."""
    g = np.random.default_rng(11)
    x256 = g.standard_normal(256)
    xf = g.standard_normal(512).astype(np.float32)
    return {
        "reduce_interleaved_mod": (            # SharedMemory<double>: an int extern __shared__ buffer
            dict(g_idata=In[f64], g_odata=Out[f64]), dict(g_idata=x256[:128].copy(), g_odata=np.zeros(2)),
            dict(blocks=2, threads=64, shared_bytes=64 * 8), ["g_idata"],
            lambda v: {"g_odata": np.sin(per_block(v["g_idata"], 64)).sum(1) ** 2}),
        "reduce_strided_index": (
            dict(g_idata=In[f64], g_odata=Out[f64]), dict(g_idata=x256.copy(), g_odata=np.zeros(2)),
            dict(blocks=2, threads=128), ["g_idata"],
            lambda v: {"g_odata": np.sqrt((per_block(v["g_idata"], 128) ** 2).sum(1))}),
        "reduce_first_add": (
            dict(g_idata=In[f32], g_odata=Out[f32], n=i32),
            dict(g_idata=xf[:250] * np.float32(0.5), g_odata=np.zeros(2, np.float32), n=250),
            dict(blocks=2, threads=64, shared_bytes=64 * 4), ["g_idata"], first_add_ref),
        "reduce_cascade_256": (
            dict(x=In[f64], out=Out[f64], n=i32), dict(x=np.resize(x256, 500) * 0.3, out=np.zeros(2), n=500),
            dict(blocks=2, threads=256), ["x"],
            lambda v: {"out": np.log(np.exp(np.concatenate([v["x"], np.full(12, -np.inf)])).reshape(2, 256).sum(1))}),
        "grid_stride_block_atomic": (
            dict(**{"in": In[f32]}, out=Out[f32], N=i32), {"in": xf[:300].copy(), "out": np.zeros(1, np.float32), "N": 300},
            dict(blocks=2, threads=64), ["in"], lambda v: {"out": [(v["in"].astype(np.float64) ** 2).sum()]}),
        "grid_stride_warp_atomic": (
            dict(**{"in": In[f32]}, out=Out[f32], N=i32), {"in": xf[:300].copy(), "out": np.zeros(1, np.float32), "N": 300},
            dict(blocks=2, threads=64), ["in"], lambda v: {"out": [np.tanh(v["in"].astype(np.float64)).sum()]}),
        "transpose_diagonal": (
            dict(odata=Out[f64], idata=In[f64], width=i32, height=i32),
            dict(odata=np.zeros((64, 96)), idata=g.standard_normal((96, 64)), width=64, height=96),
            dict(blocks=(2, 3), threads=(32, 8)), ["idata"], lambda v: {"odata": v["idata"].T ** 3}),
        "matrix_mul_16": (
            dict(C=Out[f32], A=In[f32], B=In[f32], wA=i32, wB=i32),
            dict(C=np.zeros((32, 48), np.float32), A=g.standard_normal((32, 32)).astype(np.float32),
                 B=g.standard_normal((32, 48)).astype(np.float32), wA=32, wB=48),
            dict(blocks=(3, 2), threads=(16, 16)), ["A", "B"],
            lambda v: {"C": v["A"].astype(np.float64) @ v["B"].astype(np.float64)}),
        "upsweep_bcao": (
            dict(g_idata=In[f64], g_odata=Out[f64]), dict(g_idata=g.standard_normal(512), g_odata=np.zeros(512)),
            dict(blocks=2, threads=128), ["g_idata"], upsweep_ref),
        "prescan_bcao": (
            dict(g_odata=Out[f64], g_idata=In[f64]), dict(g_odata=np.zeros(512), g_idata=g.standard_normal(512)),
            dict(blocks=2, threads=128), ["g_idata"], prescan_ref),
        "stencil_1d": (
            dict(**{"in": In[f32]}, out=Out[f32]),
            {"in": g.standard_normal(134).astype(np.float32), "out": np.zeros(128, np.float32)},
            dict(blocks=2, threads=64), ["in"], stencil_ref),
        "float4_shared_roundtrip": (
            dict(x=In[f32], y=Out[f32]), dict(x=xf.copy(), y=np.zeros(512, np.float32)), dict(blocks=2, threads=64),
            ["x"], float4_ref),
        "convolution_rows": (
            dict(d_Dst=Out[f32], d_Src=In[f32], imageW=i32, imageH=i32, pitch=i32),
            dict(d_Dst=np.zeros((8, 64), np.float32), d_Src=g.standard_normal((8, 64)).astype(np.float32), imageW=64,
                 imageH=8, pitch=64),
            dict(blocks=(2, 2), threads=(16, 4)), ["d_Src"], conv_rows_ref),
        "gemv_warp_rows": (
            dict(A=In[f64], x=In[f64], y=Out[f64], m=i32, n=i32),
            dict(A=g.standard_normal((5, 40)) * 0.3, x=g.standard_normal(40), y=np.zeros(5), m=5, n=40),
            dict(blocks=2, threads=96), ["A", "x"], lambda v: {"y": np.tanh(v["A"] @ v["x"])}),
        # whole warps return before the shuffles (legal on a GPU): the warps past the last row run the
        # counted column loops speculatively, their loads and stores skipped (it was refused)
        "warp_row_softmax": (
            dict(x=In[f32], y=Out[f32], rows=i32, cols=i32),
            dict(x=g.standard_normal((5, 45)).astype(np.float32), y=np.zeros((5, 45), np.float32), rows=5, cols=45),
            dict(blocks=2, threads=96), ["x"], lambda v: {"y": (lambda e: e / e.sum(1, keepdims=True))(
                np.exp(v["x"].astype(np.float64) - v["x"].max(1, keepdims=True)))}),
    }


CASES = cases()


@pytest.mark.parametrize("name", sorted(CASES))
def test_sample_matches_numpy_and_both_oracles(mod, name):
    params, values, launch, wrt, reference = CASES[name]
    k = mod.kernel(name, **params)
    check_primal(k, values, launch, reference)
    both_oracles(k, wrt, values, launch)


def test_shared_memory_template_buffer_is_typed_by_its_accesses(mod):
    """``int __smem[]`` read and written only as double is a double array (else it has no shadow)."""
    params, _, launch, _, _ = CASES["reduce_interleaved_mod"]
    k = mod.kernel("reduce_interleaved_mod", **params).specialize((64,), launch["shared_bytes"])
    assert [(s.dtype, s.shape) for s in k.shared] == [(f64, (64,))]


REFUSED = {
    # the samples' reduce4/5 tail: volatile and no __syncwarp (a race since Volta)
    "reduce_volatile_tail_128": (dict(x=In[f32], out=Out[f32]), dict(blocks=2, threads=128), SharedMemoryRaceError,
                                 r"race on 'sdata'.*sdata\[threadIdx.x \+ 16\]"),
    # a __syncwarp after each in-place step does not help: t reads sdata[t + 16] as t + 16 writes it
    "reduce_syncwarp_in_place": (dict(x=In[f32], out=Out[f32]), dict(blocks=2, threads=64), SharedMemoryRaceError,
                                 r"race on 'sdata'.*sdata\[threadIdx.x \+ 16\]"),
    # the diagonal transpose launched with 32 rows of 8 threads: tile rows y and y + 8 overlap (a real race)
    "transpose_diagonal": (dict(odata=Out[f64], idata=In[f64], width=i32, height=i32),
                           dict(blocks=(6, 2), threads=(8, 32)), SharedMemoryRaceError, "race on 'tile'"),
    # every thread (or the first four) of a block stores its own value to the block's element of out
    "last_writer_wins": (dict(x=In[f32], out=Out[f32]), dict(blocks=2, threads=64), CudaTranslationError,
                         "every thread of a block that runs the store .* writes one element of 'out'"),
    "first_lanes_store": (dict(x=In[f32], out=Out[f32]), dict(blocks=2, threads=64), CudaTranslationError,
                          "every thread of a block that runs the store .* writes one element of 'out'"),
}


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_refused_with_its_reason(mod, name):
    params, launch, error, says = REFUSED[name]
    k = mod.kernel(name, **params)
    values = {p: (np.zeros(4096, np.float32 if t.dtype == f32 else np.float64) if isinstance(t, ado.types.ArrayType)
                  else 1) for p, t in params.items()}
    with pytest.raises(error, match=says):
        run(k, values, launch)


@pytest.mark.parametrize("last", [64, 128])
def test_stride_values_are_exact(last):
    """The stride's values are 1, ..., 64: a store at stride 64 races and is refused; at 128 it never runs
    and the kernel is accepted (the value set neither misses the last stride nor admits one past it)."""
    try:
        k = ado.from_cuda(STRIDE_SETS, options=[f"-DLAST={last}"]).kernel("race_at_last_stride", x=In[f32], y=Out[f32])
    except ToolNotFoundError as exc:
        pytest.skip(f"no clang and no cached clang IR of the stride source: {exc}")
    x = np.arange(256, dtype=np.float32)
    values, launch = dict(x=x, y=np.zeros(256, np.float32)), dict(blocks=2, threads=128)
    if last == 64:
        with pytest.raises(SharedMemoryRaceError, match=r"race on 's'.*s\[1\]"):
            run(k, values, launch)
        return
    expected = np.zeros(256)
    expected[[1, 129]] = 7 * x[[1, 129]]                 # seven trips, s[1] never written
    np.testing.assert_array_equal(run(k, values, launch)["y"], expected)


@pytest.mark.parametrize("last, after, races", [(64, 0, True), (128, 128, True), (128, 256, False)])
def test_paired_counters_are_simulated_together(last, after, races):
    """offset doubles while d halves and only d is tested: offset is 1, ..., 64 in the loop and 128 after
    it. Stores at 64 (in the loop) and 128 (after it) race with thread 1's read and are refused; a store at
    128 in the loop and at 256 after it never runs, and the kernel is accepted."""
    try:
        k = ado.from_cuda(PAIRED_COUNTERS, options=[f"-DLAST={last}", f"-DAFTER={after}"]).kernel(
            "race_at_paired_offset", x=In[f32], y=Out[f32])
    except ToolNotFoundError as exc:
        pytest.skip(f"no clang and no cached clang IR of the paired-counter source: {exc}")
    x = np.arange(256, dtype=np.float32)
    values, launch = dict(x=x, y=np.zeros(256, np.float32)), dict(blocks=2, threads=128)
    if races:
        with pytest.raises(SharedMemoryRaceError, match=r"race on 's'.*s\[1\]"):
            run(k, values, launch)
        return
    expected = np.zeros(256)
    expected[[1, 129]] = 8 * x[[1, 129]]                 # seven trips and one read after the loop
    np.testing.assert_array_equal(run(k, values, launch)["y"], expected)


def test_extern_shared_needs_its_size(mod):
    """Without shared_bytes the launch is refused, naming the buffer; too few bytes fail the bounds check."""
    params, values, launch, _, _ = CASES["reduce_first_add"]
    k = mod.kernel("reduce_first_add", **params)
    with pytest.raises(CudaTranslationError, match=r"extern __shared__ memory \(@__smem\); launch it with shared_bytes"):
        run(k, values, dict(blocks=2, threads=64))
    with pytest.raises(BoundsError, match="shared array #0"):
        run(k, values, dict(blocks=2, threads=64, shared_bytes=16))


@needs_clang
def test_cooperative_groups_are_refused_by_name():
    """No cooperative_groups.h: clang's error names the header (not a crash, not a wrong kernel)."""
    source = ("#include <cooperative_groups.h>\nnamespace cg = cooperative_groups;\n"
              "__global__ void f(float* x) { cg::thread_block b = cg::this_thread_block(); b.sync(); x[0] = 1; }\n")
    with pytest.raises(ForeignCompileError, match="cooperative_groups.h' file not found"):
        ado.from_cuda(source)
