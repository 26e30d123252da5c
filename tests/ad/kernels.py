"""The kernel table: kernels covering every derivative rule and language construct, with inputs.

Each ``Spec`` row is run by ``test_kernels.py`` through ``check_grads`` (JVP vs finite
differences, the inner-product identity between ``ado.jvp`` and ``ado.vjp``, and, where
``width`` is set, vector mode against width-1 runs). Inputs keep away from kinks and domain
edges so that finite differences are meaningful; sizes are small so the table runs fast.
"""
from __future__ import annotations

import numpy as np

import adoffload as ado
from adoffload import In, InOut, Out, f32, f64, i32, i64
from benchmarks.kernels import rajaperf

from .check_grads import Spec

N = 6


def U(r: np.random.Generator, shape, lo: float = 0.2, hi: float = 1.0, dtype=np.float64) -> np.ndarray:
    return r.uniform(lo, hi, shape).astype(dtype)


# ============================================================================ arithmetic

@ado.kernel
def arith_basic(a: f64, b: f64, x: In[f64], y: Out[f64]):
    i = ado.tid()
    y[i] = (a * x[i] - b) / (x[i] + 2.5) + (-x[i]) * b - a


@ado.kernel
def arith_div(x: In[f64], z: In[f64], y: Out[f64]):
    i = ado.tid()
    y[i] = x[i] / z[i] - z[i] / (x[i] * x[i]) + 1.0 / (x[i] + z[i])


@ado.kernel
def frem_const(x: In[f64], y: Out[f64]):
    i = ado.tid()
    y[i] = (x[i] * 3.0) % 1.7 + x[i] * x[i]


@ado.kernel
def frem_active(x: In[f64], m: In[f64], y: Out[f64]):
    i = ado.tid()
    y[i] = x[i] % m[i]


@ado.kernel
def cast_f32_f64(x: In[f32], s: f64, y: Out[f64], z: Out[f32]):
    i = ado.tid()
    wide = ado.f64(x[i]) * s
    y[i] = wide * wide + ado.f64(x[i])
    z[i] = ado.f32(ado.sin(wide)) * x[i]


@ado.kernel
def int_to_float(x: In[f64], n: i64, y: Out[f64]):
    i = ado.tid()
    k = int(x[i] * 4.0)                 # float -> int -> float: derivative zero
    y[i] = x[i] * float(i + 1) + float(n) * x[i] * x[i] + float(k) * x[i]


@ado.kernel
def select_expr(x: In[f64], c: f64, y: Out[f64]):
    i = ado.tid()
    y[i] = x[i] * x[i] * c if x[i] > 0.0 else -3.0 * x[i] + c


@ado.kernel
def phi_branches(x: In[f64], y: Out[f64]):
    i = ado.tid()
    v = x[i]
    if v < -0.5:
        r = v * v
    elif v < 0.5:
        r = ado.sin(v) * 2.0
        r = r + v
    else:
        r = ado.exp(-v)
    y[i] = r * v


@ado.kernel
def early_return(n: i64, x: In[f64], y: Out[f64]):
    i = ado.tid()
    if i >= n:
        return
    y[i] = x[i] * x[i] * x[i]


@ado.kernel
def inout_update(y: InOut[f64], x: In[f64]):
    i = ado.tid()
    y[i] = y[i] * ado.sin(x[i]) + x[i] * y[i] * y[i]


@ado.kernel
def overwrite_after_read(y: InOut[f64], x: In[f64]):
    i = ado.tid()
    t = y[i] * x[i]
    y[i] = t * t
    y[i] = y[i] + ado.cos(y[i]) * x[i]


# ============================================================================ arrays, grids

@ado.kernel
def transpose_2d(x: In[f64, 2], y: Out[f64, 2]):
    i, j = ado.tid()
    y[i, j] = x[i, j] * x[j, i] + x[i, j]


@ado.kernel
def matvec_2d_atomic(a: In[f64, 2], v: In[f64], out: InOut[f64]):
    i, j = ado.tid()
    ado.atomic_add(out, i, a[i, j] * v[j])


@ado.kernel
def gep_3d(x: In[f64, 3], w: In[f64, 2], y: Out[f64]):
    i = ado.tid()
    acc = 0.0
    for j in range(x.shape[1]):
        for k in range(x.shape[2]):
            acc += x[i, j, k] * w[j, k]
    y[i] = acc * acc


@ado.kernel
def grid_3d(x: In[f64, 3], s: f64, y: Out[f64, 3]):
    i, j, k = ado.tid()
    y[i, j, k] = x[i, j, k] * s + x[k, j, i] * x[i, j, k]


# ============================================================================ atomics, gathers, scatters

@ado.kernel
def atomic_energy(x: In[f64], k: f64, e: InOut[f64]):
    i = ado.tid()
    ado.atomic_add(e, 0, 0.5 * k * x[i] * x[i])


@ado.kernel
def atomic_scatter(x: In[f64], idx: In[i64], w: f64, out: InOut[f64]):
    i = ado.tid()
    ado.atomic_add(out, idx[i], w * x[i] * x[i])


@ado.kernel
def gather_repeated(x: In[f64], idx: In[i64], y: Out[f64]):
    i = ado.tid()
    y[i] = x[idx[i]] * x[idx[i]] + x[i]


@ado.kernel
def scatter_permutation(x: In[f64], perm: In[i64], y: Out[f64]):
    i = ado.tid()
    y[perm[i]] = ado.exp(x[i]) * x[perm[i]]


# ============================================================================ math, one rule each

@ado.kernel
def m_sqrt(s: f64, x: In[f64], y: Out[f64]):
    i = ado.tid()
    y[i] = ado.sqrt(s * x[i])


@ado.kernel
def m_rsqrt(s: f64, x: In[f64], y: Out[f64]):
    i = ado.tid()
    y[i] = ado.rsqrt(s * x[i])


@ado.kernel
def m_exp(s: f64, x: In[f64], y: Out[f64]):
    i = ado.tid()
    y[i] = ado.exp(s * x[i])


@ado.kernel
def m_exp2(s: f64, x: In[f64], y: Out[f64]):
    i = ado.tid()
    y[i] = ado.exp2(s * x[i])


@ado.kernel
def m_log(s: f64, x: In[f64], y: Out[f64]):
    i = ado.tid()
    y[i] = ado.log(s * x[i])


@ado.kernel
def m_log2(s: f64, x: In[f64], y: Out[f64]):
    i = ado.tid()
    y[i] = ado.log2(s * x[i])


@ado.kernel
def m_log1p(s: f64, x: In[f64], y: Out[f64]):
    i = ado.tid()
    y[i] = ado.log1p(s * x[i])


@ado.kernel
def m_expm1(s: f64, x: In[f64], y: Out[f64]):
    i = ado.tid()
    y[i] = ado.expm1(s * x[i])


@ado.kernel
def m_sin(s: f64, x: In[f64], y: Out[f64]):
    i = ado.tid()
    y[i] = ado.sin(s * x[i])


@ado.kernel
def m_cos(s: f64, x: In[f64], y: Out[f64]):
    i = ado.tid()
    y[i] = ado.cos(s * x[i])


@ado.kernel
def m_tan(s: f64, x: In[f64], y: Out[f64]):
    i = ado.tid()
    y[i] = ado.tan(s * x[i])


@ado.kernel
def m_tanh(s: f64, x: In[f64], y: Out[f64]):
    i = ado.tid()
    y[i] = ado.tanh(s * x[i])


@ado.kernel
def m_sinh(s: f64, x: In[f64], y: Out[f64]):
    i = ado.tid()
    y[i] = ado.sinh(s * x[i])


@ado.kernel
def m_cosh(s: f64, x: In[f64], y: Out[f64]):
    i = ado.tid()
    y[i] = ado.cosh(s * x[i])


@ado.kernel
def m_asin(s: f64, x: In[f64], y: Out[f64]):
    i = ado.tid()
    y[i] = ado.asin(s * x[i])


@ado.kernel
def m_acos(s: f64, x: In[f64], y: Out[f64]):
    i = ado.tid()
    y[i] = ado.acos(s * x[i])


@ado.kernel
def m_atan(s: f64, x: In[f64], y: Out[f64]):
    i = ado.tid()
    y[i] = ado.atan(s * x[i])


@ado.kernel
def m_atan2(s: f64, x: In[f64], z: In[f64], y: Out[f64]):
    i = ado.tid()
    y[i] = ado.atan2(s * x[i], z[i])


@ado.kernel
def m_pow_float(x: In[f64], p: In[f64], y: Out[f64]):
    i = ado.tid()
    y[i] = x[i] ** p[i] + ado.pow(x[i], 1.5)


@ado.kernel
def m_pow_int(s: f64, x: In[f64], n: i32, y: Out[f64]):
    i = ado.tid()
    v = s * x[i]
    y[i] = v ** 3 + v ** -2 + ado.pow(v, float(n)) + v ** 0.5


@ado.kernel
def m_abs(s: f64, x: In[f64], y: Out[f64]):
    i = ado.tid()
    y[i] = ado.abs(s * x[i]) + abs(x[i] - 0.1)


@ado.kernel
def m_fma(s: f64, x: In[f64], z: In[f64], y: Out[f64]):
    i = ado.tid()
    y[i] = ado.fma(s * x[i], z[i], x[i] * x[i])


@ado.kernel
def m_min_max(s: f64, x: In[f64], z: In[f64], y: Out[f64]):
    i = ado.tid()
    y[i] = ado.min(s * x[i], z[i]) * ado.max(x[i], z[i], 0.5)


@ado.kernel
def m_copysign(s: f64, x: In[f64], z: In[f64], y: Out[f64]):
    i = ado.tid()
    y[i] = ado.copysign(s * x[i], z[i]) + ado.copysign(2.0, x[i]) * x[i]


@ado.kernel
def m_floor_ceil(s: f64, x: In[f64], y: Out[f64]):
    i = ado.tid()
    v = s * x[i] * 5.0
    y[i] = ado.floor(v) * v + ado.ceil(v) + (v // 1.0)


@ado.kernel
def m_erf(s: f64, x: In[f64], y: Out[f64]):
    i = ado.tid()
    y[i] = ado.erf(s * x[i])


def _math_inputs(lo: float = 0.2, hi: float = 0.9, s: float = 1.1):
    return lambda r: dict(s=s, x=U(r, N, lo, hi), y=np.zeros(N))


def _math_specs() -> list[Spec]:
    unary = [(m_sqrt, 0.2, 2.0), (m_rsqrt, 0.2, 2.0), (m_exp, -1.0, 1.0), (m_exp2, -1.0, 1.0), (m_log, 0.2, 2.0),
             (m_log2, 0.2, 2.0), (m_log1p, -0.5, 1.0), (m_expm1, -1.0, 1.0), (m_sin, -2.0, 2.0),
             (m_cos, -2.0, 2.0), (m_tan, -1.0, 1.0), (m_tanh, -1.5, 1.5), (m_sinh, -1.5, 1.5),
             (m_cosh, -1.5, 1.5), (m_asin, -0.8, 0.8), (m_acos, -0.8, 0.8), (m_atan, -2.0, 2.0),
             (m_abs, -1.0, 1.0), (m_floor_ceil, 0.05, 2.0), (m_erf, -1.5, 1.5)]
    specs = [Spec(k.name, k, _math_inputs(lo, hi, s=0.85), ["s", "x"], N,
                  width=4 if k in (m_sin, m_log, m_abs, m_rsqrt) else None) for k, lo, hi in unary]
    two = lambda lo, hi, zlo, zhi: lambda r: dict(s=0.9, x=U(r, N, lo, hi), z=U(r, N, zlo, zhi),  # noqa: E731
                                                   y=np.zeros(N))
    specs += [
        Spec("m_atan2", m_atan2, two(-1.0, 1.0, -1.0, 1.0), ["s", "x", "z"], N),
        Spec("m_fma", m_fma, two(-1.0, 1.0, -1.0, 1.0), ["s", "x", "z"], N, width=4),
        Spec("m_min_max", m_min_max, two(0.0, 1.0, 0.0, 1.0), ["s", "x", "z"], N),
        Spec("m_copysign", m_copysign, two(-1.0, 1.0, -1.0, 1.0), ["s", "x", "z"], N),
        Spec("m_pow_float", m_pow_float, lambda r: dict(x=U(r, N, 0.3, 2.0), p=U(r, N, -1.5, 2.5), y=np.zeros(N)),
             ["x", "p"], N, width=4),
        Spec("m_pow_int", m_pow_int, lambda r: dict(s=1.2, x=U(r, N, 0.3, 2.0), n=4, y=np.zeros(N)), ["s", "x"], N),
    ]
    return specs


# ============================================================================ chemistry: pair potentials

@ado.kernel
def lj_all_pairs(pos: In[f64, 2], sigma: f64, eps: f64, e: Out[f64]):
    i = ado.tid()
    acc = 0.0
    for j in range(pos.shape[0]):
        if j != i:
            dx = pos[i, 0] - pos[j, 0]
            dy = pos[i, 1] - pos[j, 1]
            dz = pos[i, 2] - pos[j, 2]
            r2 = dx * dx + dy * dy + dz * dz
            s6 = (sigma * sigma / r2) ** 3
            acc += 2.0 * eps * (s6 * s6 - s6)
    e[i] = acc


@ado.kernel
def lj_total_energy(pos: In[f64, 2], sigma: f64, eps: f64, energy: InOut[f64]):
    i = ado.tid()
    for j in range(pos.shape[0]):
        if j != i:
            r2 = 0.0
            for d in range(3):
                r2 += (pos[i, d] - pos[j, d]) ** 2
            s6 = (sigma * sigma / r2) ** 3
            ado.atomic_add(energy, 0, 2.0 * eps * (s6 * s6 - s6))


@ado.kernel
def lj_neighbor_list(pos: In[f64, 2], nbr: In[i32, 2], sigma: f64, eps: f64, e: Out[f64]):
    i = ado.tid()
    acc = 0.0
    for k in range(nbr.shape[1]):
        j = nbr[i, k]
        if j >= 0:
            r2 = 0.0
            for d in range(3):
                diff = pos[i, d] - pos[j, d]
                r2 += diff * diff
            s2 = sigma * sigma / r2
            s6 = s2 * s2 * s2
            acc += 2.0 * eps * (s6 * s6 - s6)
    e[i] = acc


@ado.kernel
def morse_all_pairs(pos: In[f64, 2], de: f64, a: f64, r0: f64, e: Out[f64]):
    i = ado.tid()
    acc = 0.0
    for j in range(pos.shape[0]):
        if j != i:
            dx = pos[i, 0] - pos[j, 0]
            dy = pos[i, 1] - pos[j, 1]
            dz = pos[i, 2] - pos[j, 2]
            r = ado.sqrt(dx * dx + dy * dy + dz * dz)
            t = 1.0 - ado.exp(-a * (r - r0))
            acc += 0.5 * de * t * t
    e[i] = acc


@ado.kernel
def morse_neighbor_energy(pos: In[f64, 2], nbr: In[i64, 2], de: f64, a: f64, r0: f64, energy: InOut[f64]):
    i = ado.tid()
    for k in range(nbr.shape[1]):
        j = nbr[i, k]
        if j < 0:
            continue
        r2 = 0.0
        for d in range(3):
            r2 += (pos[i, d] - pos[j, d]) * (pos[i, d] - pos[j, d])
        t = 1.0 - ado.exp(-a * (ado.sqrt(r2) - r0))
        ado.atomic_add(energy, 0, 0.5 * de * t * t)


@ado.kernel
def lj_f32(pos: In[f32, 2], sigma: f32, e: Out[f32]):
    i = ado.tid()
    acc = ado.f32(0.0)
    for j in range(pos.shape[0]):
        if j != i:
            r2 = ado.f32(0.0)
            for d in range(3):
                diff = pos[i, d] - pos[j, d]
                r2 += diff * diff
            s6 = (sigma * sigma / r2) ** 3
            acc += ado.f32(2.0) * (s6 * s6 - s6)
    e[i] = acc


def _lattice(r: np.random.Generator, n: int = 5, dtype=np.float64) -> np.ndarray:
    """n atoms near a line of spacing 1.1 (no two too close), jittered."""
    base = np.stack([np.arange(n) * 1.1, np.zeros(n), np.zeros(n)], axis=1)
    return (base + r.uniform(-0.15, 0.15, (n, 3))).astype(dtype)


def _neighbors(n: int, width: int, dtype) -> np.ndarray:
    """Each atom's neighbors within 2 positions, padded with -1."""
    nbr = -np.ones((n, width), dtype)
    for i in range(n):
        js = [j for j in range(n) if j != i and abs(j - i) <= 2][:width]
        nbr[i, :len(js)] = js
    return nbr


def _chem_specs() -> list[Spec]:
    n = 5
    return [
        Spec("lj_all_pairs", lj_all_pairs, lambda r: dict(pos=_lattice(r, n), sigma=1.0, eps=0.7, e=np.zeros(n)),
             ["pos", "sigma", "eps"], n, width=4),
        Spec("lj_total_energy", lj_total_energy,
             lambda r: dict(pos=_lattice(r, n), sigma=1.0, eps=0.7, energy=np.zeros(1)), ["pos", "sigma", "eps"], n),
        Spec("lj_neighbor_list", lj_neighbor_list,
             lambda r: dict(pos=_lattice(r, n), nbr=_neighbors(n, 4, np.int32), sigma=1.0, eps=0.7, e=np.zeros(n)),
             ["pos", "sigma", "eps"], n, width=4),
        Spec("morse_all_pairs", morse_all_pairs,
             lambda r: dict(pos=_lattice(r, n), de=1.3, a=1.1, r0=1.0, e=np.zeros(n)), ["pos", "de", "a", "r0"], n),
        Spec("morse_neighbor_energy", morse_neighbor_energy,
             lambda r: dict(pos=_lattice(r, n), nbr=_neighbors(n, 4, np.int64), de=1.3, a=1.1, r0=1.0,
                            energy=np.zeros(1)), ["pos", "de", "a", "r0"], n),
        Spec("lj_f32", lj_f32, lambda r: dict(pos=_lattice(r, n, np.float32), sigma=1.0, e=np.zeros(n, np.float32)),
             ["pos", "sigma"], n, rtol=2e-2, atol=2e-2, h=1e-2, ip_rtol=1e-4),
    ]


# ============================================================================ loops

@ado.kernel
def newton_sqrt(x: In[f64], y: Out[f64]):
    i = ado.tid()
    a = x[i]
    r = 1.0 + a * 0.5
    steps = 0
    while ado.abs(r * r - a) > 1e-13 * a and steps < 60:
        r = 0.5 * (r + a / r)
        steps += 1
    y[i] = r


@ado.kernel
def newton_cbrt(x: In[f64], s: f64, y: Out[f64]):
    i = ado.tid()
    a = x[i] * s
    r = a
    delta = 1.0
    while ado.abs(delta) > 1e-14:
        delta = (r * r * r - a) / (3.0 * r * r)
        r = r - delta
    y[i] = r


@ado.kernel
def halving_loop(x: In[f64], eps: f64, y: Out[f64]):
    i = ado.tid()
    v = x[i]
    acc = 0.0
    while v > eps:
        acc += ado.sin(v) * v
        v = v * 0.5
    y[i] = acc + v


@ado.kernel
def loop_carried_product(x: In[f64, 2], y: Out[f64]):
    i = ado.tid()
    p = 1.0
    for k in range(x.shape[1]):
        p = p * x[i, k] + ado.sin(p)
    y[i] = p


@ado.kernel
def runtime_trip_count(x: In[f64], counts: In[i32], y: Out[f64]):
    i = ado.tid()
    acc = x[i]
    for k in range(counts[i]):
        acc = acc * ado.cos(acc) + x[i]
    y[i] = acc


@ado.kernel
def nested_loops(x: In[f64, 2], w: In[f64], y: Out[f64]):
    i = ado.tid()
    acc = 0.0
    for j in range(x.shape[1]):
        inner = 0.0
        for k in range(j + 1):
            inner = inner * w[k] + x[i, k]
        acc += inner * inner
    y[i] = acc


@ado.kernel
def break_continue(x: In[f64, 2], limit: f64, y: Out[f64]):
    i = ado.tid()
    acc = 0.0
    for k in range(x.shape[1]):
        if k % 2 == 1:
            continue
        acc += x[i, k] * x[i, k]
        if acc > limit:
            break
    y[i] = acc * x[i, 0]


@ado.kernel
def while_break(x: In[f64], y: Out[f64]):
    i = ado.tid()
    v = x[i]
    n = 0
    while True:
        v = v * v + 0.1 * v
        n += 1
        if v > 4.0 or n > 20:
            break
    y[i] = v


@ado.kernel
def loop_descending(x: In[f64, 2], y: Out[f64]):
    i = ado.tid()
    acc = 0.0
    for k in range(x.shape[1] - 1, -1, -1):
        acc = ado.tanh(acc + x[i, k])
    y[i] = acc


def _loop_specs() -> list[Spec]:
    m = 4
    return [
        Spec("newton_sqrt", newton_sqrt, lambda r: dict(x=U(r, N, 0.5, 4.0), y=np.zeros(N)), ["x"], N, width=4),
        Spec("newton_cbrt", newton_cbrt, lambda r: dict(x=U(r, N, 0.5, 4.0), s=1.3, y=np.zeros(N)), ["x", "s"], N),
        Spec("halving_loop", halving_loop, lambda r: dict(x=U(r, N, 0.3, 3.0), eps=0.01, y=np.zeros(N)), ["x"], N),
        Spec("loop_carried_product", loop_carried_product, lambda r: dict(x=U(r, (N, m), 0.5, 1.5), y=np.zeros(N)),
             ["x"], N, width=4),
        Spec("runtime_trip_count", runtime_trip_count,
             lambda r: dict(x=U(r, N, 0.1, 0.9), counts=np.array([0, 1, 2, 3, 5, 2][:N], np.int32), y=np.zeros(N)),
             ["x"], N),
        Spec("nested_loops", nested_loops, lambda r: dict(x=U(r, (N, m), -1, 1), w=U(r, m, 0.5, 1.0), y=np.zeros(N)),
             ["x", "w"], N),
        Spec("break_continue", break_continue,
             lambda r: dict(x=U(r, (N, 6), 0.3, 1.0), limit=0.9, y=np.zeros(N)), ["x"], N),
        Spec("while_break", while_break, lambda r: dict(x=U(r, N, 0.6, 1.7), y=np.zeros(N)), ["x"], N),
        Spec("loop_descending", loop_descending, lambda r: dict(x=U(r, (N, m), -1, 1), y=np.zeros(N)), ["x"], N),
    ]


# ============================================================================ helpers, local arrays, custom

@ado.func
def _sq(v):
    return v * v


@ado.func
def _polar(a, b):
    return ado.sqrt(_sq(a) + _sq(b)), ado.atan2(b, a)


@ado.func
def _clamp_soft(v, lo):
    if v < lo:
        return lo + 0.5 * (v - lo) * (v - lo)
    return v


@ado.kernel
def helpers_tuple(x: In[f64], z: In[f64], r: Out[f64], phi: Out[f64]):
    i = ado.tid()
    r[i], phi[i] = _polar(x[i], z[i])
    r[i] = r[i] + _sq(_clamp_soft(x[i], 0.0))


def _softplus_jvp(x, dx):
    return dx / (1.0 + ado.exp(-x))


def _softplus_vjp(x, dy):
    return dy / (1.0 + ado.exp(-x))


@ado.func(jvp=_softplus_jvp, vjp=_softplus_vjp)
def softplus(x):
    return ado.log1p(ado.exp(x))


def _rotate_jvp(a, b, t, da, db, dt):
    c, s = ado.cos(t), ado.sin(t)
    return c * da - s * db - (s * a + c * b) * dt, s * da + c * db + (c * a - s * b) * dt


def _rotate_vjp(a, b, t, du, dv):
    c, s = ado.cos(t), ado.sin(t)
    return c * du + s * dv, -s * du + c * dv, -(s * a + c * b) * du + (c * a - s * b) * dv


@ado.func(jvp=_rotate_jvp, vjp=_rotate_vjp)
def rotate(a, b, t):
    return ado.cos(t) * a - ado.sin(t) * b, ado.sin(t) * a + ado.cos(t) * b


def _cube_vjp(x, dy):
    return 3.0 * x * x * dy


@ado.func(vjp=_cube_vjp)
def cube_vjp_only(x):
    return x * x * x


@ado.kernel
def custom_derivatives(x: In[f64], t: f64, y: Out[f64], u: Out[f64]):
    i = ado.tid()
    a, b = rotate(x[i], softplus(x[i]), t)
    y[i] = a * b + cube_vjp_only(x[i])
    u[i] = softplus(2.0 * x[i]) * t


@ado.kernel
def custom_f32(x: In[f32], y: Out[f32]):
    i = ado.tid()
    y[i] = softplus(x[i]) * x[i]


@ado.kernel
def local_array(x: In[f64, 2], y: Out[f64]):
    i = ado.tid()
    t = ado.zeros(4, ado.f64)
    for k in range(4):
        t[k] = x[i, k] * x[i, k]
    for k in range(1, 4):
        t[k] += t[k - 1] * 0.5
    y[i] = t[3] + t[0] * t[2]


@ado.kernel
def local_array_2d(x: In[f64], y: Out[f64, 2]):
    i = ado.tid()
    m = ado.zeros((2, 2), ado.f64)
    m[0, 0] = ado.cos(x[i])
    m[0, 1] = -ado.sin(x[i])
    m[1, 0] = ado.sin(x[i])
    m[1, 1] = ado.cos(x[i])
    for r in range(2):
        for c in range(2):
            y[i, r * 2 + c] = m[r, 0] * m[0, c] + m[r, 1] * m[1, c]


def _helper_specs() -> list[Spec]:
    return [
        Spec("helpers_tuple", helpers_tuple,
             lambda r: dict(x=U(r, N, -1, 1), z=U(r, N, 0.3, 1), r=np.zeros(N), phi=np.zeros(N)), ["x", "z"], N,
             width=4),
        Spec("custom_derivatives", custom_derivatives,
             lambda r: dict(x=U(r, N, -1, 1), t=0.4, y=np.zeros(N), u=np.zeros(N)), ["x", "t"], N, width=4),
        Spec("custom_f32", custom_f32, lambda r: dict(x=U(r, N, -1, 1, np.float32), y=np.zeros(N, np.float32)),
             ["x"], N, rtol=5e-3, atol=5e-3, h=1e-2, ip_rtol=1e-5),
        Spec("local_array", local_array, lambda r: dict(x=U(r, (N, 4), -1, 1), y=np.zeros(N)), ["x"], N),
        Spec("local_array_2d", local_array_2d, lambda r: dict(x=U(r, N, -2, 2), y=np.zeros((N, 4))), ["x"], N),
    ]


# ============================================================================ f32 kernels

@ado.kernel
def f32_math(x: In[f32], a: f32, y: Out[f32]):
    i = ado.tid()
    y[i] = ado.exp(-a * x[i]) * ado.sin(x[i]) + ado.sqrt(x[i] * x[i] + 1.0) / (a + x[i])


@ado.kernel
def f32_reduction(x: In[f32], total: InOut[f32]):
    i = ado.tid()
    ado.atomic_add(total, 0, ado.tanh(x[i]) * x[i])


@ado.kernel
def f32_mixed(x: In[f32], w: In[f64], y: Out[f64]):
    i = ado.tid()
    y[i] = x[i] * w[i] + ado.log(x[i]) * ado.f64(2.0)


def _f32_specs() -> list[Spec]:
    loose = dict(rtol=5e-3, atol=5e-3, h=1e-2, ip_rtol=1e-5)
    return [
        Spec("f32_math", f32_math, lambda r: dict(x=U(r, N, 0.2, 1, np.float32), a=0.7, y=np.zeros(N, np.float32)),
             ["x", "a"], N, width=4, **loose),
        Spec("f32_reduction", f32_reduction, lambda r: dict(x=U(r, N, -1, 1, np.float32),
                                                            total=np.zeros(1, np.float32)), ["x"], N, **loose),
        Spec("f32_mixed", f32_mixed, lambda r: dict(x=U(r, N, 0.5, 1.5, np.float32), w=U(r, N), y=np.zeros(N)),
             ["x", "w"], N, **loose),
        Spec("cast_f32_f64", cast_f32_f64, lambda r: dict(x=U(r, N, -1, 1, np.float32), s=1.3, y=np.zeros(N),
                                                          z=np.zeros(N, np.float32)), ["x", "s"], N, **loose),
    ]


# ============================================================================ RAJAPerf

RAJAPERF_SIZE = 8


def _rajaperf_specs() -> list[Spec]:
    specs = []
    for case in rajaperf.CASES:
        if not case.wrt:
            continue            # no float inputs (nested_init, reduce3_int)
        make = case.make
        specs.append(Spec(f"rajaperf_{case.name}", case.kernel,
                          lambda r, make=make: make(RAJAPERF_SIZE, r), list(case.wrt), case.grid(RAJAPERF_SIZE),
                          width=4 if case.name in ("lcals_eos", "lcals_diff_predict", "basic_if_quad") else None))
    return specs


# ============================================================================ the table

def _core_specs() -> list[Spec]:
    return [
        Spec("arith_basic", arith_basic, lambda r: dict(a=0.7, b=-0.4, x=U(r, N, -1, 1), y=np.zeros(N)),
             ["a", "b", "x"], N, width=4),
        Spec("arith_div", arith_div, lambda r: dict(x=U(r, N, 0.5, 2), z=U(r, N, 0.5, 2), y=np.zeros(N)),
             ["x", "z"], N),
        Spec("frem_const", frem_const, lambda r: dict(x=np.array([0.1, 0.4, 0.9, 1.3, 1.6, 2.2]), y=np.zeros(N)),
             ["x"], N),
        Spec("frem_active", frem_active,
             lambda r: dict(x=np.array([3.1, -2.3, 5.5, 0.4, -0.7, 7.9]), m=np.array([1.3, 0.9, -2.0, 0.7, 2.1, 2.2]),
                            y=np.zeros(N)), ["x", "m"], N),
        Spec("int_to_float", int_to_float,
             lambda r: dict(x=np.array([0.1, 0.4, 0.6, 0.9, 1.1, 1.4]), n=3, y=np.zeros(N)), ["x"], N),
        Spec("select_expr", select_expr, lambda r: dict(x=np.array([-0.9, -0.3, 0.2, 0.5, 0.8, -0.6]), c=1.5,
                                                        y=np.zeros(N)), ["x", "c"], N, width=4),
        Spec("phi_branches", phi_branches, lambda r: dict(x=np.array([-0.9, -0.7, -0.2, 0.1, 0.7, 1.3]),
                                                          y=np.zeros(N)), ["x"], N, width=4),
        Spec("early_return", early_return, lambda r: dict(n=4, x=U(r, N), y=np.zeros(N)), ["x"], N),
        Spec("inout_update", inout_update, lambda r: dict(y=U(r, N, -1, 1), x=U(r, N, -1, 1)), ["y", "x"], N,
             width=4),
        Spec("inout_not_wrt", inout_update, lambda r: dict(y=U(r, N, -1, 1), x=U(r, N, -1, 1)), ["x"], N),
        Spec("overwrite_after_read", overwrite_after_read, lambda r: dict(y=U(r, N, -1, 1), x=U(r, N, -1, 1)),
             ["y", "x"], N),
        Spec("transpose_2d", transpose_2d, lambda r: dict(x=U(r, (4, 4), -1, 1), y=np.zeros((4, 4))), ["x"], (4, 4),
             width=4),
        Spec("matvec_2d_atomic", matvec_2d_atomic,
             lambda r: dict(a=U(r, (3, 5), -1, 1), v=U(r, 5, -1, 1), out=np.zeros(3)), ["a", "v"], (3, 5)),
        Spec("gep_3d", gep_3d, lambda r: dict(x=U(r, (4, 3, 2), -1, 1), w=U(r, (3, 2), -1, 1), y=np.zeros(4)),
             ["x", "w"], 4),
        Spec("grid_3d", grid_3d, lambda r: dict(x=U(r, (3, 3, 3), -1, 1), s=0.6, y=np.zeros((3, 3, 3))),
             ["x", "s"], (3, 3, 3)),
        Spec("atomic_energy", atomic_energy, lambda r: dict(x=U(r, N, -1, 1), k=2.5, e=np.zeros(1)), ["x", "k"], N,
             width=4),
        Spec("atomic_scatter", atomic_scatter,
             lambda r: dict(x=U(r, N, -1, 1), idx=np.array([0, 2, 0, 1, 2, 0]), w=0.8, out=np.zeros(3)),
             ["x", "w"], N, width=4),
        Spec("gather_repeated", gather_repeated,
             lambda r: dict(x=U(r, N, -1, 1), idx=np.array([3, 3, 0, 5, 3, 0]), y=np.zeros(N)), ["x"], N),
        Spec("scatter_permutation", scatter_permutation,
             lambda r: dict(x=U(r, N, -1, 1), perm=np.array([2, 0, 5, 1, 4, 3]), y=np.zeros(N)), ["x"], N),
    ]


def all_specs() -> list[Spec]:
    return (_core_specs() + _math_specs() + _chem_specs() + _loop_specs() + _helper_specs() + _f32_specs()
            + _rajaperf_specs())


SPECS = all_specs()
