"""MD by spatial decomposition equals single-domain MD, on however many devices JAX sees.

In the main test run JAX has one CPU device (one domain); ``test_multidevice.py`` runs this
module again in subprocesses with 4 and 3 host devices (2 x 2 x 1 and 3 x 1 x 1 domains).
"""
from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from adoffload import BoxError, DomainOverflowError, ShardingError
from adoffload.chemistry import ForceField, LennardJones, Morse, HarmonicBonds, as_box, default_backend
from adoffload.chemistry.domains import Decomposition, domain_mesh
from adoffload.chemistry.dynamics import fcc_lattice, initial_state, maxwell_boltzmann, run, verlet_step

DT, CHUNK = 0.005, 20
THETA = {"lj": {"sigma": 1.02, "epsilon": 0.97}}
# The gradient tests compile a lot; with one device (one domain: no ghosts, no migration)
# they would only repeat the single-device path, so they run with 4 devices only.
several_devices = pytest.mark.skipif(len(jax.devices()) == 1, reason="one device is one domain, with no exchange "
                                     "to differentiate through; test_multidevice.py runs this on 4 host devices")


@pytest.fixture(scope="module")
def system():
    """500 LJ atoms (fcc, density 0.8, kT 1.5: it melts, so atoms cross domain faces)."""
    jax.config.update("jax_enable_x64", True)
    pos, edge = fcc_lattice(5, 0.8)
    ff = ForceField((LennardJones(cutoff=2.5),), as_box(edge), backend=default_backend())
    spec = ff.neighbor_list(len(pos), skin=0.3)
    vel = maxwell_boltzmann(jax.random.PRNGKey(0), len(pos), 1.5)
    mesh = domain_mesh(jax.devices(), ff.box, ff.cutoff + 0.3)
    dec = Decomposition.create(ff, mesh, len(pos), skin=0.3)
    state = dec.distribute(pos, np.asarray(vel))
    single = initial_state(ff, spec, pos, vel, jax.random.PRNGKey(1))
    return dict(ff=ff, spec=spec, dec=dec, state=state, single=single, n=len(pos), edge=edge)


def _wrapped_difference(a, b, edge):
    d = np.asarray(a) - np.asarray(b)
    return np.abs(d - edge * np.round(d / edge)).max()


def test_decomposed_energy_and_forces_equal_single_domain(system):
    dec, state, single = system["dec"], system["state"], system["single"]
    print(f"{dec.n_domains} domains {dec.shape}, backend {system['ff'].backend}")
    assert float(jnp.sum(state.potential)) == pytest.approx(float(single.potential), rel=1e-12)
    (force,) = dec.gather(state, [state.force])
    np.testing.assert_allclose(force, single.force, atol=1e-11)
    pos, vel = dec.gather(state)
    assert _wrapped_difference(pos, single.pos, system["edge"]) < 1e-12


def test_decomposed_nve_equals_single_domain_with_migration(system):
    """60 steps: positions, velocities and energies agree to round-off; rebuilds happen at the
    same steps; atoms migrated between domains; the NVE drift is the single-domain drift."""
    dec, n = system["dec"], system["n"]
    state, record, _, _ = dec.run(system["state"], 3 * CHUNK, DT, chunk=CHUNK)
    single, single_record, _, _ = run(system["ff"], system["spec"], system["single"], 3 * CHUNK, DT, chunk=CHUNK)
    np.testing.assert_allclose(record["total"], single_record["total"], rtol=1e-11)
    np.testing.assert_allclose(record["potential"], single_record["potential"], rtol=1e-11)
    pos, vel = dec.gather(state)
    assert _wrapped_difference(pos, single.pos, system["edge"]) < 1e-9
    np.testing.assert_allclose(vel, single.vel, atol=1e-9)
    assert int(state.builds[0]) == int(single.nl.builds) > 1
    drift = (record["total"][-1] - record["total"][0]) / n
    single_drift = (single_record["total"][-1] - single_record["total"][0]) / n
    assert abs(drift - single_drift) < 1e-12 and abs(drift) < 2e-3      # dt = 0.005 from a melting lattice
    peaks = dict(zip(("owned", "ghosts", "migrants", "neighbors", "jumps"), np.asarray(state.peaks).max(0)))
    if dec.n_domains > 1:
        assert peaks["migrants"] > 0 and peaks["ghosts"] > 0, peaks


@several_devices
def test_gradient_through_a_decomposed_trajectory_matches_single_device(system):
    """d/d(sigma, epsilon) of a loss on 8 decomposed NVE steps = the single-device gradient."""
    dec, n, ff, spec = system["dec"], system["n"], system["ff"], system["spec"]
    steps = 8

    def decomposed(theta):
        _, potential, kinetic = dec.simulate(system["state"], steps, DT, theta)
        return potential[-1] / n + jnp.mean(kinetic) / n

    def single(theta):
        field = dataclasses.replace(ff, parameters=theta)

        def step(s, _):
            s = verlet_step(field, spec, s, DT)
            return s, (s.potential, 0.5 * jnp.sum(s.vel ** 2))
        _, (potential, kinetic) = jax.lax.scan(step, system["single"], None, length=steps)
        return potential[-1] / n + jnp.mean(kinetic) / n

    got, expected = jax.grad(decomposed)(THETA), jax.grad(single)(THETA)
    for name in ("sigma", "epsilon"):
        assert float(got["lj"][name]) == pytest.approx(float(expected["lj"][name]), rel=1e-9)


@several_devices
def test_force_matching_gradient_on_decomposed_frames_matches_single_device(system):
    """Force matching over a sharded system: the loss's gradient differentiates the forces
    (reverse over reverse through the kernels) on every domain, summed over the mesh."""
    dec, ff, spec = system["dec"], system["ff"], system["spec"]
    later, _, _ = dec.simulate(system["state"], CHUNK, DT)
    frames = [system["state"], later]
    references = [(jnp.asarray(dec.gather(f)[0]), jnp.asarray(dec.gather(f, [f.force])[0])) for f in frames]

    def decomposed(theta):
        return sum(jnp.sum((dec.forces(f, theta) - f.force) ** 2) for f in frames)

    def single(theta):
        field = dataclasses.replace(ff, parameters=theta)
        return sum(jnp.sum((field.forces(p, spec.build(p).neighbors) - force) ** 2) for p, force in references)

    assert float(decomposed(THETA)) == pytest.approx(float(single(THETA)), rel=1e-10)
    got, expected = jax.grad(decomposed)(THETA), jax.grad(single)(THETA)
    for name in ("sigma", "epsilon"):
        assert float(got["lj"][name]) == pytest.approx(float(expected["lj"][name]), rel=1e-9)


def test_too_small_buffers_raise_instead_of_dropping_atoms(system):
    dec, pos = system["dec"], np.asarray(system["single"].pos)
    vel = np.asarray(system["single"].vel)
    with pytest.raises(DomainOverflowError, match="capacity >= "):
        dataclasses.replace(dec, capacity=system["n"] // (2 * dec.n_domains)).distribute(pos, vel)
    small = dataclasses.replace(dec, neighbor_capacity=8)
    with pytest.raises(DomainOverflowError, match="neighbor_capacity >= "):
        small.distribute(pos, vel)


def test_the_mesh_cuts_the_box_into_wide_enough_domains():
    device = jax.devices()[0]
    assert domain_mesh([device] * 4, (10.0, 10.0, 10.0), 2.8).devices.shape in {(2, 2, 1), (2, 1, 2), (1, 2, 2)}
    assert domain_mesh([device] * 3, (9.0, 9.0, 9.0), 2.8).devices.shape == (3, 1, 1)
    assert domain_mesh([device] * 4, (30.0, 6.0, 6.0), 2.8).devices.shape == (4, 1, 1)
    assert domain_mesh([device] * 2, (9.0, 9.0, 9.0), 2.8, shape=(1, 2, 1)).devices.shape == (1, 2, 1)
    with pytest.raises(BoxError, match="cannot be cut into 64 domains"):
        domain_mesh([device] * 64, (9.0, 9.0, 9.0), 2.8)
    with pytest.raises(ShardingError, match="needs 4 devices"):
        domain_mesh([device] * 2, (9.0, 9.0, 9.0), 2.8, shape=(2, 2, 1))


def test_terms_with_per_atom_data_are_refused(float64):
    ff = ForceField((Morse(cutoff=2.5), HarmonicBonds(bonds=((0, 1),), k=(1.0,), r0=(1.0,))), as_box(9.0),
                    backend="jax")
    with pytest.raises(ShardingError, match="'bonds'"):
        Decomposition.create(ff, domain_mesh(jax.devices()[:1], ff.box, 2.8), 100)
