"""Shadow updates at run-invariant addresses: summed per thread in a register, added once.

In an adjoint loop, ``d_pos[i] += g`` with ``i = tid()`` hits the same element on every
iteration. Issuing the update there costs one memory operation per iteration (an atomic when
other threads may add into the same element, as ``d_pos[j]`` of a neighbor list does). Here
the reverse sweep adds ``g`` into a thread-local sum instead (an ``alloca``, a register after
SROA) and, at the end of the sweep, adds the sum into memory once with the update the address
class asks for (analysis/address_classes.py): plain for PRIVATE, atomic for SHARED, the uniform add for UNIFORM.

Why this is sound, and when the reverse engine (reverse.py) may use it:

* the address is *run-invariant*: built from the function's arguments and constants by
  non-trapping pure operations only (GEPs, casts, integer arithmetic; no phi, load or call),
  so every site that computes it in this thread computes the same pointer, and the flush can
  rebuild it at the end of the sweep;
* the shadow is only ever *added into* during the reverse sweep: the primal never writes the
  array (no store, atomic or call reaches it), so no reverse rule reads or clears that shadow.
  Additions commute, so moving this thread's additions later changes no result, whatever
  other sites (``d_pos[j]`` with ``j == i``) or other threads add into the same element;
* a flag records that a site ran: the flush touches memory only then, so an address that the
  primal never reached (``x[i - 1]`` behind ``if i > 0``) is never written. A flag, not a test
  of the sum against zero: a zero sum can have a nonzero tangent (forward over reverse).

Deterministic mode (deterministic.py) logs shared updates per site and does not use this.
``ADOFFLOAD_DEFER_ADDS=0`` turns it off (to measure against per-site updates; derived kernels
are cached on disk by their base IR, so use a separate ``ADOFFLOAD_CACHE_DIR`` for such a run).
"""
from __future__ import annotations

import copy
import os
from dataclasses import dataclass

from ..ir.builder import Builder
from ..ir.core import Argument, Constant, Instruction, Value, const, i1
from .adjoint_values import adjoint_identity
from ..analysis.address_classes import AddressClass, uniform_add_intrinsic

# Pure operations that cannot trap: an address built only from these (and arguments and
# constants) is the same wherever and however often the thread computes it.
_PURE = frozenset({"getelementptr", "bitcast", "addrspacecast", "add", "sub", "mul", "shl", "lshr", "ashr",
                   "and", "or", "xor", "sext", "zext", "trunc", "icmp", "select"})
_MAX_DEPTH = 24


def enabled() -> bool:
    """Whether the reverse engine may defer updates (``ADOFFLOAD_DEFER_ADDS``, default on)."""
    return os.environ.get("ADOFFLOAD_DEFER_ADDS", "1") != "0"


def run_invariant(v: Value, depth: int = 0) -> bool:
    """Whether ``v`` is computed from arguments and constants by ``_PURE`` operations only."""
    if isinstance(v, (Argument, Constant)):
        return not (isinstance(v, Constant) and v.kind in ("undef", "poison", "metadata"))
    if not isinstance(v, Instruction) or v.opcode not in _PURE or depth > _MAX_DEPTH:
        return False
    return all(run_invariant(o, depth + 1) for o in v.operands)


def _key(v: Value):
    """A structural key: equal keys are equal pointers within one thread (run-invariant values)."""
    if isinstance(v, Instruction):
        return (v.opcode, v.predicate, str(v.element_type) if v.opcode == "getelementptr" else None,
                str(v.type), tuple(_key(o) for o in v.operands))
    if isinstance(v, Constant):
        return ("const", str(v.type), v.ref())
    return ("value", id(v))


@dataclass
class _Sum:
    pointer: Value            # the shadow pointer (run-invariant, forward-sweep values)
    slot: Instruction         # the thread's sum
    flag: Instruction         # whether a site ran
    kind: AddressClass
    align: int | None


class DeferredAdds:
    """The thread-local sums of one reverse function (created in its entry block)."""

    def __init__(self, entry: Builder):
        self.entry = entry
        self.sums: dict[tuple, _Sum] = {}
        self.sites = 0

    def add(self, b: Builder, pointer: Value, delta: Value, kind: AddressClass, align: int | None) -> None:
        """``*pointer += delta`` (``pointer``: a run-invariant shadow pointer), deferred."""
        key = (_key(pointer), str(delta.type))
        s = self.sums.get(key)
        if s is None:
            slot = self.entry.alloca(delta.type, "deferred.sum")
            # from -0.0, fadd's identity: a sum of only missing (-0.0) contributions stays -0.0, as the
            # per-site adds would leave the element, and its flush adds nothing (codegen/gpu/zero_adds.py)
            self.entry.store(adjoint_identity(delta.type), slot)
            flag = self.entry.alloca(i1, "deferred.ran")
            self.entry.store(const(i1, 0), flag)
            s = self.sums[key] = _Sum(pointer, slot, flag, kind, align)
        elif s.kind is not kind:
            s.kind = AddressClass.SHARED      # classified differently at different sites: the safe one
        if s.align != align:          # the flush's plain access: the smallest alignment of its sites
            s.align = min((a for a in (s.align, align) if a is not None), default=None)
        self.sites += 1
        b.store(b.fadd(b.load(delta.type, s.slot), delta), s.slot)
        b.store(const(i1, 1), s.flag)

    def flush(self, b: Builder, module) -> Builder:
        """Add every sum into memory (where its flag is set); returns the builder to go on with."""
        fn = b.function
        for n, s in enumerate(self.sums.values()):
            t = s.slot.element_type
            ran = b.load(i1, s.flag, "deferred.ran.v")
            write = fn.add_block(f"deferred.add.{n}")
            after = fn.add_block(f"deferred.next.{n}")
            b.cbranch(ran, write, after)
            w = Builder(write)
            total = w.load(t, s.slot, "deferred.total")
            pointer = _rebuild(s.pointer, w, {})
            if s.kind is AddressClass.PRIVATE:
                w.store(w.fadd(w.load(t, pointer, align=s.align), total), pointer, align=s.align)
            elif s.kind is AddressClass.SHARED:
                w.atomicrmw("fadd", pointer, total)
            else:
                w.call(uniform_add_intrinsic(module, t), [pointer, total])
            w.br(after)
            b = Builder(after)
        return b


def _rebuild(v: Value, b: Builder, memo: dict) -> Value:
    """A copy of the run-invariant expression ``v`` computed at ``b``."""
    if not isinstance(v, Instruction):
        return v
    if v not in memo:
        clone = copy.copy(v)
        clone.name, clone.parent, clone.flags = "", None, set(v.flags)
        clone.operands = [_rebuild(o, b, memo) for o in v.operands]
        memo[v] = b.insert(clone, f"{v.name or 'p'}.flush")
    return memo[v]
