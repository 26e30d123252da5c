"""A genetic algorithm for cluster global minima: Deaven–Ho cut-and-splice mating, in JAX.

Deaven & Ho (PRL 75, 288 (1995)) and Deaven, Tit, Morris & Ho (1996) found the Lennard-Jones
global minima up to 100 atoms, LJ75's Marks decahedron among them, with a population of locally
minimized clusters whose children are the top part of one parent joined to the bottom part of
another, each cut by a random plane. Basin hopping from independent walkers stays in LJ75's
icosahedral funnel; a child joins pieces of two different basins, which is how the decahedron is
reached (examples/chemistry/lj_clusters.py ``--search ga``).

The functions take single clusters (``cut_and_splice``) or one population (``generation``) and
are ``jax.jit``-able: fixed shapes, no Python control flow on traced values. ``generation`` takes
the local minimizer as a batched function, so all children of one generation are minimized in
one call (one kernel launch of ``adoffload.optimize.minimize``, or a ``jax.vmap``-ed FIRE).
A population is an ``optimize.Walker`` whose current and best minima are the same (each member is
its own best), so the basin-hopping code's bookkeeping, sharding and plots take it unchanged.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp

from .optimize import Walker


def random_rotation(key, dtype=jnp.float64):
    """A rotation matrix uniform over SO(3): from a normalized 4-d Gaussian (a uniform unit quaternion)."""
    w, x, y, z = jax.random.normal(key, (4,), dtype=dtype)
    norm = jnp.sqrt(w * w + x * x + y * y + z * z)
    w, x, y, z = w / norm, x / norm, y / norm, z / norm
    return jnp.array([[1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
                      [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
                      [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)]], dtype=dtype)


def cut_and_splice(a, b, key, *, gap: float = 0.5):
    """A child of clusters ``a`` and ``b`` (each (n, 3)): both centered on their centroids and
    randomly rotated; the child takes the k highest atoms (in z) of ``a`` and the n - k lowest of
    ``b``, k uniform in 1..n-1, so it has exactly n atoms whatever the shapes (Deaven–Ho's cut plane
    through the centre fixes only the expected count). Where the two pieces would overlap in z, ``b``'s
    piece moves down until ``gap`` separates the lowest atom of one from the highest of the other:
    otherwise atoms of both may sit nearly on top of each other, whose r^-12 forces cost the local
    minimizer many iterations or end it non-finite."""
    n = a.shape[0]
    a_key, b_key, k_key = jax.random.split(key, 3)
    a = _centered_rotated(a, a_key)
    b = _centered_rotated(b, b_key)
    a = a[jnp.argsort(-a[:, 2])]            # highest first
    b = b[jnp.argsort(-b[:, 2])]            # b[k:]: the n - k lowest
    k = jax.random.randint(k_key, (), 1, n)
    from_a = jnp.arange(n) < k
    overlap = b[k, 2] - (a[k - 1, 2] - gap)
    b = b - jnp.array([0.0, 0.0, 1.0], b.dtype) * jnp.maximum(overlap, 0.0)
    return jnp.where(from_a[:, None], a, b)


def _centered_rotated(x, key):
    return (x - jnp.mean(x, axis=0)) @ random_rotation(key, x.dtype).T


def tournament(key, energy, size: int):
    """The index of the lowest energy among ``size`` members drawn at random (with replacement):
    selection pressure that grows with ``size`` and, unlike weights from the energies, does not
    depend on their scale (LJ75's population spans a few units over -397)."""
    drawn = jax.random.randint(key, (size,), 0, energy.shape[0])
    return drawn[jnp.argmin(energy[drawn])]


def select(x, energy, size: int, tolerance: float = 1e-6):
    """The ``size`` lowest of the clusters ``x`` (m, n, 3) with ``energy`` (m,), sorted by energy,
    one of each energy: a cluster within ``tolerance`` of the next lower one is taken as a copy of
    the same minimum and kept only where too few distinct ones are left (then the lowest copies,
    after all distinct ones). Without the rule a population fills with copies of its best cluster,
    and mating copies makes nothing new. Returns (x, energy)."""
    order = jnp.argsort(energy)
    sorted_energy = energy[order]
    copy = jnp.concatenate([jnp.zeros((1,), bool), jnp.diff(sorted_energy) < tolerance])
    keep = order[jnp.argsort(copy, stable=True)[:size]]
    return x[keep], energy[keep]


def generation(population: Walker, keys, *, local_minimize, mutate, mutation: float, tournament_size: int = 3,
               tolerance: float = 1e-6, island_size: int | None = None) -> Walker:
    """One generation: as many children as members, each a ``cut_and_splice`` of two parents picked
    by ``tournament``, a fraction ``mutation`` of them then changed by ``mutate(x, key)``; all children
    minimized by one call of ``local_minimize(x (m, n, 3)) -> (x, energy)``; the next population is
    ``select`` of parents and children (elitist: the best never gets lost). ``keys``: one per member.
    Non-finite energies must come back as +inf (they sort last).

    ``island_size``: the population splits into consecutive islands of this many members that mate
    and select only among themselves (the island model of parallel GAs) while their children still
    share the one minimization call. A GPU fills with ~16k clusters per call, where one population
    of that size would take too few generations; islands keep the generations small and, being
    independent, search several funnels at once. None: one population."""
    m = population.x.shape[0]
    size = island_size or m
    if m % size:
        raise ValueError(f"{m} members do not split into islands of {size}")
    islands = lambda a: a.reshape((m // size, size) + a.shape[1:])
    x, energy = islands(population.x), islands(population.energy)

    def children(x, energy, keys):
        return jax.vmap(lambda key: _child(x, energy, key, mutate, mutation, tournament_size))(keys)

    child_x, child_energy = local_minimize(jax.vmap(children)(x, energy, islands(keys)).reshape(population.x.shape))
    x, energy = jax.vmap(lambda x, e, cx, ce: select(jnp.concatenate([x, cx]), jnp.concatenate([e, ce]), size,
                                                     tolerance))(x, energy, islands(child_x), islands(child_energy))
    x, energy = x.reshape(population.x.shape), energy.reshape(m)
    return Walker(x, energy, x, energy)


def _child(x, energy, key, mutate, mutation: float, tournament_size: int):
    """One child of the population (x, energy): cut and splice of two tournament winners, mutated
    with probability ``mutation``."""
    a_key, b_key, cut_key, pick_key, mutate_key = jax.random.split(key, 5)
    a = x[tournament(a_key, energy, tournament_size)]
    b = x[tournament(b_key, energy, tournament_size)]
    child = cut_and_splice(a, b, cut_key)
    return jnp.where(jax.random.uniform(pick_key) < mutation, mutate(child, mutate_key), child)
