"""Gradient-based molecular simulation on adoffload kernels.

Force fields (Lennard-Jones, Morse, damped shifted-force Coulomb, harmonic bonds and angles)
over fixed-capacity Verlet neighbor lists built on device from cell lists; forces are
minus the gradient of the energy, from the energy kernels' adjoints. Each piece runs on
the adoffload kernels (``backend="adoffload"``) or on a plain-JAX reference of the same
physics (``backend="jax"``). Also: FIRE minimization and basin hopping (``optimize``), a
cut-and-splice genetic algorithm for cluster global minima (``genetic``),
velocity Verlet and BAOAB Langevin dynamics (``dynamics``), and an ASE calculator
(``ase_calculator``, needs ``pip install ase``). Everything computes in float64: enable
``jax_enable_x64`` (integer or float32 positions are converted to float64).

What it does not do, plainly:

* boxes are orthorhombic (three edge lengths), periodic in all three directions, with
  cutoff + skin at most half the shortest edge (one image per pair); a triclinic cell, or a
  box too small, is a ``BoxError``. Free space is a box much larger than the system.
* each pair term has one parameter set for every pair of atoms: no atom types, per-type
  parameters or mixing rules (an array parameter is an ``ArgumentError``); one mass for all atoms.
* no virial, pressure or stress, and no barostat; Coulomb is damped-shifted-force (Wolf-type)
  with a cutoff, not Ewald.
* a ``NeighborList`` must come from a spec whose cutoff covers every term's cutoff (the energy
  functions take only its index table and cannot check), and its overflow is reported only by
  ``NeighborListSpec.check_overflow`` (``dynamics.run`` and the ASE calculator call it): results
  computed with an overflowed list are wrong.
"""
from .backend import BACKENDS, available, default_backend, device_available, get_backend
from ..errors import (BackendUnavailableError, BoxError, Float64RequiredError, NeighborListOverflowError,
                     OptionalDependencyError, ParameterError, UnstableSimulationError)
from .forcefield import Coulomb, ForceField, HarmonicAngles, HarmonicBonds, LennardJones, Morse, as_box
from .neighbors import NeighborList, NeighborListSpec, brute_force_neighbors, estimate_capacity

__all__ = [
    "BACKENDS", "available", "default_backend", "device_available", "get_backend",
    "BackendUnavailableError", "BoxError", "Float64RequiredError", "NeighborListOverflowError",
    "OptionalDependencyError", "ParameterError", "UnstableSimulationError",
    "Coulomb", "ForceField", "HarmonicAngles", "HarmonicBonds", "LennardJones", "Morse", "as_box",
    "NeighborList", "NeighborListSpec", "brute_force_neighbors", "estimate_capacity",
]


def __getattr__(name):
    if name == "AdoCalculator":
        from .ase_calculator import AdoCalculator
        return AdoCalculator
    raise AttributeError(name)
