"""``invoke`` of C++ ``operator new`` with a cleanup-only landing pad becomes a ``call``.

clang++ allocates with ``invoke`` wherever an allocation can throw while something already built
must be destroyed: the second of two ``std::vector``s in a function, ``std::vector`` members of a
struct, ``resize`` after ``reserve``::

    %p = invoke ptr @_Znwm(i64 %n) to label %ok unwind label %lp
  lp:
    %e = landingpad { ptr, i32 } cleanup            ; frees the first vector, then resumes

The AD engine knows heap blocks by allocation *calls* (enzyme/memory.ALLOCATORS), so such a block had
no shadow, and every store of an active value into it was refused. The rewrite::

    %p = call ptr @_Znwm(i64 %n)
    br label %ok

changes only what happens when the allocation throws ``std::bad_alloc``: the exception still leaves
the function, but without the cleanups, which only release what the function owns (a leak on an
out-of-memory path). A landing pad with ``catch`` or ``filter`` clauses (the function handles the
failure itself) keeps its ``invoke``: that changes behaviour, so it stays as it was.
"""
from __future__ import annotations

from .builder import Builder
from .core import Function, Instruction, Module

OPERATOR_NEW = frozenset({"_Znwm", "_Znam", "_ZnwmSt11align_val_t", "_ZnamSt11align_val_t",
                          "_Znwj", "_Znaj", "_ZnwjSt11align_val_t", "_ZnajSt11align_val_t"})   # (size_t: m 64-bit, j 32-bit)


def calls_for_invoked_allocations(module: Module) -> int:
    """Rewrite every ``invoke`` of a declared operator new whose unwind destination is a
    cleanup-only landing pad into a call and a branch; returns how many."""
    rewritten = 0
    for fn in module.functions.values():
        for block in list(fn.blocks):
            term = block.terminator
            if term is not None and _is_rewritable(term):
                _rewrite(term)
                rewritten += 1
    return rewritten


def _is_rewritable(inst: Instruction) -> bool:
    if inst.opcode != "invoke" or not isinstance(inst.callee, Function):
        return False
    if inst.callee.name not in OPERATOR_NEW or not inst.callee.is_declaration:
        return False
    pad = next((i for i in inst.blocks[1].instructions if i.opcode != "phi"), None)
    return pad is not None and pad.opcode == "landingpad" and not pad.operands and "cleanup" in pad.flags


def _rewrite(invoke: Instruction) -> None:
    block = invoke.parent
    normal, unwind = invoke.blocks
    invoke.opcode, invoke.blocks = "call", []
    for phi in unwind.phis:                     # the unwind destination loses this predecessor
        keep = [k for k, b in enumerate(phi.blocks) if b is not block]
        phi.operands = [phi.operands[k] for k in keep]
        phi.blocks = [phi.blocks[k] for k in keep]
    b = Builder(block)
    b.location = invoke.location
    b.br(normal)
