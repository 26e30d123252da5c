"""Where a pointer may come from: the values it is derived from through address arithmetic, casts,
selects and phis (the arrays a raw-pointer access may touch)."""
from __future__ import annotations

from ..ir.core import ConstantExpr, Instruction, Value

_FOLLOW = ("getelementptr", "bitcast", "addrspacecast", "phi", "select", "freeze")
_CONSTANT_FOLLOW = ("getelementptr", "bitcast", "addrspacecast")


def leaves(pointer: Value) -> list[Value]:
    """Every value ``pointer`` may be derived from through GEPs, casts (address spaces too), selects and phis."""
    seen, todo, found = set(), [pointer], []
    while todo:
        value = todo.pop()
        if id(value) in seen:
            continue
        seen.add(id(value))
        if isinstance(value, Instruction) and value.opcode in _FOLLOW:
            todo.extend(value.operands[1:] if value.opcode == "select" else
                        value.operands if value.opcode == "phi" else value.operands[:1])
        elif isinstance(value, ConstantExpr) and value.opcode in _CONSTANT_FOLLOW:
            todo.append(value.operands[0])      # ``coeffs[4]`` of a __constant__ table: a constant GEP
        else:
            found.append(value)
    return found
