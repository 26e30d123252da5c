"""Floats moved through integer loads and stores become float loads and stores.

Rust's ``slice::swap``, ``reverse`` and ``rotate_left`` move an ``f64`` as an ``i64`` (``ptr::swap``
copies bytes)::

    %a = load i64, ptr %p          ; x[i]
    %b = load i64, ptr %q          ; x[j]
    store i64 %b, ptr %p
    store i64 %a, ptr %q

The AD engine refuses float bits carried as integers (it cannot tell an ``f64`` from an ``i64``).
Loads and stores copy bits unchanged whatever their type, so the same moves as ``double`` mean the
same. The rewrite is taken only when it is known which float the memory holds: every user of the
loaded integer is a store of it, and every other load and store through the memory the pointers
come from (arguments, stack slots, heap blocks; through GEPs, phis and selects) is of one float
type of the integer's width (or vectors of it), with at least one such access, and no call gets
that memory (a call could read it as anything). Anything else stays as it is (and refused where a
derivative needs it).
"""
from __future__ import annotations

import re

from .core import Argument, Constant, Function, Instruction, Module, Value
from .core import f32, f64

_DERIVING = ("getelementptr", "bitcast", "addrspacecast", "phi", "select")
_FLOAT_OF_WIDTH = {32: f32, 64: f64}
# heap allocations (C, C++, Rust's shims, v0-mangled or not): a fresh block is memory of its own
_ALLOCATION = re.compile(r"^(malloc|calloc|realloc|_Znwm|_Znam)$|__rust_(alloc|alloc_zeroed|realloc)$")
_HARMLESS_CALLS = ("llvm.lifetime.", "llvm.experimental.noalias.scope.decl", "llvm.assume", "llvm.prefetch")


def float_moves(module: Module) -> int:
    """Retype such moves in ``module``'s defined functions; returns how many loads were retyped."""
    return sum(_rewrite_function(fn) for fn in module.functions.values() if not fn.is_declaration)


def _rewrite_function(fn: Function) -> int:
    users = fn.users()
    moves = [i for i in fn.instructions() if _is_move(i, users)]
    if not moves:
        return 0
    roots = _Roots()
    types = _access_types(fn, roots, moves, users)
    # memory that only moves exchange with (a swap's stack temporary) holds what its partners hold
    group: dict = {}

    def find(r):
        while group.setdefault(r, r) is not r:
            r = group[r]
        return r

    involved = {}
    for load in moves:
        found = [roots.of(p) for p in [load.operands[0]] + [s.operands[1] for s in users[load]]]
        involved[load] = None if any(f is None for f in found) else frozenset().union(*found)
        members = sorted(involved[load] or (), key=id)
        for other in members[1:]:
            group[find(other)] = find(members[0])
    group_types: dict = {}
    for r, ts in types.items():
        group_types.setdefault(find(r), set()).update(ts)
    done = 0
    for load in moves:
        if involved[load] is None:
            continue
        float_type = _FLOAT_OF_WIDTH[load.type.bits]
        seen = set().union(*[group_types.get(find(r), {None}) for r in involved[load]])
        if seen != {float_type}:
            continue
        load.type = load.element_type = float_type
        done += 1
    return done


def _is_move(inst: Instruction, users: dict) -> bool:
    """An i32/i64 load whose every user stores it (as the value, not the address)."""
    if inst.opcode != "load" or "volatile" in inst.flags or inst.ordering \
            or getattr(inst.type, "bits", None) not in _FLOAT_OF_WIDTH or inst.type.is_float:
        return False
    stored = users.get(inst, [])
    return bool(stored) and all(u.opcode == "store" and u.operands[0] is inst and u.operands[1] is not inst
                                and "volatile" not in u.flags and not u.ordering for u in stored)


class _Roots:
    """The memory a pointer may point into: arguments, allocas and heap allocations, through GEPs,
    casts, phis and selects; None when a source is anything else (a loaded pointer, another call)."""

    def __init__(self):
        self._memo: dict[int, frozenset | None] = {}

    def of(self, pointer: Value) -> frozenset | None:
        key = id(pointer)
        if key in self._memo:
            return self._memo[key]
        found, seen, work = set(), set(), [pointer]
        while work:
            p = work.pop()
            if id(p) in seen:
                continue
            seen.add(id(p))
            if isinstance(p, Argument) or (isinstance(p, Instruction) and (
                    p.opcode == "alloca" or (p.opcode == "call" and _ALLOCATION.search(getattr(p.callee, "name", ""))))):
                found.add(p)
            elif isinstance(p, Instruction) and p.opcode in _DERIVING:
                work.extend(p.operands[1:] if p.opcode == "select" else
                            p.operands if p.opcode == "phi" else p.operands[:1])
            elif isinstance(p, Constant) and p.kind in ("null", "undef", "poison", "expr"):
                if p.kind == "expr" and getattr(p, "opcode", "") != "inttoptr":
                    self._memo[key] = None     # a global's address: its other users are elsewhere
                    return None
            else:
                self._memo[key] = None
                return None
        self._memo[key] = frozenset(found)
        return self._memo[key]


def _access_types(fn: Function, roots: _Roots, moves: list, users: dict) -> dict:
    """{root: element types of the loads and stores through it, the moves' own left out}; a root
    that a call receives (or an atomic touches) gets None among its types."""
    moved = {id(m) for m in moves} | {id(s) for m in moves for s in users[m]}
    types: dict = {}

    def note(pointer, t):
        for r in roots.of(pointer) or ():
            types.setdefault(r, set()).add(t)

    for inst in fn.instructions():
        if id(inst) in moved:
            continue
        if inst.opcode == "load":
            note(inst.operands[0], _element(inst.type))
        elif inst.opcode == "store":
            note(inst.operands[1], _element(inst.operands[0].type))
        elif inst.opcode in ("atomicrmw", "cmpxchg"):
            note(inst.operands[0], None)
        elif inst.opcode in ("call", "invoke"):
            name = getattr(inst.callee, "name", "")
            if not name.startswith(_HARMLESS_CALLS):
                for o in inst.operands:
                    if o.type.is_pointer:
                        note(o, None)
    return types


def _element(t):
    return getattr(t, "element", t)
