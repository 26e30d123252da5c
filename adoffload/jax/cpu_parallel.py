"""Spreading a CPU custom call over XLA's intra-op thread pool, in LLVM IR.

XLA:CPU runs a custom-call handler on one thread. For a large grid the handler splits the
threads ``[0, total)`` into chunks and shares them with tasks scheduled on XLA's own pool
(``XLA_FFI_ThreadPool_Schedule``; no threads of our own, no Python):

* A small heap record holds ``{next, done, refs, chunks, chunk, total, slots, entry, status}``.
  Every participant (the calling thread and each task) claims chunks with an atomic
  ``next += 1`` until none are left, runs the host entry on each, and counts it in ``done``.
  Once a thread has set the status record (a bounds error, an assert), a claimed chunk is counted
  without running it, so a failing launch ends after the chunks already running, as the numpy
  launcher's does; on one thread the grid runs in chunks of ``SERIAL_CHUNK`` threads, with the same
  check between them (a failing ``grid=2**40`` used to run every thread before reporting).
* The calling thread works too, then waits until ``done == chunks``. It never waits for a
  task that has not started: only claimed chunks are outstanding, and their claimers are
  running. So a busy pool, a pool of one thread, or tasks run inline cannot deadlock it.
* A task may start after the call has returned, when nothing is left to claim. It then
  touches only the heap record, which the last participant to drop its reference frees.
  The slots and the status record live on the caller's stack. Only running chunks read
  them, and they finish before the handler returns.

The handler falls back to one thread when the grid is small (``min_chunk_threads``: fewer
threads per chunk for bodies with a loop), when
the API lacks the thread-pool functions, or when XLA reports no pool. Handlers built with
``ADOFFLOAD_JAX_CPU_POOL=0`` in the environment always use one thread (for comparisons).
"""
from __future__ import annotations

import ctypes
import re

from .ffi_layout import API, CALL_FRAME
from .handler_ir import Emitter, destroy_error, fn_pointer

ENV_VAR = "ADOFFLOAD_JAX_CPU_POOL"   # "0": CPU handlers run every kernel on XLA's calling thread
MIN_CHUNK_THREADS = 4096        # kernel threads per chunk, at least: below this, one call is cheaper
MIN_CHUNK_THREADS_LOOPING = 256  # the same for bodies with a loop (a neighbor list): each thread is heavier
CHUNKS_PER_POOL_THREAD = 4      # a few chunks per pool thread balance uneven per-thread work
SERIAL_CHUNK = 1 << 18         # threads per call of the entry on one thread, between status checks
STATE_BYTES = 72
_NEXT, _DONE, _REFS, _CHUNKS, _CHUNK, _TOTAL, _SLOTS, _ENTRY, _STATUS = (8 * k for k in range(9))


def enabled() -> bool:
    """Whether CPU handlers built now share their grid with XLA's thread pool."""
    import os
    return os.environ.get(ENV_VAR, "1").strip() != "0"


def _libc(name: str) -> int:
    return ctypes.cast(getattr(ctypes.CDLL(None), name), ctypes.c_void_p).value


def functions() -> str:
    """The module-level functions: a participant's chunk loop and the pool task."""
    free = _libc("free")
    return f"""
define internal void @pool.participate(ptr %s) {{
entry:
  %chunks.p = getelementptr i8, ptr %s, i64 {_CHUNKS}
  %chunks = load i64, ptr %chunks.p
  %chunk.p = getelementptr i8, ptr %s, i64 {_CHUNK}
  %chunk = load i64, ptr %chunk.p
  %total.p = getelementptr i8, ptr %s, i64 {_TOTAL}
  %total = load i64, ptr %total.p
  %slots.p = getelementptr i8, ptr %s, i64 {_SLOTS}
  %slots = load ptr, ptr %slots.p
  %entry.p = getelementptr i8, ptr %s, i64 {_ENTRY}
  %entryfn = load ptr, ptr %entry.p
  %done.p = getelementptr i8, ptr %s, i64 {_DONE}
  %status.p = getelementptr i8, ptr %s, i64 {_STATUS}
  %status = load ptr, ptr %status.p
  br label %claim
claim:
  %c = atomicrmw add ptr %s, i64 1 seq_cst
  %more = icmp ult i64 %c, %chunks
  br i1 %more, label %check, label %out
check:
  %code = load atomic i64, ptr %status monotonic, align 8
  %failed = icmp ne i64 %code, 0
  br i1 %failed, label %count, label %run
run:
  %start = mul i64 %c, %chunk
  %end.raw = add i64 %start, %chunk
  %past = icmp ugt i64 %end.raw, %total
  %end = select i1 %past, i64 %total, i64 %end.raw
  call void %entryfn(ptr %slots, i64 %start, i64 %end)
  br label %count
count:
  %ignored = atomicrmw add ptr %done.p, i64 1 release
  br label %claim
out:
  ret void
}}

define internal void @pool.release(ptr %s) {{
entry:
  %refs.p = getelementptr i8, ptr %s, i64 {_REFS}
  %old = atomicrmw sub ptr %refs.p, i64 1 acq_rel
  %last = icmp eq i64 %old, 1
  br i1 %last, label %free, label %keep
free:
  %freefn = inttoptr i64 {free} to ptr
  call void %freefn(ptr %s)
  br label %keep
keep:
  ret void
}}

define internal void @pool.task(ptr %s) {{
entry:
  call void @pool.participate(ptr %s)
  call void @pool.release(ptr %s)
  ret void
}}
"""


def min_chunk_threads(module_text: str, body_name: str) -> int:
    """Threads per chunk for a body: fewer when its control-flow graph has a cycle (a loop,
    such as a neighbor list), since each thread then does more work."""
    match = re.search(r"^define [^@]*@\"?" + re.escape(body_name) + r"\"?\(.*?^}", module_text, re.MULTILINE | re.DOTALL)
    if match is None:
        return MIN_CHUNK_THREADS
    successors: dict[str, list[str]] = {}
    block = "entry"
    for line in match.group(0).splitlines()[1:]:
        label = re.match(r"^([-\w.$]+):", line)
        if label:
            block = label.group(1)
        successors.setdefault(block, []).extend(re.findall(r"label %([-\w.$]+)", line))
    return MIN_CHUNK_THREADS_LOOPING if _has_cycle(successors, next(iter(successors), "entry")) else MIN_CHUNK_THREADS


def _has_cycle(successors: dict[str, list[str]], start: str) -> bool:
    on_path, done, stack = {start}, set(), [(start, iter(successors.get(start, ())))]
    while stack:
        block, pending = stack[-1]
        following = next(pending, None)
        if following is None:
            stack.pop()
            on_path.discard(block)
            done.add(block)
        elif following in on_path:
            return True
        elif following not in done:
            on_path.add(following)
            stack.append((following, iter(successors.get(following, ()))))
    return False


def emit_parallel_call(e, slots: str, total: str, entry: str, status: str, tag: str = "pool",
                       min_chunk: int = MIN_CHUNK_THREADS) -> None:
    """Run ``entry(slots, 0, total)`` over XLA's pool from the handler body (``e``: the
    handler's ``Emitter``; labels here start with ``tag``, distinct per call site; ``status``: the
    launch's status record, whose first word stops the chunks not yet started). Falls through when
    done."""
    api = e.field("%frame", CALL_FRAME["api"])
    ctx = e.field("%frame", CALL_FRAME["ctx"])
    size = e.field(api, 0, "i64")
    has_pool_api = e.fresh("haspool")
    e.emit(f"{has_pool_api} = icmp ugt i64 {size}, {API['thread_pool_num_threads']}")
    big = e.fresh("big")
    e.emit(f"{big} = icmp uge i64 {total}, {2 * min_chunk}")
    both = e.fresh("try")
    e.emit(f"{both} = and i1 {has_pool_api}, {big}")
    e.emit(f"br i1 {both}, label %{tag}_ask, label %{tag}_serial")

    e.label(f"{tag}_ask")       # XLA_FFI_ThreadPool_NumThreads({size, null, ctx, &n})
    count = e.fresh("nthreads")
    e.emit(f"{count} = alloca i64, align 8")
    e.emit(f"store i64 0, ptr {count}")
    args = e.ffi_args("nargs", [("ptr", ctx), ("ptr", count)])
    num_threads = e.field(api, API['thread_pool_num_threads'])
    err = e.fresh("nerr")
    e.emit(f"{err} = call ptr {num_threads}(ptr {args})")
    failed = e.fresh("nfail")
    e.emit(f"{failed} = icmp ne ptr {err}, null")
    e.emit(f"br i1 {failed}, label %{tag}_no_pool, label %{tag}_sized")

    e.label(f"{tag}_no_pool")
    destroy_error(e, api, err)
    e.emit(f"br label %{tag}_serial")

    e.label(f"{tag}_sized")
    threads = e.fresh("threads")
    e.emit(f"{threads} = load i64, ptr {count}")
    several = e.fresh("several")
    e.emit(f"{several} = icmp sgt i64 {threads}, 1")
    e.emit(f"br i1 {several}, label %{tag}_split, label %{tag}_serial")

    e.label(f"{tag}_split")
    # chunks = max(min(CHUNKS_PER_POOL_THREAD * threads, total / MIN_CHUNK_THREADS), ceil(total / SERIAL_CHUNK));
    # chunk = ceil(total / chunks)
    want, cap, chunks, chunk = e.fresh("want"), e.fresh("cap"), e.fresh("chunks"), e.fresh("chunk")
    e.emit(f"{want} = mul i64 {threads}, {CHUNKS_PER_POOL_THREAD}")
    e.emit(f"{cap} = udiv i64 {total}, {min_chunk}")
    smaller = e.fresh("smaller")
    e.emit(f"{smaller} = icmp ult i64 {want}, {cap}")
    wanted = e.fresh("wanted")
    e.emit(f"{wanted} = select i1 {smaller}, i64 {want}, i64 {cap}")
    # at least ceil(total / SERIAL_CHUNK) chunks: a chunk checks the status record only before it starts
    least, fewest, enough = e.fresh("least"), e.fresh("fewest"), e.fresh("enough")
    e.emit(f"{least} = add i64 {total}, {SERIAL_CHUNK - 1}")
    e.emit(f"{fewest} = udiv i64 {least}, {SERIAL_CHUNK}")
    e.emit(f"{enough} = icmp ugt i64 {fewest}, {wanted}")
    e.emit(f"{chunks} = select i1 {enough}, i64 {fewest}, i64 {wanted}")
    rounded = e.fresh("rounded")
    e.emit(f"{rounded} = add i64 {total}, {chunks}")
    minus = e.fresh("minus")
    e.emit(f"{minus} = sub i64 {rounded}, 1")
    e.emit(f"{chunk} = udiv i64 {minus}, {chunks}")
    # tasks = min(threads, chunks - 1): the caller is a participant too
    helpers, fewer, tasks = e.fresh("helpers"), e.fresh("fewer"), e.fresh("tasks")
    e.emit(f"{helpers} = sub i64 {chunks}, 1")
    e.emit(f"{fewer} = icmp ult i64 {threads}, {helpers}")
    e.emit(f"{tasks} = select i1 {fewer}, i64 {threads}, i64 {helpers}")
    malloc = e.fresh("malloc")
    e.emit(f"{malloc} = inttoptr i64 {_libc('malloc')} to ptr")
    state = e.fresh("state")
    e.emit(f"{state} = call ptr {malloc}(i64 {STATE_BYTES})")
    null = e.fresh("nomem")
    e.emit(f"{null} = icmp eq ptr {state}, null")
    e.emit(f"br i1 {null}, label %{tag}_serial, label %{tag}_fill")

    e.label(f"{tag}_fill")
    refs = e.fresh("refs")
    e.emit(f"{refs} = add i64 {tasks}, 1")
    for offset, type_, value in ((_NEXT, "i64", "0"), (_DONE, "i64", "0"), (_REFS, "i64", refs),
                                 (_CHUNKS, "i64", chunks), (_CHUNK, "i64", chunk), (_TOTAL, "i64", total),
                                 (_SLOTS, "ptr", slots), (_ENTRY, "ptr", entry), (_STATUS, "ptr", status)):
        e.store_at(state, offset, type_, value)
    schedule = e.field(api, API['thread_pool_schedule'])
    sargs = e.ffi_args("sargs", [("ptr", ctx), ("ptr", "@pool.task"), ("ptr", state)])
    e.emit(f"br label %{tag}_schedule")

    e.label(f"{tag}_schedule")
    k = e.fresh("k")
    next_k = e.fresh("k")
    e.emit(f"{k} = phi i64 [0, %{tag}_fill], [{next_k}, %{tag}_scheduled]")
    left = e.fresh("left")
    e.emit(f"{left} = icmp ult i64 {k}, {tasks}")
    e.emit(f"br i1 {left}, label %{tag}_one, label %{tag}_work")

    e.label(f"{tag}_one")
    serr = e.fresh("serr")
    e.emit(f"{serr} = call ptr {schedule}(ptr {sargs})")
    sfailed = e.fresh("sfail")
    e.emit(f"{sfailed} = icmp ne ptr {serr}, null")
    e.emit(f"br i1 {sfailed}, label %{tag}_unscheduled, label %{tag}_scheduled")

    e.label(f"{tag}_unscheduled")       # that task will never run: drop its reference
    destroy_error(e, api, serr)
    e.emit(f"call void @pool.release(ptr {state})")
    e.emit(f"br label %{tag}_scheduled")

    e.label(f"{tag}_scheduled")
    e.emit(f"{next_k} = add i64 {k}, 1")
    e.emit(f"br label %{tag}_schedule")

    e.label(f"{tag}_work")
    e.emit(f"call void @pool.participate(ptr {state})")
    done_p = e.fresh("donep")
    e.emit(f"{done_p} = getelementptr i8, ptr {state}, i64 {_DONE}")
    e.emit(f"br label %{tag}_wait")

    e.label(f"{tag}_wait")
    done = e.fresh("done")
    e.emit(f"{done} = load atomic i64, ptr {done_p} acquire, align 8")
    finished = e.fresh("finished")
    e.emit(f"{finished} = icmp uge i64 {done}, {chunks}")
    e.emit(f"br i1 {finished}, label %{tag}_finished, label %{tag}_yield")

    e.label(f"{tag}_yield")
    yield_fn = e.fresh("yield")
    e.emit(f"{yield_fn} = inttoptr i64 {_libc('sched_yield')} to ptr")
    e.emit(f"call i32 {yield_fn}()")
    e.emit(f"br label %{tag}_wait")

    e.label(f"{tag}_finished")
    e.emit(f"call void @pool.release(ptr {state})")
    e.emit(f"br label %{tag}_end")

    e.label(f"{tag}_serial")
    emit_serial_call(e, slots, total, entry, status, f"{tag}_one_thread")
    e.emit(f"br label %{tag}_end")

    e.label(f"{tag}_end")


def emit_serial_call(e, slots: str, total: str, entry: str, status: str, tag: str) -> None:
    """``entry(slots, 0, total)`` on this thread, in chunks of SERIAL_CHUNK threads, none started once
    the status record is set. Falls through when done."""
    start, stop, code = e.fresh("start"), e.fresh("stop"), e.fresh("code")
    e.emit(f"br label %{tag}_enter")
    e.label(f"{tag}_enter")            # a block of its own: the phi's first predecessor
    e.emit(f"br label %{tag}_head")
    e.label(f"{tag}_head")
    e.emit(f"{start} = phi i64 [0, %{tag}_enter], [{stop}, %{tag}_body]")
    left, ok, go = e.fresh("left"), e.fresh("ok"), e.fresh("go")
    e.emit(f"{left} = icmp ult i64 {start}, {total}")
    e.emit(f"{code} = load atomic i64, ptr {status} monotonic, align 8")
    e.emit(f"{ok} = icmp eq i64 {code}, 0")
    e.emit(f"{go} = and i1 {left}, {ok}")
    e.emit(f"br i1 {go}, label %{tag}_body, label %{tag}_done")
    e.label(f"{tag}_body")
    raw, past = e.fresh("raw"), e.fresh("past")
    e.emit(f"{raw} = add i64 {start}, {SERIAL_CHUNK}")
    e.emit(f"{past} = icmp ugt i64 {raw}, {total}")
    e.emit(f"{stop} = select i1 {past}, i64 {total}, i64 {raw}")
    e.emit(f"call void {entry}(ptr {slots}, i64 {start}, i64 {stop})")
    e.emit(f"br label %{tag}_head")
    e.label(f"{tag}_done")


def run_host_entry(e: Emitter, slots: str, total: str, address: int, tag: str, min_chunk: int,
                   status: str, serial: bool = False) -> None:
    """``entry(slots, 0, total)`` for the host entry at ``address``: shared with XLA's thread
    pool (cpu_parallel.py) unless ``ADOFFLOAD_JAX_CPU_POOL=0`` or ``serial`` (an entry whose atomics
    are plain: one thread only); either way no chunk starts once ``status`` is set."""
    from . import cpu_parallel
    entry = fn_pointer(e, address)
    if cpu_parallel.enabled() and not serial:
        cpu_parallel.emit_parallel_call(e, slots, total, entry, status, tag, min_chunk)
    else:
        cpu_parallel.emit_serial_call(e, slots, total, entry, status, f"{tag}_one_thread")


def host_functions() -> list[str]:
    """The module-level functions ``run_host_entry`` calls."""
    from . import cpu_parallel
    return [cpu_parallel.functions()] if cpu_parallel.enabled() else []
