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


def optimize_counting_module(module: llvm.ModuleRef, level: int = 2, target_machine=None,
                             rounds: int = 4) -> llvm.ModuleRef:
    """The pipeline for counting functions (enzyme/counting.py): O3 without vectorizing or
    unrolling, repeated while it changes the module (at most ``rounds`` times), then the ordinary
    O``level`` pipeline. IndVarSimplify folds a loop's count into a closed form only when the
    per-iteration increment is already one value; in a nest that value is the closed form of the
    loop inside, which appears (as a select on the inner loop's guard, or in one copy per guard once
    O3's non-trivial unswitching has hoisted loop-invariant branches such as a vectorized primal's
    iteration checks) only after the cleanup that follows -- so each round folds one more level,
    and ``for b < B, t < T, c < C`` ends as a few multiplies. Vectorizing first would turn the
    counting loops into vector reductions instead."""
    tm = target_machine or host_target_machine()
    if not module.triple or module.triple.startswith("unknown"):
        module.triple = tm.triple
    if not module.data_layout:
        module.data_layout = str(tm.target_data)
    before = str(module)
    for _ in range(rounds):
        pto = llvm.create_pipeline_tuning_options(speed_level=3)
        pto.loop_vectorization = pto.slp_vectorization = pto.loop_unrolling = False
        pb = llvm.create_pass_builder(tm, pto)
        pb.getModulePassManager().run(module, pb)
        after = str(module)
        if after == before:
            break
        before = after
    return optimize_module(module, level, tm)


def optimize(text: str, level: int = 3, target_machine=None) -> str:
    """Optimize LLVM IR text at O``level`` for ``target_machine`` (the host when None)."""
    try:
        module = llvm.parse_assembly(text)
    except RuntimeError as exc:
        raise CompilationError(f"cannot parse module to optimize: {exc}") from exc
    return str(optimize_module(module, level, target_machine))
