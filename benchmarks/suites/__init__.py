"""The suites, one module each. A suite module has a docstring whose first line says what it
measures, ``DEVICES`` (the devices it runs on), ``run(rows, device, quick, options)`` appending
rows, and optionally ``add_arguments(parser)``, ``SIZE_KEY`` (the row key of the problem size, one
report table per value), ``report(rows)`` (markdown lines: its ratios) and ``targets(rows)``
(lines for the report's target table)."""
from __future__ import annotations

import importlib

SUITES = ("bandwidth", "rajaperf", "derivatives", "overheads", "chemistry", "user_kernels", "blocks",
          "foreign_cuda", "scaling", "shard_map", "optimize")


def load_suite(name: str):
    from ..results import BenchmarkError
    if name not in SUITES:
        raise BenchmarkError(f"unknown suite {name!r}; the suites are: {', '.join(SUITES)}")
    return importlib.import_module(f"{__name__}.{name}")


def summary(name: str) -> str:
    """The first line of the suite's docstring."""
    doc = load_suite(name).__doc__ or ""
    return doc.strip().splitlines()[0] if doc.strip() else ""
