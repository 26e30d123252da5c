"""``freeze`` of a pointer argument (or of an allocator's result) is the argument (the result) itself.

LLVM's loop unswitching freezes a value it moves a branch on; numba's IR for a reversed view
(``x[::-1]``) freezes the data pointer argument it came from, ``%p = freeze ptr %arg``. The AD
engine follows pointers through GEPs, casts, phis and selects to the argument whose shadow they
take, not through ``freeze``, and refuses the function. ``freeze`` only differs from its operand
when that operand is ``undef`` or ``poison``; an argument is neither where a foreign function is
called (ctypes and derivative functions pass addresses), so its uses can take the argument.
The same holds for the block an allocator returns (an address or null, never ``undef`` or ``poison``):
instcombine freezes one it moves a null test over (rustc -O1's ``try_reserve_exact`` with
liballoc's ``finish_grow`` inlined, ir/rust_alloc.py), and the engine knows heap blocks by the call.
Frozen values of other kinds are left alone: integers decide nothing AD follows, and floats have
a derivative rule (the identity).
"""
from __future__ import annotations

import re

from .core import Argument, Function, Instruction, Module, Value

_ALLOCATORS = frozenset({"malloc", "calloc", "realloc", "aligned_alloc", "_Znwm", "_Znam", "__rust_alloc",
                         "__rust_alloc_zeroed", "__rust_realloc"})
_RUST_SHIM = re.compile(r"^_RNv\w*___rustc(\d+)_(__rust_\w+)$")


def _never_poison(value: Value) -> bool:
    if isinstance(value, Argument):
        return True
    callee = value.callee if isinstance(value, Instruction) and value.opcode == "call" else None
    if not isinstance(callee, Function):
        return False
    shim = _RUST_SHIM.match(callee.name)
    name = shim.group(2) if shim and int(shim.group(1)) == len(shim.group(2)) else callee.name
    return name in _ALLOCATORS


def unfreeze_pointer_arguments(module: Module) -> int:
    """Replace every ``freeze ptr %arg`` (or of an allocator's result) of a defined function by its
    operand; returns how many."""
    replaced = 0
    for fn in module.functions.values():
        if fn.is_declaration:
            continue
        frozen = {id(i): i for i in fn.instructions()
                  if i.opcode == "freeze" and i.type.is_pointer and _never_poison(i.operands[0])}
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
