"""Block kernels whose adjoints race, for deterministic=True (the Case protocol of kernels.py).

* ``tile_gather``: a shared tile filled from gathered rows; the adjoint adds into the shadow
  tile from 8 threads per element (shared-memory atomics, ordered by the host's block loop)
  and scatters it into ``d_x`` at repeated rows (the contribution log).
* ``warp_gather``: no shared array: a warp sum over gathered values; ``d_x`` is a logged
  scatter, ``d_w`` a uniform sum. Nothing in its adjoint depends on a GPU's scheduling.
"""
from __future__ import annotations

import numpy as np

import adoffload as ado

from .kernels import Case

TB = 8          # tile_gather's block: TB x TB threads, one TB x TB tile


@ado.kernel(block=(TB, TB))
def tile_gather(x: ado.In[ado.f32, 2], idx: ado.In[ado.i64], y: ado.Out[ado.f32, 2]):
    i, j = ado.tid()
    ti, tj = ado.thread_id()
    T = ado.shared((TB, TB), ado.f32)
    T[ti, tj] = x[idx[i], j]
    ado.sync_threads()
    acc = ado.f32(0.0)
    for k in range(TB):
        acc += T[ti, k] * T[k, tj]
    y[i, j] = acc


@ado.kernel(block=64)
def warp_gather(x: ado.In[ado.f32], idx: ado.In[ado.i64], w: ado.f32, y: ado.Out[ado.f32]):
    i = ado.tid()
    v = x[idx[i]]
    y[i] = w * ado.warp_sum(v * v) * v


def _make_tiles(rng, n):
    x = rng.standard_normal((5, 2 * TB)).astype(np.float32)
    idx = rng.integers(0, 5, n).astype(np.int64)
    return ([x, idx, np.zeros((n, 2 * TB), np.float32)], {"y": rng.standard_normal((n, 2 * TB)).astype(np.float32)},
            (n, 2 * TB))


def _ref_tiles(args, seeds):
    x, idx, _ = args
    n, m = idx.size, x.shape[1]
    dy = seeds["y"].astype(np.float64)
    dx = np.zeros(x.shape)
    for bi in range(n // TB):
        rows = idx[bi * TB:(bi + 1) * TB]
        for bj in range(m // TB):
            cols = slice(bj * TB, (bj + 1) * TB)
            T, g = x[rows, cols].astype(np.float64), dy[bi * TB:(bi + 1) * TB, cols]
            np.add.at(dx, (rows[:, None], np.arange(m)[cols][None, :]), g @ T.T + T.T @ g)
    return {"d_x": dx}


def _make_warps(rng, n):
    x = rng.standard_normal(7).astype(np.float32)
    idx = rng.integers(0, 7, n).astype(np.int64)
    return [x, idx, np.float32(0.8), np.zeros(n, np.float32)], {"y": rng.standard_normal(n).astype(np.float32)}, n


def _ref_warps(args, seeds):
    x, idx, w, _ = args
    v, dy = x[idx].astype(np.float64).reshape(-1, 32), seeds["y"].astype(np.float64).reshape(-1, 32)
    s = (v * v).sum(axis=1, keepdims=True)
    # y = w s v: dy/dv_l = w s (own) + w 2 v_l sum(dy v) (through the warp sum)
    dv = float(w) * (s * dy + 2 * v * (dy * v).sum(axis=1, keepdims=True))
    dx = np.zeros(x.size)
    np.add.at(dx, idx, dv.reshape(-1))
    return {"d_x": dx, "d_w": np.array([np.sum(s * v * dy)])}


BLOCK_CASES = [
    Case("tile_gather", tile_gather, ["x"], _make_tiles, _ref_tiles),
    Case("warp_gather", warp_gather, ["x", "w"], _make_warps, _ref_warps),
]
