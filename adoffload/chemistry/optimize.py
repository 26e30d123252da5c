"""Batch-friendly local minimization (FIRE) and basin hopping, in JAX.

Functions take one system and are meant to be ``jax.vmap``-ed over thousands of systems:
fixed iteration counts, no Python control flow on traced values.
"""
from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp


class FireOptions(NamedTuple):
    steps: int = 400
    dt_start: float = 0.005
    dt_max: float = 0.05
    max_move: float = 0.1          # largest displacement of any atom in one step
    n_min: int = 5
    f_inc: float = 1.1
    f_dec: float = 0.5
    alpha_start: float = 0.1
    f_alpha: float = 0.99


def fire_minimize(energy_fn, x0, options: FireOptions = FireOptions()):
    """FIRE (Bitzek et al. 2006) from ``x0``; returns (x, energy, max |force|).

    Forces are ``-jax.grad(energy_fn)``: with an adoffload energy kernel, its adjoint.
    """
    o = options
    grad = jax.grad(energy_fn)

    def step(carry, _):
        x, v, dt, alpha, since_negative = carry
        f = -grad(x)
        power = jnp.sum(f * v)
        f_norm = jnp.sqrt(jnp.sum(f * f)) + 1e-300
        v_norm = jnp.sqrt(jnp.sum(v * v))
        v = (1.0 - alpha) * v + alpha * v_norm * f / f_norm
        uphill = power <= 0.0
        grow = (~uphill) & (since_negative > o.n_min)
        dt = jnp.where(uphill, dt * o.f_dec, jnp.where(grow, jnp.minimum(dt * o.f_inc, o.dt_max), dt))
        alpha = jnp.where(uphill, o.alpha_start, jnp.where(grow, alpha * o.f_alpha, alpha))
        since_negative = jnp.where(uphill, 0, since_negative + 1)
        v = jnp.where(uphill, 0.0, v)
        v = v + dt * f
        move = dt * v
        longest = jnp.sqrt(jnp.max(jnp.sum(move * move, axis=-1)))
        x = x + move * jnp.minimum(1.0, o.max_move / (longest + 1e-300))
        return (x, v, dt, alpha, since_negative), None

    carry = (x0, jnp.zeros_like(x0), jnp.asarray(o.dt_start, x0.dtype), jnp.asarray(o.alpha_start, x0.dtype),
             jnp.asarray(0))
    (x, *_), _ = jax.lax.scan(step, carry, None, length=o.steps)
    f = grad(x)
    return x, energy_fn(x), jnp.sqrt(jnp.max(jnp.sum(f * f, axis=-1)))


class Walker(NamedTuple):
    x: jax.Array          # current minimum
    energy: jax.Array
    best_x: jax.Array
    best_energy: jax.Array


def random_cluster(key, n_atoms: int, density: float = 1.0):
    """Atoms uniform in a sphere holding ``n_atoms`` at ``density`` (may overlap; FIRE caps moves)."""
    radius = (3.0 * n_atoms / (4.0 * jnp.pi * density)) ** (1.0 / 3.0)
    direction_key, radius_key = jax.random.split(key)
    d = jax.random.normal(direction_key, (n_atoms, 3), dtype=jnp.float64)
    d = d / jnp.linalg.norm(d, axis=-1, keepdims=True)
    r = radius * jax.random.uniform(radius_key, (n_atoms, 1), dtype=jnp.float64) ** (1.0 / 3.0)
    return d * r


def perturb(walker: Walker, key, *, step_size: float, container: float):
    """A basin-hopping move of every atom of one walker: a uniform kick in [-step_size, step_size] per
    coordinate; atoms kicked past ``container`` from the centroid are put back at a random place inside
    it (the usual spherical container; it shapes moves only, not the energy)."""
    move_key, place_key = jax.random.split(key)
    x = walker.x + jax.random.uniform(move_key, walker.x.shape, walker.x.dtype, -step_size, step_size)
    center = jnp.mean(x, axis=0)
    outside = jnp.linalg.norm(x - center, axis=-1, keepdims=True) > container
    return jnp.where(outside, center + random_cluster(place_key, x.shape[0]) * 0.5, x)


def accept(walker: Walker, x, energy, key, *, kT: float) -> Walker:
    """Metropolis at ``kT`` between the walker's minimum and the new one (x, energy); the best seen is kept.
    A non-finite energy is never accepted."""
    energy = jnp.where(jnp.isfinite(energy), energy, jnp.inf)
    accepted = jax.random.uniform(key, dtype=energy.dtype) < jnp.exp(-(energy - walker.energy) / kT)
    x = jnp.where(accepted, x, walker.x)
    current = jnp.where(accepted, energy, walker.energy)
    better = energy < walker.best_energy
    return Walker(x, current, jnp.where(better, x, walker.best_x), jnp.where(better, energy, walker.best_energy))


def basin_hopping_step(energy_fn, walker: Walker, key, *, step_size: float, kT: float,
                       container: float, fire: FireOptions = FireOptions()) -> Walker:
    """Perturb every atom, minimize with FIRE (in JAX), accept by Metropolis at ``kT``; keep the best
    minimum seen (``perturb`` and ``accept``; adoffload.optimize.minimize can take the middle step
    for a whole batch of walkers in one kernel launch: examples/chemistry/lj_clusters.py)."""
    move_key, accept_key = jax.random.split(key)
    x = perturb(walker, move_key, step_size=step_size, container=container)
    x, energy, _ = fire_minimize(energy_fn, x, fire)
    return accept(walker, x, energy, accept_key, kT=kT)
