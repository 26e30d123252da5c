"""Lattice searching (adoffload.chemistry.lattice_search): the descent ends where no single move
lowers the energy (checked by trying every move), its bookkeeping matches the energy recomputed
from the sites, and on the real lattices the searched clusters relax to the published minima of
LJ38 (fcc), LJ55 (Mackay icosahedron) and LJ75 (Marks decahedron)."""
from __future__ import annotations

import numpy as np
import pytest
from scipy.optimize import minimize

from adoffload.chemistry import lattice_search as S
from adoffload.chemistry.lattices import NEAREST
from adoffload.errors import ArgumentError

# Cambridge Cluster Database, reduced units
PUBLISHED = {38: -173.928427, 55: -279.248470, 75: -397.492331}


def _energy(table, sites):
    return 0.5 * table[np.ix_(sites, sites)].sum()


def _random_table(m, rng):
    a = rng.normal(size=(m, m))
    table = a + a.T
    np.fill_diagonal(table, 0.0)
    return table


@pytest.mark.parametrize("seed", range(5))
def test_descent_ends_where_no_single_move_lowers_the_energy(seed):
    rng = np.random.default_rng(seed)
    table = _random_table(14, rng)
    start = np.zeros(14, dtype=bool)
    start[rng.choice(14, 5, replace=False)] = True
    occupied, energy = S.descend(table, start)
    sites = np.flatnonzero(occupied)
    assert len(sites) == 5 and start.sum() == 5                  # the start is left as it was
    assert energy == pytest.approx(_energy(table, sites), abs=1e-12)
    assert energy <= _energy(table, np.flatnonzero(start)) + 1e-12
    for leave in sites:                                           # every move, by brute force
        for enter in np.flatnonzero(~occupied):
            moved = np.r_[sites[sites != leave], enter]
            assert _energy(table, moved) >= energy - 1e-9


def test_search_returns_its_best_occupation_and_energy():
    rng = np.random.default_rng(7)
    table = _random_table(30, rng)
    start = rng.choice(30, 8, replace=False)
    sites, energy = S.search(table, start, np.random.default_rng(1), hops=40)
    assert len(sites) == len(set(sites)) == 8
    assert energy == pytest.approx(_energy(table, sites), abs=1e-12)
    occupied = np.zeros(30, dtype=bool)
    occupied[start] = True
    assert energy <= S.descend(table, occupied)[1] + 1e-12         # hops only keep a better best


def test_pair_table_is_the_lj_pair_energy():
    points = np.array([[0.0, 0.0, 0.0], [NEAREST, 0.0, 0.0], [0.0, 1.5, 0.0]])
    table = S.pair_table(points)
    assert table[0, 1] == pytest.approx(-1.0) and table[1, 0] == table[0, 1]     # the pair minimum
    assert table[0, 2] == pytest.approx(4.0 * (1.5 ** -12 - 1.5 ** -6))
    assert np.all(np.diag(table) == 0.0)


def _relaxed(x):
    def energy_and_gradient(flat):
        y = flat.reshape(-1, 3)
        d = y[:, None] - y[None]
        r2 = np.einsum("ijk,ijk->ij", d, d)
        np.fill_diagonal(r2, 1.0)
        s6 = 1.0 / r2 ** 3
        np.fill_diagonal(s6, 0.0)
        g = (-48.0 * s6 * s6 + 24.0 * s6) / r2
        return 2.0 * np.sum(s6 * s6 - s6), np.einsum("ij,ijk->ik", g, d).ravel()
    return minimize(energy_and_gradient, x.ravel(), jac=True, method="L-BFGS-B",
                    options={"maxiter": 5000, "gtol": 1e-8}).fun


@pytest.mark.parametrize("n, kind", [(38, "fcc"), (55, "icosahedral"), (75, "decahedral")])
def test_searched_clusters_relax_to_the_published_minimum(n, kind):
    clusters, lattice_energy = S.lattice_search_clusters(n, 3, seed=0, kinds=(kind,))
    assert clusters.shape == (3, n, 3) and lattice_energy.shape == (3,)
    np.testing.assert_allclose(clusters.mean(axis=1), 0.0, atol=1e-12)
    d = np.linalg.norm(clusters[:, :, None] - clusters[:, None], axis=-1) + 10 * np.eye(n)
    assert d.min() > 0.97 * NEAREST                                # distinct lattice sites
    relaxed = [_relaxed(x) for x in clusters]
    assert min(relaxed) == pytest.approx(PUBLISHED[n], abs=1e-5)
    assert min(relaxed) > PUBLISHED[n] - 1e-5                      # never below the global minimum


def test_searches_are_deterministic_in_the_seed():
    a, ea = S.lattice_search_clusters(20, 3, seed=4, hops=5)
    b, eb = S.lattice_search_clusters(20, 3, seed=4, hops=5)
    np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(ea, eb)


def test_bad_input_is_refused():
    with pytest.raises(ArgumentError, match="lattice kind 'bcc'"):
        S.lattice_search_clusters(20, 2, kinds=("bcc",))
    with pytest.raises(ArgumentError, match="at least 2 atoms and 1 cluster"):
        S.lattice_search_clusters(1, 2)
    with pytest.raises(ArgumentError, match="at least 2 atoms and 1 cluster"):
        S.lattice_search_clusters(20, 0)
