"""Shared-memory races between the threads of a block, refused at compile time.

On a GPU, two threads of a block that touch one shared element between the same two barriers,
one of them writing, race: the order is undefined (warp-synchronous code such as
``if (tid < 32) { v[tid] += v[tid + 16]; ... }`` without ``__syncwarp`` is such a race since
Volta). The host runs a block's threads one after another between barriers (block_split.py), so
such code would run, deterministically and wrongly, and the reverse sweep of it would be wrong on
every target. ``check_shared_races`` proves every pair of conflicting accesses apart, or raises
``SharedMemoryRaceError`` naming both.

* **Intervals** (races/intervals.py): a barrier (``sync_threads``, and the block operations, which
  hold barriers on every target) ends one. Two accesses may run in one interval when one barrier (or
  the entry) reaches both without passing another barrier under one choice of sides of the
  block-uniform branches taken once per interval; accesses of different intervals never conflict.
* **Pairs**: in one interval, every two accesses of the same shared array (an access with itself
  included) of which one writes; two atomics do not race.
* **Roots**: a shared-array argument, or a phi/select choosing whole arrays alike for the block
  (double buffers; two phis of one block that start apart and swap are apart).
* **Proofs** on byte offsets, affine forms (races/forms.py) in the thread's index per axis, values
  alike for the block in the interval, trip counts of barrier-free loops and permuted thread
  indices; the branches on every path to an access restrict where it runs (``t < s``, ``t == 0``,
  ``lane == 0``, a loop's bound; races/guards.py). (1) Equal thread coefficients and a constant
  difference of the rest: the accesses of two different threads lie apart (mixed-radix gap). (2) The byte ranges of
  the two accesses over all their threads are disjoint, with symbolic bounds (``if (t < s) s[t] +=
  s[t + s]``: elements [0, s) and [s, 2s)). (3) Enumeration of the block's threads and the trip
  counts, the guards evaluated bit-exactly: no byte one thread touches is touched by another; where
  the addresses or guards depend on values alike for the block with finite value sets
  (races/values.py: a sorting network's stride), once per combination of their values.
  Offsets known modulo 2^64 (index arithmetic without no-wrap flags) are enumerated too, their
  values compared while they are far below 2^64.
  A value alike for the block that both accesses name must be one instance for both in the interval
  (``Intervals.same_instance``); where only their guards name one that is not (an enclosing loop's
  counter, a store in one trip and a load in the next), the enumeration runs with those guards
  ignored (a superset of each access's bytes). Anything else is refused.
* Failure paths of bounds checks and traps are ignored: a launch where one is taken raises.

It relies on the assumption the uniformity analysis makes (analysis/uniformity.py): values
loaded at one address by the whole block are alike, which holds when this check passes.
"""
from __future__ import annotations

from ...errors import GlobalMemoryRaceError, SharedMemoryRaceError
from ...ir.core import Argument, Function
from ...ir.cfg import dominator_sets
from .global_arrays import LOAD_STORE, at_loaded_index, in_place, loaded_index_message
from .messages import message as _message, where as _where
from .forms import Forms, Modular
from .guards import guards
from .intervals import Intervals
from .values import ValueSets, fold_constant_branches
from .proofs import Proofs, symbol_ids
from .accesses import collect_accesses, apart, drop_failure_paths, shared_pointer, switched_roots, thaw_arguments


# --- accesses, intervals and guards ---------------------------------------------------------------


# --- the proofs -----------------------------------------------------------------------------------


# --- the check ------------------------------------------------------------------------------------

def check_shared_races(fn: Function, tids: list[Argument], block: tuple[int, ...], shared: list[Argument],
                       names: list[str], kernel: str, thread_names: list[str] | None = None,
                       warp_size: int | None = None, arrays: dict | None = None, sizes: dict | None = None,
                       witnessed_only: bool = False, plain: bool = False) -> None:
    """Raise SharedMemoryRaceError for the first pair of accesses of one shared array that two
    threads of a block may make between the same two barriers, one writing (module docstring).
    ``shared`` are the body's shared-array arguments, ``names`` their source names. ``arrays`` (global
    array argument -> name, check_block_kernel picks them) are checked too and raise GlobalMemoryRaceError:
    every pair as for shared arrays, two writes of one element only with a witness in block 0
    (``Proofs.first_block_witness``); ``witnessed_only`` (CUDA), only a plain load and a plain store of one
    element (an in-place stencil ``x[i] = x[i] + x[i + 1]``) and only when the enumeration finds two
    such threads or the read's index is loaded from memory; what it cannot decide (offsets through
    runtime values, RAJAPerf's ``px[i + off * 4]``) is left alone (``plain``: a kernel without blocks,
    refused with a witness only, not for a read at a loaded index: a gather after a scatter whose indices
    may not meet). ``sizes``: bytes of the shared
    arrays whose accesses are bounds-checked. ``fn`` (a body: status pointer last) is changed: its
    failure paths are dropped."""
    arrays = arrays or {}
    drop_failure_paths(fn)
    thaw_arguments(fn)
    sets = ValueSets(fn)
    fold_constant_branches(fn, sets)
    intervals = Intervals(fn, sets.never_taken)
    dom = dominator_sets(fn)
    forms = Forms(fn, tids, block, intervals.unstable, dom, shared, warp_size)
    intervals.settle(forms.divergence)
    roots = set(shared) | set(arrays)
    accesses = collect_accesses(forms, fn, roots, kernel, set(shared))
    if witnessed_only:
        accesses = in_place(accesses, arrays)
    if not any(x.writes for x in accesses):
        return
    facts = guards(forms, fn, dom)
    for x in accesses:
        x.node = intervals.node(x.inst)
        x.facts, x.conditions = facts[x.inst.parent]
        nonnegative = _nonnegative_symbols(x.facts)
        if (x.offset is None or isinstance(x.offset, Modular)) and nonnegative and not isinstance(x.root, tuple):
            # a guard such as ``h > 0`` makes ``t + h`` exact (no wrap): bounds then apply to it
            root, offset = shared_pointer(forms.assuming(nonnegative), x.pointer, roots)
            if root is x.root and offset is not None and (x.offset is None or not isinstance(offset, Modular)):
                x.offset = offset
    proof = Proofs(forms, facts, sets, intervals, sizes)
    for i, a in enumerate(accesses):
        for b in accesses[i:]:
            if apart(a.root, b.root, roots) or not (a.writes or b.writes) or (a.kind == "atomic" == b.kind) \
                    or not intervals.together(a.node, b.node):
                continue
            if witnessed_only and a.root in arrays:     # CUDA: two threads found to meet, or a read at a loaded index
                if {a.kind, b.kind} != LOAD_STORE:
                    continue
                alike = proof._alike(a, b, symbol_ids(a) & symbol_ids(b))
                if alike and proof.conflict(a, b) is None:
                    continue
                found = proof._witness(a, b) if alike else ()
                if found == () and alike:       # an index of the whole thread index: two threads of block 0
                    found = proof.first_block_witness(a, b) or ()
                if found:
                    raise GlobalMemoryRaceError(_message(forms, a, b, found, arrays[a.root], kernel,
                                                         thread_names, "global", plain))
                read = a if a.kind == "load" else b
                write = b if read is a else a
                if found == () and not plain and at_loaded_index(read.pointer, write.pointer):
                    raise GlobalMemoryRaceError(loaded_index_message(
                        _where(forms, read, "read", arrays[a.root], thread_names),
                        _where(forms, write, "write", arrays[a.root], thread_names), arrays[a.root], kernel))
                continue
            touched = switched_roots(a.root, roots) or {a.root}
            writes = touched <= set(arrays) and "load" not in (a.kind, b.kind)
            if writes and ((a.kind == "store" == b.kind and a.inst.operands[0] is b.inst.operands[0]
                            and not forms.divergence.is_varying(a.inst.operands[0]))
                           or (a is b and not forms.divergence.is_varying(a.pointer))):
                continue            # one value alike for the block (every thread storing its block's sum), or
                # one element for the block (``y[block_id()] = v``: the reverse sweep's store seeds refuse it)
            found = proof.conflict(a, b)
            if writes and found == ():
                # two writes of a global array: refused with two threads of block 0 that make them only
                # (the forms seldom follow an output's index: a row stride is a parameter)
                found = proof.first_block_witness(a, b)
            if found is not None:
                touched = sorted(touched, key=lambda r: r.index)
                array = "/".join(names[shared.index(r)] if r in shared else arrays[r] for r in touched)
                raise (SharedMemoryRaceError if set(touched) & set(shared) else GlobalMemoryRaceError)(
                    _message(forms, a, b, found, array, kernel, thread_names,
                             "shared" if set(touched) & set(shared) else "global"))


def _nonnegative_symbols(facts) -> frozenset:
    """Ids of the symbols that the facts bound below by 0 (``-c * v + k <= 0`` with k >= 0)."""
    found = set()
    for f, kind in facts:
        if len(f.coef) == 1 and f.const >= 0:
            (atom, c), = f.coef.items()
            if atom[0] == "v" and (c < 0 or (kind == "eq" and f.const == 0)):
                found.add(atom[1])
    return frozenset(found)
