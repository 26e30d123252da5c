"""adoffload.chemistry.genetic (cut-and-splice mating, selection, one generation) and lj_clusters.py
--search ga on LJ13."""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from adoffload.chemistry import genetic
from adoffload.chemistry.optimize import Walker

jax.config.update("jax_enable_x64", True)


def _pair_distances(x):
    d = np.linalg.norm(x[:, None] - x[None], axis=-1)
    return np.sort(d[np.triu_indices(len(x), 1)])


def _is_piece(x, parent_distances):
    """Every distance within ``x`` is one of the parent's (a rigid motion keeps them)."""
    return all(np.min(np.abs(parent_distances - v)) < 1e-9 for v in _pair_distances(x))


@pytest.mark.parametrize("seed", range(6))
def test_cut_and_splice_keeps_n_atoms_from_both_parents(seed):
    """A child has exactly n atoms: its k highest (1 <= k <= n-1) a rigid copy of part of a, the
    others of part of b, ``gap`` below them in z (seeds 3-5: the same parent twice, whose pieces
    overlap unless moved apart)."""
    n, gap = 11, 0.5
    a = jax.random.normal(jax.random.PRNGKey(100 + seed), (n, 3)) * 2.0
    b = a if seed >= 3 else jax.random.normal(jax.random.PRNGKey(200 + seed), (n, 3)) * 2.0 + 50.0
    child = np.asarray(genetic.cut_and_splice(a, b, jax.random.PRNGKey(seed), gap=gap))
    assert child.shape == (n, 3) and np.all(np.isfinite(child))
    child = child[np.argsort(-child[:, 2])]
    da, db = _pair_distances(np.asarray(a)), _pair_distances(np.asarray(b))
    ks = [k for k in range(1, n) if _is_piece(child[:k], da) and _is_piece(child[k:], db)
          and child[k - 1, 2] >= child[k, 2] + gap - 1e-9]
    assert ks, "no split of the child into a piece of a above a piece of b"


def test_random_rotation_is_a_rotation():
    r = np.asarray(genetic.random_rotation(jax.random.PRNGKey(3)))
    np.testing.assert_allclose(r @ r.T, np.eye(3), atol=1e-12)
    assert np.linalg.det(r) == pytest.approx(1.0)


def test_select_keeps_the_size_sorted_and_drops_copies():
    energy = jnp.array([-3.0, -5.0, -5.0 + 1e-9, -1.0, -4.0, -5.0 - 2e-9, jnp.inf, -2.0])
    x = jnp.arange(8.0)[:, None, None] * jnp.ones((8, 2, 3))
    got_x, got_e = genetic.select(x, energy, 4)
    np.testing.assert_allclose(got_e, [-5.0 - 2e-9, -4.0, -3.0, -2.0])     # one of the three copies of -5
    np.testing.assert_array_equal(got_x[:, 0, 0], [5.0, 4.0, 0.0, 7.0])    # each energy's own cluster


def test_select_fills_with_copies_only_when_too_few_distinct():
    energy = jnp.array([-1.0, -1.0, -1.0, -2.0, -2.0])
    got_x, got_e = genetic.select(jnp.zeros((5, 1, 3)), energy, 4)
    np.testing.assert_array_equal(got_e, [-2.0, -1.0, -2.0, -1.0])         # the distinct ones first


def test_tournament_picks_the_lowest_drawn():
    energy = jnp.array([0.0, -1.0, -2.0, -3.0])
    picks = [int(genetic.tournament(jax.random.PRNGKey(s), energy, 4)) for s in range(50)]
    assert max(picks) == 3 and min(picks) >= 1           # 4 draws of 4: member 0 only if all four are 0


def test_a_generation_keeps_the_best_and_the_population_size():
    """Children minimized by one call of local_minimize; the next population is the best distinct
    ones of parents and children (the old best survives)."""
    calls = []

    def local_minimize(x):                # a stand-in minimizer: energy = sum of z, so lower is better
        calls.append(x.shape)
        return x, jnp.sum(x[:, :, 2], axis=1)

    x = jax.random.normal(jax.random.PRNGKey(1), (6, 5, 3))
    energy = jnp.sum(x[:, :, 2], axis=1) + 100.0                 # parents worse than any child
    best = jnp.argmin(energy)
    energy = energy.at[best].set(-1e6)                           # except one
    population = Walker(x, energy, x, energy)
    step = jax.jit(lambda p, k: genetic.generation(p, k, local_minimize=local_minimize, mutate=lambda x, k: x,
                                                   mutation=0.5))
    after = step(population, jax.random.split(jax.random.PRNGKey(2), 6))
    assert calls == [(6, 5, 3)]                                 # one batched call for all six children
    assert after.x.shape == x.shape and float(after.energy[0]) == -1e6
    np.testing.assert_array_equal(after.x[0], x[best])
    assert np.all(np.diff(np.asarray(after.energy)) > 0)        # sorted, distinct
    assert np.all(np.asarray(after.energy[1:]) < 50.0)          # the other parents replaced by children


def test_lj13_ga_reaches_the_global_minimum(examples_path, tmp_path, capsys):
    """4 members (none of the minimized random starts is LJ13's icosahedron with this seed): reached
    by mating."""
    import lj_clusters
    result = lj_clusters.main(["--search", "ga", "--clusters", "4", "--steps", "20", "--fire-steps", "300",
                               "--seed", "0", "--until-reached", "--backend", "adoffload", "--out", str(tmp_path)])
    assert result["best"] == pytest.approx(-44.326801, abs=1e-5) and result["reached"] is not None
    assert 0 < result["steps"] < 20
    assert all(later <= earlier for earlier, later in zip(result["history"], result["history"][1:]))
    out = capsys.readouterr().out
    assert "LJ13: 4 clusters x 20 generations, cut-and-splice GA" in out
    assert "reached the published minimum: yes, first after" in out and "generation(s)" in out


def test_ga_on_the_jax_backend_and_its_refusals(examples_path, tmp_path):
    import lj_clusters
    result = lj_clusters.main(["--search", "ga", "--clusters", "4", "--steps", "2", "--fire-steps", "200",
                               "--backend", "jax", "--out", str(tmp_path)])
    assert len(result["history"]) == 3 and result["history"][-1] <= result["history"][0] < -30.0
    with pytest.raises(SystemExit, match="--restart-every"):
        lj_clusters.main(["--search", "ga", "--restart-every", "2", "--steps", "1", "--out", str(tmp_path)])
    with pytest.raises(SystemExit, match="--island-size 3 does not divide each device's 4 clusters"):
        lj_clusters.main(["--search", "ga", "--clusters", "4", "--island-size", "3", "--steps", "1", "--out", str(tmp_path)])


def test_islands_mate_and_select_only_among_themselves():
    """Two islands of 3: the best of island 0 never reaches island 1, and each island keeps its own best."""
    def local_minimize(x):
        return x, jnp.sum(x[:, :, 2], axis=1)

    x = jax.random.normal(jax.random.PRNGKey(1), (6, 5, 3))
    energy = jnp.array([-1e6, 10.0, 10.0, -1e3, 10.0, 10.0])
    population = Walker(x, energy, x, energy)
    after = genetic.generation(population, jax.random.split(jax.random.PRNGKey(2), 6), local_minimize=local_minimize,
                               mutate=lambda x, k: x, mutation=0.0, island_size=3)
    assert float(after.energy[0]) == -1e6 and float(after.energy[3]) == -1e3
    assert np.all(np.asarray(after.energy[4:]) > -1e3)
    np.testing.assert_array_equal(after.x[3], x[3])
    with pytest.raises(ValueError, match="islands of 4"):
        genetic.generation(population, jax.random.split(jax.random.PRNGKey(2), 6), local_minimize=local_minimize,
                           mutate=lambda x, k: x, mutation=0.0, island_size=4)
