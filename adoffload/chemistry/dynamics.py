"""Molecular dynamics: velocity Verlet (NVE) and BAOAB Langevin (NVT), lattices, observables.

Reduced Lennard-Jones units (mass 1, k_B = 1; one mass for every atom). The integrators are
pure functions of a ``State``; ``run`` scans ``chunk`` steps per jitted call, updating the
neighbor list with its skin criterion inside the scan and checking, on the host after each
chunk, that positions and energies are finite (``UnstableSimulationError`` otherwise) and that
the list never overflowed. No barostat: the box is fixed.
"""
from __future__ import annotations

import functools
import math
import time
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from ..errors import ParameterError, UnstableSimulationError
from .forcefield import ForceField
from .neighbors import NeighborList, NeighborListSpec


class State(NamedTuple):
    pos: jax.Array
    vel: jax.Array
    force: jax.Array
    potential: jax.Array
    nl: NeighborList
    key: jax.Array


def fcc_lattice(cells: int, density: float):
    """4 * cells^3 atoms on an fcc lattice at ``density``; returns (positions, box edge)."""
    edge = (4.0 / density) ** (1.0 / 3.0)
    basis = np.array([[0, 0, 0], [0.5, 0.5, 0], [0.5, 0, 0.5], [0, 0.5, 0.5]])
    grid = np.stack(np.meshgrid(*[np.arange(cells)] * 3, indexing="ij"), -1).reshape(-1, 1, 3)
    pos = ((grid + basis[None]) * edge).reshape(-1, 3) + 0.25 * edge
    return pos, cells * edge


def maxwell_boltzmann(key, n: int, kT: float, mass: float = 1.0):
    """Velocities at temperature ``kT`` with zero total momentum, rescaled to exactly ``kT``."""
    if n < 2:
        raise ParameterError(f"Maxwell-Boltzmann velocities with zero total momentum need at least 2 atoms, got {n}")
    vel = jax.random.normal(key, (n, 3), dtype=jnp.float64) * math.sqrt(kT / mass)
    vel = vel - vel.mean(axis=0)
    return vel * jnp.sqrt(kT / temperature(vel, mass))


def kinetic_energy(vel, mass: float = 1.0):
    return 0.5 * mass * jnp.sum(vel * vel)


def temperature(vel, mass: float = 1.0):
    """Instantaneous temperature with 3N - 3 degrees of freedom (momentum conserved)."""
    return 2.0 * kinetic_energy(vel, mass) / (3 * vel.shape[0] - 3)


def initial_state(ff: ForceField, spec: NeighborListSpec, pos, vel, key) -> State:
    pos = jnp.asarray(pos)
    nl = spec.build(pos)
    potential, force = ff.energy_and_forces(pos, nl.neighbors)
    return State(pos, jnp.asarray(vel), force, potential, nl, key)


def _forces(ff, spec, state_pos, nl):
    nl = spec.update(nl, state_pos)
    potential, force = ff.energy_and_forces(state_pos, nl.neighbors)
    return nl, potential, force


def verlet_step(ff: ForceField, spec: NeighborListSpec, state: State, dt: float, mass: float = 1.0) -> State:
    vel = state.vel + 0.5 * dt * state.force / mass
    pos = state.pos + dt * vel
    nl, potential, force = _forces(ff, spec, pos, state.nl)
    vel = vel + 0.5 * dt * force / mass
    return State(pos, vel, force, potential, nl, state.key)


def baoab_step(ff: ForceField, spec: NeighborListSpec, state: State, dt: float, kT: float,
               gamma: float, mass: float = 1.0) -> State:
    """BAOAB splitting of Langevin dynamics (Leimkuhler & Matthews)."""
    key, noise_key = jax.random.split(state.key)
    vel = state.vel + 0.5 * dt * state.force / mass                                  # B
    pos = state.pos + 0.5 * dt * vel                                                 # A
    c1 = math.exp(-gamma * dt)
    noise = jax.random.normal(noise_key, vel.shape, dtype=vel.dtype)
    vel = c1 * vel + math.sqrt((1.0 - c1 * c1) * kT / mass) * noise                  # O
    pos = pos + 0.5 * dt * vel                                                       # A
    nl, potential, force = _forces(ff, spec, pos, state.nl)
    vel = vel + 0.5 * dt * force / mass                                              # B
    return State(pos, vel, force, potential, nl, key)


def chunk_lengths(steps: int, chunk: int, dt: float, *, kT: float = 0.0, gamma: float = 0.0) -> list[int]:
    """The lengths of the jitted chunks that integrate exactly ``steps`` steps: full chunks, then
    the remainder; ``ParameterError`` for a time step, step count, chunk, temperature or friction
    that no integrator here can use."""
    try:
        positive = math.isfinite(float(dt)) and float(dt) > 0
    except (TypeError, ValueError):
        positive = False
    if not positive:
        raise ParameterError(f"the time step dt must be a positive finite number, got {dt!r}")
    if int(steps) != steps or steps < 0 or int(chunk) != chunk or chunk < 1:
        raise ParameterError(f"steps must be an integer >= 0 and chunk >= 1, got steps={steps!r}, chunk={chunk!r}")
    if not (math.isfinite(kT) and kT >= 0 and math.isfinite(gamma) and gamma >= 0):
        raise ParameterError(f"the temperature kT and the friction gamma must be finite and >= 0, got kT={kT!r}, "
                             f"gamma={gamma!r}")
    steps, chunk = int(steps), int(chunk)
    return [chunk] * (steps // chunk) + ([steps % chunk] if steps % chunk else [])


def check_finite(pos, potential, kinetic, step: int, dt: float) -> None:
    """Raise ``UnstableSimulationError`` when a run's positions or energies stopped being finite."""
    if not (np.isfinite(potential) and np.isfinite(kinetic) and bool(jnp.all(jnp.isfinite(pos)))):
        raise UnstableSimulationError(
            f"the simulation blew up by step {step}: non-finite positions or energies (potential {potential}, "
            f"kinetic {kinetic}); the time step dt = {dt:g} is too large for these forces, or atoms started "
            "overlapping. The returned state would be meaningless")


def run(ff: ForceField, spec: NeighborListSpec, state: State, steps: int, dt: float, *,
        ensemble: str = "nve", kT: float = 1.0, gamma: float = 1.0, chunk: int = 10, progress=None):
    """Integrate exactly ``steps`` steps of ``dt`` in jitted chunks of ``chunk`` (the last one shorter
    when ``chunk`` does not divide ``steps``); returns (state, record dict, seconds timed, steps timed),
    timing the full chunks after the first (compiling) one.

    ``record`` holds per-chunk step, potential, kinetic and total energy and temperature. Raises
    ``ParameterError`` for a bad ``dt``, ``steps``, ``chunk``, ``kT`` or ``gamma``,
    ``UnstableSimulationError`` when the system blows up (non-finite energies), and
    ``NeighborListOverflowError`` when the neighbor list was too small.
    """
    if ensemble == "nve":
        lengths = chunk_lengths(steps, chunk, dt)
        step = lambda s: verlet_step(ff, spec, s, dt)
    elif ensemble == "langevin":
        lengths = chunk_lengths(steps, chunk, dt, kT=kT, gamma=gamma)
        step = lambda s: baoab_step(ff, spec, s, dt, kT, gamma)
    else:
        raise ParameterError(f"ensemble must be 'nve' or 'langevin', got {ensemble!r}")

    @functools.partial(jax.jit, static_argnums=1)
    def advance(s, length):
        s, _ = jax.lax.scan(lambda c, _: (step(c), None), s, None, length=length)
        return s

    record = {k: [] for k in ("step", "potential", "kinetic", "total", "temperature")}
    timed_seconds, timed_steps, started, done = 0.0, 0, None, 0
    for c, length in enumerate(lengths):
        state = advance(state, length)
        state.pos.block_until_ready()
        now = time.perf_counter()
        if started is not None and length == chunk:      # (a shorter last chunk compiles anew)
            timed_seconds += now - started
            timed_steps += length
        started = now
        done += length
        ke, pe = float(kinetic_energy(state.vel)), float(state.potential)
        check_finite(state.pos, pe, ke, done, dt)       # first: a blown-up list also looks overflowed
        spec.check_overflow(state.nl)
        record["step"].append(done)
        record["potential"].append(pe)
        record["kinetic"].append(ke)
        record["total"].append(pe + ke)
        record["temperature"].append(float(temperature(state.vel)))
        if progress is not None:
            progress(c + 1, len(lengths))
    return state, {k: np.asarray(v) for k, v in record.items()}, timed_seconds, timed_steps


def radial_distribution(pos, box, neighbors, r_max: float, bins: int = 100):
    """g(r) up to ``r_max`` (at most the list's cutoff + skin) from a full neighbor list."""
    pos, box, neighbors = np.asarray(pos), np.asarray(box), np.asarray(neighbors)
    i, k = np.nonzero(neighbors >= 0)
    d = pos[neighbors[i, k]] - pos[i]
    d -= box * np.floor(d / box + 0.5)
    r = np.sqrt((d * d).sum(-1))
    counts, edges = np.histogram(r, bins=bins, range=(0.0, r_max))
    shell = 4.0 / 3.0 * np.pi * (edges[1:] ** 3 - edges[:-1] ** 3)
    density = len(pos) / np.prod(box)
    return 0.5 * (edges[1:] + edges[:-1]), counts / (len(pos) * density * shell)
