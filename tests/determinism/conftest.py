"""Fixtures of the determinism suite."""
from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def fresh_compile_cache(tmp_path_factory, monkeypatch):
    """Derive and compile in a private cache: the on-disk cache is keyed by the package version,
    not its source, so an entry from an older checkout could otherwise stand in for today's IR.
    clang's IR of CUDA sources (keyed by the source, its flags and our header) is shared with the
    usual cache: a GPU machine without clang runs these tests from a carried one."""
    from adoffload.codegen.cache import default_root
    shared = default_root() / "clang-ir"
    private = tmp_path_factory.getbasetemp() / "adoffload-cache"
    private.mkdir(mode=0o700, exist_ok=True)
    if shared.is_dir() and not (private / "clang-ir").exists():
        (private / "clang-ir").symlink_to(shared, target_is_directory=True)
    monkeypatch.setenv("ADOFFLOAD_CACHE_DIR", str(private))
