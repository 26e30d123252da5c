"""Pointers kept in private memory: which blocks a pointer loaded from memory may point into, and
when such a load has a shadow (the shadow pointer, loaded from the shadow memory).

C keeps pointers in memory all the time: llm.c fills a struct of ``float*`` from one parameter
block through a table of pointers to the struct's fields (``*(ptrs[i]) = it; it += size[i]``), then
every layer loads its weights' pointer from the struct. Enzyme follows such pointers: the shadow of
``store p, slot`` into memory with a shadow is ``store shadow(p), shadow(slot)``, and the shadow of
``q = load slot`` is ``load shadow(slot)``. That is right when the shadow slot holds the shadow of
every pointer the primal slot can hold, which this module proves for *private* memory (allocas and
heap blocks of the function, activity.memory_roots): every write into it is a pointer store (no
integer, float or memset/memcpy write, no call that receives it, not a realloc'd block), so its
contents are exactly the pointers stored, and a load gets a shadow when each of them has one
(``holds_shadowed``). Which memory a pointer loaded from such a table points into (``roots``) is the
union of what the stored pointers point into: the store ``*(ptrs[i]) = it`` writes the struct.

The pointer helpers activity analysis is built on (``pointer_sources``, ``memory_roots``,
``is_placeholder_pointer``) live here too. Everything else stays as it was: a pointer loaded from memory whose contents are not proven is of
unknown origin, and soundness.py refuses it where it matters. Facts here do not depend on activity,
so they are computed once per function and cached.
"""
from __future__ import annotations

from ..ir.core import Constant, Function, Instruction, Value

# Calls that touch no memory a table holds (annotations of the program, not reads or writes).
_HARMLESS_CALLS = ("llvm.lifetime", "llvm.dbg", "llvm.assume", "llvm.experimental.noalias", "llvm.invariant")
_UNKNOWN = None
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


def _frees(inst: Instruction) -> bool:
    """``free``/``delete`` of a block: it ends the block's life and writes nothing one could load back."""
    from .memory import heap_function
    entry = heap_function(inst)
    return entry is not None and entry.kind == "free"


class PointerTables:
    """Points-to facts of one function for pointers stored in its private memory."""

    def __init__(self, fn: Function):
        self.fn = fn
        self._roots: dict[Value, tuple[Instruction, ...] | None] = {}
        self._contents: dict[Instruction, tuple[Value, ...] | None] = {}
        self._writes: list[tuple[Instruction, Value]] | None = None     # (writing instruction, pointer written)

    # ---- which private memory a pointer may point into
    def roots(self, pointer: Value) -> list[Instruction]:
        """``memory_roots`` extended through loads of pointers from private memory whose contents are
        known; empty when any source is something else (as memory_roots)."""
        found = self._roots_of(pointer, set())
        return list(found) if found else []

    def _roots_of(self, pointer: Value, busy: set) -> tuple[Instruction, ...] | None:
        if pointer in self._roots:
            return self._roots[pointer]
        if pointer in busy:
            return _UNKNOWN                       # a cycle (a linked structure): not followed
        busy.add(pointer)
        result = self._compute_roots(pointer, busy)
        busy.discard(pointer)
        if not busy:                              # only results that depend on no unfinished cycle are kept
            self._roots[pointer] = result
        return result

    def _compute_roots(self, pointer: Value, busy: set) -> tuple[Instruction, ...] | None:
        plain = memory_roots(pointer)
        if plain:
            return tuple(plain)
        if not isinstance(pointer, Instruction):
            return _UNKNOWN
        if pointer.opcode == "load" and pointer.type.is_pointer:
            tables = self._roots_of(pointer.operands[0], busy)
            if not tables:
                return _UNKNOWN
            found: list[Instruction] = []
            for table in tables:
                contents = self._contents_of(table, busy)
                if contents is None:
                    return _UNKNOWN
                for stored in contents:
                    if is_placeholder_pointer(stored):
                        continue
                    inner = self._roots_of(stored, busy)
                    if not inner:
                        return _UNKNOWN
                    found += [r for r in inner if r not in found]
            return tuple(found) if found else _UNKNOWN
        sources = pointer_sources(pointer)
        if not sources:
            return _UNKNOWN
        found = []
        for source in sources:
            if is_placeholder_pointer(source):
                continue
            inner = self._roots_of(source, busy)
            if not inner:
                return _UNKNOWN
            found += [r for r in inner if r not in found]
        return tuple(found) if found else _UNKNOWN

    # ---- what private memory holds
    def contents(self, root: Instruction) -> tuple[Value, ...] | None:
        """The pointers stored into ``root``, when those are all it can hold (see the module
        docstring); None when something else may write it."""
        return self._contents_of(root, set())

    def _contents_of(self, root: Instruction, busy: set) -> tuple[Value, ...] | None:
        if root in self._contents:
            return self._contents[root]
        if ("contents", root) in busy:
            return _UNKNOWN
        busy.add(("contents", root))
        result = self._compute_contents(root, busy)
        busy.discard(("contents", root))
        if not busy:
            self._contents[root] = result
        return result

    def _compute_contents(self, root: Instruction, busy: set) -> tuple[Value, ...] | None:
        from .memory import heap_function
        entry = heap_function(root)
        if entry is not None and entry.kind == "realloc":
            return _UNKNOWN                       # it holds what realloc copied, too
        stored: list[Value] = []
        for inst, target in self._all_writes():
            targets = self._roots_of(target, busy)
            if targets is None:
                if inst.opcode == "store" and self._may_alias_unknown(root):
                    return _UNKNOWN
                continue
            if root not in targets:
                continue
            if inst.opcode != "store" or not inst.operands[0].type.is_pointer:
                return _UNKNOWN                   # an integer, a float, an atomic, memset/memcpy or a call
            stored.append(inst.operands[0])
        return tuple(stored)

    def _may_alias_unknown(self, root: Instruction) -> bool:
        """Whether a write through a pointer of unknown target might reach ``root``: only when the
        root's address leaves what these facts follow (soundness.py refuses such writes in functions
        with differentiated memory; here the table is simply not trusted)."""
        return root in self._escaped()

    def _escaped(self) -> set[Instruction]:
        if not hasattr(self, "_escaped_roots"):
            escaped: set[Instruction] = set()
            for inst in self.fn.instructions():
                if inst.opcode in ("ptrtoint", "ret", "insertvalue", "insertelement"):
                    for o in inst.operands:
                        if o.type.is_pointer:
                            escaped.update(memory_roots(o))
            self._escaped_roots = escaped
        return self._escaped_roots

    def _all_writes(self) -> list[tuple[Instruction, Value]]:
        """Every instruction that may write memory, with the pointer it writes through (a call: each
        pointer it receives)."""
        if self._writes is None:
            writes: list[tuple[Instruction, Value]] = []
            for inst in self.fn.instructions():
                op = inst.opcode
                if op == "store":
                    writes.append((inst, inst.operands[1]))
                elif op in ("atomicrmw", "cmpxchg"):
                    writes.append((inst, inst.operands[0]))
                elif (op in ("call", "invoke") and not getattr(inst.callee, "name", "").startswith(_HARMLESS_CALLS)
                      and not _frees(inst)):
                    writes += [(inst, o) for o in inst.operands if o.type.is_pointer]
            self._writes = writes
        return self._writes

    # ---- activity's question
    def holds_shadowed(self, table_pointer: Value, shadowed: set) -> bool:
        """A pointer loaded through ``table_pointer`` has a shadow: the memory is private, holds only
        the pointers stored into it, and each of those has a shadow (or points nowhere)."""
        tables = self.roots(table_pointer)
        if not tables:
            return False
        for table in tables:
            contents = self.contents(table)
            if contents is None or not contents:
                return False
            if not all(v in shadowed or is_placeholder_pointer(v) for v in contents):
                return False
        return True
