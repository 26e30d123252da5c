"""CUDA's rsqrt/rsqrtf in ``ado.from_cuda``: calls of the device function (libdevice's approximation on
NVIDIA, as in CUDA), which the host runs as the IEEE 1/sqrt; derivatives through it on the host."""
import numpy as np
import pytest

import adoffload as ado
from adoffload.codegen.gpu import tools
from adoffload.errors import ToolNotFoundError

from .checks import check_derivatives

SOURCE = r"""
extern "C" __global__ void coulomb(const double* x, double* e, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) e[i] = 2.0 * rsqrt(x[i] + 2.5);      // no product: clang would contract it into an fma
}
extern "C" __global__ void single(const float* x, float* f, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) f[i] = rsqrtf(x[i] + 3.0f) + rsqrt(4.0f);
}
"""


@pytest.fixture(scope="module")
def mod():
    return ado.from_cuda(SOURCE)


def _coulomb(mod):
    return mod.kernel("coulomb", x=ado.In[ado.f64], e=ado.Out[ado.f64], n=ado.i32)


def _single(mod):
    return mod.kernel("single", x=ado.In[ado.f32], f=ado.Out[ado.f32], n=ado.i32)


def test_host_rsqrt_is_the_ieee_reciprocal_square_root(mod):
    x = np.linspace(-2.0, 2.0, 100)
    e, f = np.zeros(100), np.zeros(100, np.float32)
    _coulomb(mod)(x, e, 100, blocks=1, threads=128)
    np.testing.assert_array_equal(e, 2.0 / np.sqrt(x + 2.5))
    _single(mod)(x.astype(np.float32), f, 100, blocks=1, threads=128)
    np.testing.assert_array_equal(f, 1 / np.sqrt(x.astype(np.float32) + np.float32(3.0)) + np.float32(0.5))


def _have_libdevice() -> bool:
    try:
        tools.find_libdevice()
        return True
    except ToolNotFoundError:
        return False


@pytest.mark.skipif(not _have_libdevice(), reason="libdevice not installed (pip install nvidia-nvvm)")
def test_ptx_calls_the_device_rsqrt(mod):
    for kernel, instruction in ((_coulomb(mod), "rsqrt.approx.f64"), (_single(mod), "rsqrt.approx.f32")):
        ptx = kernel.specialize((128,)).compiled("nvptx", arch="sm_90").ptx
        assert instruction in ptx and "sqrt.rn" not in ptx and "div.rn" not in ptx


def test_derivatives_through_rsqrt(mod):
    x = np.random.default_rng(2).uniform(-1.5, 1.5, 64)
    _, grads = check_derivatives(_coulomb(mod), ["x"], dict(x=x, e=np.zeros(64), n=64), dict(blocks=1, threads=64))
    assert np.abs(grads["x"]).min() > 0.0
