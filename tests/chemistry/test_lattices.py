"""Lattice-seeded starts (adoffload.chemistry.lattices): each lattice's nearest-neighbour distance is
2**(1/6) up to its strain, a fragment has n distinct points and is a pure function of its key."""
from __future__ import annotations

import jax
import numpy as np
import pytest

from adoffload.chemistry import lattices as L

jax.config.update("jax_enable_x64", True)

# (builder, smallest and largest nearest-neighbour distance over 2**(1/6), neighbours of an inner site)
CASES = {"fcc": (L.fcc_lattice, 1.0, 1.0), "icosahedral": (L.icosahedral_lattice, 0.97, 1.03),
         "decahedral": (L.decahedral_lattice, 0.99, 1.01)}


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
    ico = L.icosahedral_lattice(2)
    assert len(ico) == 1 + 12 + 42                                       # Mackay shells: 13, 55
    deca = L.decahedral_lattice(3)
    axis = deca[np.linalg.norm(deca[:, :2], axis=1) < 1e-9]
    assert len(axis) >= 5                                                # the 5-fold axis is a line of sites
    assert np.any(np.linalg.norm(L.fcc_lattice(2), axis=1) < 1e-9)          # the origin is a site


@pytest.mark.parametrize("n", [13, 38, 75])
def test_fragment_has_n_distinct_points_and_is_deterministic(n):
    keys = jax.random.split(jax.random.PRNGKey(3), 6)
    x = np.asarray(L.lattice_clusters(keys, n))
    assert x.shape == (6, n, 3)
    for cluster in x:
        d = _distances(cluster)
        assert d.min() > 0.8 * L.NEAREST                                 # distinct, jitter only
        assert np.abs(cluster).max() < 100.0                             # no padding point chosen
    np.testing.assert_array_equal(x, np.asarray(L.lattice_clusters(keys, n)))
    assert not np.allclose(x[0], np.asarray(L.lattice_clusters(jax.random.split(jax.random.PRNGKey(4), 6), n))[0])


def test_walkers_get_different_fragments_and_kinds_in_turn():
    keys = jax.random.split(jax.random.PRNGKey(0), 6)
    x = np.asarray(L.lattice_clusters(keys, 38, jitter=0.0))
    # jitter off: each fragment's sites are lattice points of its kind (0, 1, 2, 0, 1, 2)
    points = L.lattice_points(38)
    for i, cluster in enumerate(x):
        kind = i % 3
        shifted = cluster - cluster[0]
        lattice_diffs = points[kind][:, None] - points[kind][None]
        assert np.min(np.linalg.norm(lattice_diffs.reshape(-1, 3)[:, None] - shifted[1:2], axis=-1)) < 1e-6
    assert not np.allclose(x[0], x[3])                                   # different centers, fragments
