"""Forward mode features beyond single rules: vector width, custom derivatives, atomics, helpers."""
from __future__ import annotations

import numpy as np
import pytest

import adoffload.language.builtins as ado
from adoffload.enzyme.activity import CONST, DUP
from adoffload.enzyme.forward import forward
from adoffload.enzyme.kernels import derive_kernel
from adoffload.errors import ArgumentError
from adoffload.frontend import compile_kernel
from adoffload.ir import canonicalize, import_module
from adoffload.ir.core import Constant, Module, StructType, const, f64, ptr
from adoffload.language.types import In, Out, f64 as F64

from .jit import compile_host, new_function


def lj_like(a: F64, x: In[F64], out: Out[F64]):
    i = ado.tid()
    out[i] = a * ado.exp(-x[i] * x[i]) + ado.sin(a * x[i])


def _body_module(kernel):
    source = compile_kernel(kernel)
    return source.signature, import_module(canonicalize(source.llvm_ir))


def _run(fn, grid, *flat):
    status = np.zeros(4, np.int64)
    for tid in range(grid):
        fn(tid, *flat, status)
    assert status[0] == 0


def test_vector_mode_kernel_lanes_equal_single_lane_runs():
    signature, module = _body_module(lj_like)
    wide = derive_kernel(signature, module, "lj_like", "jvp", ["a", "x"], width=3)
    one = derive_kernel(signature, module, "lj_like", "jvp", ["a", "x"])
    assert [p.name for p in wide.signature.params] == ["a", "x", "out", "d_a", "d_x", "d_out"]
    assert wide.signature.param("d_x").type.ndim == 2 and wide.signature.param("d_a").type.ndim == 1
    funcs = compile_host(module, [wide.body_name, one.body_name])
    rng = np.random.default_rng(1)
    n, a, x = 7, 0.8, rng.standard_normal(7)
    da, dx = rng.standard_normal(3), rng.standard_normal((3, n))
    out, dout = np.zeros(n), np.zeros((3, n))
    _run(funcs[wide.body_name], n, a, x, n, out, n, da, 3, dx, 3, n, dout, 3, n)
    for lane in range(3):
        lane_out = np.zeros(n)
        _run(funcs[one.body_name], n, a, x, n, np.zeros(n), n, da[lane], dx[lane].copy(), n, lane_out, n)
        np.testing.assert_allclose(dout[lane], lane_out, rtol=1e-13)


def test_wrt_must_name_a_float_parameter():
    def k(n: ado.i64, x: In[F64], out: Out[F64]):
        i = ado.tid()
        out[i] = x[i] * n
    signature, module = _body_module(k)
    with pytest.raises(ArgumentError, match="integer parameter.*float parameters are: x, out"):
        derive_kernel(signature, module, "k", "jvp", ["n"])
    with pytest.raises(ArgumentError, match="not a parameter"):
        derive_kernel(signature, module, "k", "jvp", ["y"])


def _helper_module(with_jvp: bool, with_vjp: bool) -> Module:
    """f(x, y) = h(x, y) * 2 with h(x, y) = x*y a noinline helper whose custom derivative says
    dh = 3*dx + 5*dy (deliberately not the true derivative, to see which one is used)."""
    module = Module()
    h, b = new_function(module, "h", f64, [("x", f64), ("y", f64)])
    b.ret(b.fmul(*h.args))
    if with_jvp:
        jvp, b = new_function(module, "h.adoffload.jvp", f64, [("x", f64), ("y", f64), ("dx", f64), ("dy", f64)])
        b.ret(b.fadd(b.fmul(const(f64, 3.0), jvp.args[2]), b.fmul(const(f64, 5.0), jvp.args[3])))
    if with_vjp:
        pair = StructType((f64, f64))
        vjp, b = new_function(module, "h.adoffload.vjp", pair, [("x", f64), ("y", f64), ("dy", f64)])
        first = b.emit("insertvalue", pair, [Constant(pair, None, kind="undef"), b.fmul(const(f64, 3.0), vjp.args[2])], indices=(0,))
        b.ret(b.emit("insertvalue", pair, [first, b.fmul(const(f64, 5.0), vjp.args[2])], indices=(1,)))
    f, b = new_function(module, "f", f64, [("x", f64), ("y", f64)])
    b.ret(b.fmul(b.call(h, list(f.args)), const(f64, 2.0)))
    return module


@pytest.mark.parametrize("with_jvp,with_vjp", [(True, False), (False, True), (True, True)])
def test_custom_derivative_replaces_the_helper_body(with_jvp, with_vjp):
    module = _helper_module(with_jvp, with_vjp)
    d = forward(module, module["f"], [DUP, DUP])
    call = compile_host(module, [d.name])[d.name]
    assert call(1.5, 2.5, 1.0, 0.0) == pytest.approx(6.0)
    assert call(1.5, 2.5, 0.0, 1.0) == pytest.approx(10.0)


def test_pure_internal_helper_is_differentiated_recursively():
    module = Module()
    g, b = new_function(module, "g", f64, [("x", f64)])
    b.ret(b.call_intrinsic(module, "llvm.sin.f64", f64, [b.fmul(g.args[0], g.args[0])]))
    f, b = new_function(module, "f", f64, [("x", f64), ("c", f64)])
    b.ret(b.fmul(b.call(g, [f.args[0]]), f.args[1]))
    d = forward(module, f, [DUP, CONST])
    call = compile_host(module, [d.name])[d.name]
    assert call(0.7, 3.0, 1.0) == pytest.approx(3.0 * np.cos(0.49) * 1.4)


def test_atomic_fadd_adds_the_tangent_atomically():
    module = Module()
    fn, b = new_function(module, "acc", f64, [("x", f64), ("e", ptr)])
    b.atomicrmw("fadd", fn.args[1], b.fmul(fn.args[0], fn.args[0]))
    b.ret(const(f64, 0.0))
    d = forward(module, fn, [DUP, DUP])
    call = compile_host(module, [d.name])[d.name]
    e, de = np.zeros(1), np.array([1.0])
    call(3.0, e, 0.5, de)
    assert e[0] == 9.0 and de[0] == pytest.approx(1.0 + 0.5 * 6.0)


def test_inactive_float_stored_into_active_memory_zeroes_the_shadow():
    module = Module()
    fn, b = new_function(module, "st", f64, [("c", f64), ("out", ptr)])
    b.store(b.fmul(fn.args[0], fn.args[0]), fn.args[1])
    b.ret(const(f64, 0.0))
    d = forward(module, fn, [CONST, DUP])
    call = compile_host(module, [d.name])[d.name]
    out, dout = np.zeros(1), np.array([7.0])
    call(2.0, out, dout)
    assert out[0] == 4.0 and dout[0] == 0.0
