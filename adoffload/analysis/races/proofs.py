"""The proofs of the race check: whether two accesses of a block's threads can touch one element between the
same barriers, decided from their offset forms, the facts that hold where they run, and the finite values
of the symbols they use (enumerated within bounds), with a witness pair of threads when they can."""
from __future__ import annotations

import itertools

from ...ir.core import Argument, Instruction, IntType, Value
from .accesses import Access
from .forms import Concrete, Forms, Lin, Modular, signed
from .intervals import Intervals
from .single_thread import one_thread
from .values import ValueSets, symbol_inputs
from .accesses import gep_terms


_MAX_BOUND_CHOICES = 4


_MAX_ENUMERATED_BYTES = 1 << 18


_MAX_POINTS = 1 << 15


_SMALL_OFFSET = 1 << 60          # Modular offsets compared as integers below this (see _witness)
_MAX_VALUE_COMBINATIONS = 256   # values of the symbols enumerated (_witness_per_value)


_MAX_VALUE_POINTS = 1 << 17     # their count times the block's threads


UNREACHED = object()        # _offset: the thread cannot reach the pointer


_MAX_PHI_DEPTH = 8          # pointer phis followed back through one another (loops end there)


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
        if not self._alike(a, b, symbol_ids(a) & symbol_ids(b)):
            # a symbol of the guards only (an enclosing loop's counter: a store in one trip, a load in
            # the next) may differ: enumerate with the addresses' symbols alike, the guards that depend
            # on others ignored (each access's bytes a superset: _guards_hold)
            offsets = [x.offset for x in (a, b)]
            if None in offsets or a.size is None or b.size is None:
                return ()
            named = {atom[1] for f in offsets for atom in f.coef if atom[0] == "v"}
            if not self._alike(a, b, named) or self._witness(a, b) is not None:
                return ()
            return None
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
        # a Modular offset (index arithmetic that may wrap) is enumerated too: its thread part is exact
        # and the uniform base cancels between the two accesses; _witness compares such offsets only
        # where wrapping cannot make two different bytes one (small offsets and shift)
        affine = x.offset is not None and all(atom[0] in ("t", "k") for atom in x.offset.threads())
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
                if not is_connective(condition):
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
        if not is_connective(c) or depth > 8:
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
            found = gep_terms(p) if isinstance(p, Instruction) and p.opcode == "getelementptr" else None
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
        if isinstance(a.offset, Modular) or isinstance(b.offset, Modular):
            # offsets known modulo 2^64: equal residues are equal bytes only while every value is small
            if max([abs(o) + abs(shift) for _, o in pa[1]] + [abs(o) for _, o in pb[1]] + [0]) >= _SMALL_OFFSET:
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
        and guards are computed from and whose value sets are finite (races/values.py: a bitonic
        sort's stride): None when every combination is proven apart, else a witness or ()."""
        inputs = []
        for x in (a, b):
            roots = [x.pointer] + [c for c, _ in x.conditions] + [self.forms.symbols[i] for i in symbol_ids(x)]
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


def symbol_ids(x: Access) -> set:
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


def is_connective(c: Value) -> bool:
    """An ``and``, ``or`` or ``select`` of one-bit conditions."""
    return isinstance(c, Instruction) and c.opcode in ("and", "or", "select") and isinstance(c.type, IntType) \
        and c.type.bits == 1
