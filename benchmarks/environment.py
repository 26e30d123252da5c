"""What every result file records (shared/BENCHMARKS.md): date, machine, load, GPU and driver,
versions, commit and command line. Host timings on a shared machine mean little without the
load next to them, so the load average is read before and after each suite."""
from __future__ import annotations

import datetime
import importlib.metadata
import os
import platform
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
# Packages whose versions a result depends on (a missing one is recorded as absent).
PACKAGES = ("jax", "jaxlib", "llvmlite", "numpy", "numba", "warp-lang", "cupy-cuda12x", "cupy-cuda13x", "jax-md")


def load_average() -> str:
    try:
        return " ".join(f"{v:.2f}" for v in os.getloadavg())
    except OSError:
        return "unknown"


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def gpu_description() -> str:
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,clocks.max.sm,memory.total",
                              "--format=csv,noheader"], capture_output=True, text=True, timeout=20).stdout.strip()
        return out or "none"
    except (OSError, subprocess.SubprocessError):
        return "none (nvidia-smi not found)"


def git_commit() -> str:
    try:
        done = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True, timeout=10)
        dirty = subprocess.run(["git", "-C", str(REPO), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=10).stdout.strip()
        return (done.stdout.strip() + ("+changes" if dirty else "")) if done.returncode == 0 else "unknown"
    except (OSError, subprocess.SubprocessError):
        return os.environ.get("GIT_REV", "unknown")


def versions() -> dict:
    found = {}
    for name in PACKAGES:
        try:
            found[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
    return found


def environment() -> dict:
    """The record written with every suite's rows."""
    return {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "host": platform.node(), "cpu": cpu_model(), "cores": os.cpu_count(),
            "load_average_start": load_average(), "gpu": gpu_description(), "python": platform.python_version(),
            "versions": versions(), "commit": git_commit(), "command": " ".join(sys.argv)}
