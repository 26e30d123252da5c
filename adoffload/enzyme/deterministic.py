"""Deterministic reverse mode: shadow contributions that may race go to a per-thread log.

``reverse(..., deterministic=True)`` promises bitwise-identical gradients run to run. A float
sum depends on its order, and the order of atomic adds (SHARED shadow updates) and of the
per-target uniform adds (UNIFORM ones: a host atomic, or a warp shuffle tree + atomic) depends
on thread scheduling. So in deterministic mode:

* PRIVATE updates (index injective in the thread id) stay plain adds: only one thread touches
  the element, in program order.
* Every SHARED contribution, and every UNIFORM one, is **appended to the thread's contribution
  log** instead of being added. UNIFORM contributions outside loops are first summed in a
  per-thread register in program order (as in the default mode) and logged once at the end of
  the reverse sweep; the adjoints of Active scalars likewise.
* After the launch the host reduces the log in a fixed order (``reduce_log``).

Log protocol (the tape protocol of tape.py, with a second buffer):

1. Entry layout: 16 bytes, two little-endian words ``{i64 key, f64 value}`` with
   ``key = (shadow_id + 1) << 48 | byte_offset``: ``shadow_id`` says which shadow argument
   (``LogSpec.shadows[shadow_id]`` is its index among the derived function's arguments),
   ``byte_offset`` is the element's offset in that shadow. ``value`` is the contribution
   widened to f64 (exact for f32). A key of 0 is an unused entry (the buffer starts zeroed).
2. The derived function gets two trailing arguments, after the tape's if it has a dynamic
   tape: ``ptr %log, i64 %log_offset`` -- this thread writes its entries sequentially, in
   program order of the reverse sweep, from ``log + log_offset`` (bytes).
3. The counting function (``ReverseResult.count_function``) takes the primal's arguments, then
   ``ptr %tape_bytes`` if the tape is dynamic, then ``ptr %log_bytes``; it runs the primal and
   stores each count as one i64. Log bytes are counted per visit of each primal block (the
   reverse sweep visits the reverse of a block once per forward visit), so a count is exact,
   or an over-estimate where a rule's own control flow skips an append (the entry stays 0).
4. The host takes the exclusive prefix sum of the per-thread byte counts over the linear
   thread index, allocates ``sum`` bytes (zeroed), launches, and calls ``reduce_log``. Since
   each thread's slice follows the previous thread's, **the position in the log is the
   (linear thread index, program order) order**; ``reduce_log`` sums each element's
   contributions sequentially in that order, in f64 starting from 0, and adds the total
   (rounded once to the shadow's dtype) to the shadow element.

Same inputs, same grid -> same log, element for element -> bitwise the same gradient, on any
target, any number of host workers, any GPU scheduling.

Limits. The log is reduced after the launch, so a contribution is invisible to a later *read*
of the same shadow by the same thread's reverse sweep (the reverse of a store or of an atomic
add reads and clears the shadow). That happens only when, in forward order, a write to an
array can precede a logged load of the same array in one thread; ``check_no_read_after_log``
refuses such functions with a precise error instead of returning a wrong gradient. The
primal's own float atomics (``ado.atomic_add`` of an energy, say), which the vjp kernel also
runs, are not routed through the log: primal outputs of a vjp kernel are not part of the
guarantee, only the gradients are.

Block kernels: adds into shadow shared memory are read back inside the kernel, so they are not
logged (reverse_accumulate.py): they stay atomic in an order the target fixes (codegen/blocks.py
on the host, codegen/gpu/ordered_shared.py on GPUs); nor are SHARED-classified updates of the thread's
own memory (a local array's shadow): only that thread adds there.

Cost: 16 bytes of log per SHARED contribution (and per UNIFORM one inside a loop), a counting
launch of the primal to size it, and a host reduction (O(entries + shadow size), ``np.bincount``); on a GPU
the log is copied back to the host before the reduction.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..errors import DifferentiationError
from ..ir.builder import Builder
from .counting import add_counting_function
from .rules import describe
from .tape import TapeSpec
from ..ir.core import Argument, Block, Function, FunctionType, Instruction, Value, const, f32, f64, i8, i64, ptr, void

ENTRY_BYTES = 16
SHADOW_SHIFT = 48
OFFSET_MASK = (1 << SHADOW_SHIFT) - 1
MAX_SHADOWS = (1 << (63 - SHADOW_SHIFT)) - 1


@dataclass(frozen=True)
class LogSpec:
    """The contribution log of a derived function (see the module docstring)."""
    shadows: tuple[int, ...]     # shadow id -> index of that shadow among the derived function's args
    count_function: str          # the counting function (log bytes are its last counter)


def shadow_root(v: Value, seen: set | None = None) -> Argument | None:
    """The argument a shadow pointer points into (through GEPs, casts, and phis/selects whose
    inputs all agree), or None when it cannot be told statically."""
    seen = set() if seen is None else seen
    while isinstance(v, Instruction) and v.opcode in ("getelementptr", "bitcast", "addrspacecast"):
        v = v.operands[0]
    if isinstance(v, Argument):
        return v
    if isinstance(v, Instruction) and (v.opcode == "alloca" or v.opcode == "call"
                                       and getattr(v.callee, "name", "") == "adoffload.shadow.alloc"):
        return _PRIVATE
    if isinstance(v, Instruction) and v.opcode in ("phi", "select"):
        if v in seen:
            return _CYCLE
        seen.add(v)
        inputs = v.operands if v.opcode == "phi" else v.operands[1:]
        roots = {shadow_root(o, seen) for o in inputs} - {_CYCLE}
        if len(roots) == 1:
            return roots.pop()
        return None
    return None


def _nearby_location(load: Instruction) -> str:
    """Where a load without a source location comes from: its address or that address's inputs
    (LLVM's instcombine merges the loads of ``a[i] if c else b[j]`` into one load of a phi/select)."""
    if load.location is not None:
        return ""
    frontier, seen = [load.operands[0]], set()
    for _ in range(4):              # the address, its inputs, theirs...: the nearest with a location
        for candidate in frontier:
            if isinstance(candidate, Instruction) and candidate.location is not None:
                return f", from the address at {candidate.location}"
        seen.update(id(v) for v in frontier)
        frontier = [o for v in frontier if isinstance(v, Instruction) for o in v.operands if id(o) not in seen]
    near = [i.location for i in (load.parent.instructions if load.parent is not None else []) if i.location is not None]
    return f", near {near[0]}" if near else ""


_CYCLE = Argument(ptr, "<cycle>", -1)       # a phi reached again through its own cycle: no new root
_PRIVATE = Argument(ptr, "<private>", -1)   # a thread's own shadow (a local array's): never logged
PRIVATE_ROOT = _PRIVATE                     # shadow_root's answer for a thread's own memory


@dataclass(eq=False)
class ContributionLog:
    """Builds the appends of one derived function and remembers what the counting needs."""
    fn: Function
    entry: Builder                               # positioned among the entry block's allocas
    shadows: list[Argument]                      # every shadow argument; the index is the shadow id
    bytes_per_block: dict[Block, int] = field(default_factory=dict)
    logged: list[tuple[Argument, Instruction | None]] = field(default_factory=list)
    readbacks: list[tuple[Argument | None, Instruction]] = field(default_factory=list)
    cursor: Instruction | None = None

    def append(self, b: Builder, shadow_pointer: Value, value: Value, block: Block,
               origin: Instruction | None = None, forward: Value | None = None) -> None:
        """Emit ``log.push(key(shadow_pointer), f64(value))`` with ``b``; ``block`` is the forward
        block whose reverse this is, ``origin`` the forward load the contribution comes from,
        ``forward`` the forward sweep's shadow pointer (``shadow_pointer`` may be its reload)."""
        root = shadow_root(shadow_pointer if forward is None else forward)
        if root is None or root is _CYCLE:
            where = f" (the adjoint of {describe(origin)}{_nearby_location(origin)})" if origin is not None else ""
            raise DifferentiationError(f"deterministic mode: cannot tell which shadow argument "
                                       f"{shadow_pointer.ref()}{where} points into (its address mixes "
                                       f"several: a phi or select of two arrays, as LLVM makes of "
                                       f"'x[i] if c else w[i]'). Use the default "
                                       f"(atomic) mode for this kernel, or load each array separately")
        if root not in self.shadows:
            raise DifferentiationError(f"deterministic mode: {shadow_pointer.ref()} points into "
                                       f"{root.name}, which is not a shadow argument")
        if len(self.shadows) > MAX_SHADOWS:
            raise DifferentiationError(f"deterministic mode supports at most {MAX_SHADOWS} shadow arguments")
        if value.type not in (f32, f64):
            raise DifferentiationError(f"deterministic mode logs float and double contributions, "
                                       f"got {value.type}")
        if self.cursor is None:
            self.cursor = self.entry.alloca(ptr, "log.cursor")
        shadow_id = self.shadows.index(root)
        offset = b.sub(b.cast("ptrtoint", shadow_pointer, i64), b.cast("ptrtoint", root, i64), "log.offset")
        key = b.add(offset, const(i64, (shadow_id + 1) << SHADOW_SHIFT), "log.key")
        wide = value if value.type == f64 else b.cast("fpext", value, f64)
        top = b.load(ptr, self.cursor, "log.top")
        b.store(key, top)
        b.store(wide, b.gep(i8, top, [const(i64, 8)], "log.value", inbounds=False))
        b.store(b.gep(i8, top, [const(i64, ENTRY_BYTES)], "log.next", inbounds=False), self.cursor)
        self.bytes_per_block[block] = self.bytes_per_block.get(block, 0) + ENTRY_BYTES
        self.logged.append((root, origin))

    def note_readback(self, shadow_pointer: Value, origin: Instruction) -> None:
        """The reverse of ``origin`` (a store or atomic add) reads and clears a shadow."""
        root = shadow_root(shadow_pointer)
        if root is not _PRIVATE:            # a thread-private shadow cannot hold logged contributions
            self.readbacks.append((None if root is _CYCLE else root, origin))

    @property
    def used(self) -> bool:
        return bool(self.bytes_per_block)

    def attach(self) -> None:
        """Add ``ptr %log, i64 %log_offset`` to the function and point the cursor at the slice."""
        fn = self.fn
        log = Argument(ptr, "log", len(fn.args))
        offset = Argument(i64, "log_offset", len(fn.args) + 1)
        fn.args += [log, offset]
        fn.function_type = FunctionType(void, fn.function_type.params + (ptr, i64))
        # placed again: removing an unused tape slot from the entry block may have moved the end
        self.entry.position_before_terminator(fn.entry)
        self.entry.store(self.entry.gep(i8, log, [offset], "log.base", inbounds=False), self.cursor)


def check_no_read_after_log(log: ContributionLog, blocks: list[Block]) -> None:
    """Refuse when a write to a logged shadow's array can precede, in forward order within one
    thread, a logged load of it: its reverse would read the shadow before the log is reduced."""
    logged_roots = {root for root, _ in log.logged}
    for root, write in log.readbacks:
        if root is not None and root not in logged_roots:
            continue
        after = _reachable_after(write, blocks)
        for logged_root, load in log.logged:
            if (root is None or logged_root is root) and (load is None or load in after):
                what = f"the load at {load.location}" if load is not None and load.location else "a load"
                raise DifferentiationError(
                    f"deterministic mode: {describe(write)} writes {logged_root.name[2:]}'s array and can come "
                    f"before {what} of it whose adjoint goes to the contribution log, so the store's "
                    f"reverse would miss that contribution. Use the default (atomic) mode for this "
                    f"kernel, or read the value before writing the array")


def _reachable_after(inst: Instruction, blocks: list[Block]) -> set[Instruction]:
    """Instructions that may run after ``inst`` in the same call (rest of its block, then the
    blocks reachable from its successors, its own block included through a loop)."""
    block = inst.parent
    out = set(block.instructions[block.instructions.index(inst) + 1:])
    stack, seen = list(block.successors), set()
    while stack:
        b = stack.pop()
        if b in seen:
            continue
        seen.add(b)
        out.update(b.instructions)
        stack.extend(b.successors)
    return out


# ----------------------------------------------------------------------------- host side

def reduce_log(log_words: np.ndarray, shadows: list[np.ndarray]) -> None:
    """Add a launch's contribution log into its shadows in a fixed order (in place).

    ``log_words`` is the log buffer as i64 words (entries laid out by linear thread index,
    then program order); ``shadows[shadow_id]`` the shadow array. Each element's contributions
    are summed one after the other in log order, in f64 from 0, and the total is added once to
    the element. ``np.bincount`` with weights is that sequential loop (checked bitwise against a
    Python loop in tests/determinism); numpy's ``sum`` is pairwise and would not do.
    """
    words = np.ascontiguousarray(log_words).view(np.int64)
    entries = words[:words.size - words.size % 2].reshape(-1, 2)
    keys = np.ascontiguousarray(entries[:, 0])
    values = np.ascontiguousarray(entries[:, 1]).view(np.float64)
    if not keys.all():
        used = keys != 0
        keys, values = keys[used], values[used]
    if not keys.size:
        return
    # one index space for all shadows: shadow k's elements start at bases[k]
    sizes = np.array([s.size for s in shadows], np.int64)
    bases = np.concatenate([[0], np.cumsum(sizes)])
    shifts = np.array([int(s.itemsize).bit_length() - 1 for s in shadows], np.int64)
    ids = (keys >> SHADOW_SHIFT) - 1
    if ids.min() < 0 or ids.max() >= len(shadows):
        raise DifferentiationError(f"corrupt contribution log: shadow ids {ids.min()}..{ids.max()} "
                                   f"for {len(shadows)} shadows")
    elements = (keys & OFFSET_MASK) >> shifts[ids]
    bad = elements >= sizes[ids]
    if bad.any():
        where = int(np.argmax(bad))
        raise DifferentiationError(f"corrupt contribution log: element {int(elements[where])} of shadow "
                                   f"{int(ids[where])}, which has {int(sizes[ids[where]])} elements")
    flat_index = bases[ids] + elements
    totals = np.bincount(flat_index, weights=values, minlength=int(bases[-1]))
    hit = np.bincount(flat_index, minlength=int(bases[-1])) > 0
    for k, shadow in enumerate(shadows):
        flat, part, touched = shadow.reshape(-1), totals[bases[k]:bases[k + 1]], hit[bases[k]:bases[k + 1]]
        if touched.any():
            flat[touched] += part[touched].astype(shadow.dtype)

__all__ = ["LogSpec", "ContributionLog", "shadow_root", "check_no_read_after_log",
           "reduce_log", "ENTRY_BYTES"]


def attach_log(rev, result, tape_bytes: dict[int, int] | None) -> None:
    """Deterministic mode, at the end of a reverse derivation (``rev``: reverse._Reverser): the log
    arguments (after the tape's) and one counting function for the dynamic tape (``tape_bytes``
    per primal block, if any) and the log."""
    check_no_read_after_log(rev.log, rev.blocks)
    rev.log.attach()
    primal_of = {new: old for old, new in rev.block_map.items()}
    log_bytes = {rev.primal.blocks.index(primal_of[block]): n for block, n in rev.log.bytes_per_block.items()}
    counters = ([("tape_bytes", tape_bytes)] if tape_bytes is not None else []) + [("log_bytes", log_bytes)]
    count = add_counting_function(rev.module, rev.primal, f"{rev.fn.name}.log_count", counters,
                                  observed=() if rev.failure_arg is None else (rev.failure_arg,))
    if tape_bytes is not None:
        result.tape = TapeSpec(count.name)
    result.count_function = count
    result.log = LogSpec(tuple(root.index for root in rev.log.shadows), count.name)
