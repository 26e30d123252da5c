"""Masked vector loads and stores become one conditional scalar access per lane.

numba compiles for the CPU it runs on: with AVX, a loop's conditional store (``if c: y[i] = v``)
is vectorized into ``llvm.masked.load`` / ``llvm.masked.store`` of a whole vector under a lane
mask (clang and rustc do the same with ``-march=native``). The AD engine follows loads and stores
of memory, not these intrinsics, and refuses them. Each becomes what LLVM's own
scalarize-masked-mem-intrin pass makes of it on targets without them: for every lane, a branch on
the mask bit to a block that loads or stores that one element, so masked-off lanes are never
touched (they may lie past the end of an array). A load's result is the pass-through vector with
each loaded lane inserted, joined by phis::

    %m0 = extractelement <4 x i1> %mask, i64 0
    br i1 %m0, label %lane0, label %join0
  lane0:
    %p0 = getelementptr double, ptr %p, i64 0
    %x0 = load double, ptr %p0, align 8
    %v0 = insertelement <4 x double> %passthru, double %x0, i64 0
    br label %join0
  join0:
    %r0 = phi <4 x double> [ %v0, %lane0 ], [ %passthru, %before ]
    ...

Gathers and scatters (vectors of pointers) are left alone (refused where they matter).
"""
from __future__ import annotations

from .builder import Builder
from .core import (
    Block,
    FloatType,
    Function,
    Instruction,
    IntType,
    Module,
    VectorType,
    const,
    i64,
)

_LOAD, _STORE = "llvm.masked.load.", "llvm.masked.store."


def scalarize_masked_memory(module: Module) -> int:
    """Rewrite every masked load and store in ``module``'s defined functions; returns how many."""
    count = 0
    for fn in module.functions.values():
        if fn.is_declaration:
            continue
        calls = [i for i in fn.instructions() if _masked_kind(i) is not None]
        for call in calls:
            _scalarize(fn, call)
        count += len(calls)
    return count


def _masked_kind(inst: Instruction) -> str | None:
    """Whether ``inst`` is a masked load or store of a vector of numbers: "load", "store" or None."""
    name = getattr(inst.callee, "name", "")
    if inst.opcode != "call" or len(inst.operands) != 3:
        return None
    vector = inst.type if name.startswith(_LOAD) else inst.operands[0].type if name.startswith(_STORE) else None
    if not isinstance(vector, VectorType) or not isinstance(vector.element, (FloatType, IntType)):
        return None
    return "load" if name.startswith(_LOAD) else "store"


def _split_after(fn: Function, inst: Instruction) -> Block:
    """Move what follows ``inst`` in its block to a new block (returned); the successors' phis
    now come from it. ``inst``'s block is left without a terminator."""
    block = inst.parent
    at = block.instructions.index(inst)
    tail = Block(fn._unique_block_name(f"{block.name}.masked"), parent=fn)
    fn.blocks.insert(fn.blocks.index(block) + 1, tail)
    for moved in block.instructions[at + 1:]:
        tail.append(moved)
    del block.instructions[at + 1:]
    for succ in tail.successors:
        for phi in succ.phis:
            phi.blocks = [tail if b is block else b for b in phi.blocks]
    return tail


def _scalarize(fn: Function, call: Instruction) -> None:
    kind = _masked_kind(call)
    if kind == "load":
        pointer, mask, passthru = call.operands
        vector = call.type
    else:
        stored, pointer, mask = call.operands
        vector = stored.type
    element, lanes = vector.element, vector.count
    tail = _split_after(fn, call)
    before = call.parent
    before.instructions.remove(call)
    call.parent = None
    b = Builder(before)
    b.location = call.location
    result = passthru if kind == "load" else None
    for lane in range(lanes):
        index = const(i64, lane)
        bit = b.emit("extractelement", mask.type.element, [mask, index], "mask.bit")
        access = Block(fn._unique_block_name(f"{before.name}.lane{lane}"), parent=fn)
        join = Block(fn._unique_block_name(f"{before.name}.lane{lane}.done"), parent=fn)
        where = fn.blocks.index(tail)
        fn.blocks[where:where] = [access, join]
        b.cbranch(bit, access, join)
        from_block = b.block
        b.position_at_end(access)
        address = b.gep(element, pointer, [index], "lane.ptr")
        if kind == "load":
            value = b.load(element, address, "lane", align=_bytes(element))
            inserted = b.emit("insertelement", vector, [result, value, index], "lane.vec")
        else:
            value = b.emit("extractelement", element, [stored, index], "lane")
            b.store(value, address, align=_bytes(element))
        b.br(join)
        b.position_at_end(join)
        if kind == "load":
            result = b.phi(vector, [(inserted, access), (result, from_block)], "masked")
    b.br(tail)
    if kind == "load":
        for inst in fn.instructions():
            inst.operands = [result if o is call else o for o in inst.operands]


def _bytes(t) -> int:
    return max(1, t.bits // 8)

