"""@ado.func(jvp=..., vjp=...): noinline primal plus <name>.adoffload.jvp / .vjp functions."""
import ctypes
import math
import re

import numpy as np

import adoffload.language.builtins as ado
from adoffload.frontend import compile_kernel
from adoffload.language.types import In, Out, f32, f64

from .jit import HostKernel


def softplus_jvp(x, dx):
    return dx / (1.0 + ado.exp(-x))


def softplus_vjp(x, dy):
    return dy / (1.0 + ado.exp(-x))


@ado.func(jvp=softplus_jvp, vjp=softplus_vjp)
def softplus(x):
    return ado.log1p(ado.exp(x))


def polar_jvp(a, b, da, db):
    r = ado.sqrt(a * a + b * b)
    return (a * da + b * db) / r, (a * db - b * da) / (r * r)


def polar_vjp(a, b, dr, dphi):
    r2 = a * a + b * b
    r = ado.sqrt(r2)
    return a / r * dr - b / r2 * dphi, b / r * dr + a / r2 * dphi


@ado.func(jvp=polar_jvp, vjp=polar_vjp)
def polar(a, b):
    return ado.sqrt(a * a + b * b), ado.atan2(b, a)


def kernel(x: In[f32], out: Out[f32], y: In[f64], r: Out[f64], phi: Out[f64]):
    i = ado.tid()
    out[i] = softplus(x[i])
    r[i], phi[i] = polar(y[i], 1.0)


def exported(llvm_ir: str) -> str:
    """Make the internal derivative functions callable from the test."""
    return llvm_ir.replace("define internal", "define")


class TwoDoubles(ctypes.Structure):
    _fields_ = [("a", ctypes.c_double), ("b", ctypes.c_double)]


def test_signatures_in_the_ir():
    text = compile_kernel(kernel).llvm_ir
    assert re.search(r'define internal float @"softplus"\(float %"x"\) noinline', text)
    assert 'define float @"softplus.adoffload.jvp"(float %"x", float %"dx") noinline' in text
    assert 'define {float} @"softplus.adoffload.vjp"(float %"x", float %"dy") noinline' in text
    assert 'define {double, double} @"polar.adoffload.vjp"(double %"a", double %"b", ' \
           'double %"dr", double %"dphi")' in text
    assert "alwaysinline" not in text


def test_derivative_functions_survive_canonicalization_and_import():
    from adoffload import ir as adoffload_ir
    text = adoffload_ir.canonicalize(compile_kernel(kernel).llvm_ir)
    for name in ("softplus", "softplus.adoffload.jvp", "softplus.adoffload.vjp", "polar",
                 "polar.adoffload.jvp", "polar.adoffload.vjp"):
        assert re.search(rf'define .*@"?{re.escape(name)}"?\(', text), name
    adoffload_ir.import_module(text)


def test_primal_runs_in_the_kernel():
    x = np.array([-1.0, 0.0, 2.0], np.float32)
    y = np.array([0.5, -2.0, 3.0])
    out, r, phi = np.zeros(3, np.float32), np.zeros(3), np.zeros(3)
    HostKernel(kernel)(x, out, y, r, phi, grid=3)
    np.testing.assert_allclose(out, np.log1p(np.exp(x)), rtol=1e-6)
    np.testing.assert_allclose(r, np.hypot(y, 1.0), rtol=1e-15)
    np.testing.assert_allclose(phi, np.arctan2(1.0, y), rtol=1e-15)


def test_jvp_and_vjp_functions_compute_the_users_derivatives():
    text = exported(compile_kernel(kernel).llvm_ir)
    import llvmlite.binding as llvm
    module = llvm.parse_assembly(text)
    target_machine = llvm.Target.from_default_triple().create_target_machine()
    engine = llvm.create_mcjit_compiler(module, target_machine)
    engine.finalize_object()
    jvp = ctypes.CFUNCTYPE(ctypes.c_float, ctypes.c_float, ctypes.c_float)(
        engine.get_function_address("softplus.adoffload.jvp"))
    sigmoid = 1 / (1 + math.exp(-0.3))
    assert abs(jvp(0.3, 2.0) - 2.0 * sigmoid) < 1e-6
    polar_vjp_fn = ctypes.CFUNCTYPE(TwoDoubles, *[ctypes.c_double] * 4)(
        engine.get_function_address("polar.adoffload.vjp"))
    got = polar_vjp_fn(0.6, 1.0, 1.0, 0.5)
    expected = polar_vjp(0.6, 1.0, 1.0, 0.5)
    assert abs(got.a - expected[0]) < 1e-14 and abs(got.b - expected[1]) < 1e-14
    polar_jvp_fn = ctypes.CFUNCTYPE(TwoDoubles, *[ctypes.c_double] * 4)(
        engine.get_function_address("polar.adoffload.jvp"))
    got = polar_jvp_fn(0.6, 1.0, 0.1, -0.2)
    expected = polar_jvp(0.6, 1.0, 0.1, -0.2)
    assert abs(got.a - expected[0]) < 1e-14 and abs(got.b - expected[1]) < 1e-14


def test_func_forms_and_plain_python_calls():
    assert softplus.custom_jvp is softplus_jvp and softplus.custom_vjp is softplus_vjp
    assert abs(softplus(0.0) - math.log(2.0)) < 1e-15

    @ado.func
    def twice(v):
        return 2 * v

    assert not twice.has_custom_derivative and twice(3) == 6

    @twice.defjvp
    def twice_jvp(v, dv):
        return 2 * dv

    assert twice.has_custom_derivative
