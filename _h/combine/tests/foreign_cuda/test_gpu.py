"""The CUDA corpus on an NVIDIA GPU (skipped without one): primal results equal the host CPU's, and
the derivative checks of test_kernels.py hold on the device."""
import numpy as np
import pytest

import adoffload as ado
from adoffload.errors import Error

from .checks import check_derivatives, run, written
from .sources import KERNELS

pytestmark = pytest.mark.gpu

rng = np.random.default_rng(20)
CASES = {    # name: (parameters, values, launch, wrt)
    "daxpy": (dict(a=ado.f64, x=ado.In[ado.f64], y=ado.InOut[ado.f64], n=ado.i32),
              dict(a=np.float64(1.5), x=rng.standard_normal(5000), y=rng.standard_normal(5000), n=5000),
              dict(blocks=8, threads=128), ["a", "x"]),
    "block_sum_d": (dict(x=ado.In[ado.f64], out=ado.Out[ado.f64], n=ado.i32),
                    dict(x=rng.standard_normal(1000), out=np.zeros(8), n=1000), dict(blocks=8, threads=128), ["x"]),
    "warp_sum": (dict(x=ado.In[ado.f64], out=ado.Out[ado.f64]), dict(x=rng.standard_normal(256), out=np.zeros(4)),
                 dict(blocks=4, threads=64), ["x"]),
    "stencil": (dict(u=ado.In[ado.f64], v=ado.Out[ado.f64], nx=ado.i32, ny=ado.i32),
                dict(u=rng.random((40, 70)), v=np.zeros((40, 70)), nx=70, ny=40), dict(blocks=(5, 5), threads=(16, 8)),
                ["u"]),
    "newton_sqrt": (dict(a=ado.In[ado.f64], r=ado.Out[ado.f64], n=ado.i32),
                    dict(a=rng.random(1000) * 10 + 0.5, r=np.zeros(1000), n=1000), dict(blocks=8, threads=128), ["a"]),
    "lj": (dict(pos=ado.In[ado.f64], force=ado.Out[ado.f64], energy=ado.Out[ado.f64], n=ado.i32, eps=ado.f64,
                sigma=ado.f64),
           dict(pos=rng.random((64, 3)) * 5, force=np.zeros((64, 3)), energy=np.zeros(1), n=64, eps=np.float64(1.0),
                sigma=np.float64(0.8)), dict(blocks=2, threads=32), ["pos", "sigma"]),
}


@pytest.fixture(scope="module")
def mod():
    from adoffload.runtime import get_device
    try:
        get_device("cuda")
    except Error as exc:
        pytest.skip(f"no CUDA device: {exc}")
    return ado.from_cuda(KERNELS)


@pytest.mark.parametrize("name", sorted(CASES))
def test_gpu_matches_host_and_derivatives_hold(mod, name):
    params, values, launch, wrt = CASES[name]
    k = mod.kernel(name, **params)
    on_gpu, on_host = run(k, values, launch, "cuda"), run(k, values, launch)
    for out in written(k):
        np.testing.assert_allclose(on_gpu[out], on_host[out], rtol=1e-11, atol=1e-11)
    check_derivatives(k, wrt, values, launch, device="cuda")


def test_tuned_rajaperf_dot_on_the_gpu(mod):
    """stream_dot's 128-bit loads, shuffles, speculated last-warp branch and atomicAdd, with its VJP."""
    from pathlib import Path
    source = (Path(__file__).resolve().parents[2] / "benchmarks" / "cuda" / "rajaperf.cu").read_text()
    k = ado.from_cuda(source).kernel("stream_dot", a=ado.In[ado.f64], b=ado.In[ado.f64], dot=ado.Out[ado.f64],
                                     n=ado.i64)
    a, b = rng.standard_normal(100001), rng.standard_normal(100001)
    values = dict(a=a, b=b, dot=np.zeros(1), n=100001)
    launch = dict(blocks=40, threads=256)
    np.testing.assert_allclose(run(k, values, launch, "cuda")["dot"][0], a @ b, rtol=1e-11)
    check_derivatives(k, ["a", "b"], values, launch, device="cuda")


def test_tiled_matmul_on_the_gpu(mod):
    from .sources import TILED_MATMUL
    k = ado.from_cuda(TILED_MATMUL).kernel("matmul", A=ado.In[ado.f64], B=ado.In[ado.f64], C=ado.Out[ado.f64],
                                           n=ado.i32, k=ado.i32, m=ado.i32)
    A, B = rng.standard_normal((70, 45)), rng.standard_normal((45, 50))
    values = dict(A=A, B=B, C=np.zeros((70, 50)), n=70, k=45, m=50)
    launch = dict(blocks=(7, 9), threads=(8, 8))
    np.testing.assert_allclose(run(k, values, launch, "cuda")["C"], A @ B, rtol=1e-12, atol=1e-12)
    check_derivatives(k, ["A", "B"], values, launch, device="cuda")


def test_double_buffered_shared_memory_on_the_gpu(mod):
    from .sources import DOUBLE_BUFFERED
    k = ado.from_cuda(DOUBLE_BUFFERED).kernel("smooth", x=ado.In[ado.f64], y=ado.Out[ado.f64], steps=ado.i32)
    values, launch = dict(x=rng.random(256), y=np.zeros(256), steps=4), dict(blocks=4, threads=64)
    np.testing.assert_allclose(run(k, values, launch, "cuda")["y"], run(k, values, launch)["y"], rtol=1e-13)
    check_derivatives(k, ["x"], values, launch, device="cuda")


def test_warp_votes_on_the_gpu(mod):
    """vote.sync.ballot against the host's warp loop; derivatives through vote-steered branches."""
    from .sources import WARP_VOTES
    from .test_warp_votes import VOTES, vote_flow_input, votes_input
    votes = ado.from_cuda(WARP_VOTES)
    k = votes.kernel("votes", **VOTES)
    values = dict(x=votes_input(256)[:250], **{n: np.zeros(250, np.int32) for n in ("ballot", "any", "all", "count",
                                                                                  "masked")}, n=250)
    launch = dict(blocks=2, threads=128)
    on_gpu, on_host = run(k, values, launch, "cuda"), run(k, values, launch)
    for name in ("ballot", "any", "all", "count", "masked"):
        np.testing.assert_array_equal(on_gpu[name], on_host[name])
    k = votes.kernel("vote_flow", x=ado.In[ado.f64], y=ado.Out[ado.f64], c=ado.f64)
    values = dict(x=vote_flow_input(), y=np.zeros(256), c=np.float64(1.5))
    # libdevice's sin and the host's libm differ in the last bits (measured: 1.8e-14 relative at one element)
    np.testing.assert_allclose(run(k, values, launch, "cuda")["y"], run(k, values, launch)["y"], rtol=1e-12)
    check_derivatives(k, ["x", "c"], values, launch, device="cuda")
    k = votes.kernel("syncwarp_sum", x=ado.In[ado.f64], out=ado.Out[ado.f64])
    values, launch = dict(x=rng.standard_normal(256), out=np.zeros(4)), dict(blocks=4, threads=64)
    np.testing.assert_allclose(run(k, values, launch, "cuda")["out"], run(k, values, launch)["out"], rtol=1e-12,
                               atol=1e-13)
    check_derivatives(k, ["x"], values, launch, device="cuda")
    from .sources import SYNCWARP_TAIL            # __syncwarp under `if (t < 32)`, effects guarded
    k = ado.from_cuda(SYNCWARP_TAIL).kernel("tail_sum", x=ado.In[ado.f64], out=ado.Out[ado.f64])
    np.testing.assert_allclose(run(k, values, launch, "cuda")["out"], run(k, values, launch)["out"], rtol=1e-12,
                               atol=1e-13)
    check_derivatives(k, ["x"], values, launch, device="cuda")


def test_warp_aggregated_atomics_on_the_gpu(mod):
    from .sources import WARP_VOTES
    k = ado.from_cuda(WARP_VOTES).kernel("compact", x=ado.In[ado.f64], out=ado.Out[ado.f64], count=ado.Out[ado.i32],
                                         n=ado.i32)
    x = rng.standard_normal(5000)
    got = run(k, dict(x=x, out=np.zeros(5000), count=np.zeros(1, np.int32), n=5000), dict(blocks=40, threads=128),
              "cuda")
    assert got["count"][0] == (x > 0).sum()
    np.testing.assert_array_equal(np.sort(got["out"][:got["count"][0]]), np.sort(2 * x[x > 0]))


def test_structs_on_the_gpu(mod):
    """Shared arrays of structs and struct parameters by value, primal and derivatives."""
    from .sources import STRUCTS
    from .test_structs import LJ, SCALE, atoms
    structs = ado.from_cuda(STRUCTS)
    k = structs.kernel("tile_energy", p=LJ, pos=ado.In[ado.f64], energy=ado.Out[ado.f64])
    values = dict(p_eps=np.float64(1.5), p_sigma=np.float64(0.9), pos=atoms(), energy=np.zeros(128))
    launch = dict(blocks=2, threads=64)
    np.testing.assert_allclose(run(k, values, launch, "cuda")["energy"], run(k, values, launch)["energy"], rtol=1e-12)
    check_derivatives(k, ["p_eps", "p_sigma", "pos"], values, launch, device="cuda")
    k = structs.kernel("reverse3", s=SCALE, x=ado.In[ado.f32], y=ado.Out[ado.f32])
    values = dict(s_a=np.float32(2.0), s_shift=5, s_b=np.float32(0.5), x=rng.random((256, 3), dtype=np.float32),
                  y=np.zeros((256, 3), np.float32))
    launch = dict(blocks=2, threads=128)
    np.testing.assert_allclose(run(k, values, launch, "cuda")["y"], run(k, values, launch)["y"], rtol=1e-6)
