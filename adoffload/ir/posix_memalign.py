"""``posix_memalign`` becomes ``aligned_alloc``: a heap block the AD engine can follow.

C codes (PolyBench's own allocator among them) take aligned scratch with
``posix_memalign(&p, align, size)``, which returns the block through memory::

    %r = call i32 @posix_memalign(ptr %slot, i64 64, i64 %size)

The engine knows allocations by calls that return the block (memory.ALLOCATORS), so a block
reached only through ``%slot`` has no shadow and stores of active values into it are refused.
The call is rewritten into the same allocation returned as a value::

    %old = load ptr, ptr %slot
    %p = call ptr @aligned_alloc(i64 64, i64 %size)
    %failed = icmp eq ptr %p, null
    %kept = select i1 %failed, ptr %old, ptr %p      ; *memptr is left as it was on failure
    store ptr %kept, ptr %slot
    %r = select i1 %failed, i32 12, i32 0            ; ENOMEM, else 0

which means the same for every alignment posix_memalign accepts (glibc's aligned_alloc takes any
size). The next canonicalization promotes ``%slot``, so the block is the call's value.
"""
from __future__ import annotations

from .builder import Builder
from .core import Constant, Function, FunctionType, Instruction, IntType, Module, const, i1, i64, ptr

ENOMEM = 12


def posix_memalign_as_aligned_alloc(module: Module) -> int:
    """Rewrite every call of a declared ``posix_memalign`` in ``module``; returns how many."""
    callee = module.functions.get("posix_memalign")
    if callee is None or not callee.is_declaration:
        return 0
    calls = [inst for fn in module.functions.values() if not fn.is_declaration for inst in fn.instructions()
             if inst.opcode == "call" and inst.callee is callee and len(inst.operands) == 3]
    if not calls:
        return 0
    aligned_alloc = module.get_or_declare("aligned_alloc", FunctionType(ptr, (i64, i64)))
    for call in calls:
        _rewrite(call, aligned_alloc)
    return len(calls)


def _rewrite(call: Instruction, aligned_alloc: Function) -> None:
    slot, align, size = call.operands
    b = Builder(call.parent)
    b.position_before(call)
    b.location = call.location
    old = b.load(ptr, slot, "memalign.old")
    block = b.call(aligned_alloc, [_as_i64(b, align), _as_i64(b, size)], "memalign.block")
    failed = b.icmp("eq", block, Constant(ptr, None, kind="null"), "memalign.failed")
    b.store(b.select(failed, old, block), slot)
    if call.type != i1 and isinstance(call.type, IntType):
        status = b.select(failed, const(call.type, ENOMEM), const(call.type, 0), "memalign.status")
        fn = call.parent.parent
        for inst in fn.instructions():
            inst.operands = [status if o is call else o for o in inst.operands]
    call.parent.instructions.remove(call)


def _as_i64(b: Builder, value):
    return value if value.type == i64 else b.cast("zext", value, i64)
