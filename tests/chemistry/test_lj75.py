"""lj_clusters.py at LJ75: from lattice-searched starts (the default from 56 atoms) it reaches the
global minimum; from random starts (small walkers and steps: no claim of reaching it) basin hopping
and the GA run; surface moves, and the search's stopping rules (--until-reached, --time-limit)."""
from __future__ import annotations

import numpy as np
import pytest

LJ75_MINIMUM = -397.492331       # Cambridge Cluster Database


def test_lj75_path_runs_and_says_whether_it_reached(examples_path, tmp_path, capsys):
    import lj_clusters
    result = lj_clusters.main(["--atoms", "75", "--search", "basin", "--starts", "random", "--clusters", "4", "--steps", "3",
                               "--fire-steps", "300", "--surface-moves", "0.5", "--restart-every", "3", "--backend", "adoffload",
                               "--out", str(tmp_path)])
    assert result["published"] == LJ75_MINIMUM and result["steps"] == 3 and len(result["history"]) == 4
    assert all(later <= earlier for earlier, later in zip(result["history"], result["history"][1:]))
    assert np.isfinite(result["best"]) and result["best"] > LJ75_MINIMUM - 1e-6    # never below the global minimum
    assert result["best"] < -300.0                                                  # minimized, not a random cluster
    out = capsys.readouterr().out
    assert "LJ75: 4 clusters x 3 basin-hopping steps" in out
    verdict = "reached the published minimum: yes" if result["reached"] else "reached the published minimum: NO"
    assert verdict in out


def test_lj75_default_starts_reach_the_marks_decahedron(examples_path, tmp_path, capsys):
    """--starts auto at 75 atoms: lattice searching on the host, then the first local minimizations;
    one of the 8 walkers starts from the searched Marks decahedron and relaxes to the global minimum."""
    import lj_clusters
    result = lj_clusters.main(["--atoms", "75", "--clusters", "8", "--steps", "4", "--until-reached",
                               "--backend", "adoffload", "--out", str(tmp_path)])
    out = capsys.readouterr().out
    assert "lattice search: 24 clusters in" in out
    assert result["reached"] is not None and result["reached"][0] == 0 and result["steps"] == 0
    assert abs(result["best"] - LJ75_MINIMUM) < 1e-4 and result["best"] > LJ75_MINIMUM - 1e-6
    assert "reached the published minimum: yes, first after 0 basin-hopping step(s)" in out


def test_lj75_ga_path_runs(examples_path, tmp_path, capsys):
    """The GA at 75 atoms: mutations with surface moves, the best kept from one generation to the next."""
    import lj_clusters
    result = lj_clusters.main(["--atoms", "75", "--search", "ga", "--starts", "random", "--clusters", "4", "--steps", "2", "--fire-steps", "300",
                               "--surface-moves", "0.5", "--mutation", "0.5", "--backend", "adoffload",
                               "--out", str(tmp_path)])
    assert len(result["history"]) == 3 and result["history"][2] <= result["history"][1] <= result["history"][0] < -300
    assert "LJ75: 4 clusters x 2 generations, cut-and-splice GA" in capsys.readouterr().out


def test_surface_move_puts_the_least_bound_atoms_on_the_surface(examples_path):
    import jax
    import lj_clusters
    grid = np.stack(np.meshgrid(np.arange(2.0), np.arange(2.0), np.arange(3.0), indexing="ij"), -1).reshape(-1, 3)
    x = np.concatenate([1.12 * grid, [[4.0, 0.0, 0.0]]])         # atom 12: far out (pair energy near 0)
    x[3] = x[2] + [0.0, 0.0, 0.6]                                 # atoms 2, 3: overlapping, the highest
    moved = np.asarray(lj_clusters.surface_move(jax.numpy.asarray(x), jax.random.PRNGKey(1), 2))
    changed = np.flatnonzero(np.any(moved != x, axis=1))
    assert set(changed) <= {2, 3} and len(changed) == 2             # the two with the highest pair energy
    center = x.mean(axis=0)
    radius = np.linalg.norm(x - center, axis=1).max()
    np.testing.assert_allclose(np.linalg.norm(moved[changed] - center, axis=1), radius, rtol=1e-12)


def test_time_limit_and_until_reached_stop_the_search(examples_path, tmp_path, capsys):
    import lj_clusters
    result = lj_clusters.main(["--clusters", "8", "--steps", "5", "--time-limit", "0", "--backend", "adoffload",
                               "--out", str(tmp_path)])
    assert result["steps"] == 0 and len(result["history"]) == 1
    assert "stopped after 0 of 5 steps (--time-limit)" in capsys.readouterr().out
    result = lj_clusters.main(["--clusters", "64", "--steps", "10", "--fire-steps", "300", "--seed", "3",
                               "--until-reached", "--backend", "adoffload", "--out", str(tmp_path)])
    assert result["reached"] is not None and result["steps"] == result["reached"][0] < 10
    with pytest.raises(SystemExit, match="--surface-moves"):
        lj_clusters.main(["--backend", "jax", "--surface-moves", "0.2", "--steps", "1", "--out", str(tmp_path)])


def test_a_restart_keeps_each_walkers_best(examples_path):
    import jax.numpy as jnp
    import lj_clusters
    from adoffload.chemistry.optimize import Walker
    x = jnp.zeros((2, 3, 3))
    old = Walker(x, jnp.array([-1.0, -2.0]), x + 1.0, jnp.array([-5.0, -2.0]))
    fresh = Walker(x + 2.0, jnp.array([-3.0, -4.0]), x + 2.0, jnp.array([-3.0, -4.0]))
    got = lj_clusters.restarted(old, fresh)
    np.testing.assert_array_equal(got.x, x + 2.0)                       # both continue from the fresh cluster
    np.testing.assert_array_equal(got.energy, [-3.0, -4.0])
    np.testing.assert_array_equal(got.best_energy, [-5.0, -4.0])         # walker 0 keeps its own best
    np.testing.assert_array_equal(got.best_x[0], x[0] + 1.0)
    np.testing.assert_array_equal(got.best_x[1], x[1] + 2.0)
