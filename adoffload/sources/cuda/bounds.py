"""Bounds checks for raw-pointer accesses of translated CUDA kernels.

A pointer parameter is a 1-D array whose length the launcher knows (the array passed), and a
``__shared__`` variable has its static size. Before every load, store, atomic and memory
intrinsic through a pointer derived from one of them (by GEPs, phis and selects), the byte
offset from the root is checked against the root's size (a pointer that may point into several
of them carries its root's base, size and name along as integers: ``_Origin``); a failing access is skipped: the
thread records ``{1, param_index, element index, 0}`` in the status record (language/status.py) and
returns, as the front end's checks do. The thread's local arrays (allocas clang kept: ``float
a[4]`` indexed at run time) are roots too (``local_roots``; accesses at constant offsets inside
them need no check, which keeps them promotable to registers), and a null pointer is a root of
no elements whose failures record NULL_POINTER ``{6, -1, line, element}``. Accesses whose root is
none of these (a pointer loaded from memory, ``inttoptr`` of a variable) are refused: they could
not be checked. ``__device__``/``__constant__`` variables are not checked.
"""
from __future__ import annotations

from ...language.status import NULL_POINTER, OUT_OF_BOUNDS, SHARED_INDEX_BASE
from ...errors import CudaTranslationError, IRError, IntentError, UncheckableAccessError
from ...analysis.pointers import leaves
from ...ir.builder import Builder
from ...ir.cfg import split_before
from ...ir.core import (ArrayType, Block, Constant, ConstantExpr, FloatType, Function, GlobalVariable, Instruction,
    IntType, PointerType, StructType, Value, VectorType, i1, i64)
from .faults import line_of
from .structs import alignment, size

_FOLLOW = ("getelementptr", "bitcast", "phi", "select", "freeze")
_MEMORY_INTRINSICS = ("llvm.memcpy", "llvm.memmove", "llvm.memset")


NULL_ROOT = -2_000_000          # the param index a null pointer's accesses carry (recorded as NULL_POINTER)
_CONSTANT_FOLLOW = ("getelementptr", "bitcast", "addrspacecast")
NULL_PAGE = 1 << 20             # constant addresses below this are a null pointer's elements (other ones are refused)


def shared_param_index(n: int) -> int:
    return SHARED_INDEX_BASE - n


def is_null(value: Value) -> bool:
    """``null``, or an address just past it (``p[1]`` of a null ``p``: clang folds it to ``inttoptr (i64 4)``)."""
    if isinstance(value, ConstantExpr):
        operand = value.operands[0] if value.opcode == "inttoptr" and value.operands else None
        return isinstance(operand, Constant) and operand.kind == "scalar" and 0 <= operand.value < NULL_PAGE
    return isinstance(value, Constant) and value.kind in ("null", "zero") and isinstance(value.type, PointerType)


def local_roots(fn: Function) -> dict:
    """The thread's local arrays (``float a[4]``, a struct's copy): alloca -> (param index ``-1 - k``,
    length, element bytes), as ``insert_checks`` takes roots; the elements are the innermost
    array's (a ``float a[4][4]`` has 16). Allocas of types without a known size are left out."""
    out = {}
    for inst in fn.instructions():
        if inst.opcode != "alloca":
            continue
        t, count = inst.element_type, 1
        while isinstance(t, ArrayType):
            t, count = t.element, count * t.count
        try:
            esize = size(t)
        except CudaTranslationError:        # a pointer or other type structs.size does not know
            continue
        if inst.operands:                   # alloca T, i32 %n
            b = Builder(inst.parent, inst.parent.instructions.index(inst))
            n = inst.operands[0]
            n = n if n.type == i64 else b.cast("zext", n, i64)
            length = b.mul(n, Constant(i64, count)) if count != 1 else n
        else:
            length = Constant(i64, count)
        out[inst] = (-1 - len(out), length, esize)
    return out


def constant_offset(pointer: Value, root: Value) -> int | None:
    """The byte offset of ``pointer`` from ``root`` where it is ``root`` through GEPs of constant
    indices only (C layout, structs.py), else None."""
    offset = 0
    while pointer is not root:
        if not (isinstance(pointer, Instruction) and pointer.opcode == "getelementptr"
                and all(isinstance(i, Constant) and i.kind == "scalar" for i in pointer.operands[1:])):
            return None
        indices, t = [int(i.value) for i in pointer.operands[1:]], pointer.element_type
        try:
            offset += indices[0] * size(t)
            for k in indices[1:]:
                if isinstance(t, StructType):
                    offset += _field_offset(t, k)
                    t = t.elements[k]
                elif isinstance(t, (ArrayType, VectorType)):
                    t = t.element
                    offset += k * size(t)
                else:
                    return None
        except CudaTranslationError:
            return None
        pointer = pointer.operands[0]
    return offset


def _field_offset(t: StructType, k: int) -> int:
    offset = 0
    for n, e in enumerate(t.elements[:k + 1]):
        if not t.packed:
            offset = -(-offset // alignment(e)) * alignment(e)
        if n < k:
            offset += size(e)
    return offset


def store_size(t) -> int:
    if isinstance(t, FloatType):
        return t.bits // 8
    if isinstance(t, IntType):
        return (t.bits + 7) // 8
    if isinstance(t, PointerType):
        return 8
    if isinstance(t, (ArrayType, VectorType)):
        return t.count * store_size(t.element)
    if isinstance(t, StructType):
        return sum(store_size(e) for e in t.elements)    # upper bound of the packed bytes; alignment padding not counted
    raise IRError(f"no store size for type {t}")


def root_of(pointer: Value, seen=None):
    """The value ``pointer`` is derived from (an argument, alloca, global, ...), or None when its
    derivations lead to different roots."""
    seen = set() if seen is None else seen
    if id(pointer) in seen:
        return _CYCLE
    seen.add(id(pointer))
    if isinstance(pointer, ConstantExpr) and pointer.opcode in _CONSTANT_FOLLOW and not is_null(pointer):
        return root_of(pointer.operands[0], seen)          # a constant GEP of null (or of a global)
    if isinstance(pointer, Instruction) and pointer.opcode in _FOLLOW:
        sources = {"getelementptr": pointer.operands[:1], "bitcast": pointer.operands[:1],
                   "freeze": pointer.operands[:1], "select": pointer.operands[1:],
                   "phi": pointer.operands}[pointer.opcode]
        roots = {id(r): r for r in (root_of(s, seen) for s in sources) if r is not _CYCLE}
        if len(roots) != 1:
            return None if roots else _CYCLE
        return next(iter(roots.values()))
    return pointer


_CYCLE = object()


def _is_private_or_global(value: Value) -> bool:
    return isinstance(value, GlobalVariable) or (isinstance(value, Instruction) and value.opcode == "alloca")


class _Origin:
    """For a pointer that may point into several checked arrays (``cond ? a : b``, buffers swapped
    in a loop): the i64 base address, byte limit, parameter index and element size of the array
    it points into, computed as integers beside the pointer's own selects and phis."""

    def __init__(self, fn: Function, roots: dict, limits: dict):
        self.fn, self.roots, self.limits = fn, roots, limits
        self.memo: dict[int, tuple] = {}

    def of(self, pointer: Value) -> tuple:
        if id(pointer) in self.memo:
            return self.memo[id(pointer)]
        if is_null(pointer):
            result = (Constant(i64, 0), Constant(i64, 0), Constant(i64, NULL_ROOT), Constant(i64, 1))
        elif pointer in self.roots:
            param_index, _, esize = self.roots[pointer]
            at = (Builder(pointer.parent, pointer.parent.instructions.index(pointer) + 1)
                  if isinstance(pointer, Instruction) else Builder(self.fn.entry, 0))     # after an alloca
            base = at.cast("ptrtoint", pointer, i64, "base")
            result = (base, self.limits[pointer], Constant(i64, param_index), Constant(i64, esize))
        elif isinstance(pointer, ConstantExpr) and pointer.opcode in _CONSTANT_FOLLOW:
            result = self.of(pointer.operands[0])
        elif isinstance(pointer, Instruction) and pointer.opcode in ("getelementptr", "bitcast", "freeze"):
            result = self.of(pointer.operands[0])
        elif isinstance(pointer, Instruction) and pointer.opcode == "select":
            a, b = self.of(pointer.operands[1]), self.of(pointer.operands[2])
            block = pointer.parent
            after = Builder(block, block.instructions.index(pointer) + 1)
            result = tuple(after.select(pointer.operands[0], x, y) for x, y in zip(a, b))
        elif isinstance(pointer, Instruction) and pointer.opcode == "phi":
            head = Builder(pointer.parent, 0)
            result = tuple(head.phi(i64, [], name) for name in ("base", "limit", "param", "esize"))
            self.memo[id(pointer)] = result            # before the incoming values: loops refer back here
            for value, block in zip(pointer.operands, pointer.blocks):
                for phi, part in zip(result, self.of(value)):
                    phi.operands.append(part)
                    phi.blocks.append(block)
        else:
            raise _NotChecked(pointer)
        self.memo[id(pointer)] = result
        return result


class _NotChecked(Exception):
    """A leaf of a multi-origin pointer that is not a checked array."""


def _accesses(inst: Instruction):
    """(pointer, byte size) pairs ``inst`` accesses; the size is a Value for memory intrinsics."""
    op = inst.opcode
    if op == "load":
        return [(inst.operands[0], Constant(i64, store_size(inst.type)))]
    if op == "store":
        return [(inst.operands[1], Constant(i64, store_size(inst.operands[0].type)))]
    if op == "atomicrmw":
        return [(inst.operands[0], Constant(i64, store_size(inst.operands[1].type)))]
    if op == "cmpxchg":
        return [(inst.operands[0], Constant(i64, store_size(inst.operands[1].type)))]
    if op == "call":
        name = getattr(inst.callee, "name", "")
        if name.startswith(_MEMORY_INTRINSICS):
            pointers = inst.operands[:1] if name.startswith("llvm.memset") else inst.operands[:2]
            return [(p, inst.operands[2]) for p in pointers]
    return []


def accessed_scalars(fn: Function, pointer: Value, users=None) -> set:
    """The scalar types of the loads, stores and atomics through ``pointer`` and what is derived
    from it by GEPs, casts, phis and selects (vectors and aggregates by their leaf types)."""
    users = fn.users() if users is None else users
    seen, todo, found = {id(pointer)}, [pointer], set()
    while todo:
        value = todo.pop()
        for inst in users.get(value, []):
            accessed = None
            if inst.opcode == "load" and inst.operands[0] is value:
                accessed = inst.type
            elif inst.opcode == "store" and inst.operands[1] is value:
                accessed = inst.operands[0].type
            elif inst.opcode in ("atomicrmw", "cmpxchg") and inst.operands[0] is value:
                accessed = inst.operands[-1].type
            elif inst.opcode in _FOLLOW and inst.type.is_pointer and id(inst) not in seen:
                seen.add(id(inst))
                todo.append(inst)
            if accessed is not None:
                found |= _leaf_types(accessed)
    return found


def _leaf_types(t) -> set:
    if isinstance(t, (ArrayType, VectorType)):
        return _leaf_types(t.element)
    if isinstance(t, StructType):
        return {leaf for e in t.elements for leaf in _leaf_types(e)}
    return {t}


def check_read_only(fn: Function, read_only: dict, kernel: str) -> None:
    """``read_only``: root argument -> parameter name of arrays declared ``ado.In``; none may be written."""
    for inst in fn.instructions():
        accesses = _accesses(inst)
        if inst.opcode == "load" or not accesses:
            continue
        written = accesses[0][0]        # store/atomic pointer, or a memory intrinsic's destination
        for root in leaves(written):
            if root in read_only:
                raise IntentError(f"kernel '{kernel}' writes array '{read_only[root]}' (a {inst.opcode}), which "
                                  f"was declared ado.In; declare it ado.InOut (read and written) or ado.Out")


def insert_checks(fn: Function, roots: dict, status: Value, kernel: str) -> None:
    """``roots``: root argument -> (param_index, length in elements (an i64 Value), element bytes);
    the thread's local arrays (``local_roots``) are checked too, and an access through a null
    pointer (``p = nullptr; p[i]``, or ``c ? x : nullptr``, which clang keeps with
    ``-fno-delete-null-pointer-checks``) fails as one into an array of no elements."""
    locals_ = local_roots(fn)
    roots = {**roots, **locals_}
    users = fn.users()
    for root in roots:
        _refuse_escapes(fn, root, users, kernel)
    entry = Builder(fn.entry, 0)
    limits = {}
    for root, (_, length, esize) in roots.items():
        at = entry
        if isinstance(length, Instruction):              # a dynamic alloca's count, computed before it
            at = Builder(length.parent, length.parent.instructions.index(length) + 1)
        limits[root] = length if esize == 1 else at.mul(length, Constant(i64, esize), "limit")
    origins = _Origin(fn, roots, limits)
    work = []
    for inst in list(fn.instructions()):
        for pointer, size in _accesses(inst):
            found = leaves(pointer)
            if any(v is status for v in found):
                continue                        # the status record (faults.py's checks)
            if all(isinstance(v, GlobalVariable) or (_is_private_or_global(v) and v not in roots) for v in found):
                continue                        # a __device__ variable or a local of unknown size
            root = root_of(pointer)
            try:
                if root is not None and is_null(root):
                    width = size.value if isinstance(size, Constant) else 1
                    origin = (Constant(i64, 0), Constant(i64, 0), Constant(i64, NULL_ROOT), Constant(i64, width))
                elif root in locals_ and isinstance(size, Constant) and isinstance(locals_[root][1], Constant):
                    at = constant_offset(pointer, root)        # a[2] of float a[4]: inside, nothing to check
                    if at is not None and 0 <= at and at + size.value <= locals_[root][1].value * locals_[root][2]:
                        continue
                    param_index, _, esize = roots[root]
                    origin = (None, limits[root], Constant(i64, param_index), Constant(i64, esize))
                elif root in roots:
                    param_index, _, esize = roots[root]
                    origin = (None, limits[root], Constant(i64, param_index), Constant(i64, esize))
                else:
                    origin = origins.of(pointer)
            except _NotChecked as refused:
                raise UncheckableAccessError(
                    f"kernel '{kernel}': a {inst.opcode} accesses memory through a pointer that may come from "
                    f"{refused.args[0]!r}, which adoffload cannot trace to a pointer parameter or __shared__ "
                    f"variable, so it cannot bound-check it (pointers loaded from memory or made from integers "
                    f"are not supported)") from None
            work.append((inst, pointer, size, root, origin))
    for inst, pointer, size, root, origin in work:
        _check(fn, inst, pointer, size, root, origin, status)


def _refuse_escapes(fn: Function, root: Value, users: dict, kernel: str) -> None:
    """A pointer to a checked array must not be stored to memory or passed to an unknown call."""
    seen, todo = {id(root)}, [root]
    while todo:
        value = todo.pop()
        for inst in users.get(value, []):
            if inst.opcode in _FOLLOW and id(inst) not in seen:
                seen.add(id(inst))
                todo.append(inst)
            elif inst.opcode == "store" and inst.operands[0] is value:
                raise UncheckableAccessError(f"kernel '{kernel}' stores a pointer to an array into memory; "
                                             f"its later accesses could not be bound-checked")
            elif inst.opcode == "call" and not getattr(inst.callee, "name", "").startswith(("llvm.", "adoffload.")):
                raise UncheckableAccessError(f"kernel '{kernel}' passes a pointer to an array to "
                                             f"@{getattr(inst.callee, 'name', '?')}, which was not inlined")


def _check(fn: Function, inst: Instruction, pointer, size, root, origin: tuple, status):
    """Split ``inst``'s block before it: the access runs only when ``[off, off + size)`` is inside the
    array; ``origin`` is (base address or None for ``root``'s, byte limit, param index, element size)."""
    base, limit, param_index, esize = origin
    block = inst.parent
    rest = split_before(fn, inst, "inbounds")
    b = Builder(block)
    base = b.cast("ptrtoint", root, i64) if base is None else base
    offset = b.sub(b.cast("ptrtoint", pointer, i64), base, "offset")
    if isinstance(size, Constant) or size.type == i64:
        width = size
    else:
        width = b.cast("zext", size, i64)
    starts_inside = b.icmp("ult", offset, limit)
    fits = b.icmp("uge", b.sub(limit, offset), width)
    fail = Block(fn._unique_block_name(f"{block.name}.out_of_bounds"), parent=fn)
    fn.blocks.append(fail)
    b.cbranch(b.binary("and", starts_inside, fits), rest, fail)
    f = Builder(fail)
    null = (Constant(i1, int(param_index.value == NULL_ROOT)) if isinstance(param_index, Constant)
            else f.icmp("eq", param_index, Constant(i64, NULL_ROOT)))

    def pick(if_null, otherwise, builder=f):
        if isinstance(null, Constant):
            return if_null if null.value else otherwise
        return builder.select(null, if_null, otherwise)
    old = f.atomicrmw("xchg", status, pick(Constant(i64, NULL_POINTER), Constant(i64, OUT_OF_BOUNDS)))
    write = Block(fn._unique_block_name(f"{block.name}.record"), parent=fn)
    leave = Block(fn._unique_block_name(f"{block.name}.skip"), parent=fn)
    fn.blocks += [write, leave]
    f.cbranch(f.icmp("eq", old, Constant(i64, 0)), write, leave)
    w = Builder(write)
    one = isinstance(esize, Constant) and esize.value == 1
    index = offset if one else w.binary("sdiv", offset, esize, "index")
    words = ((1, pick(Constant(i64, -1), param_index, w)), (2, pick(Constant(i64, line_of(inst)), index, w)),
             (3, pick(index, Constant(i64, 0), w)))
    for word, value in words:
        w.store(value, w.gep(i64, status, [Constant(i64, word)]))
    w.br(leave)
    Builder(leave).ret()
