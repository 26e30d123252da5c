"""The markdown report, generated from the stored rows (``DIR/results.json``) and nothing else:
``python -m benchmarks report DIR`` rewrites ``DIR/report.md``; every run also does it at its end.

First the targets of shared/BENCHMARKS.md with what this folder's rows measured (targets.py),
then each suite: its environment, its own summary where it has one (a suite module's
``report(rows)``), and its rows, one table per problem size (the suite's ``SIZE_KEY``, or its own
``tables(rows)``), since
a launch-bound size and a bandwidth-bound size never share a table or a mean.
"""
from __future__ import annotations

from pathlib import Path

from .results import REPORT_MD, flatten, load

LEADING = ("case", "kernel", "measure", "side", "atoms", "n", "size", "median_ms", "iqr_ms", "min_ms", "max_ms")


def fmt(value) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    if value is None:
        return ""
    return str(value).replace("|", "/").replace("\n", " ")


def table(rows: list[dict], columns: list[str] | None = None, order=LEADING) -> str:
    """A markdown table; without ``columns``, those present, ``order`` first, errors and skips last."""
    rows = [flatten(r) for r in rows]
    if columns is None:
        present = {k for r in rows for k in r}
        columns = [c for c in order if c in present and c not in ("error", "skipped")]
        columns += sorted(present - set(columns) - {"error", "skipped"})
        columns += [c for c in ("skipped", "error") if c in present]
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(fmt(r.get(c)) for c in columns) + " |" for r in rows]
    return "\n".join(lines)


def _environment_line(env: dict) -> str:
    versions = ", ".join(f"{k} {v}" for k, v in (env.get("versions") or {}).items())
    keys = ("date", "host", "cpu", "cores", "gpu", "load_average_start", "load_average_end", "commit")
    return "; ".join(f"{k}: {env[k]}" for k in keys if env.get(k) not in (None, "")) + (f"; {versions}" if versions else "")


def suite_section(name: str, entry: dict) -> list[str]:
    from .suites import load_suite
    rows = entry.get("rows", [])
    parts = [f"## {name}", "", "Environment: " + _environment_line(entry.get("environment", {})), ""]
    options = {k: v for k, v in (entry.get("options") or {}).items() if v not in (None, False, [], "")}
    if options:
        parts += ["Options: " + ", ".join(f"{k}={v}" for k, v in options.items()), ""]
    try:
        module = load_suite(name)
    except Exception:  # noqa: BLE001 - rows of a suite this tree no longer has are still shown
        module = None
    if module is not None and hasattr(module, "report"):
        parts += module.report(rows) + [""]
    if module is not None and hasattr(module, "tables"):
        return parts + module.tables(rows)
    size_key = getattr(module, "SIZE_KEY", None)
    order = getattr(module, "COLUMNS", LEADING)
    sizes = sorted({r[size_key] for r in rows if isinstance(r.get(size_key), (int, float))}) if size_key else []
    for size in sizes:
        parts += [f"### {size_key} = {size}", "", table([r for r in rows if r.get(size_key) == size], order=order), ""]
    rest = [r for r in rows if not size_key or r.get(size_key) not in sizes]
    if rest:
        parts += (["### other rows", ""] if sizes else []) + [table(rest, order=order), ""]
    return parts


def render(suites: dict) -> str:
    from .targets import targets
    parts = ["# adoffload benchmark report", "",
             "Generated from results.json by `python -m benchmarks report`. All ratios are measured in one "
             "run, on one machine, with one timer for every side (shared/BENCHMARKS.md).", ""]
    goals = targets(suites)
    if goals:
        parts += ["## Targets", "", table(goals, ["measure", "measured", "target", "met"]), ""]
    for name, entry in suites.items():
        parts += suite_section(name, entry)
    return "\n".join(parts) + "\n"


def write_report(out: Path) -> Path:
    path = Path(out) / REPORT_MD
    path.write_text(render(load(out)))
    return path
