"""Shared-memory races between the threads of a block, refused at compile time.

On a GPU, two threads of a block that touch one shared element between the same two barriers,
one of them writing, race: the order is undefined (warp-synchronous code such as
``if (tid < 32) { v[tid] += v[tid + 16]; ... }`` without ``__syncwarp`` is such a race since
Volta). The host runs a block's threads one after another between barriers (block_split.py), so
such code would run, deterministically and wrongly, and the reverse sweep of it would be wrong on
every target. ``check_shared_races`` proves every pair of conflicting accesses apart, or raises
``SharedMemoryRaceError`` naming both.

* **Intervals**: a barrier (``sync_threads``, and the block operations, which hold barriers on every
  target) ends one. Two accesses may run in one interval when one barrier (or the entry) reaches
  both without passing another barrier; accesses of different intervals never conflict.
* **Pairs**: in one interval, every two accesses of the same shared array (an access with itself
  included) of which one writes; two atomics do not race.
* **Proofs** on byte offsets that are affine in the thread's index in the block (one atom per
  axis, ``tid % B``) and in values every thread of the block has alike in the interval (kernel
  parameters, ``tid // B``, uniform loop counters of loops that hold a barrier), with nothing
  wrapping (nuw/nsw flags, or ranges): the threads an access runs on follow from the branches that
  dominate it (``t < s``, ``t == 0``, ``lane == 0``); (1) equal thread coefficients and a constant
  difference: the accesses of different threads lie apart (mixed-radix gap), or, when the thread
  sets are constant, no byte one thread touches is touched by another (enumerated over the block);
  (2) the byte ranges of the two accesses over all their threads are disjoint, with symbolic
  bounds (``if (t < s) s[t] += s[t + s]``: [0, s) and [s, 2s) elements). Anything else is refused.

It relies on the assumption the uniformity analysis makes (foreign_cuda/uniformity.py): values
loaded at one address by the whole block are alike, which holds when this check passes.
"""
from __future__ import annotations

import itertools
import re

from .. import collectives
from ..errors import SharedMemoryRaceError
from ..foreign_cuda.uniformity import Divergence
from ..ir import format_instruction
from ..ir.core import (Argument, ArrayType, Block, Constant, FloatType, Function, Instruction, IntType,
                       PointerType, StructType, Value, VectorType)

# Calls after which every thread of the block has finished what it did before (they hold barriers).
BOUNDARIES = frozenset({"sync_threads", "block_sum", "block_max", "block_broadcast", "block_first_thread"})
_NO_MEMORY = ("llvm.lifetime.", "llvm.assume", "llvm.dbg.", "llvm.experimental.noalias", "llvm.invariant.")
_MAX_BOUND_CHOICES = 4
_MAX_ENUMERATED_BYTES = 1 << 16


# --- affine forms --------------------------------------------------------------------------------

class Lin:
    """``const + sum(coef * atom)``; atoms are ("t", axis), ("blk", axis) or ("v", id of a value)."""

    __slots__ = ("coef", "const")

    def __init__(self, coef=None, const: int = 0):
        self.coef = {k: c for k, c in (coef or {}).items() if c}
        self.const = const

    def __add__(self, other: "Lin") -> "Lin":
        coef = dict(self.coef)
        for k, c in other.coef.items():
            coef[k] = coef.get(k, 0) + c
        return Lin(coef, self.const + other.const)

    def scale(self, k: int) -> "Lin":
        return Lin({a: c * k for a, c in self.coef.items()}, self.const * k)

    def __sub__(self, other: "Lin") -> "Lin":
        return self + other.scale(-1)

    def threads(self) -> dict:
        return {a: c for a, c in self.coef.items() if a[0] == "t"}

    def uniform(self) -> "Lin":
        """The part every thread of the block has alike (symbols and the constant)."""
        return Lin({a: c for a, c in self.coef.items() if a[0] != "t"}, self.const)

    def constant(self) -> int | None:
        return None if self.coef else self.const

    def at(self, thread: tuple[int, ...]) -> int:
        """Value at ``thread`` (only for forms whose atoms are all thread atoms)."""
        return self.const + sum(c * thread[a[1]] for a, c in self.coef.items())


def _const(v: Value) -> int | None:
    if isinstance(v, Constant) and v.kind == "scalar" and isinstance(v.value, int) and not isinstance(v.value, bool):
        return v.value
    if isinstance(v, Constant) and v.kind == "scalar" and isinstance(v.value, bool):
        return int(v.value)
    return None


def _size(t) -> int | None:
    if isinstance(t, IntType):
        return max(1, (t.bits + 7) // 8)
    if isinstance(t, FloatType):
        return t.bits // 8
    if isinstance(t, PointerType):
        return 8
    if isinstance(t, (VectorType, ArrayType)):
        inner = _size(t.element)
        return None if inner is None else inner * t.count
    return None


class Forms:
    """Affine forms of a body's integer values (see the module docstring), with the interpretation
    each is exact for: "s" (signed value), "u" (unsigned value)."""

    def __init__(self, fn: Function, tids: list[Argument], block: tuple[int, ...], unstable: set):
        self.tids = {t: a for a, t in enumerate(tids)}
        self.block = block
        self.strides = [1] * len(block)
        for a in range(len(block) - 2, -1, -1):
            self.strides[a] = self.strides[a + 1] * block[a + 1]
        self.divergence = Divergence(fn, tids, block)
        self.unstable = unstable
        self.symbols: dict[int, Value] = {}
        self._memo: dict[int, tuple | None] = {}

    def bounds(self, f: Lin) -> tuple[int, int] | None:
        """Numeric range of a form whose atoms are all thread atoms."""
        lo = hi = f.const
        for (kind, axis), c in f.coef.items():
            if kind != "t":
                return None
            top = c * (self.block[axis] - 1)
            lo, hi = lo + min(0, top), hi + max(0, top)
        return lo, hi

    def form(self, v: Value, want: str = "s") -> Lin | None:
        """``v``'s form, exact for interpretation ``want`` ("s" or "u"), or None."""
        got = self.eval(v)
        if got is None or want not in got[1]:
            return None
        return got[0]

    def eval(self, v: Value) -> tuple[Lin, frozenset] | None:
        key = id(v)
        if key not in self._memo:
            self._memo[key] = None          # cycles through phis end here
            self._memo[key] = self._eval(v)
        return self._memo[key]

    def _ranged(self, f: Lin, bits: int, modes: set) -> tuple[Lin, frozenset]:
        r = self.bounds(f)
        if r is not None and 0 <= r[0] and r[1] < 2 ** (bits - 1):
            modes = {"s", "u"}
        return f, frozenset(modes)

    def _eval(self, v: Value):
        c = _const(v)
        if c is not None:
            return Lin(const=c), frozenset({"s", "u"} if c >= 0 else {"s"})
        if isinstance(v, Argument):
            if v in self.tids:
                a = self.tids[v]
                return Lin({("blk", a): self.block[a], ("t", a): 1}), frozenset({"s", "u"})
            return self._symbol(v)
        if not isinstance(v, Instruction) or not isinstance(v.type, IntType):
            return None
        op, bits = v.opcode, v.type.bits
        if op in ("add", "sub", "mul", "shl", "or"):
            got = self._arith(v, op, bits)
            if got is not None:
                return got
        elif op in ("and", "urem", "udiv", "lshr"):
            got = self._thread_split(v, op)
            if got is not None:
                return got
        elif op in ("zext", "sext", "trunc"):
            inner = self.eval(v.operands[0])
            if inner is not None:
                f, m = inner
                if op == "zext" and ("u" in m or ("nneg" in v.flags and "s" in m)):
                    return f, frozenset({"s", "u"})
                if op == "sext" and "s" in m:
                    return f, m
                if op == "trunc":
                    keep = {x for x, flag in (("u", "nuw"), ("s", "nsw")) if x in m and flag in v.flags}
                    if keep or self.bounds(f) is not None:
                        return self._ranged(f, bits, keep)
        elif op == "call":
            parsed = collectives.parse(getattr(v.callee, "name", ""))
            if parsed is not None and parsed[0] == "thread_rank":
                return Lin({("t", a): s for a, s in enumerate(self.strides)}), frozenset({"s", "u"})
        return self._symbol(v)

    def _symbol(self, v: Value):
        """``v`` itself as an atom, when every thread of the block has it alike in an interval."""
        if isinstance(v, Argument):
            if v in self.tids:
                return None
        elif not isinstance(v, Instruction) or self.divergence.is_varying(v) or v.parent in self.unstable:
            return None
        self.symbols[id(v)] = v
        return Lin({("v", id(v)): 1}), frozenset({"s"})

    def _arith(self, v: Instruction, op: str, bits: int):
        a, b = self.eval(v.operands[0]), self.eval(v.operands[1])
        if a is None or b is None:
            return None
        (fa, ma), (fb, mb) = a, b
        if op == "add" or op == "or":
            if op == "or" and "disjoint" not in v.flags:
                return None
            f = fa + fb
        elif op == "sub":
            f = fa - fb
        else:
            k = fb.constant() if op == "mul" else fb.constant()
            if op == "mul" and k is None and fa.constant() is not None:
                fa, fb, ma, mb, k = fb, fa, mb, ma, fa.constant()
            if k is None or (op == "shl" and not 0 <= k < bits):
                return None
            f = fa.scale(k if op == "mul" else 1 << k)
            mb = frozenset({"s", "u"}) if op == "shl" else mb
        flags = set(v.flags) | ({"nuw"} if op == "or" else set())
        modes = {x for x, flag in (("s", "nsw"), ("u", "nuw")) if flag in flags and x in ma and x in mb}
        ra, rb = self.bounds(fa), self.bounds(fb)
        if ra is not None and rb is not None and min(ra[0], rb[0]) >= 0 and max(ra[1], rb[1]) < 2 ** (bits - 1):
            return self._ranged(f, bits, modes)
        return (f, frozenset(modes)) if modes else None

    def _thread_split(self, v: Instruction, op: str):
        """``tid % B`` (``and tid, B-1``) and ``tid / B`` (``lshr``): the thread and block atoms."""
        x, k = self.eval(v.operands[0]), _const(v.operands[1])
        if x is None or k is None or k <= 0 or "u" not in x[1]:
            return None
        f = x[0]
        if op == "and":
            if k & (k + 1):
                return None
            k, op = k + 1, "urem"
        elif op == "lshr":
            k, op = 1 << k, "udiv"
        r = self.bounds(f)
        if r is not None and r[0] >= 0 and r[1] < k:
            return (f, x[1]) if op == "urem" else (Lin(), frozenset({"s", "u"}))
        for axis, extent in enumerate(self.block):
            if f.coef == {("blk", axis): extent, ("t", axis): 1} and f.const == 0 and extent == k:
                if op == "urem":
                    return Lin({("t", axis): 1}), frozenset({"s", "u"})
                return Lin({("blk", axis): 1}), frozenset({"s", "u"})
        return None


# --- accesses, intervals and guards ---------------------------------------------------------------

class Access:
    """One memory access of a shared array: its byte offset form (None: unknown), size, kind."""

    def __init__(self, inst: Instruction, root: Argument, offset: Lin | None, size: int | None, kind: str):
        self.inst, self.root, self.offset, self.size, self.kind = inst, root, offset, size, kind
        self.starts: set = set()
        self.facts: list[tuple[Lin, str]] = []
        self.threads: list[tuple[int, ...]] | None = None

    @property
    def writes(self) -> bool:
        return self.kind in ("store", "atomic", "call")


def _boundary(inst: Instruction) -> bool:
    if inst.opcode != "call":
        return False
    parsed = collectives.parse(getattr(inst.callee, "name", ""))
    return parsed is not None and parsed[0] in BOUNDARIES


def _pointer(forms: Forms, p: Value, roots: set, depth: int = 0):
    """(shared root, byte offset form or None) of pointer ``p``; (None, None) when it is not into shared memory."""
    if p in roots:
        return p, Lin()
    if depth > 64 or not isinstance(p, Instruction):
        return None, None
    if p.opcode == "getelementptr":
        root, base = _pointer(forms, p.operands[0], roots, depth + 1)
        if root is None or base is None:
            return root, None
        offset = _gep_offset(forms, p)
        return root, (None if offset is None else base + offset)
    if p.opcode in ("phi", "select"):
        found = {_pointer(forms, o, roots, depth + 1)[0] for o in (p.operands[1:] if p.opcode == "select"
                                                                  else p.operands)} - {None}
        if found:
            return next(iter(found)) if len(found) == 1 else tuple(found), None
    return None, None


def _gep_offset(forms: Forms, gep: Instruction) -> Lin | None:
    t, total = gep.element_type, Lin()
    for k, index in enumerate(gep.operands[1:]):
        if k > 0:
            if isinstance(t, StructType):
                return None
            if not isinstance(t, (ArrayType, VectorType)):
                return None
            t = t.element
        size = _size(t)
        f = forms.form(index, "s")
        if size is None or f is None:
            return None
        total = total + f.scale(size)
    return total


def _accesses(forms: Forms, fn: Function, roots: set) -> list[Access]:
    found = []

    def add(inst, pointer, size, kind):
        root, offset = _pointer(forms, pointer, roots)
        if root is None:
            return
        for r in (root if isinstance(root, tuple) else (root,)):
            found.append(Access(inst, r, offset if not isinstance(root, tuple) else None, size, kind))

    for inst in fn.instructions():
        op = inst.opcode
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
            length = _const(inst.operands[2]) if name.startswith(("llvm.memset", "llvm.memcpy", "llvm.memmove")) \
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
    reached, todo = set(), [fn.entry]
    while todo:
        b = todo.pop()
        if b not in reached:
            reached.add(b)
            todo.extend(b.successors)
    fn.blocks = [b for b in fn.blocks if b in reached]
    for b in fn.blocks:
        for phi in b.phis:
            keep = [k for k, p in enumerate(phi.blocks) if p in reached and b in p.successors]
            phi.operands = [phi.operands[k] for k in keep]
            phi.blocks = [phi.blocks[k] for k in keep]


def _dominators(fn: Function) -> dict[Block, set[Block]]:
    preds = fn.predecessors()
    everything = set(fn.blocks)
    dom = {b: set(everything) for b in fn.blocks}
    dom[fn.entry] = {fn.entry}
    changed = True
    while changed:
        changed = False
        for b in fn.blocks[1:]:
            incoming = [dom[p] for p in preds[b]]
            new = (set.intersection(*incoming) if incoming else set()) | {b}
            if new != dom[b]:
                dom[b], changed = new, True
    return dom


def _intervals(fn: Function) -> tuple[dict, set[Block]]:
    """Per (block, piece), the interval starts that reach it without passing a barrier (a piece is
    the code of a block between two of its barriers); and the blocks on barrier-free cycles."""
    pieces = {b: sum(map(_boundary, b.instructions)) for b in fn.blocks}
    starts: dict[tuple, set] = {}
    for start in [(fn.entry, 0)] + [(b, k) for b in fn.blocks for k in range(1, pieces[b] + 1)]:
        todo = [start]
        while todo:
            node = todo.pop()
            if start in starts.setdefault(node, set()):
                continue
            starts[node].add(start)
            b, k = node
            if k == pieces[b]:
                todo.extend((s, 0) for s in b.successors)
    free = [b for b in fn.blocks if not pieces[b]]
    return starts, _on_cycles(free)


def _on_cycles(blocks: list[Block]) -> set[Block]:
    """The blocks of ``blocks`` that lie on a cycle of ``blocks``."""
    inside = set(blocks)
    reach: dict[Block, set[Block]] = {}
    for b in blocks:
        seen, todo = set(), [s for s in b.successors if s in inside]
        while todo:
            x = todo.pop()
            if x not in seen:
                seen.add(x)
                todo.extend(s for s in x.successors if s in inside)
        reach[b] = seen
    return {b for b in blocks if b in reach[b]}


def _facts(forms: Forms, fn: Function, dom: dict) -> dict[Block, list[tuple[Lin, str]]]:
    """Per block, constraints (form, "le" | "eq": form <= 0 or == 0) of the branches dominating it."""
    preds = fn.predecessors()
    own: dict[Block, list] = {}
    for b in fn.blocks:
        if len(preds[b]) != 1:
            continue
        term = preds[b][0].terminator
        if term is None or term.opcode != "br" or len(term.blocks) != 2 or term.blocks[0] is term.blocks[1]:
            continue
        own[b] = _condition(forms, term.operands[0], b is term.blocks[0])
    return {b: [f for d in dom[b] for f in own.get(d, ())] for b in fn.blocks}


_SWAP = {"lt": "gt", "le": "ge", "gt": "lt", "ge": "le", "eq": "eq", "ne": "ne"}
_NEGATE = {"lt": "ge", "le": "gt", "gt": "le", "ge": "lt", "eq": "ne", "ne": "eq"}


def _condition(forms: Forms, c: Value, holds: bool, depth: int = 0) -> list[tuple[Lin, str]]:
    if not isinstance(c, Instruction) or depth > 16:
        return []
    if c.opcode == "xor" and _const(c.operands[1]) == 1:
        return _condition(forms, c.operands[0], not holds, depth + 1)
    both = (c.opcode == "and" and holds) or (c.opcode == "or" and not holds)
    if c.opcode == "select":
        t, e = _const(c.operands[1]), _const(c.operands[2])
        both = (e == 0 and holds) or (t == 1 and not holds)
        if both:
            other = c.operands[1] if e == 0 else c.operands[2]
            return _condition(forms, c.operands[0], holds, depth + 1) + _condition(forms, other, holds, depth + 1)
        return []
    if both:
        return _condition(forms, c.operands[0], holds, depth + 1) + _condition(forms, c.operands[1], holds, depth + 1)
    if c.opcode != "icmp":
        return []
    pred = c.predicate
    kind = pred[0] if pred[0] in "su" and pred not in ("eq", "ne") else ""
    rel = pred[1:] if kind else pred
    if "samesign" in c.flags and kind == "u":
        kind = "su"
    for want in (kind or "su"):
        x, y = forms.form(c.operands[0], want), forms.form(c.operands[1], want)
        if x is not None and y is not None:
            break
    else:
        return []
    rel = rel if holds else _NEGATE[rel]
    if rel in ("gt", "ge"):
        x, y, rel = y, x, _SWAP[rel]
    if rel == "lt":
        return [(x - y + Lin(const=1), "le")]
    if rel == "le":
        return [(x - y, "le")]
    if rel == "eq":
        return [(x - y, "eq")]
    return []


# --- the proofs -----------------------------------------------------------------------------------

def _threads(forms: Forms, facts: list) -> list[tuple[int, ...]]:
    """The threads of a block that can satisfy the constant facts (the others are ignored: a superset)."""
    ranges = [range(e) for e in forms.block]
    usable = [(f, k) for f, k in facts if all(a[0] == "t" for a in f.coef)]
    return [t for t in itertools.product(*ranges)
            if all((f.at(t) <= 0) if k == "le" else (f.at(t) == 0) for f, k in usable)]


def _gap(forms: Forms, coef: dict) -> int:
    """The least |sum coef_a * (t1_a - t2_a)| over two different threads (mixed radix; 0 if not injective)."""
    parts = sorted((abs(coef.get(("t", a), 0)), e) for a, e in enumerate(forms.block) if e > 1)
    gap, below = None, 0
    for c, extent in parts:
        gap = c - below if gap is None else min(gap, c - below)
        below += c * (extent - 1)
    return 10**18 if gap is None else max(gap, 0)


def _bound_choices(forms: Forms, access: Access, axis: int):
    """Valid (lower, upper) candidate forms of thread atom ``axis`` where ``access`` runs."""
    lows, highs = [Lin()], [Lin(const=forms.block[axis] - 1)]
    if access.threads:
        lows.append(Lin(const=min(t[axis] for t in access.threads)))
        highs.append(Lin(const=max(t[axis] for t in access.threads)))
    for f, kind in access.facts:
        th = f.threads()
        if list(th) != [("t", axis)] or th[("t", axis)] not in (1, -1):
            continue
        rest = f - Lin(th)
        if th[("t", axis)] == 1:
            highs.append(rest.scale(-1))
            if kind == "eq":
                lows.append(rest.scale(-1))
        else:
            lows.append(rest)
            if kind == "eq":
                highs.append(rest)
    return lows[:_MAX_BOUND_CHOICES], highs[:_MAX_BOUND_CHOICES]


def _spans(forms: Forms, access: Access):
    """Candidate [lo, hi) byte ranges of ``access`` over all its threads (forms in the symbols)."""
    th = access.offset.threads()
    axes = sorted(a for _, a in th)
    choices = [_bound_choices(forms, access, a) for a in axes]
    for picks in itertools.product(*[itertools.product(lo, hi) for lo, hi in choices]):
        lo = hi = access.offset.uniform()
        for a, (low, high) in zip(axes, picks):
            c = th[("t", a)]
            lo = lo + (low if c > 0 else high).scale(c)
            hi = hi + (high if c > 0 else low).scale(c)
        yield lo, hi + Lin(const=access.size)


def _disjoint_spans(forms: Forms, a: Access, b: Access) -> bool:
    spans_b = list(_spans(forms, b))
    for lo_a, hi_a in _spans(forms, a):
        for lo_b, hi_b in spans_b:
            for gap in (hi_a - lo_b, hi_b - lo_a):
                if gap.constant() is not None and gap.constant() <= 0:
                    return True
    return False


def _witness(forms: Forms, a: Access, b: Access, shift: int):
    """Two different threads (t1 of ``a``, t2 of ``b``) touching a common byte, or None; ``a``'s
    offsets are shifted by ``shift`` (the difference of the uniform parts)."""
    holders: dict[int, list] = {}
    ta, tb = Lin(a.offset.threads()), Lin(b.offset.threads())
    for t in a.threads:
        start = ta.at(t) + shift
        for byte in range(start, start + a.size):
            holders.setdefault(byte, []).append(t)
    for t in b.threads:
        start = tb.at(t)
        for byte in range(start, start + b.size):
            for owner in holders.get(byte, ()):
                if owner != t:
                    return owner, t
    return None


def _conflict(forms: Forms, a: Access, b: Access):
    """None when ``a`` and ``b`` cannot touch one byte from two threads; else a witness (t1, t2) or ()."""
    single = a.threads is not None and len(a.threads) == 1 and a.threads == b.threads
    if single or not a.threads or not b.threads:
        return None
    if a.offset is None or b.offset is None or a.size is None or b.size is None:
        return ()
    diff = (a.offset - b.offset).uniform().constant()
    if diff is not None:
        if a.offset.threads() == b.offset.threads() and \
                _gap(forms, a.offset.threads()) >= max(b.size - diff, a.size + diff):
            return None
        if len(a.threads) * a.size + len(b.threads) * b.size <= _MAX_ENUMERATED_BYTES:
            found = _witness(forms, a, b, diff)
            if found is None:
                return None
            return None if _disjoint_spans(forms, a, b) else found
    return None if _disjoint_spans(forms, a, b) else ()


# --- the check ------------------------------------------------------------------------------------

def check_shared_races(fn: Function, tids: list[Argument], block: tuple[int, ...], shared: list[Argument],
                       names: list[str], kernel: str, thread_names: list[str] | None = None) -> None:
    """Raise SharedMemoryRaceError for the first pair of accesses of one shared array that two
    threads of a block may make between the same two barriers, one writing (module docstring).
    ``shared`` are the body's shared-array arguments, ``names`` their source names. ``fn`` (a body:
    status pointer last) is changed: its failure paths are dropped."""
    _drop_failure_paths(fn)
    starts, unstable = _intervals(fn)
    forms = Forms(fn, tids, block, unstable)
    accesses = _accesses(forms, fn, set(shared))
    if not any(x.writes for x in accesses):
        return
    facts = _facts(forms, fn, _dominators(fn))
    for x in accesses:
        piece = sum(map(_boundary, x.inst.parent.instructions[:x.inst.parent.instructions.index(x.inst)]))
        x.starts = starts.get((x.inst.parent, piece), set())
        x.facts = facts[x.inst.parent]
        x.threads = _threads(forms, x.facts)
    for i, a in enumerate(accesses):
        for b in accesses[i:]:
            if a.root is not b.root or not (a.writes or b.writes) or not (a.starts & b.starts) \
                    or (a.kind == "atomic" and b.kind == "atomic"):
                continue
            found = _conflict(forms, a, b)
            if found is not None:
                raise SharedMemoryRaceError(_message(forms, a, b, found, names[shared.index(a.root)], kernel,
                                                     thread_names))


_VERB = {"load": "read", "store": "write", "atomic": "atomic update", "call": "call"}


def _message(forms: Forms, a: Access, b: Access, witness, array: str, kernel: str, thread_names) -> str:
    def where(x: Access) -> str:
        text = f"the {_VERB[x.kind]} of {array}{_index(forms, x, thread_names)}"
        if x.inst.location is not None:
            return f"{text} at {x.inst.location}"
        return f"{text} (`{format_instruction(x.inst).strip()}` in block %{x.inst.parent.name})"
    same = a.inst is b.inst
    pair = f"{where(a)}, run by two threads," if same else f"{where(a)} and {where(b)}"
    who = ""
    if witness:
        t1, t2 = (_thread(forms, t, thread_names) for t in witness)
        who = f" (thread {t1} and thread {t2} touch one element)"
    return (f"kernel '{kernel}': shared-memory race on '{array}': {pair} may touch the same element from two "
            f"threads of a block between the same two barriers{who}. On a GPU their order is undefined "
            f"(warp-synchronous code without __syncwarp is a data race since Volta), and adoffload runs "
            f"a block's threads one after another between barriers, so the result would be silently wrong. "
            f"Put a barrier between them (__syncthreads() / ado.sync_threads(); __syncwarp() where supported), "
            f"or give each thread its own elements")


def _index(forms: Forms, x: Access, thread_names) -> str:
    if x.offset is None or x.size is None:
        return "[?]"
    element = x.size
    f = x.offset
    if element and all(c % element == 0 for c in f.coef.values()) and f.const % element == 0:
        f = Lin({k: c // element for k, c in f.coef.items()}, f.const // element)
        unit = ""
    else:
        unit = " (bytes)"
    terms = []
    for atom, c in sorted(f.coef.items(), key=lambda kv: str(kv[0])):
        if atom[0] == "t":
            name = (thread_names or [])[atom[1]] if thread_names else f"thread_id[{atom[1]}]"
        elif atom[0] == "blk":
            name = f"block_id[{atom[1]}]"
        else:
            v = forms.symbols.get(atom[1])
            name = f"%{getattr(v, 'name', '?')}"
        terms.append(name if c == 1 else f"{c}*{name}")
    if f.const or not terms:
        terms.append(str(f.const))
    return "[" + " + ".join(terms).replace("+ -", "- ") + "]" + unit


def _thread(forms: Forms, t: tuple[int, ...], thread_names) -> str:
    if len(t) == 1:
        return str(t[0])
    return "(" + ", ".join(map(str, t)) + ")"


def shared_array_name(name: str) -> str:
    """A source-like name for a CUDA ``__shared__`` global (``_ZZ4kernPfE5sdata`` -> ``sdata``)."""
    match = re.search(r"E(\d+)(\w+)$", name)
    if match and int(match.group(1)) == len(match.group(2)):
        return match.group(2)
    return name


def check_block_kernel(kernel, thread_names: list[str] | None = None) -> None:
    """``check_shared_races`` on a block kernel's body (a Kernel with ``block`` and ``shared``):
    the first ``grid_rank`` arguments are the thread ids, the shared arrays come before the status."""
    if not kernel.shared:
        return
    from .. import ir
    module = ir.import_module(kernel.module_text())
    fn = module.functions[kernel.body_name]
    rank = kernel.signature.grid_rank
    shared = fn.args[-1 - len(kernel.shared):-1]
    names = [shared_array_name(s.name) for s in kernel.shared]
    check_shared_races(fn, fn.args[:rank], tuple(kernel.block), shared, names, kernel.name, thread_names)
