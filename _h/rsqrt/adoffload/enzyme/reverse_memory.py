"""The reverse sweep's handling of heap calls and memory copies (the memory model: memory.py).

Both take the reverse engine (``reverse._Reverser``) for what it knows: ``shadow`` (shadow
pointers of the forward sweep), ``need`` (a primal value usable in a block's reverse),
``original`` (forward-sweep clone -> primal value), ``primal`` and ``module``.
"""
from __future__ import annotations

from ..ir.builder import Builder
from ..ir.core import Block, Instruction, const, i1, i8, void
from ..errors import DifferentiationError
from .rules import describe
from .memory import HeapFunction, allocation_size, copy_adjoint, float_element_type, shadow_free, shadow_size


def reverse_heap(rev, inst: Instruction, heap: HeapFunction, block: Block, b: Builder) -> None:
    """A shadow block lives until the reverse sweep reaches its allocation. The reverse of
    ``q = realloc(p, n)`` also moves the adjoints of the bytes realloc copied back from q's
    shadow to p's, which the forward sweep kept alive."""
    if heap.kind == "free" or inst not in rev.shadow:
        return
    shadow = rev.need(rev.shadow[inst], block)
    if heap.kind == "realloc":
        old = inst.operands[heap.pointer]
        element = float_element_type(rev.primal, [rev.original.get(inst, inst), rev.original.get(old, old)])
        if element is not None:
            old_shadow = rev.need(rev.shadow[old], block)
            old_size = b.call(shadow_size(rev.module), [old_shadow])
            new_size = allocation_size(b, inst, lambda v: rev.need(v, block))
            moved = b.select(b.icmp("ult", old_size, new_size), old_size, new_size)
            b.call(copy_adjoint(rev.module, element), [shadow, old_shadow, moved])
    b.call(shadow_free(rev.module), [shadow])


def reverse_copy(rev, inst: Instruction, block: Block, b: Builder) -> None:
    """memcpy/memmove: the destination's adjoints flow back to the source's (copy_adjoint);
    copied from memory without a shadow, they are dropped (as for a store)."""
    dst, src, nbytes = inst.operands[:3]
    if dst not in rev.shadow:
        return
    d_dst, size = rev.need(rev.shadow[dst], block), rev.need(nbytes, block)
    element = float_element_type(rev.primal, [rev.original.get(dst, dst), rev.original.get(src, src)])
    if src in rev.shadow and element is None:
        raise DifferentiationError(
            f"cannot differentiate {describe(rev.original.get(inst, inst))}: it copies differentiated memory whose "
            f"element type this function never shows (no float load or store reaches it), so its adjoint cannot be "
            f"moved element by element; access the memory as floats in the function, or copy with a loop")
    if src in rev.shadow:
        b.call(copy_adjoint(rev.module, element), [d_dst, rev.need(rev.shadow[src], block), size])
    else:
        b.call_intrinsic(rev.module, "llvm.memset.p0.i64", void, [d_dst, const(i8, 0), size, const(i1, 0)])
