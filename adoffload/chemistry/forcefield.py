"""Force fields as sums of energy terms; forces are minus the gradient of the total energy.

Each term computes its energy with the chosen backend's function (an adoffload kernel
or the JAX reference). ``ForceField.energy_and_forces`` asks each term for both at once: a
pair term runs its fused ``*_energy_forces`` kernel (one launch: a gather over the full
neighbor list whose pair force is AD of the pair potential inside the kernel, no atomics);
the other terms (bonds, angles) take ``jax.value_and_grad`` of their energy, which with the
adoffload backend runs the energy kernel's adjoint. Parameters are a pytree
(``{term name: {parameter: value}}``), so gradients with respect to them, and of forces
(force matching), come from the same AD (``fit_potential.py``). A force-matching gradient in
the parameters alone is one launch of the fused kernel in vector forward mode (one lane per
scalar parameter, ``jax/scalar_jvp.py``); with positions differentiated too it is the reverse
sweep of the fused kernel.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import jax
import jax.numpy as jnp
import numpy as np

from .backend import get_backend
from ..errors import ArgumentError, Float64RequiredError, ShapeError
from .neighbors import NeighborListSpec, as_positions, check_box, estimate_capacity


def _scalars(term, p):
    """``p`` (a term's parameters) after checking each is one number: the pair terms have one
    parameter set for every pair (no per-atom or per-type parameters, no mixing rules); an array
    here would broadcast against the (N, capacity) neighbor table and give a wrong energy."""
    for key, value in p.items():
        if jnp.ndim(value) != 0:
            raise ArgumentError(f"{type(term).__name__} parameter '{key}' must be a scalar, got shape "
                                f"{jnp.shape(value)}: one parameter set applies to every pair of atoms (per-atom or "
                                f"per-type parameters and mixing rules are not supported)")
    return p


def _per_atom(term, what, values, n_atoms):
    if jnp.shape(values) != (n_atoms,):
        raise ShapeError(f"{type(term).__name__} '{term.name}': {what} must have one value per atom, "
                         f"({n_atoms},), got shape {jnp.shape(values)}")
    return values


def _indices(term, rows, width, n_atoms, per_row):
    """The (M, width) int64 index table of a bonded term, checked against ``n_atoms`` and the
    lengths of its per-row parameters (on the host: the tables are static)."""
    table = np.asarray(rows, dtype=np.int64).reshape(-1, width) if len(rows) else np.zeros((0, width), np.int64)
    if table.size and (table.min() < 0 or table.max() >= n_atoms):
        raise ArgumentError(f"{type(term).__name__} '{term.name}': atom indices must be in [0, {n_atoms}) for "
                            f"{n_atoms} atoms, got {table.min()}..{table.max()}")
    for key, value in per_row.items():
        if jnp.shape(value) != (len(table),):
            raise ShapeError(f"{type(term).__name__} '{term.name}': '{key}' must have one value per row "
                             f"({len(table)},), got shape {jnp.shape(value)}")
    return jnp.asarray(table)


@dataclass(frozen=True)
class LennardJones:
    sigma: float = 1.0
    epsilon: float = 1.0
    cutoff: float = 2.5
    name: str = "lj"

    def parameters(self):
        return {"sigma": self.sigma, "epsilon": self.epsilon}

    def energy(self, backend, pos, box, neighbors, p):
        p = _scalars(self, p)
        return jnp.sum(backend.lj_energy(pos, box, neighbors, p["sigma"], p["epsilon"], self.cutoff))

    def energy_and_forces(self, backend, pos, box, neighbors, p):
        p = _scalars(self, p)
        e, forces = backend.lj_energy_forces(pos, box, neighbors, p["sigma"], p["epsilon"], self.cutoff)
        return jnp.sum(e), forces


@dataclass(frozen=True)
class Morse:
    depth: float = 1.0
    alpha: float = 1.5
    r0: float = 1.2
    cutoff: float = 3.0
    name: str = "morse"

    def parameters(self):
        return {"depth": self.depth, "alpha": self.alpha, "r0": self.r0}

    def energy(self, backend, pos, box, neighbors, p):
        p = _scalars(self, p)
        return jnp.sum(backend.morse_energy(pos, box, neighbors, p["depth"], p["alpha"], p["r0"], self.cutoff))

    def energy_and_forces(self, backend, pos, box, neighbors, p):
        p = _scalars(self, p)
        e, forces = backend.morse_energy_forces(pos, box, neighbors, p["depth"], p["alpha"], p["r0"], self.cutoff)
        return jnp.sum(e), forces


@dataclass(frozen=True)
class Coulomb:
    """Damped shifted-force (Wolf-type) Coulomb with per-atom charges."""
    charges: tuple = ()
    alpha: float = 0.2
    cutoff: float = 3.0
    coulomb_constant: float = 1.0
    name: str = "coulomb"

    def parameters(self):
        return {"charges": jnp.asarray(self.charges, dtype=jnp.float64)}

    def energy(self, backend, pos, box, neighbors, p):
        charges = _per_atom(self, "charges", p["charges"], pos.shape[0])
        return jnp.sum(backend.coulomb_energy(pos, box, neighbors, charges, self.alpha, self.cutoff,
                                              self.coulomb_constant))

    def energy_and_forces(self, backend, pos, box, neighbors, p):
        charges = _per_atom(self, "charges", p["charges"], pos.shape[0])
        e, forces = backend.coulomb_energy_forces(pos, box, neighbors, charges, self.alpha, self.cutoff,
                                                  self.coulomb_constant)
        return jnp.sum(e), forces


@dataclass(frozen=True)
class HarmonicBonds:
    bonds: tuple = ()           # ((i, j), ...)
    k: tuple = ()
    r0: tuple = ()
    name: str = "bonds"
    cutoff: float = 0.0

    def parameters(self):
        return {"k": jnp.asarray(self.k, dtype=jnp.float64), "r0": jnp.asarray(self.r0, dtype=jnp.float64)}

    def energy(self, backend, pos, box, neighbors, p):
        bonds = _indices(self, self.bonds, 2, pos.shape[0], p)
        return jnp.sum(backend.bond_energy(pos, box, bonds, p["k"], p["r0"]))


@dataclass(frozen=True)
class HarmonicAngles:
    angles: tuple = ()          # ((i, center, j), ...)
    k: tuple = ()
    theta0: tuple = ()
    name: str = "angles"
    cutoff: float = 0.0

    def parameters(self):
        return {"k": jnp.asarray(self.k, dtype=jnp.float64), "theta0": jnp.asarray(self.theta0, dtype=jnp.float64)}

    def energy(self, backend, pos, box, neighbors, p):
        angles = _indices(self, self.angles, 3, pos.shape[0], p)
        return jnp.sum(backend.angle_energy(pos, box, angles, p["k"], p["theta0"]))


def require_float64() -> None:
    if not jax.config.read("jax_enable_x64"):
        raise Float64RequiredError("adoffload.chemistry computes in float64: call "
                                   "jax.config.update('jax_enable_x64', True) before using it")


@dataclass(frozen=True)
class ForceField:
    terms: tuple
    box: tuple[float, float, float]
    backend: str = "adoffload"
    parameters: dict = field(default=None, compare=False, hash=False)

    def __post_init__(self):
        require_float64()
        object.__setattr__(self, "box", check_box(self.box))
        names = [t.name for t in self.terms]
        if len(set(names)) != len(names):
            raise ValueError(f"force-field terms need distinct names, got {names}")
        if self.parameters is None:
            object.__setattr__(self, "parameters", {t.name: t.parameters() for t in self.terms})

    @property
    def cutoff(self) -> float:
        return max(t.cutoff for t in self.terms)

    def neighbor_list(self, n_atoms: int, skin: float = 0.3, capacity: int | None = None, **options) -> NeighborListSpec:
        if self.cutoff <= 0:           # bonded terms only: the list is unused, keep it tiny
            return NeighborListSpec(tuple(self.box), 0.0, 0.0, 1, self.backend, method="all_pairs")
        capacity = capacity or estimate_capacity(n_atoms, self.box, self.cutoff, skin)
        if "max_per_cell" not in options:           # the reference scans this many slots per cell
            mean = n_atoms / float(np.prod(self.box)) * (self.cutoff + skin) ** 3
            options["max_per_cell"] = int(8 * np.ceil((2.0 * mean + 16) / 8))
        return NeighborListSpec(tuple(self.box), self.cutoff, skin, capacity, self.backend, **options)

    def energy(self, pos, neighbors, params=None):
        """Total potential energy; ``neighbors`` is the (N, capacity) index array of a NeighborList."""
        params = self.parameters if params is None else params
        pos = as_positions(pos)
        if pos.shape[0] == 0:
            return jnp.zeros((), pos.dtype)
        backend = get_backend(self.backend, adjoint=False)      # jax.grad of this runs the adjoints
        box = jnp.asarray(self.box, dtype=pos.dtype)
        return sum(t.energy(backend, pos, box, neighbors, params[t.name]) for t in self.terms)

    def energy_and_forces(self, pos, neighbors, params=None):
        """Total energy and forces; pair terms compute both in one fused launch each."""
        params = self.parameters if params is None else params
        pos = as_positions(pos)
        backend = get_backend(self.backend, adjoint=False)
        box = jnp.asarray(self.box, dtype=pos.dtype)
        energy = forces = None
        if pos.shape[0] == 0:           # no atoms: the kernels would launch no threads
            return jnp.zeros((), pos.dtype), jnp.zeros_like(pos)
        for term in self.terms:
            fused = getattr(term, "energy_and_forces", None)
            if fused is not None:
                e, f = fused(backend, pos, box, neighbors, params[term.name])
            else:
                e, gradient = jax.value_and_grad(
                    lambda x, t=term: t.energy(backend, x, box, neighbors, params[t.name]))(pos)
                f = -gradient
            energy, forces = (e, f) if energy is None else (energy + e, forces + f)   # no pass over zeros
        if energy is None:                  # no terms
            return jnp.zeros((), pos.dtype), jnp.zeros_like(pos)
        return energy, forces

    def forces(self, pos, neighbors, params=None):
        return self.energy_and_forces(pos, neighbors, params)[1]


def as_box(box) -> tuple[float, float, float]:
    """A cubic edge (one number) or three edges as a box tuple; a ``BoxError`` for anything else."""
    return check_box(box)
