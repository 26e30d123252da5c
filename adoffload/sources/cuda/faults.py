"""Run-time guards of translated CUDA kernels that are not array bounds (those are bounds.py).

* **Integer division** (``sdiv``/``udiv``/``srem``/``urem``) by a divisor that may be zero: x86
  raises SIGFPE, which kills the process, and a GPU gives an arbitrary value. Before each such
  division the thread checks the divisor; zero records DIVISION_BY_ZERO (and a signed
  ``INT_MIN / -1`` INTEGER_OVERFLOW) in the status record with the source line, and returns,
  as the kernel language's ``//`` does (frontend/expressions.py). Always inserted.
* **Signed overflow in index arithmetic** (with the bounds checks): clang marks C's signed
  ``+``, ``-``, ``*``, ``<<`` ``nsw`` (overflow is undefined), and ``x[j * j]`` with ``int j =
  65536`` wraps to ``x[0]``, an access inside the array that no bounds check can tell from a right
  one. Every ``nsw``/``nuw`` operation narrower than 64 bits whose result flows into an address
  (a GEP index, through casts, integer arithmetic, phis and selects) and that depends on a kernel
  parameter or on memory (``check_index_overflow``) is computed again in 64
  bits beside it, and before each access using it (that it dominates) a result that did not fit
  records INTEGER_OVERFLOW (``dim`` says which operation) with the line. The original
  instruction keeps its flags, so what the analyses prove from them (private thread indices)
  still holds, and holds now because it is checked. An operation reaching an access only through
  a loop's phi (``i += stride``) is checked where it dominates; a wrapped loop counter is then left
  to the bounds check (a negative or huge index).

The status record's words (language/status.py): ``{code, -1, source line or 0, dim}``.
"""
from __future__ import annotations

from ...ir.builder import Builder
from ...ir.cfg import dominator_sets, split_before
from ...errors import CudaTranslationError
from ...ir.core import Block, Constant, Function, Instruction, IntType, Value, VectorType, i1, i64
from ...language.status import DIVISION_BY_ZERO, INTEGER_OVERFLOW, OVERFLOW_KINDS

_DIVISIONS = ("sdiv", "udiv", "srem", "urem")
_WRAPPING = ("add", "sub", "mul", "shl")
_POINTER_FLOW = ("bitcast", "phi", "select", "freeze")
_INDEX_FLOW = ("sext", "zext", "trunc", "add", "sub", "mul", "shl", "lshr", "ashr", "or", "and", "xor", "phi", "select",
               "freeze")


def line_of(inst: Instruction) -> int:
    location = getattr(inst, "location", None)
    return location.line if location is not None else 0


def fail_unless(fn: Function, inst: Instruction, ok: Value, code: int, words: tuple, status: Value) -> None:
    """Split ``inst``'s block before it: where ``ok`` is false the first failing thread writes
    ``code`` and ``words`` (three i64 Values) to the status record, and the thread returns."""
    block = inst.parent
    rest = split_before(fn, inst, "ok")
    fail = Block(fn._unique_block_name(f"{block.name}.fault"), parent=fn)
    write = Block(fn._unique_block_name(f"{block.name}.record"), parent=fn)
    leave = Block(fn._unique_block_name(f"{block.name}.stop"), parent=fn)
    fn.blocks += [fail, write, leave]
    Builder(block).cbranch(ok, rest, fail)
    f = Builder(fail)
    old = f.atomicrmw("xchg", status, Constant(i64, code))
    f.cbranch(f.icmp("eq", old, Constant(i64, 0)), write, leave)
    w = Builder(write)
    for word, value in zip((1, 2, 3), words):
        w.store(value, w.gep(i64, status, [Constant(i64, word)]))
    w.br(leave)
    Builder(leave).ret()


def guard_divisions(fn: Function, status: Value, kernel: str) -> int:
    """The division guards (module docstring); returns how many divisions were guarded. A vector
    division by a vector that is not constant is refused rather than left unguarded."""
    guarded = 0
    for inst in list(fn.instructions()):
        if inst.opcode not in _DIVISIONS:
            continue
        if isinstance(inst.type, VectorType):
            if not isinstance(inst.operands[1], Constant):
                where = f" at {inst.location}" if inst.location is not None else ""
                raise CudaTranslationError(f"kernel '{kernel}': a vector integer division ({inst.opcode} "
                                           f"{inst.type}){where} by a divisor that is not constant could not be "
                                           f"guarded against division by zero")
            continue
        if not isinstance(inst.type, IntType):
            continue
        dividend, divisor = inst.operands
        t, signed = inst.type, inst.opcode[0] == "s"
        known = divisor.value if isinstance(divisor, Constant) and divisor.kind == "scalar" else None
        if known is not None and known != 0 and not (signed and _signed(known, t.bits) == -1):
            continue
        line = Constant(i64, line_of(inst))
        b = Builder(inst.parent, inst.parent.instructions.index(inst))
        nonzero = b.icmp("ne", divisor, Constant(t, 0))
        fail_unless(fn, inst, nonzero, DIVISION_BY_ZERO, (Constant(i64, -1), line, Constant(i64, -1)), status)
        if signed:
            b = Builder(inst.parent, inst.parent.instructions.index(inst))
            smallest = Constant(t, -(1 << (t.bits - 1)))
            overflows = b.binary("and", b.icmp("eq", divisor, Constant(t, -1)), b.icmp("eq", dividend, smallest))
            fits = b.binary("xor", overflows, Constant(i1, 1))
            fail_unless(fn, inst, fits, INTEGER_OVERFLOW, (Constant(i64, -1), line, Constant(i64, -1)), status)
        guarded += 1
    return guarded


def check_index_overflow(fn: Function, status: Value, trusted=()) -> int:
    """The index-overflow checks (module docstring): each operation's ``fits`` flag is computed
    beside it, and checked just before each load, store or atomic whose address it flows into
    and whose block it dominates (so an access that speculation (speculate.py) guards is checked
    only on the threads that make it). Only operations on values that come from the kernel's
    parameters or from memory are checked (``_from_inputs``): what is computed from thread
    indices (``trusted``: the body's thread ids and ``gridDim``, which the launcher bounds),
    constants and counters of them cannot reach 2**31 in a launch, and checking it would hide the
    index forms the race analysis proves apart. Returns how many accesses got a check."""
    inputs = _from_inputs(fn, trusted)
    dominators = dominator_sets(fn)
    position = {id(i): k for k, i in enumerate(fn.instructions())}

    def dominates(op: Instruction, at: Instruction) -> bool:
        if op.parent is at.parent:
            return position[id(op)] < position[id(at)]
        return op.parent in dominators.get(at.parent, ())
    plan, fits = [], {}
    for inst in list(fn.instructions()):
        pointer = _address(inst)
        if pointer is None:
            continue
        ops = [op for op in _wrapping_into(pointer) if id(op) in inputs and dominates(op, inst)]
        if ops:
            plan.append((inst, sorted(ops, key=lambda op: position[id(op)])))
            for op in ops:
                if id(op) not in fits:
                    fits[id(op)] = _fits(op)
    for inst, ops in plan:
        b = Builder(inst.parent, inst.parent.instructions.index(inst))
        ok, kind, line = None, Constant(i64, 0), Constant(i64, line_of(inst))
        for op in reversed(ops):          # the record names the first operation that does not fit
            op_ok = fits[id(op)]
            ok = op_ok if ok is None else b.binary("and", ok, op_ok)
            kind = b.select(op_ok, kind, Constant(i64, OVERFLOW_KINDS.index(op.opcode) + 1))
            line = b.select(op_ok, line, Constant(i64, line_of(op) or line_of(inst)))
        fail_unless(fn, inst, ok, INTEGER_OVERFLOW, (Constant(i64, -1), line, kind), status)
    return len(plan)


def _from_inputs(fn: Function, trusted) -> set[int]:
    """Ids of the instructions whose value depends on an argument not in ``trusted`` or on a load
    (or an atomic's old value), through any instruction (phis and selects included)."""
    trusted = {id(a) for a in trusted}
    sources = {id(a) for a in fn.args if id(a) not in trusted}
    found: set[int] = set()
    changed = True
    while changed:
        changed = False
        for inst in fn.instructions():
            if id(inst) in found:
                continue
            if inst.opcode in ("load", "atomicrmw", "cmpxchg") or any(
                    id(o) in sources or id(o) in found for o in inst.operands):
                found.add(id(inst))
                changed = True
    return found


def _fits(op: Instruction) -> Value:
    """An i1 computed just before ``op``: its result is the exact one (what its flags promise)."""
    a, c = op.operands
    bits = op.type.bits
    b = Builder(op.parent, op.parent.instructions.index(op))
    ok = None
    if "nsw" in op.flags:
        wide = b.binary(op.opcode, b.cast("sext", a, i64), _shift_amount(b, op, c, "sext"))
        low, high = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
        ok = b.binary("and", b.icmp("sge", wide, Constant(i64, low)), b.icmp("sle", wide, Constant(i64, high)))
    if "nuw" in op.flags:
        wide = b.binary(op.opcode, b.cast("zext", a, i64), _shift_amount(b, op, c, "zext"))
        in_range = b.icmp("ult", wide, Constant(i64, 1 << bits))
        ok = in_range if ok is None else b.binary("and", ok, in_range)
    return ok


def _address(inst: Instruction) -> Value | None:
    if inst.opcode in ("load", "atomicrmw", "cmpxchg"):
        return inst.operands[0]
    if inst.opcode == "store":
        return inst.operands[1]
    return None


def _wrapping_into(pointer: Value) -> list[Instruction]:
    """The wrap-flagged integer operations (narrower than 64 bits; shifts by constants) whose results
    flow into ``pointer``'s GEP indices (through pointer GEPs, phis and selects)."""
    seen, todo, found = set(), [pointer], []
    while todo:
        value = todo.pop()
        if id(value) in seen or not isinstance(value, Instruction):
            continue
        seen.add(id(value))
        if value.type.is_pointer:
            if value.opcode == "getelementptr":
                todo += value.operands
            elif value.opcode in _POINTER_FLOW:
                todo += value.operands[1:] if value.opcode == "select" else value.operands
            continue
        if value.opcode not in _INDEX_FLOW:
            continue
        todo += value.operands[1:] if value.opcode == "select" else value.operands
        if (value.opcode in _WRAPPING and isinstance(value.type, IntType) and value.type.bits < 64
                and {"nsw", "nuw"} & set(value.flags)
                and (value.opcode != "shl" or (isinstance(value.operands[1], Constant)
                                               and 0 <= value.operands[1].value < value.type.bits))):
            found.append(value)
    return found


def _shift_amount(b: Builder, inst: Instruction, c: Value, extend: str) -> Value:
    if inst.opcode == "shl":
        return Constant(i64, c.value)
    return b.cast(extend, c, i64)


def _signed(value: int, bits: int) -> int:
    value &= (1 << bits) - 1
    return value - (1 << bits) if value >> (bits - 1) else value


