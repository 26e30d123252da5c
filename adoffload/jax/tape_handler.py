"""FFI handlers for reverse kernels with a dynamic tape (enzyme/tape.py), in LLVM IR.

The handler gives such a kernel its tape as the numpy launcher's ``kernels/launch.with_hidden_arguments``
does: run the counting kernel over the grid (on private copies of the arrays its primal
writes), take the exclusive prefix sum of the per-thread byte counts, allocate the tape, pass
tape and offsets in the hidden params' slots, launch, and free everything on every path.
On CPU all of it happens in the handler. On a GPU the counts are scanned in place on the
device (tape_scan.py's kernels) and only the total comes back to the host, after a stream
synchronization, to size the tape; device buffers come from XLA's FFI allocator. Such a handler
is therefore not command-buffer compatible. ``handler.py`` dispatches here when a layout has a
``TapeLayout``.
"""
from __future__ import annotations

import ctypes

from ..errors import JaxIntegrationError
from ..kernels.tape_scan import CHUNK, HANDLER_LEVELS, SCAN_KERNELS
from . import cpu_parallel
from .ffi_layout import (API, BLOCK_SIZE, CALL_FRAME, ERROR_INTERNAL, ERROR_OUT_OF_RANGE, MESSAGE_BYTES, GpuTables,
                         HandlerLayout, TapeLayout)
from .handler_ir import (Emitter, c_string, cpu_frame, destroy_error, error_return, fill_slots, fn_pointer,
                         grid_values, handler_globals, metadata_block, prologue, snprintf_address, status_check,
                         stream_and_ordinal, table, zero_outputs)


ERROR_RESOURCE_EXHAUSTED = 8


def _libc_address(name: str) -> int:
    return ctypes.cast(getattr(ctypes.CDLL(None), name), ctypes.c_void_p).value


def _label(e: Emitter, base: str) -> str:
    return e.fresh(base)[1:]


def _slot_at(e: Emitter, slots: str, k: int) -> str:
    at = e.fresh("slot")
    e.emit(f"{at} = getelementptr i64, ptr {slots}, i64 {k}")
    return at


def _load_slot(e: Emitter, slots: str, k: int, type_: str = "i64") -> str:
    value = e.fresh()
    e.emit(f"{value} = load {type_}, ptr {_slot_at(e, slots, k)}")
    return value


def _store_slot(e: Emitter, slots: str, k: int, value: str, type_: str = "i64") -> None:
    e.emit(f"store {type_} {value}, ptr {_slot_at(e, slots, k)}")


def _array_bytes(e: Emitter, slots: str, data_slot: int, ndim: int, itemsize: int) -> str:
    """Bytes of the array whose data pointer is in ``data_slot`` (its dims in the following slots)."""
    size = str(itemsize)
    for d in range(ndim):
        product = e.fresh("bytes")
        e.emit(f"{product} = mul i64 {size}, {_load_slot(e, slots, data_slot + 1 + d)}")
        size = product
    return size


def _at_least(e: Emitter, value: str, floor: int) -> str:
    out = e.fresh("atleast")
    e.emit(f"{out} = call i64 @llvm.umax.i64(i64 {value}, i64 {floor})")
    return out


def _count_slots(e: Emitter, layout: HandlerLayout, slots: str, tape: TapeLayout) -> str:
    """The counting kernel's slots, its first ``shared`` copied from the kernel's (scratch and
    counts pointers, grid and status are stored by the caller)."""
    cslots = e.fresh("cslots")
    e.emit(f"{cslots} = alloca [{tape.count_slots(layout.grid_rank)} x i64], align 8")
    for k in range(tape.shared):
        _store_slot(e, cslots, k, _load_slot(e, slots, k))
    return cslots


def _count_grid_and_status(e: Emitter, layout: HandlerLayout, slots: str, cslots: str, status: str,
                           tape: TapeLayout) -> None:
    """The counts array is shaped like the grid: its dims and the grid slots are the grid."""
    n, rank, shared = len(layout.slots), layout.grid_rank, tape.shared
    for d in range(rank):
        g = _load_slot(e, slots, n + d)
        _store_slot(e, cslots, shared + 1 + d, g)
        _store_slot(e, cslots, shared + 1 + rank + d, g)
    _store_slot(e, cslots, shared + 1 + 2 * rank, status, "ptr")


def _hidden_slots(e: Emitter, layout: HandlerLayout, slots: str, t: TapeLayout, tape: str, tape_bytes: str,
                  offsets: str, shadows: list[str] = ()) -> None:
    """The tape (an i64 array of tape_bytes / 8), its shadows (alike) and its offsets (shaped like the grid)."""
    words = e.fresh("words")
    e.emit(f"{words} = udiv i64 {tape_bytes}, 8")
    for slot, buffer in zip((t.tape_slot, *t.shadow_slots), (tape, *shadows)):
        _store_slot(e, slots, slot, buffer, "ptr")
        _store_slot(e, slots, slot + 1, words)
    _store_slot(e, slots, t.offsets_slot, offsets, "ptr")
    n = len(layout.slots)
    for d in range(layout.grid_rank):
        _store_slot(e, slots, t.offsets_slot + 1 + d, _load_slot(e, slots, n + d))


def _exclusive_scan(e: Emitter, counts: str, offsets: str, total: str) -> str:
    """``offsets[i] = counts[0] + ... + counts[i-1]`` (in place when they are the same); returns the sum."""
    head, body, done = _label(e, "scan"), _label(e, "scan_body"), _label(e, "scan_done")
    before = _label(e, "scan_entry")
    e.emit(f"br label %{before}")
    e.label(before)
    e.emit(f"br label %{head}")
    e.label(head)
    i, acc, i_next, acc_next = e.fresh("i"), e.fresh("sum"), e.fresh("i"), e.fresh("sum")
    e.emit(f"{i} = phi i64 [0, %{before}], [{i_next}, %{body}]")
    e.emit(f"{acc} = phi i64 [0, %{before}], [{acc_next}, %{body}]")
    more = e.fresh("more")
    e.emit(f"{more} = icmp ult i64 {i}, {total}")
    e.emit(f"br i1 {more}, label %{body}, label %{done}")
    e.label(body)
    count = e.element(counts, i, "i64")
    at = e.fresh("p")
    e.emit(f"{at} = getelementptr i64, ptr {offsets}, i64 {i}")
    e.emit(f"store i64 {acc}, ptr {at}")
    e.emit(f"{acc_next} = add i64 {acc}, {count}")
    e.emit(f"{i_next} = add i64 {i}, 1")
    e.emit(f"br label %{head}")
    e.label(done)
    return acc


def _tape_globals(layout: HandlerLayout) -> list[str]:
    return ["declare void @llvm.memset.p0.i64(ptr, i8, i64, i1)",
            "declare void @llvm.memcpy.p0.p0.i64(ptr, ptr, i64, i1)",
            "declare i64 @llvm.umax.i64(i64, i64)"]


def _owned_count(layout: HandlerLayout) -> int:
    """Buffers a handler allocates: per level, scratch copies, counts, offsets, tape and shadows."""
    return sum(len(t.scratch) + 3 + len(t.shadow_slots) for t in layout.tapes)


def cpu_tape_handler_ir(layout: HandlerLayout, host_entry: int, count_entries, min_chunk: int) -> str:
    """CPU handler of a kernel with dynamic tapes: per level (enzyme/kernels.py: a second
    derivative's base tape first, then its own), count, scan, allocate; then run; free on every path."""
    count_entries = (count_entries,) if isinstance(count_entries, int) else tuple(count_entries)
    malloc, calloc, free = (_libc_address(n) for n in ("malloc", "calloc", "free"))
    text, size = c_string(f"kernel '{layout.kernel_name}': out of host memory while sizing its dynamic tape")
    extra = _tape_globals(layout) + [f"@msg.oom = private unnamed_addr constant [{size} x i8] {text}"]
    e = Emitter()
    slots, status, total = cpu_frame(e, layout)
    # Every buffer the handler allocates is recorded here and freed on every way out.
    owned = _owned_count(layout)
    buffers = e.fresh("owned")
    e.emit(f"{buffers} = alloca [{owned} x ptr], align 8")
    for j in range(owned):
        e.store_at(buffers, 8 * j, "ptr", "null")

    def release():
        free_fn = fn_pointer(e, free)
        for j in range(owned):
            e.emit(f"call void {free_fn}(ptr {e.field(buffers, 8 * j)})")

    def allocate(j: int, nbytes: str, zeroed: bool) -> str:
        fn = fn_pointer(e, calloc if zeroed else malloc)
        p = e.fresh("buf")
        if zeroed:
            e.emit(f"{p} = call ptr {fn}(i64 {nbytes}, i64 1)")
        else:
            e.emit(f"{p} = call ptr {fn}(i64 {nbytes})")
        e.store_at(buffers, 8 * j, "ptr", p)
        null, ok = e.fresh("null"), _label(e, "allocated")
        e.emit(f"{null} = icmp eq ptr {p}, null")
        e.emit(f"br i1 {null}, label %oom, label %{ok}")
        e.label(ok)
        return p

    next_owned = 0
    for level, (tape, count_entry) in enumerate(zip(layout.tapes, count_entries)):
        cslots = _count_slots(e, layout, slots, tape)
        for data_slot, ndim, itemsize, copy in tape.scratch:
            nbytes = _array_bytes(e, slots, data_slot, ndim, itemsize)
            p = allocate(next_owned, _at_least(e, nbytes, 1), zeroed=not copy)
            next_owned += 1
            if copy:
                source = _load_slot(e, slots, data_slot, "ptr")
                e.emit(f"call void @llvm.memcpy.p0.p0.i64(ptr {p}, ptr {source}, i64 {nbytes}, i1 false)")
            _store_slot(e, cslots, data_slot, p, "ptr")
        count_bytes = e.fresh("bytes")
        e.emit(f"{count_bytes} = mul i64 {_at_least(e, total, 1)}, 8")
        counts = allocate(next_owned, count_bytes, zeroed=True)
        _store_slot(e, cslots, tape.shared, counts, "ptr")
        _count_grid_and_status(e, layout, slots, cslots, status, tape)
        cpu_parallel.run_host_entry(e, cslots, total, count_entry, f"count{level}", min_chunk, status)
        code = e.field(status, 0, "i64")
        counted = e.fresh("counted")
        e.emit(f"{counted} = icmp eq i64 {code}, 0")
        e.emit(f"br i1 {counted}, label %counted{level}, label %count_failed{level}")
        e.label(f"count_failed{level}")
        release()
        e.emit("br label %check_status")
        e.label(f"counted{level}")
        offsets = allocate(next_owned + 1, count_bytes, zeroed=False)
        tape_bytes = _at_least(e, _exclusive_scan(e, counts, offsets, total), 8)
        tape_buffer = allocate(next_owned + 2, tape_bytes, zeroed=True)
        shadows = [allocate(next_owned + 3 + k, tape_bytes, zeroed=True) for k in range(len(tape.shadow_slots))]
        next_owned += 3 + len(shadows)
        _hidden_slots(e, layout, slots, tape, tape_buffer, tape_bytes, offsets, shadows)
    cpu_parallel.run_host_entry(e, slots, total, host_entry, "run", min_chunk, status)
    release()
    e.emit("br label %check_status")
    e.label("check_status")
    status_check(e, layout, status, snprintf_address(), reset=False)
    e.label("oom")
    release()
    error_return(e, "@msg.oom", ERROR_RESOURCE_EXHAUSTED)
    e.lines.append("}")
    return "\n".join(handler_globals(layout, extra + cpu_parallel.host_functions()) + e.lines) + "\n"


_DRIVER_CALLS = {
    "cuda": {"launch": "cuLaunchKernel", "sync": "cuStreamSynchronize", "memset": "cuMemsetD8Async",
             "dtod": "cuMemcpyDtoDAsync", "dtoh": "cuMemcpyDtoHAsync", "htod": "cuMemcpyHtoDAsync"},
    "hip": {"launch": "hipModuleLaunchKernel", "sync": "hipStreamSynchronize", "memset": "hipMemsetD8Async",
            "dtod": "hipMemcpyDtoDAsync", "dtoh": "hipMemcpyDtoHAsync", "htod": "hipMemcpyHtoDAsync"},
}
DEVICE_ALIGNMENT = 16       # the largest XLA_FFI_DeviceMemory_Allocate accepts (its buffers are 256-aligned anyway)


def _release_function() -> str:
    """``@release(api, ctx, buffers, sizes, n, host, free)``: give the non-null device buffers back
    to XLA's allocator (dropping any error it returns) and free the host buffer (null since the
    counts are scanned on the device: ``free(NULL)`` does nothing)."""
    return f"""define internal void @release(ptr %api, ptr %ctx, ptr %bufs, ptr %sizes, i64 %n, ptr %host, ptr %hfree) {{
entry:
  %pf = getelementptr i8, ptr %api, i64 {API["memory_free"]}
  %free = load ptr, ptr %pf
  %pd = getelementptr i8, ptr %api, i64 {API["error_destroy"]}
  %destroy = load ptr, ptr %pd
  %args = alloca [5 x i64], align 8
  %dargs = alloca [3 x i64], align 8
  br label %head
head:
  %i = phi i64 [0, %entry], [%next, %step]
  %more = icmp ult i64 %i, %n
  br i1 %more, label %body, label %end
body:
  %pp = getelementptr ptr, ptr %bufs, i64 %i
  %p = load ptr, ptr %pp
  %none = icmp eq ptr %p, null
  br i1 %none, label %step, label %give_back
give_back:
  %ps = getelementptr i64, ptr %sizes, i64 %i
  %size = load i64, ptr %ps
  store i64 40, ptr %args
  %a1 = getelementptr i8, ptr %args, i64 8
  store ptr null, ptr %a1
  %a2 = getelementptr i8, ptr %args, i64 16
  store ptr %ctx, ptr %a2
  %a3 = getelementptr i8, ptr %args, i64 24
  store i64 %size, ptr %a3
  %a4 = getelementptr i8, ptr %args, i64 32
  store ptr %p, ptr %a4
  %err = call ptr %free(ptr %args)
  %failed = icmp ne ptr %err, null
  br i1 %failed, label %drop_error, label %step
drop_error:
  store i64 24, ptr %dargs
  %d1 = getelementptr i8, ptr %dargs, i64 8
  store ptr null, ptr %d1
  %d2 = getelementptr i8, ptr %dargs, i64 16
  store ptr %err, ptr %d2
  call void %destroy(ptr %dargs)
  br label %step
step:
  %next = add i64 %i, 1
  br label %head
end:
  call void %hfree(ptr %host)
  ret void
}}"""


def gpu_tape_handler_ir(layout: HandlerLayout, tables: GpuTables, *, sync: bool, block_size: int = BLOCK_SIZE) -> str:
    """CUDA/ROCm handler of a kernel with a dynamic tape.

    On the call's stream: private copies of the arrays the primal writes, the counting kernel,
    the counts scanned in place into the offsets (tape_scan.py: ``HANDLER_LEVELS`` levels of
    chunk sums, one serial pass that also writes the total, the chunk scans back down), the
    total copied to the host; the stream is synchronized, the tape is allocated and the kernel
    launched. Device buffers
    come from XLA's FFI allocator (``XLA_FFI_DeviceMemory_Allocate``: the memory JAX already
    owns, freed in stream order) and go back to it on every path, errors included. Since it
    synchronizes, this handler is never captured in a command buffer (traits 0). A failure in
    counting (say an index out of bounds) is reported by this call itself.
    """
    names = _DRIVER_CALLS[tables.driver]
    n_devices, levels = len(tables.functions), len(layout.tapes)
    if len(tables.count_functions) != n_devices * levels:
        raise JaxIntegrationError(f"kernel '{layout.kernel_name}': a counting kernel per device and tape level is "
                                  "needed to size its dynamic tape (internal error)")
    extra = _tape_globals(layout) + [
        table("functions", tables.functions, cells=True), table("statuses", tables.statuses),
        table("host_statuses", tables.host_statuses), _release_function()]
    extra += [table(f"count_functions{level}", tables.count_functions[level * n_devices:(level + 1) * n_devices], cells=True)
              for level in range(levels)]
    scans = tables.scan_functions or (0,) * (len(SCAN_KERNELS) * n_devices)
    if len(scans) != len(SCAN_KERNELS) * n_devices:
        raise JaxIntegrationError(f"kernel '{layout.kernel_name}': the prefix-sum kernels per device are needed to "
                                  "size its dynamic tape (internal error)")
    extra += [table(f"scan_{name}", scans[k * n_devices:(k + 1) * n_devices], cells=True) for k, name in enumerate(SCAN_KERNELS)]
    for key, call in names.items():
        text, size = c_string(call)
        extra.append(f"@call.{key} = private unnamed_addr constant [{size} x i8] {text}")
    for key, message in (
            ("driver", f"kernel '{layout.kernel_name}': %s failed with error %d (dynamic tape handler)"),
            ("alloc", f"kernel '{layout.kernel_name}': XLA_FFI_DeviceMemory_Allocate could not allocate %lld "
                      "bytes of device memory for its dynamic tape (%s)"),
            ("grid", f"kernel '{layout.kernel_name}': grid too large for a 1-D launch")):
        text, size = c_string(message)
        extra.append(f"@msg.{key} = private unnamed_addr constant [{size} x i8] {text}")
    snprintf = snprintf_address()
    free = _libc_address("free")
    e = Emitter()
    prologue(e)
    metadata_block(e, traits=0)
    e.label("execute")
    stream, ordinal = stream_and_ordinal(e, layout, extra, n_devices)
    e.label("launch")
    api = e.field("%frame", CALL_FRAME["api"])
    ctx = e.field("%frame", CALL_FRAME["ctx"])
    n, rank = len(layout.slots), layout.grid_rank
    slots = e.fresh("slots")
    e.emit(f"{slots} = alloca [{n + rank + 1} x i64], align 8")
    fill_slots(e, layout, slots)
    zero_outputs(e, layout, tables.memset, stream)
    total = grid_values(e, layout, slots, n)
    e.store_at(slots, 8 * (n + rank), "ptr", e.element("@statuses", ordinal))
    host_status = e.element("@host_statuses", ordinal)
    empty = e.fresh("empty")
    e.emit(f"{empty} = icmp eq i64 {total}, 0")
    e.emit(f"br i1 {empty}, label %done, label %nonempty")
    e.label("nonempty")
    blocks64, rounded, fits = e.fresh("blocks"), e.fresh("rounded"), e.fresh("fits")
    e.emit(f"{rounded} = add i64 {total}, {block_size - 1}")
    e.emit(f"{blocks64} = udiv i64 {rounded}, {block_size}")
    e.emit(f"{fits} = icmp ule i64 {blocks64}, 2147483647")
    e.emit(f"br i1 {fits}, label %sizing, label %too_big")
    e.label("too_big")
    error_return(e, "@msg.grid", ERROR_OUT_OF_RANGE)
    e.label("sizing")
    blocks = e.fresh("blocks")
    e.emit(f"{blocks} = trunc i64 {blocks64} to i32")
    owned = _owned_count(layout)
    buffers, sizes = e.fresh("owned"), e.fresh("sizes")
    fail_call, fail_code, fail_size, fail_error = e.fresh("fcall"), e.fresh("fcode"), e.fresh("fsize"), e.fresh("ferr")
    e.emit(f"{buffers} = alloca [{owned} x ptr], align 8")
    e.emit(f"{sizes} = alloca [{owned} x i64], align 8")
    for j in range(owned):
        e.store_at(buffers, 8 * j, "ptr", "null")
        e.store_at(sizes, 8 * j, "i64", "0")
    for name, type_ in ((fail_call, "ptr"), (fail_code, "i32"), (fail_size, "i64"), (fail_error, "ptr")):
        e.emit(f"{name} = alloca {type_}, align 8")
        e.emit(f"store {type_} {'null' if type_ == 'ptr' else '0'}, ptr {name}")
    allocate_fn = e.field(api, API["memory_allocate"])

    def release():
        e.emit(f"call void @release(ptr {api}, ptr {ctx}, ptr {buffers}, ptr {sizes}, i64 {owned}, "
               f"ptr null, ptr {fn_pointer(e, free)})")      # no host buffer: the counts stay on the device

    def checked(key: str, rc: str) -> None:
        ok, next_ = e.fresh("ok"), _label(e, key + "_ok")
        e.emit(f"store ptr @call.{key}, ptr {fail_call}")
        e.emit(f"store i32 {rc}, ptr {fail_code}")
        e.emit(f"{ok} = icmp eq i32 {rc}, 0")
        e.emit(f"br i1 {ok}, label %{next_}, label %driver_failed")
        e.label(next_)

    def driver(key: str, address: int, *args: str) -> None:
        rc = e.fresh("rc")
        e.emit(f"{rc} = call i32 {fn_pointer(e, address)}({', '.join(args)})")
        checked(key, rc)

    def allocate(j: int, nbytes: str) -> str:
        size = _at_least(e, nbytes, 8)
        args = e.ffi_args("aargs", [("ptr", ctx), ("i64", size), ("i64", str(DEVICE_ALIGNMENT)), ("ptr", "null")])
        err = e.fresh("aerr")
        e.emit(f"{err} = call ptr {allocate_fn}(ptr {args})")
        data = e.field(args, 40)
        e.store_at(buffers, 8 * j, "ptr", data)
        e.store_at(sizes, 8 * j, "i64", size)
        e.emit(f"store i64 {size}, ptr {fail_size}")
        e.emit(f"store ptr {err}, ptr {fail_error}")
        failed, ok = e.fresh("afail"), _label(e, "allocated")
        e.emit(f"{failed} = icmp ne ptr {err}, null")
        e.emit(f"br i1 {failed}, label %alloc_failed, label %{ok}")
        e.label(ok)
        return data

    def launch(table: str, slot_values: str, count: int, grid_blocks: str | None = None,
               threads_per_block: int | None = None) -> None:
        params = e.fresh("params")
        e.emit(f"{params} = alloca [{count} x ptr], align 8")
        for k in range(count):
            cell = e.fresh("p")
            e.emit(f"{cell} = getelementptr ptr, ptr {params}, i64 {k}")
            e.emit(f"store ptr {_slot_at(e, slot_values, k)}, ptr {cell}")
        function = e.cell(table, ordinal)
        driver("launch", tables.launch, f"ptr {function}", f"i32 {grid_blocks or blocks}", "i32 1", "i32 1",
               f"i32 {threads_per_block or block_size}", "i32 1", "i32 1", "i32 0", f"ptr {stream}", f"ptr {params}",
               "ptr null")

    def launch_scan(name: str, arrays: list[tuple[str, str]], threads: str) -> None:
        """One of tape_scan.py's kernels on 1-D i64 arrays ``(pointer, length)`` over ``threads``."""
        scan_slots = e.fresh("scanslots")
        e.emit(f"{scan_slots} = alloca [{2 * len(arrays) + 2} x i64], align 8")
        for k, (pointer, length) in enumerate(arrays):
            _store_slot(e, scan_slots, 2 * k, pointer, "ptr")
            _store_slot(e, scan_slots, 2 * k + 1, length)
        _store_slot(e, scan_slots, 2 * len(arrays), threads)
        _store_slot(e, scan_slots, 2 * len(arrays) + 1, e.element("@statuses", ordinal), "ptr")
        rounded, scan_blocks64, scan_blocks = e.fresh("srounded"), e.fresh("sblocks"), e.fresh("sblocks")
        e.emit(f"{rounded} = add i64 {threads}, {BLOCK_SIZE - 1}")
        e.emit(f"{scan_blocks64} = udiv i64 {rounded}, {BLOCK_SIZE}")
        e.emit(f"{scan_blocks} = trunc i64 {scan_blocks64} to i32")        # fewer blocks than the kernel's
        # plain kernels: any block size; not the kernel's own, which a block kernel fixes (16 for 4x4 tiles)
        launch(f"@scan_{name}", scan_slots, 2 * len(arrays) + 2, scan_blocks, BLOCK_SIZE)

    next_owned = 0
    for level, tape in enumerate(layout.tapes):
        # 1. count on private copies of the arrays the primal writes
        cslots = _count_slots(e, layout, slots, tape)
        for data_slot, ndim, itemsize, copy in tape.scratch:
            nbytes = _array_bytes(e, slots, data_slot, ndim, itemsize)
            p = allocate(next_owned, nbytes)
            next_owned += 1
            if copy:
                source = _load_slot(e, slots, data_slot, "ptr")
                driver("dtod", tables.copy_dtod, f"ptr {p}", f"ptr {source}", f"i64 {nbytes}", f"ptr {stream}")
            else:
                driver("memset", tables.memset, f"ptr {p}", "i8 0", f"i64 {nbytes}", f"ptr {stream}")
            _store_slot(e, cslots, data_slot, p, "ptr")
        count_bytes = e.fresh("bytes")
        e.emit(f"{count_bytes} = mul i64 {total}, 8")
        counts = allocate(next_owned, count_bytes)
        driver("memset", tables.memset, f"ptr {counts}", "i8 0", f"i64 {count_bytes}", f"ptr {stream}")
        _store_slot(e, cslots, tape.shared, counts, "ptr")
        _count_grid_and_status(e, layout, slots, cslots, e.element("@statuses", ordinal), tape)
        launch(f"@count_functions{level}", cslots, tape.count_slots(rank))
        # 2. the counts scanned in place into the offsets, on the device; the total to the host, wait
        lengths = [total]
        for _ in range(HANDLER_LEVELS):
            rounded_up, size = e.fresh("lrounded"), e.fresh("level")
            e.emit(f"{rounded_up} = add i64 {lengths[-1]}, {CHUNK - 1}")
            e.emit(f"{size} = udiv i64 {rounded_up}, {CHUNK}")
            lengths.append(size)
        work_words = "1"                      # the total, after the sums of every level
        for size in lengths[1:]:
            summed = e.fresh("words")
            e.emit(f"{summed} = add i64 {work_words}, {size}")
            work_words = summed
        work_bytes = e.fresh("bytes")
        e.emit(f"{work_bytes} = mul i64 {work_words}, 8")
        work = allocate(next_owned + 1, work_bytes)
        levels_at, at = [counts], work
        for size in lengths[1:]:
            levels_at.append(at)
            after = e.fresh("sums")
            e.emit(f"{after} = getelementptr i64, ptr {at}, i64 {size}")
            at = after
        total_at = at
        arrays = list(zip(levels_at, lengths))
        for lower, upper in zip(arrays, arrays[1:]):
            launch_scan("chunk_sums", [lower, upper], upper[1])
        launch_scan("serial_scan", [arrays[-1], (total_at, "1")], "1")
        for lower, upper in reversed(list(zip(arrays, arrays[1:]))):
            launch_scan("chunk_scan", [lower, upper], upper[1])
        host_total = e.fresh("htotal")
        e.emit(f"{host_total} = alloca i64, align 8")
        driver("dtoh", tables.copy_dtoh, f"ptr {host_total}", f"ptr {total_at}", "i64 8", f"ptr {stream}")
        driver("sync", tables.synchronize, f"ptr {stream}")
        code = e.field(host_status, 0, "i64")
        counted = e.fresh("counted")
        e.emit(f"{counted} = icmp eq i64 {code}, 0")
        e.emit(f"br i1 {counted}, label %counted{level}, label %count_failed{level}")
        e.label(f"count_failed{level}")
        release()
        e.emit("br label %check_status")
        e.label(f"counted{level}")
        tape_sum = e.fresh("tapesum")
        e.emit(f"{tape_sum} = load i64, ptr {host_total}")
        offsets = counts
        # 3. the tape and its shadows, zeroed
        tape_bytes = _at_least(e, tape_sum, 8)
        zeroed = []
        for k in range(1 + len(tape.shadow_slots)):
            zeroed.append(allocate(next_owned + 2 + k, tape_bytes))
            driver("memset", tables.memset, f"ptr {zeroed[-1]}", "i8 0", f"i64 {tape_bytes}", f"ptr {stream}")
        next_owned += 2 + len(zeroed)
        _hidden_slots(e, layout, slots, tape, zeroed[0], tape_bytes, offsets, zeroed[1:])
    launch("@functions", slots, n + rank + 1)
    release()
    if sync:
        e.emit(f"call i32 {fn_pointer(e, tables.synchronize)}(ptr {stream})")
        e.emit("br label %check_status")
    else:
        e.emit("ret ptr null")
    e.label("check_status")
    status_check(e, layout, host_status, snprintf, reset=True)
    e.label("driver_failed")
    release()
    message = e.fresh("msg")
    e.emit(f"{message} = alloca [{MESSAGE_BYTES} x i8], align 8")
    e.emit(f"call i32 (ptr, i64, ptr, ...) {fn_pointer(e, snprintf)}(ptr {message}, i64 {MESSAGE_BYTES}, ptr @msg.driver, "
           f"ptr {e.field(fail_call, 0)}, i32 {e.field(fail_code, 0, 'i32')})")
    error_return(e, message, ERROR_INTERNAL)
    e.label("alloc_failed")
    release()
    xla_error = e.field(fail_error, 0)
    margs = e.ffi_args("margs", [("ptr", xla_error), ("ptr", "null")])     # XLA_FFI_Error_GetMessage: -> message
    e.emit(f"call void {e.field(api, API['error_get_message'])}(ptr {margs})")
    message = e.fresh("msg")
    e.emit(f"{message} = alloca [{MESSAGE_BYTES} x i8], align 8")
    e.emit(f"call i32 (ptr, i64, ptr, ...) {fn_pointer(e, snprintf)}(ptr {message}, i64 {MESSAGE_BYTES}, ptr @msg.alloc, "
           f"i64 {e.field(fail_size, 0, 'i64')}, ptr {e.field(margs, 24)})")
    destroy_error(e, api, xla_error)      # the message is copied: now the error can go
    error_return(e, message, ERROR_RESOURCE_EXHAUSTED)
    e.label("done")
    e.emit("ret ptr null")
    e.lines.append("}")
    return "\n".join(handler_globals(layout, extra) + e.lines) + "\n"
