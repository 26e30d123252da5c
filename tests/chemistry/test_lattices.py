"""The lattices of cluster starts (adoffload.chemistry.lattices): each lattice's nearest-neighbour
distance is 2**(1/6) up to its strain, close packed inside, with its symmetry sites."""
from __future__ import annotations

import numpy as np
import pytest

from adoffload.chemistry import lattices as L

# (builder, smallest and largest nearest-neighbour distance over 2**(1/6), neighbours of an inner site)
CASES = {"fcc": (L.fcc_sites, 1.0, 1.0), "icosahedral": (L.icosahedral_sites, 0.97, 1.03),
         "decahedral": (L.decahedral_sites, 0.99, 1.01)}


def _distances(points):
    d = np.linalg.norm(points[:, None] - points[None], axis=-1)
    np.fill_diagonal(d, np.inf)
    return d


@pytest.mark.parametrize("name", list(CASES))
def test_nearest_neighbour_distance_within_the_strain(name):
    build, low, high = CASES[name]
    points = build(4)
    d = _distances(points)
    assert np.all(d.min(1) >= low * L.NEAREST - 1e-9)
    inner = np.linalg.norm(points, axis=1) < 2.0 * L.NEAREST         # away from the cut surface
    bonded = d < 1.1 * L.NEAREST
    assert np.all(d[bonded] <= high * L.NEAREST + 1e-9)
    assert np.all(bonded[inner].sum(1) == 12)                            # close packed everywhere inside
    assert len(points) == len(L._distinct(points))


def test_lattices_have_their_symmetry_sites():
    ico = L.icosahedral_sites(2)
    assert len(ico) == 1 + 12 + 42                                       # Mackay shells: 13, 55
    deca = L.decahedral_sites(3)
    axis = deca[np.linalg.norm(deca[:, :2], axis=1) < 1e-9]
    assert len(axis) >= 5                                                # the 5-fold axis is a line of sites
    assert np.any(np.linalg.norm(L.fcc_sites(2), axis=1) < 1e-9)          # the origin is a site
