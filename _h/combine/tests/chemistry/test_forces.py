"""Forces are minus the energy gradient: checked against central finite differences, per term."""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from adoffload.chemistry import (Coulomb, ForceField, HarmonicAngles, HarmonicBonds, LennardJones, Morse, as_box,
                                 get_backend)
from adoffload.chemistry import reference


def _liquid(n_side=3, density=0.7, seed=0):
    from adoffload.chemistry.dynamics import fcc_lattice
    pos, edge = fcc_lattice(n_side, density)
    pos = pos + np.random.default_rng(seed).normal(0.0, 0.1, pos.shape)
    return pos, edge


def _terms(n):
    rng = np.random.default_rng(1)
    charges = rng.normal(0.0, 0.5, n)
    charges -= charges.mean()
    bonds = tuple((i, i + 1) for i in range(0, 12, 2))
    angles = tuple((i, i + 1, i + 2) for i in range(0, 12, 3))
    return {
        "lj": LennardJones(cutoff=2.5),
        "morse": Morse(depth=0.8, alpha=1.6, r0=1.1, cutoff=2.5),
        "coulomb": Coulomb(charges=tuple(charges), alpha=0.3, cutoff=2.5),
        "bonds": HarmonicBonds(bonds=bonds, k=(50.0,) * len(bonds), r0=(1.0,) * len(bonds)),
        "angles": HarmonicAngles(angles=angles, k=(20.0,) * len(angles), theta0=(1.9,) * len(angles)),
    }


@pytest.mark.parametrize("term_name", ["lj", "morse", "coulomb", "bonds", "angles"])
def test_forces_match_finite_differences(backend, term_name):
    pos, edge = _liquid()
    term = _terms(len(pos))[term_name]
    ff = ForceField((term,), as_box(edge), backend=backend)
    spec = ff.neighbor_list(len(pos), skin=0.0)
    nl = spec.build(jnp.asarray(pos))
    spec.check_overflow(nl)
    energy = jax.jit(lambda p: ff.energy(p, nl.neighbors))
    forces = np.asarray(ff.forces(jnp.asarray(pos), nl.neighbors))
    assert np.abs(forces).max() > 1e-3                      # a non-trivial configuration
    rng = np.random.default_rng(2)
    h = 1e-5
    for atom, axis in zip(rng.integers(0, len(pos), 8), rng.integers(0, 3, 8)):
        plus, minus = pos.copy(), pos.copy()
        plus[atom, axis] += h
        minus[atom, axis] -= h
        fd = -(float(energy(jnp.asarray(plus))) - float(energy(jnp.asarray(minus)))) / (2 * h)
        assert forces[atom, axis] == pytest.approx(fd, rel=1e-5, abs=1e-6)


def test_total_force_vanishes_and_shift_makes_energy_continuous():
    pos, edge = _liquid()
    ff = ForceField((LennardJones(cutoff=2.5),), as_box(edge), backend="jax")
    nl = ff.neighbor_list(len(pos), skin=0.0).build(jnp.asarray(pos))
    forces = np.asarray(ff.forces(jnp.asarray(pos), nl.neighbors))
    np.testing.assert_allclose(forces.sum(axis=0), 0.0, atol=1e-9)   # Newton's third law
    assert float(reference.lj_pair(2.5 ** 2, 1.0, 1.0)) != 0.0        # the shift is not trivially zero
    just_inside = jnp.asarray([[0.0, 0.0, 0.0], [2.5 - 1e-9, 0.0, 0.0]])
    e = reference.lj_energy(just_inside, jnp.full(3, 10.0), jnp.asarray([[1], [0]]), 1.0, 1.0, 2.5)
    assert abs(float(e.sum())) < 1e-8


@pytest.mark.parametrize("term_name", ["lj", "morse", "coulomb", "bonds", "angles"])
def test_kernel_energies_match_reference(term_name, float64):
    from adoffload.chemistry import available
    ok, why = available("adoffload", adjoint=False)
    if not ok:
        pytest.skip(why)
    pos, edge = _liquid()
    term = _terms(len(pos))[term_name]
    energies = []
    for name in ("jax", "adoffload"):
        ff = ForceField((term,), as_box(edge), backend=name)
        nl = ff.neighbor_list(len(pos), skin=0.0).build(jnp.asarray(pos))
        energies.append(float(ff.energy(jnp.asarray(pos), nl.neighbors)))
    assert energies[1] == pytest.approx(energies[0], rel=1e-10)


def test_parameter_gradients_match_finite_differences(backend):
    pos, edge = _liquid()
    ff = ForceField((Morse(cutoff=2.5),), as_box(edge), backend=backend)
    nl = ff.neighbor_list(len(pos), skin=0.0).build(jnp.asarray(pos))
    p = {"morse": {"depth": 0.9, "alpha": 1.4, "r0": 1.2}}
    energy = lambda params: ff.energy(jnp.asarray(pos), nl.neighbors, params)
    grads = jax.grad(energy)(p)["morse"]
    h = 1e-6
    for name in ("depth", "alpha", "r0"):
        up = {"morse": dict(p["morse"], **{name: p["morse"][name] + h})}
        down = {"morse": dict(p["morse"], **{name: p["morse"][name] - h})}
        fd = (float(energy(up)) - float(energy(down))) / (2 * h)
        assert float(grads[name]) == pytest.approx(fd, rel=1e-6)


def test_cluster_energy_of_known_dimer(backend):
    r = 2.0 ** (1.0 / 6.0)                  # the LJ pair minimum: energy -epsilon, zero force
    pos = jnp.asarray([[0.0, 0.0, 0.0], [r, 0.0, 0.0]])
    fns = get_backend(backend)
    energy = lambda x: jnp.sum(fns.cluster_lj_energy(x, 1.0, 1.0))
    assert float(energy(pos)) == pytest.approx(-1.0, rel=1e-12)
    np.testing.assert_allclose(jax.grad(energy)(pos), 0.0, atol=1e-12)


@pytest.mark.parametrize("padded", [False, True])
def test_gradient_of_forces_matches_the_reference(padded):
    # Fitting to forces differentiates the adjoint kernel again (reverse over reverse); the LJ
    # neighbor loop then needs a dynamic tape, which the JAX handler sizes on every call.
    # Real neighbor lists are padded with -1 slots: the adjoints must skip them without touching
    # index -1 (the reverse sweep re-decides nested branches in their forward nesting).
    import adoffload as ado
    from adoffload.chemistry import kernels
    rng = np.random.default_rng(4)
    n = 8
    pos = jnp.asarray(np.random.default_rng(5).uniform(0.0, 2.6, (n, 3)))
    rows = [[j for j in range(n) if j != i] + ([-1] * 3 if padded else []) for i in range(n)]
    box, neighbors = jnp.full(3, 20.0), jnp.asarray(rows)
    targets = jnp.asarray(rng.normal(0.0, 0.5, (n, 3)))
    ours = ado.jax_kernel(kernels.lj_energy, grid=n, out_shapes={"e": (n,)})

    def fit_loss(energy):
        def loss(x, sigma, epsilon):
            forces = -jax.grad(lambda y: jnp.sum(energy(y, box, neighbors, sigma, epsilon, 2.5)))(x)
            return jnp.sum((forces - targets) ** 2)
        return jax.jit(jax.grad(loss, argnums=(0, 1, 2)))
    got = fit_loss(ours)(pos, 1.05, 0.9)
    expected = fit_loss(reference.lj_energy)(pos, 1.05, 0.9)
    assert np.abs(expected[0]).max() > 1e-3
    np.testing.assert_allclose(got[0], expected[0], rtol=1e-10, atol=1e-10)
    for a, b in zip(got[1:], expected[1:]):
        assert float(a) == pytest.approx(float(b), rel=1e-10)


def test_second_order_stays_inside_its_arrays_for_padded_neighbor_slots():
    # The backend's own guard: the reverse-over-reverse LJ kernel runs on arrays framed by -0.0
    # guard cells (adding even 0.0 flips their sign bit); any write at index -1 is caught.
    from adoffload.chemistry.backend import _second_order_stays_in_bounds, available
    _second_order_stays_in_bounds()
    ok, why = available("adoffload", second_order=True)
    assert ok, why


def test_hessian_of_the_neighbor_list_energy_matches_the_reference():
    # Forward over reverse through the LJ neighbor kernel: jax.hessian and Hessian-vector products.
    import adoffload as ado
    from adoffload.chemistry import kernels
    from adoffload.chemistry.backend import available
    assert available("adoffload")[0], available("adoffload")[1]
    pos = jnp.array([[0.0, 0.0, 0.0], [1.1, 0.2, -0.1], [0.3, 1.0, 0.2]])
    box, neighbors = jnp.full(3, 10.0), jnp.array([[1, 2], [0, 2], [0, 1]], dtype=jnp.int64)
    f = ado.jax_kernel(kernels.lj_energy, grid=3, out_shapes={"e": (3,)})
    ours = lambda x: jnp.sum(f(x, box, neighbors, 1.0, 1.0, 2.5))
    theirs = lambda x: jnp.sum(reference.lj_energy(x, box, neighbors, 1.0, 1.0, 2.5))
    np.testing.assert_allclose(jax.hessian(ours)(pos), jax.hessian(theirs)(pos), rtol=1e-10, atol=1e-10)
    v = jnp.full_like(pos, 0.1)
    np.testing.assert_allclose(jax.jvp(jax.grad(ours), (pos,), (v,))[1],
                               jax.jvp(jax.grad(theirs), (pos,), (v,))[1], rtol=1e-10, atol=1e-10)


def test_batched_force_matching_gradients_match_the_reference():
    # vmap over configurations of a reverse-over-reverse gradient: one batched adjoint kernel
    # whose dynamic tape the handler sizes over the whole batch (no loop over configurations).
    import adoffload as ado
    from adoffload.chemistry import kernels
    n = 6
    rng = np.random.default_rng(7)
    configs = jnp.asarray(rng.uniform(0.0, 2.4, (3, n, 3)))
    box = jnp.full(3, 20.0)
    neighbors = jnp.asarray([[j for j in range(n) if j != i] + [-1] for i in range(n)])
    ours = ado.jax_kernel(kernels.lj_energy, grid=n, out_shapes={"e": (n,)})

    def gradient(energy):
        def loss(x, sigma):
            forces = -jax.grad(lambda y: jnp.sum(energy(y, box, neighbors, sigma, 1.0, 2.5)))(x)
            return jnp.sum(forces ** 2)
        return jax.jit(jax.vmap(jax.grad(loss, argnums=(0, 1)), in_axes=(0, None)))
    got, expected = gradient(ours)(configs, 1.05), gradient(reference.lj_energy)(configs, 1.05)
    for a, b in zip(got, expected):
        np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-9)
