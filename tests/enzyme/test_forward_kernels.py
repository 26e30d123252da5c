"""The gradient table: Python kernels differentiated at the IR level, checked with check_grads."""
from __future__ import annotations

import numpy as np
import pytest

import adoffload.language.builtins as ado
from adoffload.language.types import In, InOut, Out, f32, f64, i64

from .check_grads import KernelCase, check_grads


def _vec(*names, n=16, scalars=(), ints=(), positive=()):
    def make(rng):
        out = {}
        for name in names:
            out[name] = rng.uniform(0.5, 1.5, n) if name in positive else rng.standard_normal(n)
        for name in scalars:
            out[name] = float(rng.uniform(0.5, 1.5))
        for name, value in ints:
            out[name] = value
        out["out"] = np.zeros(n)
        return out
    return make


# ----------------------------------------------------------------------------- kernels

def saxpy(a: f64, x: In[f64], y: In[f64], out: Out[f64]):
    i = ado.tid()
    out[i] = a * x[i] + y[i]


def smooth(x: In[f64], out: Out[f64]):
    i = ado.tid()
    out[i] = ado.tanh(x[i]) * ado.exp(-x[i] * x[i]) + ado.sin(x[i]) / (1.0 + x[i] * x[i])


def lj(r2: In[f64], sigma: f64, eps: f64, out: Out[f64]):
    i = ado.tid()
    s2 = sigma * sigma / r2[i]
    s6 = s2 * s2 * s2
    out[i] = 4.0 * eps * (s6 * s6 - s6)


def branchy(x: In[f64], out: Out[f64]):
    i = ado.tid()
    v = x[i]
    if v > 0.0:
        out[i] = ado.sqrt(v + 1.0)
    else:
        out[i] = v * v * v


def loop_sum(x: In[f64], w: In[f64], out: Out[f64]):
    i = ado.tid()
    acc = 0.0
    for k in range(4):
        acc = acc + w[k] * ado.cos(x[i] * w[k])
    out[i] = acc


def newton_sqrt(x: In[f64], out: Out[f64]):
    i = ado.tid()
    y = x[i]
    for k in range(6):
        y = 0.5 * (y + x[i] / y)
    out[i] = y


def inplace_scale(a: f64, x: InOut[f64]):
    i = ado.tid()
    x[i] = a * x[i] * x[i]


def atomic_energy(x: In[f64], e: Out[f64]):
    i = ado.tid()
    ado.atomic_add(e, 0, x[i] * x[i] + ado.log(1.0 + x[i] * x[i]))


def matvec(m: In[f64, 2], v: In[f64], out: Out[f64]):
    i = ado.tid()
    acc = 0.0
    for j in range(4):
        acc = acc + m[i, j] * v[j]
    out[i] = acc


def minmax(x: In[f64], y: In[f64], out: Out[f64]):
    i = ado.tid()
    out[i] = ado.max(x[i], y[i]) - 2.0 * ado.min(x[i], y[i]) + ado.abs(x[i])


def pairwise(pos: In[f64], out: Out[f64, 2]):
    i, j = ado.tid()
    d = pos[i] - pos[j]
    out[i, j] = ado.exp(-d * d)


def f32_poly(x: In[f32], out: Out[f32]):
    i = ado.tid()
    out[i] = x[i] * x[i] * 3.0 + ado.atan(x[i])


def _matvec_inputs(rng):
    return {"m": rng.standard_normal((6, 4)), "v": rng.standard_normal(4), "out": np.zeros(6)}


def _pairwise_inputs(rng):
    return {"pos": rng.standard_normal(5), "out": np.zeros((5, 5))}


def _atomic_inputs(rng):
    return {"x": rng.standard_normal(12), "e": np.zeros(1)}


def _f32_inputs(rng):
    return {"x": rng.uniform(-1, 1, 8).astype(np.float32), "out": np.zeros(8, np.float32)}


CASES = [
    KernelCase("saxpy/a,x", saxpy, ["a", "x"], _vec("x", "y", scalars=("a",)), 16),
    KernelCase("saxpy/y", saxpy, ["y"], _vec("x", "y", scalars=("a",)), 16),
    KernelCase("smooth", smooth, ["x"], _vec("x"), 16),
    KernelCase("lj/r2,sigma,eps", lj, ["r2", "sigma", "eps"], _vec("r2", scalars=("sigma", "eps"), positive=("r2",)), 16),
    KernelCase("lj/sigma", lj, ["sigma"], _vec("r2", scalars=("sigma", "eps"), positive=("r2",)), 16),
    KernelCase("branchy", branchy, ["x"], _vec("x"), 16),
    KernelCase("loop_sum/x,w", loop_sum, ["x", "w"], _vec("x", "w"), 16),
    KernelCase("newton_sqrt", newton_sqrt, ["x"], _vec("x", positive=("x",)), 16),
    KernelCase("inplace_scale", inplace_scale, ["a", "x"],
               lambda rng: {"a": 1.3, "x": rng.standard_normal(10)}, 10),
    KernelCase("atomic_energy", atomic_energy, ["x"], _atomic_inputs, 12),
    KernelCase("matvec/m,v", matvec, ["m", "v"], _matvec_inputs, 6),
    KernelCase("minmax", minmax, ["x", "y"], _vec("x", "y"), 16),
    KernelCase("pairwise", pairwise, ["pos"], _pairwise_inputs, (5, 5)),
    KernelCase("f32_poly", f32_poly, ["x"], _f32_inputs, 8, rtol=2e-2, atol=2e-2, h=1e-2),
]


@pytest.mark.parametrize("case", CASES, ids=repr)
def test_jvp_matches_finite_differences(case):
    check_grads(case, reverse=False)


@pytest.mark.parametrize("case", [c for c in CASES if c.reverse], ids=repr)
def test_jvp_and_vjp_satisfy_the_inner_product_identity(case):
    check_grads(case, reverse=True)
