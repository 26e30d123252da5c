"""``freeze`` of a pointer argument is the argument itself.

LLVM's loop unswitching freezes a value it moves a branch on; numba's IR for a reversed view
(``x[::-1]``) freezes the data pointer argument it came from, ``%p = freeze ptr %arg``. The AD
engine follows pointers through GEPs, casts, phis and selects to the argument whose shadow they
take, not through ``freeze``, and refuses the function. ``freeze`` only differs from its operand
when that operand is ``undef`` or ``poison``; an argument is neither where a foreign function is
called (ctypes and derivative functions pass addresses), so its uses can take the argument.
Frozen values of other kinds are left alone: integers decide nothing AD follows, and floats have
a derivative rule (the identity).
"""
from __future__ import annotations

from .core import Argument, Module


def unfreeze_pointer_arguments(module: Module) -> int:
    """Replace every ``freeze ptr %arg`` of a defined function by ``%arg``; returns how many."""
    replaced = 0
    for fn in module.functions.values():
        if fn.is_declaration:
            continue
        frozen = {id(i): i for i in fn.instructions()
                  if i.opcode == "freeze" and i.type.is_pointer and isinstance(i.operands[0], Argument)}
        if not frozen:
            continue
        for inst in fn.instructions():
            inst.operands = [frozen[id(o)].operands[0] if id(o) in frozen else o for o in inst.operands]
            if id(inst.callee) in frozen:
                inst.callee = frozen[id(inst.callee)].operands[0]
        for inst in frozen.values():
            inst.parent.instructions.remove(inst)
            inst.parent = None
        replaced += len(frozen)
    return replaced
