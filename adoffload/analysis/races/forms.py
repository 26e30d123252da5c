"""Integer values of a block-kernel body as functions of the thread, for the race check (shared.py).

``Forms`` gives a value's *affine form*: ``const + sum(coef * atom)`` over

* ``("t", a)``: the thread's index in its block on axis ``a`` (``tid_a % B_a``), in [0, B_a);
* ``("blk", a)``: the block's index (``tid_a / B_a``), alike for every thread of a block;
* ``("v", id)``: a value every thread of the block has alike in a barrier interval (not varying by
  the uniformity analysis, and defined on no barrier-free cycle, so at most once per interval);
* ``("k", id)``: the trip count of a barrier-free loop whose counter is ``init + step * k`` (per
  thread: two threads may be in different trips);
* ``("p", a, M, key)``: ``(t_a + u) mod M`` for a ``u`` alike for the block and ``B_a <= M``: a
  permutation of the thread's index (``(tj + t) % TILE``), in [0, M).

The first three and ``k`` are exact (no wrap-around) for the interpretations in the form's modes:
"s" (the signed value equals the form) and "u" (the unsigned value does), from nuw/nsw flags or
from ranges. ``Concrete`` evaluates values at one thread and trip counts, bit-exactly.
"""
from __future__ import annotations

from ...language import collectives
from ..uniformity import Divergence
from ...ir.core import Argument, Block, Constant, Function, Instruction, IntType, Value

BOTH = frozenset({"s", "u"})
# A barrier-free loop runs fewer than _TRIPS trips per thread (2^40 would take a thread hours), so a
# 64-bit counter starting below 2^61 with a step below 2^20 never wraps.
_TRIPS, _STEP, _START = 2 ** 40, 2 ** 20, 2 ** 61


class Lin:
    """``const + sum(coef * atom)`` (see the module docstring)."""

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

    def __eq__(self, other) -> bool:
        return isinstance(other, Lin) and self.coef == other.coef and self.const == other.const

    __hash__ = None

    def threads(self) -> dict:
        """The per-thread atoms (t, k, p) with their coefficients."""
        return {a: c for a, c in self.coef.items() if a[0] in ("t", "k", "p")}

    def uniform(self) -> "Lin":
        """The part every thread of the block has alike (blk, v atoms and the constant)."""
        return Lin({a: c for a, c in self.coef.items() if a[0] in ("blk", "v")}, self.const)

    def constant(self) -> int | None:
        return None if self.coef else self.const

    def at(self, env: dict) -> int | None:
        """The value where ``env`` gives every atom's value (None if it misses one)."""
        total = self.const
        for a, c in self.coef.items():
            if a not in env:
                return None
            total += c * env[a]
        return total


class Modular(Lin):
    """A byte offset known only modulo 2^64 (64-bit index arithmetic that may wrap): addresses wrap
    alike, so two such offsets with equal thread coefficients still differ by their thread parts
    and the constant difference of the rest; nothing else may be read from them."""

    __slots__ = ()


def const_int(v: Value) -> int | None:
    if isinstance(v, Constant) and v.kind == "scalar" and isinstance(v.value, (int, bool)):
        return int(v.value)
    return None


class Forms:
    """Affine forms of a body's integer values (module docstring); ``unstable`` are the blocks on
    barrier-free cycles, ``dom`` the dominator sets."""

    def __init__(self, fn: Function, tids: list[Argument], block: tuple[int, ...], unstable: set[Block],
                 dom: dict[Block, set[Block]], shared=(), warp_size: int | None = None):
        self.tids = {t: a for a, t in enumerate(tids)}
        self.block = block
        self.warp_size = warp_size          # lane_id() is thread_rank % warp_size (None: not known)
        self.strides = [1] * len(block)
        for a in range(len(block) - 2, -1, -1):
            self.strides[a] = self.strides[a + 1] * block[a + 1]
        self.divergence = Divergence(fn, tids, block, shared)
        self.unstable, self.dom = unstable, dom
        self.symbols: dict[int, Value] = {}
        self.counters: dict[int, Instruction] = {}
        self.nonnegative: frozenset = frozenset()     # ids of symbols known >= 0 (assuming())
        self._memo: dict[int, tuple | None] = {}

    def assuming(self, nonnegative: frozenset) -> "Forms":
        """These forms where the symbols with ids in ``nonnegative`` are known to be >= 0 (a guard
        such as ``h > 0`` dominates): their signed and unsigned values agree there."""
        child = object.__new__(Forms)
        child.__dict__.update(self.__dict__)
        child.nonnegative, child._memo = frozenset(nonnegative), {}
        return child

    def bounds(self, f: Lin) -> tuple[int, int] | None:
        """Numeric range of a form whose atoms are all per-thread (t, p, k) atoms."""
        lo = hi = f.const
        for atom, c in f.coef.items():
            if atom[0] == "t":
                top = c * (self.block[atom[1]] - 1)
            elif atom[0] == "p":
                top = c * (atom[2] - 1)
            elif atom[0] == "k":
                top = c * _TRIPS
            else:
                return None
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

    def _ranged(self, f: Lin, bits: int, modes) -> tuple[Lin, frozenset] | None:
        r = self.bounds(f)
        if r is not None and 0 <= r[0] and r[1] < 2 ** (bits - 1):
            return f, BOTH
        return (f, frozenset(modes)) if modes else None

    def _eval(self, v: Value):
        c = const_int(v)
        if c is not None:
            return Lin(const=c), BOTH if c >= 0 else frozenset({"s"})
        if isinstance(v, Argument):
            if v in self.tids:
                a = self.tids[v]
                return Lin({("blk", a): self.block[a], ("t", a): 1}), BOTH
            return self._symbol(v)
        if not isinstance(v, Instruction) or not isinstance(v.type, IntType):
            return None
        op, bits, got = v.opcode, v.type.bits, None
        if op in ("add", "sub", "mul", "shl", "or"):
            got = self._arith(v, op, bits)
        elif op in ("lshr", "ashr", "udiv", "sdiv") and "exact" in v.flags:
            got = self._exact_division(v, op)
        elif op == "and":
            got = self._masked(v)
        elif op == "phi":
            got = self._counter(v)
        elif op in ("zext", "sext", "trunc"):
            inner = self.eval(v.operands[0])
            if inner is not None:
                f, m = inner
                if op == "zext" and ("u" in m or ("nneg" in v.flags and "s" in m)):
                    got = f, BOTH
                elif op == "sext" and "s" in m:
                    got = f, m
                elif op == "trunc":
                    got = self._ranged(f, bits, {x for x, flag in (("u", "nuw"), ("s", "nsw"))
                                                 if x in m and flag in v.flags})
        elif op == "call":
            parsed = collectives.parse(getattr(v.callee, "name", ""))
            if parsed is not None and parsed[0] == "thread_rank":
                got = Lin({("t", a): s for a, s in enumerate(self.strides)}), BOTH
        if got is None and op in ("urem", "udiv", "lshr"):
            got = self._thread_split(v, op)
        return got if got is not None else self._symbol(v)

    def _symbol(self, v: Value):
        """``v`` itself as an atom, when every thread of the block has it alike in an interval."""
        if isinstance(v, Argument):
            if v in self.tids:
                return None
        elif not isinstance(v, Instruction) or self.divergence.is_varying(v) or v.parent in self.unstable:
            return None
        self.symbols[id(v)] = v
        return Lin({("v", id(v)): 1}), BOTH if id(v) in self.nonnegative else frozenset({"s"})

    def _arith(self, v: Instruction, op: str, bits: int):
        a, b = self.eval(v.operands[0]), self.eval(v.operands[1])
        if a is None or b is None:
            return None
        (fa, ma), (fb, mb) = a, b
        if op == "or" and "disjoint" not in v.flags:
            return None
        if op in ("add", "or"):
            f = fa + fb
        elif op == "sub":
            f = fa - fb
        else:
            if op == "mul" and fb.constant() is None and fa.constant() is not None:
                fa, fb, ma, mb = fb, fa, mb, ma
            k = fb.constant()
            if k is None or (op == "shl" and not 0 <= k < bits):
                return None
            f = fa.scale(k if op == "mul" else 1 << k)
            mb = BOTH if op == "shl" else mb
        flags = set(v.flags) | ({"nuw"} if op == "or" else set())
        modes = {x for x, flag in (("s", "nsw"), ("u", "nuw")) if flag in flags and x in ma and x in mb}
        ra, rb = self.bounds(fa), self.bounds(fb)
        if ra is not None and rb is not None and min(ra[0], rb[0]) >= 0 and max(ra[1], rb[1]) < 2 ** (bits - 1):
            return self._ranged(f, bits, modes)
        return (f, frozenset(modes)) if modes else None

    def _exact_division(self, v: Instruction, op: str):
        """``x >> k`` / ``x / d`` flagged exact: the form divided (every coefficient divides)."""
        inner, k = self.eval(v.operands[0]), const_int(v.operands[1])
        if inner is None or k is None or k <= 0:
            return None
        d = (1 << k) if op in ("lshr", "ashr") else k
        f, m = inner
        if any(c % d for c in f.coef.values()) or f.const % d:
            return None
        keep = m & ({"u"} if op in ("lshr", "udiv") else {"s"}) if m != BOTH else BOTH
        return (Lin({a: c // d for a, c in f.coef.items()}, f.const // d), frozenset(keep)) if keep else None

    def _counter(self, phi: Instruction):
        """A barrier-free loop's counter ``init + step * k`` (k: trips so far, per thread)."""
        if phi.parent not in self.unstable or len(phi.operands) != 2:
            return None
        back = [k for k, b in enumerate(phi.blocks) if phi.parent in self.dom.get(b, ())]
        if len(back) != 1:
            return None
        nxt, init = phi.operands[back[0]], phi.operands[1 - back[0]]
        if not (isinstance(nxt, Instruction) and nxt.opcode in ("add", "sub") and nxt.operands[0] is phi):
            return None
        step = const_int(nxt.operands[1])
        start = self.eval(init)
        if not step or start is None:
            return None
        step = -step if nxt.opcode == "sub" else step
        f, m = start
        modes = {x for x, flag in (("s", "nsw"), ("u", "nuw")) if x in m and flag in nxt.flags
                 and (x == "s" or step > 0)}
        r = self.bounds(f)
        if phi.type.bits == 64 and abs(step) < _STEP and r is not None and abs(r[0]) < _START and abs(r[1]) < _START:
            modes |= {"s"} | ({"u"} if "u" in m and step > 0 else set())
        if not modes:
            return None
        self.counters[id(phi)] = phi
        return f + Lin({("k", id(phi)): step}), frozenset(modes)

    def _masked(self, v: Instruction):
        """``x & m``, m the bits [j, k): x modulo 2^k when x is a multiple of 2^j, exact even where x wraps."""
        m = const_int(v.operands[1])
        if m is None or m <= 0:
            return None
        low = m & -m
        modulus = m + low
        f = self.modular(v.operands[0])
        if modulus & (modulus - 1) or f is None or any(c % low for c in f.coef.values()) or f.const % low:
            return None
        f = Lin({a: c % modulus for a, c in f.coef.items()}, f.const % modulus)
        th = f.threads()
        r = self.bounds(f)
        if r is not None and 0 <= r[0] and r[1] < modulus:
            return f, BOTH
        if len(th) == 1 and list(th.values()) == [1] and next(iter(th))[0] == "t" \
                and self.block[next(iter(th))[1]] <= modulus:
            axis = next(iter(th))[1]
            rest = f.uniform()
            key = (tuple(sorted(rest.coef.items(), key=str)), rest.const)
            return Lin({("p", axis, modulus, key): 1}), BOTH
        return None

    def modular(self, v: Value, depth: int = 0) -> Lin | None:
        """A form equal to ``v`` modulo 2^(its width): wrap-around ignored."""
        exact = self.eval(v)
        if exact is not None and exact[1]:
            return exact[0]
        if depth > 32 or not isinstance(v, Instruction):
            return None
        op = v.opcode
        if op == "trunc":
            return self.modular(v.operands[0], depth + 1)
        if op not in ("add", "sub", "mul", "shl") and not (op == "or" and "disjoint" in v.flags):
            return None
        a, b = self.modular(v.operands[0], depth + 1), self.modular(v.operands[1], depth + 1)
        if a is None or b is None:
            return None
        if op in ("add", "or"):
            return a + b
        if op == "sub":
            return a - b
        if op == "mul" and b.constant() is None:
            a, b = b, a
        k = b.constant()
        if k is None or (op == "shl" and not 0 <= k < v.type.bits):
            return None
        return a.scale(k if op == "mul" else 1 << k)

    def _thread_split(self, v: Instruction, op: str):
        """``tid % B`` and ``tid / B`` (``lshr``): the thread and block atoms."""
        x, k = self.eval(v.operands[0]), const_int(v.operands[1])
        if x is None or k is None or k <= 0 or "u" not in x[1]:
            return None
        f = x[0]
        if op == "lshr":
            k, op = 1 << k, "udiv"
        r = self.bounds(f)
        if r is not None and r[0] >= 0 and r[1] < k:
            return (f, x[1]) if op == "urem" else (Lin(), BOTH)
        for axis, extent in enumerate(self.block):
            if f.coef == {("blk", axis): extent, ("t", axis): 1} and f.const == 0 and extent == k:
                return (Lin({("t", axis): 1}) if op == "urem" else Lin({("blk", axis): 1})), BOTH
        return None


_LOW_BITS_CLOSED = {"and": lambda a, b: a & b, "or": lambda a, b: a | b, "xor": lambda a, b: a ^ b,
                    "add": lambda a, b: a + b, "sub": lambda a, b: a - b, "mul": lambda a, b: a * b}

_PROPAGATES_POISON = frozenset({"add", "sub", "mul", "shl", "lshr", "ashr", "udiv", "sdiv", "urem", "srem", "and",
                                "or", "xor", "zext", "sext", "trunc", "icmp"})


class Concrete:
    """Bit-exact values at one point: ``env`` gives the t and k atoms (thread, trip counts)."""

    def __init__(self, forms: Forms):
        self.forms = forms
        # (what, id(v), depth, env's items) -> result: the recursions below revisit shared operands
        # (an index built from one value along many paths: the warp layout's lane-strided offsets,
        # docs/optimize.md), exponentially often without it. Keyed by depth too (the depth cut-off
        # makes a result depth-dependent), so memoized answers are the ones recomputing would give.
        self._memo: dict = {}

    def low_bits(self, v: Value, n: int, env: dict, depth: int = 0) -> int | None:
        """``v`` modulo 2^n: the bits a thread decides even where higher bits depend on its block
        (``tid & 31``; ``(tid >> 5) & 3``, the warp of a 128-thread block, through the shift)."""
        n = min(n, v.type.bits)
        f = self.forms.modular(v)
        if f is not None:                   # atoms whose coefficients are multiples of 2^n drop out
            x = Lin({a: c for a, c in f.coef.items() if c % (1 << n)}, f.const).at(env)
            if x is not None:
                return x % (1 << n)
        if isinstance(v, Instruction) and depth <= 48:
            k = const_int(v.operands[1]) if v.opcode in ("lshr", "and") else None
            if v.opcode == "lshr" and k is not None and 0 <= k < v.type.bits:
                x = self.low_bits(v.operands[0], n + k, env, depth + 1)
                return None if x is None else (x >> k) % (1 << n)
            if v.opcode == "and" and k is not None:
                x = self.low_bits(v.operands[0], n, env, depth + 1)
                return None if x is None else x & k % (1 << n)
            if v.opcode == "trunc" or (v.opcode in ("zext", "sext") and n <= v.operands[0].type.bits):
                return self.low_bits(v.operands[0], n, env, depth + 1)
            if v.opcode in _LOW_BITS_CLOSED:
                # the low n bits of the result depend on the low n bits of the operands only (O3 writes
                # ``(127 - t) % 8`` under ``t % 2 == 0`` as ``(t & 120) ^ 120 - (t | -7)``)
                a, b = (self.low_bits(o, n, env, depth + 1) for o in v.operands)
                if a is not None and b is not None:
                    return _LOW_BITS_CLOSED[v.opcode](a, b) % (1 << n)
            if v.opcode == "shl" and const_int(v.operands[1]) is not None and 0 <= const_int(v.operands[1]) < v.type.bits:
                x = self.low_bits(v.operands[0], n, env, depth + 1)
                return None if x is None else (x << const_int(v.operands[1])) % (1 << n)
        x = self.value(v, env, depth + 1)
        return None if x is None else x % (1 << n)

    def poisoned(self, v: Value, env: dict, depth: int = 0) -> bool:
        return self._memoized("poisoned", self._poisoned, v, env, depth)

    def value(self, v: Value, env: dict, depth: int = 0) -> int | None:
        """``v``'s unsigned value (None where it depends on anything ``env`` does not give)."""
        return self._memoized("value", self._value, v, env, depth)

    def _memoized(self, what: str, compute, v: Value, env: dict, depth: int):
        if not isinstance(v, Instruction):
            return compute(v, env, depth)
        key = (what, id(v), depth, tuple(env.items()))
        if key in self._memo:
            return self._memo[key][1]
        result = compute(v, env, depth)
        if len(self._memo) > 1_000_000:
            self._memo.clear()
        self._memo[key] = (v, result)           # v kept alive: its id stays its own
        return result

    def _poisoned(self, v: Value, env: dict, depth: int = 0) -> bool:
        """Whether integer ``v`` is known to be poison at ``env``: computed from an operation whose flags
        or operands make it poison there (``mul nsw`` overflowing, a shift by the width or more;
        ``is_poison``). An address computed from poison is undefined behaviour (clang's nsw is C's
        signed overflow), so no defined run has the thread make that access; the value sets of
        races/values.py already leave such values out, and the enumeration of threads must too
        (the bank-conflict-free scan's stride, 2^25 among its values, overflows ``stride * (2t + 2)``)."""
        if depth > 48 or not isinstance(v, Instruction) or not isinstance(v.type, IntType) \
                or v.opcode in ("phi", "select") or v.opcode not in _PROPAGATES_POISON:
            return False
        if any(self.poisoned(o, env, depth + 1) for o in v.operands):
            return True
        values = [self.value(o, env, depth + 1) for o in v.operands]
        return len(values) == 2 and None not in values and is_poison(v, values, v.type.bits)

    def _value(self, v: Value, env: dict, depth: int = 0) -> int | None:
        bits = v.type.bits if isinstance(v.type, IntType) else None
        if bits is None or depth > 48:
            return None
        got = self.forms.eval(v)
        if got is not None and got[1]:
            x = got[0].at(env)
            if x is not None:
                return x % (1 << bits)
        if not isinstance(v, Instruction):
            return None
        op = v.opcode
        m = const_int(v.operands[1]) if op == "and" else None
        if m is not None:
            x = self.low_bits(v.operands[0], (m % (1 << bits)).bit_length(), env, depth + 1)
            if x is not None:
                return x & m % (1 << bits)
        if op == "select":
            c = self.value(v.operands[0], env, depth + 1)
            return None if c is None else self.value(v.operands[1 if c else 2], env, depth + 1)
        if op == "call":
            return self._lane(v, env, bits)
        values = [self.value(o, env, depth + 1) for o in v.operands]
        if any(x is None for x in values):
            return None
        return apply_instruction(v, values, bits)

    def _lane(self, call: Instruction, env: dict, bits: int) -> int | None:
        """``lane_id()`` at the thread of ``env`` (``if lane == 0: partial[warp] = v``), when the
        forms are for one warp size (the race check runs once per size a target may have)."""
        parsed = collectives.parse(getattr(call.callee, "name", ""))
        if parsed is None or parsed[0] != "lane_id" or self.forms.warp_size is None:
            return None
        rank = Lin({("t", a): s for a, s in enumerate(self.forms.strides)}).at(env)
        return None if rank is None else (rank % self.forms.warp_size) % (1 << bits)


def is_poison(v: Instruction, values: list[int], bits: int) -> bool:
    """Whether ``v`` is poison (or undefined) at operand values ``values`` (unsigned bit patterns)."""
    op, flags = v.opcode, v.flags
    if op in ("shl", "lshr", "ashr") and values[1] >= bits:
        return True
    if op in ("udiv", "sdiv", "urem", "srem") and values[1] == 0:
        return True
    if op in ("add", "sub", "mul", "shl") and ("nuw" in flags or "nsw" in flags):
        a, b = values
        if op == "shl":
            exact_u, exact_s = a << b, signed(a, bits) << b
        else:
            f = {"add": lambda x, y: x + y, "sub": lambda x, y: x - y, "mul": lambda x, y: x * y}[op]
            exact_u, exact_s = f(a, b), f(signed(a, bits), signed(b, bits))
        if "nuw" in flags and not 0 <= exact_u < 1 << bits:
            return True
        if "nsw" in flags and not -(1 << (bits - 1)) <= exact_s < 1 << (bits - 1):
            return True
    if op in ("lshr", "ashr", "udiv", "sdiv") and "exact" in flags:
        d = 1 << values[1] if op in ("lshr", "ashr") else values[1]
        return (signed(values[0], bits) if op == "sdiv" else values[0]) % d != 0
    return False


def signed(x: int, bits: int) -> int:
    return x - (1 << bits) if x >> (bits - 1) else x


_ICMP = {"eq": lambda a, b: a == b, "ne": lambda a, b: a != b, "lt": lambda a, b: a < b,
         "le": lambda a, b: a <= b, "gt": lambda a, b: a > b, "ge": lambda a, b: a >= b}


def _truncated(a: int, b: int) -> int:
    q = abs(a) // abs(b)
    return q if (a < 0) == (b < 0) else -q


def apply_instruction(v: Instruction, values: list[int], bits: int) -> int | None:
    """``v``'s unsigned result at unsigned operand values ``values``, wrapping (None: undefined or not known)."""
    op, mask = v.opcode, (1 << bits) - 1
    if op in ("zext", "trunc"):
        return values[0] & mask
    if op == "sext":
        return signed(values[0], v.operands[0].type.bits) & mask
    if op == "icmp":
        w = v.operands[0].type.bits
        a, b = values
        pred = v.predicate
        if pred[0] == "s" and pred not in ("eq", "ne"):
            a, b, pred = signed(a, w), signed(b, w), pred[1:]
        elif pred[0] == "u":
            pred = pred[1:]
        return int(_ICMP[pred](a, b))
    if len(values) != 2:
        return None
    a, b = values
    if op in ("udiv", "urem", "sdiv", "srem") and b == 0:
        return None
    if op in ("shl", "lshr", "ashr") and b >= bits:
        return None
    result = {"add": lambda: a + b, "sub": lambda: a - b, "mul": lambda: a * b, "and": lambda: a & b,
              "or": lambda: a | b, "xor": lambda: a ^ b, "shl": lambda: a << b, "lshr": lambda: a >> b,
              "ashr": lambda: signed(a, bits) >> b, "udiv": lambda: a // b, "urem": lambda: a % b,
              "sdiv": lambda: _truncated(signed(a, bits), signed(b, bits)),
              "srem": lambda: signed(a, bits) - signed(b, bits) * _truncated(signed(a, bits), signed(b, bits))
              }.get(op)
    return None if result is None else result() & mask
