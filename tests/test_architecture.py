"""The architecture of docs/ARCHITECTURE.md, kept by tools rather than by reading: import-linter checks
pyproject.toml's contracts (each package imports only the layers below it; no import cycles among the
modules of a package), and no module of the package grows past the size one reader takes in."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
MAX_LINES = 620          # "under ~600 lines": a module past this is split by responsibility


def test_import_contracts_are_kept():
    pytest.importorskip("importlinter", reason="import-linter is a test dependency (pip install -e '.[test]')")
    script = "from importlinter.cli import lint_imports_command; lint_imports_command()"
    run = subprocess.run([sys.executable, "-c", script, "--no-cache"], cwd=ROOT, capture_output=True, text=True,
                         env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr


def test_no_module_is_past_the_size_limit():
    long = {str(path.relative_to(ROOT)): n for path in sorted((ROOT / "adoffload").rglob("*.py"))
            if (n := len(path.read_text().splitlines())) > MAX_LINES}
    assert not long, f"modules past {MAX_LINES} lines (split them by responsibility): {long}"


def test_no_merge_conflict_markers_are_left():
    """A merge that left its markers in a file (it happened: a test module that no longer parsed)."""
    marks = ("<" * 7 + " ", ">" * 7 + " ")
    found = []
    for folder in ("adoffload", "tests", "docs", "benchmarks", "examples"):
        for path in (ROOT / folder).rglob("*"):
            if path.suffix in (".py", ".md", ".cu", ".c", ".ll", ".toml", ".txt") and path.is_file():
                lines = path.read_text(errors="replace").splitlines()
                found += [f"{path.relative_to(ROOT)}:{k + 1}" for k, line in enumerate(lines) if line.startswith(marks)]
    found += [f"{name}:{k + 1}" for name in ("README.md", "pyproject.toml")
              for k, line in enumerate((ROOT / name).read_text().splitlines()) if line.startswith(marks)]
    assert not found, f"merge conflict markers: {found}"
