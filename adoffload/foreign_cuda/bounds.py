"""Bounds checks for raw-pointer accesses of translated CUDA kernels.

A pointer parameter is a 1-D array whose length the launcher knows (the array passed), and a
``__shared__`` variable has its static size. Before every load, store, atomic and memory
intrinsic through a pointer derived from one of them (by GEPs, phis and selects), the byte
offset from the root is checked against the root's size; a failing access is skipped: the
thread records ``{1, param_index, element index, 0}`` in the status record (abi_status.py) and
returns, as the front end's checks do. Accesses whose root is not a parameter or a shared
variable (a pointer loaded from memory, ``inttoptr``) are refused: they could not be checked.
"""
from __future__ import annotations

from ..abi_status import OUT_OF_BOUNDS, SHARED_INDEX_BASE
from ..errors import IRError
from ..ir.builder import Builder
from ..ir.core import (ArrayType, Block, Constant, FloatType, Function, GlobalVariable, Instruction, IntType,
                       PointerType, StructType, Value, VectorType, i64)

_FOLLOW = ("getelementptr", "bitcast", "phi", "select", "freeze")
_MEMORY_INTRINSICS = ("llvm.memcpy", "llvm.memmove", "llvm.memset")


class IntentError(IRError):
    """A CUDA kernel writes an array its parameters declare read-only (``ado.In``)."""


class UncheckableAccessError(IRError):
    """A memory access of a CUDA kernel whose pointer cannot be traced to a parameter or shared variable."""


def shared_param_index(n: int) -> int:
    return SHARED_INDEX_BASE - n


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


def check_read_only(fn: Function, read_only: dict, kernel: str) -> None:
    """``read_only``: root argument -> parameter name of arrays declared ``ado.In``; none may be written."""
    for inst in fn.instructions():
        accesses = _accesses(inst)
        if inst.opcode == "load" or not accesses:
            continue
        written = accesses[0][0]        # store/atomic pointer, or a memory intrinsic's destination
        root = root_of(written)
        if root in read_only:
            raise IntentError(f"kernel '{kernel}' writes array '{read_only[root]}' (a {inst.opcode}), which was "
                              f"declared ado.In; declare it ado.InOut (read and written) or ado.Out")


def insert_checks(fn: Function, roots: dict, status: Value, kernel: str) -> None:
    """``roots``: root argument -> (param_index, length in elements (an i64 Value), element bytes)."""
    users = fn.users()
    for root in roots:
        _refuse_escapes(fn, root, users, kernel)
    work = []
    for inst in list(fn.instructions()):
        for pointer, size in _accesses(inst):
            root = root_of(pointer)
            if root in roots:
                work.append((inst, pointer, size, root))
            elif root is None or not (isinstance(root, GlobalVariable)
                                      or (isinstance(root, Instruction) and root.opcode == "alloca")):
                what = "pointers of different origins" if root is None else f"{root!r}"
                raise UncheckableAccessError(
                    f"kernel '{kernel}': a {inst.opcode} accesses memory through {what}, which adoffload cannot "
                    f"trace to a pointer parameter or __shared__ variable, so it cannot bound-check it "
                    f"(pointers loaded from memory or made from integers are not supported)")
    entry = Builder(fn.entry, 0)
    limits = {}
    for root, (_, length, esize) in roots.items():
        limits[root] = length if esize == 1 else entry.mul(length, Constant(i64, esize), "limit")
    for inst, pointer, size, root in work:
        param_index, _, esize = roots[root]
        _check(fn, inst, pointer, size, root, limits[root], param_index, esize, status)


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


def _check(fn: Function, inst: Instruction, pointer, size, root, limit, param_index: int, esize: int, status):
    """Split ``inst``'s block before it: the access runs only when ``[off, off + size)`` is inside the root."""
    block = inst.parent
    at = block.instructions.index(inst)
    rest = Block(fn._unique_block_name(f"{block.name}.inbounds"), parent=fn)
    for moved in block.instructions[at:]:
        rest.append(moved)
    del block.instructions[at:]
    for succ in rest.successors:
        for phi in succ.phis:
            phi.blocks = [rest if b is block else b for b in phi.blocks]
    fn.blocks.insert(fn.blocks.index(block) + 1, rest)
    b = Builder(block)
    offset = b.sub(b.cast("ptrtoint", pointer, i64), b.cast("ptrtoint", root, i64), "offset")
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
    old = f.atomicrmw("xchg", status, Constant(i64, OUT_OF_BOUNDS))
    write = Block(fn._unique_block_name(f"{block.name}.record"), parent=fn)
    leave = Block(fn._unique_block_name(f"{block.name}.skip"), parent=fn)
    fn.blocks += [write, leave]
    f.cbranch(f.icmp("eq", old, Constant(i64, 0)), write, leave)
    w = Builder(write)
    index = offset if esize == 1 else w.binary("sdiv", offset, Constant(i64, esize), "index")
    for word, value in ((1, Constant(i64, param_index)), (2, index), (3, Constant(i64, 0))):
        w.store(value, w.gep(i64, status, [Constant(i64, word)]))
    w.br(leave)
    Builder(leave).ret()
