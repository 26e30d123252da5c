"""Chunk-private copies of a small array the body only adds into (host entries, codegen/abi.py).

Why: a parameter table's adjoint has every thread add into the same few elements; chunks of XLA's
pool adding there atomically fight over its cache lines. Each chunk instead adds plainly into a copy
on its stack (codegen/host/serial.private_updates proves the body only adds into the array) and adds
the copy into the array once at its end.
"""
from __future__ import annotations

from llvmlite import ir

I64 = ir.IntType(64)


def private_copy(fn, b: ir.IRBuilder, params: list, k: int, ndim: int, element: ir.Type):
    """A copy on the stack of flat param ``k`` (an array of ``ndim`` extents) filled with the
    additive identity (-0.0 for floats, so an element no thread adds to keeps its sign): (pointer,
    element count)."""
    count = I64(1)
    for d in range(ndim):
        count = b.mul(count, params[k + 1 + d])
    copy = b.alloca(element, size=count, name=f"private{k}")
    copy.align = 8
    zero = ir.Constant(element, -0.0) if isinstance(element, (ir.FloatType, ir.DoubleType)) else ir.Constant(element, 0)
    _count_loop(fn, b, count, f"private{k}.fill", lambda i: b.store(zero, b.gep(copy, [i], source_etype=element)))
    return copy, count


def flush_private(fn, b: ir.IRBuilder, copy, array, count, element: ir.Type) -> None:
    """``array[i] += copy[i]`` for every element, one atomic add each (chunks flush concurrently)."""
    is_float = isinstance(element, (ir.FloatType, ir.DoubleType))

    def add(i):
        value = b.load(b.gep(copy, [i], source_etype=element), typ=element)
        b.atomic_rmw("fadd" if is_float else "add", b.gep(array, [i], source_etype=element), value, "monotonic")
    _count_loop(fn, b, count, f"{copy.name}.flush", add)


def _count_loop(fn, b: ir.IRBuilder, count, name: str, each) -> None:
    """``for i in [0, count): each(i)``, leaving ``b`` after the loop."""
    before = b.block
    loop, after = fn.append_basic_block(f"{name}.loop"), fn.append_basic_block(f"{name}.end")
    b.cbranch(b.icmp_signed(">", count, I64(0)), loop, after)
    b.position_at_end(loop)
    i = b.phi(I64, f"{name}.i")
    each(i)
    following = b.add(i, I64(1), flags=("nuw", "nsw"))
    i.add_incoming(I64(0), before)
    i.add_incoming(following, b.block)
    b.cbranch(b.icmp_signed("<", following, count), loop, after)
    b.position_at_end(after)
