"""Hoist loads above stores to other arrays, so a thread keeps several memory requests in flight.

Adjoint kernels update several shadows one after another (``load d_c; store d_c; load d_b;
store d_b; ...``). Kept in that order, each load waits for a full memory round trip before
the next is issued; neither LLVM nor ptxas may reorder them without knowing the arrays are
distinct. When the runtime guarantees that pointer parameters do not overlap (``noalias``),
a load rooted in one parameter may move above stores rooted in another. Pure address
arithmetic moves with it; calls, atomics and stores through unknown pointers stay barriers.
"""
from __future__ import annotations

from ... import ir
from ...ir.core import Argument, Block, Instruction, Value

_PURE = frozenset({"getelementptr", "bitcast", "addrspacecast", "ptrtoint", "inttoptr", "trunc", "zext", "sext",
                   "add", "sub", "mul", "shl", "lshr", "ashr", "and", "or", "xor", "icmp", "select", "sitofp",
                   "uitofp", "fptosi", "fptoui", "fpext", "fptrunc"})
_POINTER_STEPS = frozenset({"getelementptr", "bitcast", "addrspacecast"})


def root(pointer: Value) -> Argument | None:
    """The pointer argument an address is derived from (None when unknown)."""
    while isinstance(pointer, Instruction) and pointer.opcode in _POINTER_STEPS:
        pointer = pointer.operands[0]
    return pointer if isinstance(pointer, Argument) else None


def _is_barrier(inst: Instruction, load_root: Argument) -> bool:
    """Whether ``inst`` may write memory the load reads (or orders memory)."""
    if inst.opcode == "store":
        target = root(inst.operands[1])
        return target is None or target is load_root
    return inst.opcode in ("call", "atomicrmw", "cmpxchg", "fence") or "volatile" in inst.flags


def _dependencies(load: Instruction, block: Block, placed: list[Instruction]) -> list[Instruction] | None:
    """The load's in-block pure operand chain (in block order), or None if it needs an impure value."""
    chain, work = set(), [load.operands[0]]
    while work:
        v = work.pop()
        if not isinstance(v, Instruction) or v.parent is not block or v in chain or v.opcode == "phi":
            continue
        if v.opcode not in _PURE:
            return None
        chain.add(v)
        work.extend(v.operands)
    return [i for i in placed if i in chain]


def hoist_block(block: Block) -> int:
    """Reorder one block; returns how many loads moved."""
    body = [i for i in block.instructions if i.opcode != "phi" and not i.is_terminator]
    head = [i for i in block.instructions if i.opcode == "phi"]
    tail = [block.terminator] if block.terminator is not None else []
    placed: list[Instruction] = []
    moved = 0
    for inst in body:
        load_root = root(inst.operands[0]) if inst.opcode == "load" and not inst.flags & {"volatile", "atomic"} else None
        chain = _dependencies(inst, block, placed) if load_root is not None else None
        if chain is None:
            placed.append(inst)
            continue
        group = set(chain) | {inst}
        position = len(placed)
        while position > 0:
            previous = placed[position - 1]
            if previous in group:
                position -= 1
                continue
            if _is_barrier(previous, load_root) or any(o is previous for g in group for o in g.operands):
                break
            position -= 1
        rest = [i for i in placed[position:] if i not in group]
        ordered = [i for i in placed[position:] if i in group]
        if rest and placed[position:] != ordered + rest:
            moved += 1
        placed[position:] = ordered + [inst] + rest
    block.instructions = head + placed + tail
    return moved


def hoist_loads(text: str, body_name: str) -> str:
    """``text`` with loads in ``body_name`` hoisted above stores to other arrays (see module doc)."""
    module = ir.import_module(text)
    fn = module.functions[body_name]
    if sum(hoist_block(block) for block in fn.blocks) == 0:
        return text
    return ir.export_module(module)
