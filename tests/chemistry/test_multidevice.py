"""Run the device-count-agnostic scaling tests again with several host devices.

JAX fixes its device count when it starts, and this process already started it with one
CPU device; so each count gets a fresh pytest in a subprocess with
``XLA_FLAGS=--xla_force_host_platform_device_count=N`` (the main run covers N = 1).
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).parent
ROOT = HERE.parents[1]
# Per count: which modules (and tests) to run. 4 devices: a 2 x 2 x 1 grid, every test;
# 3 devices: slabs, the equality of decomposed and single-domain MD only (compiling is the slow part).
RUNS = {4: ["test_domains.py", "test_sharding.py"],
        3: ["test_domains.py::test_decomposed_nve_equals_single_domain_with_migration"]}


@pytest.mark.parametrize("devices", sorted(RUNS))
def test_on_several_host_devices(devices):
    env = dict(os.environ, XLA_FLAGS=f"--xla_force_host_platform_device_count={devices}", JAX_PLATFORMS="cpu")
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    targets = [str(HERE / t) for t in RUNS[devices]]
    result = subprocess.run([sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", *targets],
                            capture_output=True, text=True, env=env, cwd=ROOT, timeout=900)
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-3000:]
    assert " passed" in result.stdout and "skipped" not in result.stdout, result.stdout[-2000:]
