"""RAJAPerf-style kernels in the adoffload kernel language, with numpy references.

Shared by the front-end tests, and (later) the benchmark and GPU suites. Each entry of
``KERNELS`` is a ``RajaKernel``: the kernel function, a function building its arguments for a
problem size, the grid for that size, the reference result (computed with numpy) and the
names of the outputs to compare.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

import adoffload.language.builtins as ado
from adoffload.language.types import In, InOut, Out, f64, i32, i64


# --- stream ---------------------------------------------------------------------------------

def add(a: In[f64], b: In[f64], c: Out[f64]):
    i = ado.tid()
    c[i] = a[i] + b[i]


def copy(a: In[f64], c: Out[f64]):
    i = ado.tid()
    c[i] = a[i]


def mul(alpha: f64, c: In[f64], b: Out[f64]):
    i = ado.tid()
    b[i] = alpha * c[i]


def triad(alpha: f64, b: In[f64], c: In[f64], a: Out[f64]):
    i = ado.tid()
    a[i] = b[i] + alpha * c[i]


def dot(a: In[f64], b: In[f64], result: InOut[f64]):
    i = ado.tid()
    ado.atomic_add(result, 0, a[i] * b[i])


# --- basic ----------------------------------------------------------------------------------

def daxpy(alpha: f64, x: In[f64], y: InOut[f64]):
    i = ado.tid()
    y[i] += alpha * x[i]


def if_quad(a: In[f64], b: In[f64], c: In[f64], x1: Out[f64], x2: Out[f64]):
    i = ado.tid()
    s = b[i] * b[i] - 4.0 * a[i] * c[i]
    if s >= 0:
        s = ado.sqrt(s)
        x2[i] = (-b[i] + s) / (2.0 * a[i])
        x1[i] = (-b[i] - s) / (2.0 * a[i])
    else:
        x2[i] = 0.0
        x1[i] = 0.0


def init3(in1: In[f64], in2: In[f64], out1: Out[f64], out2: Out[f64], out3: Out[f64]):
    i = ado.tid()
    out1[i] = out2[i] = out3[i] = -in1[i] - in2[i]


def muladdsub(in1: In[f64], in2: In[f64], out1: Out[f64], out2: Out[f64], out3: Out[f64]):
    i = ado.tid()
    out1[i] = in1[i] * in2[i]
    out2[i] = in1[i] + in2[i]
    out3[i] = in1[i] - in2[i]


@ado.func
def trap_int_func(x, y, xp, yp):
    denom = (x - xp) * (x - xp) + (y - yp) * (y - yp)
    return 1.0 / ado.sqrt(denom)


def trap_int(x0: f64, xp: f64, y: f64, yp: f64, h: f64, sumx: InOut[f64]):
    i = ado.tid()
    x = x0 + i * h
    ado.atomic_add(sumx, 0, trap_int_func(x, y, xp, yp))


def pi_reduce(dx: f64, pi: InOut[f64]):
    i = ado.tid()
    x = (float(i) + 0.5) * dx
    ado.atomic_add(pi, 0, dx / (1.0 + x * x))


def nested_init(array: Out[f64, 3]):
    i, j, k = ado.tid()
    array[i, j, k] = 0.00000001 * i * j * k


def reduce3_int(vec: In[i32], vsum: InOut[i64], vmin: InOut[i32], vmax: InOut[i32]):
    i = ado.tid()
    ado.atomic_add(vsum, 0, i64(vec[i]))
    ado.atomic_min(vmin, 0, vec[i])
    ado.atomic_max(vmax, 0, vec[i])


# --- lcals ----------------------------------------------------------------------------------

def hydro_1d(q: f64, r: f64, t: f64, x: Out[f64], y: In[f64], z: In[f64]):
    i = ado.tid()
    x[i] = q + y[i] * (r * z[i + 10] + t * z[i + 11])


def eos(q: f64, r: f64, t: f64, x: Out[f64], y: In[f64], z: In[f64], u: In[f64]):
    i = ado.tid()
    x[i] = u[i] + r * (z[i] + r * y[i]) + t * (u[i + 3] + r * (u[i + 2] + r * u[i + 1])
                                            + t * (u[i + 6] + q * (u[i + 5] + q * u[i + 4])))


def planckian(x: In[f64], y: In[f64], u: In[f64], v: In[f64], w: Out[f64]):
    i = ado.tid()
    y_i = u[i] / v[i]
    w[i] = x[i] / (ado.exp(y_i) - 1.0)


def first_diff(x: Out[f64], y: In[f64]):
    i = ado.tid()
    x[i] = y[i + 1] - y[i]


def diff_predict(px: InOut[f64, 2], cx: In[f64, 2]):
    """px[k, i] for k = 0..13 rows (RAJAPerf's offset layout as a 2-D array)."""
    i = ado.tid()
    ar = cx[4, i]
    br = ar - px[4, i]
    px[4, i] = ar
    cr = br - px[5, i]
    px[5, i] = br
    ar = cr - px[6, i]
    px[6, i] = cr
    br = ar - px[7, i]
    px[7, i] = ar
    cr = br - px[8, i]
    px[8, i] = br
    ar = cr - px[9, i]
    px[9, i] = cr
    br = ar - px[10, i]
    px[10, i] = ar
    cr = br - px[11, i]
    px[11, i] = br
    px[13, i] = cr - px[12, i]
    px[12, i] = cr


# --- the table ------------------------------------------------------------------------------

@dataclass(frozen=True)
class RajaKernel:
    kernel: Callable
    make_args: Callable[[int, np.random.Generator], dict]   # n -> {param name: value}
    grid: Callable[[int], object]
    reference: Callable[[dict], dict]                        # args -> {output name: expected}
    rtol: float = 1e-12


def _vec(rng, n, low=0.1, high=1.0):
    return rng.uniform(low, high, n)


def _diff_predict_reference(args):
    px, cx = args["px"].copy(), args["cx"]
    ar = cx[4]
    br = ar - px[4]; px[4] = ar
    cr = br - px[5]; px[5] = br
    ar = cr - px[6]; px[6] = cr
    br = ar - px[7]; px[7] = ar
    cr = br - px[8]; px[8] = br
    ar = cr - px[9]; px[9] = cr
    br = ar - px[10]; px[10] = ar
    cr = br - px[11]; px[11] = br
    px[13] = cr - px[12]; px[12] = cr
    return {"px": px}


def _if_quad_reference(a):
    s = a["b"] ** 2 - 4 * a["a"] * a["c"]
    root = np.sqrt(np.maximum(s, 0))
    x1 = np.where(s >= 0, (-a["b"] - root) / (2 * a["a"]), 0.0)
    x2 = np.where(s >= 0, (-a["b"] + root) / (2 * a["a"]), 0.0)
    return {"x1": x1, "x2": x2}


def _trap_int_reference(a, n):
    x = a["x0"] + np.arange(n) * a["h"]
    return {"sumx": np.array([np.sum(1.0 / np.sqrt((x - a["xp"]) ** 2 + (a["y"] - a["yp"]) ** 2))])}


KERNELS = {
    "ADD": RajaKernel(add, lambda n, r: dict(a=_vec(r, n), b=_vec(r, n), c=np.zeros(n)),
                      lambda n: n, lambda a: {"c": a["a"] + a["b"]}),
    "COPY": RajaKernel(copy, lambda n, r: dict(a=_vec(r, n), c=np.zeros(n)), lambda n: n,
                       lambda a: {"c": a["a"]}),
    "MUL": RajaKernel(mul, lambda n, r: dict(alpha=1.7, c=_vec(r, n), b=np.zeros(n)), lambda n: n,
                      lambda a: {"b": 1.7 * a["c"]}),
    "TRIAD": RajaKernel(triad, lambda n, r: dict(alpha=0.3, b=_vec(r, n), c=_vec(r, n),
                                                 a=np.zeros(n)),
                        lambda n: n, lambda a: {"a": a["b"] + 0.3 * a["c"]}),
    "DOT": RajaKernel(dot, lambda n, r: dict(a=_vec(r, n), b=_vec(r, n), result=np.zeros(1)),
                      lambda n: n, lambda a: {"result": np.array([a["a"] @ a["b"]])}, rtol=1e-10),
    "DAXPY": RajaKernel(daxpy, lambda n, r: dict(alpha=2.5, x=_vec(r, n), y=_vec(r, n)),
                        lambda n: n, lambda a: {"y": a["y"] + 2.5 * a["x"]}),
    "IF_QUAD": RajaKernel(if_quad, lambda n, r: dict(a=_vec(r, n), b=_vec(r, n, -2, 2),
                                                     c=_vec(r, n, -0.5, 0.5), x1=np.zeros(n),
                                                     x2=np.zeros(n)),
                          lambda n: n, _if_quad_reference),
    "INIT3": RajaKernel(init3, lambda n, r: dict(in1=_vec(r, n), in2=_vec(r, n), out1=np.zeros(n),
                                                 out2=np.zeros(n), out3=np.zeros(n)),
                        lambda n: n, lambda a: {k: -a["in1"] - a["in2"]
                                                for k in ("out1", "out2", "out3")}),
    "MULADDSUB": RajaKernel(muladdsub, lambda n, r: dict(in1=_vec(r, n), in2=_vec(r, n),
                                                         out1=np.zeros(n), out2=np.zeros(n),
                                                         out3=np.zeros(n)),
                            lambda n: n, lambda a: {"out1": a["in1"] * a["in2"],
                                                    "out2": a["in1"] + a["in2"],
                                                    "out3": a["in1"] - a["in2"]}),
    "TRAP_INT": RajaKernel(trap_int, lambda n, r: dict(x0=0.0, xp=-1.3, y=0.7, yp=0.2, h=1.0 / n,
                                                       sumx=np.zeros(1)),
                           lambda n: n, None, rtol=1e-10),
    "PI_REDUCE": RajaKernel(pi_reduce, lambda n, r: dict(dx=1.0 / n, pi=np.zeros(1)), lambda n: n,
                            None, rtol=1e-10),
    "NESTED_INIT": RajaKernel(nested_init, lambda n, r: dict(array=np.zeros((n, n + 1, 3))),
                              lambda n: (n, n + 1, 3), None),
    "REDUCE3_INT": RajaKernel(reduce3_int,
                              lambda n, r: dict(vec=r.integers(-1000, 1000, n).astype(np.int32),
                                                vsum=np.zeros(1, np.int64),
                                                vmin=np.array([2**31 - 1], np.int32),
                                                vmax=np.array([-2**31], np.int32)),
                              lambda n: n, lambda a: {"vsum": np.array([a["vec"].sum()]),
                                                      "vmin": np.array([a["vec"].min()]),
                                                      "vmax": np.array([a["vec"].max()])}),
    "HYDRO_1D": RajaKernel(hydro_1d, lambda n, r: dict(q=0.5, r=1.5, t=0.25, x=np.zeros(n),
                                                       y=_vec(r, n), z=_vec(r, n + 11)),
                           lambda n: n, lambda a: {"x": a["q"] + a["y"] * (
                               a["r"] * a["z"][10:-1] + a["t"] * a["z"][11:])}),
    "EOS": RajaKernel(eos, lambda n, r: dict(q=0.5, r=1.5, t=0.25, x=np.zeros(n), y=_vec(r, n),
                                             z=_vec(r, n), u=_vec(r, n + 6)),
                      lambda n: n, None),
    "PLANCKIAN": RajaKernel(planckian, lambda n, r: dict(x=_vec(r, n), y=_vec(r, n), u=_vec(r, n),
                                                         v=_vec(r, n, 0.5, 1.0), w=np.zeros(n)),
                            lambda n: n, lambda a: {"w": a["x"] / (np.exp(a["u"] / a["v"]) - 1)}),
    "FIRST_DIFF": RajaKernel(first_diff, lambda n, r: dict(x=np.zeros(n), y=_vec(r, n + 1)),
                             lambda n: n, lambda a: {"x": np.diff(a["y"])}),
    "DIFF_PREDICT": RajaKernel(diff_predict, lambda n, r: dict(px=r.uniform(0, 1, (14, n)),
                                                               cx=r.uniform(0, 1, (14, n))),
                               lambda n: n, _diff_predict_reference),
}


def _eos_reference(a):
    u, r, q, t = a["u"], a["r"], a["q"], a["t"]
    n = len(a["x"])
    ui = [u[k:k + n] for k in range(7)]
    return {"x": ui[0] + r * (a["z"] + r * a["y"]) + t * (ui[3] + r * (ui[2] + r * ui[1])
                                                         + t * (ui[6] + q * (ui[5] + q * ui[4])))}


def reference(name: str, args: dict, n: int) -> dict:
    """The numpy result for kernel `name` run on `args` (inputs unchanged)."""
    if name == "TRAP_INT":
        return _trap_int_reference(args, n)
    if name == "PI_REDUCE":
        x = (np.arange(n) + 0.5) * args["dx"]
        return {"pi": np.array([np.sum(args["dx"] / (1 + x * x))])}
    if name == "NESTED_INIT":
        i, j, k = np.meshgrid(*(np.arange(e) for e in args["array"].shape), indexing="ij")
        return {"array": 0.00000001 * i * j * k}
    if name == "EOS":
        return _eos_reference(args)
    return KERNELS[name].reference(args)


