"""Canonicalization with LLVM's new pass manager, run before import (and so before AD).

Inline ``alwaysinline`` helpers, drop the ones left unused, then SROA (allocas to SSA),
early CSE, instcombine, simplifycfg, loop-simplify and LCSSA: the shape the AD engine
expects (Enzyme differentiates after the same clean-up, for the same reasons).
llvmlite 0.50 exposes no early-cse pass; new-GVN after instcombine takes its place.
"""
from __future__ import annotations

import re

import llvmlite.binding as llvm

from ..errors import IRError
from .llvm_import import parse_llvm

_FUNCTION_PASSES = ("add_sroa_pass", "add_instruction_combine_pass", "add_new_gvn_pass",
                    "add_instruction_combine_pass", "add_simplify_cfg_pass", "add_loop_simplify_pass",
                    "add_lcssa_pass")
# Foreign IR (``from_llvm``) gets SROA and instcombine once more after simplifycfg: rustc's inlined
# RawVec::grow keeps the new block's address in a stack slot that the first SROA cannot promote
# (a phi of two slots joins the error paths); once simplifycfg has merged the blocks it can, and the
# Vec's pointer no longer reaches its users through an ``inttoptr`` the AD engine cannot follow.
_PROMOTE_AGAIN = ("add_sroa_pass", "add_instruction_combine_pass")
# rustc -O0/-O1 IR with liballoc's RawVecInner bodies inlined (ir/rust_alloc.py): a Result returned
# through memory joins the new block's address with the error's size in one integer phi; jump
# threading sends the error edges straight to the error branch, so the phi the Vec's pointer is
# rebuilt from holds only addresses (ir/pointer_phis.py).
_THREAD_JUMPS = ("add_jump_threading_pass", "add_simplify_cfg_pass", "add_sroa_pass", "add_instruction_combine_pass")

_initialized = False


def _target_machine() -> llvm.TargetMachine:
    global _initialized
    if not _initialized:
        llvm.initialize_native_target()
        llvm.initialize_native_asmprinter()
        _initialized = True
    return llvm.Target.from_default_triple().create_target_machine()


def canonicalize_module(module: llvm.ModuleRef, *, inline: bool = True, promote_again: bool = False,
                        thread_jumps: bool = False) -> llvm.ModuleRef:
    """Run the canonical pipeline in place on a parsed llvmlite module; returns it
    (``promote_again``: see ``_PROMOTE_AGAIN``; ``thread_jumps``: ``_THREAD_JUMPS``)."""
    tuning = llvm.create_pipeline_tuning_options()
    pass_builder = llvm.create_pass_builder(_target_machine(), tuning)
    passes = llvm.create_new_module_pass_manager()
    if inline:
        passes.add_always_inliner_pass()
        passes.add_global_dead_code_eliminate_pass()
    names = _FUNCTION_PASSES
    if promote_again:                   # before loop-simplify and LCSSA, which must come last
        names = names[:5] + _PROMOTE_AGAIN + (_THREAD_JUMPS if thread_jumps else ()) + names[5:]
    for name in names:
        getattr(passes, name)()
    passes.add_verifier()
    passes.run(module, pass_builder)
    return module


def canonicalize(source: str | bytes, *, inline: bool = True, promote_again: bool = False,
                 thread_jumps: bool = False) -> str:
    """Canonical LLVM IR text for LLVM IR text or bitcode (see the module docstring)."""
    return str(canonicalize_module(parse_llvm(source), inline=inline, promote_again=promote_again,
                                   thread_jumps=thread_jumps))


# Attributes that keep LLVM from optimizing or inlining a function: clang -O0 puts
# ``noinline optnone`` on every function, and users mark helpers ``noinline``.
_BLOCKING_ATTRIBUTES = re.compile(r"\b(optnone|noinline)\b ?")
_ATTRIBUTE_GROUP = re.compile(r"^(attributes #\d+ = \{)(.*)\}$", re.M)
# what may stand between a definition's parameter list and its function attributes
_AFTER_PARAMETERS = re.compile(r"(?:\s+(?:local_unnamed_addr|unnamed_addr|addrspace\(\d+\)))*")
_DEFINE = re.compile(r"^define\b[^\n]*?@(?:\"[^\"]*\"|[-\w$.]+)\(", re.M)
# Fast-math flags on a comparison, select or phi: with ``nnan nsz`` there, instcombine turns
# ``select (fcmp ogt a, b), a, b`` into ``maxnum(a, b)``, which may return either operand on a tie
# (the select returns b), so the derivative could go to the element the program did not select
# (Enzyme's vecmax.c under -ffast-math). Dropping the flags only makes results more defined (no
# poison for NaN operands); the arithmetic keeps its flags.
_SELECTION_FLAGS = re.compile(r"(= (?:select|phi|fcmp))((?: (?:fast|nnan|ninf|nsz|arcp|contract|afn|reassoc))+)(?= )")


def prepare_for_analysis(source: str | bytes) -> str:
    """LLVM IR text in which every defined function can be optimized and inlined.

    Foreign IR is differentiated in its optimized form whatever its attributes, as Enzyme
    does: ``optnone``/``noinline`` (every function at clang -O0) are dropped and every defined
    function is marked ``alwaysinline``, so canonicalization promotes stack slots to SSA and
    inlines callees (a call left afterwards is recursive or external). Fast-math flags are dropped
    from fcmps, selects and phis (``_SELECTION_FLAGS``: a select keeps the operand it returns on a tie).
    Semantics are unchanged (or refined: fewer results are poison).
    """
    text = str(parse_llvm(source)) if isinstance(source, (bytes, bytearray)) else source
    text = _SELECTION_FLAGS.sub(r"\1", text)
    text = _ATTRIBUTE_GROUP.sub(lambda m: m.group(1) + (_BLOCKING_ATTRIBUTES.sub("", m.group(2)).strip()
                                                       or "alwaysinline") + " }", text)   # a group may not be empty
    pieces, last = [], 0
    for match in _DEFINE.finditer(text):
        after = _AFTER_PARAMETERS.match(text, _matching_paren(text, match.end() - 1) + 1).end()
        pieces += [text[last:after], " alwaysinline"]
        last = after
    text = "".join(pieces) + text[last:]
    # a define line may also carry the blocking attributes inline, after its parameter list
    return re.sub(r"^(define\b[^\n]*)$", lambda m: _BLOCKING_ATTRIBUTES.sub("", m.group(1)), text, flags=re.M)


def _matching_paren(text: str, open_at: int) -> int:
    depth, k = 0, open_at
    while k < len(text):
        if text[k] == "(":
            depth += 1
        elif text[k] == ")":
            depth -= 1
            if depth == 0:
                return k
        elif text[k] == '"':                       # a quoted name or string may hold parentheses
            k = text.index('"', k + 1)
        k += 1
    raise IRError("unbalanced parentheses in a function definition")
