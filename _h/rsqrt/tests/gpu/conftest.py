"""The device suite's fixtures: a CUDA device, or a clean skip saying why there is none."""
from __future__ import annotations

import pytest

from adoffload.errors import Error


@pytest.fixture(scope="session")
def cuda():
    """The process-wide ``cuda:0`` Device; skips the test with the driver's reason when absent."""
    from adoffload.runtime import get_device
    try:
        return get_device("cuda")
    except Error as exc:
        pytest.skip(f"no CUDA device: {exc}")
