"""Static trip bounds: how many times a loop's header can run per entry into the loop.

A bound lets the reverse sweep keep its tape in a fixed local array (tape.py) instead of a
launcher-sized dynamic one. The counter is an integer phi ``i = phi [start, outside],
[step(i), latch]`` where ``step`` is one instruction with a constant operand (``add``, ``sub``,
``mul``, ``shl``, ``lshr``, ``ashr``, ``udiv``, ``sdiv``), tested by a ``br`` on an ``icmp`` in a
block that dominates the latch (so the test runs every iteration). Three ways to a bound, each
valid for every execution without undefined behaviour:

* **simulated**: a constant start and a test against constants: run the recurrence (wrapping
  at the counter's width, as the machine does) until the test leaves; all tests of a counter
  run in step (the first to leave ends the loop), and an equality exit of an ``add`` counter
  that first holds beyond the simulation's limit (rustc -O0's ``i == -1`` overflow check) is
  solved in closed form and left out, so it does not cost 2^20 steps per loop.
* **settling**: halving and shifting steps (``h >>= 1``, ``h //= 2``, and ``s <<= 1`` or
  ``s *= 2`` as they wrap) bring *every* start value into a small set of fixed points
  (``{0}``, or ``{0, -1}`` for ``ashr``) within ``N`` steps (``N <= width``). If the test leaves
  at every fixed point, whatever the other operand of the compare, the loop runs at most
  ``N + 1`` tests, whatever the start (``h = n // 2`` with ``n`` unknown).
* **no-wrap growth**: ``mul``/``shl`` with ``nsw`` or ``nuw`` from a nonzero constant start
  (``for (int s = 1; s < n; s *= 2)``): the counter's magnitude at least doubles per step, so
  after ``width`` steps it has overflowed, which makes it poison, and the next test branches on
  poison (undefined behaviour). A wrapping doubling against an unknown limit gets no bound: it
  really loops forever when the limit is above the largest power of two.
"""
from __future__ import annotations

from ..ir.core import Constant, Instruction, Value

MAX_SIMULATED_TRIPS = 1 << 20
STEP_OPCODES = ("add", "sub", "mul", "shl", "lshr", "ashr", "udiv", "sdiv")
_COMMUTATIVE = ("add", "mul")
_CASTS = ("zext", "sext", "trunc")

COMPARE = {
    "eq": lambda a, b: a == b, "ne": lambda a, b: a != b,
    "slt": lambda a, b: a < b, "sle": lambda a, b: a <= b, "sgt": lambda a, b: a > b, "sge": lambda a, b: a >= b,
    "ult": lambda a, b: a < b, "ule": lambda a, b: a <= b, "ugt": lambda a, b: a > b, "uge": lambda a, b: a >= b,
}


def int_value(v: Value) -> int | None:
    return int(v.value) if isinstance(v, Constant) and v.kind == "scalar" and v.type.is_int else None


def signed(x: int, bits: int) -> int:
    x &= (1 << bits) - 1
    return x - (1 << bits) if x >> (bits - 1) else x


def apply_step(opcode: str, x: int, c: int, bits: int) -> int | None:
    """``x op c`` on ``bits``-wide integers (bit patterns in, bit pattern out; wrapping as the
    machine does), or None where LLVM gives poison or undefined behaviour for every ``x``."""
    mask = (1 << bits) - 1
    x, c = x & mask, c & mask
    if opcode == "add":
        return (x + c) & mask
    if opcode == "sub":
        return (x - c) & mask
    if opcode == "mul":
        return (x * c) & mask
    if opcode in ("shl", "lshr", "ashr") and c >= bits:
        return None
    if opcode == "shl":
        return (x << c) & mask
    if opcode == "lshr":
        return x >> c
    if opcode == "ashr":
        return (signed(x, bits) >> c) & mask
    if opcode == "udiv":
        return x // c if c else None
    if opcode == "sdiv":
        a, b = signed(x, bits), signed(c, bits)
        if b == 0 or (b == -1 and a == -(1 << (bits - 1))):
            return None
        q = abs(a) // abs(b)
        return (q if (a < 0) == (b < 0) else -q) & mask
    raise ValueError(opcode)


def settling(opcode: str, c: int, bits: int) -> tuple[int, frozenset[int]] | None:
    """``(N, F)``: from any start, ``N`` steps of ``x op c`` reach the fixed points ``F`` (bit
    patterns); None for steps that do not settle (``add``, ``mul`` by an odd number, ...)."""
    c &= (1 << bits) - 1
    if opcode in ("lshr", "shl") and 1 <= c < bits:
        return -(-bits // c), frozenset({0})
    if opcode == "ashr" and 1 <= c < bits:
        return -(-(bits - 1) // c), frozenset({0, (1 << bits) - 1})
    if opcode == "udiv" and c >= 2:
        return -(-bits // (c.bit_length() - 1)), frozenset({0})
    if opcode == "sdiv" and abs(signed(c, bits)) >= 2:
        # |x / c| <= |x| / 2**k for k = floor(log2 |c|), and |x| <= 2**(bits-1)
        return -(-bits // (abs(signed(c, bits)).bit_length() - 1)), frozenset({0})
    if opcode == "mul" and c and c % 2 == 0:
        twos = (c & -c).bit_length() - 1               # each step appends this many zero bits
        return -(-bits // twos), frozenset({0})
    return None


def _grows_without_wrapping(step: Instruction, c: int, bits: int) -> bool:
    """A step that at least doubles the counter's magnitude and whose overflow is poison."""
    if not {"nsw", "nuw"} & step.flags:
        return False
    if step.opcode == "shl":
        return 1 <= c < bits
    return step.opcode == "mul" and abs(signed(c, bits)) >= 2 and (c & ((1 << bits) - 1)) >= 2


class _Counter:
    """One candidate counter phi of a loop: its step and the values its tests read. ``step`` None:
    the latch gives the constant ``amount`` (``phi i1 [true, %entry], [false, %latch]``, which GVN
    makes of a loop of one trip)."""

    def __init__(self, phi: Instruction, step: Instruction | None, amount: int, start: int | None):
        self.phi, self.step, self.amount, self.start = phi, step, amount, start
        self.bits = phi.type.bits

    def next(self, x: int) -> int | None:
        if self.step is None:
            return self.amount & ((1 << self.bits) - 1)
        return apply_step(self.step.opcode, x, self.amount, self.bits)

    def reads(self, v: Value) -> bool:
        """Whether ``v`` is the counter, its next value, or a cast of either."""
        while isinstance(v, Instruction) and v.opcode in _CASTS:
            v = v.operands[0]
        return v is self.phi or (self.step is not None and v is self.step)

    def value(self, v: Value, x: int) -> int | None:
        """``v``'s bit pattern when the counter holds ``x`` (None: not a function of it)."""
        if v is self.phi:
            return x
        if self.step is not None and v is self.step:
            return self.next(x)
        if isinstance(v, Instruction) and v.opcode in _CASTS:
            inner = self.value(v.operands[0], x)
            if inner is None:
                return None
            src, dst = v.operands[0].type.bits, v.type.bits
            if v.opcode == "sext":
                return signed(inner, src) & ((1 << dst) - 1)
            return inner & ((1 << dst) - 1)
        return int_value(v)


def counters(loop) -> list[_Counter]:
    """The loop header's integer phis updated by one supported step (``loop`` has one latch)."""
    found = []
    for phi in loop.header.phis:
        if not phi.type.is_int or len(phi.operands) != 2:
            continue
        inside = [k for k, b in enumerate(phi.blocks) if b in loop.blocks]
        if len(inside) != 1:
            continue
        step = phi.operands[inside[0]]
        start = int_value(phi.operands[1 - inside[0]])
        if int_value(step) is not None:             # the latch sets a constant
            found.append(_Counter(phi, None, int_value(step), start))
            continue
        if not isinstance(step, Instruction) or step.opcode not in STEP_OPCODES or len(step.operands) != 2:
            continue
        if step.operands[0] is phi:
            amount = int_value(step.operands[1])
        elif step.opcode in _COMMUTATIVE and step.operands[1] is phi:
            amount = int_value(step.operands[0])
        else:
            continue
        if amount is None or (step.opcode in ("add", "sub") and amount == 0):
            continue
        found.append(_Counter(phi, step, amount, start))
    return found


class _Truth:
    """A branch on an ``i1`` value itself, as the test ``value == true``."""
    predicate = "eq"

    def __init__(self, value: Instruction):
        self.operands = (value, Constant(value.type, 1))


def _exit_tests(loop, dom, latch):
    """``(icmp, stays_when_true)`` of each two-way exit branch that runs every iteration."""
    for block in sorted(loop.blocks, key=dom.order.__getitem__):    # a stable choice among exits
        term = block.terminator
        if term is None or term.opcode != "br" or len(term.blocks) != 2 or not dom.dominates(block, latch):
            continue
        cond = term.operands[0]
        if isinstance(cond, Instruction) and cond.opcode == "phi" and cond.parent is loop.header:
            cond = _Truth(cond)              # a counter of its own (counters: a constant latch value)
        elif not isinstance(cond, Instruction) or cond.opcode != "icmp" or cond.predicate not in COMPARE:
            continue
        stays = [t in loop.blocks for t in term.blocks]
        if stays[0] != stays[1]:
            yield cond, stays[0]


def _holds(cond: Instruction, a: int, b: int) -> bool:
    bits = cond.operands[0].type.bits
    if cond.predicate.startswith("s"):
        a, b = signed(a, bits), signed(b, bits)
    return COMPARE[cond.predicate](a, b)


def _leaves_for_every_operand(cond: Instruction, stays: bool, counter: _Counter, x: int) -> bool:
    """Whether the test leaves when the counter holds ``x``, whatever its other operand holds.
    Each predicate is monotone in an unknown operand (or, for eq/ne, true at one point), so it
    is constant over all values exactly when it agrees at the ends of both orders and at the
    known operand's value."""
    bits = cond.operands[0].type.bits
    mask = (1 << bits) - 1
    known = [counter.value(o, x) for o in cond.operands]
    if all(k is None for k in known):
        return False
    ends = [0, mask, 1 << (bits - 1), mask >> 1] + [k for k in known if k is not None]
    choices = [[k] if k is not None else ends for k in known]
    return all(_holds(cond, a, b) != stays for a in choices[0] for b in choices[1])


def header_visit_bound(loop, dom, enclosing=()) -> int | None:
    """An upper bound on header executions per entry into ``loop`` (a ``control_flow.Loop``;
    ``dom`` its ``Dominators``), or None if none is proven. ``enclosing``: the loops around it,
    whose simulated counters may give a start that is not a constant (``for j in range(i + 1, n)``)
    its possible values: the bound is then the largest over them."""
    if len(loop.latches) != 1:
        return None
    latch = loop.latches[0]
    tests = list(_exit_tests(loop, dom, latch))
    best = None
    for counter in counters(loop):
        reading = [(cond, stays) for cond, stays in tests if any(counter.reads(o) for o in cond.operands)]
        if not reading:
            continue
        starts = [counter.start] if counter.start is not None else _outer_starts(counter, loop, enclosing, dom)
        firsts = [_simulated_together(_Counter(counter.phi, counter.step, counter.amount, x), reading)
                  for x in starts or ()]
        for cond, stays in reading:
            found = [first.get(cond) for first in firsts]
            bound = max(found) if found and None not in found else None
            if bound is None:
                bound = _proven_bound(counter, cond, stays)
            if bound is not None:
                best = bound if best is None else min(best, bound)
    return best


MAX_OUTER_STARTS = 4096


def _outer_starts(counter: _Counter, loop, enclosing, dom) -> list[int] | None:
    """The values a counter's start ``c`` or ``c + k`` can hold where ``c`` is the simulated counter
    of an enclosing loop (every value its header phi takes until its tests leave, the leaving one
    included), or None."""
    start = next(v for v, b in zip(counter.phi.operands, counter.phi.blocks) if b not in loop.blocks)
    base, offset = start, 0
    if isinstance(start, Instruction) and start.opcode in ("add", "sub") and len(start.operands) == 2:
        c = int_value(start.operands[1])
        if c is not None:
            base, offset = start.operands[0], c if start.opcode == "add" else -c
        elif start.opcode == "add" and int_value(start.operands[0]) is not None:
            base, offset = start.operands[1], int_value(start.operands[0])
    for outer in enclosing:
        if len(outer.latches) != 1:
            continue
        for oc in counters(outer):
            if oc.phi is not base or oc.start is None or oc.bits != counter.bits:
                continue
            tests = [(cond, stays) for cond, stays in _exit_tests(outer, dom, outer.latches[0])
                     if any(oc.reads(o) for o in cond.operands)]
            values = _values_until_exit(oc, tests)
            if values is None:
                return None
            return [apply_step("add", x, offset, counter.bits) for x in values]
    return None


def _values_until_exit(counter: _Counter, tests: list) -> list[int] | None:
    """Every value of the counter's phi from its constant start until a test of the counter alone
    leaves (that value included); None past MAX_OUTER_STARTS values or without such a test."""
    live = [(cond, stays) for cond, stays in tests]
    x, seen = counter.start, []
    while len(seen) < MAX_OUTER_STARTS:
        seen.append(x)
        for cond, stays in list(live):
            a, b = (counter.value(o, x) for o in cond.operands)
            if a is None or b is None:
                live.remove((cond, stays))     # not a test of the counter alone
            elif _holds(cond, a, b) != stays:
                return seen
        x = counter.next(x)
        if not live or x is None:
            return None
    return None


def _simulated_together(counter: _Counter, tests: list) -> dict:
    """{test: header visits} for the tests that leave first when the counter is simulated from its
    constant start against all its tests in step (each test runs every iteration, so the loop ends
    at the first that leaves). One test at a time, a 0..3 loop with rustc -O0's overflow check
    (``i == -1`` leaves) was first simulated for 2^20 steps against that check."""
    live = [(cond, stays) for cond, stays in tests if not _equal_only_after_limit(counter, cond, stays)]
    x = counter.start
    for visits in range(1, MAX_SIMULATED_TRIPS + 1):
        leaving = []
        for cond, stays in list(live):
            a, b = (counter.value(o, x) for o in cond.operands)
            if a is None or b is None:
                live.remove((cond, stays))     # not a test of the counter alone (a bounds check)
            elif _holds(cond, a, b) != stays:
                leaving.append(cond)
        if leaving:
            return {cond: visits + 1 for cond in leaving}   # the header may run once more than the test
        x, before = counter.next(x), x
        if not live or x is None or x == before:
            return {}                           # poison, or a fixed point the tests stay at
    return {}


def _equal_only_after_limit(counter: _Counter, cond: Instruction, stays: bool) -> bool:
    """Whether an ``add`` counter's test that leaves on equality with a constant (``i == -1``,
    rustc -O0's overflow check) first holds after MAX_SIMULATED_TRIPS steps: solved, not run.
    ``start + k*a + d == c`` (mod 2^bits, ``d`` = a when the test reads the stepped value)."""
    if counter.step is None or counter.step.opcode not in ("add", "sub") or cond.predicate not in ("eq", "ne") \
            or (cond.predicate == "eq") == stays:
        return False
    ops = list(cond.operands)
    if not (ops[0] is counter.phi or ops[0] is counter.step):
        ops.reverse()
    c = int_value(ops[1])
    if not (ops[0] is counter.phi or ops[0] is counter.step) or c is None:
        return False
    bits, mask = counter.bits, (1 << counter.bits) - 1
    a = (counter.amount if counter.step.opcode == "add" else -counter.amount) & mask
    if a == 0:
        return False
    target = (c - counter.start - (a if ops[0] is counter.step else 0)) & mask
    g = 1 << min((a & -a).bit_length() - 1, bits)          # gcd(a, 2^bits); a != 0
    if target % g:
        return True                                          # never equal
    modulus = (1 << bits) // g
    k = (target // g) * pow(a // g, -1, modulus) % modulus if modulus > 1 else 0
    return k >= MAX_SIMULATED_TRIPS


def _proven_bound(counter: _Counter, cond: Instruction, stays: bool) -> int | None:
    """A bound that holds for every start: settling steps, or no-wrap growth to poison."""
    if counter.step is None:
        return None
    settles = settling(counter.step.opcode, counter.amount, counter.bits)
    if settles is not None:
        steps, fixed = settles
        if all(_leaves_for_every_operand(cond, stays, counter, p) for p in fixed):
            return steps + 2                    # steps + 1 tests; the header once more
    if (counter.start is not None and counter.start & ((1 << counter.bits) - 1)
            and _grows_without_wrapping(counter.step, counter.amount, counter.bits)):
        return counter.bits + 2                 # the counter is poison after `bits` steps
    return None
