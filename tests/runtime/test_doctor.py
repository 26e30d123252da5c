"""The doctor report: one line per probe, failures reported rather than raised."""
from __future__ import annotations

import llvmlite

from adoffload.tools import doctor


def test_report_lists_versions_targets_devices_and_tools():
    text = doctor.report()
    names = [line.split("  ")[0].strip() for line in text.splitlines()]
    for name in ("python", "adoffload", "numpy", "llvmlite", "jax", "cuda-python", "CUDA devices",
                 "HIP devices", "ptxas", "libdevice", "ld.lld", "ROCm ocml"):
        assert name in names, text
    assert llvmlite.__version__ in text and "NVPTX yes" in text and "AMDGPU yes" in text
    cuda_line = next(line for line in text.splitlines() if line.startswith("CUDA devices"))
    assert "cuda:0" in cuda_line or "none: " in cuda_line   # a device, or the reason there is none


def test_failing_probe_becomes_a_line(monkeypatch):
    def broken():
        raise RuntimeError("jax exploded")
    monkeypatch.setattr(doctor, "_jax", broken)
    assert "unavailable: RuntimeError: jax exploded" in doctor.report()


def test_main_prints_the_report(capsys):
    assert doctor.main() == 0
    assert "libdevice" in capsys.readouterr().out
