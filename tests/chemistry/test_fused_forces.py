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


def _fused_kernel_name(name, n_atoms):
    """The fused kernel the backend launches here for ``n_atoms`` (lanes per atom depend on the platform)."""
    from adoffload.chemistry import backend as chem_backend, kernels
    lanes = kernels.lanes_per_atom(n_atoms, chem_backend._platform(None))
    return getattr(kernels, f"{name}_energy_forces_kernel")(lanes).name


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
            assert calls == [f"{_fused_kernel_name(name, len(pos))}_jvp{len(ff.parameters[name])}"], calls
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


# --- several lanes (threads) per atom: the GPU form of the fused kernels ----------------------

def _small_system(seed=4):
    """108 atoms: 108 * lanes threads leave part of the last 128-thread block without an atom."""
    from adoffload.chemistry.dynamics import fcc_lattice
    pos, edge = fcc_lattice(3, 0.8)
    rng = np.random.default_rng(seed)
    pos = jnp.asarray(pos + rng.normal(0.0, 0.06, pos.shape))
    charges = rng.normal(0.0, 0.5, len(pos))
    box = as_box(edge)
    nl = ForceField((LennardJones(cutoff=2.2),), box, backend="jax").neighbor_list(len(pos), skin=0.1).build(pos)
    return pos, jnp.asarray(box), nl.neighbors, jnp.asarray(charges - charges.mean())


_PARAMS = {"lj": (1.05, 0.9, 2.2), "morse": (0.8, 1.6, 1.1, 2.2), "coulomb": (0.3, 2.2, 1.7)}


def _fused_call(name, lanes, n):
    import adoffload as ado
    from adoffload.chemistry import kernels
    kernel = getattr(kernels, f"{name}_energy_forces_kernel")(lanes)
    call = ado.jax_kernel(kernel, grid=kernels.fused_grid(n, lanes), out_shapes={"e": (n,), "forces": (n, 3)})

    def fused(pos, box, neighbors, charges, params):
        extra = (charges,) if name == "coulomb" else ()
        result = call(pos, box, neighbors, *extra, *params)
        return result if isinstance(result, (tuple, list)) else (result["e"], result["forces"])
    return fused


def test_lanes_per_atom_follow_size_and_platform():
    from adoffload import ArgumentError
    from adoffload.chemistry import kernels
    assert [kernels.lanes_per_atom(n, "cpu") for n in (100, 10_976, 10**6)] == [1, 1, 1]
    assert [kernels.lanes_per_atom(n, "gpu") for n in (100, 10_976, 108_000, 10**6)] == [4, 4, 2, 1]
    assert kernels.fused_grid(108, 1) == 108 and kernels.fused_grid(108, 4) == 512
    assert kernels.lj_energy_forces_kernel(1) is kernels.lj_energy_forces
    assert kernels.lj_energy_forces_kernel(4).name == "lj_energy_forces_lanes4"
    with pytest.raises(ArgumentError, match="power of two"):
        kernels.lj_energy_forces_kernel(3)


@pytest.mark.parametrize("name, lanes", [("lj", 4), ("morse", 2), ("coulomb", 8)])
def test_lanes_kernels_equal_the_one_lane_kernel_with_their_derivatives(name, lanes, float64):
    """Values, the forward derivative in the parameters (the force-matching path), the reverse
    derivative in the positions (through the lanes' shuffles) and vmap: all as with one lane."""
    pos, box, neighbors, charges = _small_system()
    n, params = len(pos), _PARAMS[name]
    one, many = _fused_call(name, 1, n), _fused_call(name, lanes, n)
    e1, f1 = one(pos, box, neighbors, charges, params)
    e2, f2 = many(pos, box, neighbors, charges, params)
    assert np.abs(np.asarray(f1)).max() > 1e-2
    np.testing.assert_allclose(e2, e1, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(f2, f1, rtol=1e-12, atol=1e-12)

    w = jnp.asarray(np.random.default_rng(5).normal(size=(n, 3)))
    direction = tuple(0.1 * (k + 1) for k in range(len(params)))

    def tangent(fused):
        return jax.jvp(lambda p: fused(pos, box, neighbors, charges, p)[1], (params,), (direction,))[1]
    np.testing.assert_allclose(tangent(many), tangent(one), rtol=1e-10, atol=1e-10)

    def position_gradient(fused):
        return jax.grad(lambda x: jnp.sum(w * fused(x, box, neighbors, charges, params)[1])
                        + jnp.sum(fused(x, box, neighbors, charges, params)[0]))(pos)
    np.testing.assert_allclose(position_gradient(many), position_gradient(one), rtol=1e-9, atol=1e-9)

    batch = jnp.stack([pos, pos + 0.01 * w])
    vmapped = jax.vmap(lambda x: many(x, box, neighbors, charges, params)[1])(batch)
    np.testing.assert_allclose(vmapped[1], one(batch[1], box, neighbors, charges, params)[1], rtol=1e-12, atol=1e-12)


def test_the_gpu_backend_launches_the_lanes_kernels(float64):
    """A backend built for a GPU picks 4 lanes per atom for a small system (it runs here on the host)."""
    from adoffload.chemistry import backend as chem_backend
    _adoffload()
    pos, box, neighbors, _ = _small_system()
    gpu, cpu = chem_backend._kernel_backend("gpu"), chem_backend._kernel_backend("cpu")
    jaxpr = jax.make_jaxpr(lambda x: gpu.lj_energy_forces(x, box, neighbors, 1.0, 1.0, 2.2))(pos)
    specs = [e.params["spec"] for e in jaxpr.eqns if e.primitive.name == "adoffload_kernel_call"]
    assert [(s.kernel.name, s.grid) for s in specs] == [("lj_energy_forces_lanes4", (512,))], specs
    for ours, theirs in zip(gpu.lj_energy_forces(pos, box, neighbors, 1.0, 1.0, 2.2),
                            cpu.lj_energy_forces(pos, box, neighbors, 1.0, 1.0, 2.2)):
        np.testing.assert_allclose(ours, theirs, rtol=1e-12, atol=1e-12)
