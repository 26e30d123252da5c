"""Run the device suite (tests/gpu) and write a markdown report of it.

    python tests/gpu/report.py --out DIR [--python PYTHON] [-- PYTEST ARGS...]

Writes ``DIR/gpu_suite.md`` (device, versions, counts, one row per test with its outcome,
time and the first line of any failure) and ``DIR/gpu_suite.junit.xml`` (pytest's own
record). Exits with pytest's exit status, so a failing suite fails the command. Meant to
be run on a GPU machine; without one the report shows the skips and their reason.
"""
from __future__ import annotations

import argparse
import datetime
import platform
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SUITE = "tests/gpu"


def _run(command: list[str], timeout: float = 120) -> str:
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout, cwd=ROOT)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"unavailable ({type(exc).__name__}: {exc})"
    return (done.stdout + done.stderr).strip()


def environment(python: str) -> list[tuple[str, str]]:
    """(name, value) rows describing the machine, collected in the interpreter under test."""
    probe = r"""
import importlib.metadata as md, platform, sys
def v(name):
    try:
        return md.version(name)
    except md.PackageNotFoundError:
        return "not installed"
rows = [("python", sys.version.split()[0] + " (" + platform.platform() + ")")]
for dist in ("adoffload", "numpy", "llvmlite", "jax", "jaxlib", "cuda-bindings", "cuda-python",
             "nvidia-cuda-nvcc", "nvidia-nvvm", "pytest"):
    rows.append((dist, v(dist)))
try:
    from adoffload.runtime import get_device
    dev = get_device("cuda")
    props = dev.properties()
    rows.append(("CUDA device", f"{dev.spec} {props['name']}"))
    rows.append(("compute capability", "{}.{} ({})".format(*props["compute_capability"], dev.arch)))
    rows.append(("GPU memory", f"{props['total_memory'] / 2**30:.1f} GiB"))
    rows.append(("driver CUDA version", props["driver_cuda_version"]))
except Exception as exc:
    rows.append(("CUDA device", f"none ({type(exc).__name__}: {exc})"))
try:
    from adoffload.codegen import tools
    rows.append(("ptxas", str(tools.find_ptxas())))
except Exception as exc:
    rows.append(("ptxas", f"not found ({exc})"))
for name, value in rows:
    print(f"{name}\t{value}")
"""
    text = _run([python, "-c", probe])
    rows = [tuple(line.split("\t", 1)) for line in text.splitlines() if "\t" in line]
    if not rows:
        rows = [("environment probe", text.splitlines()[-1] if text else "no output")]
    commit = _run(["git", "rev-parse", "--short", "HEAD"])
    dirty = _run(["git", "status", "--porcelain", "--untracked-files=no"])
    rows.insert(0, ("commit", commit + (" (with uncommitted changes)" if dirty and "fatal" not in commit else "")))
    rows.insert(0, ("date (UTC)", datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M")))
    rows.insert(1, ("host", platform.node()))
    return rows


def results(junit: Path) -> list[dict]:
    """One dict per test case of a junit XML file: name, outcome, seconds, message."""
    if not junit.is_file():
        return []
    cases = []
    for case in ET.parse(junit).getroot().iter("testcase"):
        module = case.get("classname", "").rsplit(".", 1)[-1]
        outcome, message = "passed", ""
        for tag in ("failure", "error", "skipped"):
            node = case.find(tag)
            if node is not None:
                outcome = {"failure": "FAILED", "error": "ERROR", "skipped": "skipped"}[tag]
                message = (node.get("message") or node.text or "").strip()
                break
        cases.append({"name": f"{module}::{case.get('name')}", "outcome": outcome,
                      "seconds": float(case.get("time") or 0.0), "message": message})
    return cases


def _cell(text: str, limit: int = 160) -> str:
    first = text.splitlines()[0] if text else ""
    first = first if len(first) <= limit else first[:limit - 3] + "..."
    return first.replace("|", "\\|")


def markdown(env: list[tuple[str, str]], cases: list[dict], exit_code: int, command: list[str]) -> str:
    counts: dict[str, int] = {}
    for c in cases:
        counts[c["outcome"]] = counts.get(c["outcome"], 0) + 1
    summary = ", ".join(f"{n} {k}" for k, n in sorted(counts.items())) or "no tests ran"
    lines = ["# adoffload device suite (tests/gpu)", "",
             f"**Result:** {summary}; pytest exit status {exit_code}.", ""]
    gpu_ran = [c for c in cases if c["name"].startswith("test_cuda_") and c["outcome"] != "skipped"]
    if cases and not gpu_ran:
        lines += ["**Warning:** every CUDA test was skipped: this run says nothing about the GPU.", ""]
    lines += [
             f"Command: `{' '.join(command)}`", "", "## Machine and versions", "",
             "| | |", "|---|---|"]
    lines += [f"| {name} | {_cell(value, 200)} |" for name, value in env]
    failed = [c for c in cases if c["outcome"] in ("FAILED", "ERROR")]
    if failed:
        lines += ["", "## Failures", ""]
        for c in failed:
            lines += [f"### {c['name']}", "", "```", c["message"][:3000], "```", ""]
    skipped = {c["message"] for c in cases if c["outcome"] == "skipped"}
    if skipped:
        lines += ["", "## Skip reasons", ""] + [f"* {_cell(m, 300)}" for m in sorted(skipped)]
    lines += ["", "## Tests", "", "| test | outcome | seconds | note |", "|---|---|---:|---|"]
    lines += [f"| `{c['name']}` | {c['outcome']} | {c['seconds']:.2f} | "
              f"{_cell(c['message']) if c['outcome'] != 'skipped' else ''} |" for c in cases]
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", required=True, type=Path, help="folder for gpu_suite.md and the junit XML")
    parser.add_argument("--python", default=sys.executable, help="interpreter to run pytest with")
    parser.add_argument("pytest_args", nargs="*", help="extra pytest arguments (after --)")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    junit = args.out / "gpu_suite.junit.xml"
    command = [args.python, "-m", "pytest", SUITE, "-q", "-p", "no:cacheprovider", f"--junitxml={junit}",
               *args.pytest_args]
    proc = subprocess.run(command, cwd=ROOT)
    report = markdown(environment(args.python), results(junit), proc.returncode,
                      ["python", "-m", "pytest", SUITE, *args.pytest_args])
    path = args.out / "gpu_suite.md"
    path.write_text(report)
    print(f"wrote {path}")
    return proc.returncode


if __name__ == "__main__":
    sys.exit(main())
