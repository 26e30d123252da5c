"""Global arrays in the shared-memory race check of a block kernel (shared.py).

Threads of a block exchange values through a global array as through a shared one: a write, a
barrier, a read of another thread's element is how GPU code does it, and the derivatives follow it.
Without the barrier the read races with the write: a GPU's order is undefined, the host's thread
order decides, and the derivatives pair the read with a write the primal did not see (forward and
reverse mode disagreed). So an array parameter that the body writes joins the
check's arrays, unless every access of it is the thread's own element (``y[i] += ...``, where the
forms cannot always tell: a row stride that is a parameter). Two writes of one element by two threads
race too (the host keeps the later thread's value; the derivatives another's); since an output's index
is seldom an affine form, they are refused only with two threads of block 0 that make them, and not
where every thread stores one value alike for the block or one element (``s[block_id()] = total``,
which the reverse sweep's store seeds handle: store_seeds.py).
"""
from __future__ import annotations

from ...ir.core import Argument, Function, Instruction, PointerType, Value


def written_arrays(fn: Function, params: list[Argument], rank: int) -> tuple[Argument, ...]:
    """The pointer parameters (global arrays) that the body writes, unless every access is the thread's
    own element: a thread reading an element another thread of its block writes between the same two
    barriers races as in shared memory (the host's thread order would decide, and the reverse sweep
    would pair the read with the wrong write), and so do two writes of one element."""
    pointers = {p for p in params if isinstance(p.type, PointerType)}
    roots = {}
    for b in fn.blocks:
        for inst in b.instructions:
            if inst.opcode in ("load", "store", "atomicrmw", "cmpxchg"):
                pointer = _base(inst.operands[1] if inst.opcode == "store" else inst.operands[0])
                if pointer in pointers:
                    roots.setdefault(pointer, set()).add("load" if inst.opcode == "load" else "write")
    written = [p for p in params if "write" in roots.get(p, ())]
    return tuple(p for p in written if not _own_elements(fn, p, rank))


def _own_elements(fn: Function, array: Argument, rank: int) -> bool:
    """Whether every access of ``array`` is of one element at one index, injective in the thread index
    (``y[i] +=``; ``z[i0, i1]`` under its bounds checks: analysis/address_classes.py), also through a select or
    phi of pointers into several arrays: no two threads share an element. (The forms cannot say so
    where a row stride is a parameter or the pointer is chosen.)"""
    from ..address_classes import AddressClassifier, ParallelInfo, _decompose, _structure  # deferred: enzyme
    from ..control_flow import Dominators, reachable_blocks                        # imports codegen
    from ...errors import Error
    sites = []                                                      # (pointer, block, accessed type)
    for block in fn.blocks:
        for inst in block.instructions:
            if inst.opcode not in ("load", "store", "atomicrmw", "cmpxchg"):
                continue
            todo, seen = [inst.operands[1] if inst.opcode == "store" else inst.operands[0]], set()
            accessed = str(inst.operands[0].type if inst.opcode == "store" else
                           inst.operands[1].type if inst.opcode == "cmpxchg" else inst.type)
            while todo:
                p = todo.pop()
                if id(p) in seen:
                    continue
                seen.add(id(p))
                if isinstance(p, Instruction) and p.opcode in ("phi", "select"):
                    todo.extend(p.operands[1:] if p.opcode == "select" else p.operands)
                elif _base(p) is array:       # the checks that bound its index dominate the address
                    sites.append((p, p.parent if isinstance(p, Instruction) else block, accessed))
    keys, indices = set(), []
    for p, at, accessed in sites:
        root, index = _decompose(p)
        if root is not array or len(index) != 1 or not isinstance(p, Instruction) or str(p.element_type) != accessed:
            return False
        keys.add((accessed, _structure(index[0])))
        indices.append((index[0], at))
    if len(keys) != 1:
        return False
    try:
        classifier = AddressClassifier(ParallelInfo(tuple(range(rank))), Dominators(reachable_blocks(fn)), fn.args,
                                       function=fn)
        return all(classifier.injective(index, set(fn.args[:rank]), at) for index, at in indices)
    except Error:
        return False


def _base(pointer: Value) -> Value:
    while isinstance(pointer, Instruction) and pointer.opcode == "getelementptr":
        pointer = pointer.operands[0]
    return pointer
