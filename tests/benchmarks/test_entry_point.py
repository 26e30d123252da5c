"""``python -m benchmarks``: the suites are listed, every suite runs in --quick mode on the CPU (tiny
sizes; a suite that needs a GPU says so in a row), rows land in results.json/csv with their
environment, and report.md is generated from them. No timing assertions."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.__main__ import main
from benchmarks.results import BenchmarkError, ResultStore, load
from benchmarks.suites import SUITES

ROOT = Path(__file__).resolve().parents[2]

# Each suite in --quick mode, with options that keep it to seconds on 2 cores (one process for all:
# JAX and LLVM start once).
QUICK_RUNS = [
    ["bandwidth"], ["rajaperf"],
    ["derivatives"],
    ["overheads"],
    ["chemistry", "--reps", "1", "--sides", "adoffload", "jax", "--measures", "ef", "ef_adjoint", "build"],
    ["user_kernels", "--reps", "1"],
    ["blocks", "--only", "stencil", "--only", "dot"],
    ["foreign_cuda"],
    ["scaling", "--atoms", "2048", "--walkers", "8", "--fire-steps", "10", "--md-chunk", "2"],
    ["shard_map"],
    ["optimize"],
]
_RUNNER = """
import sys, json
from benchmarks.__main__ import main
runs = json.loads(sys.argv[1])
codes = [main([run[0], "--device", "cpu", "--quick", "--out", sys.argv[2], *run[1:]]) for run in runs]
print("EXIT CODES", json.dumps(codes))
"""


def test_every_suite_is_listed_and_has_a_quick_run(capsys):
    assert main(["--list"]) == 0
    listed = [line.split()[0] for line in capsys.readouterr().out.splitlines()]
    assert listed == list(SUITES)
    assert sorted(run[0] for run in QUICK_RUNS) == sorted(SUITES)


def test_report_of_a_folder_without_results_is_an_error(tmp_path, capsys):
    assert main(["report", str(tmp_path)]) == 2
    assert "does not exist" in capsys.readouterr().err
    with pytest.raises(BenchmarkError):
        load(tmp_path)


def test_a_side_that_does_not_exist_is_an_error(tmp_path, capsys):
    assert main(["chemistry", "--device", "cpu", "--sides", "jaxmd", "--out", str(tmp_path)]) == 2
    assert "unknown side 'jaxmd'" in capsys.readouterr().err


def test_results_keep_every_suite_and_the_report_comes_from_them(tmp_path):
    store = ResultStore(tmp_path)
    rows = store.start("rajaperf", {"date": "today", "gpu": "none"}, {"quick": True})
    rows.append({"kernel": "stream_dot", "n": 10, "ours_ms": 1.0, "cuda_ms": 2.0, "ratio": 0.5})
    rows.append({"kernel": "basic_daxpy", "n": 10, "skipped": "needs a GPU"})
    again = ResultStore(tmp_path)                       # a second suite into the same folder
    again.start("overheads", {"date": "today"}, {}).append({"measure": "x", "nested": {"a": 1.5}})
    assert set(load(tmp_path)) == {"rajaperf", "overheads"}
    assert "nested.a" in (tmp_path / "results.csv").read_text().splitlines()[0]
    assert main(["report", str(tmp_path)]) == 0
    report = (tmp_path / "report.md").read_text()
    assert "## rajaperf" in report and "## overheads" in report and "needs a GPU" in report
    assert "n=10: primal / hand-written CUDA, geomean (1 of 2 kernels; missing: basic_daxpy)" in report


def test_every_suite_runs_quick_on_the_cpu(tmp_path):
    env = dict(os.environ, JAX_PLATFORMS="cpu", XLA_FLAGS="--xla_force_host_platform_device_count=2",
               ADOFFLOAD_CACHE_DIR=str(tmp_path / "cache"),
               PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    done = subprocess.run([sys.executable, "-c", _RUNNER, json.dumps(QUICK_RUNS), str(tmp_path / "out")],
                          capture_output=True, text=True, env=env, cwd=ROOT, timeout=900)
    assert "EXIT CODES" in done.stdout, done.stdout[-3000:] + done.stderr[-3000:]
    suites = load(tmp_path / "out")
    assert set(suites) == set(SUITES)
    for name, entry in suites.items():
        assert entry["environment"]["load_average_end"] and entry["environment"]["date"], name
        assert entry["options"]["device"] == "cpu" and entry["rows"], name
        errors = [r for r in entry["rows"] if "error" in r]
        assert not errors, (name, errors)
        for row in entry["rows"]:
            if "force_rel_diff" in row:
                assert row["force_rel_diff"] < 1e-9, (name, row)
            if "agree" in row or "correct" in row:
                assert row.get("agree", row.get("correct")) is True, (name, row)
    skipped = {name for name, entry in suites.items() if any("skipped" in r for r in entry["rows"])}
    assert {"bandwidth", "rajaperf", "derivatives"} <= skipped      # their GPU parts say why they did not run
    report = (tmp_path / "out" / "report.md").read_text()
    assert all(f"## {name}" in report for name in SUITES)
