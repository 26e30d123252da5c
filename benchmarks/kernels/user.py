"""Kernels written the way a user writes them (issue 31): an energy only, no hand-written forces,
no tuning, no library kernel. Our engine derives the forces (``ado.vjp``, or ``jax.grad`` through
``ado.jax_kernel``); the peers in benchmarks/peers and benchmarks/cuda/user_kernels.cu compute the
same physics.

Every energy is per atom (``energy[i]``), over a padded neighbor list of int32 indices (-1: an
empty slot) in a cubic periodic box (minimum image); pair energies are halved, since a full list
holds each pair twice. f64 throughout.
"""
from __future__ import annotations

import adoffload as ado

# The potentials' parameters, shared by every side (ours, plain JAX, Warp, Numba, CUDA).
LJ = {"sigma": 1.0, "epsilon": 1.0, "cutoff": 2.5}
MORSE = {"depth": 1.0, "alpha": 2.0, "r0": 1.2, "cutoff": 2.5}
ANGLE = {"strength": 1.0, "cos0": -1.0 / 3.0, "cutoff": 1.5}


@ado.func
def min_image(d, box):
    return d - box * ado.floor(d / box + 0.5)


@ado.kernel
def lj_energy(pos: ado.In[ado.f64, 2], neighbors: ado.In[ado.i32, 2], box: ado.f64, sigma: ado.f64,
              epsilon: ado.f64, cutoff: ado.f64, energy: ado.Out[ado.f64]):
    i = ado.tid()
    e = 0.0
    for k in range(neighbors.shape[1]):
        j = neighbors[i, k]
        if j >= 0:
            dx = min_image(pos[j, 0] - pos[i, 0], box)
            dy = min_image(pos[j, 1] - pos[i, 1], box)
            dz = min_image(pos[j, 2] - pos[i, 2], box)
            r2 = dx * dx + dy * dy + dz * dz
            if r2 < cutoff * cutoff:
                s6 = (sigma * sigma / r2) ** 3
                e += 2.0 * epsilon * (s6 * s6 - s6)
    energy[i] = e


@ado.kernel
def morse_energy(pos: ado.In[ado.f64, 2], neighbors: ado.In[ado.i32, 2], box: ado.f64, depth: ado.f64,
                 alpha: ado.f64, r0: ado.f64, cutoff: ado.f64, energy: ado.Out[ado.f64]):
    i = ado.tid()
    e = 0.0
    for k in range(neighbors.shape[1]):
        j = neighbors[i, k]
        if j >= 0:
            dx = min_image(pos[j, 0] - pos[i, 0], box)
            dy = min_image(pos[j, 1] - pos[i, 1], box)
            dz = min_image(pos[j, 2] - pos[i, 2], box)
            r2 = dx * dx + dy * dy + dz * dz
            if r2 < cutoff * cutoff:
                x = 1.0 - ado.exp(-alpha * (ado.sqrt(r2) - r0))
                e += 0.5 * depth * (x * x - 1.0)
    energy[i] = e


@ado.kernel
def angle_energy(pos: ado.In[ado.f64, 2], neighbors: ado.In[ado.i32, 2], box: ado.f64, strength: ado.f64,
                 cos0: ado.f64, cutoff: ado.f64, energy: ado.Out[ado.f64]):
    """A three-body term: for each pair of neighbors j, k of atom i within the cutoff,
    strength * w(r_ij) * w(r_ik) * (cos(angle jik) - cos0)^2 with w(r) = (1 - r^2 / cutoff^2)^2."""
    i = ado.tid()
    e = 0.0
    rc2 = cutoff * cutoff
    for a in range(neighbors.shape[1]):
        j = neighbors[i, a]
        if j >= 0:
            ax = min_image(pos[j, 0] - pos[i, 0], box)
            ay = min_image(pos[j, 1] - pos[i, 1], box)
            az = min_image(pos[j, 2] - pos[i, 2], box)
            ra2 = ax * ax + ay * ay + az * az
            if ra2 < rc2:
                wa = (1.0 - ra2 / rc2) ** 2
                for b in range(a + 1, neighbors.shape[1]):
                    k = neighbors[i, b]
                    if k >= 0:
                        bx = min_image(pos[k, 0] - pos[i, 0], box)
                        by = min_image(pos[k, 1] - pos[i, 1], box)
                        bz = min_image(pos[k, 2] - pos[i, 2], box)
                        rb2 = bx * bx + by * by + bz * bz
                        if rb2 < rc2:
                            wb = (1.0 - rb2 / rc2) ** 2
                            c = (ax * bx + ay * by + az * bz) / ado.sqrt(ra2 * rb2)
                            e += strength * wa * wb * (c - cos0) ** 2
    energy[i] = e


@ado.kernel
def saxpy(a: ado.f32, x: ado.In[ado.f32], y: ado.InOut[ado.f32]):
    i = ado.tid()
    y[i] = a * x[i] + y[i]


ENERGIES = {"lj": (lj_energy, LJ), "morse": (morse_energy, MORSE), "angle": (angle_energy, ANGLE)}
