"""The NVIDIA target: LLVM IR (with a GPU entry) -> PTX, math through libdevice.

Steps: map math calls to libdevice ``__nv_*`` names, set the ``nvvm-reflect-ftz`` flag
(libdevice branches on it), link libdevice, internalize everything but the kernels, O3
with the NVPTX target machine (its pipeline runs NVVMReflect), emit PTX. Internalizing
first lets global DCE drop the unused libdevice functions: the PTX stays small.
"""
from __future__ import annotations

import functools
import re
import subprocess
import tempfile
from pathlib import Path

import llvmlite.binding as llvm

from ...errors import CompilationError
from .mathmap import libm_name, libm_to_intrinsics, rename_math_calls
from ..optimize import optimize_module
from .shared_alignment import unmask_shared_pointers
from ..targets import NVPTX_TRIPLE, target_machine

# The PTX ISA version each architecture needs at least (LLVM feature "+ptxNN").
PTX_VERSION = {"sm_70": 60, "sm_75": 63, "sm_80": 70, "sm_86": 71, "sm_87": 74, "sm_89": 78,
               "sm_90": 78, "sm_90a": 80, "sm_100": 86, "sm_120": 87}
_FTZ_FLAG_MODULE = '!llvm.module.flags = !{!0}\n!0 = !{i32 4, !"nvvm-reflect-ftz", i32 0}\n'


def nvptx_target_machine(arch: str):
    if arch not in PTX_VERSION:
        raise CompilationError(f"unsupported NVIDIA architecture {arch!r}; expected one of {sorted(PTX_VERSION)}")
    return target_machine(NVPTX_TRIPLE, arch, f"+ptx{PTX_VERSION[arch]}")


def ptx_symbol(name: str) -> str:
    """The name a kernel gets in PTX: characters PTX forbids ('.', '@') become '_$_' (as LLVM
    does for internal symbols). The runtime looks kernels up by this name."""
    return re.sub(r"[.@]", "_$_", name)


def libdevice_name(op: str, kind: str) -> str:
    return "__nv_" + libm_name(op, kind)


@functools.cache
def _libdevice_bitcode() -> bytes:
    from .tools import find_libdevice
    return find_libdevice().read_bytes()


def _kernel_names(module: llvm.ModuleRef) -> list[str]:
    """Defined functions with the ptx_kernel calling convention."""
    names = []
    for fn in module.functions:
        if not fn.is_declaration:
            header = str(fn).lstrip().split("\n", 1)[0]
            if header.startswith("define") and "ptx_kernel" in header.split("@", 1)[0]:
                names.append(fn.name)
    return names


def internalize_except(module: llvm.ModuleRef, keep) -> None:
    """Give every defined function and global internal linkage, except ``keep``."""
    keep = set(keep)
    for value in list(module.functions) + list(module.global_variables):
        if not value.is_declaration and value.name not in keep:
            value.linkage = llvm.Linkage.internal


def prepare_nvptx_module(text: str, arch: str = "sm_90", kernels=None) -> llvm.ModuleRef:
    """Parse, map math to libdevice, link it, internalize, optimize at O3 for ``arch``."""
    tm = nvptx_target_machine(arch)
    text, used = rename_math_calls(libm_to_intrinsics(text), libdevice_name)
    try:
        module = llvm.parse_assembly(text)
        module.triple, module.data_layout = NVPTX_TRIPLE, str(tm.target_data)
        module.link_in(llvm.parse_assembly(_FTZ_FLAG_MODULE))
        keep = list(kernels) if kernels is not None else _kernel_names(module)
        if not keep:
            raise CompilationError("the module has no ptx_kernel function; add one with abi.add_gpu_entry")
        if used:
            libdevice = llvm.parse_bitcode(_libdevice_bitcode())
            libdevice.triple, libdevice.data_layout = module.triple, module.data_layout
            module.link_in(libdevice)
        internalize_except(module, keep)
        for name in keep:     # LLVM renames only internal symbols; kernels we rename ourselves
            module.get_function(name).name = ptx_symbol(name)
        module.verify()
    except RuntimeError as exc:
        raise CompilationError(f"preparing the module for {arch} failed: {exc}") from exc
    return unmask_shared_pointers(optimize_module(module, 3, tm))


def compile_ptx(text: str, arch: str = "sm_90", kernels=None) -> str:
    """PTX assembly for ``arch`` from LLVM IR containing ptx_kernel entries."""
    module = prepare_nvptx_module(text, arch, kernels)
    try:
        return nvptx_target_machine(arch).emit_assembly(module)
    except RuntimeError as exc:
        raise CompilationError(f"PTX emission for {arch} failed: {exc}") from exc


RESIDENT_THREADS = 512     # per SM: block kernels keep at most 128 registers per thread (65536 / 512)
MAX_BLOCKS_PER_SM = 32     # sm_70 to sm_90


def resident_threads(ptx: str, block_threads: int, threads: int = RESIDENT_THREADS) -> str:
    """``ptx`` with its entry telling ptxas its exact block size (``.maxntid``) and asking for enough
    resident blocks per SM to hold ``threads`` threads (``.minnctapersm``), which caps registers per
    thread at 65536 / ``threads``. Why: a block kernel's adjoint (a tiled SGEMM's: 186 registers, one
    block of 8 warps per SM) waits on shared memory with too few warps to switch to; capped at 128
    registers it spills a little and ran 1.4-1.6x faster on the H200
    (benchmarks/results/2026-12-01-h200-session9/occupancy/)."""
    blocks = min(MAX_BLOCKS_PER_SM, max(1, -(-threads // block_threads)))
    at = ptx.index("\n{", ptx.index(".entry"))
    return ptx[:at] + f"\n.maxntid {block_threads}, 1, 1\n.minnctapersm {blocks}" + ptx[at:]


def ptxas_check(ptx: str, arch: str = "sm_90") -> str:
    """Assemble ``ptx`` with ptxas -v (output discarded); return its resource report."""
    from .tools import find_ptxas
    with tempfile.TemporaryDirectory(prefix="adoffload-ptxas-") as tmp:
        src = Path(tmp) / "kernel.ptx"
        src.write_text(ptx)
        proc = subprocess.run([str(find_ptxas()), f"-arch={arch}", "-v", "-o", str(Path(tmp) / "kernel.cubin"),
                               str(src)], capture_output=True, text=True, timeout=120)
    report = (proc.stdout + proc.stderr).strip()
    if proc.returncode != 0:
        raise CompilationError(f"ptxas rejected the PTX for {arch}:\n{report}")
    return report
