"""An ASE ``Calculator`` driven by adoffload force fields (``pip install ase``).

    from adoffload.chemistry import LennardJones
    from adoffload.chemistry.ase_calculator import AdoCalculator
    atoms.calc = AdoCalculator([LennardJones(sigma=3.4, epsilon=0.0104, cutoff=8.5)])
    BFGS(atoms).run(fmax=1e-3)          # forces: -grad of the energy kernels (their adjoints)

Periodic systems need an orthorhombic cell with ``pbc`` all True and a cutoff of at most half
the shortest cell edge (one periodic image per pair; the skin is shrunk to fit when only it does
not); non-periodic systems (``pbc`` all False) are placed in a box large enough that no image is
ever seen and use all-pairs neighbor lists. Mixed ``pbc`` (slabs, wires) and triclinic cells are
refused (``BoxError``). The neighbor list is kept between calls and rebuilt by its skin
criterion, or from scratch when the cell or the number of atoms changes.

Limitations, plainly: the chemical species (``atoms.numbers``) are ignored, since every term has
one parameter set for all pairs (no per-species parameters or mixing rules), so a multi-species
system gets the same potential between every pair; ``Coulomb`` charges come from the term, not
from ``atoms``, and must match the number of atoms. Stress is not provided (``get_stress`` raises
ASE's ``PropertyNotImplementedError``): shear components would need strain-aware kernels.
"""
from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np

from .backend import default_backend
from ..errors import BoxError, OptionalDependencyError
from .forcefield import ForceField

try:
    from ase.calculators.calculator import Calculator, all_changes
except ImportError as error:                       # pragma: no cover - depends on the environment
    raise OptionalDependencyError("adoffload.chemistry.ase_calculator needs ASE: pip install ase "
                                  "(or pip install 'adoffload[ase]')") from error

# A free (non-periodic) system goes into a box this much larger than its extent (both sides).
FREE_BOX_PADDING = 1000.0


class AdoCalculator(Calculator):
    """Energy and forces from an adoffload ``ForceField`` built from ``terms``."""

    implemented_properties = ["energy", "free_energy", "forces"]

    def __init__(self, terms, *, backend: str = "auto", skin: float = 0.5, capacity: int | None = None, **kwargs):
        super().__init__(**kwargs)
        jax.config.update("jax_enable_x64", True)
        self.terms = tuple(terms)
        self.backend = default_backend() if backend == "auto" else backend
        self.skin, self.capacity = skin, capacity
        self._setup_key = None

    def _setup(self, atoms):
        """Force field, neighbor-list spec and jitted evaluator for this box (cached by box)."""
        box, method = self._box(atoms)
        key = (box, method, len(atoms))
        if key == self._setup_key:
            return
        self._setup_key = key
        self.forcefield = ForceField(self.terms, box, backend=self.backend)
        cutoff = self.forcefield.cutoff
        if 2 * cutoff > min(box):
            raise BoxError(f"the cutoff {cutoff:g} is more than half the shortest cell edge {min(box):g}: "
                           "AdoCalculator sees one periodic image per pair; use a larger supercell")
        skin = min(self.skin, 0.5 * min(box) - cutoff)      # only the skin too large: a smaller one is exact
        self.spec = self.forcefield.neighbor_list(len(atoms), skin=skin, capacity=self.capacity or len(atoms),
                                                  method=method)
        self.neighbor_list = None
        self._evaluate = jax.jit(self.forcefield.energy_and_forces)
        self._build = jax.jit(self.spec.build)

    def _grow_cells(self, cell_peak: int) -> None:
        """Give the JAX reference's cell list room for ``cell_peak`` atoms per cell (a cluster in a
        periodic box packs more atoms per cell than the mean density suggests)."""
        self.spec = dataclasses.replace(self.spec, max_per_cell=8 * -(-cell_peak // 8))
        self._build = jax.jit(self.spec.build)

    def _box(self, atoms):
        pbc = np.asarray(atoms.pbc)
        if pbc.all():
            cell = np.asarray(atoms.cell)
            if np.any(np.linalg.norm(cell, axis=1) == 0):
                raise BoxError(f"pbc is all True but the cell {cell.tolist()} has a zero edge: set atoms.cell, "
                               "or pbc=False for a free cluster")
            if np.abs(cell - np.diag(np.diag(cell))).max() > 1e-12:
                raise BoxError("AdoCalculator handles orthorhombic cells only (the cell matrix must be diagonal)")
            return tuple(float(x) for x in np.diag(cell)), "auto"
        if pbc.any():
            raise BoxError(f"AdoCalculator needs pbc all True or all False, got {pbc.tolist()}")
        extent = float(np.ptp(atoms.positions, axis=0).max()) if len(atoms) else 0.0
        # Quantized, so that a relaxing cluster keeps one box (and one compiled evaluator).
        return (FREE_BOX_PADDING * np.ceil((2.0 * extent + 1.0) / FREE_BOX_PADDING),) * 3, "all_pairs"

    def calculate(self, atoms=None, properties=("energy",), system_changes=all_changes):
        super().calculate(atoms, properties, system_changes)
        self._setup(self.atoms)
        pos = jnp.asarray(self.atoms.positions, dtype=jnp.float64)
        if self.neighbor_list is None or bool(self.spec.needs_rebuild(self.neighbor_list, pos)):
            self.neighbor_list = self._build(pos)
            cell_peak = int(self.neighbor_list.cell_peak)
            if self.spec.scans_cell_slots and cell_peak > self.spec.max_per_cell:
                self._grow_cells(cell_peak)
                self.neighbor_list = self._build(pos)
            self.spec.check_overflow(self.neighbor_list)
        energy, forces = self._evaluate(pos, self.neighbor_list.neighbors)
        self.results["energy"] = self.results["free_energy"] = float(energy)
        self.results["forces"] = np.asarray(forces)
