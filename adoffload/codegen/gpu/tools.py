"""Locating the external pieces GPU code generation needs: ptxas, libdevice, ld.lld, ocml.

Each finder looks in the pip wheels first (the ``cuda``/``amd`` extras), then in the usual
toolkit places, and raises ``ToolNotFoundError`` naming the extra that brings the tool.
"""
from __future__ import annotations

import functools
import glob
import importlib.util
import os
import shutil
import site
import sys
from pathlib import Path

from ...errors import ToolNotFoundError


def _site_dirs() -> list[Path]:
    dirs = list(site.getsitepackages()) + [site.getusersitepackages()] + list(sys.path)
    return [Path(d) for d in dict.fromkeys(dirs) if d and os.path.isdir(d)]


def _cuda_homes() -> list[Path]:
    homes = [os.environ.get(k) for k in ("CUDA_HOME", "CUDA_PATH")]
    homes += sorted(glob.glob("/usr/local/cuda*"), reverse=True)
    return [Path(h) for h in homes if h and os.path.isdir(h)]


def _first_existing(candidates) -> Path | None:
    for c in candidates:
        if c.is_file():
            return c
    return None


@functools.cache
def find_ptxas() -> Path:
    wheel = [d / "nvidia" / cu / "bin" / "ptxas" for d in _site_dirs() for cu in ("cu13", "cu12", "cuda_nvcc")]
    found = _first_existing(wheel + [h / "bin" / "ptxas" for h in _cuda_homes()])
    if found is None and shutil.which("ptxas"):
        found = Path(shutil.which("ptxas"))
    if found is None:
        raise ToolNotFoundError("ptxas not found: install the CUDA extra (pip install 'adoffload[cuda]', "
                                "which brings nvidia-cuda-nvcc) or set CUDA_HOME")
    return found


@functools.cache
def find_libdevice() -> Path:
    rel = Path("nvvm") / "libdevice" / "libdevice.10.bc"
    wheel = [d / "nvidia" / cu / rel for d in _site_dirs() for cu in ("cu13", "cu12", "cuda_nvcc")]
    found = _first_existing(wheel + [h / rel for h in _cuda_homes()])
    if found is None:
        raise ToolNotFoundError("libdevice.10.bc not found: install the CUDA extra (pip install "
                                "'adoffload[cuda]', which brings nvidia-nvvm) or set CUDA_HOME")
    return found


@functools.cache
def find_lld() -> list[str]:
    """The command that runs ld.lld: ``python -m ziglang ld.lld`` or a system ``ld.lld``."""
    if importlib.util.find_spec("ziglang") is not None:
        return [sys.executable, "-m", "ziglang", "ld.lld"]
    for name in ("ld.lld", "ld.lld-22", "ld.lld-20", "ld.lld-18", "ld.lld-17", "ld.lld-16"):
        path = shutil.which(name)
        if path:
            return [path]
    rocm = _first_existing([Path(r) / "llvm" / "bin" / "ld.lld" for r in _rocm_roots()])
    if rocm is not None:
        return [str(rocm)]
    raise ToolNotFoundError("ld.lld not found: install the AMD extra (pip install 'adoffload[amd]', "
                            "which brings ziglang) or a system lld")


def _rocm_roots() -> list[str]:
    roots = [os.environ.get("ROCM_PATH"), "/opt/rocm"] + sorted(glob.glob("/opt/rocm-*"), reverse=True)
    return [r for r in roots if r and os.path.isdir(r)]


@functools.cache
def find_ocml() -> Path | None:
    """ROCm's ocml.bc (device math for AMDGPU), or None: our own devicemath is used then."""
    for root in _rocm_roots():
        for sub in ("amdgcn/bitcode/ocml.bc", "lib/llvm/lib/clang/*/lib/amdgcn/bitcode/ocml.bc"):
            hits = sorted(glob.glob(os.path.join(root, sub)))
            if hits:
                return Path(hits[-1])
    return None
