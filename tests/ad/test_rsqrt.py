"""``ado.rsqrt`` beyond the kernel table (which checks JVP, VJP and vector mode against central
differences): second order, the device math each GPU target calls, and the host's IEEE meaning."""
import numpy as np
import pytest

import adoffload as ado
from adoffload.codegen.gpu import amdgpu, mathmap, nvptx, tools
from adoffload.errors import ToolNotFoundError


def _have(finder) -> bool:
    try:
        finder()
        return True
    except ToolNotFoundError:
        return False


@ado.kernel
def inverse_root(s: ado.f64, x: ado.In[ado.f64], y: ado.Out[ado.f64]):
    i = ado.tid()
    y[i] = ado.rsqrt(s * x[i])


@ado.kernel
def inverse_root32(x: ado.In[ado.f32], y: ado.Out[ado.f32]):
    i = ado.tid()
    y[i] = ado.rsqrt(x[i])


def test_outside_kernels_it_is_numpy_one_over_sqrt():
    assert ado.rsqrt(4.0) == 0.5
    assert ado.rsqrt(np.float32(2.0)).dtype == np.float32
    np.testing.assert_array_equal(ado.rsqrt(np.array([0.25, 3.0])), 1 / np.sqrt([0.25, 3.0]))


def _run(kernel, values: dict, n: int) -> dict:
    """Launch with ``values`` by parameter name, missing arrays zero; returns every argument."""
    args = {p.name: values.get(p.name, np.zeros(n)) for p in kernel.signature.visible_params}
    kernel(*args.values(), grid=n)
    return args


# d/dx of x^(-1/2) is -1/2 x^(-3/2); the derivative of that, 3/4 x^(-5/2)
def test_second_derivative_reverse_over_reverse():
    x = np.array([0.3, 0.9, 1.7, 2.5])
    second = ado.vjp(ado.vjp(inverse_root, ["x"]), ["x"])
    out = _run(second, dict(s=1.0, x=x, d_y=np.ones(4), d_d_x=np.ones(4)), 4)   # seed: the output d_x
    np.testing.assert_allclose(out["d_x"], -0.5 * x ** -1.5, rtol=1e-14)
    np.testing.assert_allclose(out["d2_x"], 0.75 * x ** -2.5, rtol=1e-13)


def test_second_derivative_forward_over_reverse():
    x = np.array([0.4, 1.1, 2.0])
    tangent = ado.jvp(ado.vjp(inverse_root, ["x"]), ["x"])
    out = _run(tangent, dict(s=1.0, x=x, d_y=np.ones(3), d2_x=np.ones(3)), 3)   # direction: x
    np.testing.assert_allclose(out["d_d_x"], 0.75 * x ** -2.5, rtol=1e-13)


@pytest.mark.skipif(not _have(tools.find_libdevice), reason="libdevice not installed (pip install nvidia-nvvm)")
@pytest.mark.parametrize("kernel,instruction", [(inverse_root, "rsqrt.approx.f64"),
                                                (inverse_root32, "rsqrt.approx.f32")])
def test_nvptx_calls_libdevice_rsqrt(kernel, instruction):
    ptx = kernel.compiled("nvptx", arch="sm_90").ptx
    assert instruction in ptx and ".extern" not in ptx     # __nv_rsqrt[f], inlined: no call left
    assert "sqrt.rn" not in ptx and "div.rn" not in ptx and "rcp.rn" not in ptx
    if _have(tools.find_ptxas):
        nvptx.ptxas_check(ptx, "sm_90")


@pytest.mark.skipif(not _have(tools.find_libdevice), reason="libdevice not installed (pip install nvidia-nvvm)")
def test_nvptx_adjoint_uses_the_device_rsqrt_too():
    ptx = ado.vjp(inverse_root, ["x", "s"]).compiled("nvptx", arch="sm_90").ptx
    assert "rsqrt.approx.f64" in ptx and "sqrt.rn" not in ptx and ".extern" not in ptx


def test_amdgpu_names_are_ocmls():
    text, used = mathmap.rename_math_calls("declare double @rsqrt(double)\ndeclare float @rsqrtf(float)\n",
                                           lambda op, kind: f"__ocml_{op}_{kind}")
    assert used == {"__ocml_rsqrt_f64", "__ocml_rsqrt_f32"}


@pytest.mark.skipif(not _have(tools.find_lld), reason="ld.lld not installed (pip install ziglang)")
def test_gcn_links():
    """With ROCm: ocml's rsqrt; without: devicemath's 1/sqrt. Either way inlined, linked."""
    hsaco = inverse_root.compiled("amdgpu", arch="gfx942").hsaco
    assert amdgpu.kernel_descriptors(hsaco) == [inverse_root.compiled("amdgpu", arch="gfx942").entry_name + ".kd"]
