"""Lattice searching: which ``n`` sites of a lattice hold ``n`` atoms with the lowest pair energy.

The ``n`` sites of a lattice nearest a point are a ball; the best arrangement on the lattice rarely
is. LJ75's Marks decahedron is the decahedral lattice with
re-entrant notches cut into its equator, LJ38's truncated octahedron an fcc fragment with flat
faces. Dynamic lattice searching (Shao, Jiang & Cai, J. Phys. Chem. A 108, 3586 (2004)) searches
the occupations instead of the coordinates: the pair energies of all lattice sites at their ideal
positions are one table, and a move takes one atom from its site to a vacant one. Here a search is
steepest descent over single moves (the best of all occupied x vacant pairs, until none lowers
the energy) between kicks of a few atoms, accepted by Metropolis: basin hopping on the lattice.
Its clusters are starting points for the continuous search, which relaxes the lattice's strain
(examples/chemistry/lj_clusters.py ``--starts lattices``).

Host numpy, serial: a search of 75 atoms on a table of ~500 sites takes ~0.05 s.
"""
from __future__ import annotations

import math
from typing import Callable

import numpy as np

from ..errors import ArgumentError
from .lattices import KINDS, NEAREST, decahedral_sites, fcc_sites, icosahedral_sites

_BUILDERS = {"fcc": fcc_sites, "icosahedral": icosahedral_sites, "decahedral": decahedral_sites}


def lj_pair_energy(r2: np.ndarray) -> np.ndarray:
    """The Lennard-Jones pair energy 4 (r^-12 - r^-6) of squared distances, reduced units."""
    inv6 = 1.0 / r2 ** 3
    return 4.0 * (inv6 * inv6 - inv6)


def pair_table(points: np.ndarray, pair_energy: Callable[[np.ndarray], np.ndarray] = lj_pair_energy) -> np.ndarray:
    """The (M, M) pair energies of the sites ``points`` (M, 3); zero on the diagonal."""
    d = points[:, None, :] - points[None, :, :]
    r2 = np.einsum("ijk,ijk->ij", d, d)
    np.fill_diagonal(r2, 1.0)
    table = pair_energy(r2)
    np.fill_diagonal(table, 0.0)
    return table


def site_lattice(kind: str, n_atoms: int) -> np.ndarray:
    """The sites of lattice ``kind`` ("fcc", "icosahedral", "decahedral") a search of ``n_atoms``
    uses: those within two and a half nearest-neighbour distances of a ball of ``n_atoms`` at
    close-packed density around the lattice's center (its symmetry site)."""
    if kind not in _BUILDERS:
        raise ArgumentError(f"lattice kind {kind!r}: expected one of {', '.join(KINDS)}")
    radius = 1.1 * NEAREST * (3.0 * n_atoms / (4.0 * math.pi)) ** (1.0 / 3.0) + 2.5 * NEAREST
    points = _BUILDERS[kind](int(math.ceil(radius / (0.75 * NEAREST))) + 1)
    return points[np.linalg.norm(points, axis=1) <= radius]


def descend(table: np.ndarray, occupied: np.ndarray) -> tuple[np.ndarray, float]:
    """Steepest descent from the boolean occupation ``occupied`` (M,): while some move of one atom
    to a vacant site lowers the energy, make the one that lowers it most. Returns the occupation
    (a new array) and its energy. Site energies e_s = sum over occupied t of table[s, t] are kept
    up to date; moving the atom at o to v changes the energy by e_v - table[o, v] - e_o."""
    occupied = occupied.copy()
    site = table[:, occupied].sum(axis=1)
    while True:
        atoms, vacancies = np.flatnonzero(occupied), np.flatnonzero(~occupied)
        change = site[vacancies][None, :] - table[np.ix_(atoms, vacancies)] - site[atoms][:, None]
        best = int(np.argmin(change))
        if change.flat[best] >= -1e-12 * max(1.0, abs(float(site[occupied].sum()))):
            return occupied, 0.5 * float(site[occupied].sum())
        leave, enter = atoms[best // len(vacancies)], vacancies[best % len(vacancies)]
        occupied[leave], occupied[enter] = False, True
        site += table[:, enter] - table[:, leave]


def search(table: np.ndarray, start: np.ndarray, rng: np.random.Generator, *, hops: int = 100,
           kick: int = 3, kT: float = 0.8, candidates: int = 30) -> tuple[np.ndarray, float]:
    """Basin hopping over occupations from the site indices ``start``: ``hops`` times, ``kick``
    atoms (the least bound ones or random ones, equally often) move to random sites among the
    ``candidates`` best-bound vacancies, then ``descend``; Metropolis at ``kT`` accepts. Returns
    the best occupation's site indices (sorted) and energy."""
    occupied = np.zeros(len(table), dtype=bool)
    occupied[start] = True
    occupied, energy = descend(table, occupied)
    best, best_energy = occupied, energy
    for _ in range(hops):
        atoms, vacancies = np.flatnonzero(occupied), np.flatnonzero(~occupied)
        site = table[:, occupied].sum(axis=1)
        if rng.random() < 0.5:
            leave = atoms[np.argsort(site[atoms])[-kick:]]
        else:
            leave = rng.choice(atoms, kick, replace=False)
        near = vacancies[np.argsort(site[vacancies])[:max(candidates, kick)]]
        trial = occupied.copy()
        trial[leave] = False
        trial[rng.choice(near, kick, replace=False)] = True
        trial, trial_energy = descend(table, trial)
        if trial_energy < energy or rng.random() < math.exp(-(trial_energy - energy) / kT):
            occupied, energy = trial, trial_energy
            if energy < best_energy:
                best, best_energy = occupied, energy
    return np.flatnonzero(best), best_energy


def lattice_search_clusters(n_atoms: int, count: int, *, seed: int = 0, kinds=KINDS, offset: float = 0.15,
                            hops: int = 100, pair_energy: Callable[[np.ndarray], np.ndarray] = lj_pair_energy
                            ) -> tuple[np.ndarray, np.ndarray]:
    """``count`` searched clusters (count, n_atoms, 3) and their lattice energies (count,): search
    i runs on lattice ``kinds[i % len(kinds)]`` from the ``n_atoms`` sites nearest a point at a
    Gaussian offset (standard deviation ``offset`` per coordinate) from the lattice's center, with
    its own random stream (seeded by ``seed`` and i). Coordinates are the ideal sites, centred on
    their centroid; minimize them to relax the lattice strain."""
    if n_atoms < 2 or count < 1:
        raise ArgumentError(f"lattice search of {n_atoms} atoms x {count} clusters: need at least 2 atoms "
                            f"and 1 cluster")
    kinds = tuple(kinds)
    lattices = {kind: site_lattice(kind, n_atoms) for kind in kinds}
    tables = {kind: pair_table(points, pair_energy) for kind, points in lattices.items()}
    clusters, energies = np.empty((count, n_atoms, 3)), np.empty(count)
    for i in range(count):
        kind = kinds[i % len(kinds)]
        points, rng = lattices[kind], np.random.default_rng([seed, i])
        center = rng.normal(size=3) * offset
        start = np.argsort(np.sum((points - center) ** 2, axis=1))[:n_atoms]
        sites, energies[i] = search(tables[kind], start, rng, hops=hops)
        clusters[i] = points[sites] - points[sites].mean(axis=0)
    return clusters, energies
