"""Lean derivative kernels (``primal_outputs=False``): move only the bytes a derivative needs.

A derivative kernel recomputes the primal, so by default it also stores the primal outputs,
and a reverse kernel clears each seed element it consumes (``d_x[i] = 0`` after reading it).
Callers that already have the primal outputs (the JAX JVP rule's tangent call, the transpose
rule's adjoint) pay for bytes nobody reads. Three transformations of the derived function, each
applied only where it is proven not to change any derivative:

* **Primal stores dropped.** A written array param whose pointer the primal body uses only as
  the address of stores or of atomic updates whose old value is unused (never loaded, never
  passed on, never compared) cannot influence any value the kernel computes, so those writes are
  deleted. So are the stores of an InOut param read before it is written (no load reachable from
  a store) at one PRIVATE element per thread: no load, of this thread or another, sees them. The
  thread-uniform adds of a reverse kernel (``@adoffload.uniform_fadd.*(address, value)``, a void
  call that is an atomic add: analysis/address_classes.py) count as such atomic updates, so the
  adjoint of a reverse kernel (a second derivative) does not redo the first one's gradient. The
  param stays in the signature (its shapes keep the bounds checks exact) as ``In``: the kernel
  does not write it (nor read it, unless it is such an InOut).
* **Seeds read-only (reverse mode).** A seed the adjoint only loads (``d_dot`` of ``dot`` updated
  by atomic adds alone: the gradient of its input is the seed, unchanged) becomes ``In``. The
  adjoint of ``x[idx] = v`` reads ``d_x[idx]`` and clears it, so that an earlier store to the
  same location sees no stale seed. When the location cannot be stored twice in the whole launch
  -- every store to ``x`` outside loops, no store reachable from another (one per thread at
  most), at an index the race analysis (``analysis/address_classes.py``) proves PRIVATE (injective across
  threads); or several stores per thread at rows ``a*t + c`` of one column with distinct ``c``
  less than ``|a|`` apart (``AddressClassifier.disjoint_rows``: a stencil thread writing 4 rows)
  -- and ``x`` is a write-only Out array (no loads whose adjoints would add into
  ``d_x``; an InOut's cleared seed is its input's gradient), the clearing stores are deleted and
  ``d_x`` becomes ``In``: read, never written.
* **Gradients written (reverse mode).** For an In array ``a`` that the primal loads only outside
  loops at a PRIVATE index (each element read by one thread), the first ``d_a[idx] += v`` of the
  reverse sweep (one that runs before the others on every path) becomes ``d_a[idx] = v`` and
  ``d_a`` an ``Out`` array: launchers start Out arrays at zero, so the gradient is the same; with
  one update, the adjoint no longer reads ``d_a``.

Anything not proven keeps the conservative code.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..errors import DifferentiationError
from ..ir.core import Argument, Constant, Function, Instruction, Value
from ..language.signature import HIDDEN_PREFIX
from ..analysis.address_classes import AddressClass, AddressClassifier, ParallelInfo
from ..analysis.control_flow import Dominators, LoopInfo, reachable_blocks
from .activity import is_uniform_add

_ADDRESS_OPS = frozenset({"getelementptr", "bitcast", "addrspacecast"})


@dataclass(frozen=True)
class LeanPlan:
    """What a lean derivative changed: ``dropped`` params (by index) are no longer stored to (their
    intent becomes In), ``consumed`` params' seeds ``d_<name>`` are read-only (In), ``written``
    In params' gradients ``d_<name>`` are written, not accumulated (Out)."""
    dropped: frozenset[int] = frozenset()
    consumed: frozenset[int] = frozenset()
    written: frozenset[int] = frozenset()


def _terminal_uses(root: Value, users: dict) -> list[tuple[Instruction, Value]]:
    """(instruction, the address it got) for every use of ``root`` and of addresses computed from it
    (GEP/bitcast chains) other than more address arithmetic. Callers accept only loads and stores:
    any other use (a phi, a select, a call, a comparison) makes them prove nothing."""
    out, work, seen = [], [root], set()
    while work:
        value = work.pop()
        if id(value) in seen:
            continue
        seen.add(id(value))
        for user in users.get(value, ()):
            if user.opcode in _ADDRESS_OPS and user.operands[0] is value and \
                    all(o is not value for o in user.operands[1:]):
                work.append(user)
            else:
                out.append((user, value))
    return out


def _writes(root: Value, users: dict, loads: bool = False) -> list[Instruction] | None:
    """The stores and atomic updates through ``root`` when those (and, with ``loads``, loads) are
    its only uses (each as the address; an atomic's old value unused, so its effect is only on
    memory); None otherwise."""
    writes = []
    for user, address in _terminal_uses(root, users):
        if loads and user.opcode == "load" and user.operands[0] is address:
            continue
        if user.opcode == "store" and user.operands[1] is address and user.operands[0] is not address:
            writes.append(user)
        elif user.opcode == "atomicrmw" and user.operands[0] is address and user.operands[1] is not address \
                and not users.get(user):
            writes.append(user)
        elif is_uniform_add(user) and len(user.operands) == 2 and user.operands[0] is address \
                and user.operands[1] is not address:
            writes.append(user)         # ``*address += value`` (a reverse kernel's thread-uniform add), no result
        else:
            return None
    return writes


def _only_written(root: Value, users: dict) -> list[Instruction] | None:
    """``_writes`` with no loads allowed: ``root`` is write-only."""
    return _writes(root, users)


def _array_arg(signature, rank: int, k: int) -> int:
    """Body argument index of array param ``k``'s data pointer."""
    for j, flat in enumerate(signature.flat_params()):
        if flat.param_index == k and flat.role == "array":
            return rank + j
    raise DifferentiationError(f"internal: parameter #{k} of {signature.name!r} is not an array")


def param_accesses(signature, body: Function) -> dict[str, tuple[bool, bool]]:
    """Array param name -> (read, written) by the body's code (atomics both; a pointer used any
    other way counts as both), for byte counts of what a kernel moves."""
    users = body.users()
    out = {}
    for k, p in enumerate(signature.params):
        if p.is_array:
            ops = {u.opcode for u, _ in _terminal_uses(body.args[_array_arg(signature, signature.grid_rank, k)], users)}
            other = bool(ops - {"load", "store"})
            out[p.name] = ("load" in ops or other, "store" in ops or other)
    return out


def write_only_params(signature, body: Function, parallel: ParallelInfo | None = None) -> frozenset[int]:
    """Written array params none of whose writes the kernel can observe: params the primal body only
    writes (stores, and atomic updates whose old value is unused: a reduction's result nobody in the
    kernel reads); and, given ``parallel``, InOut params read before they are written (no load
    reachable from a store) at one PRIVATE element per thread, which no other thread touches."""
    users = body.users()
    rank = signature.grid_rank
    found = set()
    for k, p in enumerate(signature.params):
        if not (p.is_array and p.type.writes) or p.name.startswith(HIDDEN_PREFIX):
            continue
        arg = body.args[_array_arg(signature, rank, k)]
        if _only_written(arg, users) is not None or \
                (parallel is not None and p.type.intent == "inout" and _read_then_written(body, arg, users, parallel)):
            found.add(k)
    return frozenset(found)


def _read_then_written(body: Function, arg: Argument, users: dict, parallel: ParallelInfo) -> bool:
    """Whether ``arg`` is accessed by plain loads and stores only, all at a PRIVATE index, and no
    load can run after a store (same block later, or in a block reachable from the store's)."""
    uses = _terminal_uses(arg, users)
    loads = [u for u, a in uses if u.opcode == "load" and u.operands[0] is a]
    stores = [u for u, a in uses if u.opcode == "store" and u.operands[1] is a and u.operands[0] is not a]
    if len(loads) + len(stores) != len(uses) or not stores:
        return False
    blocks = reachable_blocks(body)
    if any(u.parent not in blocks for u in loads + stores):
        return False
    for s in stores:
        later = _reachable_from(s.parent)
        position = s.parent.instructions.index(s)
        if any(l.parent in later or (l.parent is s.parent and l.parent.instructions.index(l) > position)
               for l in loads):
            return False
    try:
        classifier = AddressClassifier(parallel, Dominators(blocks), body.args, function=body)
    except DifferentiationError:
        return False
    return all(classifier.classify(u.operands[0] if u.opcode == "load" else u.operands[1], u.parent)
               is AddressClass.PRIVATE for u in loads + stores)


def stored_once(signature, body: Function, k: int, parallel: ParallelInfo) -> bool:
    """Whether no element of param ``k`` can be stored twice in a launch: every store outside loops,
    none reachable from another, each at a PRIVATE (thread-injective) index."""
    stores = _only_written(body.args[_array_arg(signature, signature.grid_rank, k)], body.users())
    if not stores or any(s.opcode != "store" for s in stores):
        return False
    accesses = [(s, s.operands[1]) for s in stores]
    return _once_per_element(body, accesses, parallel) or _disjoint_rows_once(body, accesses, parallel)


def loaded_by_own_thread(signature, body: Function, k: int, parallel: ParallelInfo) -> bool:
    """Whether param ``k`` is only loaded, outside loops, at PRIVATE indices (one index pattern,
    injective across threads): each element is read by one thread, at most once per load."""
    uses = _terminal_uses(body.args[_array_arg(signature, signature.grid_rank, k)], body.users())
    if not uses or any(u.opcode != "load" or u.operands[0] is not a for u, a in uses):
        return False
    blocks = reachable_blocks(body)
    if any(u.parent not in blocks for u, _ in uses):
        return False
    dom = Dominators(blocks)
    try:
        loops = LoopInfo(blocks, dom)
    except DifferentiationError:
        return False
    if any(loops.in_loop(u.parent) for u, _ in uses):
        return False
    classifier = AddressClassifier(parallel, dom, body.args, function=body)
    return all(classifier.classify(a, u.parent) is AddressClass.PRIVATE for u, a in uses)


def _once_per_element(body: Function, accesses: list, parallel: ParallelInfo) -> bool:
    """Whether the (instruction, address) ``accesses`` run at most once per thread (outside loops,
    none reachable from another) at PRIVATE addresses: at most once per element in a launch."""
    dom = _outside_loops(body, accesses)
    if dom is None:
        return False
    if len({id(inst.parent) for inst, _ in accesses}) != len(accesses):     # two in one block
        return False
    for inst, _ in accesses:
        reach = _reachable_from(inst.parent)
        if any(other is not inst and other.parent in reach for other, _ in accesses):
            return False
    classifier = AddressClassifier(parallel, dom, body.args, function=body)
    return all(classifier.classify(address, inst.parent) is AddressClass.PRIVATE for inst, address in accesses)


def _disjoint_rows_once(body: Function, accesses: list, parallel: ParallelInfo) -> bool:
    """Whether several stores per thread, outside loops, write distinct elements across the launch:
    rows ``a * t + c`` of one column for distinct ``c`` less than ``|a|`` apart
    (``AddressClassifier.disjoint_rows``; a thread writing 4 rows of a stencil's output)."""
    dom = _outside_loops(body, accesses)
    return dom is not None and AddressClassifier(parallel, dom, body.args, function=body).disjoint_rows(accesses)


def _outside_loops(body: Function, accesses: list) -> Dominators | None:
    """The dominator tree of ``body``'s reachable blocks when every access is reachable and in no
    loop (each runs at most once per thread); None otherwise (or for an irreducible body)."""
    blocks = reachable_blocks(body)
    if any(inst.parent not in blocks for inst, _ in accesses):
        return None
    dom = Dominators(blocks)
    try:
        loops = LoopInfo(blocks, dom)
    except DifferentiationError:           # irreducible: no claim
        return None
    return None if any(loops.in_loop(inst.parent) for inst, _ in accesses) else dom


def _reachable_from(block) -> set:
    """Blocks reachable from ``block`` by at least one edge."""
    seen, work = set(), list(block.successors)
    while work:
        b = work.pop()
        if b in seen:
            continue
        seen.add(b)
        work.extend(b.successors)
    return seen


def drop_stores(inner: Function, arg: Argument) -> None:
    """Delete every store and atomic update through ``arg`` (proven unobserved; loads stay); raise
    if the derived function uses it any other way (the primal body did not: an engine bug)."""
    writes = _writes(arg, inner.users(), loads=True)
    if writes is None:
        raise DifferentiationError(f"internal: the derivative @{inner.name} uses %{arg.name} other than as a "
                                   f"load or store address, although the primal does not")
    _delete(writes)


def drop_primal_stores(fn: Function, signature, dropped) -> None:
    """``drop_stores`` for each dropped param of a function taking the body's arguments first (the
    derived function, a reverse kernel's tape-counting function)."""
    for k in dropped:
        drop_stores(fn, fn.args[_array_arg(signature, signature.grid_rank, k)])


def drop_seed_clearing(inner: Function, shadow: Argument) -> bool:
    """Delete the stores of zero through ``shadow`` when they are its only writes (loads stay);
    return whether ``shadow`` is now read-only. Leaves the function unchanged otherwise."""
    uses = _terminal_uses(shadow, inner.users())
    clears = []
    for user, address in uses:
        if user.opcode == "load" and user.operands[0] is address:
            continue
        if user.opcode == "store" and user.operands[1] is address and _is_zero(user.operands[0]):
            clears.append(user)
            continue
        return False
    _delete(clears)
    return True


def write_gradient(inner: Function, shadow: Argument) -> bool:
    """Turn the first of the adjoint's ``d_x[idx] = d_x[idx] + v`` updates into ``d_x[idx] = v``
    when such private load/add/store updates are ``shadow``'s only uses (nothing else reading the
    loads or the sums), none in a loop, and one of them runs before every other on every path (its
    block dominates theirs; in one block, it comes first); return whether it did. Right only when
    the updates of an element are this thread's alone and the element starts at zero (an Out
    array: the caller proves the first, launchers do the second)."""
    uses = _terminal_uses(shadow, inner.users())
    users = inner.users()
    loads = {u: a for u, a in uses if u.opcode == "load" and u.operands[0] is a}
    stores = [(u, a) for u, a in uses if u.opcode == "store" and u.operands[1] is a]
    if not stores or len(loads) + len(stores) != len(uses):
        return False
    updates = []
    for store, address in stores:
        total = store.operands[0]
        if not (isinstance(total, Instruction) and total.opcode == "fadd" and users.get(total) == [store]):
            return False
        old = [o for o in total.operands if o in loads and loads[o] is address and users.get(o) == [total]]
        if len(old) != 1 or old[0].parent is not store.parent:
            return False
        updates.append((store, total, old[0]))
    if len(updates) != len(loads):        # a load outside these updates
        return False
    blocks = reachable_blocks(inner)
    if any(store.parent not in blocks for store, _, _ in updates):
        return False
    dom = Dominators(blocks)
    try:
        loops = LoopInfo(blocks, dom)
    except DifferentiationError:
        return False
    if any(loops.in_loop(store.parent) for store, _, _ in updates):
        return False
    first = next((u for u in updates if all(_runs_before(u, v, dom) for v in updates if v is not u)), None)
    if first is None:
        return False
    store, total, old = first
    store.operands[0] = total.operands[1] if total.operands[0] is old else total.operands[0]
    _delete([total, old])
    return True


def _runs_before(u, v, dom: Dominators) -> bool:
    """Whether update ``u`` (store, sum, load) runs before ``v`` on every path that reaches ``v``."""
    a, b = u[2], v[2]
    if a.parent is b.parent:
        block = a.parent.instructions
        return block.index(u[0]) < block.index(b)
    return dom.dominates(a.parent, b.parent)


def _is_zero(v: Value) -> bool:
    return isinstance(v, Constant) and (v.kind == "zero" or (v.kind == "scalar" and v.value == 0))


def _delete(instructions: list[Instruction]) -> None:
    for inst in instructions:
        inst.parent.instructions.remove(inst)


def lean_derivative(signature, body: Function, inner: Function, mode: str, shadowed: list[int],
                    parallel: ParallelInfo) -> LeanPlan:
    """Apply the transformations to ``inner`` (the derived function: primal args, then one shadow
    arg per ``shadowed`` param in order) and say what changed."""
    dropped = write_only_params(signature, body, parallel)
    drop_primal_stores(inner, signature, dropped)
    consumed, written = set(), set()
    if mode == "vjp":
        for k in shadowed:
            p = signature.params[k]
            if not (p.is_array and p.type.writes and p.dtype.is_float):
                continue
            shadow = inner.args[len(body.args) + shadowed.index(k)]
            if k in dropped and p.type.intent == "out" and stored_once(signature, body, k, parallel):
                if drop_seed_clearing(inner, shadow):
                    consumed.add(k)
            elif all(u.opcode == "load" and u.operands[0] is a for u, a in _terminal_uses(shadow, inner.users())):
                consumed.add(k)     # already never written (an InOut updated only by atomic adds)
        for k in shadowed:
            p = signature.params[k]
            if p.is_array and p.type.intent == "in" and p.dtype.is_float \
                    and loaded_by_own_thread(signature, body, k, parallel) \
                    and write_gradient(inner, inner.args[len(body.args) + shadowed.index(k)]):
                written.add(k)
    return LeanPlan(frozenset(dropped), frozenset(consumed), frozenset(written))


__all__ = ["LeanPlan", "drop_primal_stores", "lean_derivative", "loaded_by_own_thread", "param_accesses", "stored_once",
           "write_only_params"]
