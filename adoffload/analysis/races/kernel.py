"""The block race check of a kernel (shared.py) with the global arrays its source style calls for.

Our language bounds-checks shared-array indices and the check may take every array the body writes
(global_races.py: refused unless proven apart); CUDA sources read beside their atomics in
compare-and-swap loops, so only arrays they both load and store are checked, for load/store pairs
found to meet (global_arrays.py). ``lane_id()`` is the thread's rank modulo 32 on NVIDIA and the host,
modulo 64 on AMD and ``cpu:wave64``: a body that uses it must be race-free with both.
"""
from __future__ import annotations

from ...language import collectives
from .global_arrays import loaded_and_stored
from .global_accesses import written_arrays
from .messages import shared_array_name
from .shared import check_shared_races

WARP_SIZES = (32, 64)      # lane_id()'s period on the targets (NVIDIA and host; AMD and 'cpu:wave64')


def check_block_kernel(kernel, thread_names: list[str] | None = None, style: str | None = None) -> None:
    """``check_shared_races`` on a block kernel's body (a Kernel with ``block`` and ``shared``):
    the first ``grid_rank`` arguments are the thread ids, the shared arrays come before the status.
    ``style`` "ado" (our language): shared-array accesses are bounds-checked unless ``bounds_check=False``
    (so an index's low bits fix it, ``Proofs._in_bounds``), and the array parameters the body
    writes are checked too, refused unless proven apart (global_races.py). "cuda": the array parameters
    the body both loads and stores are checked for load/store pairs, refused where two threads are found
    to meet (global_arrays.py; CUDA's compare-and-swap loops read beside atomics)."""
    from ... import ir
    module = ir.import_module(kernel.module_text())
    fn = module.functions[kernel.body_name]
    rank = kernel.signature.grid_rank

    def arguments(fn):
        shared = fn.args[-1 - len(kernel.shared):-1]
        if style == "ado":
            arrays = {a: a.name for a in written_arrays(fn, fn.args[rank:len(fn.args) - 1 - len(kernel.shared)], rank)}
        elif style == "cuda":
            arrays = loaded_and_stored(fn, {p.name for p in kernel.signature.params if p.is_array})
        else:
            arrays = {}
        sizes = {a: s.nbytes for a, s in zip(shared, kernel.shared)} \
            if style == "ado" and getattr(kernel, "bounds_check", False) else None
        return shared, arrays, sizes
    shared, arrays, sizes = arguments(fn)
    if not kernel.shared and not arrays:
        return
    names = [shared_array_name(s.name) for s in kernel.shared]
    calls = {getattr(i.callee, "name", "") for b in fn.blocks for i in b.instructions if i.opcode == "call"}
    # lane_id() is thread_rank % 32 on NVIDIA and the host, % 64 on AMD and 'cpu:wave64': the body
    # must be race-free with either (each check drops failure paths from a copy of its own)
    for k, warp_size in enumerate(WARP_SIZES if collectives.callee("lane_id") in calls else (None,)):
        if k:
            fn = ir.import_module(kernel.module_text()).functions[kernel.body_name]
            shared, arrays, sizes = arguments(fn)
        check_shared_races(fn, fn.args[:rank], tuple(kernel.block), shared, names, kernel.name, thread_names,
                           warp_size, arrays, sizes, witnessed_only=style == "cuda")


def check_plain_kernel(kernel) -> None:
    """A kernel without blocks has no barrier: a thread reading an element of an array that another
    thread writes in the same launch races (``z[i] = y[(i + 1) % n]`` after ``y[i] = ...``), and the
    derivatives pair the read with a write the primal did not see. The arrays it both loads and stores,
    unless every access is the thread's own element, get the CUDA check ("witnessed": refused where two
    threads of the first window of ``_PLAIN_WINDOW`` threads per axis are found to meet; a read at an
    index loaded from memory is not refused here: ``x[p[i]] = v; y = x[q[i]]`` races only where p and q
    meet)."""
    from ... import ir
    if getattr(kernel, "loaded_and_stored", None) == frozenset():
        return          # the front end saw no array parameter both loaded and stored: nothing to check
    module = ir.import_module(kernel.module_text())
    fn = module.functions[kernel.body_name]
    rank = kernel.signature.grid_rank
    if rank > len(_PLAIN_WINDOW):
        return
    loaded = loaded_and_stored(fn, {p.name for p in kernel.signature.params if p.is_array})
    shared_elements = set(written_arrays(fn, list(loaded), rank))       # not only the thread's own
    arrays = {a: name for a, name in loaded.items() if a in shared_elements}
    if arrays:
        check_shared_races(fn, fn.args[:rank], _PLAIN_WINDOW[rank - 1], [], [], kernel.name, None,
                           None, arrays, None, witnessed_only=True, plain=True)


_PLAIN_WINDOW = ((16,), (8, 8), (4, 4, 4))      # threads enumerated per grid rank
