"""Global arrays in the block race check (shared.py) of CUDA kernels: in-place updates.

An array a kernel both loads and stores can race like shared memory: ``x[i] = x[i] + x[i + 1]`` with
no barrier has thread i read what thread i + 1 writes (on a GPU the order is undefined; the host runs
the block's threads one after another, and the reverse sweep, re-reading memory, gets other values).
Only plain load/store pairs of such arrays are checked, and only what is shown is refused: two threads
the enumeration finds to meet, or a read at an index loaded from memory (a neighbour list's entry) of
an array the block writes in the same interval. Offsets through runtime parameters that the proofs
cannot decide (RAJAPerf's ``px[i + off * 4]``) are left alone, as are races between blocks.
"""
from __future__ import annotations

from ...ir.core import Argument, Function, Instruction, PointerType, Value

LOAD_STORE = {"load", "store"}


def in_place(accesses: list, arrays: dict) -> list:
    """The accesses of shared arrays, and the plain loads and stores of the global ``arrays`` that are
    both loaded and stored (an array only written, or only read, races with nothing here)."""
    kinds: dict = {}
    for x in accesses:
        kinds.setdefault(id(x.root), set()).add(x.kind)
    return [x for x in accesses if not (isinstance(x.root, tuple) and any(r in arrays for r in x.root))
            and (x.root not in arrays or (x.kind in LOAD_STORE and kinds[id(x.root)] >= LOAD_STORE))]


def at_loaded_index(read: Value, written: Value) -> bool:
    """Is ``read`` (not the pointer ``written`` itself) computed from a value loaded from memory (a
    neighbour list's entry), so that the thread may read any element, another thread's included?"""
    if read is written:
        return False
    seen, todo = set(), [read]
    while todo:
        v = todo.pop()
        if not isinstance(v, Instruction) or id(v) in seen:
            continue
        seen.add(id(v))
        if v.opcode in ("load", "atomicrmw", "cmpxchg") and v is not read:
            return True
        todo.extend(o for o in v.operands if not isinstance(o.type, PointerType) or o is v.operands[0])
    return False


def loaded_and_stored(fn: Function, names: set) -> dict:
    """The array arguments (named in ``names``) that ``fn`` both loads from and stores to."""
    kinds: dict = {}
    for inst in fn.instructions():
        if inst.opcode in ("load", "store"):
            p = inst.operands[0] if inst.opcode == "load" else inst.operands[1]
            while isinstance(p, Instruction) and p.opcode in ("getelementptr", "bitcast"):
                p = p.operands[0]
            if isinstance(p, Argument) and p.name in names:
                kinds.setdefault(p, set()).add(inst.opcode)
    return {a: a.name for a, k in kinds.items() if len(k) == 2}


def loaded_index_message(read: str, write: str, array: str, kernel: str) -> str:
    """``read``/``write``: the two accesses described (index, source line or instruction)."""
    return (f"kernel '{kernel}': possible global-memory race on '{array}': {read}, at an index loaded from "
            f"memory, and {write} run between the same two barriers; the thread may read an element another "
            f"thread of the block writes (a race on a GPU; adoffload runs a block's threads one after another, "
            f"and its derivatives would be wrong). Read from a copy (pass the old values as a separate input "
            f"array) or put a barrier between the reads and the writes")
