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


def test_benchmark_agrees_with_scipy_both_ways(fitting_path):
    pytest.importorskip("jax")
    import benchmark
    result = benchmark.main(["--curves", "400", "--scipy", "40", "--skip", "optimistix", "--reps", "2"])
    rows = {(r["way"], r["method"]): r for r in result["rows"]}
    methods = [benchmark.OURS, benchmark.OPTIMISTIX, benchmark.GN, benchmark.GN_FIXED]
    assert list(rows)[1:] == [(way, m) for way in benchmark.WAYS for m in methods]
    for way in benchmark.WAYS:
        assert rows[(way, benchmark.OPTIMISTIX)]["skipped"] == "left out (--skip)"
        ours = rows[(way, benchmark.OURS)]
        assert ours["converged"] == 1.0 and ours["max_diff_vs_scipy"] < 1e-4 and ours["reps"] == 2
        assert rows[(way, benchmark.GN_FIXED)]["max_diff_vs_scipy"] < 1e-4
    ratios = {(r["way"], r["method"]): r for r in result["ratios"]}
    assert ratios[("device-resident", benchmark.GN_FIXED)]["jnp GN fixed / this"] == 1.0


def test_device_resident_way_runs_ours_through_jax(fitting_path):
    """The device-resident row of ours is the JAX custom call on JAX arrays, jitted: the same answers
    as the numpy path (bit for bit on the host)."""
    jax = pytest.importorskip("jax")
    import benchmark
    import decay_fits
    t, _, y = decay_fits.make_data(64, 40, 0.02, 3)
    x0 = np.tile(decay_fits.START, (64, 1))
    ours = benchmark.METHODS[0]
    call, wait = benchmark.calls(ours, "device-resident", t, y, x0, "cpu")
    x, ok = wait(call())
    assert isinstance(x, jax.Array) and x.dtype == np.float64
    x_np, ok_np = benchmark.ours_numpy(t, y, x0, "cpu")
    assert np.array_equal(np.asarray(x), x_np) and np.array_equal(np.asarray(ok), ok_np)
