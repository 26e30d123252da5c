"""examples/fitting: the decay fits reach the truth, the benchmark's peers give the same answers (small sizes)."""
import os
import sys

import numpy as np
import pytest

FOLDER = os.path.join(os.path.dirname(__file__), "..", "..", "examples", "fitting")


@pytest.fixture
def fitting_path():
    sys.path.insert(0, os.path.abspath(FOLDER))
    yield
    sys.path.remove(os.path.abspath(FOLDER))


def test_decay_fits_recover_the_parameters(fitting_path, tmp_path, capsys):
    import decay_fits
    result = decay_fits.main(["--curves", "3000", "--chunk", "1024", "--out", str(tmp_path)])
    assert (result["status"] > 0).mean() > 0.999
    assert result["median_errors"]["A"] < 0.05 and result["median_errors"]["k"] < 0.1
    assert (tmp_path / "fitted_vs_true.png").exists()
    assert "converged" in capsys.readouterr().out


def test_benchmark_agrees_with_scipy(fitting_path):
    pytest.importorskip("jax")
    import benchmark
    result = benchmark.main(["--curves", "400", "--scipy", "40", "--skip", "optimistix"])
    names = [run["name"] for run in result["runs"]]
    assert names == ["adoffload.optimize (lm)", "Gauss-Newton in jnp", "Gauss-Newton in jnp, 20 steps"]
    ours = result["runs"][0]
    assert ours["converged"] == 1.0 and ours["max_difference"] < 1e-4
