"""The examples run at small size and reach what they claim."""
from __future__ import annotations

import pytest


def test_lj13_global_minimum_is_reached(examples_path, tmp_path):
    import lj_clusters
    result = lj_clusters.main(["--clusters", "64", "--steps", "10", "--fire-steps", "300", "--seed", "3",
                               "--out", str(tmp_path)])
    assert result["published"] == -44.326801
    assert result["best"] == pytest.approx(-44.326801, abs=1e-5)
    assert result["walkers_at_minimum"] >= 1
    assert (tmp_path / "lj13_best_energy.png").exists()


def test_fit_recovers_morse_parameters(examples_path, tmp_path):
    import fit_potential
    result = fit_potential.main(["--potential", "morse", "--configs", "2", "--steps", "150", "--loss", "energy+forces",
                                 "--backend", "jax", "--out", str(tmp_path)])
    assert max(result["relative_errors"].values()) < 1e-3
    start = fit_potential.START["morse"]
    assert all(abs(start[k] - result["true"][k]) / result["true"][k] > 0.05 for k in start)


def test_fit_recovers_lj_parameters_with_adoffload_gradients(examples_path, tmp_path):
    import fit_potential
    from adoffload.chemistry.backend import available
    assert available("adoffload")[0], available("adoffload")[1]
    result = fit_potential.main(["--potential", "lj", "--configs", "2", "--steps", "400", "--loss", "energy",
                                 "--backend", "adoffload", "--out", str(tmp_path)])
    assert max(result["relative_errors"].values()) < 1e-3
