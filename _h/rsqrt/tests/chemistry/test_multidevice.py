"""Run the device-count-agnostic scaling tests again with several host devices.

JAX fixes its device count when it starts, and this process already started it with one
CPU device; so each count gets a fresh pytest in a subprocess with
``XLA_FLAGS=--xla_force_host_platform_device_count=N`` (the main run covers N = 1). These
are the suite's long tests (marked ``slow``, about a minute of CPU each, mostly compiling);
``-m "not slow"`` leaves them out.
"""
from __future__ import annotations

import os
import socket
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


@pytest.mark.slow
@pytest.mark.parametrize("devices", sorted(RUNS))
def test_on_several_host_devices(devices):
    env = dict(os.environ, XLA_FLAGS=f"--xla_force_host_platform_device_count={devices}", JAX_PLATFORMS="cpu")
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    targets = [str(HERE / t) for t in RUNS[devices]]
    result = subprocess.run([sys.executable, "-m", "pytest", "-o", "addopts=", "-x", "-q", "-rs", "-p", "no:cacheprovider",
                             *targets],
                            capture_output=True, text=True, env=env, cwd=ROOT, timeout=900)
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-3000:]
    assert " passed" in result.stdout and "skipped" not in result.stdout, result.stdout[-2000:]


def _free_port():
    with socket.socket() as s:
        s.bind(("localhost", 0))
        return s.getsockname()[1]


@pytest.mark.slow
def test_lj_clusters_over_two_processes(tmp_path):
    """The multi-host launch of docs/scaling.md on one machine: two processes of two CPU devices
    each join through JAX_COORDINATOR_ADDRESS, share the walkers and agree on the result."""
    address = f"localhost:{_free_port()}"
    runs = []
    for rank in range(2):
        env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=2", JAX_PLATFORMS="cpu",
                   JAX_COORDINATOR_ADDRESS=address, JAX_NUM_PROCESSES="2", JAX_PROCESS_ID=str(rank))
        env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
        command = [sys.executable, str(ROOT / "examples" / "chemistry" / "lj_clusters.py"), "--backend", "jax",
                   "--atoms", "7", "--clusters", "8", "--steps", "2", "--fire-steps", "30", "--out", str(tmp_path / str(rank))]
        runs.append(subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=ROOT))
    outputs = []
    for run in runs:
        out, err = run.communicate(timeout=600)
        assert run.returncode == 0, out[-3000:] + err[-3000:]
        outputs.append(out)
    lowest = [line for out in outputs for line in out.splitlines() if line.startswith("lowest energy reached")]
    assert all("on 4 cpu devices on 2 processes" in out for out in outputs), outputs[0][-2000:]
    assert len(lowest) == 2 and lowest[0] == lowest[1], lowest
