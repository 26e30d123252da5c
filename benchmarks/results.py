"""Results as data: every suite's rows with their environment in ``DIR/results.json`` and
``DIR/results.csv``, saved after every row, so a run cut short (a time limit on the GPU machine)
keeps what it measured. Several suites may write into one folder: each keeps its own entry.

A row is a flat dict. A case that failed has ``error``; one that could not run here has
``skipped`` with the reason; neither is ever dropped or replaced by a number.
"""
from __future__ import annotations

import csv
import json
import math
import traceback
from pathlib import Path

from adoffload.errors import Error

RESULTS_JSON = "results.json"
RESULTS_CSV = "results.csv"
REPORT_MD = "report.md"


class BenchmarkError(Error, ValueError):
    """A benchmark command that cannot run as asked (an unknown side, a folder without results)."""


def describe_error(exc: BaseException, limit: int = 400) -> str:
    return f"{type(exc).__name__}: {str(exc)[:limit]}"


def attempt(rows: list, base: dict, measure) -> None:
    """Append ``measure()``'s row (or rows) to ``rows``; if it raises, a row of ``base`` with the error."""
    try:
        got = measure()
    except Exception as exc:  # noqa: BLE001 - a failing case is reported in its row, never hidden
        rows.append({**base, "error": describe_error(exc)})
        return
    for row in got if isinstance(got, list) else [got]:
        rows.append(row)


def _jsonable(value):
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if hasattr(value, "item") and callable(value.item):       # numpy scalars
        return _jsonable(value.item())
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    return str(value)


def flatten(row: dict, prefix: str = "") -> dict:
    """Nested dicts become ``outer.inner`` columns (for CSV and tables)."""
    flat = {}
    for key, value in row.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            flat.update(flatten(value, name + "."))
        else:
            flat[name] = value
    return flat


class SuiteRows(list):
    """One suite's rows: each ``append`` prints the row and saves the whole store."""

    def __init__(self, store: "ResultStore", suite: str):
        super().__init__()
        self.store, self.suite = store, suite

    def append(self, row: dict) -> None:
        super().append(row)
        print(json.dumps(_jsonable({k: v for k, v in row.items() if v not in ("", None)})), flush=True)
        self.store.save()

    def extend(self, rows) -> None:
        for row in rows:
            self.append(row)


class ResultStore:
    """``DIR/results.json``: ``{"suites": {name: {"environment", "options", "rows"}}}``."""

    def __init__(self, out: Path):
        self.out = Path(out)
        self.suites: dict = {}
        path = self.out / RESULTS_JSON
        if path.exists():
            try:
                self.suites = json.loads(path.read_text()).get("suites", {})
            except (json.JSONDecodeError, AttributeError):
                self.suites = {}          # an unreadable file is replaced, not merged

    def start(self, suite: str, environment: dict, options: dict) -> SuiteRows:
        rows = SuiteRows(self, suite)
        self.suites[suite] = {"environment": environment, "options": options, "rows": rows}
        self.save()
        return rows

    def fail(self, suite: str, exc: BaseException) -> None:
        """A suite that raised outside its cases: one row with the traceback's end."""
        self.suites[suite]["rows"].append({"case": "suite", "error": traceback.format_exc(limit=3)[-800:]
                                           or describe_error(exc)})

    def save(self) -> None:
        self.out.mkdir(parents=True, exist_ok=True)
        data = {"suites": {name: {**entry, "rows": list(entry["rows"])} for name, entry in self.suites.items()}}
        (self.out / RESULTS_JSON).write_text(json.dumps(_jsonable(data), indent=1))
        write_csv(self.out / RESULTS_CSV, data["suites"])


def write_csv(path: Path, suites: dict) -> None:
    flat = [{"suite": name, **flatten(row)} for name, entry in suites.items() for row in entry["rows"]]
    keys = ["suite"] + sorted({k for row in flat for k in row} - {"suite"})
    with open(path, "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=keys)
        writer.writeheader()
        for row in flat:
            writer.writerow({k: _jsonable(v) for k, v in row.items()})


def load(out: Path) -> dict:
    """The suites stored in ``out`` (raises BenchmarkError where there are none)."""
    path = Path(out) / RESULTS_JSON
    if not path.exists():
        raise BenchmarkError(f"{path} does not exist: run a suite with --out {out} first")
    try:
        return json.loads(path.read_text())["suites"]
    except (json.JSONDecodeError, KeyError) as exc:
        raise BenchmarkError(f"{path} is not a benchmark results file ({describe_error(exc)})") from exc
