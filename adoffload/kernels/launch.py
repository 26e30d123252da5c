"""Launching a kernel with numpy arrays (or GPU arrays): check arguments, pick the variant, move data by intent.

Every argument problem is reported before anything runs, naming the parameter (arguments.py), and
so are shadows whose shapes do not match their primals (shadows.py) and arrays that share memory
with one the kernel writes (overlap.py). The bounds facts the grid proves (``x[i]`` with
``grid[0] <= x.shape[0]``) select a variant whose checks for those accesses are compiled away.

All of that depends only on the launch's argument signature, so the first launch of a signature
builds a plan (launch_plan.py) and later ones reuse it: a cache hit reads each argument's type,
dtype, shape and flags, the data addresses, checks the overlaps and packs the slots
(launch_run.py). Reverse kernels' launcher-filled buffers are sized per launch (hidden_buffers.py).
A host plan of one chunk gets a native entry at its second launch (native_entry.py), which
``Kernel.__call__`` tries before all of this: machine code checking exactly that signature, handing
any other launch to the next entry of the kernel's chain (up to four signatures) or to this path.
"""
from __future__ import annotations

from .arguments import MAX_THREADS, Resident, bind_arguments, check_argument, normalize_grid
from .hidden_buffers import reduce_contribution_log, sized_buffers, tape_levels, with_hidden_arguments
from .launch_plan import (LaunchPlan, Uncacheable, arrays_to_zero, call_key, check_block_grid, facts_proven_by,
                          full_bind, plans_of, proven_facts)
from .launch_run import (SlotValueError, flat_values, loaded_function, run_in_place, run_plan, shared_names,
                         source_file)
from .native_entry import native_function
from .overlap import check_no_written_overlap

__all__ = ["MAX_THREADS", "Resident", "arrays_to_zero", "bind_arguments", "check_argument", "check_block_grid",
           "check_no_written_overlap", "facts_proven_by", "flat_values", "launch", "loaded_function",
           "normalize_grid", "proven_facts", "reduce_contribution_log", "shared_names", "sized_buffers",
           "source_file", "tape_levels", "with_hidden_arguments"]


def launch(kernel, args: tuple, kwargs: dict, grid, device="cpu", hidden: dict | None = None):
    """Check the arguments, compile (or reuse) the right variant and run it on ``device``.
    ``hidden``: launcher-filled params already filled (a counting kernel of a second-order tape)."""
    key = None
    if not hidden:
        plan = kernel._last_plan
        values = plan.matches(args, kwargs, grid, device) if plan is not None else None
        if values is not None and plan.quick_sources:          # values: the slot sources of GPU arrays
            try:
                if run_in_place(plan, values):
                    return None
            except SlotValueError:
                pass
            values = None                  # the synchronous switch, or a scalar: the path below
        if values is None:
            try:
                key, residents = call_key(args, kwargs, grid, device)
                plan = plans_of(kernel).get(key)
            except (Uncacheable, TypeError):          # TypeError: an unhashable device or grid
                key = plan = None
            if plan is not None:
                values = plan.bind(args, kwargs, residents)
                kernel._last_plan = plan
        if values is not None:
            # the signature's second launch makes its native entry, linked at the head of the kernel's chain
            if not plan.native_tried:
                native_function(plan)
            try:
                return run_plan(plan, values, None, launch)
            except SlotValueError:
                pass        # a scalar its slot cannot hold as given: the full path converts or refuses it
    from ..runtime import get_device
    plain_grid = grid
    values, grid = full_bind(kernel, args, kwargs, grid)
    plan = LaunchPlan(kernel, values, grid, get_device(device), bool(hidden))
    if key is not None:
        plan.cache_as(plans_of(kernel), key, args, kwargs, residents, plain_grid, device)
    return run_plan(plan, values, hidden, launch)
