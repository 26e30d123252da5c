"""The fused *_energy_forces kernels: one launch, a gather over the full list, AD of the pair potential.

Checked against the whole-kernel adjoint of the energy kernel (jax.grad through ado.jax_kernel)
and against the plain-JAX reference; and their own derivatives (force matching: the gradient of
a loss on forces with respect to positions and parameters, second order through the kernel).
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from adoffload.chemistry import ForceField, LennardJones, Morse, Coulomb, as_box, get_backend, reference


def _system(seed=0):
    from adoffload.chemistry.dynamics import fcc_lattice
    pos, edge = fcc_lattice(4, 0.75)
    rng = np.random.default_rng(seed)
    pos = pos + rng.normal(0.0, 0.08, pos.shape)
    charges = rng.normal(0.0, 0.5, len(pos))
    return jnp.asarray(pos), as_box(edge), tuple(charges - charges.mean())


def _adoffload():
    from adoffload.chemistry import available
    ok, why = available("adoffload")
    if not ok:
        pytest.skip(why)
    return get_backend("adoffload")


def _term(name, charges):
    return {"lj": LennardJones(sigma=1.05, cutoff=2.5), "morse": Morse(depth=0.8, alpha=1.6, r0=1.1, cutoff=2.5),
            "coulomb": Coulomb(charges=charges, alpha=0.3, cutoff=2.5)}[name]


@pytest.mark.parametrize("name", ["lj", "morse", "coulomb"])
def test_fused_kernel_matches_the_adjoint_of_the_energy_kernel_and_the_reference(name, float64):
    _adoffload()
    pos, box, charges = _system()
    ff = ForceField((_term(name, charges),), box, backend="adoffload")
    nl = ff.neighbor_list(len(pos), skin=0.1).build(pos)
    energy, forces = jax.jit(ff.energy_and_forces)(pos, nl.neighbors)
    by_adjoint = -jax.grad(ff.energy)(pos, nl.neighbors)            # the energy kernel's adjoint
    ref = ForceField((_term(name, charges),), box, backend="jax")
    ref_energy, ref_forces = ref.energy_and_forces(pos, nl.neighbors)
    assert np.abs(np.asarray(forces)).max() > 1e-2
    np.testing.assert_allclose(forces, by_adjoint, rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(forces, ref_forces, rtol=1e-10, atol=1e-10)
    assert float(energy) == pytest.approx(float(ref_energy), rel=1e-12)


def test_fused_kernel_has_no_atomics_and_one_launch():
    from adoffload.chemistry import kernels
    _adoffload()
    text = kernels.lj_energy_forces.module_text()
    assert "atomicrmw fadd" not in text and "adoffload.inner" not in text
    pos, box, _ = _system()
    backend = get_backend("adoffload")
    nl = ForceField((LennardJones(),), box).neighbor_list(len(pos), skin=0.1).build(pos)
    jaxpr = jax.make_jaxpr(lambda x: backend.lj_energy_forces(x, jnp.asarray(box), nl.neighbors, 1.0, 1.0, 2.5))(pos)
    calls = [e for e in jaxpr.eqns if "adoffload" in str(e.primitive) or "ffi" in str(e.primitive)]
    assert len(calls) == 1, jaxpr


def test_force_matching_gradient_through_the_fused_kernel(float64):
    """d/d(pos, sigma, epsilon) of sum(forces^2): reverse over the kernel's inlined pair gradient."""
    _adoffload()
    pos, box, _ = _system(1)
    grads = {}
    for backend in ("adoffload", "jax"):
        ff = ForceField((LennardJones(cutoff=2.5),), box, backend=backend)
        nl = ff.neighbor_list(len(pos), skin=0.1).build(pos)

        def loss(x, params):
            return jnp.sum(ff.forces(x, nl.neighbors, params) ** 2)
        grads[backend] = jax.grad(loss, argnums=(0, 1))(pos, ff.parameters)
    ours, ref = grads["adoffload"], grads["jax"]
    np.testing.assert_allclose(ours[0], ref[0], rtol=1e-8, atol=1e-8)
    for key in ("sigma", "epsilon"):
        assert float(ours[1]["lj"][key]) == pytest.approx(float(ref[1]["lj"][key]), rel=1e-8)


def test_reference_gathers_drop_empty_slots(float64):
    """Empty (-1) slots read zeros and their gradient goes nowhere (no scatter onto atom 0)."""
    pos = jnp.asarray([[0.0, 0.0, 0.0], [1.1, 0.0, 0.0], [0.0, 1.2, 0.0]])
    neighbors = jnp.asarray([[1, 2, -1], [0, -1, -1], [0, -1, -1]])
    gathered = reference.gather_neighbors(pos, neighbors)
    np.testing.assert_array_equal(gathered[1, 1:], 0.0)
    text = jax.jit(jax.grad(lambda x: jnp.sum(reference.gather_neighbors(x, neighbors) ** 2))).lower(pos).as_text()
    assert "scatter" in text
    g = jax.grad(lambda x: jnp.sum(reference.gather_neighbors(x, neighbors) ** 2))(pos)
    np.testing.assert_allclose(g, 2 * np.asarray(pos) * np.array([[2], [1], [1]]))


@pytest.mark.parametrize("name", ["lj", "morse"])
def test_force_matching_gradient_in_the_parameters_is_one_forward_launch(name, float64):
    """d/d(parameters) of a force-matching loss against reference forces: one vector-forward call of
    the fused kernel (outputs and d forces / d parameter, jax/scalar_jvp.py), no adjoint kernel; equal
    to the plain-JAX reference and to central finite differences."""
    _adoffload()
    pos, box, charges = _system(2)
    target = jnp.asarray(np.random.default_rng(3).normal(0.0, 1.0, pos.shape))
    grads = {}
    for backend in ("adoffload", "jax"):
        ff = ForceField((_term(name, charges),), box, backend=backend)
        nl = ff.neighbor_list(len(pos), skin=0.1).build(pos)

        def loss(params, ff=ff, nl=nl):
            return jnp.mean((ff.forces(pos, nl.neighbors, params) - target) ** 2)
        grads[backend] = jax.jit(jax.grad(loss))(ff.parameters)[name]
        if backend == "adoffload":
            jaxpr = jax.make_jaxpr(jax.grad(loss))(ff.parameters)
            calls = [e.params["spec"].kernel.name for e in jaxpr.eqns if e.primitive.name == "adoffload_kernel_call"]
            assert calls == [f"{name}_energy_forces_jvp{len(ff.parameters[name])}"], calls
        else:
            reference_loss, params = loss, ff.parameters
    h = 1e-6
    for key, value in grads["adoffload"].items():
        assert float(value) == pytest.approx(float(grads["jax"][key]), rel=1e-10)
        up = jax.tree.map(lambda v: v, params)
        down = jax.tree.map(lambda v: v, params)
        up[name][key] = params[name][key] + h
        down[name][key] = params[name][key] - h
        fd = (reference_loss(up) - reference_loss(down)) / (2 * h)
        assert float(value) == pytest.approx(float(fd), rel=1e-6)
