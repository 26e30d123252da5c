"""Reliability tests compile into a private cache folder, never the user's."""
import pytest


@pytest.fixture(scope="session")
def _reliability_cache(tmp_path_factory):
    """One private folder for the worker's reliability tests. clang's IR of CUDA sources (keyed by the
    source, its flags and our header) is shared with the usual cache, so a GPU machine without clang
    runs these tests from a carried one."""
    from adoffload.codegen.cache import default_root
    shared = default_root() / "clang-ir"
    folder = tmp_path_factory.mktemp("adoffload-cache")
    if shared.is_dir():
        (folder / "clang-ir").symlink_to(shared, target_is_directory=True)
    return folder


@pytest.fixture(autouse=True)
def _private_compile_cache(_reliability_cache, monkeypatch):
    """Set for each reliability test only: a session-wide setting leaked into every later test of the
    same pytest worker, whose CUDA sources then missed the carried clang-IR cache on the GPU machine
    (ToolNotFoundError there; the flaky failures of sessions 7 and 9)."""
    monkeypatch.setenv("ADOFFLOAD_CACHE_DIR", str(_reliability_cache))
    return _reliability_cache
