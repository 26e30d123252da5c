"""Basin-hopping walkers spread over every visible device give the unsharded minima.

One CPU device in the main test run; ``test_multidevice.py`` runs this module again with 4
and 3 host devices.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from adoffload import ShardingError
from adoffload.chemistry import default_backend, get_backend
from adoffload.chemistry.optimize import FireOptions, Walker, basin_hopping_step, fire_minimize, random_cluster
from adoffload.chemistry.sharding import over_walkers, padded_size, select_devices, split_keys, walker_mesh

WALKERS, ATOMS = 12, 7          # 12 splits over 1, 2, 3, 4 and 6 devices
FIRE = FireOptions(steps=40)


def _basin_hopping(backend, n_atoms):
    energy = lambda x: jnp.sum(backend.cluster_lj_energy(x, 1.0, 1.0))

    def start(keys):
        x = jax.vmap(lambda k: random_cluster(k, n_atoms))(keys)
        x, e, _ = jax.vmap(lambda xi: fire_minimize(energy, xi, FIRE))(x)
        return Walker(x, e, x, e)

    def hop(walkers, keys):
        return jax.vmap(lambda w, k: basin_hopping_step(energy, w, k, step_size=0.4, kT=0.8, container=2.0,
                                                        fire=FIRE))(walkers, keys)
    return start, hop


@pytest.mark.skipif(len(jax.devices()) == 1, reason="over one device the sharded run is the unsharded one; "
                    "test_multidevice.py runs this on 4 and 3 host devices (and test_examples runs lj_clusters)")
def test_sharded_walkers_reach_the_unsharded_minima(float64):
    backend = get_backend(default_backend())
    mesh = walker_mesh(jax.devices())
    start, hop = _basin_hopping(backend, ATOMS)
    key = jax.random.PRNGKey(7)
    keys = [jax.random.split(k, WALKERS) for k in jax.random.split(key, 3)]

    plain = jax.jit(start)(keys[0])
    for k in keys[1:]:
        plain = jax.jit(hop)(plain, k)

    sharded_start, sharded_hop = over_walkers(start, mesh), over_walkers(hop, mesh)
    sharded = sharded_start(split_keys(jax.random.split(key, 3)[0], WALKERS, mesh))
    for k in jax.random.split(key, 3)[1:]:
        sharded = sharded_hop(sharded, split_keys(k, WALKERS, mesh))

    assert len(sharded.best_energy.sharding.device_set) == len(jax.devices())
    np.testing.assert_allclose(np.asarray(sharded.best_energy), np.asarray(plain.best_energy), rtol=1e-12)
    np.testing.assert_allclose(np.asarray(sharded.best_x), np.asarray(plain.best_x), atol=1e-10)
    assert np.all(np.asarray(plain.best_energy) < -5.0)           # minimized (LJ7 global minimum: -16.505)


def test_keys_are_the_unsharded_keys_and_batches_must_split_evenly():
    mesh = walker_mesh(jax.devices())
    key = jax.random.PRNGKey(3)
    np.testing.assert_array_equal(np.asarray(split_keys(key, WALKERS, mesh)), np.asarray(jax.random.split(key, WALKERS)))
    assert padded_size(WALKERS + 1, mesh) % mesh.size == 0 and padded_size(WALKERS, mesh) == WALKERS
    if mesh.size == 1:
        return                                  # every batch splits over one device
    with pytest.raises(ShardingError, match="does not split evenly"):
        split_keys(key, WALKERS + 1, mesh)
    with pytest.raises(ShardingError, match="does not split evenly"):
        over_walkers(lambda x: x, mesh)(jnp.zeros(WALKERS + 1))


def test_device_selection():
    assert select_devices("cpu") == jax.devices("cpu")
    assert select_devices("cpu", 1) == jax.devices("cpu")[:1]
    with pytest.raises(ShardingError, match="asked for"):
        select_devices("cpu", len(jax.devices("cpu")) + 1)


def test_gradient_of_a_shared_parameter_sums_over_devices(float64):
    """fit_potential's pattern: per-configuration losses split over the devices, parameters shared."""
    mesh = walker_mesh(jax.devices())
    per_config = over_walkers(jax.vmap(lambda p, x: jnp.sum(jnp.sin(p["a"] * x) ** 2), in_axes=(None, 0)), mesh,
                              shared=(0,))
    x = jnp.linspace(0.0, 2.0, WALKERS * 5).reshape(WALKERS, 5)
    loss = lambda p: jnp.sum(per_config(p, x))
    expected = lambda p: jnp.sum(jnp.sin(p["a"] * x) ** 2)
    assert float(jax.grad(loss)({"a": 0.7})["a"]) == pytest.approx(float(jax.grad(expected)({"a": 0.7})["a"]), rel=1e-13)
