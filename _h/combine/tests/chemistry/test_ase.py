"""The ASE calculator: energies and forces like ASE's own LJ, and BFGS relaxes LJ13 to its minimum."""
from __future__ import annotations

import numpy as np
import pytest

ase = pytest.importorskip("ase", reason="ASE is an optional extra (pip install ase)")


def test_matches_ase_lennard_jones_in_a_periodic_box(backend):
    from ase.calculators.lj import LennardJones as AseLJ
    from ase.lattice.cubic import FaceCenteredCubic
    from adoffload.chemistry import LennardJones
    from adoffload.chemistry.ase_calculator import AdoCalculator
    atoms = FaceCenteredCubic("Ar", size=(3, 3, 3), latticeconstant=5.26)
    atoms.rattle(0.1, seed=0)
    sigma, epsilon, cutoff = 3.4, 0.0104, 7.5
    reference = atoms.copy()
    reference.calc = AseLJ(sigma=sigma, epsilon=epsilon, rc=cutoff, smooth=False)
    atoms.calc = AdoCalculator([LennardJones(sigma=sigma, epsilon=epsilon, cutoff=cutoff)], backend=backend,
                               skin=0.3, capacity=96)
    assert atoms.get_potential_energy() == pytest.approx(reference.get_potential_energy(), rel=1e-9)
    np.testing.assert_allclose(atoms.get_forces(), reference.get_forces(), rtol=1e-7, atol=1e-10)


def test_bfgs_relaxes_lj13_to_the_icosahedron(backend):
    from ase.cluster import Icosahedron
    from ase.optimize import BFGS
    from adoffload.chemistry import LennardJones
    from adoffload.chemistry.ase_calculator import AdoCalculator
    atoms = Icosahedron("Ar", 2, latticeconstant=1.5)
    atoms.positions += np.random.default_rng(0).normal(0.0, 0.05, atoms.positions.shape)
    cutoff = 50.0                       # effectively untruncated: the shift is 78 pairs x 4 (1/50)^6
    atoms.calc = AdoCalculator([LennardJones(cutoff=cutoff)], backend=backend)
    assert atoms.get_potential_energy() > -44.0
    assert BFGS(atoms, logfile=None).run(fmax=1e-6, steps=300)
    shift = 78 * 4.0 * (cutoff ** -12 - cutoff ** -6)
    assert atoms.get_potential_energy() + shift == pytest.approx(-44.326801, abs=2e-6)
