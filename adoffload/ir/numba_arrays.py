"""Arrays numba allocates for a function's own use (``np.zeros(n)``, ``x * x``) as plain heap blocks.

numba's memory manager (NRT) allocates an array as one block: a MemInfo header (reference count,
destructor, data pointer at byte 24) followed by the data. The function reads the data pointer
back from the header, and when the last reference goes (an atomic decrement that reaches zero)
calls ``NRT_MemInfo_call_dtor``. The AD engine cannot follow a pointer loaded from memory, so it
refused every store of an active value into such an array.

Where the MemInfo never leaves the function, i.e. every use of it is the null test, the load of
its data pointer, the reference-count updates (``atomicrmw``, ``llvm.x86.atomic.sub.cc``) and
the destructor call, the data gets a block of its own: ``aligned_alloc(align, size)`` next to the
NRT call (which now allocates only the header) and ``free`` of it right before the destructor
runs. The data pointer loads become that block, which the engine knows (a heap block with a
shadow). A MemInfo stored, returned or passed anywhere else (an array that escapes) is left as
it was, and its stores of active values stay refused.
"""
from __future__ import annotations

from .builder import Builder
from .core import (
    Constant,
    Function,
    FunctionType,
    Instruction,
    Module,
    const,
    i32,
    i64,
    ptr,
    void,
)

NRT_ALLOCATORS = ("NRT_MemInfo_alloc_aligned", "NRT_MemInfo_alloc_safe_aligned")   # (i64 size, i32 align)
DATA_OFFSET = 24                       # offsetof(NRT_MemInfo, data)
_REFCOUNT_CALLS = ("llvm.x86.atomic.sub.cc", "llvm.x86.atomic.add.cc")
_DTOR = "NRT_MemInfo_call_dtor"


def separate_numba_arrays(module: Module) -> int:
    """Rewrite every NRT array that does not escape its function; returns how many."""
    count = 0
    for fn in list(module.functions.values()):     # (declares aligned_alloc and free as it goes)
        if fn.is_declaration:
            continue
        users = fn.users()
        for call in [i for i in fn.instructions() if _is_nrt_allocation(i)]:
            plan = _uses(call, users)
            if plan is not None:
                _rewrite(module, fn, call, *plan)
                users = fn.users()
                count += 1
    return count


def _is_nrt_allocation(inst: Instruction) -> bool:
    return (inst.opcode == "call" and getattr(inst.callee, "name", "") in NRT_ALLOCATORS
            and len(inst.operands) == 2 and inst.operands[0].type == i64 and inst.operands[1].type == i32)


def _callee(inst: Instruction) -> str:
    return getattr(inst.callee, "name", "")


def _uses(mi: Instruction, users: dict):
    """(the MemInfo and the phis and selects that carry it, data pointer loads, destructor calls)
    when every use of them is one the rewrite knows; None otherwise."""
    nodes = _carriers(mi, users)
    if nodes is None:
        return None
    loads, dtors, carriers = [], [], {id(n) for n in nodes}
    for node in nodes:
        for use in users.get(node, []):
            if id(use) in carriers:                 # a phi or select joining it (not as a condition)
                continue
            if use.opcode == "icmp" and _is_null(_other(use, node)):
                continue
            if use.opcode == "atomicrmw" and use.operands[0] is node and use.op in ("add", "sub") \
                    and node not in use.operands[1:]:
                continue
            if use.opcode == "call" and _callee(use).startswith(_REFCOUNT_CALLS) and use.operands[0] is node \
                    and node not in use.operands[1:]:
                continue
            if use.opcode == "call" and _callee(use) == _DTOR and use.operands == [node]:
                dtors.append(use)
                continue
            if use.opcode == "getelementptr" and _is_data_field(use, node):
                field_users = users.get(use, [])
                if all(u.opcode == "load" and u.type == ptr and u.operands[0] is use for u in field_users):
                    loads += field_users
                    continue
            return None
    return (nodes, loads, dtors) if loads else None


def _carriers(mi: Instruction, users: dict) -> list | None:
    """``mi`` and the pointer phis and selects its value reaches through, when each of them joins
    only ``mi``, one another and null/undef/poison; None otherwise."""
    nodes, seen, work = [], {id(mi)}, [mi]
    while work:
        node = work.pop()
        nodes.append(node)
        for use in users.get(node, []):
            if use.opcode in ("phi", "select") and use.type == ptr and id(use) not in seen:
                if use.opcode == "select" and use.operands[0] is node:
                    return None
                seen.add(id(use))
                work.append(use)
    for node in nodes[1:]:
        carried = node.operands if node.opcode == "phi" else node.operands[1:]
        if not all(id(v) in seen or _is_null(v) for v in carried):
            return None
    return nodes


def _is_null(v) -> bool:
    return isinstance(v, Constant) and v.kind in ("null", "undef", "poison")


def _other(icmp: Instruction, mi: Instruction):
    a, b = icmp.operands
    return b if a is mi else a


def _is_data_field(gep: Instruction, mi: Instruction) -> bool:
    """``getelementptr i8, ptr %mi, i64 24``."""
    if gep.operands[0] is not mi or len(gep.operands) != 2 or str(gep.element_type) != "i8":
        return False
    offset = gep.operands[1]
    return isinstance(offset, Constant) and offset.kind == "scalar" and offset.value == DATA_OFFSET


def _rewrite(module: Module, fn: Function, mi: Instruction, nodes: list, loads: list, dtors: list) -> None:
    size, align = mi.operands
    b = Builder()
    b.position_before(mi)
    b.location = mi.location
    wide = b.cast("zext", align, i64, "nrt.align")
    rounded = b.binary("and", b.add(size, b.sub(wide, const(i64, 1)), "nrt.padded"), b.sub(const(i64, 0), wide),
                       "nrt.size")                  # aligned_alloc wants a multiple of the alignment
    alloc = module.get_or_declare("aligned_alloc", FunctionType(ptr, (i64, i64)))
    data = {mi: b.call(alloc, [wide, rounded], "nrt.data")}
    mi.operands = [const(i64, 0), align]            # the header alone
    for node in nodes[1:]:                          # the data pointer joined as the MemInfo is
        copy = Instruction(node.opcode, ptr, name=fn.fresh_name("nrt.data.join"), blocks=list(node.blocks),
                           location=node.location)
        node.parent.insert(node.parent.instructions.index(node), copy)
        data[node] = copy
    for node in nodes[1:]:
        carried = [data.get(v, v) for v in (node.operands if node.opcode == "phi" else node.operands[1:])]
        data[node].operands = carried if node.opcode == "phi" else [node.operands[0]] + carried
    fields = {id(load.operands[0]): load.operands[0] for load in loads}
    replace = {id(load): data[load.operands[0].operands[0]] for load in loads}
    for inst in fn.instructions():
        inst.operands = [replace.get(id(o), o) for o in inst.operands]
    for dead in loads + list(fields.values()):      # the loads, then their now unused field addresses
        dead.parent.instructions.remove(dead)
        dead.parent = None
    free = module.get_or_declare("free", FunctionType(void, (ptr,)))
    for dtor in dtors:
        b.position_before(dtor)
        b.location = dtor.location
        b.call(free, [data[dtor.operands[0]]])
