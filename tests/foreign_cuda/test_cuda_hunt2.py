"""Second soundness hunt with CUDA written the way others write it (hunt2_sources.py): vector loads,
butterfly and scan shuffles, block votes, compaction, hand-written atomics, shared-memory scans and
sorts, constant memory, aliasing and index arithmetic. Each kernel runs on the host CPU against numpy
and its derivatives pass both oracles (test_cuda_hunt.both_oracles: forward mode against central
differences, reverse mode through <J v, w> = <v, J^T w>), or it is refused with an adoffload.Error
that names the construct."""
import os

import numpy as np
import pytest

import adoffload as ado
from adoffload.errors import DifferentiationError, DivergentBarrierError, Error, ToolNotFoundError

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
