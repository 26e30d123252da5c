"""The RAJAPerf subset of shared/BENCHMARKS.md in the kernel language, with their inputs.

Parameter order follows the hand-written CUDA baselines in ``cuda/rajaperf.cu`` so that
one argument list drives both. Each ``Case`` also carries the ``jax.numpy`` program of the
same math and the bytes a perfect implementation moves (for bandwidth figures).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import numpy as np

import adoffload as ado

F64 = ado.f64


@ado.kernel
def stream_add(a: ado.In[F64], b: ado.In[F64], c: ado.Out[F64]):
    i = ado.tid()
    c[i] = a[i] + b[i]


@ado.kernel
def stream_copy(a: ado.In[F64], c: ado.Out[F64]):
    i = ado.tid()
    c[i] = a[i]


@ado.kernel
def stream_mul(b: ado.Out[F64], c: ado.In[F64], alpha: F64):
    i = ado.tid()
    b[i] = alpha * c[i]


@ado.kernel
def stream_triad(a: ado.Out[F64], b: ado.In[F64], c: ado.In[F64], alpha: F64):
    i = ado.tid()
    a[i] = b[i] + alpha * c[i]


@ado.kernel
def stream_dot(a: ado.In[F64], b: ado.In[F64], dot: ado.InOut[F64]):
    i = ado.tid()
    ado.atomic_add(dot, 0, a[i] * b[i])


@ado.kernel
def basic_daxpy(y: ado.InOut[F64], x: ado.In[F64], a: F64):
    i = ado.tid()
    y[i] += a * x[i]


@ado.kernel
def basic_init3(out1: ado.Out[F64], out2: ado.Out[F64], out3: ado.Out[F64], in1: ado.In[F64], in2: ado.In[F64]):
    i = ado.tid()
    v = -in1[i] - in2[i]
    out1[i] = v
    out2[i] = v
    out3[i] = v


@ado.kernel
def basic_muladdsub(out1: ado.Out[F64], out2: ado.Out[F64], out3: ado.Out[F64], in1: ado.In[F64], in2: ado.In[F64]):
    i = ado.tid()
    out1[i] = in1[i] * in2[i]
    out2[i] = in1[i] + in2[i]
    out3[i] = in1[i] - in2[i]


@ado.kernel
def basic_if_quad(a: ado.In[F64], b: ado.In[F64], c: ado.In[F64], x1: ado.Out[F64], x2: ado.Out[F64]):
    i = ado.tid()
    s = b[i] * b[i] - 4.0 * a[i] * c[i]
    if s >= 0.0:
        s = ado.sqrt(s)
        x2[i] = (-b[i] + s) / (2.0 * a[i])
        x1[i] = (-b[i] - s) / (2.0 * a[i])
    else:
        x2[i] = 0.0
        x1[i] = 0.0


@ado.kernel
def basic_nested_init(arr: ado.Out[F64], ni: ado.i64, nj: ado.i64, nk: ado.i64):
    k, j, i = ado.tid()
    arr[i + ni * (j + nj * k)] = 0.00000001 * float(i) * float(j) * float(k)


@ado.kernel
def basic_pi_reduce(dx: F64, pi: ado.InOut[F64]):
    i = ado.tid()
    x = (float(i) + 0.5) * dx
    ado.atomic_add(pi, 0, dx / (1.0 + x * x))


@ado.kernel
def basic_trap_int(x0: F64, xp: F64, y: F64, yp: F64, h: F64, sumx: ado.InOut[F64]):
    i = ado.tid()
    x = x0 + float(i) * h
    ado.atomic_add(sumx, 0, 1.0 / ado.sqrt((x - xp) * (x - xp) + (y - yp) * (y - yp)))


@ado.kernel
def basic_trap_int_rsqrt(x0: F64, xp: F64, y: F64, yp: F64, h: F64, sumx: ado.InOut[F64]):
    """basic_trap_int asking for the device's reciprocal square root (not RAJAPerf's; see _trap_jnp)."""
    i = ado.tid()
    x = x0 + float(i) * h
    ado.atomic_add(sumx, 0, ado.rsqrt((x - xp) * (x - xp) + (y - yp) * (y - yp)))


@ado.kernel
def basic_reduce3_int(vec: ado.In[ado.i32], vsum: ado.InOut[ado.i64], vmin: ado.InOut[ado.i32],
                      vmax: ado.InOut[ado.i32]):
    i = ado.tid()
    v = vec[i]
    ado.atomic_add(vsum, 0, ado.i64(v))
    ado.atomic_min(vmin, 0, v)
    ado.atomic_max(vmax, 0, v)


@ado.kernel
def lcals_hydro_1d(x: ado.Out[F64], y: ado.In[F64], z: ado.In[F64], q: F64, r: F64, t: F64):
    i = ado.tid()
    x[i] = q + y[i] * (r * z[i + 10] + t * z[i + 11])


@ado.kernel
def lcals_eos(x: ado.Out[F64], y: ado.In[F64], z: ado.In[F64], u: ado.In[F64], q: F64, r: F64, t: F64):
    i = ado.tid()
    x[i] = u[i] + r * (z[i] + r * y[i]) + t * (u[i + 3] + r * (u[i + 2] + r * u[i + 1])
                                               + t * (u[i + 6] + q * (u[i + 5] + q * u[i + 4])))


@ado.kernel
def lcals_planckian(x: ado.In[F64], y: ado.Out[F64], u: ado.In[F64], v: ado.In[F64], w: ado.Out[F64]):
    i = ado.tid()
    yy = u[i] / v[i]
    y[i] = yy
    w[i] = x[i] / (ado.exp(yy) - 1.0)


@ado.kernel
def lcals_first_diff(x: ado.Out[F64], y: ado.In[F64]):
    i = ado.tid()
    x[i] = y[i + 1] - y[i]


@ado.kernel
def lcals_diff_predict(px: ado.InOut[F64], cx: ado.In[F64], off: ado.i64):
    i = ado.tid()
    ar = cx[i + off * 4]
    br = ar - px[i + off * 4]
    px[i + off * 4] = ar
    cr = br - px[i + off * 5]
    px[i + off * 5] = br
    ar = cr - px[i + off * 6]
    px[i + off * 6] = cr
    br = ar - px[i + off * 7]
    px[i + off * 7] = ar
    cr = br - px[i + off * 8]
    px[i + off * 8] = br
    ar = cr - px[i + off * 9]
    px[i + off * 9] = cr
    br = ar - px[i + off * 10]
    px[i + off * 10] = ar
    cr = br - px[i + off * 11]
    px[i + off * 11] = br
    px[i + off * 13] = cr - px[i + off * 12]
    px[i + off * 12] = cr


# ----------------------------------------------------------------------------- cases

@dataclass
class Case:
    """One benchmark kernel: how to make its arguments for size n, and its references."""
    kernel: object
    make: Callable[[int, np.random.Generator], dict]   # parameter name -> numpy array / scalar
    grid: Callable[[int], tuple]
    numpy: Callable[[dict], dict]                      # reference: parameter name -> expected array
    jnp: Callable | None = None                        # (inputs dict + static "n") -> outputs, in jax.numpy
    bytes_moved: Callable[[int], int] = lambda n: 0
    wrt: list = field(default_factory=list)            # float inputs to differentiate
    cuda_block: tuple | None = None                    # CUDA launch shape override (nested_init)

    @property
    def name(self) -> str:
        return self.kernel.name


def _vec(rng, n, lo=0.1, hi=1.0):
    return rng.uniform(lo, hi, n)


def _cases() -> list[Case]:
    cases = [
        Case(stream_add, lambda n, r: dict(a=_vec(r, n), b=_vec(r, n), c=np.zeros(n)), lambda n: (n,),
             lambda d: dict(c=d["a"] + d["b"]), lambda d, jnp: d["a"] + d["b"], lambda n: 24 * n, ["a", "b"]),
        Case(stream_copy, lambda n, r: dict(a=_vec(r, n), c=np.zeros(n)), lambda n: (n,),
             lambda d: dict(c=d["a"].copy()), lambda d, jnp: d["a"] + 0.0, lambda n: 16 * n, ["a"]),
        Case(stream_mul, lambda n, r: dict(b=np.zeros(n), c=_vec(r, n), alpha=0.5), lambda n: (n,),
             lambda d: dict(b=d["alpha"] * d["c"]), lambda d, jnp: d["alpha"] * d["c"], lambda n: 16 * n,
             ["c", "alpha"]),
        Case(stream_triad, lambda n, r: dict(a=np.zeros(n), b=_vec(r, n), c=_vec(r, n), alpha=0.5), lambda n: (n,),
             lambda d: dict(a=d["b"] + d["alpha"] * d["c"]), lambda d, jnp: d["b"] + d["alpha"] * d["c"],
             lambda n: 24 * n, ["b", "c", "alpha"]),
        Case(stream_dot, lambda n, r: dict(a=_vec(r, n), b=_vec(r, n), dot=np.zeros(1)), lambda n: (n,),
             lambda d: dict(dot=np.array([np.dot(d["a"], d["b"])])), lambda d, jnp: jnp.dot(d["a"], d["b"]),
             lambda n: 16 * n, ["a", "b"]),
        Case(basic_daxpy, lambda n, r: dict(y=_vec(r, n), x=_vec(r, n), a=0.5), lambda n: (n,),
             lambda d: dict(y=d["y"] + d["a"] * d["x"]), lambda d, jnp: d["y"] + d["a"] * d["x"],
             lambda n: 24 * n, ["y", "x", "a"]),
        Case(basic_init3, lambda n, r: dict(out1=np.zeros(n), out2=np.zeros(n), out3=np.zeros(n),
                                            in1=_vec(r, n), in2=_vec(r, n)), lambda n: (n,),
             lambda d: {k: -d["in1"] - d["in2"] for k in ("out1", "out2", "out3")},
             lambda d, jnp: [-d["in1"] - d["in2"]] * 3, lambda n: 40 * n, ["in1", "in2"]),
        Case(basic_muladdsub, lambda n, r: dict(out1=np.zeros(n), out2=np.zeros(n), out3=np.zeros(n),
                                                in1=_vec(r, n), in2=_vec(r, n)), lambda n: (n,),
             lambda d: dict(out1=d["in1"] * d["in2"], out2=d["in1"] + d["in2"], out3=d["in1"] - d["in2"]),
             lambda d, jnp: [d["in1"] * d["in2"], d["in1"] + d["in2"], d["in1"] - d["in2"]],
             lambda n: 40 * n, ["in1", "in2"]),
        Case(basic_if_quad, lambda n, r: dict(a=_vec(r, n), b=_vec(r, n, -2, 2), c=_vec(r, n, -1, 1),
                                              x1=np.zeros(n), x2=np.zeros(n)), lambda n: (n,),
             _if_quad_reference, _if_quad_jnp, lambda n: 40 * n, ["a", "b", "c"]),
        Case(basic_nested_init, lambda n, r: _nested_init_args(n), lambda n: _nested_dims(n)[::-1],
             lambda d: dict(arr=_nested_reference(d)), None, lambda n: 8 * int(np.prod(_nested_dims(n))), []),
        Case(basic_pi_reduce, lambda n, r: dict(dx=1.0 / n, pi=np.zeros(1)), lambda n: (n,),
             lambda d: dict(pi=np.array([np.sum(d["dx"] / (1 + ((np.arange(len_(d)) + 0.5) * d["dx"]) ** 2))])),
             _pi_jnp, lambda n: 0, ["dx"]),
        Case(basic_trap_int, lambda n, r: dict(x0=0.0, xp=0.5, y=0.3, yp=0.1, h=1.0 / n, sumx=np.zeros(1)),
             lambda n: (n,), _trap_reference, _trap_jnp, lambda n: 0, ["x0", "xp", "y", "yp", "h"]),
        Case(basic_trap_int_rsqrt, lambda n, r: dict(x0=0.0, xp=0.5, y=0.3, yp=0.1, h=1.0 / n, sumx=np.zeros(1)),
             lambda n: (n,), _trap_reference, _trap_jnp, lambda n: 0, ["x0", "xp", "y", "yp", "h"]),
        Case(basic_reduce3_int, lambda n, r: dict(vec=r.integers(-1000, 1000, n).astype(np.int32),
                                                  vsum=np.zeros(1, np.int64),
                                                  vmin=np.full(1, np.iinfo(np.int32).max, np.int32),
                                                  vmax=np.full(1, np.iinfo(np.int32).min, np.int32)),
             lambda n: (n,), lambda d: dict(vsum=np.array([d["vec"].sum()]), vmin=np.array([d["vec"].min()]),
                                            vmax=np.array([d["vec"].max()])), _reduce3_jnp, lambda n: 4 * n, []),
        Case(lcals_hydro_1d, lambda n, r: dict(x=np.zeros(n), y=_vec(r, n), z=_vec(r, n + 12), q=0.5, r=0.25, t=0.125),
             lambda n: (n,), lambda d: dict(x=d["q"] + d["y"] * (d["r"] * d["z"][10:-2] + d["t"] * d["z"][11:-1])),
             lambda d, jnp: d["q"] + d["y"] * (d["r"] * d["z"][10:-2] + d["t"] * d["z"][11:-1]),
             lambda n: 24 * n, ["y", "z", "q", "r", "t"]),
        Case(lcals_eos, lambda n, r: dict(x=np.zeros(n), y=_vec(r, n), z=_vec(r, n), u=_vec(r, n + 7),
                                          q=0.5, r=0.25, t=0.125),
             lambda n: (n,), _eos_reference, lambda d, jnp: _eos_math(d, len(d["y"])), lambda n: 32 * n,
             ["y", "z", "u", "q", "r", "t"]),
        Case(lcals_planckian, lambda n, r: dict(x=_vec(r, n), y=np.zeros(n), u=_vec(r, n), v=_vec(r, n, 0.5, 1.0),
                                                w=np.zeros(n)),
             lambda n: (n,), lambda d: dict(y=d["u"] / d["v"], w=d["x"] / (np.exp(d["u"] / d["v"]) - 1.0)),
             lambda d, jnp: [d["u"] / d["v"], d["x"] / (jnp.exp(d["u"] / d["v"]) - 1.0)], lambda n: 40 * n,
             ["x", "u", "v"]),
        Case(lcals_first_diff, lambda n, r: dict(x=np.zeros(n), y=_vec(r, n + 1)), lambda n: (n,),
             lambda d: dict(x=d["y"][1:] - d["y"][:-1]), lambda d, jnp: d["y"][1:] - d["y"][:-1], lambda n: 16 * n,
             ["y"]),
        Case(lcals_diff_predict, lambda n, r: dict(px=_vec(r, 14 * n), cx=_vec(r, 14 * n), off=n), lambda n: (n,),
             _diff_predict_reference, None, lambda n: 8 * 20 * n, ["px", "cx"]),
    ]
    return cases


def len_(d):
    return int(round(1.0 / d["dx"]))


# jax.numpy versions of the reductions. ``d["n"]`` is the grid size, given to them as a static
# Python int (rajaperf.py adds it): the sums over an index range need it as a shape.
def _pi_jnp(d, jnp):
    x = (jnp.arange(d["n"], dtype=jnp.float64) + 0.5) * d["dx"]
    return jnp.sum(d["dx"] / (1.0 + x * x))


# Also the XLA side of basic_trap_int_rsqrt: XLA's algebraic simplifier rewrites 1/sqrt(x) into
# rsqrt(x) (libdevice's __nv_rsqrt on NVIDIA), so this program already is the rsqrt form.
def _trap_jnp(d, jnp):
    x = d["x0"] + jnp.arange(d["n"], dtype=jnp.float64) * d["h"]
    return jnp.sum(1.0 / jnp.sqrt((x - d["xp"]) * (x - d["xp"]) + (d["y"] - d["yp"]) * (d["y"] - d["yp"])))


def _reduce3_jnp(d, jnp):
    return [jnp.sum(d["vec"].astype(jnp.int64)), jnp.min(d["vec"]), jnp.max(d["vec"])]


def _if_quad_reference(d):
    a, b, c = d["a"], d["b"], d["c"]
    s = b * b - 4.0 * a * c
    ok = s >= 0
    root = np.sqrt(np.where(ok, s, 0.0))
    return dict(x1=np.where(ok, (-b - root) / (2 * a), 0.0), x2=np.where(ok, (-b + root) / (2 * a), 0.0))


def _if_quad_jnp(d, jnp):
    a, b, c = d["a"], d["b"], d["c"]
    s = b * b - 4.0 * a * c
    root = jnp.sqrt(jnp.where(s >= 0, s, 0.0))
    return [jnp.where(s >= 0, (-b - root) / (2 * a), 0.0), jnp.where(s >= 0, (-b + root) / (2 * a), 0.0)]


def _nested_dims(n: int) -> tuple[int, int, int]:
    """(ni, nj, nk) with about n elements, ni the long, contiguous axis."""
    nk = max(1, round(n ** (1 / 3) / 4))
    nj = nk
    return max(1, n // (nj * nk)), nj, nk


def _nested_init_args(n):
    ni, nj, nk = _nested_dims(n)
    return dict(arr=np.zeros(ni * nj * nk), ni=ni, nj=nj, nk=nk)


def _nested_reference(d):
    ni, nj, nk = d["ni"], d["nj"], d["nk"]
    k, j, i = np.meshgrid(np.arange(nk), np.arange(nj), np.arange(ni), indexing="ij")
    return (0.00000001 * i * j * k).reshape(-1)


def _trap_reference(d):
    n = int(round(1.0 / d["h"]))
    x = d["x0"] + np.arange(n) * d["h"]
    return dict(sumx=np.array([np.sum(1.0 / np.sqrt((x - d["xp"]) ** 2 + (d["y"] - d["yp"]) ** 2))]))


def _eos_math(d, n):
    u, y, z, q, r, t = d["u"], d["y"], d["z"], d["q"], d["r"], d["t"]
    return (u[:n] + r * (z + r * y) + t * (u[3:n + 3] + r * (u[2:n + 2] + r * u[1:n + 1])
                                          + t * (u[6:n + 6] + q * (u[5:n + 5] + q * u[4:n + 4]))))


def _eos_reference(d):
    return dict(x=_eos_math(d, len(d["y"])))


def _diff_predict_reference(d):
    px, cx, off = d["px"].copy(), d["cx"], d["off"]
    n = off
    s = lambda k: slice(k * off, k * off + n)  # noqa: E731
    ar = cx[s(4)].copy()
    br = ar - px[s(4)]; px[s(4)] = ar
    cr = br - px[s(5)]; px[s(5)] = br
    ar = cr - px[s(6)]; px[s(6)] = cr
    br = ar - px[s(7)]; px[s(7)] = ar
    cr = br - px[s(8)]; px[s(8)] = br
    ar = cr - px[s(9)]; px[s(9)] = cr
    br = ar - px[s(10)]; px[s(10)] = ar
    cr = br - px[s(11)]; px[s(11)] = br
    px[s(13)] = cr - px[s(12)]
    px[s(12)] = cr
    return dict(px=px)


CASES = _cases()
