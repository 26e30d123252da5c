"""The reverse of one instruction: arithmetic and calls through the rule table (rules.py, with overrides for
aggregates and vector lanes), memory (loads accumulate into shadows, stores hand their seed back and clear
it, memset/memcpy and heap calls: reverse_memory.py), atomics and uniform adds."""
from __future__ import annotations

from typing import Callable

from ..errors import DifferentiationError
from ..ir.builder import Builder
from ..ir.core import Block, Instruction, Value, const, i8
from .activity import is_float_type, is_placeholder_pointer
from .blocks import REPLAYED_CALLS
from .adjoint_values import zero_of
from .memory import heap_function
from .reverse_accumulate import accumulate
from .reverse_memory import reverse_copy, reverse_heap
from .custom import custom_cotangents, extractvalue_reverse, find_custom, insertvalue_reverse
from .forward import _IGNORED_CALLS
from ..analysis.address_classes import UNIFORM_ADD_PREFIX, AddressClass, pointer_roots
from ..analysis.races.store_seeds import SEED_EXCHANGE, stored_by_the_block
from .rules import RuleContext, describe, reverse_contributions, rule_for, rule_key
from .vectors import extractelement_reverse, insertelement_reverse, shufflevector_reverse


ReverseOverride = Callable[[RuleContext, Instruction, Value], "list[Value | None]"]


# Reverse-only rules that take precedence over rules.RULES (keyed like it).
REVERSE_OVERRIDES: dict[str, ReverseOverride] = {"extractvalue": extractvalue_reverse,
                                                 "insertvalue": insertvalue_reverse,
                                                 "extractelement": extractelement_reverse,
                                                 "insertelement": insertelement_reverse,
                                                 "shufflevector": shufflevector_reverse}


class InstructionReversal:
    """Instruction by instruction, the reverse sweep (mixed into reverse._Reverser)."""

    def _reverse_instruction(self, inst: Instruction, block: Block, b: Builder) -> None:
        op = inst.opcode
        if op == "store":
            return self._reverse_store(inst, block, b)
        if op == "atomicrmw":
            return self._reverse_atomic(inst, block, b)
        if op == "call" and getattr(inst.callee, "name", "").startswith("llvm.memset"):
            # memory overwritten by constants: the adjoints of what it held are dropped
            if inst.operands[0] in self.shadow:
                b.call(inst.callee, [self.need(self.shadow[inst.operands[0]], block), const(i8, 0),
                                     self.need(inst.operands[2], block), inst.operands[3]])
            return None
        if op == "call" and getattr(inst.callee, "name", "").startswith(("llvm.memcpy", "llvm.memmove")):
            return reverse_copy(self, inst, block, b)
        if op == "call" and getattr(inst.callee, "name", "").startswith(UNIFORM_ADD_PREFIX):
            return self._reverse_uniform_add(inst, block, b)
        heap = heap_function(inst)
        if heap is not None:
            return reverse_heap(self, inst, heap, block, b)
        if op == "call" and getattr(inst.callee, "name", "") in REPLAYED_CALLS:    # block barriers (blocks.py)
            b.call(inst.callee, list(inst.operands))
            return None
        if (op == "call" and not getattr(inst.callee, "name", "").startswith(_IGNORED_CALLS)
                and any(o in self.shadow for o in inst.operands)):
            raise DifferentiationError(f"{describe(inst)} receives a pointer to differentiated memory; inline it "
                                       f"first (canonicalize inlines alwaysinline helpers)")
        if not self.has_adjoint(inst):
            return None
        adj = self.take_adjoint(inst, b)
        if op == "load":
            return accumulate(self, inst.operands[0], adj, block, b, origin=inst)
        if op == "freeze":
            return self.add_adjoint(inst.operands[0], adj, b)
        override = REVERSE_OVERRIDES.get(rule_key(inst))
        ctx = RuleContext(b, self.module, primal=lambda v: self.need(v, block))
        custom = find_custom(self.module, inst.callee) if op == "call" else None
        if custom is None and op == "call" and getattr(inst.callee, "name", "").startswith("llvm.fma."):
            return self._reverse_fma(inst, adj, block, b)
        if custom is not None:
            contributions = custom_cotangents(ctx, inst, custom, adj)
        else:
            contributions = (override(ctx, inst, adj) if override is not None
                             else reverse_contributions(ctx, rule_for(inst), inst, adj, strong=inst in self.maybe_zero))
        for operand, delta in zip(inst.operands, contributions):
            self.add_adjoint(operand, delta, b)

    def _reverse_fma(self, inst: Instruction, adj: Value, block: Block, b: Builder) -> None:
        """``r = fma(x, y, z)``: the adjoints of x and y are accumulated fused too, ``dx = fma(y, dr, dx)``
        (one rounding, as the primal asked for; ``llvm.fma`` is correctly rounded on every target),
        that of z is ``dz += dr``. Other products and sums keep their own roundings."""
        x, y, z = inst.operands
        for operand, other in ((x, y), (y, x)):
            if self.has_adjoint(operand):
                slot = self.adjoint_slot(operand)
                before = b.load(operand.type, slot)
                fused = b.call(inst.callee, [self.need(other, block), adj, before])
                if inst in self.maybe_zero:      # a structural zero adjoint adds nothing, even to a NaN factor
                    is_zero = RuleContext(b, self.module).fcmp("oeq", adj, zero_of(adj.type))
                    fused = b.select(is_zero, before, fused)
                b.store(fused, slot)
        self.add_adjoint(z, adj, b)

    def _reverse_store(self, inst: Instruction, block: Block, b: Builder) -> None:
        value, pointer = inst.operands
        if pointer not in self.shadow:
            return
        if value in self.shadow or value.type.is_pointer and is_placeholder_pointer(value):
            return                             # a pointer's shadow, kept in the shadow memory: no adjoint
        shadow = self.need(self.shadow[pointer], block)
        if not is_float_type(value.type):      # an integer overwrote the location: its adjoint is dropped
            b.store(zero_of(value.type), shadow, align=inst.align)
            return
        if self.log is not None:
            self.log.note_readback(self.shadow[pointer], inst)
        if self._stored_by_others(pointer, block):
            # other threads may store the same element (every thread writing its block's result): one
            # of them takes the seed; a load then a store of zero would hand it to all that read first
            seed = b.atomicrmw("xchg", shadow, zero_of(value.type), name=SEED_EXCHANGE)
            if self.has_adjoint(value):
                self.add_adjoint(value, seed, b)
            return
        if self.has_adjoint(value):
            self.add_adjoint(value, b.load(value.type, shadow, "d.stored", align=inst.align), b)
        b.store(zero_of(value.type), shadow, align=inst.align)

    def _stored_by_others(self, pointer: Value, block: Block) -> bool:
        """Whether other threads of the launch store the element ``pointer`` addresses too (store_seeds.py),
        outside a block's shared arrays (where the race check allows one writer of an element between two
        barriers, which the reverse sweep replays in order)."""
        if self.classifier is None or self.classifier.classify(pointer, block) is AddressClass.PRIVATE:
            return False
        roots = pointer_roots(pointer)
        if roots is not None and roots <= {self.fn.args[k] for k in self.parallel.block_shared_args}:
            return False
        threads = {self.fn.args[k] for k in self.parallel.thread_args}
        return stored_by_the_block(pointer, threads, block, self.dom, self.preds)

    def _reverse_atomic(self, inst: Instruction, block: Block, b: Builder) -> None:
        pointer, value = inst.operands
        if pointer not in self.shadow or not is_float_type(value.type):
            return
        if inst.op not in ("fadd", "fsub") or self.has_adjoint(inst) and self.fn.users().get(inst):
            raise DifferentiationError(f"cannot differentiate {describe(inst)} on differentiated memory "
                                       f"(only atomic fadd/fsub whose old value is unused)")
        if self.log is not None:
            self.log.note_readback(self.shadow[pointer], inst)
        seed = b.load(value.type, self.need(self.shadow[pointer], block), "d.atomic")
        self.add_adjoint(value, seed if inst.op == "fadd" else b.fneg(seed), b)

    def _reverse_uniform_add(self, inst: Instruction, block: Block, b: Builder) -> None:
        """An adjoint kernel's ``*p += v`` (reverse over reverse): ``v̄ += shadow(p)[0]``."""
        pointer, value = inst.operands
        if pointer in self.shadow and is_float_type(value.type):
            seed = b.load(value.type, self.need(self.shadow[pointer], block), "d.uniform")
            self.add_adjoint(value, seed, b)
