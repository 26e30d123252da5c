"""Reliability tests compile into a private cache folder, never the user's."""
import pytest


@pytest.fixture(autouse=True, scope="session")
def _private_compile_cache(tmp_path_factory):
    import os
    folder = tmp_path_factory.mktemp("adoffload-cache")
    old = os.environ.get("ADOFFLOAD_CACHE_DIR")
    os.environ["ADOFFLOAD_CACHE_DIR"] = str(folder)
    yield folder
    if old is None:
        os.environ.pop("ADOFFLOAD_CACHE_DIR", None)
    else:
        os.environ["ADOFFLOAD_CACHE_DIR"] = old
