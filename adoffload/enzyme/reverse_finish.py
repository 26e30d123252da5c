"""The end of a reverse derivation: dead reloads removed, the tape placed (a static stack slot, or a dynamic
tape the launcher sizes with a counting function), the deterministic log attached."""
from __future__ import annotations

from dataclasses import dataclass

from ..ir.core import (Argument, Function, FunctionType, Value, i8, i64,
                       ptr, void)
from .deterministic import LogSpec, attach_log
from .stats import PER_ITERATION, PER_THREAD, ReverseStats
from .tape import TapeSpec, add_count_function
from .reverse_values import RECOMPUTABLE


@dataclass
class ReverseResult:
    function: Function
    tape: TapeSpec | None = None
    count_function: Function | None = None
    log: LogSpec | None = None          # deterministic mode's contribution log (deterministic.py)
    stats: ReverseStats | None = None   # tape, recomputed loads, deferred updates (stats.py)


class Finishing:
    """Tape placement and the derivation's result (mixed into reverse._Reverser)."""

    # ---- tape placement
    def _finish(self) -> ReverseResult:
        self.tape.prune(self._remove_dead_reloads())
        # pruning removed entry-block slots before the entry builder's insertion index: place it
        # again, at the end of the entry block (which dominates every push and pop of the tape)
        self.entry.position_before_terminator(self.fn.entry)
        self.tape.emit_writes()
        result = ReverseResult(self.fn, stats=ReverseStats(deferred_sites=self.deferred.sites,
                                                           deferred_adds=len(self.deferred.sums)))
        alive = {id(inst) for inst in self.fn.instructions()}
        for clone, block in self.recomputed_loads:
            if id(clone) in alive:
                result.stats.recomputed_loads[PER_ITERATION if self.loops.in_loop(block) else PER_THREAD] += 1
        self._tape_bytes: dict[int, int] | None = None
        self._place_tape(result)
        if self.log is not None and self.log.used:
            attach_log(self, result, self._tape_bytes)
        return result

    def _place_tape(self, result: ReverseResult) -> None:
        if not self.tape.uses_stack():
            if self.tape.cursor_slot is not None:
                self.tape.cursor_slot.parent.instructions.remove(self.tape.cursor_slot)
            return
        nbytes = self.tape.static_bytes(self.loops.visit_bound)
        if nbytes is not None and nbytes <= self.static_tape_limit:
            base = self.tape.static_stack(nbytes)
            result.stats.tape_bytes = nbytes
        else:
            base = self._dynamic_tape(result)
            result.stats.tape_bytes = None
        self.entry.store(base, self.tape.cursor_slot)

    def _remove_dead_reloads(self) -> set:
        """Delete unused recomputations and reloads in the reverse blocks' headers (to a fixed
        point); returns the set of values still used."""
        heads = set(self.rev.values())
        forward = set(self.blocks)
        sweep = [b for b in self.fn.blocks if b not in forward and b not in heads]
        while True:
            used = {o for inst in self.fn.instructions() for o in inst.operands}
            dead = [inst for block in heads for inst in block.instructions
                    if inst not in used and inst.opcode not in ("store", "br", "switch", "call")
                    and not inst.name.startswith("tape.")]       # tape slots: Tape.prune
            # partials of inactive operands (x * 0.5's for 0.5): unused, but their reloads would stay taped
            dead += [inst for block in sweep for inst in block.instructions
                     if inst not in used and inst.opcode in RECOMPUTABLE and inst.opcode != "load"
                     and not inst.name.startswith("tape.")]
            if not dead:
                return used
            for inst in dead:
                inst.parent.instructions.remove(inst)

    def _dynamic_tape(self, result: ReverseResult) -> Value:
        """Take the tape from the launcher (trailing args) and generate the count function."""
        fn = self.fn
        tape = Argument(ptr, "tape", len(fn.args))
        offset = Argument(i64, "tape_offset", len(fn.args) + 1)
        fn.args += [tape, offset]
        fn.function_type = FunctionType(void, fn.function_type.params + (ptr, i64))
        base = self.entry.gep(i8, tape, [offset], "tape.base", inbounds=False)
        primal_of = {new: old for old, new in self.block_map.items()}
        per_block = {self.primal.blocks.index(primal_of[rec.block]): rec.size
                     for rec in self.tape.stack_records()}
        if self.log is not None and self.log.used:
            self._tape_bytes = per_block           # one counting function for both: attach_log
            return base
        count = add_count_function(self.module, self.primal, f"{fn.name}.tape_count", per_block,
                                   observed=() if self.failure_arg is None else (self.failure_arg,))
        result.tape = TapeSpec(count.name)
        result.count_function = count
        return base
