"""NVE conserves energy; Langevin holds the temperature; g(r) of a liquid looks like one."""
from __future__ import annotations

import jax
import numpy as np
import pytest

from adoffload.chemistry import ForceField, LennardJones, as_box
from adoffload.chemistry.dynamics import fcc_lattice, initial_state, kinetic_energy, maxwell_boltzmann, radial_distribution, run


def _system(backend, cells=4, density=0.8):
    pos, edge = fcc_lattice(cells, density)
    ff = ForceField((LennardJones(cutoff=2.5),), as_box(edge), backend=backend)
    return pos, ff, ff.neighbor_list(len(pos), skin=0.3)


def test_nve_conserves_energy(backend):
    """Velocity Verlet at dt = 0.002 (reduced): |E(t) - E(0)| / N stays below 2e-4 over 400 steps."""
    pos, ff, spec = _system(backend)
    keys = jax.random.split(jax.random.PRNGKey(0))
    state = initial_state(ff, spec, pos, maxwell_boltzmann(keys[0], len(pos), 1.5), keys[1])
    e0 = (float(state.potential) + float(kinetic_energy(state.vel))) / len(pos)
    state, record, _, _ = run(ff, spec, state, 400, 0.002, ensemble="nve", chunk=20)
    assert int(state.nl.builds) > 1                       # the list was rebuilt along the way
    assert np.all(np.isfinite(record["total"]))
    assert np.abs(record["total"] / len(pos) - e0).max() < 2e-4
    assert record["temperature"][-1] < 1.3                # it melted: kinetic energy went into potential


def test_langevin_thermostat_and_rdf():
    pos, ff, spec = _system("jax")
    keys = jax.random.split(jax.random.PRNGKey(1))
    state = initial_state(ff, spec, pos, maxwell_boltzmann(keys[0], len(pos), 2.0), keys[1])
    state, record, _, _ = run(ff, spec, state, 600, 0.005, ensemble="langevin", kT=1.0, gamma=2.0, chunk=50)
    assert np.mean(record["temperature"][-6:]) == pytest.approx(1.0, abs=0.12)
    r, g = radial_distribution(state.pos, spec.box, state.nl.neighbors, r_max=2.5, bins=50)
    peak = r[np.argmax(g)]
    assert 1.0 < peak < 1.25 and 2.0 < g.max() < 4.0       # liquid first shell near 2^(1/6)
    assert g[r < 0.8].max() == 0.0                         # no overlaps
