"""``python -m benchmarks optimize --quick`` on the host: the LJ main job reaches LJ13's published
minimum in a fresh process, every fit method is a row that agrees with scipy, and the report shows
both tables and the ratios measured in the run (no timing assertions)."""
from __future__ import annotations

import importlib.util
import json

import pytest

from benchmarks.__main__ import main
from benchmarks.suites import optimize

LJ13_MINIMUM = -44.326801


def test_optimize_suite_runs_quick_on_the_host(tmp_path, monkeypatch):
    pytest.importorskip("jax")
    monkeypatch.setenv("ADOFFLOAD_CACHE_DIR", str(tmp_path / "cache"))
    assert main(["optimize", "--device", "cpu", "--quick", "--out", str(tmp_path)]) == 0
    rows = json.loads((tmp_path / "results.json").read_text())["suites"]["optimize"]["rows"]
    lj = [r for r in rows if r["case"] == "lj"]
    assert len(lj) == 1 and "error" not in lj[0], lj
    assert lj[0]["reached"] is True and lj[0]["best"] == pytest.approx(LJ13_MINIMUM, abs=1e-4)
    assert 0 < lj[0]["time_to_minimum_s"] <= lj[0]["search_s"] < lj[0]["script_s"]
    assert lj[0]["time_to_minimum_s"] < lj[0]["minimum_since_start_s"] < lj[0]["script_s"]
    assert lj[0]["steps_run"] == lj[0]["steps_to_minimum"]          # --until-reached stopped it there
    assert lj[0]["starts"] == "random"                                # the example's default below 56 atoms
    fits = {(r.get("way"), r["method"]): r for r in rows if r["case"] == "fits"}
    scipy = fits.pop(("numpy in, numpy out", "scipy least_squares (lm), one by one"))
    assert scipy["converged"] == 1.0 and scipy["us_per_curve"] > 0
    methods = ["adoffload.optimize least_squares (lm)", "optimistix LevenbergMarquardt, vmap",
               "Gauss-Newton in jnp, to convergence", "Gauss-Newton in jnp, 20 fixed steps"]
    expected = [(way, m) for way in ("numpy in, numpy out", "device-resident") for m in methods]
    assert list(fits) == expected
    if importlib.util.find_spec("optimistix") is None:
        for way in ("numpy in, numpy out", "device-resident"):
            assert "not installed" in fits.pop((way, methods[1]))["skipped"]       # a row saying so, not an error
    for name, row in fits.items():
        assert "error" not in row, (name, row)
        assert row["first_call_s"] > 0 and row["us_per_curve"] > 0 and row["reps"] == 3
        assert row["us_per_curve_min"] <= row["us_per_curve"]
        assert row["checked_vs_scipy"] >= 15 and row["max_diff_vs_scipy"] < 1e-5, (name, row)
    for way in ("numpy in, numpy out", "device-resident"):
        assert fits[(way, methods[0])]["converged"] == 1.0
    report = (tmp_path / "report.md").read_text()
    assert "### LJ basin hopping" in report and "### Decay fits" in report
    assert "time per curve / adoffload's" in report and "jnp GN fixed / this" in report
    assert report.count("| device-resident |") >= 3          # its rows, its ratios to ours and to the peers


def test_ratios_are_taken_within_the_run_and_way_and_skip_failed_methods():
    rows = [{"case": "fits", "way": "numpy in, numpy out", "method": "scipy least_squares (lm), one by one",
             "us_per_curve": 900.0},
            {"case": "fits", "way": "numpy in, numpy out", "method": "adoffload.optimize least_squares (lm)",
             "us_per_curve": 2.0},
            {"case": "fits", "way": "numpy in, numpy out", "method": "optimistix LevenbergMarquardt, vmap",
             "us_per_curve": 50.0},
            {"case": "fits", "way": "numpy in, numpy out", "method": "Gauss-Newton in jnp, to convergence",
             "error": "RuntimeError: x"},
            {"case": "fits", "way": "device-resident", "method": "adoffload.optimize least_squares (lm)",
             "us_per_curve": 0.5},
            {"case": "fits", "way": "device-resident", "method": "optimistix LevenbergMarquardt, vmap",
             "us_per_curve": 40.0},
            {"case": "fits", "way": "device-resident", "method": "Gauss-Newton in jnp, 20 fixed steps",
             "us_per_curve": 1.0},
            {"case": "lj", "atoms": 38, "reached": False}]
    assert optimize.speedups(rows) == [
        {"way": "numpy in, numpy out", "method": "optimistix LevenbergMarquardt, vmap",
         "time per curve / adoffload's": 25.0},
        {"way": "device-resident", "method": "optimistix LevenbergMarquardt, vmap", "time per curve / adoffload's": 80.0},
        {"way": "device-resident", "method": "Gauss-Newton in jnp, 20 fixed steps", "time per curve / adoffload's": 2.0}]
    assert optimize.speedups(rows[2:4]) == []
    peers = {(r["way"], r["method"]): r for r in optimize.peer_ratios(rows)}
    ours = peers[("device-resident", "adoffload.optimize least_squares (lm)")]
    assert ours["optimistix / this"] == 80.0 and ours["jnp GN fixed / this"] == 2.0
    assert "jnp GN fixed / this" not in peers[("numpy in, numpy out", "adoffload.optimize least_squares (lm)")]
    assert ("numpy in, numpy out", "scipy least_squares (lm), one by one") not in peers
    text = "\n".join(optimize.tables(rows))
    assert "RuntimeError: x" in text and "| 38 |" in text


def test_optimize_suite_lj75_case_reaches_it_from_lattice_searches(tmp_path, monkeypatch):
    """``--cases lj75`` on the host: 64 walkers from the example's lattice-searched starts reach LJ75's
    published minimum in the first local minimizations (the row records the starts it used)."""
    pytest.importorskip("jax")
    monkeypatch.setenv("ADOFFLOAD_CACHE_DIR", str(tmp_path / "cache"))
    assert main(["optimize", "--device", "cpu", "--cases", "lj75", "--time-limit", "120", "--out", str(tmp_path)]) == 0
    rows = json.loads((tmp_path / "results.json").read_text())["suites"]["optimize"]["rows"]
    assert len(rows) == 1 and "error" not in rows[0], rows
    row = rows[0]
    assert row["atoms"] == 75 and row["walkers"] == 64 and row["starts"] == "lattices"
    assert row["reached"] is True and row["steps_to_minimum"] == 0
    assert row["best"] == pytest.approx(-397.492331, abs=1e-4)
