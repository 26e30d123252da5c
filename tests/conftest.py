"""Suite-wide settings: how many processes ``pytest`` (``-n auto`` in pyproject.toml) starts.

pytest-xdist's own ``auto`` is one worker per CPU; here it is at most four. CI has two cores,
and past four the workers' start-up (each imports JAX and collects the suite, about 20 s of
CPU) costs more than it saves, while on a GPU machine each worker also holds a CUDA context.
``PYTEST_XDIST_AUTO_NUM_WORKERS=N`` still chooses N; ``pytest -n 0`` runs in one process.
"""
from __future__ import annotations

import os

MAX_AUTO_WORKERS = 4


def pytest_xdist_auto_num_workers(config):
    chosen = os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS")
    if chosen:
        return None                      # xdist's own hook reads and applies it
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:               # no sched_getaffinity (macOS, Windows)
        cores = os.cpu_count() or 1
    return max(1, min(cores, MAX_AUTO_WORKERS))
