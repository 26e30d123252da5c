"""The reverse sweep's shadow updates ``shadow(p) += delta``, race-free at the least cost.

Each update takes the cheapest form its address class allows (analysis/address_classes.py): PRIVATE a plain
load/add/store, SHARED an atomic (or, in deterministic mode, a log entry: deterministic.py;
through ``@adoffload.uniform_fadd`` where the address is likely the same across a warp, such as
``d_w[k]`` in a loop over k: the lanes that share it are combined, one atomic per warp),
UNIFORM a per-thread sum added once through ``@adoffload.uniform_fadd`` (combined per warp and
block on GPUs). Inside a loop, an update whose shadow address is run-invariant goes to a
thread-local sum added once after the sweep (deferred.py). Both functions take the reverse
engine (``reverse._Reverser``) for what it knows: ``shadow``, ``need``, ``classifier``,
``loops``, ``dom``, ``log``, ``entry`` and the sums it keeps.
"""
from __future__ import annotations

from ..errors import DifferentiationError
from ..ir.builder import Builder
from ..ir.core import Argument, Block, Constant, Instruction, Value
from .deferred import enabled as deferral_enabled, run_invariant
from .deterministic import PRIVATE_ROOT, shadow_root
from ..analysis.address_classes import AddressClass, uniform_add_intrinsic


def _pointer_root(p: Value) -> Value:
    while isinstance(p, Instruction) and p.opcode in ("getelementptr", "bitcast", "addrspacecast"):
        p = p.operands[0]
    return p


def accumulate(rev, pointer: Value, delta: Value, block: Block, b: Builder, origin: Instruction | None = None) -> None:
    """``shadow(pointer) += delta`` in the reverse of ``block`` (``origin``: the primal load)."""
    if pointer not in rev.shadow:
        raise DifferentiationError(f"active load through {pointer.ref()}, which has no shadow")
    kind = AddressClass.PRIVATE if rev.classifier is None else rev.classifier.classify(pointer, block)
    align = origin.align if origin is not None else None     # the primal access's (shadows mirror it)
    if _deferrable(rev, pointer, block, kind):
        return rev.deferred.add(b, rev.shadow[pointer], delta, kind, align)
    shadow = rev.need(rev.shadow[pointer], block)
    if kind is AddressClass.PRIVATE:
        b.store(b.fadd(b.load(delta.type, shadow, align=align), delta), shadow, align=align)
    elif kind is AddressClass.SHARED and rev.log is not None and not _not_logged(rev, pointer):
        rev.log.append(b, shadow, delta, block, origin, forward=rev.shadow[pointer])
    elif kind is AddressClass.SHARED and rev.classifier.warp_uniform(pointer):
        b.call(uniform_add_intrinsic(rev.module, delta.type), [shadow, delta])    # lanes combined where equal
    elif kind is AddressClass.SHARED:
        b.atomicrmw("fadd", shadow, delta)
    elif _summed_uniform(rev, pointer):
        slot = rev.uniform_sums.get(shadow)
        if slot is None:
            slot = rev.uniform_sums[shadow] = rev.entry.alloca(delta.type, "uniform.sum")
            rev.entry.store(Constant(delta.type, None, kind="zero"), slot)
        b.store(b.fadd(b.load(delta.type, slot), delta), slot)
    elif rev.log is not None:
        rev.log.append(b, shadow, delta, block, origin, forward=rev.shadow[pointer])
    else:
        b.call(uniform_add_intrinsic(rev.module, delta.type), [shadow, delta])


def _not_logged(rev, pointer: Value) -> bool:
    """Deterministic mode: whether a SHARED update stays atomic instead of going to the log.

    * A block kernel's shared array: its shadow is read back later in the same run, before a log
      could be reduced. The target fixes the order of those adds: the host runs a block's threads
      one after the other in each phase (codegen/blocks.py), GPUs put them in thread order
      (codegen/gpu/ordered_shared.py).
    * The thread's own memory (a local array's shadow that the analysis could not tell private):
      no other thread adds there, so the order is program order."""
    root = shadow_root(rev.shadow[pointer])
    if root is PRIVATE_ROOT:
        return True
    shared_shadows = {rev.fn.args[rev.shadow_args[k]] for k in rev.parallel.block_shared_args if k in rev.shadow_args}
    return root in shared_shadows


def _summed_uniform(rev, pointer: Value) -> bool:
    """A uniform shadow address computed once, on every path: summed unguarded (uniform_sums)."""
    shadow = rev.shadow[pointer]
    home = shadow.parent if isinstance(shadow, Instruction) else rev.fn.entry
    return not rev.loops.in_loop(home) and (not isinstance(shadow, Instruction)
                                            or rev.dom.dominates(shadow.parent, rev.exit))


def _deferrable(rev, pointer: Value, block: Block, kind: AddressClass) -> bool:
    """Whether a kernel's update inside a loop can go to a thread-local sum (deferred.py): the
    shadow address is run-invariant and the primal never writes its array, so the reverse sweep
    only ever adds into that shadow."""
    if (rev.classifier is None or rev.log is not None or not rev.loops.in_loop(block)
            or not deferral_enabled() or kind is AddressClass.UNIFORM and _summed_uniform(rev, pointer)):
        return False
    root = _pointer_root(rev.original.get(pointer, pointer))
    return (isinstance(root, Argument) and rev.readonly_root(root)
            and root.index not in rev.parallel.block_shared_args and run_invariant(rev.shadow[pointer]))


def flush_sums(rev, b: Builder) -> Builder:
    """At the end of the reverse sweep: add the deferred sums, then the scalar and uniform sums,
    into their shadows. Returns the builder to close the sweep with."""
    b = rev.deferred.flush(b, rev.module)
    pending = list(rev.uniform_sums.items())
    for k, j in rev.shadow_args.items():
        arg = rev.fn.args[k]
        if not arg.type.is_pointer and arg in rev.adjoint_slots:
            pending.append((rev.fn.args[j], rev.adjoint_slots[arg]))
    for target, slot in pending:
        t = slot.element_type
        total = b.load(t, slot)
        if rev.parallel is None:
            b.store(b.fadd(b.load(t, target), total), target)
        elif rev.log is not None:
            rev.log.append(b, target, total, rev.blocks[0])
        else:
            b.call(uniform_add_intrinsic(rev.module, t), [target, total])
    return b
