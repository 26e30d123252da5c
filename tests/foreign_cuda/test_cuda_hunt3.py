"""Third soundness hunt with CUDA written the way molecular-dynamics codes and llm.c write it
(hunt3_sources.py). Each kernel runs on the host CPU against numpy and its derivatives pass both oracles
(test_cuda_hunt.both_oracles: forward mode against central differences, reverse mode through
<J v, w> = <v, J^T w>), or it is refused with an adoffload.Error that names the construct.

Found here: ``rintf``, ``FLT_MAX``, ``M_PI``, ``memcpy`` and ``__stcs`` were missing from the header
(clang refused common code); HOOMD's particle type kept as int bits in a position's ``w`` and the index
of a value-and-index reduction were refused as float bits (stored only into write-only integer
memory, they carry no float); one warp per row with ``if (row >= N) return;`` before the shuffles was
refused (its counted column loops now run speculatively); and a block-uniform loop on loaded flags
under a speculated branch hung (the other warps read zeros): it is refused now."""
import math

import numpy as np
import pytest

import adoffload as ado
from adoffload.errors import (ArgumentError, DifferentiationError, DivergentBarrierError, GlobalMemoryRaceError,
                              JaxIntegrationError, SharedMemoryRaceError, ToolNotFoundError)

from .checks import run
from .hunt3_sources import COUNT_DOWN, HUNT3
from .test_cuda_hunt import both_oracles
from .test_cuda_hunt2 import check_primal

f32, f64, i32 = ado.f32, ado.f64, ado.i32
In, Out, InOut = ado.In, ado.Out, ado.InOut


@pytest.fixture(scope="module")
def mod():
    try:
        return ado.from_cuda(HUNT3)
    except ToolNotFoundError as exc:        # no clang and no cached clang IR of this source (ADOFFLOAD_CACHE_DIR)
        pytest.skip(f"no clang and no cached clang IR of the third hunt's source: {exc}")


def rng(seed):
    return np.random.default_rng(seed)


# ---------------------------------------------------------------- molecular dynamics

BOX, RC2 = 4.5, 4.0


def lattice(seed):
    """27 particles on a jittered 3x3x3 lattice of spacing 1.5 in a periodic box of 4.5 (no pair within
    0.01 of the cutoff, so that differences do not cross it), with two types."""
    g = rng(seed)
    grid = np.stack(np.meshgrid(*[np.arange(3)] * 3, indexing="ij"), -1).reshape(-1, 3) * 1.5
    return (grid + g.uniform(-0.15, 0.15, grid.shape)).astype(np.float32), g.integers(0, 2, 27).astype(np.int32)


def pair_vectors(pos, rounding):
    d = (pos[:, None] - pos[None]).astype(np.float64)
    return d - BOX * rounding(d / BOX)


def half_list(r2, maxn):
    n = len(r2)
    nlist, count = np.zeros((n, maxn), np.int32), np.zeros(n, np.int32)
    for i in range(n):
        for j in range(i + 1, n):
            if r2[i, j] < 2.6 ** 2:                 # a skin past the cutoff, as neighbor lists keep
                nlist[i, count[i]] = j
                count[i] += 1
    return nlist, count


def lj_half_values():
    pos, types = lattice(1)
    d = pair_vectors(pos, np.round)
    nlist, count = half_list((d ** 2).sum(-1), 32)
    return dict(pos=pos.ravel(), type=types, nlist=nlist.ravel(), nnei=count, maxn=32,
                eps=np.array([1.0, 0.8, 0.8, 1.2], np.float32), sig=np.array([1.0, 1.1, 1.1, 0.9], np.float32),
                ntypes=2, box=np.float32(BOX), rc2=np.float32(RC2), f=np.zeros(81, np.float32), energy=np.zeros(1),
                n=27)


def lj_half_ref(v):
    pos, types = v["pos"].reshape(-1, 3), v["type"]
    d = pair_vectors(pos, np.round)
    r2 = (d ** 2).sum(-1)
    eps, sig = v["eps"].astype(np.float64), v["sig"].astype(np.float64)
    force, energy = np.zeros((len(pos), 3)), 0.0
    for i in range(len(pos)):
        for j in range(len(pos)):
            if i != j and r2[i, j] < RC2:
                tt = types[i] * 2 + types[j] if i < j else types[j] * 2 + types[i]     # the list's i is the lower
                s6 = (sig[tt] ** 2 / r2[i, j]) ** 3
                energy += 2 * eps[tt] * s6 * (s6 - 1)
                force[i] += 24 * eps[tt] * s6 * (2 * s6 - 1) / r2[i, j] * d[i, j]
    return {"f": force.ravel(), "energy": [energy]}


def hoomd_values():
    pos, types = lattice(2)
    r2 = (pair_vectors(pos, lambda q: np.floor(q + 0.5)) ** 2).sum(-1)
    heads, nlist, count = [], [], []
    for i in range(27):
        js = [j for j in range(27) if j != i and r2[i, j] < 2.6 ** 2]
        heads.append(len(nlist))
        nlist += js
        count.append(len(js))
    eps, sig = np.array([1.0, 0.8, 0.8, 1.2]), np.array([1.0, 1.1, 1.1, 0.9])
    lj = np.stack([4 * eps * sig ** 12, 4 * eps * sig ** 6], 1).astype(np.float32)
    return dict(d_force=np.zeros(108, np.float32), d_pos=np.concatenate([pos, types.view(np.float32)[:, None]], 1).ravel(),
                d_n_neigh=np.array(count, np.int32), d_nlist=np.array(nlist, np.int32),
                d_head_list=np.array(heads, np.int32), d_params=lj.ravel(), ntypes=2, L=np.float32(BOX),
                rcutsq=np.float32(RC2), N=27)


def hoomd_ref(v):
    p4 = v["d_pos"].reshape(-1, 4)
    types = p4[:, 3].view(np.int32)
    d = pair_vectors(p4[:, :3], lambda q: np.floor(q + 0.5))
    r2 = (d ** 2).sum(-1)
    lj = v["d_params"].reshape(-1, 2).astype(np.float64)
    out = np.zeros((len(p4), 4))
    for i in range(len(p4)):
        for j in range(len(p4)):
            if i != j and r2[i, j] < RC2:
                a, b = lj[types[i] * 2 + types[j]]
                r6 = r2[i, j] ** -3
                out[i, :3] += d[i, j] * r6 / r2[i, j] * (12 * a * r6 - 6 * b)
                out[i, 3] += 0.5 * r6 * (a * r6 - b)
    return {"d_force": out.ravel()}


# ---------------------------------------------------------------- llm.c

def softmax(x):
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def softmax_values():
    x = rng(3).standard_normal((5, 70)).astype(np.float32)
    x[1, 3] = x[1, 40] = x[1].max() + 0.5           # a tie for the row's max (fmaxf takes either)
    return dict(out=np.zeros(350, np.float32), inp=x.ravel(), N=5, C=70)


def causal_ref(v, T=37):
    p = v["preatt"].reshape(T, T).astype(np.float64) * float(v["inv_temperature"])
    return {"att": softmax(np.where(np.tril(np.ones((T, T))) > 0, p, -np.inf)).ravel()}


def layernorm_ref(v, N=6, C=48):
    x = v["inp"].reshape(N, C).astype(np.float64)
    mean, rstd = x.mean(1), 1 / np.sqrt(x.var(1) + 1e-5)
    return {"out": ((x - mean[:, None]) * rstd[:, None] * v["weight"] + v["bias"]).ravel(), "mean": mean, "rstd": rstd}


def gelu_ref(v):
    x = v["inp"].astype(np.float64)
    return {"out": 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3)))}


def rope_ref(v, T=9, HS=16):
    x = v["inp"].reshape(T, HS // 2, 2).astype(np.float64)
    angle = np.arange(T)[:, None] * 10000.0 ** (-2.0 * np.arange(HS // 2) / HS)
    c, s = np.cos(angle), np.sin(angle)
    return {"out": np.stack([x[..., 0] * c - x[..., 1] * s, x[..., 0] * s + x[..., 1] * c], -1).ravel()}


def per_block(v, size):
    return v.reshape(-1, size)


def next_in_block(a, size=64):
    """a[i + 1] within each block of ``size``, wrapping to the block's first element."""
    return np.roll(per_block(a, size), -1, 1).ravel()


def ballot_ref(v):
    out = []
    for w in per_block(v["x"].astype(np.float64), 32):
        out.append(np.log(w) * 32 if (w > 0).all() else w * w * np.argmax(w <= 0))
    return {"y": np.concatenate(out)}


def newton_ref(v):
    y, c = v["y"].astype(np.float64), v["c"].astype(np.float64)
    for _ in range(v["steps"]):
        y = 0.5 * (y + c / y)
    return {"y": y}


def verlet_ref(v):
    vel = v["v"] + 0.5 * v["dt"] * v["f"] * np.repeat(v["inv_m"], 3)
    x = v["x"] + v["dt"] * vel
    return {"x": x - v["L"] * np.floor(x / v["L"]), "v": vel}


def cells_values():
    """64 particles on a jittered 4x4x4 lattice in a box of 6 with 3 cells a side (rc 1.9), sorted by cell."""
    g = rng(7)
    grid = np.stack(np.meshgrid(*[np.arange(4)] * 3, indexing="ij"), -1).reshape(-1, 3) * 1.5 + 0.2
    pos = (grid + g.uniform(-0.12, 0.12, grid.shape)).astype(np.float32)
    cell = (np.floor(pos * 3 / 6.0).astype(int) % 3) @ np.array([1, 3, 9])
    count = np.bincount(cell, minlength=27).astype(np.int32)
    start = np.concatenate([[0], np.cumsum(count)[:-1]]).astype(np.int32)
    return dict(pos=np.concatenate([pos, np.zeros((64, 1), np.float32)], 1).ravel(), cell_start=start, cell_count=count,
                sorted=np.argsort(cell, kind="stable").astype(np.int32), nc=3, L=np.float32(6.0),
                rc2=np.float32(1.9 ** 2), eps=np.float32(1.0), sig2=np.float32(1.2), force=np.zeros(256, np.float32),
                energy=np.zeros(1), n=64)


def cells_ref(v):
    p = v["pos"].reshape(-1, 4)[:, :3].astype(np.float64)
    d = p[:, None] - p[None]
    d -= 6.0 * np.round(d / 6.0)
    r2 = (d ** 2).sum(-1)
    np.fill_diagonal(r2, np.inf)
    eps, s2 = float(v["eps"]), float(v["sig2"])
    s6 = np.where(r2 < float(v["rc2"]), (s2 / r2) ** 3, 0)
    force = ((24 * eps * s6 * (2 * s6 - 1) / r2)[..., None] * d).sum(1)
    return {"force": np.concatenate([force, np.zeros((64, 1))], 1).ravel(), "energy": [(2 * eps * s6 * (s6 - 1)).sum()]}


def tile_ref(v):
    p = v["posq"].reshape(-1, 4).astype(np.float64)
    q = p[:, 3]
    d = p[None, :, :3] - p[:, None, :3]
    inv = 1 / np.sqrt((d ** 2).sum(-1) + float(v["soft2"]))
    np.fill_diagonal(inv, 0)
    return {"force": (-(q[:, None] * q[None] * inv ** 3)[..., None] * d).sum(1).ravel(),
            "energy": [0.5 * (q[:, None] * q[None] * inv).sum()]}


def bonds_ref(v):
    x, bonds = v["x"].reshape(-1, 3), v["bonds"].reshape(-1, 2)
    force, energy = np.zeros_like(x), 0.0
    for (i, j), t in zip(bonds, v["btype"]):
        d = x[j] - x[i]
        r = np.linalg.norm(d)
        fr = -2 * v["k"][t] * (r - v["r0"][t]) / r
        force[i] -= fr * d
        force[j] += fr * d
        energy += v["k"][t] * (r - v["r0"][t]) ** 2
    return {"f": force.ravel(), "energy": [energy]}


def ewald_ref(v):
    r, c = v["r"].astype(np.float64), v["c"].astype(np.float64)
    return {"out": np.vectorize(math.erfc)(float(v["alpha"]) * r) / r + np.sin(np.arccos(c)) * c}


def softmax_backward_ref(v, T=37):
    a, d = v["att"].reshape(T, T).astype(np.float64), v["datt"].reshape(T, T).astype(np.float64)
    mask = np.tril(np.ones((T, T)))
    return {"dpreatt": (float(v["scale"]) * a * (d - (a * d * mask).sum(1, keepdims=True)) * mask).ravel()}


def case_values():
    """name: (parameters, values, launch, wrt, reference(values) -> {output: expected}, frozen)."""
    g = rng(30)
    logits = g.standard_normal(900).astype(np.float32)
    x128 = g.standard_normal(128).astype(np.float32)
    return {
        # half list, rintf minimum image, atomicAdd on both atoms' forces, the energy into one double
        "lj_half_nlist": (
            dict(pos=In[f32], type=In[i32], nlist=In[i32], nnei=In[i32], maxn=i32, eps=In[f32], sig=In[f32],
                 ntypes=i32, box=f32, rc2=f32, f=Out[f32], energy=Out[f64], n=i32),
            lj_half_values(), dict(blocks=2, threads=16), ["pos", "eps", "sig"], lj_half_ref, None),
        # float4 positions with the type as int bits in w (no tangent there), a full list with head offsets
        "lj_full_hoomd": (
            dict(d_force=Out[f32], d_pos=In[f32], d_n_neigh=In[i32], d_nlist=In[i32], d_head_list=In[i32],
                 d_params=In[f32], ntypes=i32, L=f32, rcutsq=f32, N=i32),
            hoomd_values(), dict(blocks=2, threads=16), ["d_pos", "d_params"], hoomd_ref,
            dict(d_pos=np.arange(108) % 4 == 3)),
        "softmax_forward_kernel7": (
            dict(out=Out[f32], inp=In[f32], N=i32, C=i32), softmax_values(), dict(blocks=2, threads=96), ["inp"],
            lambda v: {"out": softmax(v["inp"].reshape(5, 70).astype(np.float64)).ravel()}, None),
        # 40 warps for 37 rows: the last three return at once
        "softmax_autoregressive": (
            dict(att=Out[f32], preatt=In[f32], T=i32, inv_temperature=f32),
            dict(att=np.zeros(37 * 37, np.float32), preatt=g.standard_normal(37 * 37).astype(np.float32), T=37,
                 inv_temperature=np.float32(0.7)), dict(blocks=10, threads=128), ["preatt"], causal_ref, None),
        "layernorm_forward_warp": (
            dict(out=Out[f32], mean=Out[f32], rstd=Out[f32], inp=In[f32], weight=In[f32], bias=In[f32], N=i32, C=i32),
            dict(out=np.zeros(288, np.float32), mean=np.zeros(6, np.float32), rstd=np.zeros(6, np.float32),
                 inp=g.standard_normal(288).astype(np.float32), weight=g.standard_normal(48).astype(np.float32),
                 bias=g.standard_normal(48).astype(np.float32), N=6, C=48),
            dict(blocks=2, threads=128), ["inp", "weight", "bias"], layernorm_ref, None),
        "gelu_forward_kernel2": (
            dict(out=Out[f32], inp=In[f32], N=i32),
            dict(out=np.zeros(256, np.float32), inp=g.standard_normal(256).astype(np.float32), N=256),
            dict(blocks=2, threads=32), ["inp"], gelu_ref, None),
        "rope_forward": (
            dict(out=Out[f32], inp=In[f32], T=i32, HS=i32, theta=f32),
            dict(out=np.zeros(144, np.float32), inp=g.standard_normal(144).astype(np.float32), T=9, HS=16,
                 theta=np.float32(10000.0)), dict(blocks=2, threads=64), ["inp"], rope_ref, None),
        # blockReduce<warpReduceMax/Sum> (a function as template argument), one block per row
        "fused_classifier": (
            dict(losses=Out[f32], probs=Out[f32], logits=In[f32], targets=In[i32], V=i32),
            dict(losses=np.zeros(3, np.float32), probs=np.zeros(900, np.float32), logits=logits,
                 targets=np.array([5, 77, 299], np.int32), V=300), dict(blocks=3, threads=128), ["logits"],
            lambda v: (lambda p: {"losses": -np.log(p[np.arange(3), v["targets"]]), "probs": p.ravel()})(
                softmax(v["logits"].reshape(3, 300).astype(np.float64))), None),
        "row_rstd_synced": (
            dict(out=Out[f32], x=In[f32], C=i32), dict(out=np.zeros(3, np.float32), x=logits, C=300),
            dict(blocks=3, threads=128), ["x"],
            lambda v: {"out": 1 / np.sqrt(v["x"].reshape(3, 300).astype(np.float64).var(1) + 1e-5)}, None),
        # template<int BLOCK> behind extern "C" wrappers: grid-stride loop, tree, one atomicAdd per block
        "sum_squares_64": (
            dict(x=In[f64], total=Out[f64], n=i32), dict(x=g.standard_normal(1000), total=np.zeros(1), n=1000),
            dict(blocks=3, threads=64), ["x"], lambda v: {"total": [(v["x"] ** 2).sum()]}, None),
        "sum_squares_128": (
            dict(x=In[f64], total=Out[f64], n=i32), dict(x=g.standard_normal(1000), total=np.zeros(1), n=1000),
            dict(blocks=3, threads=128), ["x"], lambda v: {"total": [(v["x"] ** 2).sum()]}, None),
        # two passes: partials per block, then one block finishes
        "partial_norms": (
            dict(x=In[f32], w=In[f32], partial=Out[f32], n=i32),
            dict(x=g.standard_normal(1000).astype(np.float32), w=g.uniform(0.5, 1.5, 1000).astype(np.float32),
                 partial=np.zeros(3, np.float32), n=1000), dict(blocks=3, threads=128), ["x", "w"],
            lambda v: {"partial": [(v["w"] * v["x"].astype(np.float64) ** 2)[(np.arange(1000) // 128) % 3 == b].sum()
                                   for b in range(3)]}, None),
        "finish_norm": (
            dict(partial=In[f32], out=Out[f32], nparts=i32),
            dict(partial=g.uniform(0.5, 2, 50).astype(np.float32), out=np.zeros(1, np.float32), nparts=50),
            dict(blocks=1, threads=32), ["partial"], lambda v: {"out": [np.sqrt(v["partial"].astype(np.float64).sum())]},
            None),
        # the output read and written in a loop; Newton steps in place with __fdividef
        "gemv_accumulate": (
            dict(A=In[f64], x=In[f64], y=InOut[f64], m=i32, n=i32),
            dict(A=g.standard_normal(350), x=g.standard_normal(7), y=g.standard_normal(50), m=50, n=7),
            dict(blocks=2, threads=32), ["A", "x", "y"], lambda v: {"y": v["y"] + v["A"].reshape(50, 7) @ v["x"]}, None),
        "newton_in_place": (
            dict(y=InOut[f32], c=In[f32], n=i32, steps=i32),
            dict(y=g.uniform(1, 2, 40).astype(np.float32), c=g.uniform(1, 4, 40).astype(np.float32), n=40, steps=3),
            dict(blocks=2, threads=32), ["y", "c"], newton_ref, None),
        "half_warp_syncwarp": (
            dict(x=In[f32], y=Out[f32]), dict(x=g.standard_normal(128).astype(np.float32), y=np.zeros(128, np.float32)),
            dict(blocks=2, threads=64), ["x"], lambda v: (lambda x: {"y": np.where(
                np.arange(128) % 32 < 16, x + x[np.arange(128) ^ 1] ** 2, x)})(v["x"].astype(np.float64)), None),
        "ballot_branch": (
            dict(x=In[f32], y=Out[f32]),
            dict(x=np.concatenate([g.uniform(0.5, 2, 32), g.standard_normal(96)]).astype(np.float32),
                 y=np.zeros(128, np.float32)), dict(blocks=2, threads=64), ["x"], ballot_ref, None),
        # a cell list with periodic wrap of the 27 neighbour cells, the energy reduced in the block
        "lj_cells": (
            dict(pos=In[f32], cell_start=In[i32], cell_count=In[i32], sorted=In[i32], nc=i32, L=f32, rc2=f32, eps=f32,
                 sig2=f32, force=Out[f32], energy=Out[f64], n=i32),
            cells_values(), dict(blocks=1, threads=64), ["pos", "eps", "sig2"], cells_ref, None),
        # OpenMM-style tiles: j atoms and their forces rotate through the warp, both forces by atomicAdd
        "tile_coulomb": (
            dict(posq=In[f32], tiles=In[i32], force=Out[f32], energy=Out[f64], soft2=f32),
            dict(posq=np.concatenate([g.uniform(0, 3, (96, 3)), g.uniform(-1, 1, (96, 1))], 1).astype(np.float32).ravel(),
                 tiles=np.array([(a, b) for a in range(3) for b in range(a, 3)], np.int32).ravel(),
                 force=np.zeros(288, np.float32), energy=np.zeros(1), soft2=np.float32(0.1)),
            dict(blocks=3, threads=64), ["posq", "soft2"], tile_ref, None),
        "harmonic_bonds": (
            dict(x=In[f64], bonds=In[i32], btype=In[i32], k=In[f64], r0=In[f64], f=Out[f64], energy=Out[f64], nb=i32),
            dict(x=g.standard_normal(60) * 2, bonds=np.array([g.choice(20, 2, replace=False) for _ in range(40)],
                                                               np.int32).ravel(),
                 btype=g.integers(0, 3, 40).astype(np.int32), k=np.array([1.0, 2.0, 0.5]), r0=np.array([1.0, 1.5, 0.8]),
                 f=np.zeros(60), energy=np.zeros(1), nb=40), dict(blocks=2, threads=32), ["x", "k", "r0"], bonds_ref, None),
        "verlet_wrap": (
            dict(x=InOut[f64], v=InOut[f64], f=In[f64], inv_m=In[f64], dt=f64, L=f64, n3=i32),
            dict(x=g.uniform(0.5, 5.5, 60), v=g.standard_normal(60), f=g.standard_normal(60),
                 inv_m=g.uniform(0.5, 2, 20), dt=np.float64(0.01), L=np.float64(6.0), n3=60),
            dict(blocks=2, threads=32), ["x", "v", "f", "inv_m", "dt"], verlet_ref, None),
        "ewald_real_angles": (
            dict(r=In[f32], c=In[f32], out=Out[f32], alpha=f32, n=i32),
            dict(r=g.uniform(0.5, 3, 50).astype(np.float32), c=g.uniform(-0.9, 0.9, 50).astype(np.float32),
                 out=np.zeros(50, np.float32), alpha=np.float32(0.8), n=50),
            dict(blocks=2, threads=32), ["r", "c", "alpha"], ewald_ref, None),
        # global memory as scratch between barriers (legal within a block), and overwritten after one
        "global_scratch_neighbors": (
            dict(x=In[f32], tmp=Out[f32], y=Out[f32]),
            dict(x=x128, tmp=np.zeros(128, np.float32), y=np.zeros(128, np.float32)), dict(blocks=2, threads=64), ["x"],
            lambda v: (lambda x: (lambda t: {"tmp": t, "y": t * next_in_block(t) + x})(np.sin(x) * x))(
                v["x"].astype(np.float64)), None),
        "global_scratch_overwritten": (
            dict(x=In[f32], tmp=Out[f32], y=Out[f32]),
            dict(x=x128 * 0.5, tmp=np.zeros(128, np.float32), y=np.zeros(128, np.float32)), dict(blocks=2, threads=64),
            ["x"], lambda v: (lambda t: (lambda w: {"tmp": w, "y": next_in_block(w) + np.exp(w)})(t * next_in_block(t)))(
                v["x"].astype(np.float64) ** 2), None),
        # an InOut total that atomics add to (its own derivative is 1)
        "energy_into_total": (
            dict(x=In[f64], total=InOut[f64], n=i32), dict(x=g.standard_normal(100), total=np.array([1.5]), n=100),
            dict(blocks=2, threads=64), ["x", "total"], lambda v: {"total": [v["total"][0] + 0.5 * (v["x"] ** 2).sum()]},
            None),
        # embeddings gathered by token (tokens repeat: their reverse-mode contributions add up)
        "encoder_forward": (
            dict(out=Out[f32], inp=In[i32], wte=In[f32], wpe=In[f32], B=i32, T=i32, C=i32),
            dict(out=np.zeros(80, np.float32), inp=np.array([2, 2, 2, 0, 5, 1, 2, 4, 0, 3], np.int32),
                 wte=g.standard_normal(48).astype(np.float32), wpe=g.standard_normal(40).astype(np.float32), B=2, T=5, C=8),
            dict(blocks=3, threads=32), ["wte", "wpe"],
            lambda v: {"out": (v["wte"].reshape(6, 8)[v["inp"]] + np.tile(v["wpe"].reshape(5, 8), (2, 1))).ravel()}, None),
        # one warp per row, whole warps returning, a per-warp shared buffer between __syncwarp()s
        "warp_rows_shared": (
            dict(x=In[f32], y=Out[f32], rows=i32, cols=i32),
            dict(x=g.standard_normal(350).astype(np.float32), y=np.zeros(350, np.float32), rows=5, cols=70),
            dict(blocks=2, threads=128), ["x"], lambda v: (lambda x: {"y": (x / np.sqrt(
                (x ** 2).sum(1, keepdims=True) + 1e-3)).ravel()})(v["x"].reshape(5, 70).astype(np.float64)), None),
        # llm.c's causal softmax backward (a gradient kernel, differentiated again)
        "softmax_backward_rows": (
            dict(dpreatt=Out[f32], datt=In[f32], att=In[f32], T=i32, scale=f32),
            dict(dpreatt=np.zeros(37 * 37, np.float32), datt=g.standard_normal(37 * 37).astype(np.float32),
                 att=np.abs(g.standard_normal(37 * 37)).astype(np.float32), T=37, scale=np.float32(0.3)),
            dict(blocks=10, threads=128), ["datt", "att", "scale"], softmax_backward_ref, None),
        "grid_stride_warp_atomic_f": (
            dict(x=In[f32], out=Out[f32], n=i32),
            dict(x=g.standard_normal(1000).astype(np.float32), out=np.zeros(1, np.float32), n=1000),
            dict(blocks=3, threads=64), ["x"], lambda v: {"out": [np.exp(v["x"].astype(np.float64)).sum()]}, None),
        # a uniform chunk loop with a warp reduction in each chunk, under the early return of whole warps
        "chunked_warp_sums": (
            dict(x=In[f32], y=Out[f32], rows=i32, cols=i32),
            dict(x=g.standard_normal(350).astype(np.float32), y=np.zeros(5, np.float32), rows=5, cols=70),
            dict(blocks=2, threads=128), ["x"], lambda v: {"y": np.sqrt((np.pad(
                v["x"].reshape(5, 70).astype(np.float64), ((0, 0), (0, 26))).reshape(5, 3, 32) ** 2).sum(2) + 1).sum(1)},
            None),
        "inplace_stencil_synced": (
            dict(x=InOut[f32], n=i32), dict(x=x128, n=128), dict(blocks=2, threads=64), ["x"],
            lambda v: (lambda x: {"x": x + 0.5 * np.where(np.arange(128) % 64 < 63, next_in_block(x), 0) ** 2})(
                v["x"].astype(np.float64)), None),
    }


CASES = case_values()
_kernels = {}


def hunt_kernel(module, name, params):
    if name not in _kernels:
        _kernels[name] = module.kernel(name, **params)
    return _kernels[name]


@pytest.mark.parametrize("name", sorted(CASES))
def test_kernel_matches_numpy_and_both_oracles(mod, name):
    params, values, launch, wrt, reference, frozen = CASES[name]
    k = hunt_kernel(mod, name, params)
    check_primal(k, values, launch, reference)
    both_oracles(k, wrt, values, launch, frozen=frozen)


def test_hoomd_type_bits_get_no_gradient(mod):
    """The w of each position holds the type's int bits: reverse mode leaves its shadow alone."""
    params, values, launch, _, _, frozen = CASES["lj_full_hoomd"]
    k = hunt_kernel(mod, "lj_full_hoomd", params)
    seeds = dict(d_d_pos=np.zeros(108, np.float32), d_d_force=rng(4).standard_normal(108).astype(np.float32))
    run(ado.vjp(k, wrt=["d_pos"]), values, launch, **seeds)
    assert np.all(seeds["d_d_pos"][frozen["d_pos"]] == 0) and np.abs(seeds["d_d_pos"]).max() > 0


# name: (parameters, launch, values, what the refusal says)
REFUSED = {
    # whole warps leave, then a loop whose exit depends on data (not counted) before the shuffles
    "halving_after_exit": (dict(x=In[f32], y=Out[f32], rows=i32), dict(blocks=2, threads=64),
                           dict(x=np.ones(96, np.float32), y=np.zeros(96, np.float32), rows=3)),
    # a warp reduction in a chunk loop whose trip count differs between warps (c0 <= row)
    "causal_chunks": (dict(x=In[f32], y=Out[f32], rows=i32), dict(blocks=10, threads=128),
                      dict(x=np.ones(1600, np.float32), y=np.zeros(40, np.float32), rows=40)),
    # was a hang: warp 0 scans loaded flags; the other warps, running the branch speculatively, read zeros
    "first_flag_then_reduce": (dict(flags=In[i32], x=In[f32], out=Out[f32]), dict(blocks=2, threads=64),
                               dict(flags=np.array([0, 0, 1, 0], np.int32), x=np.ones(64, np.float32),
                                    out=np.zeros(2, np.float32))),
}


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_loops_that_might_not_end_speculatively_are_refused(mod, name):
    params, launch, values = REFUSED[name]
    with pytest.raises(DivergentBarrierError, match="warp shuffle runs under control flow that is not uniform"):
        run(mod.kernel(name, **params), values, launch)


def test_two_calls_of_one_block_reduction_without_final_sync_race(mod):
    """llm.c's blockReduce called twice with one instantiation and no final_sync: the second call's lane 0
    writes shared_val[warp] while another warp may still read it from the first call."""
    k = mod.kernel("row_rstd_racy", out=Out[f32], x=In[f32], C=i32)
    with pytest.raises(SharedMemoryRaceError, match=r"race on 'shared_val'.*thread 32's read and thread 0's write"):
        run(k, dict(out=np.zeros(3, np.float32), x=np.ones(900, np.float32), C=300), dict(blocks=3, threads=128))


# name: (parameters, values, launch, wrt, reference, what the refusal of both derivatives says)
PRIMAL_ONLY = {
    # atomicMax on the int bits of non-negative floats: the maximum is right, a derivative cannot follow bits
    "atomic_max_bits": (
        dict(x=In[f32], m=Out[f32], n=i32),
        dict(x=rng(9).standard_normal(100).astype(np.float32), m=np.zeros(1, np.float32), n=100),
        dict(blocks=2, threads=64), ["x"], lambda v: {"m": [np.abs(v["x"]).max()]},
        r"'atomicrmw max'.*float bits carried as an integer"),
    # values and their int indices carved from one extern __shared__ float buffer: the indices live in
    # differentiated memory, so their moves look like float bits (declare two __shared__ arrays instead)
    "carved_argmax": (
        dict(x=In[f32], w=In[f32], out=Out[f32], where=Out[i32]),
        dict(x=rng(10).standard_normal(128).astype(np.float32), w=rng(11).standard_normal(128).astype(np.float32),
             out=np.zeros(2, np.float32), where=np.zeros(2, np.int32)), dict(blocks=2, threads=64, shared_bytes=64 * 8),
        ["x", "w"], lambda v: (lambda a: {"out": v["x"][a] * v["w"][a], "where": a})(
            per_block(v["x"], 64).argmax(1) + 64 * np.arange(2)),
        r"'store'.*float bits carried as an integer"),
    # the pre-sm_60 double atomicAdd: a CAS loop on the bits (the sum is right; bits have no derivative)
    "energy_cas_double": (
        dict(x=In[f64], e=Out[f64], n=i32), dict(x=rng(16).standard_normal(100), e=np.zeros(1), n=100),
        dict(blocks=2, threads=64), ["x"], lambda v: {"e": [(v["x"] ** 2).sum()]},
        r"'cmpxchg'.*float bits carried as an integer"),
}


@pytest.mark.parametrize("name", sorted(PRIMAL_ONLY))
def test_primal_right_and_both_derivatives_refused(mod, name):
    params, values, launch, wrt, reference, says = PRIMAL_ONLY[name]
    k = hunt_kernel(mod, name, params)
    check_primal(k, values, launch, reference)
    for mode in ("jvp", "vjp"):
        shadows = {f"d_{n}": np.zeros_like(values[n]) for n in wrt + [o for o in ("m", "out", "e") if o in values]}
        with pytest.raises(DifferentiationError, match=says):
            run(getattr(ado, mode)(k, wrt=wrt), values, launch, **shadows)


def test_in_place_stencil_reading_a_neighbours_element_is_a_race(mod):
    """``x[i] = x[i] + 0.5 * x[i+1]^2`` with no barrier: thread i reads what thread i+1 writes. It ran, and
    its reverse mode disagreed with its forward mode (<Jv, w> -3.5 against <v, J^T w> 15.8): refused now,
    naming both accesses. The same update with a barrier between the read and the write is right (CASES)."""
    k = mod.kernel("inplace_stencil_race", x=InOut[f32], n=i32)
    with pytest.raises(GlobalMemoryRaceError, match=r"global-memory race on 'x': the read of "
                                                    r"x\[64\*block_id\(\) \+ threadIdx.x \+ 1\].*the write of "
                                                    r"x\[64\*block_id\(\) \+ threadIdx.x\].*thread 0's read and "
                                                    r"thread 1's write"):
        run(k, dict(x=np.ones(128, np.float32), n=128), dict(blocks=2, threads=64))


def test_moving_particles_others_read_through_the_list_is_refused(mod):
    """Forces and the position update in one kernel: thread i writes x[i] while other threads read it through
    the neighbour list. It ran, and even forward mode disagreed with differences; refused now (a read at a
    loaded index of an array the block writes in the same interval)."""
    k = mod.kernel("move_while_reading", x=InOut[f64], nlist=In[i32], nnei=In[i32], maxn=i32, dt=f64, n=i32)
    nlist = np.array([[(i + 1) % 40, (i + 3) % 40, (i + 39) % 40] for i in range(40)], np.int32).ravel()
    with pytest.raises(GlobalMemoryRaceError, match=r"possible global-memory race on 'x': the read of x\[\?\].*"
                                                    r"index loaded from memory.*the write of "
                                                    r"x\[32\*block_id\(\) \+ threadIdx.x\]"):
        run(k, dict(x=np.zeros(40), nlist=nlist, nnei=np.full(40, 3, np.int32), maxn=3, dt=0.1, n=40),
            dict(blocks=2, threads=32))


@pytest.mark.parametrize("level", ["-O0", "-O3"])
def test_one_warp_per_row_at_other_levels(level):
    """The early return of whole warps and the counted column loops, as clang shapes them at -O0 and -O3."""
    try:
        m = ado.from_cuda(HUNT3, options=[level])
    except ToolNotFoundError as exc:
        pytest.skip(f"no clang and no cached clang IR of the third hunt's source: {exc}")
    params, values, launch, wrt, reference, _ = CASES["softmax_autoregressive"]
    k = m.kernel("softmax_autoregressive", **params)
    check_primal(k, values, launch, reference)
    both_oracles(k, wrt, values, launch)


def backwards_ref(x):
    out = []
    for r in x:
        total = 0.0
        for lane in range(32):
            acc = 0.0
            for c in range(len(r) - 1 - lane, -1, -32):
                acc = acc * 0.5 + r[c]
            total += acc
        out.append(r * total)
    return np.concatenate(out)


def test_counting_down_loops_after_an_early_return():
    """``for (c = cols - 1 - lane; c >= 0; c -= 32)`` (a negative step, held as an unsigned constant) and a
    counter starting below its bound run speculatively at -O1; at -O2 clang's unrolled remainder loop,
    left by an equality test, is refused."""
    try:
        m1, m2 = ado.from_cuda(COUNT_DOWN, options=["-O1"]), ado.from_cuda(COUNT_DOWN)
    except ToolNotFoundError as exc:
        pytest.skip(f"no clang and no cached clang IR of the count-down source: {exc}")
    params = dict(x=In[f32], y=Out[f32], rows=i32, cols=i32)
    x = rng(14).standard_normal((5, 70)).astype(np.float32)
    values, launch = dict(x=x.ravel(), y=np.zeros(350, np.float32), rows=5, cols=70), dict(blocks=2, threads=128)
    k = m1.kernel("warp_rows_backwards", **params)
    check_primal(k, values, launch, lambda v: {"y": backwards_ref(v["x"].reshape(5, 70).astype(np.float64))})
    both_oracles(k, ["x"], values, launch)
    k = m1.kernel("warp_rows_up_test_down", x=In[f32], y=Out[f32], rows=i32)
    both_oracles(k, ["x"], dict(x=x.ravel()[:160], y=np.zeros(160, np.float32), rows=5), launch)
    with pytest.raises(DivergentBarrierError, match="warp shuffle runs under control flow that is not uniform"):
        run(m2.kernel("warp_rows_backwards", **params), values, launch)


def test_lj_energy_gradient_through_jax_is_minus_the_force(mod):
    """jax.grad of the neighbour-list energy (atomicAdd into one double, Newton's third law on forces)
    is minus the force the same kernel computes, and the parameters' gradient agrees with differences."""
    jax = pytest.importorskip("jax")
    jnp = pytest.importorskip("jax.numpy")
    params, values, launch, _, _, _ = CASES["lj_half_nlist"]
    k = hunt_kernel(mod, "lj_half_nlist", params)
    f = ado.jax_kernel(k, **launch, out_shapes={"f": 81, "energy": 1})
    rest = [values[n] for n in ("type", "nlist", "nnei", "maxn")]
    tail = [values[n] for n in ("ntypes", "box", "rc2")]

    def energy(pos, eps):
        return f(pos, *rest, eps, values["sig"], *tail, 27)[1][0]
    previous = jax.config.jax_enable_x64
    try:
        # without x64 the double energy's seed was cut to float32 and read as a double: the gradient was
        # all zeros, silently; the 64-bit Out is refused now, as 64-bit inputs were
        jax.config.update("jax_enable_x64", False)
        pos, eps = jnp.asarray(values["pos"]), jnp.asarray(values["eps"])
        with pytest.raises(JaxIntegrationError, match="parameter 'energy'.*enable 64-bit types"):
            jax.grad(energy)(pos, eps)
        jax.config.update("jax_enable_x64", True)
        pos, eps = jnp.asarray(values["pos"]), jnp.asarray(values["eps"])
        g_pos, g_eps = jax.grad(energy, argnums=(0, 1))(pos, eps)
        d = rng(15).standard_normal(4).astype(np.float32)
        h = 1e-3
        difference = (float(energy(pos, eps + h * d)) - float(energy(pos, eps - h * d))) / (2 * h)
    finally:
        jax.config.update("jax_enable_x64", previous)
    force = run(k, values, launch)["f"]
    np.testing.assert_allclose(np.asarray(g_pos), -force, rtol=2e-3, atol=2e-3 * np.abs(force).max())
    np.testing.assert_allclose(float(np.asarray(g_eps, np.float64) @ d), difference, rtol=2e-3)


def test_one_buffer_for_an_input_and_the_inout_it_accumulates_into(mod):
    """``y += A x`` given the same data for x and y: the host refuses one numpy buffer for both (y is
    written); through JAX the InOut's buffer is its own, so the value and both Jacobians are I + A."""
    params = CASES["gemv_accumulate"][0]
    k = hunt_kernel(mod, "gemv_accumulate", params)
    g = rng(17)
    a, v = g.standard_normal(49), g.standard_normal(7)
    with pytest.raises(ArgumentError, match="'x' and 'y' share memory and 'y' is written"):
        k(a, v, v, 7, 7, blocks=1, threads=32)
    jax = pytest.importorskip("jax")
    jnp = pytest.importorskip("jax.numpy")
    previous = jax.config.jax_enable_x64
    jax.config.update("jax_enable_x64", True)
    try:
        f = ado.jax_kernel(k, blocks=1, threads=32)
        A, x = jnp.asarray(a), jnp.asarray(v)

        def h(x):
            return f(A, x, x, 7, 7)
        expected = np.eye(7) + a.reshape(7, 7)
        np.testing.assert_allclose(np.asarray(jax.jit(h)(x)), expected @ v, rtol=1e-13)
        np.testing.assert_allclose(np.asarray(jax.jacfwd(h)(x)), expected, rtol=1e-13, atol=1e-14)
        np.testing.assert_allclose(np.asarray(jax.jacrev(h)(x)), expected, rtol=1e-13, atol=1e-14)
    finally:
        jax.config.update("jax_enable_x64", previous)


def test_a_float_parked_in_an_int_output_and_read_back_by_an_atomic_is_refused(mod):
    """``scratch[i] = __float_as_int(2x)`` (clang stores the float itself), read back through
    ``atomicAdd(&scratch[i], 0)``: the value came back without its derivative (forward mode disagreed with
    differences) because the Const int output counted as write-only, atomics not being loads. Reads
    through atomics and calls count now; stores of float bits into words nothing reads (the status
    record's failing index beside its exchanged code) stay accepted (lj_full_hoomd)."""
    k = mod.kernel("bits_round_trip", x=In[f32], scratch=Out[i32], y=Out[f32])
    values = dict(x=np.linspace(-1, 1, 64).astype(np.float32), scratch=np.zeros(64, np.int32),
                  y=np.zeros(64, np.float32))
    np.testing.assert_array_equal(run(k, values, dict(blocks=2, threads=32))["y"], 2 * values["x"] ** 2)
    for mode in ("jvp", "vjp"):
        with pytest.raises(DifferentiationError, match=r"stores the active value .* no shadow \(argument %scratch"):
            run(getattr(ado, mode)(k, wrt=["x"]), values, dict(blocks=2, threads=32),
                d_x=np.ones(64, np.float32), d_y=np.ones(64, np.float32))
