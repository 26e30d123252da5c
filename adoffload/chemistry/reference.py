"""Plain-JAX reference implementations of the force field and neighbor-list building blocks.

Every function here has a kernel-language twin in ``kernels.py`` with the same arguments
and the same outputs; ``backend.py`` picks one set or the other. These are the baseline of
the chemistry benchmark and the ground truth of the tests.

Conventions (shared with the kernels):

* ``pos``: (N, 3) float64; ``box``: (3,) float64 edge lengths of an orthorhombic box,
  minimum-image convention (a very large box means free space).
* ``neighbors``: (N, capacity) int64, a *full* list (j in i's row and i in j's row),
  padded with -1 at the end of each row (the fused ``*_energy_forces`` kernels stop at the
  first -1; the energy kernels skip every -1). Pair energies are split half-and-half
  between the two atoms.
* Energies are returned per atom (pair terms) or per bond / per angle (bonded terms);
  the total is their sum. Forces are never written by hand: they are ``-grad`` of the total.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

# --- geometry ----------------------------------------------------------------------------

def minimum_image(d, box):
    """Displacement ``d`` wrapped to the nearest periodic image in an orthorhombic box."""
    return d - box * jnp.floor(d / box + 0.5)


def gather_neighbors(values, neighbors):
    """``values[neighbors]`` with empty (-1) slots reading 0 and contributing nothing.

    Empty slots point past the end and are read with ``mode="fill"``, so the transpose in
    ``jax.grad`` drops them: were they clamped to atom 0 (``jnp.where(valid, j, 0)``), a
    third of a typical list would scatter-add zeros onto that one atom, serialising the
    gradient on its address.
    """
    past_the_end = jnp.where(neighbors >= 0, neighbors, values.shape[0])
    return values.at[past_the_end].get(mode="fill", fill_value=0)


def _neighbor_r2(pos, box, neighbors):
    """Squared distances to each listed neighbor, and the mask of real (non-padding) slots."""
    d = minimum_image(gather_neighbors(pos, neighbors) - pos[:, None, :], box)
    return jnp.sum(d * d, axis=-1), neighbors >= 0


def _masked(r2, valid, cutoff):
    """Mask of pairs inside the cutoff, and r2 made safe (1.0) where masked so gradients stay finite."""
    inside = valid & (r2 < cutoff * cutoff)
    return inside, jnp.where(inside, r2, 1.0)


# --- pair potentials ---------------------------------------------------------------------

def lj_pair(r2, sigma, epsilon):
    s6 = (sigma * sigma / r2) ** 3
    return 4.0 * epsilon * (s6 * s6 - s6)


def morse_pair(r, depth, alpha, r0):
    x = 1.0 - jnp.exp(-alpha * (r - r0))
    return depth * (x * x - 1.0)


def lj_energy(pos, box, neighbors, sigma, epsilon, cutoff):
    """Per-atom Lennard-Jones energy, shifted to zero at the cutoff."""
    r2, valid = _neighbor_r2(pos, box, neighbors)
    inside, r2 = _masked(r2, valid, cutoff)
    pair = lj_pair(r2, sigma, epsilon) - lj_pair(cutoff * cutoff, sigma, epsilon)
    return 0.5 * jnp.sum(jnp.where(inside, pair, 0.0), axis=1)


def morse_energy(pos, box, neighbors, depth, alpha, r0, cutoff):
    """Per-atom Morse energy ``D((1-exp(-a(r-r0)))^2 - 1)``, shifted to zero at the cutoff."""
    r2, valid = _neighbor_r2(pos, box, neighbors)
    inside, r2 = _masked(r2, valid, cutoff)
    pair = morse_pair(jnp.sqrt(r2), depth, alpha, r0) - morse_pair(cutoff, depth, alpha, r0)
    return 0.5 * jnp.sum(jnp.where(inside, pair, 0.0), axis=1)


def dsf_pair(r, alpha, cutoff):
    """Damped shifted-force Coulomb kernel (Fennell & Gezelter 2006) for unit charges.

    ``alpha = 0`` gives plain shifted-force Coulomb; energy and force both vanish at the cutoff.
    """
    erfc_c = 1.0 - jax.scipy.special.erf(alpha * cutoff)
    slope = erfc_c / (cutoff * cutoff) + 2.0 * alpha / jnp.sqrt(jnp.pi) * jnp.exp(-(alpha * cutoff) ** 2) / cutoff
    erfc_r = 1.0 - jax.scipy.special.erf(alpha * r)
    return erfc_r / r - erfc_c / cutoff + slope * (r - cutoff)


def coulomb_energy(pos, box, neighbors, charges, alpha, cutoff, coulomb_constant):
    """Per-atom damped-shifted-force (Wolf-type) Coulomb energy, self term included."""
    r2, valid = _neighbor_r2(pos, box, neighbors)
    inside, r2 = _masked(r2, valid, cutoff)
    qq = charges[:, None] * gather_neighbors(charges, neighbors)
    pair = qq * dsf_pair(jnp.sqrt(r2), alpha, cutoff)
    erfc_c = 1.0 - jax.scipy.special.erf(alpha * cutoff)
    self_term = -(erfc_c / (2.0 * cutoff) + alpha / jnp.sqrt(jnp.pi)) * charges * charges
    return coulomb_constant * (0.5 * jnp.sum(jnp.where(inside, pair, 0.0), axis=1) + self_term)


def _energy_and_forces(energy):
    """The twin of a fused ``*_energy_forces`` kernel: per-atom energies and ``-grad`` of their sum."""
    def energy_forces(pos, *args):
        e, pullback = jax.vjp(lambda x: energy(x, *args), pos)
        return e, -pullback(jnp.ones_like(e))[0]
    energy_forces.__name__ = energy.__name__ + "_forces"
    energy_forces.__doc__ = f"Per-atom energies of ``{energy.__name__}`` and the forces, in one call."
    return energy_forces


lj_energy_forces = _energy_and_forces(lj_energy)
morse_energy_forces = _energy_and_forces(morse_energy)
coulomb_energy_forces = _energy_and_forces(coulomb_energy)


def cluster_lj_energy(pos, sigma, epsilon):
    """Per-atom Lennard-Jones energy of a free cluster: all pairs, no cutoff, no shift."""
    n = pos.shape[0]
    d = pos[None, :, :] - pos[:, None, :]
    r2 = jnp.sum(d * d, axis=-1)
    off_diagonal = ~jnp.eye(n, dtype=bool)
    r2 = jnp.where(off_diagonal, r2, 1.0)
    return 0.5 * jnp.sum(jnp.where(off_diagonal, lj_pair(r2, sigma, epsilon), 0.0), axis=1)


# --- bonded terms ------------------------------------------------------------------------

def bond_energy(pos, box, bonds, k, r0):
    """Per-bond harmonic energy ``k/2 (r - r0)^2``; ``bonds`` is (B, 2) int64, ``k``, ``r0`` (B,)."""
    d = minimum_image(pos[bonds[:, 1]] - pos[bonds[:, 0]], box)
    r = jnp.sqrt(jnp.sum(d * d, axis=-1))
    return 0.5 * k * (r - r0) ** 2


def angle_energy(pos, box, angles, k, theta0):
    """Per-angle harmonic energy ``k/2 (theta - theta0)^2``; ``angles`` (A, 3) = (i, center, k)."""
    a = minimum_image(pos[angles[:, 0]] - pos[angles[:, 1]], box)
    b = minimum_image(pos[angles[:, 2]] - pos[angles[:, 1]], box)
    c = jnp.cross(a, b)
    s2 = jnp.sum(c * c, axis=-1)
    # |a x b| with a zero gradient where it vanishes (a linear angle): sqrt's derivative there is
    # infinite and gave NaN forces; by symmetry the force of an exactly linear angle is zero.
    sine = jnp.where(s2 > 0, jnp.sqrt(jnp.where(s2 > 0, s2, 1.0)), 0.0)
    theta = jnp.arctan2(sine, jnp.sum(a * b, axis=-1))
    return 0.5 * k * (theta - theta0) ** 2


# --- neighbor-list building blocks -------------------------------------------------------

def cell_index(pos, box, cells_per_side):
    """Linear cell index (x-major) of each atom; ``cells_per_side`` is (3,) int64."""
    frac = pos / box
    frac = frac - jnp.floor(frac)
    c = jnp.minimum(jnp.floor(frac * cells_per_side).astype(jnp.int64), cells_per_side - 1)
    return (c[:, 0] * cells_per_side[1] + c[:, 1]) * cells_per_side[2] + c[:, 2]


def cell_ranges(sorted_cells, n_cells):
    """For each cell, the first position and the count of its atoms in the sorted order."""
    cells = jnp.arange(n_cells, dtype=sorted_cells.dtype)
    start = jnp.searchsorted(sorted_cells, cells, side="left")
    end = jnp.searchsorted(sorted_cells, cells, side="right")
    return start.astype(jnp.int64), (end - start).astype(jnp.int64)


_STENCIL = np.array([(x, y, z) for x in (-1, 0, 1) for y in (-1, 0, 1) for z in (-1, 0, 1)], dtype=np.int64)


def cell_neighbors(pos, box, cells_per_side, cell, order, start, count, cutoff, capacity, max_per_cell):
    """Neighbor list from cell ranges: each atom scans the 27 cells around its own.

    Returns ``(neighbors (N, capacity) padded with -1, n_neighbors (N,))``. ``n_neighbors``
    is the true count even when it exceeds ``capacity`` (so the caller detects overflow);
    the reference also needs ``max_per_cell`` (a static bound on atoms per cell) and reports
    a cell over it by returning a count above ``capacity`` for its atoms.
    """
    n = pos.shape[0]
    nx, ny, nz = cells_per_side[0], cells_per_side[1], cells_per_side[2]
    cz = cell % nz
    cy = (cell // nz) % ny
    cx = cell // (ny * nz)
    ax = (cx[:, None] + _STENCIL[None, :, 0]) % nx
    ay = (cy[:, None] + _STENCIL[None, :, 1]) % ny
    az = (cz[:, None] + _STENCIL[None, :, 2]) % nz
    around = (ax * ny + ay) * nz + az                                   # (N, 27)
    slot = jnp.arange(max_per_cell, dtype=jnp.int64)
    where = start[around][:, :, None] + slot                            # (N, 27, M)
    present = slot < count[around][:, :, None]
    j = order[jnp.clip(where, 0, n - 1)].reshape(n, -1)
    present = present.reshape(n, -1)
    d = minimum_image(pos[j] - pos[:, None, :], box)
    r2 = jnp.sum(d * d, axis=-1)
    hit = present & (j != jnp.arange(n)[:, None]) & (r2 < cutoff * cutoff)
    neighbors, found = _compact(j, hit, capacity)
    cell_overflow = jnp.any(count[around] > max_per_cell, axis=1)
    return neighbors, jnp.where(cell_overflow, jnp.maximum(found, capacity + 1), found)


def all_pairs_neighbors(pos, box, cutoff, capacity):
    """Brute-force O(N^2) neighbor list (small systems and tests)."""
    n = pos.shape[0]
    d = minimum_image(pos[None, :, :] - pos[:, None, :], box)
    r2 = jnp.sum(d * d, axis=-1)
    hit = (r2 < cutoff * cutoff) & ~jnp.eye(n, dtype=bool)
    j = jnp.broadcast_to(jnp.arange(n, dtype=jnp.int64), (n, n))
    return _compact(j, hit, capacity)


def _compact(candidates, hit, capacity):
    """Keep the hit candidates of each row, in order, in the first ``capacity`` slots (-1 after)."""
    n = candidates.shape[0]
    found = jnp.sum(hit, axis=1).astype(jnp.int64)
    slot = jnp.cumsum(hit, axis=1) - 1
    slot = jnp.where(hit & (slot < capacity), slot, capacity)          # capacity = dropped
    rows = jnp.broadcast_to(jnp.arange(n)[:, None], slot.shape)
    out = jnp.full((n, capacity + 1), -1, dtype=jnp.int64)
    out = out.at[rows, slot].set(candidates.astype(jnp.int64), mode="drop")
    return out[:, :capacity], found
