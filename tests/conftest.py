"""Suite-wide settings: how many processes ``pytest`` (``-n auto`` in pyproject.toml) starts, and the
``cuda`` fixture (a CUDA device, or a skip saying why there is none).

pytest-xdist's own ``auto`` is one worker per CPU. Here it is one per core, at most four (CI has
two cores; each worker imports JAX and collects the suite, about 20 s of CPU, so more workers than
cores only cost), and none (the tests run in pytest's own process) where

* there is one core;
* ``-s`` is given: it is for reading the tests' prints, which xdist's workers do not pass on;
* a GPU device node exists: the GPU tests share that one device, two of them fill its memory on
  purpose (tests/runtime/test_cuda.py, tests/reliability/test_gpu_faults.py) and JAX may take
  most of it in each process.

``PYTEST_XDIST_AUTO_NUM_WORKERS=N`` or ``pytest -n N`` chooses N workers; ``-n 0`` none.
"""
from __future__ import annotations

import os

import pytest

MAX_AUTO_WORKERS = 4
GPU_DEVICE_NODES = ("/dev/nvidiactl", "/dev/kfd")       # the NVIDIA driver's, ROCm's


def pytest_xdist_auto_num_workers(config):
    if os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS"):
        return None                      # xdist's own hook reads and applies it
    if config.getoption("capture") == "no" or any(os.path.exists(node) for node in GPU_DEVICE_NODES):
        return 0
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:               # no sched_getaffinity (macOS, Windows)
        cores = os.cpu_count() or 1
    workers = min(cores, MAX_AUTO_WORKERS)
    return workers if workers > 1 else 0


@pytest.fixture(scope="session")
def cuda():
    """The process-wide ``cuda:0`` Device; skips the test with the driver's reason when absent."""
    from adoffload.errors import Error
    from adoffload.runtime import get_device
    try:
        return get_device("cuda")
    except Error as exc:
        pytest.skip(f"no CUDA device: {exc}")
