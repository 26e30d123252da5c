"""The grid-stride loop of NVPTX reduction entries: few threads, many elements each.

A kernel whose uniform-address atomics are deferred (codegen/gpu/reductions.py) pays one atomic
per block, so the fewer blocks the better -- as long as they fill the GPU. Its entry
(abi.add_gpu_entry) therefore loops: GPU thread ``t`` of ``T`` launched threads handles the
groups of k logical ids starting at ``t*k, t*k + T*k, t*k + 2*T*k, ...``, summing into the
same register accumulators, and the block combines them once at the end. Any launch size is
correct (``ceil(total / k)`` threads make one group each, as before); launchers that know
the entry loops (``Compiled.grid_stride``) launch about one resident wave
(codegen/gpu/vectorize.py ``launch_threads``).

Per thread, where ``fast`` holds (every data array 16-byte aligned and every thread-independent
check passing, codegen/gpu/uniform_checks.py; uniform across the launch):

1. ``UNROLL`` groups per iteration while all of them are whole: U*k unguarded body calls,
   so each thread keeps U 128-bit loads per array in flight (what tuned CUDA reductions do);
2. one whole group per iteration (the last few groups);
3. the grid's final partial group, element by element.

Otherwise every group runs element by element with the body's checks (scalar, correct).
A body with a loop of its own gets one loop and no separate fast path (``has_loop``).

The fast loops count in 32 bits wherever the largest group index they can reach (``whole groups
+ UNROLL * threads``) fits (``NARROW_LIMIT``; a test on kernel arguments and the launch, uniform):
64-bit counters cost two instructions per add and compare and about seven registers, which on
the H200 left RAJAPerf's ``basic_pi_reduce`` (no loads: issue-bound) at 44 registers, five blocks
per multiprocessor and 62 instructions per two elements, against CUDA's 38, six and 52 (ptxas
-v, cuobjdump; with 32-bit counters: 35 registers, about 48 instructions). Larger grids keep 64
bits in a loop that is not unrolled: a kernel's register count is its largest path's, and the
unrolled 64-bit copy would set it (46 for pi_reduce).
"""
from __future__ import annotations

import re
from collections.abc import Callable

from llvmlite import ir

_I32, _I64 = ir.IntType(32), ir.IntType(64)
# the fast loops count in 32 bits while every group index they reach stays at or below this
NARROW_LIMIT = 2**32 - 1
# Groups per iteration of the fast loop: two 128-bit loads per array in flight per thread, as in
# benchmarks/cuda/rajaperf.cu's tuned reductions.
UNROLL = 2


def has_loop(module, body_name: str) -> bool:
    """Whether the body (in a parsed ``llvmlite.binding`` module) has a cycle in its CFG. Such
    a body does much work per element and hides memory latency by itself: its entry gets no
    unrolled copies and no separate fast path (each copy of a loop nest costs compile time)."""
    text = str(module.get_function(body_name))
    successors: dict[str, list[str]] = {}
    current = "entry"
    for line in text.splitlines():
        label = _LABEL.match(line)
        if label:
            current = label.group(1)
            successors.setdefault(current, [])
        elif current is not None and "label %" in line:
            successors.setdefault(current, []).extend(_TARGET.findall(line))
    first = next(iter(successors), None)
    state: dict[str, int] = {}                 # 1: on the DFS stack, 2: done
    stack = [(first, iter(successors.get(first, ())))] if first else []
    if first:
        state[first] = 1
    while stack:
        block, rest = stack[-1]
        target = next(rest, None)
        if target is None:
            state[block] = 2
            stack.pop()
        elif state.get(target) == 1:
            return True
        elif target not in state:
            state[target] = 1
            stack.append((target, iter(successors.get(target, ()))))
    return False


_LABEL = re.compile(r'^("[^"]+"|[-\w.$]+):')
_TARGET = re.compile(r'label %("[^"]+"|[-\w.$]+)')


def emit_grid_stride(b: ir.IRBuilder, linear: ir.Value, total: ir.Value, threads: ir.Value, k: int,
                     fast: ir.Value | None, enter_fast: Callable, run: Callable, unroll: int = UNROLL) -> ir.Value:
    """Emit the loop. ``threads``: GPU threads launched; ``fast``: the uniform fast-path test
    (None: always); ``enter_fast(b)`` states what the test proved (assumes); ``run(b, id)``
    emits the body for one logical linear id; ``unroll``: groups per iteration of the first
    loop (1: a single loop). Returns ``linear*k < total`` (the thread ran something).

    The loops count groups, not ids (id = group*k + j), so LLVM sees that every group starts
    at a multiple of k and keeps the 128-bit accesses in every loop.
    """
    in_range = b.icmp_unsigned("<", b.mul(linear, _I64(k), flags=("nuw",)), total)
    with b.if_then(in_range, likely=True):
        if fast is None:
            _fast_loops_any_width(b, linear, total, threads, k, run, unroll)
        else:
            with b.if_else(fast, likely=True) as (fast_path, checked_path):
                with fast_path:
                    enter_fast(b)
                    _fast_loops_any_width(b, linear, total, threads, k, run, unroll)
                with checked_path:
                    _loop(b, linear, lambda g: b.icmp_unsigned("<", _first(b, g, k), total),
                          lambda b, g: _elements(b, _first(b, g, k), total, k, run), threads, "checked")
    return in_range


def _first(b, group, k: int):
    return b.mul(group, _I64(k), flags=("nuw",)) if k > 1 else group


def _fast_loops_any_width(b, first_group, total, threads, k, run, unroll: int) -> None:
    """The fast loops with 32-bit counters where no group index they reach passes NARROW_LIMIT
    (``first_group`` is a group of the grid: below it too), else with 64-bit ones."""
    whole_groups = b.udiv(total, _I64(k)) if k > 1 else total
    reach = b.add(whole_groups, b.mul(threads, _I64(max(unroll, 1)), flags=("nuw",)), flags=("nuw",))
    with b.if_else(b.icmp_unsigned("<=", reach, _I64(NARROW_LIMIT)), likely=True) as (narrow, wide):
        with narrow:
            _fast_loops(b, first_group, total, whole_groups, threads, k, run, unroll, _I32)
        with wide:
            _fast_loops(b, first_group, total, whole_groups, threads, k, run, 1, _I64)   # rare: few registers


def _fast_loops(b, first_group, total, whole_groups, threads, k, run, unroll: int, width: ir.IntType) -> None:
    """The loops over whole groups, counting in ``width`` (the caller checked that it holds
    every group index reached); ``run`` gets 64-bit ids."""
    def narrow(v):
        return b.trunc(v, width) if width is not _I64 else v

    def wide(v):
        return b.zext(v, _I64) if width is not _I64 else v
    whole, step = narrow(whole_groups), narrow(threads)
    last_offset = b.mul(step, width(unroll - 1), flags=("nuw",))

    def groups(count):
        def emit(b, g):
            for u in range(count):
                start = _first(b, wide(b.add(g, b.mul(step, width(u), flags=("nuw",)), flags=("nuw",)) if u else g), k)
                for j in range(k):
                    run(b, b.add(start, _I64(j), flags=("nuw", "nsw")) if j else start)
        return emit

    g = narrow(first_group)
    if unroll > 1:
        g = _loop(b, g, lambda g: b.icmp_unsigned("<", b.add(g, last_offset, flags=("nuw",)), whole),
                  groups(unroll), b.mul(step, width(unroll), flags=("nuw",)), "unrolled")
    g = _loop(b, g, lambda g: b.icmp_unsigned("<", g, whole), groups(1), step, "whole")
    if k > 1:                  # the grid's last, partial group (one thread at most)
        start = _first(b, wide(g), k)
        with b.if_then(b.icmp_unsigned("<", start, total)):
            _elements(b, start, total, k, run)


def _elements(b, first, total, k, run) -> None:
    """The ids ``first .. min(first + k, total) - 1`` one by one (``first < total``)."""
    if k == 1:
        run(b, first)
        return
    end = b.select(b.icmp_unsigned("<", b.add(first, _I64(k), flags=("nuw",)), total),
                   b.add(first, _I64(k), flags=("nuw",)), total)
    _loop(b, first, lambda at: b.icmp_unsigned("<", at, end), run, _I64(1), "element")


def _loop(b: ir.IRBuilder, start, condition: Callable, body: Callable, step, name: str) -> ir.Value:
    """``for (at = start; condition(at); at += step) body(b, at)``; returns ``at`` at exit."""
    before = b.block
    head = b.append_basic_block(f"gs.{name}.head")
    loop = b.append_basic_block(f"gs.{name}")
    done = b.append_basic_block(f"gs.{name}.done")
    b.branch(head)
    b.position_at_end(head)
    at = b.phi(start.type, f"gs.{name}.at")
    at.add_incoming(start, before)
    b.cbranch(condition(at), loop, done)
    b.position_at_end(loop)
    body(b, at)
    at.add_incoming(b.add(at, step, flags=("nuw",)), b.block)
    b.branch(head)
    b.position_at_end(done)
    return at
