"""Kernels whose adjoints have racing shadow updates, with float64 numpy references.

Each case: a kernel, the ``wrt`` list, ``make(rng, n)`` -> (primal args, seeds of the Out
arrays, grid), and ``reference(args, seeds)`` -> {shadow name: float64 gradient}.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

import adoffload as ado


@ado.kernel
def gather_square(x: ado.In[ado.f32], idx: ado.In[ado.i64], w: ado.f32, y: ado.Out[ado.f32]):
    """y[i] = w x[idx[i]]^2: d_x is a scatter with repeated indices, d_w a uniform sum."""
    i = ado.tid()
    v = x[idx[i]]
    y[i] = w * v * v


@ado.kernel
def pair_energy(pos: ado.In[ado.f32, 2], neighbors: ado.In[ado.i64, 2], sigma: ado.f32, e: ado.Out[ado.f32]):
    """A soft pair energy over a neighbor list: d_pos[j] from many threads (shared), d_sigma uniform."""
    i = ado.tid()
    acc = ado.f32(0.0)
    for k in range(neighbors.shape[1]):
        j = neighbors[i, k]
        if j >= 0:
            dx = pos[j, 0] - pos[i, 0]
            dy = pos[j, 1] - pos[i, 1]
            r2 = dx * dx + dy * dy + ado.f32(1.0)
            acc = acc + sigma / r2
    e[i] = acc


@ado.kernel
def walk(x: ado.In[ado.f32], table: ado.In[ado.i64, 2], lengths: ado.In[ado.i64], y: ado.Out[ado.f32]):
    """A data-dependent number of steps of a nonlinear recurrence (a dynamic tape) whose every
    step reads a shared element of x (a logged contribution inside the loop)."""
    i = ado.tid()
    acc = ado.f32(0.5)
    for k in range(lengths[i]):
        acc = acc * x[table[i, k]] + ado.sin(acc)
    y[i] = acc


@ado.kernel
def rows(x: ado.In[ado.f32, 2], idx: ado.In[ado.i64], w: ado.In[ado.f32], y: ado.Out[ado.f32, 2]):
    """2-D grid: y[i, j] = w[0] x[idx[i], j]: a row gather; w[0] is a uniform address."""
    i, j = ado.tid()
    y[i, j] = w[0] * x[idx[i], j]


@dataclass
class Case:
    name: str
    kernel: object
    wrt: list
    make: Callable
    reference: Callable


def _make_gather(rng, n):
    x = rng.standard_normal(7).astype(np.float32)
    idx = rng.integers(0, 7, n).astype(np.int64)
    y = np.zeros(n, np.float32)
    return [x, idx, np.float32(1.3), y], {"y": rng.standard_normal(n).astype(np.float32)}, n


def _ref_gather(args, seeds):
    x, idx, w, _ = args
    v, dy = x[idx].astype(np.float64), seeds["y"].astype(np.float64)
    dx = np.zeros(x.size)
    np.add.at(dx, idx, 2.0 * float(w) * v * dy)
    return {"d_x": dx, "d_w": np.array([np.sum(v * v * dy)])}


def _make_pairs(rng, n):
    pos = (rng.random((n, 2)) * 4.0).astype(np.float32)
    width = 12
    neighbors = rng.integers(0, n, (n, width)).astype(np.int64)
    neighbors[rng.random((n, width)) < 0.2] = -1
    e = np.zeros(n, np.float32)
    return [pos, neighbors, np.float32(0.7), e], {"e": rng.standard_normal(n).astype(np.float32)}, n


def _ref_pairs(args, seeds):
    pos, neighbors, sigma, _ = args
    p, de = pos.astype(np.float64), seeds["e"].astype(np.float64)
    dpos, dsigma = np.zeros_like(p), 0.0
    i, k = np.nonzero(neighbors >= 0)
    j = neighbors[i, k]
    d = p[j] - p[i]
    r2 = (d * d).sum(axis=1) + 1.0
    dsigma = float(np.sum(de[i] / r2))
    g = (-float(sigma) * de[i] / r2 ** 2)[:, None] * 2.0 * d      # dE/d(pos[j]) = -dE/d(pos[i])
    np.add.at(dpos, j, g)
    np.add.at(dpos, i, -g)
    return {"d_pos": dpos, "d_sigma": np.array([dsigma])}


def _make_walk(rng, n):
    m, width = 5, 9
    x = rng.uniform(0.3, 0.9, m).astype(np.float32)
    table = rng.integers(0, m, (n, width)).astype(np.int64)
    lengths = rng.integers(0, width + 1, n).astype(np.int64)
    return [x, table, lengths, np.zeros(n, np.float32)], {"y": rng.standard_normal(n).astype(np.float32)}, n


def _ref_walk(args, seeds):
    x, table, lengths, _ = args
    x64, dx = x.astype(np.float64), np.zeros(x.size)
    for i, steps in enumerate(lengths):
        accs = [0.5]
        for k in range(steps):
            accs.append(accs[-1] * x64[table[i, k]] + np.sin(accs[-1]))
        adj = float(seeds["y"][i])
        for k in reversed(range(steps)):
            dx[table[i, k]] += adj * accs[k]
            adj = adj * (x64[table[i, k]] + np.cos(accs[k]))
    return {"d_x": dx}


def _make_rows(rng, n):
    x = rng.standard_normal((4, 16)).astype(np.float32)
    idx = rng.integers(0, 4, n).astype(np.int64)
    w = np.array([0.9], np.float32)
    return [x, idx, w, np.zeros((n, 16), np.float32)], {"y": rng.standard_normal((n, 16)).astype(np.float32)}, (n, 16)


def _ref_rows(args, seeds):
    x, idx, w, _ = args
    dy = seeds["y"].astype(np.float64)
    dx = np.zeros(x.shape)
    np.add.at(dx, idx, float(w[0]) * dy)
    return {"d_x": dx, "d_w": np.array([np.sum(x[idx].astype(np.float64) * dy)])}


CASES = [
    Case("gather_square", gather_square, ["x", "w"], _make_gather, _ref_gather),
    Case("pair_energy", pair_energy, ["pos", "sigma"], _make_pairs, _ref_pairs),
    Case("walk", walk, ["x"], _make_walk, _ref_walk),
    Case("rows", rows, ["x", "w"], _make_rows, _ref_rows),
]


def run_vjp(case: Case, deterministic: bool, args, seeds, grid, device="cpu") -> dict:
    """One launch of the case's vjp kernel with zeroed shadows; returns {shadow name: array}."""
    k = ado.vjp(case.kernel, case.wrt, deterministic=deterministic)
    primal = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
    shadows = {}
    for p in k.signature.visible_params[len(args):]:
        base = case.kernel.signature.param(p.name[2:])
        if p.name[2:] in seeds:
            shadows[p.name] = seeds[p.name[2:]].copy()
        elif base.is_array:
            shadows[p.name] = np.zeros_like(args[case.kernel.signature.index_of(base.name)])
        else:
            shadows[p.name] = np.zeros(1, base.dtype.dtype)
    k(*primal, *shadows.values(), grid=grid, device=device)
    return {name: v for name, v in shadows.items() if name[2:] in case.wrt}


def fingerprint(result: dict) -> bytes:
    return b"".join(result[name].tobytes() for name in sorted(result))
