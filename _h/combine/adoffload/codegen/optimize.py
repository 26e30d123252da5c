"""The LLVM optimization pipeline (new pass manager), run with a target machine so that
target-specific passes (vectorizer cost models, NVPTX/AMDGPU address-space inference) apply."""
from __future__ import annotations

import llvmlite.binding as llvm

from ..errors import CompilationError
from .targets import host_target_machine


def optimize_module(module: llvm.ModuleRef, level: int = 3, target_machine=None) -> llvm.ModuleRef:
    """Run the default O``level`` pipeline on a parsed module in place and return it."""
    if not 0 <= level <= 3:
        raise CompilationError(f"optimization level must be 0..3, got {level}")
    tm = target_machine or host_target_machine()
    if not module.triple or module.triple.startswith("unknown"):
        module.triple = tm.triple
    if not module.data_layout:
        module.data_layout = str(tm.target_data)
    pto = llvm.create_pipeline_tuning_options(speed_level=level)
    pto.loop_vectorization = level >= 2
    pto.slp_vectorization = level >= 2
    pto.loop_unrolling = level >= 1
    pb = llvm.create_pass_builder(tm, pto)
    pb.getModulePassManager().run(module, pb)
    return module


def optimize(text: str, level: int = 3, target_machine=None) -> str:
    """Optimize LLVM IR text at O``level`` for ``target_machine`` (the host when None)."""
    try:
        module = llvm.parse_assembly(text)
    except RuntimeError as exc:
        raise CompilationError(f"cannot parse module to optimize: {exc}") from exc
    return str(optimize_module(module, level, target_machine))
