"""The chemistry library used as an outside scientist would: inputs that once gave silently wrong
results (now converted or refused), edge cases (no atoms, linear angles, clusters in periodic
boxes), and the MD driver's bookkeeping, each against an independent numpy or ASE oracle."""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from adoffload import errors
from adoffload.chemistry import (Coulomb, ForceField, HarmonicAngles, HarmonicBonds, LennardJones, Morse,
                                 NeighborListSpec, brute_force_neighbors)


def _rows(nl):
    return [set(int(j) for j in row if j >= 0) for row in np.asarray(nl.neighbors)]


def _numpy_lj(pos, box, sigma, epsilon, cutoff):
    """Truncated-and-shifted LJ energy of all minimum-image pairs, O(N^2) in numpy."""
    pos, box = np.asarray(pos, float), np.asarray(box, float)
    d = pos[None] - pos[:, None]
    d -= box * np.floor(d / box + 0.5)
    r = np.sqrt((d * d).sum(-1))[np.triu_indices(len(pos), 1)]
    r = r[r < cutoff]
    v = lambda x: 4 * epsilon * ((sigma / x) ** 12 - (sigma / x) ** 6)
    return float(np.sum(v(r) - v(cutoff)))


# --- positions and boxes ---------------------------------------------------------------------

def test_integer_positions_keep_a_fractional_box(primal_backend):
    """Integer coordinates once cast the box to integers (6.5 -> 6) on the JAX backend: atoms 5
    apart became 1 apart, neighbors and energy silently wrong."""
    pos = np.array([[0, 0, 0], [5, 0, 0], [0, 2, 0]])
    box = (6.5, 6.5, 6.5)
    spec = NeighborListSpec(box, 1.2, 0.3, capacity=4, backend=primal_backend, method="all_pairs")
    nl = spec.build(jnp.asarray(pos))
    assert _rows(nl) == brute_force_neighbors(pos.astype(float), box, 1.5)
    assert nl.reference.dtype == jnp.float64


def test_integer_positions_give_the_float_energy(backend):
    pos = np.array([[0, 0, 0], [5, 0, 0], [0, 1, 0]])
    box = (6.5, 6.5, 6.5)
    ff = ForceField((LennardJones(cutoff=2.0),), box, backend=backend)
    neighbors = jnp.asarray([[1, 2], [0, 2], [0, 1]])
    energy, forces = ff.energy_and_forces(jnp.asarray(pos), neighbors)
    assert float(energy) == pytest.approx(_numpy_lj(pos, box, 1.0, 1.0, 2.0), rel=1e-12)
    assert float(ff.energy(jnp.asarray(pos), neighbors)) == pytest.approx(float(energy), rel=1e-12)


@pytest.mark.parametrize("shape", [(3, 10), (10, 2), (10,), (10, 3, 1)])
def test_positions_must_be_n_by_3(primal_backend, shape):
    """A (3, N) array was read by the kernels as three atoms (the first three columns)."""
    pos = jnp.asarray(np.random.default_rng(0).uniform(0, 8, shape))
    spec = NeighborListSpec((8.0, 8.0, 8.0), 2.0, 0.3, capacity=16, backend=primal_backend)
    with pytest.raises(errors.ShapeError, match=r"\(N, 3\)"):
        spec.build(pos)
    ff = ForceField((LennardJones(cutoff=2.0),), (8.0, 8.0, 8.0), backend=primal_backend)
    with pytest.raises(errors.ShapeError, match=r"\(N, 3\)"):
        ff.energy(pos, jnp.full((shape[0], 4), -1))


def test_no_atoms(backend):
    ff = ForceField((LennardJones(cutoff=2.0),), (8.0, 8.0, 8.0), backend=backend)
    spec = ff.neighbor_list(0, capacity=8)
    nl = spec.build(jnp.zeros((0, 3)))
    spec.check_overflow(nl)
    assert nl.neighbors.shape == (0, 8) and not bool(spec.needs_rebuild(nl, jnp.zeros((0, 3))))
    energy, forces = ff.energy_and_forces(jnp.zeros((0, 3)), nl.neighbors)
    assert float(energy) == 0.0 and forces.shape == (0, 3)


def test_boxes_that_cannot_be_used_are_refused():
    with pytest.raises(errors.BoxError, match="triclinic"):
        NeighborListSpec([[10.0, 0, 0], [3.0, 10.0, 0], [0, 0, 10.0]], 2.0)
    with pytest.raises(errors.BoxError, match="positive and finite"):
        ForceField((LennardJones(),), (10.0, 0.0, 10.0))
    with pytest.raises(errors.BoxError, match="three edge lengths"):
        ForceField((LennardJones(),), (10.0, 10.0))
    spec = NeighborListSpec(np.diag([10.0, 11.0, 12.0]), 2.0)     # a diagonal cell matrix is a box
    assert spec.box == (10.0, 11.0, 12.0)
    with pytest.raises(errors.BoxError, match="smaller skin"):
        NeighborListSpec((6.0, 6.0, 6.0), 2.9, 0.3)


# --- force-field parameters --------------------------------------------------------------------

@pytest.mark.parametrize("term", [LennardJones(sigma=np.linspace(0.9, 1.1, 12), cutoff=2.5),
                                  Morse(depth=np.ones(12), cutoff=2.5)], ids=["lj", "morse"])
def test_pair_parameters_must_be_scalars(backend, term):
    """A per-atom sigma broadcast against the (N, capacity) neighbor table on the JAX backend (capacity
    == N): each slot got the sigma of the slot's index, not of either atom, silently."""
    pos = jnp.asarray(np.random.default_rng(1).uniform(0, 8, (12, 3)))
    ff = ForceField((term,), (8.0, 8.0, 8.0), backend=backend)
    nl = ff.neighbor_list(12, capacity=12).build(pos)
    for evaluate in (ff.energy, ff.energy_and_forces):
        with pytest.raises(errors.ArgumentError, match="must be a scalar"):
            evaluate(pos, nl.neighbors)


def test_charges_must_match_the_atoms(backend):
    """One charge for three atoms broadcast on the JAX backend (the others read as 0 in the gather)."""
    pos = jnp.asarray([[5.0, 5, 5], [6.0, 5, 5], [5.0, 6.5, 5]])
    for charges in [(1.0,), (1.0, -1.0)]:
        ff = ForceField((Coulomb(charges=charges, cutoff=3.0),), (20.0, 20.0, 20.0), backend=backend)
        nl = ff.neighbor_list(3, capacity=4).build(pos)
        with pytest.raises(errors.ShapeError, match="one value per atom"):
            ff.energy_and_forces(pos, nl.neighbors)


@pytest.mark.parametrize("bonds, k, message", [(((0, 1), (1, 5)), (10.0, 10.0), "indices must be in"),
                                               (((0, -1),), (10.0,), "indices must be in"),
                                               (((0, 1), (1, 2)), (10.0,), "one value per row")])
def test_bond_tables_are_checked(backend, bonds, k, message):
    """The JAX backend clamped index 5 to the last atom, wrapped -1 to it, and broadcast one k over
    every bond: energies of bonds that do not exist, silently."""
    pos = jnp.asarray([[5.0, 5, 5], [6.1, 5, 5], [7.3, 5.2, 5]])
    ff = ForceField((HarmonicBonds(bonds=bonds, k=k, r0=(1.0,) * len(k)),), (20.0, 20.0, 20.0), backend=backend)
    with pytest.raises((errors.ArgumentError, errors.ShapeError), match=message):
        ff.energy_and_forces(pos, jnp.full((3, 1), -1))
    angles = HarmonicAngles(angles=((0, 1, 3),), k=(1.0,), theta0=(2.0,))
    with pytest.raises(errors.ArgumentError, match="indices must be in"):
        ForceField((angles,), (20.0, 20.0, 20.0), backend=backend).energy(pos, jnp.full((3, 1), -1))


@pytest.mark.parametrize("theta0", [np.pi, 2.0])
def test_linear_angle_has_finite_forces(backend, theta0):
    """A linear triatomic (CO2 from a builder) gave NaN forces: sqrt'(0) in |a x b|. The force of an
    exactly linear angle is zero by symmetry; slightly bent, the forces match finite differences."""
    box = (20.0, 20.0, 20.0)
    ff = ForceField((HarmonicAngles(angles=((0, 1, 2),), k=(5.0,), theta0=(theta0,)),), box, backend=backend)
    nb = jnp.full((3, 1), -1)
    linear = np.array([[5.0, 5, 5], [6.16, 5, 5], [7.32, 5, 5]])
    energy, forces = ff.energy_and_forces(jnp.asarray(linear), nb)
    assert np.all(np.isfinite(np.asarray(forces))) and np.abs(np.asarray(forces)).max() < 1e-12
    assert float(energy) == pytest.approx(0.5 * 5.0 * (np.pi - theta0) ** 2, abs=1e-12)
    bent = linear.copy()
    bent[2, 1] += 0.3
    forces = np.asarray(ff.forces(jnp.asarray(bent), nb))
    h = 1e-6
    for atom, axis in [(0, 1), (1, 0), (2, 1), (2, 0)]:
        plus, minus = bent.copy(), bent.copy()
        plus[atom, axis] += h
        minus[atom, axis] -= h
        fd = -(float(ff.energy(jnp.asarray(plus), nb)) - float(ff.energy(jnp.asarray(minus), nb))) / (2 * h)
        assert forces[atom, axis] == pytest.approx(fd, rel=1e-6, abs=1e-8)


# --- neighbor-list capacity --------------------------------------------------------------------

def test_over_full_cell_names_max_per_cell():
    """A dense crystallite in a large periodic box overflows the JAX reference's per-cell slots; the
    error once asked for a larger capacity (reporting capacity + 1 neighbors), which never helped."""
    from adoffload.chemistry.dynamics import fcc_lattice
    pos, _ = fcc_lattice(4, 0.9)
    ff = ForceField((LennardJones(cutoff=2.5),), (30.0, 30.0, 30.0), backend="jax")
    spec = ff.neighbor_list(len(pos), capacity=400)
    nl = spec.build(jnp.asarray(pos))
    with pytest.raises(errors.NeighborListOverflowError, match="max_per_cell >= "):
        spec.check_overflow(nl)
    spec = ff.neighbor_list(len(pos), capacity=400, max_per_cell=int(nl.cell_peak))
    nl = spec.build(jnp.asarray(pos))
    spec.check_overflow(nl)
    assert _rows(nl) == brute_force_neighbors(pos, spec.box, spec.radius)


# --- molecular dynamics --------------------------------------------------------------------------

def _md_system():
    from adoffload.chemistry.dynamics import fcc_lattice, initial_state, maxwell_boltzmann
    pos, edge = fcc_lattice(4, 0.8)
    ff = ForceField((LennardJones(cutoff=2.5),), (edge,) * 3, backend="jax")
    spec = ff.neighbor_list(len(pos), skin=0.3)
    keys = jax.random.split(jax.random.PRNGKey(0))
    return ff, spec, initial_state(ff, spec, pos, maxwell_boltzmann(keys[0], len(pos), 1.0), keys[1])


@pytest.mark.parametrize("steps, chunk", [(25, 10), (5, 10)])
def test_run_integrates_exactly_the_steps_asked(steps, chunk):
    """run() rounded steps down to whole chunks (25 -> 20) and ran a whole chunk for fewer (5 -> 10)."""
    from adoffload.chemistry.dynamics import run, verlet_step
    ff, spec, state = _md_system()
    final, record, _, _ = run(ff, spec, state, steps, 0.002, chunk=chunk)
    by_hand = state
    for _ in range(steps):
        by_hand = verlet_step(ff, spec, by_hand, 0.002)
    np.testing.assert_allclose(np.asarray(final.pos), np.asarray(by_hand.pos), rtol=0, atol=1e-12)
    assert record["step"][-1] == steps


def test_run_refuses_parameters_no_integrator_can_use():
    from adoffload.chemistry.dynamics import run
    ff, spec, state = _md_system()
    for dt in (0.0, -0.002, float("nan")):
        with pytest.raises(errors.ParameterError, match="time step"):
            run(ff, spec, state, 10, dt)
    with pytest.raises(errors.ParameterError, match="friction"):
        run(ff, spec, state, 10, 0.002, ensemble="langevin", gamma=-1.0)     # once math.sqrt's domain error
    with pytest.raises(errors.ParameterError, match="chunk"):
        run(ff, spec, state, 10, 0.002, chunk=0)


def test_run_reports_a_blown_up_system():
    """Two atoms on one site: infinite energy, NaN forces. run() returned NaN records silently (or,
    on the JAX backend, a misleading neighbor-list overflow)."""
    from adoffload.chemistry.dynamics import initial_state, run
    ff, spec, state = _md_system()
    pos = np.asarray(state.pos).copy()
    pos[1] = pos[0]
    state = initial_state(ff, spec, pos, state.vel, state.key)
    with pytest.raises(errors.UnstableSimulationError, match="blew up by step 10"):
        run(ff, spec, state, 20, 0.002)


# --- the ASE calculator ----------------------------------------------------------------------------

def test_ase_pbc_without_a_cell_is_a_box_error():
    pytest.importorskip("ase")
    from ase.cluster import Icosahedron
    from adoffload.chemistry.ase_calculator import AdoCalculator
    atoms = Icosahedron("Ar", 2, latticeconstant=1.5)
    atoms.pbc = True                                    # once a ZeroDivisionError
    atoms.calc = AdoCalculator([LennardJones(cutoff=2.5)], backend="jax")
    with pytest.raises(errors.BoxError, match="zero edge"):
        atoms.get_potential_energy()


def test_ase_small_cell_shrinks_the_skin_and_matches_ase(backend):
    """A cutoff that fits half the cell but not with the skin was refused; the skin is a performance
    choice, so the calculator shrinks it. Compared with ASE's own Lennard-Jones."""
    pytest.importorskip("ase")
    from ase.calculators.lj import LennardJones as AseLJ
    from ase.lattice.cubic import FaceCenteredCubic
    from adoffload.chemistry.ase_calculator import AdoCalculator
    atoms = FaceCenteredCubic("Ar", size=(4, 4, 4), latticeconstant=1.6)     # cell 6.4, cutoff 3.0, skin 0.5
    atoms.rattle(0.05, seed=2)
    reference = atoms.copy()
    reference.calc = AseLJ(sigma=1.0, epsilon=1.0, rc=3.0, smooth=False)
    atoms.calc = AdoCalculator([LennardJones(cutoff=3.0)], backend=backend, skin=0.5)
    assert atoms.get_potential_energy() == pytest.approx(reference.get_potential_energy(), rel=1e-10)
    np.testing.assert_allclose(atoms.get_forces(), reference.get_forces(), rtol=1e-8, atol=1e-10)
    with pytest.raises(errors.BoxError, match="half the shortest cell edge"):
        atoms.calc = AdoCalculator([LennardJones(cutoff=3.3)], backend=backend)
        atoms.get_potential_energy()


def test_ase_cluster_in_a_periodic_box_on_the_jax_backend():
    """A cluster in a large periodic cell packs more atoms per cell than the mean density: the JAX
    backend's cell list (capacity could not fix it) now grows its per-cell slots."""
    pytest.importorskip("ase")
    from ase.calculators.lj import LennardJones as AseLJ
    from ase.cluster import Icosahedron
    from adoffload.chemistry.ase_calculator import AdoCalculator
    atoms = Icosahedron("Ar", 5, latticeconstant=1.5)
    atoms.rattle(0.01, seed=0)
    atoms.cell = [25.0, 25.0, 25.0]
    atoms.pbc = True
    reference = atoms.copy()
    reference.calc = AseLJ(sigma=1.0, epsilon=1.0, rc=2.5, smooth=False)
    atoms.calc = calculator = AdoCalculator([LennardJones(cutoff=2.5)], backend="jax", skin=0.3)
    assert atoms.get_potential_energy() == pytest.approx(reference.get_potential_energy(), rel=1e-10)
    np.testing.assert_allclose(atoms.get_forces(), reference.get_forces(), rtol=1e-8, atol=1e-10)
    mean = len(atoms) / 25.0 ** 3 * 2.8 ** 3                 # what the density alone gives a cell
    assert calculator.spec.max_per_cell >= int(calculator.neighbor_list.cell_peak) > 2 * mean + 16


def test_free_cluster_in_a_huge_box(primal_backend):
    """A very large box means free space (reference.py), but the cell list once asked for box^3 /
    radius^3 cells: 4.5e10 for a 10^4 box. The cell count is capped; cells only get larger."""
    pytest.importorskip("ase")
    from ase.cluster import Icosahedron
    positions = Icosahedron("Ar", 3, latticeconstant=1.5).positions + 5000.0
    box = (1.0e4,) * 3
    spec = NeighborListSpec(box, 2.5, 0.3, capacity=64, backend=primal_backend, max_per_cell=len(positions))
    assert spec.uses_cells and int(np.prod(spec.cells_per_side)) <= 2 ** 21
    assert all(b / c >= spec.radius for b, c in zip(box, spec.cells_per_side))
    nl = spec.build(jnp.asarray(positions))
    spec.check_overflow(nl)
    assert _rows(nl) == brute_force_neighbors(positions, box, spec.radius)
