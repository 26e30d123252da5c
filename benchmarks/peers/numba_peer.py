"""Numba as a peer on the host: the user kernels' energies with their forces written out by hand
(Numba has no AD), one thread (``@njit``) and all cores (``@njit(parallel=True)``, ``prange`` over
atoms: a pair force gathers over the full list, so no atom is written by two threads), and a tiny
saxpy call. The three-body forces scatter to both neighbors, which ``prange`` cannot do without
atomics, so that term has the one-thread loop only."""
from __future__ import annotations

import math

import numpy as np
from numba import njit, prange


@njit(inline="always")
def _min_image(d, box):
    return d - box * math.floor(d / box + 0.5)


def _pair_loop(pair, parallel: bool):
    """A forces loop over a padded full neighbor list; ``pair(r2, *params) -> (V, dV/dr2)``."""
    loop = prange if parallel else range

    def forces(pos, neighbors, box, params, energy, force):
        n, slots = neighbors.shape
        for i in loop(n):
            e = 0.0
            fx = fy = fz = 0.0
            for k in range(slots):
                j = neighbors[i, k]
                if j < 0:
                    continue
                dx = _min_image(pos[j, 0] - pos[i, 0], box)
                dy = _min_image(pos[j, 1] - pos[i, 1], box)
                dz = _min_image(pos[j, 2] - pos[i, 2], box)
                r2 = dx * dx + dy * dy + dz * dz
                v, dv = pair(r2, params)
                e += 0.5 * v
                fx += 2.0 * dv * dx           # -dE/dpos_i: both halves of the pair, d = pos_j - pos_i
                fy += 2.0 * dv * dy
                fz += 2.0 * dv * dz
            energy[i] = e
            force[i, 0] = fx
            force[i, 1] = fy
            force[i, 2] = fz
    return njit(parallel=parallel, fastmath=False)(forces)


@njit(inline="always")
def _lj(r2, params):
    sigma, epsilon, cutoff = params[0], params[1], params[2]
    if r2 >= cutoff * cutoff:
        return 0.0, 0.0
    s6 = (sigma * sigma / r2) ** 3
    return 4.0 * epsilon * (s6 * s6 - s6), 4.0 * epsilon * (-6.0 * s6 * s6 + 3.0 * s6) / r2


@njit(inline="always")
def _morse(r2, params):
    depth, alpha, r0, cutoff = params[0], params[1], params[2], params[3]
    if r2 >= cutoff * cutoff:
        return 0.0, 0.0
    r = math.sqrt(r2)
    ex = math.exp(-alpha * (r - r0))
    x = 1.0 - ex
    return depth * (x * x - 1.0), depth * x * alpha * ex / r       # dV/dr2 = (dV/dr) / (2 r)


@njit
def angle_forces(pos, neighbors, box, params, energy, force):
    strength, cos0, cutoff = params[0], params[1], params[2]
    rc2 = cutoff * cutoff
    n, slots = neighbors.shape
    force[:] = 0.0
    for i in range(n):
        e = 0.0
        for a in range(slots):
            j = neighbors[i, a]
            if j < 0:
                continue
            ax = _min_image(pos[j, 0] - pos[i, 0], box)
            ay = _min_image(pos[j, 1] - pos[i, 1], box)
            az = _min_image(pos[j, 2] - pos[i, 2], box)
            ra2 = ax * ax + ay * ay + az * az
            if ra2 >= rc2:
                continue
            ua = 1.0 - ra2 / rc2
            for b in range(a + 1, slots):
                k = neighbors[i, b]
                if k < 0:
                    continue
                bx = _min_image(pos[k, 0] - pos[i, 0], box)
                by = _min_image(pos[k, 1] - pos[i, 1], box)
                bz = _min_image(pos[k, 2] - pos[i, 2], box)
                rb2 = bx * bx + by * by + bz * bz
                if rb2 >= rc2:
                    continue
                ub = 1.0 - rb2 / rc2
                inv = 1.0 / math.sqrt(ra2 * rb2)
                c = (ax * bx + ay * by + az * bz) * inv
                g = c - cos0
                e += strength * ua * ua * ub * ub * g * g
                # d(term)/da and d(term)/db; a = pos_j - pos_i, b = pos_k - pos_i
                dwa = -4.0 * ua / rc2 * ub * ub * g * g * strength          # times a
                dwb = -4.0 * ub / rc2 * ua * ua * g * g * strength          # times b
                dcc = 2.0 * strength * ua * ua * ub * ub * g                 # times dc
                gax = dwa * ax + dcc * (bx * inv - c * ax / ra2)
                gay = dwa * ay + dcc * (by * inv - c * ay / ra2)
                gaz = dwa * az + dcc * (bz * inv - c * az / ra2)
                gbx = dwb * bx + dcc * (ax * inv - c * bx / rb2)
                gby = dwb * by + dcc * (ay * inv - c * by / rb2)
                gbz = dwb * bz + dcc * (az * inv - c * bz / rb2)
                force[j, 0] -= gax
                force[j, 1] -= gay
                force[j, 2] -= gaz
                force[k, 0] -= gbx
                force[k, 1] -= gby
                force[k, 2] -= gbz
                force[i, 0] += gax + gbx
                force[i, 1] += gay + gby
                force[i, 2] += gaz + gbz
        energy[i] = e


@njit
def saxpy(a, x, y):
    for i in range(x.shape[0]):
        y[i] = a * x[i] + y[i]


# name -> {threads: forces function}; every function is (pos, neighbors, box, params, energy, force)
FORCES = {"lj": {"one thread": _pair_loop(_lj, False), "all cores": _pair_loop(_lj, True)},
          "morse": {"one thread": _pair_loop(_morse, False), "all cores": _pair_loop(_morse, True)},
          "angle": {"one thread": angle_forces}}


def params_array(params: dict) -> np.ndarray:
    return np.array(list(params.values()), dtype=np.float64)
