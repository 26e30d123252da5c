"""The AD kernels of the device-parity suite, each with a numpy reference for its primal.

They cover what the RAJAPerf table (benchmarks/kernels/rajaperf.py) does not: f32 data,
an all-pairs loop with a data-dependent branch, a recurrence with a per-thread trip count
(its adjoint needs a dynamic tape), an atomic reduction, 2-D and 3-D grids, and libm/libdevice math in f32 and f64.
"""
from __future__ import annotations

import math

import numpy as np

import adoffload as ado

F32, F64 = ado.f32, ado.f64


@ado.kernel
def saxpy(a: F32, x: ado.In[F32], y: ado.In[F32], out: ado.Out[F32]):
    i = ado.tid()
    out[i] = a * x[i] + y[i]


@ado.kernel
def lj_all_pairs(pos: ado.In[F64, 2], sigma: F64, epsilon: F64, e: ado.Out[F64]):
    """Per-atom Lennard-Jones energy over every other atom (no cutoff, no box)."""
    i = ado.tid()
    acc = 0.0
    for j in range(pos.shape[0]):
        if j != i:
            dx = pos[j, 0] - pos[i, 0]
            dy = pos[j, 1] - pos[i, 1]
            dz = pos[j, 2] - pos[i, 2]
            s2 = sigma * sigma / (dx * dx + dy * dy + dz * dz)
            s6 = s2 * s2 * s2
            acc = acc + 2.0 * epsilon * (s6 * s6 - s6)
    e[i] = acc


@ado.kernel
def recurrence(x: ado.In[F64], steps: ado.In[ado.i64], out: ado.Out[F64]):
    """A nonlinear recurrence with a per-thread trip count: its adjoint needs a dynamic tape
    holding a different number of records per thread."""
    i = ado.tid()
    acc = x[i]
    for j in range(steps[i]):
        acc = ado.sin(acc) * x[(i + j) % x.shape[0]] + 0.5
    out[i] = acc


@ado.kernel
def sum_of_squares(x: ado.In[F64], w: F64, total: ado.InOut[F64]):
    i = ado.tid()
    ado.atomic_add(total, 0, w * x[i] * x[i])


@ado.kernel
def grid2_scale(x: ado.In[F64, 2], w: ado.In[F64], c: F64, out: ado.Out[F64, 2]):
    i, j = ado.tid()
    out[i, j] = x[i, j] * w[j] * w[j] + c * ado.f64(i - j)


@ado.kernel
def grid3_square(x: ado.In[F32, 3], out: ado.Out[F32, 3]):
    i, j, k = ado.tid()
    out[i, j, k] = x[i, j, k] * x[i, j, k] + ado.f32(i + 2 * j + 3 * k)


@ado.kernel
def math_f32(x: ado.In[F32], y: ado.In[F32], out: ado.Out[F32]):
    i = ado.tid()
    a = ado.exp(-x[i]) * ado.sin(y[i]) + ado.pow(x[i], y[i])
    out[i] = a + ado.erf(x[i] - y[i]) + ado.atan2(y[i], x[i]) * ado.tanh(x[i] * y[i])


@ado.kernel
def math_f64(x: ado.In[F64], y: ado.In[F64], out: ado.Out[F64]):
    i = ado.tid()
    a = ado.exp(-x[i]) * ado.sin(y[i]) + ado.pow(x[i], y[i])
    out[i] = a + ado.erf(x[i] - y[i]) + ado.atan2(y[i], x[i]) * ado.tanh(x[i] * y[i])


# --- references ----------------------------------------------------------------------------

def lj_reference(pos, sigma, epsilon):
    d = pos[None, :, :] - pos[:, None, :]
    r2 = (d * d).sum(-1)
    np.fill_diagonal(r2, np.inf)
    s6 = (sigma * sigma / r2) ** 3
    return (2.0 * epsilon * (s6 * s6 - s6)).sum(1)


def recurrence_reference(x, steps):
    out = x.copy()
    for i in range(len(x)):
        for j in range(steps[i]):
            out[i] = math.sin(out[i]) * x[(i + j) % len(x)] + 0.5
    return out


def math_reference(x, y):
    x64, y64 = x.astype(np.float64), y.astype(np.float64)
    erf = np.vectorize(math.erf)
    value = (np.exp(-x64) * np.sin(y64) + x64 ** y64 + erf(x64 - y64)
             + np.arctan2(y64, x64) * np.tanh(x64 * y64))
    return value.astype(x.dtype)


def lattice(n: int, rng, spacing: float = 1.1) -> np.ndarray:
    """n atoms on a jittered cubic lattice: no two closer than about 0.9 spacing."""
    side = math.ceil(n ** (1 / 3))
    idx = np.stack(np.meshgrid(*(np.arange(side),) * 3, indexing="ij"), -1).reshape(-1, 3)[:n]
    return idx * spacing + rng.uniform(-0.05, 0.05, (n, 3))
