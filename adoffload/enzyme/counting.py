"""Counting functions: the primal's control flow run once more to count, per thread, the bytes a
record needs.

A reverse kernel with a dynamic tape, and a deterministic one's contribution log, size their memory
before the derivative runs: ``@<name>(primal args..., ptr %<counter>...)`` runs the primal's
*control slice* (control_slice.py: the CFG and what its branches depend on; the float work and the
stores no branch reads are gone) and adds, at the end of every visit of a block, the bytes that
visit records. Where the slice is refused (a kept call with unknown memory effects) the function is
the whole primal, as before. The optimizer then folds counted loops whose trip counts come from the
arguments into closed forms (indvars, loop deletion): sizing llm.c-style ``for b < B, t < T, c < C``
nests costs O(1).
"""
from __future__ import annotations

from ..ir.builder import Builder
from ..ir.clone import clone_function_body
from ..ir.core import Argument, Function, FunctionType, const, i64, ptr, void
from .activity import derived_attributes
from .control_slice import slice_to_control


def add_counting_function(module, primal: Function, name: str, counters: list[tuple[str, dict[int, int]]],
                          control_slice: bool = True, observed: tuple[int, ...] = ()) -> Function:
    """``@name(primal args..., ptr %<counter>...)``: runs the primal's control slice (the whole
    primal with ``control_slice=False``, or where the slice is refused) and stores, per counter, the
    bytes this thread needs (one i64 each). A counter maps a primal block's index (in
    ``primal.blocks``) to the bytes each visit of that block adds. ``observed``: indices of primal
    arguments whose writes stay (a kernel's status record: a bounds error still fails the counting
    pass)."""
    params = tuple(a.type for a in primal.args) + (ptr,) * len(counters)
    fn = Function(name, FunctionType(void, params),
                  [Argument(a.type, a.name, k, derived_attributes(a)) for k, a in enumerate(primal.args)])
    fn.args += [Argument(ptr, counter, len(primal.args) + k) for k, (counter, _) in enumerate(counters)]
    fn.personality = primal.personality
    module.add_function(fn)
    block_map, returns = clone_function_body(primal, fn, dict(zip(primal.args, fn.args)))
    if control_slice:
        slice_to_control(fn, tuple(fn.args[k] for k in observed))
    entry = Builder()
    entry.position_before(fn.entry.instructions[0])
    slots = []
    for counter, per_block in counters:
        slot = entry.alloca(i64, f"{counter}.count")
        entry.store(const(i64, 0), slot)
        slots.append(slot)
        for index, nbytes in per_block.items():
            block = block_map.get(primal.blocks[index])
            if block is None or not nbytes:
                continue
            b = Builder()
            b.position_before_terminator(block)
            b.store(b.add(b.load(i64, slot), const(i64, nbytes)), slot)
    for ret in returns:
        b = Builder()
        b.position_before(ret)
        for slot, out in zip(slots, fn.args[len(primal.args):]):
            b.store(b.load(i64, slot), out)
        ret.operands = []
    return fn
