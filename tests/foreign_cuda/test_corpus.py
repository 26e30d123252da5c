"""The hand-written CUDA baselines of benchmarks/cuda/ (RAJAPerf subset, the LJ ceiling) as foreign
kernels on the host CPU: primal results against numpy and, for each, its JVP against central
differences and its VJP through <Jv,w> = <v,J^T w>, the tuned grid-stride reductions included
(their last warp's shuffles run on every warp, their effects stay guarded)."""
from pathlib import Path

import numpy as np
import pytest

import adoffload as ado

from .checks import check_derivatives, run

ROOT = Path(__file__).resolve().parents[2] / "benchmarks" / "cuda"
In, Out, InOut, f64, i64 = ado.In[ado.f64], ado.Out[ado.f64], ado.InOut[ado.f64], ado.f64, ado.i64
N = 300
rng = np.random.default_rng(30)


def vec(size=N):
    return rng.standard_normal(size) + 2.0


# name: (parameters, values, wrt, reference(values) -> {written name: expected})
CASES = {
    "stream_add": (dict(a=In, b=In, c=Out, n=i64), lambda: dict(a=vec(), b=vec(), c=np.zeros(N), n=N), ["a", "b"],
                   lambda v: {"c": v["a"] + v["b"]}),
    "stream_triad": (dict(a=Out, b=In, c=In, alpha=f64, n=i64),
                     lambda: dict(a=np.zeros(N), b=vec(), c=vec(), alpha=np.float64(0.7), n=N), ["b", "c", "alpha"],
                     lambda v: {"a": v["b"] + v["alpha"] * v["c"]}),
    "basic_daxpy": (dict(y=InOut, x=In, a=f64, n=i64), lambda: dict(y=vec(), x=vec(), a=np.float64(1.3), n=N),
                    ["x", "a"], lambda v: {"y": v["y"] + v["a"] * v["x"]}),
    "basic_if_quad": (dict(a=In, b=In, c=In, x1=Out, x2=Out, n=i64),
                      lambda: dict(a=vec(), b=3 * vec(), c=vec() * 0.1, x1=np.zeros(N), x2=np.zeros(N), n=N),
                      ["a", "b", "c"], None),
    "lcals_hydro_1d": (dict(x=Out, y=In, z=In, q=f64, r=f64, t=f64, n=i64),
                       lambda: dict(x=np.zeros(N), y=vec(), z=vec(N + 12), q=np.float64(0.5), r=np.float64(0.3),
                                    t=np.float64(0.2), n=N), ["y", "z", "r"],
                       lambda v: {"x": v["q"] + v["y"] * (v["r"] * v["z"][10:N + 10] + v["t"] * v["z"][11:N + 11])}),
    "lcals_eos": (dict(x=Out, y=In, z=In, u=In, q=f64, r=f64, t=f64, n=i64),
                  lambda: dict(x=np.zeros(N), y=vec(), z=vec(), u=vec(N + 7), q=np.float64(0.5), r=np.float64(0.3),
                               t=np.float64(0.2), n=N), ["u", "q"], None),
    "lcals_planckian": (dict(x=In, y=Out, u=In, v=In, w=Out, n=i64),
                        lambda: dict(x=vec(), y=np.zeros(N), u=vec(), v=vec() + 1, w=np.zeros(N), n=N), ["x", "u", "v"],
                        lambda v: {"y": v["u"] / v["v"], "w": v["x"] / (np.exp(v["u"] / v["v"]) - 1)}),
    "lcals_first_diff": (dict(x=Out, y=In, n=i64), lambda: dict(x=np.zeros(N), y=vec(N + 1), n=N), ["y"],
                         lambda v: {"x": np.diff(v["y"])}),
    "lcals_diff_predict": (dict(px=InOut, cx=In, off=i64, n=i64),
                           lambda: dict(px=vec(14 * N), cx=vec(5 * N), off=N, n=N), ["cx"], None),
}


@pytest.fixture(scope="module")
def rajaperf():
    return ado.from_cuda((ROOT / "rajaperf.cu").read_text())


@pytest.mark.parametrize("name", sorted(CASES))
def test_rajaperf_kernel_and_derivatives(rajaperf, name):
    params, make, wrt, reference = CASES[name]
    k = rajaperf.kernel(name, **params)
    values = make()
    launch = dict(blocks=-(-N // 256), threads=256)
    if reference is not None:
        got = run(k, values, launch)
        for out, expected in reference(values).items():
            np.testing.assert_allclose(got[out], expected, rtol=1e-13, atol=1e-13)
    check_derivatives(k, wrt, values, launch)


def test_nested_init_uses_a_3d_grid(rajaperf):
    k = rajaperf.kernel("basic_nested_init", arr=Out, ni=i64, nj=i64, nk=i64)
    ni, nj, nk = 300, 3, 4
    arr = np.zeros((nk, nj, ni))
    k(arr, ni, nj, nk, blocks=(2, nj, nk), threads=256)
    i, j, kk = np.arange(ni), np.arange(nj)[:, None], np.arange(nk)[:, None, None]
    np.testing.assert_allclose(arr, 1e-8 * i * j * kk, rtol=1e-15)


REDUCTIONS = {   # tuned grid-stride reductions: shuffles, shared memory, `warp == 0 ? warp_sum(v) : 0`, atomicAdd
    "stream_dot": (dict(a=In, b=In, dot=Out, n=i64), lambda: dict(a=vec(1001), b=vec(1001), dot=np.zeros(1), n=1001),
                   ["a", "b"], lambda v: v["a"] @ v["b"]),
    "basic_pi_reduce": (dict(dx=f64, pi=Out, n=i64), lambda: dict(dx=np.float64(1 / 5000), pi=np.zeros(1), n=5000),
                        ["dx"], lambda v: (v["dx"] / (1 + ((np.arange(5000) + 0.5) * v["dx"]) ** 2)).sum()),
    "basic_trap_int": (dict(x0=f64, xp=f64, y=f64, yp=f64, h=f64, sumx=Out, n=i64),
                       lambda: dict(x0=np.float64(0.1), xp=np.float64(0.3), y=np.float64(1.2), yp=np.float64(0.4),
                                    h=np.float64(0.01), sumx=np.zeros(1), n=2000), ["x0", "y", "h"],
                       lambda v: (1 / np.sqrt((v["x0"] + np.arange(2000) * v["h"] - v["xp"]) ** 2
                                              + (v["y"] - v["yp"]) ** 2)).sum()),
}


@pytest.mark.parametrize("name", sorted(REDUCTIONS))
def test_tuned_reductions_and_their_derivatives(rajaperf, name):
    """The last warp's shuffles run on every warp (sources/cuda/speculate.py): same sums, same derivatives."""
    params, make, wrt, reference = REDUCTIONS[name]
    k = rajaperf.kernel(name, **params)
    values = make()
    launch = dict(blocks=3, threads=256)
    (out,) = [p for p in params if params[p] is Out]
    np.testing.assert_allclose(run(k, values, launch)[out][0], reference(values), rtol=1e-12)
    check_derivatives(k, wrt, values, launch)


def test_integer_reduction_with_atomics_under_the_warp_branch(rajaperf):
    """`if (warp == 0) { shuffles; if (lane == 0) atomics }`: the shuffles run on every warp, the
    loads and atomics stay guarded (sources/cuda/speculate.py)."""
    k = rajaperf.kernel("basic_reduce3_int", vec=ado.In[ado.i32], vsum=ado.Out[ado.i64], vmin=ado.Out[ado.i32],
                        vmax=ado.Out[ado.i32], n=i64)
    v = np.random.default_rng(32).integers(-1000, 1000, 10003).astype(np.int32)
    got = run(k, dict(vec=v, vsum=np.zeros(1, np.int64), vmin=np.zeros(1, np.int32), vmax=np.zeros(1, np.int32),
                      n=10003), dict(blocks=3, threads=256))
    assert (got["vsum"][0], got["vmin"][0], got["vmax"][0]) == (v.sum(), min(v.min(), 0), max(v.max(), 0))


def test_lj_ceiling_kernel_and_derivatives():
    k = ado.from_cuda((ROOT / "lj.cu").read_text()).kernel(
        "lj_energy_forces", pos=In, box=In, neighbors=ado.In[ado.i64], sigma=f64, epsilon=f64, cutoff=f64, e=Out,
        forces=Out, n=i64, capacity=i64)
    n, cap = 16, 15
    pos = np.random.default_rng(31).random((n, 3)) * 3.0
    neighbors = np.array([[j for j in range(n) if j != i] for i in range(n)], np.int64)
    values = dict(pos=pos, box=np.full(3, 3.0), neighbors=neighbors, sigma=np.float64(0.6), epsilon=np.float64(1.0),
                  cutoff=np.float64(1.4), e=np.zeros(n), forces=np.zeros((n, 3)), n=n, capacity=cap)
    launch = dict(blocks=1, threads=32)
    got = run(k, values, launch)
    d = pos[neighbors] - pos[:, None]
    d -= 3.0 * np.floor(d / 3.0 + 0.5)
    r2 = (d ** 2).sum(-1)
    s6 = (0.36 / r2) ** 3
    sc6 = (0.36 / 1.96) ** 3
    inside = r2 < 1.96
    e = np.where(inside, 0.5 * (4 * (s6 * s6 - s6) - 4 * (sc6 * sc6 - sc6)), 0).sum(1)
    np.testing.assert_allclose(got["e"], e, rtol=1e-12)
    f = -(np.where(inside, 24 * (2 * s6 * s6 - s6) / r2, 0)[..., None] * d).sum(1)
    np.testing.assert_allclose(got["forces"], f, rtol=1e-11, atol=1e-11)
    check_derivatives(k, ["pos", "sigma"], values, launch)
