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
import numpy as np
import pytest

import adoffload as ado
from adoffload.errors import DivergentBarrierError, ToolNotFoundError

from .checks import run
from .hunt3_sources import HUNT3
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


def case_values():
    """name: (parameters, values, launch, wrt, reference(values) -> {output: expected}, frozen)."""
    g = rng(30)
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
