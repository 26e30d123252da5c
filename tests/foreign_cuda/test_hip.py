"""The same sources compiled as HIP for AMDGPU (gfx942) run on the host CPU: results equal the
CUDA build's, derivatives hold, and the AMDGPU code object builds (shuffles stay in 32-lane
segments of the 64-lane wavefront, as CUDA code expects)."""
import numpy as np
import pytest

import adoffload as ado

from .checks import check_derivatives, needs_lld, run
from .sources import KERNELS


@pytest.fixture(scope="module")
def hip():
    return ado.from_hip(KERNELS)


@pytest.fixture(scope="module")
def cuda():
    return ado.from_cuda(KERNELS)


def test_kernels_are_found_with_their_source_names(hip):
    assert hip.language == "hip" and {"stencil", "warp_sum", "lj"} <= set(hip.names())


def test_warp_shuffles_match_cuda(hip, cuda):
    params = dict(x=ado.In[ado.f64], out=ado.Out[ado.f64])
    values = dict(x=np.random.default_rng(40).standard_normal(256), out=np.zeros(4))
    launch = dict(blocks=4, threads=64)
    got = run(hip.kernel("warp_sum", **params), values, launch)["out"]
    np.testing.assert_allclose(got, run(cuda.kernel("warp_sum", **params), values, launch)["out"], rtol=1e-14)
    np.testing.assert_allclose(got, values["x"].reshape(4, 64).sum(1), rtol=1e-13)


def test_stencil_and_its_derivatives(hip):
    k = hip.kernel("stencil", u=ado.In[ado.f64], v=ado.Out[ado.f64], nx=ado.i32, ny=ado.i32)
    values = dict(u=np.random.default_rng(41).random((12, 21)), v=np.zeros((12, 21)), nx=21, ny=12)
    check_derivatives(k, ["u"], values, dict(blocks=(2, 2), threads=(16, 8)))


@needs_lld
def test_amdgpu_code_object_builds(hip):
    k = hip.kernel("warp_sum", x=ado.In[ado.f64], out=ado.Out[ado.f64])
    compiled = ado.vjp(k, wrt=["x"]).specialize((64,)).compiled("amdgpu", arch="gfx942")
    assert compiled.hsaco[:4] == b"\x7fELF"
