"""The GPU code of an adjoint's float atomics (issue #12 item 3) and uniform adds (item 2).

* NVPTX: f64 adds are the native ``atom.global.add.f64`` (sm_60 and later), never a
  compare-and-swap loop; ptxas turns an atom whose result is unused into ``RED.E.ADD.F64``.
* AMDGPU: float atomics are marked coarse-grained, so gfx942 gets ``global_atomic_add_f64``
  instead of a CAS loop; a uniform-address add is reduced across the wavefront (LLVM's atomic
  optimizer: ``v_readlane`` over the active lanes) and added by one lane.
* Both: the neighbor sum's uniform ``d_w[1]`` (summed per thread in its loop) is combined with
  warp shuffles on NVPTX.
"""
from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from adoffload.tools.cli import gcn_assembly, load_kernel
from adoffload.codegen.gpu import amdgpu
from adoffload.kernels.kernel import vjp

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = str(ROOT / "tests/fixtures/stats/scatter_kernels.py")


def _adjoint():
    return vjp(load_kernel(f"{FIXTURE}:neighbor_sum"), ["x", "w"])


@pytest.mark.parametrize("arch", ["sm_70", "sm_90"])
def test_nvptx_f64_atomics_are_native(arch):
    ptx = _adjoint().compiled("nvptx", arch=arch).artifact
    assert ptx.count("atom.global.add.f64") >= 2         # d_x[j] in the loop, d_x[i] once after it
    assert "atom.global.cas" not in ptx and "atom.cas" not in ptx
    assert "shfl.sync.down" in ptx                      # d_w[1]: a warp reduction before its atomic


def _sass_tools():
    """(ptxas, cuobjdump, the folder of nvdisasm), looked for beside ptxas (the CUDA wheels) and
    on PATH; None when one is missing."""
    from adoffload.codegen.gpu.tools import find_ptxas
    try:
        ptxas = find_ptxas()
    except Exception:
        return None
    found = [ptxas.parent / name if (ptxas.parent / name).is_file() else shutil.which(name)
             for name in ("cuobjdump", "nvdisasm")]
    return None if None in found else (ptxas, Path(found[0]), Path(found[1]).parent)


@pytest.mark.skipif(_sass_tools() is None, reason="reading SASS needs cuobjdump and nvdisasm (pip install "
                                                  "nvidia-cuda-cuobjdump nvidia-cuda-nvdisasm), not installed")
def test_ptxas_turns_unused_f64_atoms_into_reductions(tmp_path):
    import os
    ptxas, cuobjdump, nvdisasm_dir = _sass_tools()
    (tmp_path / "k.ptx").write_text(_adjoint().compiled("nvptx", arch="sm_90").artifact)
    subprocess.run([str(ptxas), "-arch=sm_90", str(tmp_path / "k.ptx"), "-o", str(tmp_path / "k.cubin")], check=True)
    sass = subprocess.run([str(cuobjdump), "-sass", str(tmp_path / "k.cubin")], capture_output=True, text=True,
                          check=True, env={**os.environ, "NVDISASM_PATH": str(nvdisasm_dir)}).stdout
    assert re.search(r"REDG?\.E\.ADD\.F64", sass) and not re.search(r"ATOMG?\.E\.CAS", sass)


def test_amdgpu_float_atomics_are_marked_coarse_grained():
    text = ("  %o = atomicrmw fadd ptr %p, double %v monotonic, align 8, !adoffload.loc !3\n"
            "  atomicrmw fsub ptr %p, float %w monotonic\n"
            "  %x = atomicrmw xchg ptr %s, i64 1 monotonic, align 8\n")
    marked = amdgpu.coarse_grained_float_atomics(text).splitlines()
    assert marked[0].endswith("!adoffload.loc !3, !amdgpu.no.fine.grained.memory !{}")
    assert marked[1].endswith("monotonic, !amdgpu.no.fine.grained.memory !{}")
    assert marked[2] == "  %x = atomicrmw xchg ptr %s, i64 1 monotonic, align 8"


def test_amdgpu_f64_atomics_are_native_and_uniform_adds_wave_reduced():
    gcn = gcn_assembly(_adjoint(), "gfx942")
    assert "global_atomic_add_f64" in gcn and "cmpswap" not in gcn
    assert "v_readlane_b32" in gcn                        # d_w[1]: summed over the wavefront's lanes
