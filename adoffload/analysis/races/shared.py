"""Shared-memory races between the threads of a block, refused at compile time.

On a GPU, two threads of a block that touch one shared element between the same two barriers,
one of them writing, race: the order is undefined (warp-synchronous code such as
``if (tid < 32) { v[tid] += v[tid + 16]; ... }`` without ``__syncwarp`` is such a race since
Volta). The host runs a block's threads one after another between barriers (block_split.py), so
such code would run, deterministically and wrongly, and the reverse sweep of it would be wrong on
every target. ``check_shared_races`` proves every pair of conflicting accesses apart, or raises
``SharedMemoryRaceError`` naming both.

* **Intervals** (shared_intervals.py): a barrier (``sync_threads``, and the block operations, which
  hold barriers on every target) ends one. Two accesses may run in one interval when one barrier (or
  the entry) reaches both without passing another barrier under one choice of sides of the
  block-uniform branches taken once per interval; accesses of different intervals never conflict.
* **Pairs**: in one interval, every two accesses of the same shared array (an access with itself
  included) of which one writes; two atomics do not race.
* **Roots**: a shared-array argument, or a phi/select choosing whole arrays alike for the block
  (double buffers; two phis of one block that start apart and swap are apart).
* **Proofs** on byte offsets, affine forms (shared_forms.py) in the thread's index per axis, values
  alike for the block in the interval, trip counts of barrier-free loops and permuted thread
  indices; the branches on every path to an access restrict where it runs (``t < s``, ``t == 0``,
  ``lane == 0``, a loop's bound; shared_guards.py). (1) Equal thread coefficients and a constant
  difference of the rest: the accesses of two different threads lie apart (mixed-radix gap). (2) The byte ranges of
  the two accesses over all their threads are disjoint, with symbolic bounds (``if (t < s) s[t] +=
  s[t + s]``: elements [0, s) and [s, 2s)). (3) Enumeration of the block's threads and the trip
  counts, the guards evaluated bit-exactly: no byte one thread touches is touched by another; where
  the addresses or guards depend on values alike for the block with finite value sets
  (shared_values.py: a sorting network's stride), once per combination of their values.
  A value alike for the block that both accesses name must be one instance for both in the interval
  (``Intervals.same_instance``). Anything else is refused.
* Failure paths of bounds checks and traps are ignored: a launch where one is taken raises.

It relies on the assumption the uniformity analysis makes (foreign_cuda/uniformity.py): values
loaded at one address by the whole block are alike, which holds when this check passes.
"""
from __future__ import annotations

import itertools

from ...language import collectives
from ...errors import GlobalMemoryRaceError, SharedMemoryRaceError
from ...ir import format_instruction
from ...ir.core import (Argument, ArrayType, Block, FloatType, Function, Instruction, IntType, PointerType,
    StructType, Value, VectorType)
from ...ir.cfg import dominator_sets
from .global_arrays import LOAD_STORE, at_loaded_index, in_place, loaded_index_message
from .single_thread import one_thread
from .accesses import Access
from .messages import message as _message, where as _where
from .forms import Concrete, Forms, Lin, Modular, const_int, signed
from .guards import guards
from .intervals import Intervals
from .values import ValueSets, fold_constant_branches, prune_unreachable, symbol_inputs

_NO_MEMORY = ("llvm.lifetime.", "llvm.assume", "llvm.dbg.", "llvm.experimental.noalias", "llvm.invariant.")
_MAX_BOUND_CHOICES = 4
_MAX_ENUMERATED_BYTES = 1 << 18
_MAX_POINTS = 1 << 15
_MAX_VALUE_COMBINATIONS = 256   # values of the symbols enumerated (_witness_per_value)
_MAX_VALUE_POINTS = 1 << 17     # their count times the block's threads
UNREACHED = object()        # _offset: the thread cannot reach the pointer
_MAX_PHI_DEPTH = 8          # pointer phis followed back through one another (loops end there)


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


def _gep_terms(gep: Instruction) -> tuple[list[tuple[Value, int]], int] | None:
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


# --- accesses, intervals and guards ---------------------------------------------------------------

def _pointer(forms: Forms, p: Value, roots: set, depth: int = 0):
    """(root, byte offset form or None) of pointer ``p``: the root is a shared-array argument, a
    *switch* (a phi or select choosing whole shared arrays, alike for the block in an interval:
    double buffers), or a tuple of the arrays ``p`` may point into (offset None); (None, None) when
    ``p`` is not into shared memory."""
    if p in roots:
        return p, Lin()
    if depth > 64 or not isinstance(p, Instruction):
        return None, None
    if p.opcode == "getelementptr":
        root, base = _pointer(forms, p.operands[0], roots, depth + 1)
        if root is None or base is None:
            return root, None
        offset = _gep_offset(forms, p)
        if offset is None:
            return root, None
        total = base + offset
        return root, (Modular(total.coef, total.const) if Modular in (type(base), type(offset)) else total)
    if p.opcode in ("phi", "select"):
        if _switched(p, roots) and not forms.divergence.is_varying(p) and p.parent not in forms.unstable:
            return p, Lin()
        found = _reachable_roots(p, roots)
        if found:
            return tuple(sorted(found, key=lambda r: r.index)), None
    return None, None


def _switched(p: Value, roots: set, seen=None) -> set | None:
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
        inner = _switched(o, roots, seen)
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


def _apart(a: Value, b: Value, roots: set) -> bool:
    """Whether roots ``a`` and ``b`` are always different arrays: two different arguments, switches
    over disjoint arrays, or two phis of one block that start on different arrays and swap."""
    if a is b:
        return False
    pa, pb = _switched(a, roots), _switched(b, roots)
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
    found = _gep_terms(gep)
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


def _accesses(forms: Forms, fn: Function, roots: set, kernel: str, shared: set) -> list[Access]:
    """Every access of the ``roots`` (an access through a pointer that may point into several arrays
    is one per array, at an unknown offset); a pointer into ``shared`` memory that escapes is refused."""
    found = []

    def add(inst, pointer, size, kind):
        root, offset = _pointer(forms, pointer, roots)
        if root is None:
            return
        for r in (root if isinstance(root, tuple) else (root,)):
            found.append(Access(inst, pointer, r, offset if not isinstance(root, tuple) else None, size, kind))

    for inst in fn.instructions():
        op = inst.opcode
        escaping = inst.operands[:1] if op in ("store", "insertvalue", "insertelement") else []
        if op == "inttoptr" or any(isinstance(o.type, PointerType) and _pointer(forms, o, shared)[0] is not None
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
    """Whether ``block`` starts by claiming the status record (a failed check, codegen/uniform_checks.py)."""
    first = next((i for i in block.instructions if i.opcode != "phi"), None)
    return first is not None and first.opcode == "atomicrmw" and first.op == "xchg" and first.operands[0] is status


def _drop_failure_paths(fn: Function) -> None:
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


def _thaw_arguments(fn: Function) -> None:
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


# --- the proofs -----------------------------------------------------------------------------------

class Proofs:
    """Whether two accesses can touch one byte from two different threads (module docstring)."""

    def __init__(self, forms: Forms, facts: dict, sets: ValueSets, intervals: Intervals, sizes: dict | None = None):
        self.forms = forms
        self.sizes = sizes or {}              # bytes of the shared arrays whose accesses are bounds-checked
        self.facts = facts or {}              # per block: guards(), to follow pointer phis
        self.sets, self.intervals = sets, intervals
        self.concrete = Concrete(forms)
        self._opaque: set = set()             # (condition, symbols given): not a function of those and the thread

    def conflict(self, a: Access, b: Access):
        """None when proven apart; else a witness (thread of ``a``, thread of ``b``) or () if none is known.
        A symbol both forms (or guards) name must have one instance for both (``_alike``)."""
        if one_thread(self, a, b):
            return None
        if not self._alike(a, b, _symbol_ids(a) & _symbol_ids(b)):
            return ()
        if a.size is not None and b.size is not None and a.offset is not None and b.offset is not None:
            diff = (a.offset - b.offset).uniform().constant()
            wraps = isinstance(a.offset, Modular) or isinstance(b.offset, Modular)
            if diff is not None and a.offset.threads() == b.offset.threads() \
                    and self._gap(a, b, a.offset.threads(), wraps) >= max(b.size - diff, a.size + diff):
                return None
            if not wraps and self._disjoint_spans(a, b):
                return None
        if a.size is None or b.size is None:
            return ()
        found = self._witness(a, b)
        return self._witness_per_value(a, b) if found == () else found

    # -- the accesses of different threads lie apart (mixed radix) --
    def upper(self, x: Access, atom) -> int | None:
        """A constant upper bound of per-thread atom ``atom`` where ``x`` runs (all are >= 0)."""
        if atom[0] == "t":
            return self.forms.block[atom[1]] - 1
        if atom[0] == "p":
            return atom[2] - 1
        best = None
        for f, kind in x.facts:
            th = f.threads()
            rest = f.uniform().constant()
            if list(th) == [atom] and th[atom] > 0 and rest is not None:
                bound = (-rest) // th[atom]
                best = bound if best is None else min(best, bound)
        return best

    def _gap(self, a: Access, b: Access, coef: dict, wraps: bool = False) -> int:
        """The least |sum coef * (atoms of one thread - atoms of another)| over two different threads
        (0 when unknown; offsets modulo 2^64 (``wraps``) need every atom bounded, far below 2^62)."""
        axes = [atom[1] for atom in coef if atom[0] in ("t", "p")]
        if len(axes) != len(set(axes)) or any(e > 1 and a_ not in axes for a_, e in enumerate(self.forms.block)):
            return 0
        parts = []
        for atom, c in coef.items():
            ua, ub = self.upper(a, atom), self.upper(b, atom)
            parts.append((abs(c), None if ua is None or ub is None else max(ua, ub)))
        parts.sort(key=lambda p: p[0])
        if wraps and (any(top is None for _, top in parts) or sum(c * top for c, top in parts) >= 2 ** 62):
            return 0
        gap, below = None, 0
        for k, (c, top) in enumerate(parts):
            gap = c - below if gap is None else min(gap, c - below)
            if top is None and k < len(parts) - 1:
                return 0
            below += c * (top or 0)
        return max(gap, 0) if gap is not None else 0

    # -- the byte ranges of the two accesses are disjoint --
    def _choices(self, x: Access, atom):
        lows, highs = [Lin()], []
        top = self.upper(x, atom)
        if top is not None:
            highs.append(Lin(const=top))
        for f, kind in x.facts:
            th = f.threads()
            if list(th) != [atom] or th[atom] not in (1, -1):
                continue
            rest = f - Lin(th)
            if th[atom] == 1:
                highs.append(rest.scale(-1))
                if kind == "eq":
                    lows.append(rest.scale(-1))
            else:
                lows.append(rest)
                if kind == "eq":
                    highs.append(rest)
        return lows[:_MAX_BOUND_CHOICES], highs[:_MAX_BOUND_CHOICES]

    def _spans(self, x: Access):
        """Candidate [lo, hi) byte ranges of ``x`` over all its threads (forms in the uniform atoms)."""
        th = x.offset.threads()
        atoms = sorted(th, key=str)
        choices = [self._choices(x, atom) for atom in atoms]
        if any(not highs for _, highs in choices):
            return
        for picks in itertools.product(*[itertools.product(lo, hi) for lo, hi in choices]):
            lo = hi = x.offset.uniform()
            for atom, (low, high) in zip(atoms, picks):
                c = th[atom]
                lo = lo + (low if c > 0 else high).scale(c)
                hi = hi + (high if c > 0 else low).scale(c)
            yield lo, hi + Lin(const=x.size)

    def _disjoint_spans(self, a: Access, b: Access) -> bool:
        spans_b = list(self._spans(b))
        for lo_a, hi_a in self._spans(a):
            for lo_b, hi_b in spans_b:
                for gap in (hi_a - lo_b, hi_b - lo_a):
                    if gap.constant() is not None and gap.constant() <= 0:
                        return True
        return False

    # -- no byte that one thread touches is touched by another (enumerated) --
    def points(self, x: Access, fixed: dict | None = None):
        """(uniform base form, [(thread, byte offset from the base)]) over every thread and trip count
        where ``x`` may run, or None when they cannot be enumerated; ``fixed`` gives symbols ("v"
        atoms) values (``_witness_per_value``)."""
        fixed = fixed or {}
        key = tuple(sorted(fixed.items(), key=str))
        if key in x._points:
            return x._points[key]
        x._points[key] = None
        block = self.forms.block
        ks = {atom for f, _ in x.facts for atom in f.threads() if atom[0] == "k" and self.upper(x, atom) is not None}
        affine = x.offset is not None and not isinstance(x.offset, Modular) \
            and all(atom[0] in ("t", "k") for atom in x.offset.threads())
        if affine:
            ks |= {atom for atom in x.offset.threads() if atom[0] == "k"}
        tops = {k: self.upper(x, k) for k in ks}
        total = len(list(itertools.product(*map(range, block))))
        for top in tops.values():
            total *= (top + 1) if top is not None and top >= 0 else 0
        if any(top is None for top in tops.values()) or total > _MAX_POINTS:
            return None
        ks = sorted(ks, key=str)
        base = _substitute(x.offset.uniform(), fixed) if affine else Lin()
        rel = Lin(x.offset.threads()) if affine else None
        found = []
        for thread in itertools.product(*map(range, block)):
            for trips in itertools.product(*(range(tops[k] + 1) for k in ks)):
                env = {("t", a): v for a, v in enumerate(thread)}
                env.update(fixed)
                env.update(zip(ks, trips))
                if not self._holds(x, env):
                    continue
                offset = rel.at(env) if affine else self._offset(x.pointer, x.root, env)
                if offset is None:
                    return None
                if offset is UNREACHED:
                    continue
                found.append((thread, offset))
        x._points[key] = (base, found)
        return x._points[key]

    def _holds(self, x: Access, env: dict) -> bool:
        """False when a fact or a condition dominating ``x`` is known false at ``env``."""
        return self._guards_hold(x.facts, x.conditions, env)

    def _guards_hold(self, facts, conditions, env: dict) -> bool:
        for f, kind in facts:
            value = f.at(env)
            if value is not None and (value > 0 if kind == "le" else value != 0):
                return False
        given = tuple(atom for atom in env if atom[0] == "v")
        for condition, side in conditions:
            if (id(condition), given) in self._opaque:
                continue
            value = self.concrete.value(condition, env)
            if value is None and side in (True, False):
                value = self._partly(condition, env)    # ``first == 0 and i < n``: false where first != 0
            if value is None:                  # it depends on more than the thread: ignore it (a superset)
                if not _connective(condition):
                    self._opaque.add((id(condition), given))
                continue
            if side is True or side is False:
                if bool(value) != side:
                    return False
            elif value != side[1] % (1 << condition.type.bits):      # ("case", c): a switch's case
                return False
        return True

    def _partly(self, c: Value, env: dict, depth: int = 0) -> int | None:
        """The truth of an ``and``/``or``/``select`` of conditions from the parts known at ``env`` (one
        false part makes an ``and`` false), else None."""
        value = self.concrete.value(c, env)
        if value is not None:
            return int(bool(value))
        if not _connective(c) or depth > 8:
            return None
        parts = [self._partly(o, env, depth + 1) for o in c.operands]
        if c.opcode == "select":                  # select(p, a, b): a where p holds, else b
            chosen = {1: parts[1], 0: parts[2]}.get(parts[0])
            return chosen if chosen is not None or parts[1] != parts[2] else parts[1]
        absorbing = 0 if c.opcode == "and" else 1
        if absorbing in parts:
            return absorbing
        return 1 - absorbing if all(p is not None for p in parts) else None

    def _offset(self, p: Value, root: Argument, env: dict, depth: int = 0) -> int | None:
        total = 0
        while p is not root:
            if isinstance(p, Instruction) and p.opcode == "phi" and depth < _MAX_PHI_DEPTH:
                # a pointer phi (two halo stores merged into one): the incoming pointers of the
                # predecessors whose guards do not exclude the thread must agree
                # (none: the thread cannot reach the phi, which dominates the access)
                offsets = {self._offset(q, root, env, depth + 1) for q, b in zip(p.operands, p.blocks)
                           if self._guards_hold(*self.facts.get(b, ([], [])), env)} - {UNREACHED}
                if not offsets:
                    return UNREACHED
                return total + offsets.pop() if len(offsets) == 1 and None not in offsets else None
            found = _gep_terms(p) if isinstance(p, Instruction) and p.opcode == "getelementptr" else None
            if found is None:
                return None
            total += found[1]
            for index, size in found[0]:
                value = self.concrete.value(index, env)
                if value is None and p.operands[0] is root and root in self.sizes and len(found[0]) == 1 \
                        and not found[1] and size:
                    value = self._in_bounds(index, self.sizes[root] // size, env)
                if value is None:
                    return None
                if self.concrete.poisoned(index, env):
                    return UNREACHED               # a poison address: undefined behaviour, not a run
                total += signed(value, index.type.bits) * size
            p = p.operands[0]
        return total

    def _in_bounds(self, index: Value, count: int, env: dict) -> int | None:
        """The index into a bounds-checked array of ``count`` elements from its low bits: a launch where
        a check fails raises, so in the others it lies in [0, count), where its bits below 2^n >= count
        fix it (the high bits of ``t + B * block_id()`` cancel in ``(t & 120) ^ 120 - (t | -7)``)."""
        n = max(1, (count - 1).bit_length())
        low = self.concrete.low_bits(index, n, env)
        return low if low is not None and low < count else None

    def _witness(self, a: Access, b: Access, fixed: dict | None = None):
        pa, pb = self.points(a, fixed), self.points(b, fixed)
        if pa is None or pb is None:
            return ()
        shift = (pa[0] - pb[0]).constant()
        if shift is None or len(pa[1]) * a.size + len(pb[1]) * b.size > _MAX_ENUMERATED_BYTES:
            return ()
        holders: dict[int, set] = {}
        for thread, offset in pa[1]:
            for byte in range(offset + shift, offset + shift + a.size):
                holders.setdefault(byte, set()).add(thread)
        for thread, offset in pb[1]:
            for byte in range(offset, offset + b.size):
                for owner in sorted(holders.get(byte, ())):
                    if owner != thread:
                        return owner, thread
        return None

    def first_block_witness(self, a: Access, b: Access):
        """Two threads of block 0 whose accesses touch one byte (``_witness`` with the block index 0),
        else None: evidence of a race, never a proof of its absence."""
        found = self._witness(a, b, {("blk", axis): 0 for axis in range(len(self.forms.block))})
        return found or None

    def _alike(self, a: Access, b: Access, ids) -> bool:
        """Whether the symbols ``ids`` have one instance at ``a`` and at ``b`` in any interval."""
        return all(self.intervals.same_instance(a.inst, b.inst, self.forms.symbols[i]) for i in ids
                   if isinstance(self.forms.symbols[i], Instruction))

    def _witness_per_value(self, a: Access, b: Access):
        """``_witness`` once per combination of values of the symbols that the two accesses' addresses
        and guards are computed from and whose value sets are finite (shared_values.py: a bitonic
        sort's stride): None when every combination is proven apart, else a witness or ()."""
        inputs = []
        for x in (a, b):
            roots = [x.pointer] + [c for c, _ in x.conditions] + [self.forms.symbols[i] for i in _symbol_ids(x)]
            inputs.append(symbol_inputs(self.forms, self.sets, roots))
        both = {id(v) for v in inputs[0][0] + inputs[0][1]} & {id(v) for v in inputs[1][0] + inputs[1][1]}
        if not self._alike(a, b, {i for i in both if i in self.forms.symbols}):
            return ()
        leaves = list({id(v): v for v in inputs[0][0] + inputs[1][0]}.values())
        derived = list({id(v): v for v in inputs[0][1] + inputs[1][1]}.values())
        conditions = a.conditions + b.conditions
        choices = [(("v", id(v)), sorted(signed(e, v.type.bits) for e in self.sets.admitted(v, conditions)))
                   for v in leaves]
        count = 1
        for _, values in choices:
            count *= len(values)
        threads = 1
        for extent in self.forms.block:
            threads *= extent
        if not choices or count > _MAX_VALUE_COMBINATIONS or count * threads > _MAX_VALUE_POINTS:
            return ()
        for combination in itertools.product(*(values for _, values in choices)):
            fixed = dict(zip((atom for atom, _ in choices), combination))
            for v in derived:                   # symbols computed from those: their atoms get values too
                value = self.concrete.value(v, fixed)
                if value is not None:
                    fixed[("v", id(v))] = signed(value, v.type.bits)
            found = self._witness(a, b, fixed)
            if found is not None:
                return found
        return None


def _symbol_ids(x: Access) -> set:
    """Ids of the symbols ("v" atoms, also inside permutations) of ``x``'s offset and facts."""
    found = set()
    for f in [x.offset] + [f for f, _ in x.facts]:
        for atom in (f.coef if f is not None else ()):
            inner = [a for a, _ in atom[3][0]] if atom[0] == "p" else [atom]
            found |= {a[1] for a in inner if a[0] == "v"}
    return found


def _substitute(f: Lin, fixed: dict) -> Lin:
    """``f`` with the atoms that ``fixed`` gives values replaced by them."""
    return Lin({a: c for a, c in f.coef.items() if a not in fixed},
               f.const + sum(c * fixed[a] for a, c in f.coef.items() if a in fixed))


# --- the check ------------------------------------------------------------------------------------

def check_shared_races(fn: Function, tids: list[Argument], block: tuple[int, ...], shared: list[Argument],
                       names: list[str], kernel: str, thread_names: list[str] | None = None,
                       warp_size: int | None = None, arrays: dict | None = None, sizes: dict | None = None,
                       witnessed_only: bool = False, plain: bool = False) -> None:
    """Raise SharedMemoryRaceError for the first pair of accesses of one shared array that two
    threads of a block may make between the same two barriers, one writing (module docstring).
    ``shared`` are the body's shared-array arguments, ``names`` their source names. ``arrays`` (global
    array argument -> name, check_block_kernel picks them) are checked too and raise GlobalMemoryRaceError:
    every pair as for shared arrays, two writes of one element only with a witness in block 0
    (``Proofs.first_block_witness``); ``witnessed_only`` (CUDA), only a plain load and a plain store of one
    element (an in-place stencil ``x[i] = x[i] + x[i + 1]``) and only when the enumeration finds two
    such threads or the read's index is loaded from memory; what it cannot decide (offsets through
    runtime values, RAJAPerf's ``px[i + off * 4]``) is left alone (``plain``: a kernel without blocks,
    refused with a witness only, not for a read at a loaded index: a gather after a scatter whose indices
    may not meet). ``sizes``: bytes of the shared
    arrays whose accesses are bounds-checked. ``fn`` (a body: status pointer last) is changed: its
    failure paths are dropped."""
    arrays = arrays or {}
    _drop_failure_paths(fn)
    _thaw_arguments(fn)
    sets = ValueSets(fn)
    fold_constant_branches(fn, sets)
    intervals = Intervals(fn, sets.never_taken)
    dom = dominator_sets(fn)
    forms = Forms(fn, tids, block, intervals.unstable, dom, shared, warp_size)
    intervals.settle(forms.divergence)
    roots = set(shared) | set(arrays)
    accesses = _accesses(forms, fn, roots, kernel, set(shared))
    if witnessed_only:
        accesses = in_place(accesses, arrays)
    if not any(x.writes for x in accesses):
        return
    facts = guards(forms, fn, dom)
    for x in accesses:
        x.node = intervals.node(x.inst)
        x.facts, x.conditions = facts[x.inst.parent]
        nonnegative = _nonnegative_symbols(x.facts)
        if (x.offset is None or isinstance(x.offset, Modular)) and nonnegative and not isinstance(x.root, tuple):
            # a guard such as ``h > 0`` makes ``t + h`` exact (no wrap): bounds then apply to it
            root, offset = _pointer(forms.assuming(nonnegative), x.pointer, roots)
            if root is x.root and offset is not None and (x.offset is None or not isinstance(offset, Modular)):
                x.offset = offset
    proof = Proofs(forms, facts, sets, intervals, sizes)
    for i, a in enumerate(accesses):
        for b in accesses[i:]:
            if _apart(a.root, b.root, roots) or not (a.writes or b.writes) or (a.kind == "atomic" == b.kind) \
                    or not intervals.together(a.node, b.node):
                continue
            if witnessed_only and a.root in arrays:     # CUDA: two threads found to meet, or a read at a loaded index
                if {a.kind, b.kind} != LOAD_STORE:
                    continue
                alike = proof._alike(a, b, _symbol_ids(a) & _symbol_ids(b))
                if alike and proof.conflict(a, b) is None:
                    continue
                found = proof._witness(a, b) if alike else ()
                if found == () and alike:       # an index of the whole thread index: two threads of block 0
                    found = proof.first_block_witness(a, b) or ()
                if found:
                    raise GlobalMemoryRaceError(_message(forms, a, b, found, arrays[a.root], kernel,
                                                         thread_names, "global", plain))
                read = a if a.kind == "load" else b
                write = b if read is a else a
                if found == () and not plain and at_loaded_index(read.pointer, write.pointer):
                    raise GlobalMemoryRaceError(loaded_index_message(
                        _where(forms, read, "read", arrays[a.root], thread_names),
                        _where(forms, write, "write", arrays[a.root], thread_names), arrays[a.root], kernel))
                continue
            touched = _switched(a.root, roots) or {a.root}
            writes = touched <= set(arrays) and "load" not in (a.kind, b.kind)
            if writes and ((a.kind == "store" == b.kind and a.inst.operands[0] is b.inst.operands[0]
                            and not forms.divergence.is_varying(a.inst.operands[0]))
                           or (a is b and not forms.divergence.is_varying(a.pointer))):
                continue            # one value alike for the block (every thread storing its block's sum), or
                # one element for the block (``y[block_id()] = v``: the reverse sweep's store seeds refuse it)
            found = proof.conflict(a, b)
            if writes and found == ():
                # two writes of a global array: refused with two threads of block 0 that make them only
                # (the forms seldom follow an output's index: a row stride is a parameter)
                found = proof.first_block_witness(a, b)
            if found is not None:
                touched = sorted(touched, key=lambda r: r.index)
                array = "/".join(names[shared.index(r)] if r in shared else arrays[r] for r in touched)
                raise (SharedMemoryRaceError if set(touched) & set(shared) else GlobalMemoryRaceError)(
                    _message(forms, a, b, found, array, kernel, thread_names,
                             "shared" if set(touched) & set(shared) else "global"))


def _connective(c: Value) -> bool:
    """An ``and``, ``or`` or ``select`` of one-bit conditions."""
    return isinstance(c, Instruction) and c.opcode in ("and", "or", "select") and isinstance(c.type, IntType) \
        and c.type.bits == 1


def _nonnegative_symbols(facts) -> frozenset:
    """Ids of the symbols that the facts bound below by 0 (``-c * v + k <= 0`` with k >= 0)."""
    found = set()
    for f, kind in facts:
        if len(f.coef) == 1 and f.const >= 0:
            (atom, c), = f.coef.items()
            if atom[0] == "v" and (c < 0 or (kind == "eq" and f.const == 0)):
                found.add(atom[1])
    return frozenset(found)
