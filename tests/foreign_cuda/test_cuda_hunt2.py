"""Second soundness hunt with CUDA written the way others write it (hunt2_sources.py): vector loads,
butterfly and scan shuffles, block votes, compaction, hand-written atomics, shared-memory scans and
sorts, constant memory, aliasing, index arithmetic, and one element stored by every thread of a block.
Each kernel runs on the host CPU against numpy
and its derivatives pass both oracles (test_cuda_hunt.both_oracles: forward mode against central
differences, reverse mode through <J v, w> = <v, J^T w>), or it is refused with an adoffload.Error
that names the construct."""
import os

import numpy as np
import pytest

import adoffload as ado
from adoffload.errors import (ArgumentError, CudaTranslationError, DifferentiationError, DivergentBarrierError, Error,
                              ForeignCompileError, SharedMemoryRaceError, ToolNotFoundError)

from .checks import run, written
from .hunt2_sources import BLOCK_SYNC, HUNT2
from .test_cuda_hunt import both_oracles, is_f32

f32, f64, i32 = ado.f32, ado.f64, ado.i32
In, Out, InOut = ado.In, ado.Out, ado.InOut


def _module(source):
    try:
        return ado.from_cuda(source)
    except ToolNotFoundError as exc:        # no clang and no cached IR of this source (ADOFFLOAD_CACHE_DIR)
        pytest.skip(f"no clang and no cached clang IR of the second hunt's source: {exc}")


@pytest.fixture(scope="module")
def mod():
    return _module(HUNT2)


@pytest.fixture(scope="module")
def sync_mod():
    return _module(BLOCK_SYNC)


def rng(seed):
    return np.random.default_rng(seed)


def per_block(v, size):
    return v.reshape(-1, size)


def softmax_rows(x, width):
    x = x.reshape(-1, width)
    e = np.exp(x - x.max(1, keepdims=True))
    return (e / e.sum(1, keepdims=True)).ravel()


def unit_rows(x, width):
    x = per_block(x, width)
    return (x / np.sqrt((x ** 2).sum(1, keepdims=True))).ravel()


def shared_rounds_ref(x, rounds):
    out = []
    for b, v in enumerate(per_block(x, 64)):
        for _ in range(rounds[b]):
            v = 0.5 * v + 0.25 * np.roll(v, -1) * np.roll(v, 1)
        out.append(v)
    return np.concatenate(out)


def aos_ref(pos):
    p = pos.reshape(-1, 64, 4)
    q = np.roll(p, -1, 1)
    d = q[..., :3] - p[..., :3]
    return (p[..., 3] * q[..., 3] / np.sqrt((d ** 2).sum(-1) + 0.1)).ravel()


def soa_ref(pos):
    p = pos.reshape(-1, 64, 4)
    q = p[:, ::-1]
    r2 = ((q[..., :3] - p[..., :3]) ** 2).sum(-1) + 0.1
    return np.stack([p[..., 3] * q[..., 3] / r2, r2], -1).ravel()


def compact_ref(x):
    y = np.zeros_like(x)
    for w in range(0, x.size, 32):
        kept = x[w:w + 32][x[w:w + 32] > 0]
        y[w:w + kept.size] = kept * kept + kept
    return y


def reduce6_any_ref(x, n, block, blocks):
    out = np.zeros(blocks)
    for b in range(blocks):
        for t in range(block):
            i = b * block * 2 + t
            while i < n:
                out[b] += x[i] ** 2 + (x[i + block] ** 2 if i + block < n else 0.0)
                i += block * 2 * blocks
    return out


def fir_ref(x, taps):
    p = np.concatenate([np.zeros(4), x])
    return sum(taps[k] * p[4 - k:4 - k + x.size] for k in range(5)) ** 2


def blelloch_ref(x):
    c = per_block(x, 128)
    exclusive = np.cumsum(c, 1) - c
    return (np.exp(-exclusive) * c).ravel()


def bitonic_ref(keys, vals):
    out = []
    for k, v in zip(per_block(keys, 64), per_block(vals, 64)):
        s = v[np.argsort(k, kind="stable")]
        out.append(s * np.arange(1, 65) + s * s)
    return np.concatenate(out)


def last_block_tail_ref(x, n):
    s = np.pad(x[:n], (0, 192 - n)).reshape(3, 64)
    head = (s[:2] * np.roll(s[:2], -1, 1)).ravel()
    tail = s[2] ** 2 + (s[2] ** 2)[::-1]
    return np.concatenate([head, tail])[:n]


def bitonic_samples_ref(keys, vals):
    out = []
    for k, v in zip(per_block(keys, 128), per_block(vals, 128)):
        s = v[np.argsort(k, kind="stable")]
        out.append(np.concatenate([s[:64] * s[64:], np.exp(s[64:]) + s[:64]]))
    return np.concatenate(out)


def conv_ref(img):
    f = np.array([[1, 2, 1], [2, 4, 2], [1, 2, 1]]) / 16
    p = np.pad(img, 1, mode="edge")
    h, w = img.shape
    return sum(f[a, b] * p[a:a + h, b:b + w] for a in range(3) for b in range(3)) ** 2


def index_ref(x):
    n = x.size
    u = np.arange(n)
    return x[(u - 5) % n] * x[(u + 7) % n] + x[np.clip(u - 2, 0, n - 1)] * x


def kinks_ref(a, b):
    return np.stack([np.minimum(a, b) * 2, np.maximum(a, b) * 3, np.copysign(a * a + 1, b), np.abs(a) * b,
                     np.floor(4 * a) + a * b], 1).ravel()


def case_values():
    """name: (parameters, values, launch, wrt, reference(values) -> {output: expected})."""
    g = rng(90)
    x128 = g.standard_normal(128)
    xf = g.standard_normal(128).astype(np.float32)
    pos = np.concatenate([g.uniform(0, 2, (128, 3)), g.uniform(0.5, 1.5, (128, 1))], 1).astype(np.float32)
    keys = g.permutation(128).astype(np.float32) * 0.5
    img = g.standard_normal((20, 24)).astype(np.float32)
    kink_a = g.standard_normal(40).astype(np.float32)
    kink_a = np.where(np.abs(4 * kink_a - np.round(4 * kink_a)) < 0.05, kink_a + 0.03, kink_a)   # off floor's steps
    kink_b = (kink_a + np.where(g.random(40) < 0.5, 1, -1) * g.uniform(0.1, 1, 40)).astype(np.float32)
    return {
        "saxpy_float4": (
            dict(a=f32, x=In[f32], y=InOut[f32], n=i32),
            dict(a=np.float32(1.3), x=g.standard_normal(134).astype(np.float32),
                 y=g.standard_normal(134).astype(np.float32), n=134),
            dict(blocks=2, threads=32), ["a", "x", "y"], lambda v: {"y": v["a"] * v["x"] + v["y"]}),
        "ldg_float4_lengths": (
            dict(p=In[f32], len=Out[f32], n=i32),
            dict(p=g.standard_normal(200).astype(np.float32), len=np.zeros(50, np.float32), n=50),
            dict(blocks=2, threads=32), ["p"],
            lambda v: (lambda p: {"len": np.sqrt((p[:, :3] ** 2).sum(1)) * p[:, 3]})(
                v["p"].astype(np.float64).reshape(50, 4))),
        "complex_mul_double2": (
            dict(a=In[f64], b=In[f64], c=Out[f64], n=i32),
            dict(a=g.standard_normal(80), b=g.standard_normal(80), c=np.zeros(80), n=40),
            dict(blocks=2, threads=32), ["a", "b"],
            lambda v: {"c": (lambda z: np.stack([z.real, z.imag], 1).ravel())(
                (v["a"][0::2] + 1j * v["a"][1::2]) * (v["b"][0::2] + 1j * v["b"][1::2]))}),
        "aos_shared_pairs": (
            dict(pos=In[f32], e=Out[f32]), dict(pos=pos.ravel(), e=np.zeros(128, np.float32)),
            dict(blocks=2, threads=64), ["pos"], lambda v: {"e": aos_ref(v["pos"].astype(np.float64))}),
        "soa_shared_pairs": (
            dict(pos=In[f32], out=Out[f32]), dict(pos=pos.ravel(), out=np.zeros(256, np.float32)),
            dict(blocks=2, threads=64), ["pos"], lambda v: {"out": soa_ref(v["pos"].astype(np.float64))}),
        "butterfly_softmax": (
            dict(x=In[f64], y=Out[f64]), dict(x=x128, y=np.zeros(128)), dict(blocks=2, threads=64), ["x"],
            lambda v: {"y": softmax_rows(v["x"], 32)}),
        "warp_scan_up": (
            dict(x=In[f32], y=Out[f32]), dict(x=xf * 0.3, y=np.zeros(128, np.float32)), dict(blocks=2, threads=64),
            ["x"], lambda v: (lambda x: {"y": (np.tanh(np.cumsum(per_block(x, 32), 1)).ravel() * x)})(
                v["x"].astype(np.float64))),
        "lane0_broadcast": (
            dict(x=In[f64], y=Out[f64]), dict(x=x128, y=np.zeros(128)), dict(blocks=2, threads=64), ["x"],
            lambda v: (lambda x, f: {"y": x * f - np.sin(f)})(v["x"], np.repeat(v["x"][::32] ** 2, 32))),
        "half_warp_width16": (
            dict(x=In[f64], y=Out[f64]), dict(x=x128, y=np.zeros(128)), dict(blocks=2, threads=64), ["x"],
            lambda v: {"y": v["x"] * np.repeat(per_block(v["x"], 16).sum(1), 16)}),
        "struct_shuffle_fields": (
            dict(x=In[f32], out=Out[f32]), dict(x=xf, out=np.zeros(4, np.float32)), dict(blocks=2, threads=64),
            ["x"], lambda v: (lambda x: {"out": (x ** 2).sum(1) - x.sum(1) ** 2 / 32})(
                per_block(v["x"].astype(np.float64), 32))),
        "struct_shuffle_words": (
            dict(x=In[f32], out=Out[f32]), dict(x=xf, out=np.zeros(4, np.float32)), dict(blocks=2, threads=64),
            ["x"], lambda v: (lambda x: {"out": (x ** 2).sum(1) - x.sum(1) ** 2 / 32})(
                per_block(v["x"].astype(np.float64), 32))),
        "ballot_compact": (
            dict(x=In[f64], y=Out[f64]), dict(x=x128, y=np.zeros(128)), dict(blocks=2, threads=64), ["x"],
            lambda v: {"y": compact_ref(v["x"])}),
        "warp_aggregated_append": (
            dict(x=In[f64], out=Out[f64], count=Out[i32]),
            dict(x=x128[:32], out=np.zeros(32), count=np.zeros(1, np.int32)), dict(blocks=1, threads=32), ["x"],
            lambda v: (lambda kept: {"out": np.pad(np.exp(kept), (0, 32 - kept.size)), "count": [kept.size]})(
                v["x"][v["x"] > 0])),
        "reduce6_128_pow2": (
            dict(x=In[f64], out=Out[f64], n=i32), dict(x=g.standard_normal(512), out=np.zeros(2), n=512),
            dict(blocks=2, threads=128), ["x"], lambda v: {"out": (per_block(v["x"], 256) ** 2).sum(1)}),
        "reduce6_64_any": (
            dict(x=In[f64], out=Out[f64], n=i32), dict(x=g.standard_normal(300), out=np.zeros(2), n=300),
            dict(blocks=2, threads=64), ["x"], lambda v: {"out": reduce6_any_ref(v["x"], 300, 64, 2)}),
        "unrolled_fir": (
            dict(x=In[f32], taps=In[f32], y=Out[f32], n=i32),
            dict(x=g.standard_normal(100).astype(np.float32), taps=g.standard_normal(5).astype(np.float32),
                 y=np.zeros(100, np.float32), n=100),
            dict(blocks=2, threads=64), ["x", "taps"],
            lambda v: {"y": fir_ref(v["x"].astype(np.float64), v["taps"].astype(np.float64))}),
        "blelloch_scan": (
            dict(x=In[f64], y=Out[f64]), dict(x=g.standard_normal(256) * 0.2, y=np.zeros(256)),
            dict(blocks=2, threads=64), ["x"], lambda v: {"y": blelloch_ref(v["x"])}),
        "hillis_steele_scan": (
            dict(x=In[f32], y=Out[f32]), dict(x=xf * 0.2, y=np.zeros(128, np.float32)), dict(blocks=2, threads=64),
            ["x"], lambda v: {"y": (np.cumsum(per_block(v["x"].astype(np.float64), 64), 1) ** 2).ravel()}),
        "bitonic_sort_pairs": (
            dict(keys=In[f32], vals=In[f64], out=Out[f64]), dict(keys=keys, vals=x128, out=np.zeros(128)),
            dict(blocks=2, threads=64), ["vals"], lambda v: {"out": bitonic_ref(v["keys"], v["vals"])}),
        "last_block_tail": (
            dict(x=In[f32], out=Out[f32], n=i32),
            dict(x=g.standard_normal(150).astype(np.float32), out=np.zeros(150, np.float32), n=150),
            dict(blocks=3, threads=64), ["x"],
            lambda v: {"out": last_block_tail_ref(v["x"].astype(np.float64), 150)}),
        "bitonic_samples": (
            dict(keys=In[f32], vals=In[f64], out=Out[f64]),
            dict(keys=g.permutation(256).astype(np.float32), vals=g.standard_normal(256) * 0.5, out=np.zeros(256)),
            dict(blocks=2, threads=64), ["vals"], lambda v: {"out": bitonic_samples_ref(v["keys"], v["vals"])}),
        "dynamic_shared_floats": (
            dict(a=In[f32], b=In[f32], y=Out[f32]),
            dict(a=xf, b=xf[::-1].copy(), y=np.zeros(128, np.float32)), dict(blocks=2, threads=64, shared_bytes=128 * 4),
            ["a", "b"], lambda v: (lambda a, b: {"y": (a[:, ::-1] * b * b + np.sin(b[:, ::-1] ** 2)).ravel()})(
                per_block(v["a"].astype(np.float64), 64), per_block(v["b"].astype(np.float64), 64))),
        "welford_warp_variance": (
            dict(x=In[f32], var=Out[f32], per_lane=i32), dict(x=xf * 2 + 1, var=np.zeros(2, np.float32), per_lane=2),
            dict(blocks=1, threads=64), ["x"],
            lambda v: {"var": per_block(v["x"].astype(np.float64), 64).var(1)}),
        "online_softmax_rows": (
            dict(x=In[f64], y=Out[f64], cols=i32), dict(x=g.standard_normal((4, 45)) * 2, y=np.zeros((4, 45)), cols=45),
            dict(blocks=2, threads=64), ["x"], lambda v: {"y": softmax_rows(v["x"], 45)}),
        "kahan_rn": (
            dict(x=In[f32], out=Out[f32], per_thread=i32), dict(x=xf, out=np.zeros(32, np.float32), per_thread=4),
            dict(blocks=1, threads=32), ["x"],
            lambda v: (lambda s: {"out": np.sqrt(s) / 4 + s / (1 + s) + 0.5})(
                (per_block(v["x"].astype(np.float64), 4) ** 2).sum(1))),
        "shared_float4_stores": (
            dict(x=In[f32], y=Out[f32]), dict(x=g.standard_normal(512).astype(np.float32), y=np.zeros(512, np.float32)),
            dict(blocks=2, threads=64), ["x"],
            lambda v: (lambda x: {"y": (x[:, ::-1] ** 2 * x).ravel()})(per_block(v["x"].astype(np.float64), 256))),
        "double_bits_allreduce": (
            dict(x=In[f64], y=Out[f64]), dict(x=x128, y=np.zeros(128)), dict(blocks=2, threads=64), ["x"],
            lambda v: {"y": unit_rows(v["x"], 32)}),
        "unroll4_runtime": (
            dict(x=In[f32], y=Out[f32], per_thread=i32), dict(x=xf, y=np.zeros(18, np.float32), per_thread=7),
            dict(blocks=1, threads=18), ["x"],
            lambda v: {"y": (np.sin(v["x"][:126].astype(np.float64).reshape(18, 7)) * np.arange(1, 8)).sum(1)}),
        "shared_float_histogram": (
            dict(bin=In[i32], w=In[f32], hist=Out[f32], n=i32),
            dict(bin=g.integers(0, 40, 100).astype(np.int32), w=xf[:100], hist=np.zeros(16, np.float32), n=100),
            dict(blocks=2, threads=64), ["w"],
            lambda v: {"hist": np.bincount(v["bin"] & 15, v["w"].astype(np.float64) ** 2, minlength=16)}),
        "row_pointer_neighbors": (
            dict(x=In[f64], y=Out[f64], cols=i32), dict(x=g.standard_normal((3, 20)), y=np.zeros((3, 20)), cols=20),
            dict(blocks=3, threads=32), ["x"],
            lambda v: (lambda x: {"y": np.pad(x[:, :-2] * x[:, 2:] - x[:, 1:-1] ** 2, ((0, 0), (1, 1)))})(v["x"])),
        "shared_union": (
            dict(x=In[f32], y=Out[f32]), dict(x=xf, y=np.zeros(128, np.float32)), dict(blocks=2, threads=64), ["x"],
            lambda v: (lambda x: {"y": (x[:, ::-1] * x).ravel()})(per_block(v["x"].astype(np.float64), 64))),
        "data_lane_width8": (
            dict(x=In[f64], src=In[i32], y=Out[f64]),
            dict(x=x128, src=g.integers(0, 64, 128).astype(np.int32), y=np.zeros(128)), dict(blocks=2, threads=64),
            ["x"], lambda v: {"y": (v["x"] ** 2)[(np.arange(128) & ~7) + (v["src"] & 7)] + v["x"]}),
        "all_threads_store_result": (
            dict(x=In[f64], out=Out[f64]), dict(x=x128, out=np.zeros(2)), dict(blocks=2, threads=64), ["x"],
            lambda v: {"out": np.sqrt((per_block(v["x"], 64) ** 2).sum(1))}),
        "same_value_everywhere": (
            dict(x=In[f64], out=Out[f64], a=f64), dict(x=x128, out=np.zeros(1), a=np.float64(1.7)),
            dict(blocks=2, threads=64), ["x", "a"], lambda v: {"out": [v["a"] * v["x"][0]]}),
        "shared_trip_count": (
            dict(x=In[f64], y=Out[f64], rounds=In[i32]), dict(x=x128, y=np.zeros(128), rounds=np.array([3, 5], np.int32)),
            dict(blocks=2, threads=64), ["x"], lambda v: {"y": shared_rounds_ref(v["x"], v["rounds"])}),
        "exch_flag_double_add": (
            dict(x=In[f64], out=Out[f64], flags=InOut[i32]),
            dict(x=x128, out=np.zeros(2), flags=np.zeros(2, np.int32)), dict(blocks=2, threads=64), ["x"],
            lambda v: {"out": np.sqrt((per_block(v["x"], 64) ** 2).sum(1)), "flags": [1, 1]}),
        "device_fn_shared_softmax": (
            dict(x=In[f32], y=Out[f32]), dict(x=xf, y=np.zeros(128, np.float32)), dict(blocks=2, threads=64),
            ["x"], lambda v: {"y": softmax_rows(v["x"].astype(np.float64), 64)}),
        "transpose_padded": (
            dict(**{"in": In[f32]}, out=Out[f32], width=i32, height=i32),
            {"in": g.standard_normal((40, 48)).astype(np.float32), "out": np.zeros((48, 40), np.float32),
             "width": 48, "height": 40},
            dict(blocks=(2, 2), threads=(32, 8)), ["in"],
            lambda v: (lambda t: {"out": t * np.abs(t)})(v["in"].T.astype(np.float64))),
        "dynamic_shared_carved": (
            dict(a=In[f32], b=In[f64], y=Out[f64]),
            dict(a=xf, b=x128, y=np.zeros(128)), dict(blocks=2, threads=64, shared_bytes=64 * 12), ["a", "b"],
            lambda v: (lambda a, b: {"y": (np.roll(a, -3, 1) * b + np.roll(b, -3, 1) ** 2).ravel()})(
                per_block(v["a"].astype(np.float64), 64), per_block(v["b"], 64))),
        "constant_conv2d": (
            dict(img=In[f32], out=Out[f32], w=i32, h=i32),
            dict(img=img, out=np.zeros((20, 24), np.float32), w=24, h=20),
            dict(blocks=(2, 3), threads=(16, 8)), ["img"], lambda v: {"out": conv_ref(v["img"].astype(np.float64))}),
        "restrict_scale": (
            dict(x=In[f32], y=Out[f32], a=f32, n=i32),
            dict(x=xf[:100], y=np.zeros(100, np.float32), a=np.float32(0.7), n=100), dict(blocks=2, threads=64),
            ["x", "a"], lambda v: {"y": v["a"] * v["x"].astype(np.float64) ** 2}),
        "index_arith": (
            dict(x=In[f64], y=Out[f64], n=i32), dict(x=g.standard_normal(50), y=np.zeros(50), n=50),
            dict(blocks=2, threads=32), ["x"], lambda v: {"y": index_ref(v["x"])}),
        "kinks_f32": (
            dict(a=In[f32], b=In[f32], y=Out[f32], n=i32),
            dict(a=kink_a, b=kink_b, y=np.zeros(200, np.float32), n=40), dict(blocks=2, threads=32), ["a", "b"],
            lambda v: {"y": kinks_ref(v["a"].astype(np.float64), v["b"].astype(np.float64))}),
        "warp_exit_then_syncwarp": (
            dict(x=In[f64], out=Out[f64], active_warps=i32), dict(x=x128, out=np.zeros(4), active_warps=1),
            dict(blocks=2, threads=64), ["x"],
            lambda v: {"out": np.stack([(per_block(v["x"], 64)[:, :32] ** 2).sum(1), np.zeros(2)], 1).ravel()}),
    }


CASES = case_values()

# Kernels whose primal and forward derivative are right but whose reverse mode is refused: the thread
# uses an atomic's old value (a ticket, a reserved slot, a flag), which the adjoint launch would not see
# again. name: (module, parameters, values, launch, wrt, reference, what the refusal says)
FORWARD_ONLY = {
    "warp_aggregated_append": ("hunt2",) + CASES.pop("warp_aggregated_append") + ("atomicrmw add.*old value",),
    "exch_flag_double_add": ("hunt2",) + CASES.pop("exch_flag_double_add") + ("atomicrmw xchg.*old value",),
    "threadfence_sum_int": (
        "sync", dict(x=In[f32], partial=Out[f32], total=Out[f32]),
        dict(x=np.linspace(-2, 2, 128, dtype=np.float32), partial=np.zeros(2, np.float32),
             total=np.zeros(1, np.float32)),
        dict(blocks=2, threads=64), ["x"],
        lambda v: (lambda x: {"partial": (per_block(x, 64) ** 2).sum(1), "total": [(x ** 2).sum()]})(
            v["x"].astype(np.float64)),
        "cmpxchg.*old value"),
}


def away_from_zero(x):
    return np.where(np.abs(x) < 0.05, x + 0.1, x).astype(x.dtype)


def block_count_values():
    g = rng(91)
    x = away_from_zero(g.standard_normal(128).astype(np.float32))
    mixed = x.copy()
    mixed[:64] = np.clip(mixed[:64], -1.9, 1.9)      # block 0: no |v| > 2, all > -3: sin; block 1: squares
    mixed[70] = 2.5
    return x, mixed


def count_ref(x):
    x = per_block(x.astype(np.float64), 64)
    return ((x > 0).sum(1, keepdims=True) * x).ravel()


def and_or_ref(x):
    x = per_block(x.astype(np.float64), 64)
    big, positive = (np.abs(x) > 2).any(1, keepdims=True), (x > -3).all(1, keepdims=True)
    return np.where(big, x * x, np.where(positive, np.sin(x), x)).ravel()


_X, _MIXED = block_count_values()
SYNC_CASES = {
    "syncthreads_count_scale": (dict(x=In[f32], y=Out[f32]), dict(x=_X, y=np.zeros(128, np.float32)),
                                dict(blocks=2, threads=64), ["x"], lambda v: {"y": count_ref(v["x"])}),
    "syncthreads_and_or": (dict(x=In[f32], y=Out[f32]), dict(x=_MIXED, y=np.zeros(128, np.float32)),
                           dict(blocks=2, threads=64), ["x"], lambda v: {"y": and_or_ref(v["x"])}),
}

# name: (module, parameters, launch, the error, what its message must say)
REFUSED = {
    "cas_atomic_max": ("hunt2", dict(x=In[f32], m=Out[f32], n=i32), dict(blocks=1, threads=64), DifferentiationError,
                       "'cmpxchg'.*float bits carried as an integer"),
    "cas_atomic_mul": ("hunt2", dict(x=In[f32], prod=InOut[f32], n=i32), dict(blocks=1, threads=64),
                       DifferentiationError, "'cmpxchg'.*float bits carried as an integer"),
    "exch_store_and_swap": ("hunt2", dict(x=In[f32], slot=Out[f32], swapped=InOut[f32], got=Out[f32]),
                            dict(blocks=1, threads=64), DifferentiationError,
                            "'atomicrmw xchg'.*float bits carried as an integer"),
    "warp_exit_then_syncthreads": ("hunt2", dict(x=In[f64], out=Out[f64], active_warps=i32), dict(blocks=2, threads=64),
                                   DivergentBarrierError, r"__syncthreads\(\).*not uniform"),
    "dynamic_shared_carved": ("hunt2", dict(a=In[f32], b=In[f64], y=Out[f64]),
                              dict(blocks=1, threads=64, shared_bytes=64 * 12), CudaTranslationError,
                              "'smem'.*extern __shared__ float buf"),
    # was a silent wrong derivative: the halves went through float shuffles as bits, and the rebuilt double
    # was treated as a constant (enzyme/soundness.py now follows bits through a float that reaches no result)
    "double_halves_allreduce": ("hunt2", dict(x=In[f64], y=Out[f64]), dict(blocks=2, threads=64),
                                DifferentiationError, "shuffle.f32.*float bits carried as an integer"),
    "threadfence_sum": ("sync", dict(x=In[f32], partial=Out[f32], total=Out[f32]), dict(blocks=1, threads=64),
                        CudaTranslationError, "'threadfence_sum::amLast'.*bool or char flag as int"),
}

# refused kernels (REFUSED above) launched with their own values
REFUSED_CASES = {name: CASES.pop(name) for name in ["dynamic_shared_carved"]}

# Each case compiles three kernels (1-3 s on one core): CI runs these (one of each kind, and those that
# needed a change); ADOFFLOAD_CUDA_HUNT=all runs every case (the GPU machine's call).
CORE = {"all_threads_store_result", "same_value_everywhere", "double_bits_allreduce", "saxpy_float4",
        "butterfly_softmax", "ballot_compact", "reduce6_64_any", "blelloch_scan", "transpose_padded",
        "online_softmax_rows", "warp_exit_then_syncwarp", "dynamic_shared_floats", "last_block_tail",
        "bitonic_sort_pairs"}      # bitonic_samples (11 s on one core: its unrolled stages) runs with the others
CORE_REFUSED = {"cas_atomic_max", "warp_exit_then_syncthreads", "threadfence_sum", "dynamic_shared_carved",
                "double_halves_allreduce"}
EVERY_CASE = os.environ.get("ADOFFLOAD_CUDA_HUNT") == "all"


def chosen(names, core):
    skip = pytest.mark.skipif(not EVERY_CASE, reason="a further hunt case (1-3 s each): set ADOFFLOAD_CUDA_HUNT=all")
    return [name if name in core else pytest.param(name, marks=skip) for name in sorted(names)]


_kernels = {}


def hunt_kernel(module, name, params):
    """One CudaKernel per case and module (its compiled specializations are reused)."""
    key = (id(module), name)
    if key not in _kernels:
        _kernels[key] = module.kernel(name, **params)
    return _kernels[key]


def check_primal(k, values, launch, reference, device="cpu"):
    got = run(k, values, launch, device)
    tol = 2e-5 if is_f32(values) else 1e-12
    for out, expected in reference(values).items():
        np.testing.assert_allclose(np.ravel(got[out]).astype(np.float64), np.ravel(expected), rtol=tol, atol=tol,
                                   err_msg=out)
    return got


@pytest.mark.parametrize("name", chosen(CASES, CORE))
def test_kernel_matches_numpy_and_both_oracles(mod, name):
    params, values, launch, wrt, reference = CASES[name]
    k = hunt_kernel(mod, name, params)
    check_primal(k, values, launch, reference)
    both_oracles(k, wrt, values, launch)


@pytest.mark.parametrize("name", sorted(SYNC_CASES))
def test_syncthreads_count_and_or(sync_mod, name):
    """The header's __syncthreads_count/_and/_or (a shared counter between barriers): the count
    scales or chooses the formula, and derivatives follow the branches taken."""
    params, values, launch, wrt, reference = SYNC_CASES[name]
    k = hunt_kernel(sync_mod, name, params)
    check_primal(k, values, launch, reference)
    both_oracles(k, wrt, values, launch)


def _forward_only(mod, sync_mod, name):
    module, params, values, launch, wrt, reference, says = FORWARD_ONLY[name]
    return hunt_kernel(mod if module == "hunt2" else sync_mod, name, params), values, launch, wrt, reference, says


@pytest.mark.parametrize("name", sorted(FORWARD_ONLY))
def test_an_atomics_old_value_allows_the_forward_derivative_only(mod, sync_mod, name):
    """The primal and forward mode are right (the threadfence reduction's last block sums the
    partials: the tangents follow); reverse mode is refused, naming the atomic."""
    k, values, launch, wrt, reference, says = _forward_only(mod, sync_mod, name)
    check_primal(k, values, launch, reference)
    g = rng(5)
    tangents = {n: g.standard_normal(np.shape(values[n])).astype(values[n].dtype) for n in wrt}
    shadows = {f"d_{n}": t.copy() for n, t in tangents.items()}
    for out in written(k):
        shadows.setdefault(f"d_{out}", np.zeros_like(values[out]))
    run(ado.jvp(k, wrt=wrt), values, launch, **shadows)
    h = 1e-3 if is_f32(values) else 1e-6
    plus = {n: (values[n].astype(np.float64) + h * tangents[n]).astype(values[n].dtype) if n in tangents else values[n]
            for n in values}
    minus = {n: (values[n].astype(np.float64) - h * tangents[n]).astype(values[n].dtype) if n in tangents
             else values[n] for n in values}
    for out in written(k):
        fd = (run(k, plus, launch)[out].astype(np.float64) - run(k, minus, launch)[out].astype(np.float64)) / (2 * h)
        assert np.abs(fd).max() > 0, out
        np.testing.assert_allclose(shadows[f"d_{out}"], fd, rtol=0, atol=(2e-2 if is_f32(values) else 1e-6)
                                   * np.abs(fd).max(), err_msg=out)
    seeds = {f"d_{n}": np.zeros_like(values[n]) for n in list(wrt) + written(k)}
    with pytest.raises(DifferentiationError, match=says):
        run(ado.vjp(k, wrt=wrt), values, launch, **seeds)


@pytest.mark.parametrize("name", chosen(REFUSED, CORE_REFUSED))
def test_refused_with_its_reason(mod, sync_mod, name):
    module, params, launch, error, says = REFUSED[name]
    k = hunt_kernel(mod if module == "hunt2" else sync_mod, name, params)
    values = REFUSED_CASES[name][1] if name in REFUSED_CASES else {
        p: (np.zeros(1024, np.float32 if t.dtype == f32 else np.float64 if t.dtype == f64 else np.int32)
            if isinstance(t, ado.types.ArrayType) else 1) for p, t in params.items()}
    wrt = [p for p, t in params.items() if isinstance(t, ado.types.ArrayType) and t.dtype.is_float and not t.writes]
    if error is not DifferentiationError:
        with pytest.raises(error, match=says):
            run(k, values, launch)
        return
    run(k, values, launch)                                          # the primal runs; both derivatives are refused
    for mode in ("jvp", "vjp"):
        shadows = {f"d_{p}": np.zeros_like(values[p]) for p in wrt + written(k)}
        with pytest.raises(error, match=says):
            run(getattr(ado, mode)(k, wrt=wrt), values, launch, **shadows)


def test_a_struct_holding_pointers_is_refused_where_it_is_declared(mod):
    with pytest.raises(ArgumentError, match="field 'x'.*pointers in structs are not supported"):
        mod.kernel("struct_of_pointers", p=ado.struct(x=In[f32], y=Out[f32], n=i32, a=f32))


def test_header_lines_are_reported_at_the_users_call():
    """With line tables, an atomicCAS inlined from ado_cuda.h into a hand-written float atomicMax is
    refused at the user's line (it was 'ado_cuda.h:182'), as is the divergent __syncthreads."""
    try:
        m = ado.from_cuda(HUNT2, options=["-gline-tables-only"])
    except ToolNotFoundError as exc:
        pytest.skip(f"no clang and no cached clang IR of this source: {exc}")
    lines = HUNT2.split("\n")
    cas = 1 + next(n for n, text in enumerate(lines) if "old = atomicCAS(a, assumed, __float_as_int(value))" in text)
    k = m.kernel("cas_atomic_max", x=In[f32], m=Out[f32], n=i32)
    with pytest.raises(DifferentiationError, match=rf"'cmpxchg' %\w+ at <cuda source>:{cas}:"):
        ado.vjp(k, wrt=["x"])(np.ones(64, np.float32), np.zeros(1, np.float32), 64, d_x=np.zeros(64, np.float32),
                              d_m=np.ones(1, np.float32), blocks=1, threads=64)
    start = next(n for n, text in enumerate(lines) if "void warp_exit_then_syncthreads" in text)
    exit_line = 1 + next(n for n in range(start, len(lines)) if "return;" in lines[n])
    k = m.kernel("warp_exit_then_syncthreads", x=In[f64], out=Out[f64], active_warps=i32)
    with pytest.raises(DivergentBarrierError, match=rf"__syncthreads\(\) at <cuda source>:{exit_line + 2} .*"
                                                    rf"the branch at <cuda source>:{exit_line} "):
        k(np.zeros(128), np.zeros(128), 1, blocks=2, threads=64)


def test_kinks_at_ties_take_a_one_sided_derivative_in_both_modes(mod):
    """fminf/fmaxf at a tie, fabsf at 0 and floorf at a step: each forward derivative is one of the
    two one-sided derivatives there (the engine takes the first argument at a tie), and reverse mode
    is the transpose of that same linear map (no mode disagrees with the other)."""
    k = hunt_kernel(mod, "kinks_f32", CASES["kinks_f32"][0])
    a = np.array([0.5, 0.0, 0.25, 1.0, -0.0], np.float32)
    b = np.array([0.5, 0.75, -2.0, 1.0, 1.5], np.float32)
    values, launch = dict(a=a, b=b, y=np.zeros(25, np.float32), n=5), dict(blocks=1, threads=32)

    def f(da, db, h):
        return run(k, dict(values, a=(a + h * da).astype(np.float32), b=(b + h * db).astype(np.float32)),
                   launch)["y"].astype(np.float64)
    h = 2.0 ** -8
    columns = []
    for ta, tb in [(1, 0), (0, 1), (1, 1), (-1, 0), (1, -1)]:
        da, db = np.full(5, ta, np.float32), np.full(5, tb, np.float32)
        shadows = dict(d_a=da.copy(), d_b=db.copy(), d_y=np.zeros(25, np.float32))
        run(ado.jvp(k, wrt=["a", "b"]), values, launch, **shadows)
        jv = shadows["d_y"].astype(np.float64)
        right, left = (f(da, db, h) - f(da, db, 0)) / h, (f(da, db, 0) - f(da, db, -h)) / h
        assert np.all(np.minimum(abs(jv - right), abs(jv - left)) <= 0.02), ((ta, tb), jv, left, right)
        columns.append(jv)
    assert columns[0].reshape(5, 5)[0, 0] == 2.0 and columns[1].reshape(5, 5)[0, 0] == 0.0   # fminf: first argument
    g = rng(7)
    v = {n: g.standard_normal(5).astype(np.float32) for n in "ab"}
    w = g.standard_normal(25).astype(np.float32)
    shadows = dict(d_a=v["a"].copy(), d_b=v["b"].copy(), d_y=np.zeros(25, np.float32))
    run(ado.jvp(k, wrt=["a", "b"]), values, launch, **shadows)
    left = float(shadows["d_y"].astype(np.float64) @ w)
    seeds = dict(d_a=np.zeros(5, np.float32), d_b=np.zeros(5, np.float32), d_y=w.copy())
    run(ado.vjp(k, wrt=["a", "b"]), values, launch, **seeds)
    right = float(v["a"].astype(np.float64) @ seeds["d_a"] + v["b"].astype(np.float64) @ seeds["d_b"])
    assert abs(left - right) <= 1e-5 * (abs(left) + abs(right)), (left, right)


def test_restrict_pointers_given_one_buffer_are_refused(mod):
    """`__restrict__` promises that x and y do not overlap; a launch that passes one buffer (or
    overlapping views) for both, in the primal or as shadows of a derivative, is refused before it runs."""
    k = hunt_kernel(mod, "restrict_scale", CASES["restrict_scale"][0])
    a = np.arange(1, 10, dtype=np.float32)
    launch = dict(blocks=1, threads=32)
    with pytest.raises(ArgumentError, match="'x' and 'y' share memory"):
        k(a, a, np.float32(2), 9, **launch)
    with pytest.raises(ArgumentError, match="share memory"):
        k(a[1:], a[:-1], np.float32(2), 8, **launch)
    d = np.ones(9, np.float32)
    with pytest.raises(ArgumentError, match="'d_x' and 'd_y' share memory"):
        ado.vjp(k, wrt=["x"])(a, np.zeros(9, np.float32), np.float32(2), 9, d_x=d, d_y=d, **launch)
    np.testing.assert_array_equal(a, np.arange(1, 10, dtype=np.float32))        # nothing ran


def test_activemask_is_refused_by_clang_with_the_reason():
    source = r"""
extern "C" __global__ void active_lanes(const float* x, float* y) {
  unsigned m = __activemask();
  y[threadIdx.x] = x[threadIdx.x] * __popc(m);
}
"""
    try:
        ado.from_cuda(source)
    except ToolNotFoundError as exc:
        pytest.skip(f"no clang and no cached clang IR of this source: {exc}")
    except ForeignCompileError as exc:
        assert "__activemask is not supported" in str(exc) and "<cuda source>:3" in str(exc)
    else:
        pytest.fail("__activemask compiled")


@pytest.fixture(scope="module")
def cuda_device():
    from adoffload.runtime import get_device
    try:
        get_device("cuda")
    except Error as exc:
        pytest.skip(f"no CUDA device: {exc}")


@pytest.mark.gpu
@pytest.mark.parametrize("name", chosen(CASES, CORE) + sorted(SYNC_CASES))
def test_on_the_gpu_as_on_the_host_and_both_oracles(cuda_device, mod, sync_mod, name):
    """The same kernels on an NVIDIA GPU: outputs as the host's (float: last bits may differ),
    derivatives through both oracles on the device."""
    module = sync_mod if name in SYNC_CASES else mod
    params, values, launch, wrt, reference = (SYNC_CASES if name in SYNC_CASES else CASES)[name]
    k = hunt_kernel(module, name, params)
    on_gpu = check_primal(k, values, launch, reference, "cuda")
    on_host = run(k, values, launch)
    tol = 1e-5 if is_f32(values) else 1e-10
    for out in written(k):
        np.testing.assert_allclose(on_gpu[out], on_host[out], rtol=tol, atol=tol, err_msg=out)
    both_oracles(k, wrt, values, launch, device="cuda")


@pytest.mark.gpu
@pytest.mark.parametrize("name", sorted(FORWARD_ONLY))
def test_forward_only_cases_on_the_gpu(cuda_device, mod, sync_mod, name):
    """The threadfence reduction and the atomic tickets on the device: the primal as numpy's, the
    reverse mode refused as on the host."""
    k, values, launch, wrt, reference, says = _forward_only(mod, sync_mod, name)
    check_primal(k, values, launch, reference, "cuda")
    seeds = {f"d_{n}": np.zeros_like(values[n]) for n in list(wrt) + written(k)}
    with pytest.raises(DifferentiationError, match=says):
        run(ado.vjp(k, wrt=wrt), values, launch, "cuda", **seeds)
