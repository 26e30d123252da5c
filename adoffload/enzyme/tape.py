"""The tape: values the reverse sweep needs that it can neither reuse nor recompute.

Policy (decided in reverse.py's ``need``): a primal value is reused directly when it is
defined once per call in a block that dominates the exit; recomputed when it is a cheap pure
instruction (or a load of memory the function never writes); otherwise it is *cached* in
the record of the block whose reverse needs it. Each block that needs cached values has a
record: a fixed list of 8-byte slots, written at the end of the block in the augmented
forward sweep and read at the start of its reverse block.

* A block outside every loop runs at most once, so its record lives in ``alloca`` slots
  (SROA turns them into registers after AD).
* A block inside a loop pushes one record per visit onto a per-thread **stack**; its reverse
  block pops it. The reverse sweep visits blocks in exactly the reverse order of the forward
  sweep (multi-predecessor blocks record which predecessor led in: the "came-from" index is
  itself a record slot), so the stack discipline holds for any reducible CFG: nested loops,
  ``while`` loops with data-dependent exits, ``break``/``continue``.

Where the stack lives:

* **static**: when every loop containing a pushing block has a constant trip bound
  (trip_bounds.py: a counter stepped by a constant, e.g. ``i += 1`` to a constant or
  ``h >>= 1`` from anything to 0) and the bound on pushed bytes is at most
  ``STATIC_TAPE_LIMIT``, the stack is a local ``alloca`` array. ``ReverseResult.tape`` is None.
* **dynamic** otherwise. ``ReverseResult.tape`` is a ``TapeSpec`` and the launcher must provide
  memory. Protocol:

  1. The derived function gets two trailing arguments after all others:
     ``ptr %tape, i64 %tape_offset`` -- this thread's slice starts at ``tape + tape_offset``
     (bytes, a multiple of 8).
  2. ``TapeSpec.count_function`` names a generated function in the same module with the
     primal's arguments plus a trailing ``ptr %tape_bytes``: it runs the primal's control
     slice (counting.py, control_slice.py: the branches and what they read, including the
     stores that reach such reads; the whole primal where the slice is refused -- so give it
     scratch copies of any array the primal both reads and writes, e.g. InOut arrays, unless
     ``control_slice.writes_caller_memory`` says it writes none) and stores the number of
     tape bytes this thread will push as one i64 at ``%tape_bytes``.
  3. The host runs the count function for every thread (writing ``counts[linear_tid]``),
     takes an exclusive prefix sum ``offsets`` (each count is a multiple of 8), allocates
     ``sum(counts)`` bytes (at least 8), and passes ``tape`` and ``offsets[linear_tid]`` to
     each thread's derived body. The tape needs no initialization and is dead after the launch.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ..ir.builder import Builder
from ..ir.core import (ArrayType, Block, Constant, Function, Instruction, Value, VectorType, const, i8, i64,
                       ptr)
from .counting import add_counting_function

SLOT_BYTES = 8
STATIC_TAPE_LIMIT = 64 * SLOT_BYTES


@dataclass(frozen=True)
class TapeSpec:
    """A dynamic tape the launcher must allocate (see the module docstring for the protocol)."""
    count_function: str          # name of the counting function in the same module
    alignment: int = SLOT_BYTES  # every per-thread offset must be a multiple of this


def slots_for(value: Value) -> int:
    return -(-field_bytes(value) // SLOT_BYTES)


def field_bytes(value: Value) -> int:
    """The bytes ``value`` takes in a record: its store size (a float 4, a double or pointer 8, an
    ``i1`` 1, a vector its lanes' sum)."""
    t = value.type
    bits = getattr(t.element if isinstance(t, VectorType) else t, "bits", 64)     # pointers: 64
    count = t.count if isinstance(t, VectorType) else 1
    return max(1, -(-(bits * count) // 8))


def field_alignment(value: Value) -> int:
    """A field's alignment in a record: its size up to 8 bytes (the record's own alignment)."""
    size = field_bytes(value)
    return SLOT_BYTES if size >= SLOT_BYTES or size & (size - 1) else size


@dataclass(eq=False)
class Record:
    """The cached values of one block: slot offsets on the stack, or one alloca each."""
    block: Block
    on_stack: bool
    fields: list[Value] = field(default_factory=list)
    offsets: list[int] = field(default_factory=list)
    size: int = 0                                # bytes, a multiple of 8
    end: int = 0                                 # where the last field ends
    base: Value | None = None                    # pop side: start of this visit's record
    minus_size: Constant | None = None           # patched when the record is complete
    slots: list[Instruction] = field(default_factory=list)
    reloads: list[Instruction] = field(default_factory=list)
    addresses: list[Instruction | None] = field(default_factory=list)


class Tape:
    """Builds records and the per-thread stack for one derived function."""

    def __init__(self, fn: Function, entry_builder: Builder):
        self.fn = fn
        self.entry = entry_builder                # positioned among the entry block's allocas
        self.records: dict[Block, Record] = {}
        self.cursor_slot: Instruction | None = None

    def record(self, block: Block, on_stack: bool) -> Record:
        if block not in self.records:
            self.records[block] = Record(block, on_stack)
        return self.records[block]

    def cache(self, block: Block, on_stack: bool, value: Value, pop: Builder) -> Value:
        """Cache ``value`` in ``block``'s record; return its reload, emitted with ``pop``."""
        rec = self.record(block, on_stack)
        rec.fields.append(value)
        if not on_stack:
            slot = self.entry.alloca(value.type, f"{value.name or 'v'}.cache")
            rec.slots.append(slot)
            rec.addresses.append(None)
            rec.reloads.append(pop.load(value.type, slot, f"{value.name or 'v'}.cached"))
            return rec.reloads[-1]
        if rec.base is None:
            self.cursor_slot = self.cursor_slot or self.entry.alloca(ptr, "tape.cursor")
            rec.minus_size = const(i64, 0)
            cursor = pop.load(ptr, self.cursor_slot, "tape.top")
            rec.base = pop.gep(i8, cursor, [rec.minus_size], "tape.rec", inbounds=False)
            pop.store(rec.base, self.cursor_slot)
        rec.offsets.append(_place(rec.end, value))
        rec.end = rec.offsets[-1] + field_bytes(value)
        rec.size = _padded(rec.end)
        where = pop.gep(i8, rec.base, [const(i64, rec.offsets[-1])], "tape.slot", inbounds=False)
        rec.addresses.append(where)
        # records are 8-byte aligned: a vector's ABI alignment (32 for <4 x double>) does not hold
        rec.reloads.append(pop.load(value.type, where, f"{value.name or 'v'}.taped", align=field_alignment(value)))
        return rec.reloads[-1]

    def prune(self, used: set) -> None:
        """Drop fields whose reload is unused (rules may ask for values they do not use),
        and lay the remaining stack slots out again."""
        for rec in self.records.values():
            keep = [k for k, r in enumerate(rec.reloads) if r in used]
            for k, reload in enumerate(rec.reloads):
                if k not in keep:
                    for inst in (reload, rec.addresses[k], rec.slots[k] if rec.slots else None):
                        _detach(inst)
            pick = lambda xs: [xs[k] for k in keep] if xs else xs
            rec.fields, rec.reloads, rec.addresses, rec.slots = (pick(rec.fields), pick(rec.reloads),
                                                                pick(rec.addresses), pick(rec.slots))
            rec.offsets, rec.size, end = [], 0, 0
            for value, address in zip(rec.fields, rec.addresses):
                rec.offsets.append(_place(end, value))
                if address is not None:
                    address.operands[1] = const(i64, rec.offsets[-1])
                end = rec.offsets[-1] + field_bytes(value)
            rec.end, rec.size = end, _padded(end)
            if rec.on_stack and not rec.fields and rec.base is not None:
                for inst in list(rec.base.parent.instructions):     # the cursor pop itself
                    if inst is rec.base or (inst.opcode in ("load", "store") and self.cursor_slot in inst.operands):
                        _detach(inst)
                rec.base = None

    def uses_stack(self) -> bool:
        return bool(self.stack_records())

    def stack_records(self) -> list[Record]:
        return [r for r in self.records.values() if r.on_stack and r.fields]

    def emit_writes(self) -> None:
        """In the augmented forward sweep: store each record at the end of its block."""
        for rec in self.records.values():
            if not rec.fields:
                continue
            b = Builder()
            b.position_before_terminator(rec.block)
            if not rec.on_stack:
                for value, slot in zip(rec.fields, rec.slots):
                    b.store(value, slot)
                continue
            rec.minus_size.value = -rec.size
            cursor = b.load(ptr, self.cursor_slot, "tape.top")
            for value, offset in zip(rec.fields, rec.offsets):
                b.store(value, b.gep(i8, cursor, [const(i64, offset)], "tape.slot", inbounds=False),
                        align=field_alignment(value))
            b.store(b.gep(i8, cursor, [const(i64, rec.size)], "tape.push", inbounds=False), self.cursor_slot)

    def static_bytes(self, visit_bound) -> int | None:
        """Bytes the stack can reach, if every pushing block's visits are statically bounded."""
        total = 0
        for rec in self.stack_records():
            visits = visit_bound(rec.block)
            if visits is None:
                return None
            total += visits * rec.size
        return total

    def place_stack(self, base: Value, after: Builder) -> None:
        """Point the cursor at the stack's base (``after`` is positioned in the entry block)."""
        if self.cursor_slot is not None:
            after.store(base, self.cursor_slot)

    def static_stack(self, nbytes: int) -> Instruction:
        return self.entry.alloca(ArrayType(i64, max(1, nbytes // SLOT_BYTES)), "tape.local")


def _place(end: int, value: Value) -> int:
    """The offset of ``value``'s field after fields ending at byte ``end``: the next multiple of its alignment."""
    align = field_alignment(value)
    return -(-end // align) * align


def _padded(nbytes: int) -> int:
    """A record's size: its fields' end rounded up to 8, so every record (and the cursor) stays 8-aligned."""
    return -(-nbytes // SLOT_BYTES) * SLOT_BYTES


def _detach(inst: Instruction | None) -> None:
    if inst is not None and inst.parent is not None and inst in inst.parent.instructions:
        inst.parent.instructions.remove(inst)


def add_count_function(module, primal: Function, name: str, bytes_per_block: dict[int, int],
                       observed: tuple[int, ...] = ()) -> Function:
    """``@name(primal args..., ptr %tape_bytes)``: runs the primal and stores its tape size.

    ``bytes_per_block`` maps a primal block's index (in ``primal.blocks``) to the bytes its
    record pushes per visit. (The single-counter case of ``counting.add_counting_function``.)
    """
    return add_counting_function(module, primal, name, [("tape_bytes", bytes_per_block)], observed=observed)

