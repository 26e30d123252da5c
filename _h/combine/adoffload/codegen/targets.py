"""LLVM initialization and target machines, one per (triple, cpu, features), created once."""
from __future__ import annotations

import functools

import llvmlite.binding as llvm

from ..errors import CompilationError

NVPTX_TRIPLE = "nvptx64-nvidia-cuda"
AMDGPU_TRIPLE = "amdgcn-amd-amdhsa"
NVPTX_ARCHS = ("sm_70", "sm_75", "sm_80", "sm_86", "sm_89", "sm_90", "sm_100", "sm_120")
AMDGPU_ARCHS = ("gfx90a", "gfx942", "gfx1100")


@functools.cache
def initialize() -> None:
    # llvm.initialize() is done by llvmlite itself in 0.45+; these are still required.
    llvm.initialize_all_targets()
    llvm.initialize_all_asmprinters()
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    llvm.initialize_native_asmparser()   # inline asm in foreign IR: without it LLVM aborts the process


@functools.cache
def target_machine(triple: str, cpu: str = "", features: str = "", opt: int = 3, reloc: str = "default",
                   codemodel: str = "jitdefault"):
    initialize()
    try:
        target = llvm.Target.from_triple(triple)
    except RuntimeError as exc:
        raise CompilationError(f"LLVM has no target for {triple!r}: {exc}") from exc
    return target.create_target_machine(cpu=cpu, features=features, opt=opt, reloc=reloc,
                                        codemodel=codemodel)


def host_target_machine(fresh: bool = False, codegen_level: int = 3):
    """The native target machine. ``fresh=True`` builds a new one: an MCJIT engine takes
    ownership of (and later frees) the target machine it is given, so it must not be shared.
    ``codegen_level`` is the backend's optimization level (0: fast instruction selection)."""
    initialize()
    args = (llvm.get_process_triple(), llvm.get_host_cpu_name(), llvm.get_host_cpu_features().flatten())
    return (target_machine.__wrapped__(*args, opt=codegen_level) if fresh
            else target_machine(*args, opt=codegen_level))
