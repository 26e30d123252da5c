"""Masked vector loads and stores become one guarded scalar access per lane.

clang -O2/-O3 for targets with masked memory instructions (AVX and later: the ziglang clang
targets the host CPU) vectorizes a loop with a conditional access, ``if (c[i] > 0) y[i] = ...``,
into ``llvm.masked.store`` / ``llvm.masked.load`` (and, with AVX-512, ``llvm.masked.scatter`` /
``llvm.masked.gather`` over a vector of pointers). A lane whose mask bit is off is not accessed at
all (its address may be out of bounds, its memory may be written by another thread).

The AD engine knows scalar loads and stores (their shadows, tapes, race rules). So before AD each
masked access is rewritten as the code LLVM itself lowers it to on targets without such
instructions: for each lane ``k`` in order, ``if mask[k]`` then access element ``k`` (``p + k``
elements for load/store, the lane's own pointer for gather/scatter); a load starts from its
pass-through vector and inserts each loaded lane. The semantics are the intrinsic's, lane by lane.
Both spellings are read: LLVM 22's (the alignment a parameter attribute, three arguments) and the
older one with an ``i32`` alignment argument. The scalar accesses take the element's natural
alignment, which is what the vectorizer widened (its vector accesses carry the element's).
A lane of a vector GEP taken outside such calls (``extractelement`` of ``gep %base, <N x i64>``:
a wide load at lane 0's address) becomes the scalar GEP of that lane too, and a plain store of such a
vector of pointers (a table of row pointers the vectorizer fills) one scalar store per lane.
"""
from __future__ import annotations

import re

from .builder import Builder
from .core import Block, Constant, Function, Instruction, Module, VectorType, const, i64, ptr, void

_MASKED = re.compile(r"^llvm\.masked\.(load|store|gather|scatter)\.")


def scalarize_masked_memory(module: Module) -> int:
    """Rewrite every masked load/store/gather/scatter in ``module``'s defined functions; returns how many."""
    done = 0
    for fn in module.functions.values():
        if fn.is_declaration:
            continue
        calls = [i for i in fn.instructions() if i.opcode == "call" and _kind(i) is not None
                 and isinstance(_vector_type(i), VectorType)]    # anything else stays (and is refused)
        for call in calls:
            _scalarize(fn, call)
            done += 1
        done += _scalar_pointer_stores(fn)
        done += _scalar_lane_pointers(fn)
    return done


def _scalar_pointer_stores(fn: Function) -> int:
    """``store <N x ptr> %v, ptr %p`` where every lane of %v is a lane of a vector GEP of a scalar base
    (the vectorizer filling a table of row pointers, ``rows[i] = a + i*m``) becomes N scalar stores of
    those lanes' scalar GEPs at ``p + k`` (what the vector store writes, element by element), so the
    AD engine follows the pointers into the table (enzyme/pointer_memory.py); returns how many."""
    done = 0
    for block in fn.blocks:
        for inst in list(block.instructions):
            value = inst.operands[0] if inst.opcode == "store" else None
            if (value is None or not isinstance(value.type, VectorType) or not value.type.element.is_pointer
                    or "volatile" in inst.flags or inst.ordering):
                continue
            index = block.instructions.index(inst)
            builder = Builder(block, index)

            def emit(b: Builder, opcode, type_, operands, name="", **fields) -> Instruction:
                made = b.emit(opcode, type_, operands, name, **fields)
                made.location = inst.location
                return made
            lanes = [_lane_base(builder, emit, value, const(i64, k)) for k in range(value.type.count)]
            if any(lane is None for lane in lanes):
                del block.instructions[index:builder.index]      # what the attempt emitted
                continue
            for k, lane in enumerate(lanes):
                at = emit(builder, "getelementptr", ptr, [inst.operands[1], const(i64, k)], "lane.ptr",
                          element_type=ptr, flags={"inbounds"})
                emit(builder, "store", void, [lane, at], align=8)
            block.instructions.remove(inst)
            done += 1
    return done


def _scalar_lane_pointers(fn: Function) -> int:
    """``extractelement`` of a vector GEP of a scalar base (``%1 = extractelement <8 x ptr> %0, 0``
    beside a wide load numba's vectorizer made) becomes the scalar GEP of that lane, whose origin the
    AD engine follows; returns how many."""
    done = 0
    for block in fn.blocks:
        for inst in list(block.instructions):
            if inst.opcode != "extractelement" or not inst.type.is_pointer:
                continue
            builder = Builder(block, block.instructions.index(inst))

            def emit(b: Builder, opcode, type_, operands, name="", **fields) -> Instruction:
                made = b.emit(opcode, type_, operands, name, **fields)
                made.location = inst.location
                return made
            lane = _lane_base(builder, emit, inst.operands[0], inst.operands[1])
            if lane is None:
                continue
            for user in fn.instructions():
                user.operands = [lane if o is inst else o for o in user.operands]
            block.instructions.remove(inst)
            done += 1
    return done


def _kind(inst: Instruction) -> str | None:
    match = _MASKED.match(getattr(inst.callee, "name", "") or "")
    return match.group(1) if match else None


def _vector_type(call: Instruction):
    """The accessed vector's type: a load's or gather's result, a store's or scatter's value."""
    return call.type if _kind(call) in ("load", "gather") else call.operands[0].type


def _split_after(fn: Function, call: Instruction) -> Block:
    """Move the instructions after ``call`` to a new block (the successors' phis now name it); drop the call."""
    block = call.parent
    index = block.instructions.index(call)
    after = Block(fn._unique_block_name(f"{block.name}.masked.end"), parent=fn)
    after.instructions = block.instructions[index + 1:]
    for moved in after.instructions:
        moved.parent = after
    del block.instructions[index:]
    for successor in after.successors:
        for phi in successor.phis:
            phi.blocks = [after if p is block else p for p in phi.blocks]
    fn.blocks.insert(fn.blocks.index(block) + 1, after)
    return after


def _scalarize(fn: Function, call: Instruction) -> None:
    kind = _kind(call)
    loads = kind in ("load", "gather")
    ops = call.operands
    # load/gather: (pointer(s), [i32 align,] mask, passthru); store/scatter: (value, pointer(s), [i32 align,] mask)
    mask, base = (ops[-2], ops[0]) if loads else (ops[-1], ops[1])
    vector_type = _vector_type(call)
    element, lanes = vector_type.element, vector_type.count
    block = call.parent
    after = _split_after(fn, call)
    position = fn.blocks.index(after)
    current, value = block, (ops[-1] if loads else None)

    def emit(builder: Builder, opcode, type_, operands, name="", **fields) -> Instruction:
        inst = builder.emit(opcode, type_, operands, name, **fields)
        inst.location = call.location
        return inst

    for k in range(lanes):
        lane = const(i64, k)
        on = Block(fn._unique_block_name(f"{block.name}.masked.lane{k}"), parent=fn)
        following = after if k == lanes - 1 else Block(fn._unique_block_name(f"{block.name}.masked.next{k}"), parent=fn)
        fn.blocks[position:position] = [on] + ([] if following is after else [following])
        position += 1 if following is after else 2
        head = Builder(current)
        bit = emit(head, "extractelement", mask.type.element, [mask, lane], "mask.bit")
        emit(head, "br", void, [bit], blocks=[on, following])
        body = Builder(on)
        if kind in ("gather", "scatter"):
            pointer = _lane_pointer(body, emit, base, lane)
        else:
            pointer = emit(body, "getelementptr", ptr, [base, lane], "lane.ptr", element_type=element,
                           flags={"inbounds"})
        size = max(1, _bytes(element))
        if loads:
            loaded = emit(body, "load", element, [pointer], "lane.load", align=size)
            inserted = emit(body, "insertelement", vector_type, [value, loaded, lane], "lane.vec")
        else:
            part = emit(body, "extractelement", element, [ops[0], lane], "lane.value")
            emit(body, "store", void, [part, pointer], align=size)
        emit(body, "br", void, [], blocks=[following])
        if loads:
            merge = Builder(following, 0)
            value = emit(merge, "phi", vector_type, [value, inserted], "masked.vec", blocks=[current, on])
        current = following
    if loads:
        for inst in fn.instructions():
            if inst is not value:
                inst.operands = [value if o is call else o for o in inst.operands]


def _lane_pointer(body: Builder, emit, pointers, lane) -> Instruction:
    """Lane ``lane`` of a vector of pointers. The usual one, ``getelementptr T, ptr %base, <N x i64> %idx``
    (a scalar base), becomes a scalar GEP of the base at the lane's indices, a pointer whose origin
    the AD engine follows; so does a GEP whose base is itself such a vector (numba's reversed views:
    ``gep (gep %x, %i), %j``, taken lane by lane) or a splat of one pointer. Any other vector of
    pointers gives an ``extractelement`` (whose origin the engine does not follow: a derivative
    through it is refused)."""
    base = _lane_base(body, emit, pointers, lane)
    return base if base is not None else emit(body, "extractelement", ptr, [pointers, lane], "lane.ptr")


def _lane_base(body: Builder, emit, pointers, lane):
    """Lane ``lane`` of ``pointers`` as a scalar pointer rooted in a scalar one, or None."""
    if not isinstance(pointers, Instruction):
        return None
    if pointers.opcode == "shufflevector" and _splat_of(pointers) is not None:
        return _splat_of(pointers)
    if pointers.opcode != "getelementptr":
        return None
    base = pointers.operands[0]
    if isinstance(base.type, VectorType):
        base = _lane_base(body, emit, base, lane)
        if base is None:
            return None
    indices = [_lane_of(body, emit, i, lane) if isinstance(i.type, VectorType) else i for i in pointers.operands[1:]]
    return emit(body, "getelementptr", ptr, [base, *indices], "lane.ptr",
                element_type=pointers.element_type, flags=set(pointers.flags) & {"inbounds"})


def _lane_of(body: Builder, emit, vector, lane):
    """Lane ``lane`` of an index vector: the constant itself where both are constants (a struct
    field's index must stay a constant), else an ``extractelement``."""
    if isinstance(vector, Constant) and isinstance(lane, Constant) and isinstance(lane.value, int):
        if vector.kind == "zero":
            return const(vector.type.element, 0)
        if vector.kind == "aggregate" and lane.value < len(vector.value):
            return vector.value[lane.value]
    return emit(body, "extractelement", vector.type.element, [vector, lane], "lane.index")


def _splat_of(shuffle: Instruction):
    """The scalar ``p`` of ``shufflevector (insertelement poison, p, 0), poison, zeroinitializer``."""
    source = shuffle.operands[0]
    if not (isinstance(source, Instruction) and source.opcode == "insertelement"):
        return None
    index = source.operands[2]
    if getattr(index, "value", None) != 0 or any(k not in (0, -1) for k in shuffle.indices or (0,)):
        return None
    return source.operands[1] if not isinstance(source.operands[1].type, VectorType) else None


def _bytes(type_) -> int:
    bits = getattr(type_, "bits", None)
    if bits is None:
        return 8 if type_ == ptr else 0
    return bits // 8

