"""Cell-list neighbor lists against brute force; overflow is an error; the skin criterion."""
from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import pytest

from adoffload.chemistry import NeighborListOverflowError, NeighborListSpec, BoxError, brute_force_neighbors


def _random_box(n, density, seed=0):
    edge = (n / density) ** (1.0 / 3.0)
    pos = np.random.default_rng(seed).uniform(-0.5 * edge, 1.5 * edge, (n, 3))   # also outside the box
    return pos, (edge, edge * 1.1, edge * 0.95)


def _rows(nl):
    return [set(int(j) for j in row if j >= 0) for row in np.asarray(nl.neighbors)]


@pytest.mark.parametrize("method", ["cells", "all_pairs"])
def test_matches_brute_force(primal_backend, method):
    pos, box = _random_box(600, 0.8)
    spec = NeighborListSpec(box, cutoff=2.0, skin=0.3, capacity=96, backend=primal_backend, method=method)
    nl = spec.build(jnp.asarray(pos))
    spec.check_overflow(nl)
    expected = brute_force_neighbors(pos, box, spec.radius)
    assert _rows(nl) == expected
    np.testing.assert_array_equal(np.asarray(nl.counts), [len(s) for s in expected])
    if method == "cells":
        assert spec.uses_cells and min(spec.cells_per_side) >= 3


def test_overflow_is_reported(primal_backend):
    pos, box = _random_box(400, 0.8)
    spec = NeighborListSpec(box, cutoff=2.0, skin=0.3, capacity=8, backend=primal_backend)
    nl = spec.build(jnp.asarray(pos))
    with pytest.raises(NeighborListOverflowError, match="capacity >= "):
        spec.check_overflow(nl)
    assert int(nl.peak) == max(len(s) for s in brute_force_neighbors(pos, box, spec.radius))


def test_rebuild_criterion_is_half_the_skin():
    pos, box = _random_box(300, 0.8)
    spec = NeighborListSpec(box, cutoff=2.0, skin=0.4, capacity=96, backend="jax")
    nl = spec.build(jnp.asarray(pos))
    small, large = pos.copy(), pos.copy()
    small[7, 0] += 0.19
    large[7, 0] += 0.21
    assert not bool(spec.needs_rebuild(nl, jnp.asarray(small)))
    assert bool(spec.needs_rebuild(nl, jnp.asarray(large)))
    kept = spec.update(nl, jnp.asarray(small))
    rebuilt = spec.update(nl, jnp.asarray(large))
    assert int(kept.builds) == 1 and int(rebuilt.builds) == 2
    assert _rows(rebuilt) == brute_force_neighbors(large, box, spec.radius)


def test_box_too_small_for_cutoff():
    with pytest.raises(BoxError, match="half the smallest box edge"):
        NeighborListSpec((4.0, 4.0, 4.0), cutoff=2.5)
    with pytest.raises(BoxError, match="cells per side"):
        NeighborListSpec((6.0, 6.0, 6.0), cutoff=2.5, method="cells")
