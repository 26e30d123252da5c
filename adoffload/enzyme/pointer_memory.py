"""Pointers kept in private memory: which blocks a pointer loaded from memory may point into, and
when such a load has a shadow (the shadow pointer, loaded from the shadow memory).

C keeps pointers in memory all the time: llm.c fills a struct of ``float*`` from one parameter
block through a table of pointers to the struct's fields (``*(ptrs[i]) = it; it += size[i]``), then
every layer loads its weights' pointer from the struct. Enzyme follows such pointers: the shadow of
``store p, slot`` into memory with a shadow is ``store shadow(p), shadow(slot)``, and the shadow of
``q = load slot`` is ``load shadow(slot)``. That is right when the shadow slot holds the shadow of
every pointer the primal slot can hold, which this module proves for *private* memory (allocas and
heap blocks of the function): ``PointerTables`` solves, over the whole function at once, what each
pointer may point into (through GEPs, casts, phis, selects and loads of pointers from blocks whose
contents are known: the store ``*(ptrs[i]) = it`` writes the struct) and what each block holds (the
pointers stored into it; unknown once an integer, a float, an atomic, memset/memcpy, a realloc or a
call may write it, or once a write through a pointer of unknown target or a call that gets pointers
may reach it, which is the case for every block whose address was stored or escaped). A load gets a
shadow when its block holds only pointers that have one (``holds_shadowed``).

The pointer helpers activity analysis is built on (``pointer_sources``, ``memory_roots``,
``is_placeholder_pointer``) live here too. Everything else stays as it was: a pointer loaded from
memory whose contents are not proven is of unknown origin, and soundness.py refuses it where it
matters. The facts do not depend on activity, so they are solved once per function.
"""
from __future__ import annotations

from ..ir.core import Constant, Function, Instruction, Value

# Calls that touch no memory a table holds (annotations of the program, not reads or writes).
_HARMLESS_CALLS = ("llvm.lifetime", "llvm.dbg", "llvm.assume", "llvm.experimental.noalias", "llvm.invariant")
_MEMORY_INTRINSICS = ("llvm.memset", "llvm.memcpy", "llvm.memmove")
# Ops whose pointer result is derived from their first operand.
_POINTER_DERIVING = frozenset({"getelementptr", "bitcast", "addrspacecast"})


# ----------------------------------------------------------------------------- the pointers followed
# (activity.py re-exports these three, where the rest of the engine imports them from)

def is_placeholder_pointer(v) -> bool:
    """A constant pointer that points at no memory: null, undef, or an address made from an
    integer constant (Rust's dangling ``inttoptr (i64 8 to ptr)`` for empty slices). It may meet a
    shadowed pointer in a phi; it is its own shadow, since nothing is ever accessed through it."""
    if isinstance(v, Instruction) and v.opcode == "inttoptr":
        return isinstance(v.operands[0], Constant) and v.operands[0].kind == "scalar"
    if not isinstance(v, Constant):
        return False
    if v.kind in ("null", "undef", "poison", "zero"):
        return True
    return v.kind == "expr" and getattr(v, "opcode", "") == "inttoptr" and all(
        isinstance(o, Constant) and o.kind == "scalar" for o in getattr(v, "operands", ()))


def pointer_sources(inst: Instruction) -> list[Value]:
    """The pointer operands a phi/select/GEP/cast result is derived from."""
    if inst.opcode == "phi":
        return list(inst.operands)
    if inst.opcode == "select":
        return list(inst.operands[1:])
    if inst.opcode in _POINTER_DERIVING:
        return inst.operands[:1]
    return []


def memory_roots(pointer: Value) -> list[Instruction]:
    """The private memory (allocas and heap allocation calls) a pointer may point into, through
    GEPs, casts, phis and selects; empty when any source is something else (an argument, a
    loaded pointer): such memory is not private, and gets no shadow of its own. A placeholder
    pointer (``is_placeholder_pointer``: Rust's dangling ``inttoptr (i64 8 to ptr)`` of an empty
    Vec) points into no memory and adds no root."""
    from .memory import is_allocation
    roots, seen, work = [], set(), [pointer]
    while work:
        p = work.pop()
        if p in seen:
            continue
        seen.add(p)
        if is_placeholder_pointer(p) and p is not pointer:
            continue
        if isinstance(p, Instruction) and (p.opcode == "alloca" or is_allocation(p)):
            roots.append(p)
        elif isinstance(p, Instruction) and pointer_sources(p):
            work.extend(pointer_sources(p))
        else:
            return []
    return roots


# ----------------------------------------------------------------------------- pointers in memory

# A pointer's points-to set: private roots (allocas, heap blocks), and EXTERNAL for memory that is not
# the function's own (arguments, globals); None: unknown (loaded from memory whose contents are not
# known, made from an integer, returned by a call, a lane of a vector of pointers).
EXTERNAL = "external"
_TOP = None


def _callee(inst: Instruction) -> str:
    return getattr(inst.callee, "name", "") or ""


def _heap_function(inst: Instruction):
    from .memory import heap_function
    return heap_function(inst)


def _union(sets) -> frozenset | None:
    out: set = set()
    for one in sets:
        if one is _TOP:
            return _TOP
        out |= one
    return frozenset(out)


class PointerTables:
    """Points-to facts of one function for pointers kept in its private memory, as a fixed point over
    the whole function (Andersen-style, flow-insensitive): what each pointer may point into, and what
    each private block holds (the pointers stored into it, or unknown once anything else may write it)."""

    def __init__(self, fn: Function):
        self.fn = fn
        self._pts: dict[Value, frozenset | None] = {}
        self._contents: dict[Instruction, set | None] = {}
        self._order = {inst: k for k, inst in enumerate(fn.instructions())}
        self._solve()

    # ---- the fixed point
    def points_to(self, v: Value) -> frozenset | None:
        if v in self._pts:
            return self._pts[v]
        if is_placeholder_pointer(v):
            return frozenset()
        if not isinstance(v, Instruction):
            return frozenset({EXTERNAL})      # an argument, a global, a constant address
        if v.opcode == "alloca" or (_heap_function(v) is not None and _heap_function(v).kind in ("alloc", "realloc")):
            return frozenset({v})
        return frozenset()                    # not reached yet: grows as the fixed point goes on

    def _solve(self) -> None:
        instructions = list(self.fn.instructions())
        for inst in instructions:
            if inst.opcode == "alloca" or (_heap_function(inst) is not None
                                           and _heap_function(inst).kind in ("alloc", "realloc")):
                self._contents[inst] = set()
                if _heap_function(inst) is not None and _heap_function(inst).kind == "realloc":
                    self._contents[inst] = _TOP          # it holds what realloc copied, too
        changed = True
        while changed:
            changed = False
            taken = self._taken(instructions)
            for inst in instructions:
                if inst.type.is_pointer and inst.opcode not in ("alloca",) and not (
                        _heap_function(inst) is not None and _heap_function(inst).kind in ("alloc", "realloc")):
                    new = self._transfer(inst)
                    if new != self._pts.get(inst, frozenset()):
                        self._pts[inst] = new
                        changed = True
                changed |= self._write(inst, taken)

    def _transfer(self, inst: Instruction) -> frozenset | None:
        if inst.opcode == "load":
            tables = self.points_to(inst.operands[0])
            if tables is _TOP or EXTERNAL in tables:
                return _TOP
            found: list = []
            for table in tables:
                contents = self._contents.get(table, _TOP)
                if contents is _TOP:
                    return _TOP
                found += [self.points_to(v) for v in contents]
            return _union(found)
        sources = pointer_sources(inst)
        if sources:
            return _union(self.points_to(o) for o in sources)
        return _TOP

    def _write(self, inst: Instruction, taken: set) -> bool:
        """Add what ``inst`` writes to the contents of the blocks it may write; True when some grew."""
        op, name = inst.opcode, _callee(inst)
        if op == "store":
            targets, value = [inst.operands[1]], inst.operands[0]
        elif op in ("atomicrmw", "cmpxchg"):
            targets, value = [inst.operands[0]], None
        elif op == "call" and name.startswith(_MEMORY_INTRINSICS):
            targets, value = [inst.operands[0]], None
        elif op in ("call", "invoke") and not name.startswith(_HARMLESS_CALLS) and _heap_function(inst) is None:
            targets, value = [o for o in inst.operands if o.type.is_pointer], None
            if targets:               # the callee may follow the pointers it gets, to any block they reach
                return self._spoil(taken)
        else:
            return False
        changed = False
        for target in targets:
            blocks = self.points_to(target)
            if blocks is _TOP:
                changed |= self._spoil(taken)
                continue
            for block in blocks - {EXTERNAL}:
                contents = self._contents.get(block, _TOP)
                if contents is _TOP:
                    continue
                if value is None or not value.type.is_pointer:
                    self._contents[block] = _TOP   # an integer, a float, an atomic, memset/memcpy
                    changed = True
                elif value not in contents:
                    contents.add(value)
                    changed = True
        return changed

    def _spoil(self, blocks) -> bool:
        changed = False
        for block in blocks:
            if self._contents.get(block, _TOP) is not _TOP:
                self._contents[block] = _TOP
                changed = True
        return changed

    def _taken(self, instructions) -> set:
        """Blocks whose address is stored into memory or leaves what these facts follow (an integer, a
        return, an aggregate, a call): a write through a pointer of unknown target may reach them."""
        taken: set = set()
        for inst in instructions:
            if inst.opcode == "store":
                values = [inst.operands[0]]
            elif inst.opcode in ("ptrtoint", "ret", "insertvalue", "insertelement") or (
                    inst.opcode in ("call", "invoke") and not _callee(inst).startswith(_HARMLESS_CALLS + _MEMORY_INTRINSICS)
                    and _heap_function(inst) is None):
                values = list(inst.operands)
            else:
                continue
            for v in values:
                if v.type.is_pointer:
                    blocks = self.points_to(v)
                    if blocks is not _TOP:
                        taken |= blocks - {EXTERNAL}
        return taken

    # ---- questions
    def roots(self, pointer: Value) -> list[Instruction]:
        """The private blocks ``pointer`` may point into (through GEPs, casts, phis, selects and loads
        of pointers from blocks whose contents are known); empty when it may point elsewhere too."""
        blocks = self.points_to(pointer)
        if blocks is _TOP or EXTERNAL in blocks or not blocks:
            return []
        return sorted(blocks, key=lambda b: self._order.get(b, -1))

    def contents(self, block: Instruction) -> tuple[Value, ...] | None:
        """The pointers stored into ``block``, when those are all it can hold; None when something
        else may write it."""
        contents = self._contents.get(block, _TOP)
        return None if contents is _TOP else tuple(sorted(contents, key=lambda v: self._order.get(v, -1)))

    def holds_shadowed(self, table_pointer: Value, shadowed: set) -> bool:
        """A pointer loaded through ``table_pointer`` has a shadow: the memory is private, holds only
        the pointers stored into it, and each of those has a shadow (or points nowhere)."""
        tables = self.roots(table_pointer)
        if not tables:
            return False
        for table in tables:
            contents = self.contents(table)
            if not contents:
                return False
            if not all(v in shadowed or is_placeholder_pointer(v) for v in contents):
                return False
        return True
