"""Soundness hunt with CUDA written the way others write it (hunt_sources.py): each kernel runs on
the host CPU against numpy and its derivatives pass both oracles (forward mode against central
differences, reverse mode through <J v, w> = <v, J^T w>), or it is refused with an adoffload.Error
that names the construct. The oracles are shown to catch a skewed or zeroed adjoint."""
import os

import numpy as np
import pytest

import adoffload as ado
from adoffload.errors import CudaTranslationError, Error, DifferentiationError, DivergentBarrierError, SharedMemoryRaceError, ToolNotFoundError

from .checks import run, written
from .hunt_sources import HUNT

f32, f64, i32 = ado.f32, ado.f64, ado.i32
In, Out, InOut = ado.In, ado.Out, ado.InOut


@pytest.fixture(scope="module")
def mod():
    try:
        return ado.from_cuda(HUNT)
    except ToolNotFoundError as exc:        # no clang and no cached IR of this source (ADOFFLOAD_CACHE_DIR)
        pytest.skip(f"no clang and no cached clang IR of the hunt's source: {exc}")


def rng(seed):
    return np.random.default_rng(seed)


def gelu(v):
    return 0.5 * v * (1 + np.tanh(0.7978845608 * (v + 0.044715 * v ** 3)))


def block_sums(v, block):
    return np.add.reduceat(v, np.arange(0, v.size, block))


def stencil1d_ref(x, w, n):
    p = np.concatenate([np.zeros(3), x, np.zeros(3)])
    r = sum(w[k] * p[k:k + n] for k in range(7))
    return r * r


def heat_ref(u, dt):
    p = np.pad(u, 1)
    c = u
    lap = p[1:-1, :-2] + p[1:-1, 2:] + p[:-2, 1:-1] + p[2:, 1:-1] - 4 * c
    return c + dt * (lap - c ** 3)


def histogram_ref(x, width, block):
    b = np.clip(np.floor(x / width).astype(int), 0, 15)
    y = np.empty_like(x)
    for s in range(0, x.size, block):
        counts = np.bincount(b[s:s + block], minlength=16)
        y[s:s + block] = x[s:s + block] ** 2 / counts[b[s:s + block]]
    return y, np.bincount(b, minlength=16)


def softmax_ref(x):
    e = np.exp(x - x.max(1, keepdims=True))
    return e / e.sum(1, keepdims=True)


def layer_norm_ref(x, g, b, eps):
    mean = x.mean(1, keepdims=True)
    var = (x * x).mean(1, keepdims=True) - mean ** 2
    return (x - mean) / np.sqrt(var + eps) * g + b


def torques_ref(r, f):
    c = np.cross(r, f)
    return c / np.sqrt((c * c).sum(1, keepdims=True) + 1e-3), ((r - f) * f).sum(1)


def nbody_ref(pos, soft2):
    d = pos[None, :, :3] - pos[:, None, :3]
    inv = 1 / np.sqrt((d ** 2).sum(-1) + soft2)
    return (d * (pos[None, :, 3] * inv ** 3)[..., None]).sum(1)


def morse_ref(pos, D, alpha, r0):
    i, j = np.triu_indices(len(pos), 1)
    r = np.linalg.norm(pos[j] - pos[i], axis=1)
    return (D * (1 - np.exp(-alpha * (r - r0))) ** 2).sum()


def rk4_ref(x, v, w, c, dt, steps):
    def f(x, v):
        return v, -w * w * x - c * v
    for _ in range(steps):
        k1 = f(x, v)
        k2 = f(x + 0.5 * dt * k1[0], v + 0.5 * dt * k1[1])
        k3 = f(x + 0.5 * dt * k2[0], v + 0.5 * dt * k2[1])
        k4 = f(x + dt * k3[0], v + dt * k3[1])
        x, v = (x + dt / 6 * (k1[0] + 2 * k2[0] + 2 * k3[0] + k4[0]),
                v + dt / 6 * (k1[1] + 2 * k2[1] + 2 * k3[1] + k4[1]))
    return x, v


def csr(rows, cols, per_row, seed):
    g = rng(seed)
    counts = g.integers(0, per_row + 1, rows)
    rowptr = np.concatenate([[0], np.cumsum(counts)]).astype(np.int32)
    colidx = np.concatenate([np.sort(g.choice(cols, c, replace=False)) for c in counts]).astype(np.int32)
    return rowptr, colidx, g.standard_normal(rowptr[-1])


def spmv_ref(rowptr, colidx, vals, x):
    return np.array([vals[a:b] @ x[colidx[a:b]] for a, b in zip(rowptr[:-1], rowptr[1:])])


def case_values():
    """name: (parameters, values, launch, wrt, reference(values) -> {output: expected}, extra launch options)."""
    g = rng(80)
    n = 150
    xf = g.standard_normal(n).astype(np.float32)
    xc = np.where(np.minimum(abs(xf + 0.5), abs(xf - 0.8)) < 0.05, xf + 0.1, xf)     # no clamp kink in reach
    rowptr, colidx, vals = csr(40, 30, 4, 81)
    hist_x = ((g.integers(0, 16, 200) + g.uniform(0.2, 0.8, 200)) * 0.25).astype(np.float32)
    pos4 = np.concatenate([g.uniform(0, 3, (50, 3)), g.uniform(0.5, 1.5, (50, 1))], 1).astype(np.float32)
    grid = np.stack(np.meshgrid(*[np.arange(3.0)] * 3, indexing="ij"), -1).reshape(-1, 3)[:20] * 1.2
    mpos = grid + g.uniform(-0.1, 0.1, grid.shape)
    return {
        "scale_shift_ldg": (
            dict(x=In[f32], y=Out[f32], a=f32, b=f32, n=i32),
            dict(x=xf, y=np.zeros(n, np.float32), a=np.float32(1.7), b=np.float32(-0.3), n=n),
            dict(blocks=3, threads=64), ["x", "a", "b"], lambda v: {"y": v["a"] * v["x"] + v["b"]}),
        "axpby_grid_stride": (
            dict(a=f64, x=In[f64], b=f64, y=InOut[f64], n=i32),
            dict(a=np.float64(0.6), x=g.standard_normal(300), b=np.float64(-1.1), y=g.standard_normal(300), n=300),
            dict(blocks=2, threads=64), ["a", "x", "b", "y"],
            lambda v: {"y": v["a"] * v["x"] + v["b"] * v["y"]}),
        "activations_f32": (
            dict(x=In[f32], gelu=Out[f32], silu=Out[f32], soft=Out[f32], n=i32),
            dict(x=xf[:120], gelu=np.zeros(120, np.float32), silu=np.zeros(120, np.float32),
                 soft=np.zeros(120, np.float32), n=120),
            dict(blocks=2, threads=64), ["x"],
            lambda v: (lambda x: {"gelu": gelu(x), "silu": x / (1 + np.exp(-x)),
                                  "soft": np.log1p(np.exp(x)) + 1 / np.sqrt(1 + x * x)
                                  + np.vectorize(__import__("math").erf)(0.5 * x) + (1.5 + x * x) ** 0.75})(
                v["x"].astype(np.float64))),
        "math_f64": (
            dict(x=In[f64], out=Out[f64], n=i32),
            dict(x=g.uniform(-2, 2, 90), out=np.zeros(360), n=90), dict(blocks=3, threads=32), ["x"],
            lambda v: (lambda x: {"out": np.stack([
                np.sin(x) * np.cos(x) + np.exp(-0.5 * x * x),
                np.sqrt(1 + x * x) ** 1.5 + np.tanh(x) * np.vectorize(__import__("math").erf)(x),
                np.log1p(x * x) / np.sqrt(1 + x * x) + np.arctan2(np.sin(x), 2 + np.cos(x)),
                np.cbrt(2 + np.sin(x)) + np.hypot(x, np.cos(x))], 1).ravel()})(v["x"])),
        "sum_squares_64": (
            dict(x=In[f32], partial=Out[f32], n=i32),
            dict(x=xf, partial=np.zeros(3, np.float32), n=n), dict(blocks=3, threads=64), ["x"],
            lambda v: {"partial": block_sums(np.pad(v["x"].astype(np.float64), (0, 42)) ** 2, 64)}),
        "sum_squares_128": (
            dict(x=In[f32], partial=Out[f32], n=i32),
            dict(x=xf, partial=np.zeros(2, np.float32), n=n), dict(blocks=2, threads=128), ["x"],
            lambda v: {"partial": block_sums(np.pad(v["x"].astype(np.float64), (0, 106)) ** 2, 128)}),
        "dot_shfl_atomic": (
            dict(a=In[f64], b=In[f64], result=Out[f64], n=i32),
            dict(a=g.standard_normal(700), b=g.standard_normal(700), result=np.zeros(1), n=700),
            dict(blocks=2, threads=128), ["a", "b"], lambda v: {"result": [v["a"] @ v["b"]]}),
        "norm2_two_level": (
            dict(x=In[f32], out=Out[f32], n=i32),
            dict(x=xf, out=np.zeros(1, np.float32), n=n), dict(blocks=2, threads=128), ["x"],
            lambda v: {"out": [(v["x"].astype(np.float64) ** 2).sum()]}),
        "sum_syncwarp_tail": (
            dict(x=In[f64], partial=Out[f64]),
            dict(x=g.standard_normal(192), partial=np.zeros(3)), dict(blocks=3, threads=64), ["x"],
            lambda v: {"partial": block_sums(v["x"], 64)}),
        "warp_normalize": (
            dict(x=In[f64], y=Out[f64]),
            dict(x=g.standard_normal(128), y=np.zeros(128)), dict(blocks=2, threads=64), ["x"],
            lambda v: {"y": (v["x"].reshape(-1, 32) / np.sqrt((v["x"].reshape(-1, 32) ** 2).sum(1, keepdims=True))
                             ).ravel()}),
        "stencil1d": (
            dict(**{"in": In[f64]}, w=In[f64], out=Out[f64], n=i32),
            {"in": g.standard_normal(200), "w": g.standard_normal(7), "out": np.zeros(200), "n": 200},
            dict(blocks=4, threads=64), ["in", "w"], lambda v: {"out": stencil1d_ref(v["in"], v["w"], 200)}),
        "heat2d": (
            dict(u=In[f32], v=Out[f32], dt=f32, nx=i32, ny=i32),
            dict(u=g.uniform(-1, 1, (19, 37)).astype(np.float32), v=np.zeros((19, 37), np.float32),
                 dt=np.float32(0.1), nx=37, ny=19),
            dict(blocks=(3, 3), threads=(16, 8)), ["u", "dt"],
            lambda v: {"v": heat_ref(v["u"].astype(np.float64), 0.1)}),
        "matmul_tiled": (
            dict(A=In[f64], B=In[f64], C=Out[f64], M=i32, N=i32, K=i32),
            dict(A=g.standard_normal((20, 35)), B=g.standard_normal((35, 18)), C=np.zeros((20, 18)), M=20, N=18,
                 K=35),
            dict(blocks=(2, 2), threads=(16, 16)), ["A", "B"], lambda v: {"C": v["A"] @ v["B"]}),
        "transpose_scaled": (
            dict(out=Out[f32], **{"in": In[f32]}, alpha=f32, width=i32, height=i32),
            {"out": np.zeros((40, 35), np.float32), "in": g.standard_normal((35, 40)).astype(np.float32),
             "alpha": np.float32(1.5), "width": 40, "height": 35},
            dict(blocks=(2, 2), threads=(32, 8)), ["in", "alpha"], lambda v: {"out": 1.5 * v["in"].T}),
        "spmv_csr": (
            dict(rowptr=In[i32], cols=In[i32], vals=In[f64], x=In[f64], y=Out[f64], rows=i32),
            dict(rowptr=rowptr, cols=colidx, vals=vals, x=g.standard_normal(30), y=np.zeros(40), rows=40),
            dict(blocks=2, threads=32), ["vals", "x"],
            lambda v: {"y": spmv_ref(v["rowptr"], v["cols"], v["vals"], v["x"])}),
        "histogram_weights": (
            dict(x=In[f32], y=Out[f32], counts=Out[i32], lo=f32, width=f32, n=i32),
            dict(x=hist_x, y=np.zeros(200, np.float32), counts=np.zeros(16, np.int32), lo=np.float32(0),
                 width=np.float32(0.25), n=200),
            dict(blocks=4, threads=64), ["x"],
            lambda v: dict(zip(["y", "counts"], histogram_ref(v["x"].astype(np.float64), 0.25, 64)))),
        "scatter_add": (
            dict(index=In[i32], w=In[f32], x=In[f32], y=Out[f32], n=i32),
            dict(index=g.integers(0, 30, 200).astype(np.int32), w=g.standard_normal(200).astype(np.float32),
                 x=g.standard_normal(200).astype(np.float32), y=np.zeros(30, np.float32), n=200),
            dict(blocks=4, threads=64), ["w", "x"],
            lambda v: {"y": np.bincount(v["index"], v["w"].astype(np.float64) * np.sin(v["x"].astype(np.float64)),
                                        minlength=30)}),
        "softmax_rows": (
            dict(x=In[f32], y=Out[f32], cols=i32),
            dict(x=g.standard_normal((3, 150)).astype(np.float32), y=np.zeros((3, 150), np.float32), cols=150),
            dict(blocks=3, threads=64), ["x"], lambda v: {"y": softmax_ref(v["x"].astype(np.float64))}),
        "layer_norm_64": (
            dict(x=In[f64], g=In[f64], b=In[f64], y=Out[f64], cols=i32, eps=f64),
            dict(x=g.standard_normal((3, 100)), g=g.uniform(0.5, 1.5, 100), b=g.standard_normal(100),
                 y=np.zeros((3, 100)), cols=100, eps=np.float64(1e-3)),
            dict(blocks=3, threads=64), ["x", "g", "b", "eps"],
            lambda v: {"y": layer_norm_ref(v["x"], v["g"], v["b"], 1e-3)}),
        # the last warp returns before the shuffles; it runs the counted column loops speculatively (it was
        # refused: loops a lane leaves on its own, then shuffles)
        "logsumexp_warp": (
            dict(x=In[f64], out=Out[f64], rows=i32, cols=i32),
            dict(x=rng(17).standard_normal((5, 70)), out=np.zeros(5), rows=5, cols=70), dict(blocks=3, threads=64),
            ["x"], lambda v: {"out": np.log(np.exp(v["x"]).sum(1))}),
        "logsumexp_warp_clamped": (
            dict(x=In[f64], out=Out[f64], rows=i32, cols=i32),
            dict(x=g.standard_normal((5, 70)), out=np.zeros(5), rows=5, cols=70), dict(blocks=3, threads=64), ["x"],
            lambda v: {"out": np.log(np.exp(v["x"]).sum(1))}),
        "scan_then_map": (
            dict(x=In[f64], y=Out[f64]),
            dict(x=g.standard_normal(128) * 0.3, y=np.zeros(128)), dict(blocks=2, threads=64), ["x"],
            lambda v: {"y": np.sin(np.cumsum(v["x"].reshape(2, 64), 1).ravel()) * v["x"]}),
        "torques": (
            dict(r=In[f64], f=In[f64], tau=Out[f64], work=Out[f64], n=i32),
            dict(r=g.standard_normal((50, 3)), f=g.standard_normal((50, 3)), tau=np.zeros((50, 3)), work=np.zeros(50),
                 n=50),
            dict(blocks=2, threads=32), ["r", "f"],
            lambda v: dict(zip(["tau", "work"], torques_ref(v["r"], v["f"])))),
        "nbody_forces": (
            dict(pos=In[f32], acc=Out[f32], soft2=f32, n=i32),
            dict(pos=pos4, acc=np.zeros((50, 3), np.float32), soft2=np.float32(0.05), n=50),
            dict(blocks=2, threads=32), ["pos", "soft2"],
            lambda v: {"acc": nbody_ref(v["pos"].astype(np.float64), 0.05)}),
        "morse_energy": (
            dict(pos=In[f64], energy=Out[f64], D=f64, alpha=f64, r0=f64, n=i32),
            dict(pos=mpos, energy=np.zeros(1), D=np.float64(0.8), alpha=np.float64(1.3), r0=np.float64(1.1), n=20),
            dict(blocks=1, threads=32), ["pos", "D", "alpha", "r0"],
            lambda v: {"energy": [morse_ref(v["pos"], 0.8, 1.3, 1.1)]}),
        "reverse_block": (
            dict(**{"in": In[f64]}, out=Out[f64]),
            {"in": g.standard_normal(192), "out": np.zeros(192)}, dict(blocks=3, threads=64), ["in"],
            lambda v: {"out": v["in"].reshape(3, 64)[:, ::-1].ravel() * v["in"]}),
        "reverse_dynamic": (
            dict(**{"in": In[f64]}, out=Out[f64]),
            {"in": g.standard_normal(128), "out": np.zeros(128)}, dict(blocks=2, threads=64, shared_bytes=64 * 8),
            ["in"], lambda v: {"out": v["in"].reshape(2, 64)[:, ::-1].ravel() ** 2}),
        "rk4_oscillators": (
            dict(x=InOut[f64], v=InOut[f64], w=In[f64], c=f64, dt=f64, steps=i32, n=i32),
            dict(x=g.standard_normal(40), v=g.standard_normal(40), w=g.uniform(0.5, 2, 40), c=np.float64(0.1),
                 dt=np.float64(0.05), steps=12, n=40),
            dict(blocks=2, threads=32), ["x", "v", "w", "c", "dt"],
            lambda v: dict(zip(["x", "v"], rk4_ref(v["x"], v["v"], v["w"], 0.1, 0.05, 12)))),
        "clamp_accumulate": (
            dict(x=In[f32], partial=Out[f64], lo=f32, hi=f32, n=i32),
            dict(x=xc, partial=np.zeros(3), lo=np.float32(-0.5), hi=np.float32(0.8), n=n),
            dict(blocks=3, threads=64), ["x", "lo", "hi"],
            lambda v: {"partial": block_sums(np.pad(np.clip(v["x"], np.float32(-0.5), np.float32(0.8))
                                                    .astype(np.float64), (0, 42)) ** 2, 64)}),
        "neighbor_diff_return_after": (
            dict(x=In[f64], y=Out[f64], n=i32),
            dict(x=g.standard_normal(150), y=np.zeros(150), n=150), dict(blocks=3, threads=64), ["x"],
            lambda v: {"y": np.append(v["x"][1:], 0.0) ** 2 - v["x"]}),
        "ticket_prefix": (
            dict(x=In[f32], acc=Out[f32], y=Out[f32], n=i32),
            dict(x=xf[:64], acc=np.zeros(1, np.float32), y=np.zeros(64, np.float32), n=64), dict(blocks=1, threads=64),
            ["x"], lambda v: (lambda x: {"acc": [x.sum()], "y": (np.cumsum(x) - x) * x})(v["x"].astype(np.float64))),
        "weighted_histogram": (
            dict(bin=In[i32], w=In[f64], hist=Out[f64], n=i32),
            dict(bin=g.integers(0, 8, 150).astype(np.int32), w=g.standard_normal(150), hist=np.zeros(8), n=150),
            dict(blocks=3, threads=64), ["w"],
            lambda v: {"hist": np.bincount(v["bin"], v["w"] ** 2, minlength=8)}),
        "warp_segments": (
            dict(x=In[f64], half_sums=Out[f64], centered=Out[f64], scan=Out[f64]),
            dict(x=g.standard_normal(128), half_sums=np.zeros(8), centered=np.zeros(128), scan=np.zeros(128)),
            dict(blocks=2, threads=64), ["x"],
            lambda v: (lambda x: {"half_sums": x.reshape(8, 16).sum(1),
                                  "centered": (x.reshape(4, 32) - x.reshape(4, 32)[:, :1] ** 2).ravel(),
                                  "scan": np.cumsum(x.reshape(4, 32), 1).ravel()})(v["x"])),
        "poly_window": (
            dict(x=In[f64], y=Out[f64], n=i32),
            dict(x=g.standard_normal(100), y=np.zeros(100), n=100), dict(blocks=2, threads=64), ["x"],
            lambda v: {"y": poly_window_ref(v["x"])}),
        "switched_potential": (
            dict(r=In[f64], e=Out[f64], rc=f64, rs=f64, n=i32),
            dict(r=g.uniform(0.5, 3.0, 100), e=np.zeros(100), rc=np.float64(2.5), rs=np.float64(1.0), n=100),
            dict(blocks=2, threads=64), ["r", "rc", "rs"], lambda v: {"e": switched_ref(v["r"], 2.5, 1.0)}),
        "global_exchange": (
            dict(x=In[f64], tmp=Out[f64], y=Out[f64]),
            dict(x=g.standard_normal(128), tmp=np.zeros(128), y=np.zeros(128)), dict(blocks=2, threads=64), ["x"],
            lambda v: {"tmp": v["x"] ** 2, "y": v["x"].reshape(-1, 2)[:, ::-1].ravel() ** 2 * v["x"]}),
        "normalize_by_shared_total": (
            dict(x=In[f32], y=Out[f32]), dict(x=xf[:128], y=np.zeros(128, np.float32)), dict(blocks=2, threads=64),
            ["x"], lambda v: (lambda x: {"y": (x / np.sqrt((x ** 2).sum(1, keepdims=True))).ravel()})(
                v["x"].astype(np.float64).reshape(2, 64))),
        "jacobi_shared": (
            dict(u0=In[f64], u=Out[f64], f=In[f64], iters=i32),
            dict(u0=g.standard_normal(128) * 0.5, u=np.zeros(128), f=g.standard_normal(128), iters=5),
            dict(blocks=2, threads=64), ["u0", "f"], lambda v: {"u": jacobi_ref(v["u0"], v["f"], 5)}),
        "tiles_then_overwrite": (
            dict(y=InOut[f64], tiles=i32), dict(y=g.standard_normal(192), tiles=3), dict(blocks=1, threads=64), ["y"],
            lambda v: (lambda y: {"y": ((y * y[:, ::-1]).sum(0) * y).ravel()})(v["y"].reshape(3, 64))),
        "rotating_accumulator": (
            dict(x=In[f64], y=Out[f64], tiles=i32), dict(x=g.standard_normal(2 * 3 * 64) * 0.5, y=np.zeros(128), tiles=3),
            dict(blocks=2, threads=64), ["x"], lambda v: {"y": rotating_ref(v["x"], 3)}),
        "reduce_two_loads": (
            dict(x=In[f64], out=Out[f64], n=i32),
            dict(x=g.standard_normal(600), out=np.zeros(3), n=600), dict(blocks=3, threads=128), ["x"],
            lambda v: {"out": (np.pad(v["x"], (0, 168)).reshape(3, 2, 128).sum(1) ** 2).sum(1)}),
        "warp_gather": (
            dict(x=In[f64], src=In[i32], y=Out[f64]),
            dict(x=g.standard_normal(128), src=g.integers(0, 8, 128).astype(np.int32), y=np.zeros(128)),
            dict(blocks=2, threads=64), ["x"],
            lambda v: {"y": (v["x"] ** 2).reshape(4, 32)[np.arange(4)[:, None], v["src"].reshape(4, 32) & 31].ravel()
                       * v["x"]}),
        "scratch_and_broadcast": (
            dict(x=In[f64], y=Out[f64]), dict(x=g.standard_normal(128), y=np.zeros(128)), dict(blocks=2, threads=64),
            ["x"], lambda v: (lambda x: (lambda p: {"y": (p - p[:, :1] * x).ravel()})(
                sum(x ** (k + 1) / (k + 1) for k in range(5))))(v["x"].reshape(2, 64))),
        "private_rows_across_barrier": (
            dict(x=In[f64], y=Out[f64], mode=i32), dict(x=g.standard_normal(512), y=np.zeros(512), mode=1),
            dict(blocks=2, threads=64), ["x"], lambda v: {"y": private_rows_ref(v["x"])}),
        "rows_in_warps": (
            dict(x=In[f32], y=Out[f32], nx=i32),
            dict(x=g.standard_normal((16, 32)).astype(np.float32), y=np.zeros((16, 32), np.float32), nx=32),
            dict(blocks=(2, 2), threads=(16, 8)), ["x"], lambda v: {"y": rows_in_warps_ref(v["x"].astype(np.float64))}),
        "chunks_in_place": (
            dict(y=InOut[f64], chunks=i32), dict(y=g.standard_normal(192), chunks=3), dict(blocks=1, threads=64), ["y"],
            lambda v: {"y": chunks_ref(v["y"])}),
        "serial_section": (
            dict(x=In[f64], y=Out[f64]), dict(x=g.standard_normal(128), y=np.zeros(128)), dict(blocks=2, threads=64),
            ["x"], lambda v: {"y": softmax_ref(v["x"].reshape(2, 64)).ravel()}),
        "half_warp_logsum": (
            dict(x=In[f64], out=Out[f64]), dict(x=g.standard_normal(128), out=np.zeros(2)), dict(blocks=2, threads=64),
            ["x"], lambda v: (lambda x: {"out": (np.log(x[:, :16] ** 2 + x[:, 16:32] ** 2)
                                                 + np.abs(x[:, 32:48])).sum(1)})(v["x"].reshape(2, 64))),
    }


def chunks_ref(y):
    y = y.reshape(-1, 64).copy()
    for k in range(len(y)):
        y[k] = y[k][::-1] * y[k] + (y[k - 1] if k > 0 else 0)
    return y.ravel()


def private_rows_ref(x):
    out = []
    for r in x.reshape(-1, 4, 64):
        s = r[0] * r[1]
        left = np.roll(s, 1)
        s = r[2] * left
        left = np.roll(s, -1)
        out.append(r * left + r[[1, 2, 3, 0]])
    return np.concatenate(out).ravel()


def rows_in_warps_ref(x):
    sums = (x.reshape(16, 2, 16).sum(2, keepdims=True) * np.ones((1, 1, 16))).reshape(16, 32)
    below = np.roll(x, -1, 0)
    even = (np.arange(16) % 2 == 0)[:, None]
    return np.where(even, x * below + sums, x * sums)


def jacobi_ref(u0, f, iters):
    out = []
    for a, fb in zip(u0.reshape(-1, 64), f.reshape(-1, 64)):
        cur = np.pad(a, 1)
        for _ in range(iters):
            nxt = np.zeros(66)
            nxt[1:65] = 0.5 * (cur[:64] + cur[2:]) + 0.1 * fb * cur[1:65] ** 2
            cur = nxt
        out.append(cur[1:65])
    return np.concatenate(out)


def rotating_ref(x, tiles):
    out = []
    for xb in x.reshape(-1, tiles, 64):
        acc = np.zeros(64)
        for k in range(tiles):
            j = (np.arange(64) + k) % 64
            acc[j] = 0.5 * acc[j] ** 2 + xb[k] ** 2 + xb[k]
        out.append(acc * acc[::-1])
    return np.concatenate(out)


def poly_window_ref(x):
    n = len(x)
    coef = [0.5, -1.25, 0.75, 0.125, -0.0625]
    win = np.stack([x[np.minimum(np.arange(n) + k, n - 1)] for k in range(4)])
    p = np.polynomial.polynomial.polyval(win, coef)
    return sum(p[k] * win[(k + 1) & 3] for k in range(4))


def switched_ref(r, rc, rs):
    s = (r - rs) / (rc - rs)
    return np.where(r < rs, 1 / r ** 2, np.where(r < rc, 1 / r ** 2 * (1 - s * s * (3 - 2 * s)), 0.0))


CASES = case_values()
CASES_WITHOUT_DERIVATIVES = {name: CASES.pop(name) for name in ["ticket_prefix"]}
REFUSED = {      # name: (parameters, launch, the error, what its message must say)
    "neighbor_diff_return_before": (dict(x=In[f64], y=Out[f64], n=i32), dict(blocks=2, threads=64),
                                    DivergentBarrierError, "barrier"),
    "barrier_under_data_branch": (dict(x=In[f64], y=Out[f64]), dict(blocks=1, threads=64),
                                  DivergentBarrierError, "barrier"),
    "heat2d_bad_halo": (dict(u=In[f32], v=Out[f32], dt=f32, nx=i32, ny=i32), dict(blocks=(1, 1), threads=(16, 8)),
                        SharedMemoryRaceError, "race on 'tile'"),
    "grid_stride_barrier": (dict(x=In[f64], y=Out[f64], n=i32), dict(blocks=2, threads=64), DivergentBarrierError,
                            "barrier"),
    "recursive_power": (dict(x=In[f64], y=Out[f64], e=In[i32]), dict(blocks=1, threads=64), CudaTranslationError,
                        "could not be inlined"),
    "racy_accumulate": (dict(x=In[f64], y=Out[f64]), dict(blocks=1, threads=64), SharedMemoryRaceError, "race"),
    "sum_volatile_tail": (dict(x=In[f32], partial=Out[f32]), dict(blocks=2, threads=64), SharedMemoryRaceError,
                          "race"),
}


def is_f32(values) -> bool:
    return any(isinstance(v, np.ndarray) and v.dtype == np.float32 for v in values.values())


def shifted(values, tangents, h):
    out = dict(values)
    for name, t in tangents.items():
        v = values[name]
        out[name] = (np.asarray(v, np.float64) + h * t).astype(np.asarray(v).dtype)
        if not isinstance(v, np.ndarray):
            out[name] = type(v)(out[name])
    return out


def outputs(k, values):
    return np.concatenate([np.ravel(values[n]).astype(np.float64) for n in written(k)])


def both_oracles(k, wrt, values, launch, *, seed=0, skew=1.0, device="cpu", frozen=None):
    """Forward mode against central differences, reverse mode against forward mode through
    <J v, w> = <v, J^T w>; ``skew`` scales the reverse-mode gradients (the oracle self-check).
    ``frozen``: name -> boolean mask of elements whose tangent is zero (an int's bits kept in a float
    array, as HOOMD keeps a particle's type in its position's w)."""
    g = rng(seed)
    single = is_f32(values)
    tangents = {n: (g.standard_normal(np.shape(values[n])) if isinstance(values[n], np.ndarray)
                    else g.standard_normal()) for n in wrt}
    for n, mask in (frozen or {}).items():
        tangents[n] = np.where(mask, 0.0, tangents[n])
    typed = {n: (t.astype(values[n].dtype) if isinstance(values[n], np.ndarray) else type(values[n])(t))
             for n, t in tangents.items()}
    tangents = {n: np.asarray(t, np.float64) for n, t in typed.items()}      # the ones the JVP gets
    shadows = {f"d_{n}": (t.copy() if isinstance(t, np.ndarray) else t) for n, t in typed.items()}
    for name in written(k):
        shadows.setdefault(f"d_{name}", np.zeros_like(values[name]))
    run(ado.jvp(k, wrt=wrt), values, launch, device, **shadows)
    jv = np.concatenate([np.ravel(shadows[f"d_{n}"]).astype(np.float64) for n in written(k)])

    h = 1e-3 if single else 1e-6
    fd = (outputs(k, run(k, shifted(values, tangents, h), launch, device))
          - outputs(k, run(k, shifted(values, tangents, -h), launch, device))) / (2 * h)
    scale = np.abs(fd).max()
    assert scale > 0, "the outputs do not depend on the inputs: the case checks nothing"
    assert np.abs(jv - fd).max() <= (2e-2 if single else 1e-6) * scale, ("J v vs differences", jv, fd)

    w = {n: g.standard_normal(np.shape(values[n])).astype(values[n].dtype) for n in written(k)}
    seeds = {f"d_{n}": w[n].copy() for n in written(k)}
    for name in wrt:
        v = values[name]
        seeds.setdefault(f"d_{name}", np.zeros_like(v) if isinstance(v, np.ndarray) else np.zeros(1, type(v)))
    run(ado.vjp(k, wrt=wrt), values, launch, device, **seeds)
    grads = {n: np.ravel(seeds[f"d_{n}"]).astype(np.float64) * skew for n in wrt}
    terms = np.concatenate([jv * np.concatenate([np.ravel(w[n]).astype(np.float64) for n in written(k)])]
                           + [np.ravel(tangents[n]) * grads[n] for n in wrt])
    left = float((jv * np.concatenate([np.ravel(w[n]) for n in written(k)])).sum())
    right = sum(float(np.ravel(tangents[n]) @ grads[n]) for n in wrt)
    assert abs(left - right) <= (1e-4 if single else 1e-11) * np.abs(terms).sum(), ("<Jv,w> vs <v,J^T w>", left,
                                                                                      right)


# Each case compiles three kernels (about 2.5 s on one core): CI runs these, which hold the bugs the hunt
# found and one kernel of each kind; ADOFFLOAD_CUDA_HUNT=all runs every case (the GPU machine's call).
CORE = {"dot_shfl_atomic", "heat2d", "jacobi_shared", "math_f64", "matmul_tiled", "norm2_two_level", "poly_window",
        "softmax_rows", "tiles_then_overwrite", "logsumexp_warp"}
CORE_REFUSED = {"heat2d_bad_halo", "neighbor_diff_return_before", "sum_volatile_tail"}
EVERY_CASE = os.environ.get("ADOFFLOAD_CUDA_HUNT") == "all"


def chosen(names, core):
    skip = pytest.mark.skipif(not EVERY_CASE, reason="a further hunt case (2-3 s each): set ADOFFLOAD_CUDA_HUNT=all")
    return [name if name in core else pytest.param(name, marks=skip) for name in sorted(names)]


_kernels = {}


def hunt_kernel(mod, name, params):
    """One CudaKernel per case for the module (its compiled specializations are reused)."""
    if name not in _kernels:
        _kernels[name] = mod.kernel(name, **params)
    return _kernels[name]


@pytest.mark.parametrize("name", chosen(CASES, CORE))
def test_kernel_matches_numpy_and_both_oracles(mod, name):
    params, values, launch, wrt, reference = CASES[name]
    k = hunt_kernel(mod, name, params)
    got = run(k, values, launch)
    tol = 2e-5 if is_f32(values) else 1e-12
    for out, expected in reference(values).items():
        np.testing.assert_allclose(np.ravel(got[out]), np.ravel(expected), rtol=tol, atol=tol, err_msg=out)
    both_oracles(k, wrt, values, launch)


@pytest.fixture(scope="module")
def cuda_device():
    from adoffload.runtime import get_device
    try:
        get_device("cuda")
    except Error as exc:
        pytest.skip(f"no CUDA device: {exc}")


@pytest.mark.gpu
@pytest.mark.parametrize("name", chosen(CASES, CORE))
def test_on_the_gpu_as_on_the_host_and_both_oracles(cuda_device, mod, name):
    """The same kernels on an NVIDIA GPU: outputs as the host's (float: the device's rsqrtf, __expf
    may differ in the last bits), derivatives through both oracles on the device."""
    params, values, launch, wrt, _ = CASES[name]
    k = hunt_kernel(mod, name, params)
    on_gpu, on_host = run(k, values, launch, "cuda"), run(k, values, launch)
    tol = 1e-5 if is_f32(values) else 1e-10
    for out in written(k):
        np.testing.assert_allclose(on_gpu[out], on_host[out], rtol=tol, atol=tol, err_msg=out)
    both_oracles(k, wrt, values, launch, device="cuda")


@pytest.mark.parametrize("name", chosen(REFUSED, CORE_REFUSED))
def test_undefined_cuda_is_refused_with_its_reason(mod, name):
    params, launch, error, says = REFUSED[name]
    k = mod.kernel(name, **params)
    values = {p: (np.zeros(4096, np.float32 if t.dtype == f32 else np.float64)
                  if isinstance(t, ado.types.ArrayType) else 100) for p, t in params.items()}
    with pytest.raises(error, match=says):
        run(k, values, launch)


LINES = r"""
__global__ void early_exit(const double* x, double* y, int n) {
  __shared__ double s[64];
  int t = threadIdx.x, i = blockIdx.x * 64 + t;
  if (i >= n) return;
  s[t] = x[i];
  __syncthreads();
  y[i] = s[(t + 1) % 64] - s[t];
}
"""


def test_with_line_tables_a_refusal_names_the_source_lines():
    """clang's -gline-tables-only: the barrier and the branch are named by line in the CUDA source."""
    try:
        k = ado.from_cuda(LINES, options=["-gline-tables-only"]).kernel("early_exit", x=In[f64], y=Out[f64], n=i32)
    except ToolNotFoundError as exc:
        pytest.skip(f"no clang and no cached clang IR of this source: {exc}")
    with pytest.raises(DivergentBarrierError, match=r"__syncthreads\(\) at <cuda source>:7 .*the branch at "
                                                    r"<cuda source>:5 "):
        k(np.zeros(64), np.zeros(64), 64, blocks=1, threads=64)


@pytest.mark.parametrize("mode", ["jvp", "vjp"])
def test_an_atomics_old_value_runs_but_has_no_derivative(mod, mode):
    """``before = atomicAdd(acc, x[i])``: in forward mode the tangent would come from a second atomic
    on the shadow, which threads reach in another order; in reverse mode the adjoint's own launch
    would hand out other old values. Both refuse, naming the atomic; the primal runs."""
    params, values, launch, wrt, reference = CASES_WITHOUT_DERIVATIVES["ticket_prefix"]
    k = mod.kernel("ticket_prefix", **params)
    got = run(k, values, launch)
    for out, expected in reference(values).items():
        np.testing.assert_allclose(np.ravel(got[out]), np.ravel(expected), rtol=2e-5, atol=2e-5, err_msg=out)
    derived = getattr(ado, mode)(k, wrt=wrt)
    shadows = {f"d_{n}": np.zeros_like(values[n]) for n in ["x", "acc", "y"]}
    with pytest.raises(DifferentiationError, match="atomicrmw fadd.*old value"):
        run(derived, values, launch, **shadows)


@pytest.mark.parametrize("name, skew", [("matmul_tiled", 1.01), ("dot_shfl_atomic", 0.0)])
def test_the_oracles_catch_a_wrong_adjoint(mod, name, skew):
    params, values, launch, wrt, _ = CASES[name]
    with pytest.raises(AssertionError, match="J\\^T w"):
        both_oracles(hunt_kernel(mod, name, params), wrt, values, launch, skew=skew)
