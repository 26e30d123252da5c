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
