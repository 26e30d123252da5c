"""Fixtures of the determinism suite."""
from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def fresh_compile_cache(tmp_path_factory, monkeypatch):
    """Derive and compile in a private cache: the on-disk cache is keyed by the package version,
    not its source, so an entry from an older checkout could otherwise stand in for today's IR."""
    monkeypatch.setenv("ADOFFLOAD_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "adoffload-cache"))
