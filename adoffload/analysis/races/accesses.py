"""The memory accesses of a block-kernel body the race check compares: each load, store, atomic and call
of a shared (or checked global) array with its byte offset as a formula of the thread (forms.py), and the
body made ready for the check (failure paths dropped, frozen arguments thawed)."""
from __future__ import annotations

from ...language import collectives
from ...errors import SharedMemoryRaceError
from ...ir import format_instruction
from ...ir.core import (Argument, ArrayType, Block, FloatType, Function, Instruction, IntType, PointerType,
    StructType, Value, VectorType)
from .forms import Forms, Lin, Modular, const_int
from .values import prune_unreachable


class Access:
    """One memory access of a shared array: its byte offset form (None: unknown), size, kind."""

    def __init__(self, inst: Instruction, pointer: Value, root: Argument, offset: Lin | None, size: int | None,
                 kind: str):
        self.inst, self.pointer, self.root, self.offset, self.size, self.kind = inst, pointer, root, offset, size, kind
        self.node: tuple = ()                             # (block, piece): where it runs (races/intervals.py)
        self.facts: list[tuple[Lin, str]] = []           # form <= 0 ("le") or == 0 ("eq") where it runs
        self.conditions: list[tuple[Value, bool]] = []    # the branch conditions (and sides) that dominate it
        self._points: dict = {}                           # Proofs.points per fixed symbol values

    @property
    def writes(self) -> bool:
        return self.kind in ("store", "atomic", "call")


_NO_MEMORY = ("llvm.lifetime.", "llvm.assume", "llvm.dbg.", "llvm.experimental.noalias", "llvm.invariant.")


def _layout(t) -> tuple[int, int, int] | None:
    """(allocation size, alignment, store size) in bytes of type ``t`` (LLVM's default data layout)."""
    if isinstance(t, IntType):
        size = 1 << max(0, ((t.bits + 7) // 8 - 1).bit_length())
        return size, min(size, 16), (t.bits + 7) // 8
    if isinstance(t, FloatType):
        size = t.bits // 8
        return size, size, size
    if isinstance(t, PointerType):
        return 8, 8, 8
    if isinstance(t, (VectorType, ArrayType)):
        inner = _layout(t.element)
        if inner is None:
            return None
        if isinstance(t, ArrayType):
            return inner[0] * t.count, inner[1], inner[0] * t.count
        stored = inner[2] * t.count
        align = 1 << max(0, (stored - 1).bit_length())
        return -(-stored // align) * align, align, stored
    if isinstance(t, StructType):
        offset, align = 0, 1
        for field in t.elements:
            inner = _layout(field)
            if inner is None:
                return None
            a = 1 if t.packed else inner[1]
            offset = -(-offset // a) * a + inner[0]
            align = max(align, a)
        size = -(-offset // align) * align
        return size, align, size
    return None


def _size(t) -> int | None:
    """Bytes a load or store of type ``t`` touches."""
    layout = _layout(t)
    return None if layout is None else layout[2]


def gep_terms(gep: Instruction) -> tuple[list[tuple[Value, int]], int] | None:
    """A getelementptr's byte offset as (index, bytes per unit) terms plus a constant (struct fields)."""
    t, terms, constant = gep.element_type, [], 0
    for k, index in enumerate(gep.operands[1:]):
        if k > 0 and isinstance(t, StructType):
            field = const_int(index)
            if field is None or not 0 <= field < len(t.elements):
                return None
            for before in t.elements[:field]:
                inner = _layout(before)
                if inner is None:
                    return None
                a = 1 if t.packed else inner[1]
                constant = -(-constant // a) * a + inner[0]
            inner = _layout(t.elements[field])
            if inner is None:
                return None
            a = 1 if t.packed else inner[1]
            constant = -(-constant // a) * a
            t = t.elements[field]
            continue
        if k > 0:
            if not isinstance(t, (ArrayType, VectorType)):
                return None
            t = t.element
        layout = _layout(t)
        if layout is None:
            return None
        terms.append((index, layout[0]))
    return terms, constant


def shared_pointer(forms: Forms, p: Value, roots: set, depth: int = 0):
    """(root, byte offset form or None) of pointer ``p``: the root is a shared-array argument, a
    *switch* (a phi or select choosing whole shared arrays, alike for the block in an interval:
    double buffers), or a tuple of the arrays ``p`` may point into (offset None); (None, None) when
    ``p`` is not into shared memory."""
    if p in roots:
        return p, Lin()
    if depth > 64 or not isinstance(p, Instruction):
        return None, None
    if p.opcode == "getelementptr":
        root, base = shared_pointer(forms, p.operands[0], roots, depth + 1)
        if root is None or base is None:
            return root, None
        offset = _gep_offset(forms, p)
        if offset is None:
            return root, None
        total = base + offset
        return root, (Modular(total.coef, total.const) if Modular in (type(base), type(offset)) else total)
    if p.opcode in ("phi", "select"):
        if switched_roots(p, roots) and not forms.divergence.is_varying(p) and p.parent not in forms.unstable:
            return p, Lin()
        found = _reachable_roots(p, roots)
        if found:
            return tuple(sorted(found, key=lambda r: r.index)), None
    return None, None


def switched_roots(p: Value, roots: set, seen=None) -> set | None:
    """The shared arrays a phi/select of whole shared arrays chooses from (None if it is not one)."""
    seen = set() if seen is None else seen
    if p in roots:
        return {p}
    if not (isinstance(p, Instruction) and p.opcode in ("phi", "select")):
        return None
    if id(p) in seen:
        return set()
    seen.add(id(p))
    found = set()
    for o in (p.operands[1:] if p.opcode == "select" else p.operands):
        inner = switched_roots(o, roots, seen)
        if inner is None:
            return None
        found |= inner
    return found


def _reachable_roots(p: Value, roots: set) -> set:
    found, seen, todo = set(), set(), [p]
    while todo:
        x = todo.pop()
        if x in roots:
            found.add(x)
        elif isinstance(x, Instruction) and id(x) not in seen and x.opcode in ("getelementptr", "phi", "select"):
            seen.add(id(x))
            todo.extend(x.operands[:1] if x.opcode == "getelementptr" else
                        x.operands[1:] if x.opcode == "select" else x.operands)
    return found


def apart(a: Value, b: Value, roots: set) -> bool:
    """Whether roots ``a`` and ``b`` are always different arrays: two different arguments, switches
    over disjoint arrays, or two phis of one block that start on different arrays and swap."""
    if a is b:
        return False
    pa, pb = switched_roots(a, roots), switched_roots(b, roots)
    if pa is not None and pb is not None and not (pa & pb):
        return True
    if not (isinstance(a, Instruction) and isinstance(b, Instruction) and a.opcode == b.opcode == "phi"
            and a.parent is b.parent):
        return False
    incoming_b = dict(zip(map(id, b.blocks), b.operands))
    for block, x in zip(a.blocks, a.operands):
        y = incoming_b.get(id(block))
        if not ((x is b and y is a) or (x in roots and y in roots and x is not y)):
            return False
    return True


def _gep_offset(forms: Forms, gep: Instruction) -> Lin | None:
    found = gep_terms(gep)
    if found is None:
        return None
    total, wraps = Lin(const=found[1]), False
    for index, size in found[0]:
        f = forms.form(index, "s")
        if f is None and "nuw" in gep.flags:      # offsets that do not wrap unsigned: the index is below 2^61
            f = forms.form(index, "u")
        if f is None and index.type.bits == 64:   # exact modulo 2^64, as the address itself
            f, wraps = forms.modular(index), True
        if f is None:
            return None
        total = total + f.scale(size)
    return Modular(total.coef, total.const) if wraps else total


def collect_accesses(forms: Forms, fn: Function, roots: set, kernel: str, shared: set) -> list[Access]:
    """Every access of the ``roots`` (an access through a pointer that may point into several arrays
    is one per array, at an unknown offset); a pointer into ``shared`` memory that escapes is refused."""
    found = []

    def add(inst, pointer, size, kind):
        root, offset = shared_pointer(forms, pointer, roots)
        if root is None:
            return
        for r in (root if isinstance(root, tuple) else (root,)):
            found.append(Access(inst, pointer, r, offset if not isinstance(root, tuple) else None, size, kind))

    for inst in fn.instructions():
        op = inst.opcode
        escaping = inst.operands[:1] if op in ("store", "insertvalue", "insertelement") else []
        if op == "inttoptr" or any(isinstance(o.type, PointerType) and shared_pointer(forms, o, shared)[0] is not None
                                   for o in escaping):
            raise SharedMemoryRaceError(f"kernel '{kernel}': a pointer into shared memory is stored, or a pointer is "
                                        f"made from an integer (`{format_instruction(inst).strip()}`); the "
                                        f"shared-memory race check cannot follow accesses through it. Index the "
                                        f"shared array directly")
        if op == "load":
            add(inst, inst.operands[0], _size(inst.type), "load")
        elif op == "store":
            add(inst, inst.operands[1], _size(inst.operands[0].type), "store")
        elif op in ("atomicrmw", "cmpxchg"):
            add(inst, inst.operands[0], _size(inst.type if op == "atomicrmw" else inst.operands[1].type), "atomic")
        elif op == "call":
            name = getattr(inst.callee, "name", "")
            if name.startswith(_NO_MEMORY) or collectives.parse(name) is not None:
                continue
            length = const_int(inst.operands[2]) if name.startswith(("llvm.memset", "llvm.memcpy", "llvm.memmove")) \
                and len(inst.operands) > 2 else None
            for k, operand in enumerate(inst.operands):
                if isinstance(operand.type, PointerType):
                    reads = name.startswith(("llvm.memcpy", "llvm.memmove")) and k == 1
                    add(inst, operand, length, "load" if reads else "call")
    return found


def _is_failure(block: Block, status: Argument) -> bool:
    """Whether ``block`` starts by claiming the status record (a failed check, codegen/gpu/uniform_checks.py)."""
    first = next((i for i in block.instructions if i.opcode != "phi"), None)
    return first is not None and first.opcode == "atomicrmw" and first.op == "xchg" and first.operands[0] is status


def drop_failure_paths(fn: Function) -> None:
    """Branches to failed checks (bounds, traps) become jumps to the other side: a launch where a
    check fails raises, so only launches where none fails must be race-free (and the failure paths,
    which leave the body early, would make the uniformity analysis see divergence everywhere)."""
    status = fn.args[-1]
    for b in fn.blocks:
        term = b.terminator
        if term is None or term.opcode != "br" or len(term.blocks) != 2:
            continue
        fails = [_is_failure(s, status) for s in term.blocks]
        if fails[0] != fails[1]:
            term.operands, term.blocks = [], [term.blocks[1 if fails[0] else 0]]
    prune_unreachable(fn)


def thaw_arguments(fn: Function) -> None:
    """``freeze %arg`` becomes ``%arg``: a launch passes every argument (thread ids, shapes,
    scalars) as a real value, never poison, so the freeze is the identity. O3 freezes the thread
    index where it turns ``(t + 1) % B`` into a compare and select for a B that is not a power of
    two; the forms saw an opaque value and refused ``S[t] = ...`` as a race."""
    thawed = {}
    for b in fn.blocks:
        for inst in b.instructions:
            if inst.opcode == "freeze" and isinstance(inst.operands[0], Argument):
                thawed[inst] = inst.operands[0]
    if not thawed:
        return
    for b in fn.blocks:
        b.instructions = [i for i in b.instructions if i not in thawed]
        for inst in b.instructions:
            inst.operands = [thawed.get(o, o) for o in inst.operands]
