"""The three lattices of cluster structures, for lattice-seeded cluster global optimization.

Double-funnel clusters (LJ38's fcc truncated octahedron, LJ75's Marks decahedron) are rarely reached
from random starts, which fall into the wide icosahedral funnel; lattice-based searches build their
starting clusters on icosahedral, decahedral and fcc lattices instead (which sites to occupy:
``lattice_search``). Three lattices, all built from geometry with nearest-neighbour distance
``2**(1/6)`` (the LJ pair minimum, reduced units) up to the strain each one needs:

- fcc (``fcc_sites``): cubic close packing, unstrained;
- icosahedral (``icosahedral_sites``): the Mackay lattice, 20 fcc tetrahedra around a center, one per face of an
  icosahedron, strained radially (radial spacing 0.951 of the tangential one);
- decahedral (``decahedral_sites``): the Ino decahedral lattice, 5 fcc tetrahedral wedges around a 5-fold axis,
  the 7.35 degree gap closed by a slight strain (spacings between 0.987 and 1 of each other), and
  unbounded along the axis.

Each builder returns a numpy (M, 3) array of distinct sites, the lattice's symmetry site at the origin.
"""
from __future__ import annotations

import math

import numpy as np

KINDS = ("fcc", "icosahedral", "decahedral")
NEAREST = 2.0 ** (1.0 / 6.0)


def fcc_sites(shells: int, spacing: float = NEAREST) -> np.ndarray:
    """fcc points (cubic cell coordinates with an even sum) within ``shells`` nearest-neighbour
    distances of the origin (a lattice site)."""
    m = int(math.ceil(shells * math.sqrt(2.0))) + 1
    r = np.arange(-m, m + 1)
    ijk = np.stack(np.meshgrid(r, r, r, indexing="ij"), -1).reshape(-1, 3)
    ijk = ijk[ijk.sum(1) % 2 == 0]
    points = ijk * (spacing / math.sqrt(2.0))
    return points[np.linalg.norm(points, axis=1) <= shells * spacing + 1e-9]


def _icosahedron_vertices() -> tuple[np.ndarray, list[tuple[int, int, int]]]:
    """The 12 unit vertices (0, +-1, +-phi) cyclically, normalized, and the 20 faces (vertex triples
    pairwise at the shortest distance)."""
    phi = (1.0 + math.sqrt(5.0)) / 2.0
    v = []
    for a in (-1.0, 1.0):
        for b in (-phi, phi):
            v += [(0.0, a, b), (a, b, 0.0), (b, 0.0, a)]
    v = np.array(v) / math.sqrt(1.0 + phi * phi)
    d = np.linalg.norm(v[:, None] - v[None], axis=-1)
    edge = np.min(d[d > 1e-9])
    near = np.abs(d - edge) < 1e-9
    faces = [(i, j, k) for i in range(12) for j in range(i + 1, 12) for k in range(j + 1, 12)
             if near[i, j] and near[j, k] and near[i, k]]
    return v, faces


def icosahedral_sites(shells: int, spacing: float = NEAREST) -> np.ndarray:
    """The Mackay icosahedral lattice up to ``shells`` shells: on shell k, face (v1, v2, v3) holds
    a*v1 + b*v2 + c*v3 for a + b + c = k. The tangential spacing (the edge) e and the radial one
    (0.951 e) average ``spacing``."""
    v, faces = _icosahedron_vertices()
    unit_edge = np.linalg.norm(v[faces[0][0]] - v[faces[0][1]])
    radial_over_edge = 1.0 / unit_edge                      # |vertex| / edge = 0.951
    edge = 2.0 * spacing / (1.0 + radial_over_edge)
    v = v * (edge / unit_edge)
    points = [np.zeros(3)]
    for k in range(1, shells + 1):
        abc = np.array([(a, b, k - a - b) for a in range(k + 1) for b in range(k + 1 - a)], dtype=float)
        for face in faces:
            points.append(abc @ v[list(face)])
    return _distinct(np.vstack(points))


def decahedral_sites(shells: int, spacing: float = NEAREST) -> np.ndarray:
    """The Ino decahedral lattice: around the z axis, wedge j holds k*u_j + l*u_{j+1} + (i + (k+l)/2)*e*z
    (k, l >= 0, any integer i), u_j the ring vectors at 72 degrees of length e / (2 sin 36) so that
    neighbouring rings sit e apart (the strain closing the 7.35 degree gap: the spacing from a site
    to the next ring is 0.987 e); e and 0.987 e average ``spacing``. Kept: points within ``shells``
    spacings of the origin (an axis site)."""
    ring_radius = 1.0 / (2.0 * math.sin(math.pi / 5.0))                 # in units of e
    short = math.sqrt(ring_radius ** 2 + 0.25)                         # 0.987
    edge = 2.0 * spacing / (1.0 + short)
    angles = 2.0 * math.pi * np.arange(6) / 5.0
    u = edge * ring_radius * np.stack([np.cos(angles), np.sin(angles), np.zeros(6)], -1)
    m = shells + 2
    kl = np.array([(k, l) for k in range(m + 1) for l in range(m + 1 - k)], dtype=float)
    i = np.arange(-m - 1, m + 2, dtype=float)
    points = []
    for j in range(5):
        xy = kl[:, :1] * u[j] + kl[:, 1:] * u[j + 1]
        z = (i[None, :] + kl.sum(1, keepdims=True) / 2.0) * edge
        p = np.repeat(xy[:, None, :], len(i), 1)
        p[..., 2] = z
        points.append(p.reshape(-1, 3))
    points = _distinct(np.vstack(points))
    return points[np.linalg.norm(points, axis=1) <= shells * spacing + 1e-9]


def _distinct(points: np.ndarray, tol: float = 1e-6) -> np.ndarray:
    _, keep = np.unique(np.round(points / tol).astype(np.int64), axis=0, return_index=True)
    return points[np.sort(keep)]
