"""Deferred adjoint updates (enzyme/deferred.py) under real warps: the neighbor sum's adjoint on
the GPU equals the host's. d_x[i] is summed per thread and added once (atomic: neighbors add
into it too, j == i included), d_x[j] stays atomic per neighbor, and the uniform d_w[1] goes
through the flag-guarded warp reduction while threads with empty rows never reach it."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import adoffload as ado
from adoffload.tools.cli import load_kernel

FIXTURE = str(Path(__file__).resolve().parents[1] / "fixtures/stats/scatter_kernels.py")

pytestmark = pytest.mark.gpu


def _inputs(n=5000, m=24, seed=0):
    rng = np.random.default_rng(seed)
    nb = rng.integers(0, n, size=(n, m))
    nb[:, 0] = np.arange(n)                        # each atom is its own neighbor once
    nb[rng.random((n, m)) < 0.3] = -1              # empty slots ...
    nb[::7] = -1                                   # ... and whole empty rows: those threads add nothing
    return dict(x=rng.uniform(-1, 1, n), nb=nb.astype(np.int64), w=np.array([0.3, -1.7, 0.9]),
                e=np.zeros(n)), rng.standard_normal(n)


def _adjoint(device, values, seed):
    rev = ado.vjp(load_kernel(f"{FIXTURE}:neighbor_sum"), ["x", "w"])
    d_x, d_w = np.zeros_like(values["x"]), np.zeros(3)
    rev(**dict(values, e=np.zeros_like(values["e"])), d_x=d_x, d_w=d_w, d_e=seed.copy(),
        grid=(len(d_x),), device=device)
    return d_x, d_w


def test_neighbor_sum_adjoint_on_the_gpu_matches_the_host(cuda):
    values, seed = _inputs()
    gpu_x, gpu_w = _adjoint("cuda", values, seed)
    host_x, host_w = _adjoint("cpu", values, seed)
    assert np.abs(host_x).max() > 1.0 and host_w[1] != 0.0 and host_w[0] == host_w[2] == 0.0
    np.testing.assert_allclose(gpu_x, host_x, rtol=1e-11, atol=1e-11)
    np.testing.assert_allclose(gpu_w, host_w, rtol=1e-11, atol=1e-9)


def _weighted(device, x, w, seed):
    rev = ado.vjp(load_kernel(f"{FIXTURE}:weighted_rows"), ["x", "w"])
    d_x, d_w = np.zeros_like(x), np.zeros_like(w)
    rev(x=x, w=w, e=np.zeros(len(x)), d_x=d_x, d_w=d_w, d_e=seed.copy(), grid=(len(x),), device=device)
    return d_x, d_w


def test_loop_counter_adds_combined_across_lanes_match_the_host(cuda):
    # d_w[k]: all lanes of a warp at the same k share the address (one atomic per warp); lanes
    # that broke out early leave the others at other k or with a partial mask (per-lane atomics)
    rng = np.random.default_rng(3)
    n, m = 4099, 40                                 # not a whole number of warps
    x, w, seed = rng.uniform(-1, 1, (n, m)), rng.standard_normal(m), rng.standard_normal(n)
    gpu_x, gpu_w = _weighted("cuda", x, w, seed)
    host_x, host_w = _weighted("cpu", x, w, seed)
    np.testing.assert_allclose(gpu_x, host_x, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(gpu_w, host_w, rtol=1e-10, atol=1e-10)
