"""Canonicalization with LLVM's new pass manager, run before import (and so before AD).

Inline ``alwaysinline`` helpers, drop the ones left unused, then SROA (allocas to SSA),
early CSE, instcombine, simplifycfg, loop-simplify and LCSSA: the shape the AD engine
expects (Enzyme differentiates after the same clean-up, for the same reasons).
llvmlite 0.50 exposes no early-cse pass; new-GVN after instcombine takes its place.
"""
from __future__ import annotations

import llvmlite.binding as llvm

from .llvm_import import parse_llvm

_FUNCTION_PASSES = ("add_sroa_pass", "add_instruction_combine_pass", "add_new_gvn_pass",
                    "add_instruction_combine_pass", "add_simplify_cfg_pass", "add_loop_simplify_pass",
                    "add_lcssa_pass")

_initialized = False


def _target_machine() -> llvm.TargetMachine:
    global _initialized
    if not _initialized:
        llvm.initialize_native_target()
        llvm.initialize_native_asmprinter()
        _initialized = True
    return llvm.Target.from_default_triple().create_target_machine()


def canonicalize_module(module: llvm.ModuleRef, *, inline: bool = True) -> llvm.ModuleRef:
    """Run the canonical pipeline in place on a parsed llvmlite module; returns it."""
    tuning = llvm.create_pipeline_tuning_options()
    pass_builder = llvm.create_pass_builder(_target_machine(), tuning)
    passes = llvm.create_new_module_pass_manager()
    if inline:
        passes.add_always_inliner_pass()
        passes.add_global_dead_code_eliminate_pass()
    for name in _FUNCTION_PASSES:
        getattr(passes, name)()
    passes.add_verifier()
    passes.run(module, pass_builder)
    return module


def canonicalize(source: str | bytes, *, inline: bool = True) -> str:
    """Canonical LLVM IR text for LLVM IR text or bitcode (see the module docstring)."""
    return str(canonicalize_module(parse_llvm(source), inline=inline))
