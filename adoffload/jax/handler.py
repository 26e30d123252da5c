"""XLA typed-FFI handlers, written in LLVM IR and JIT-compiled for the host.

A handler is ``XLA_FFI_Error* handler(XLA_FFI_CallFrame*)``. It answers XLA's metadata
query (API version, traits), then fills the packed slots of docs/ARCHITECTURE.md §4 from
the call frame's buffers and launches the kernel:

* ``cpu``: calls the host entry ``void @<body>.host(slots, start, end)`` over the grid,
  in chunks shared with XLA's intra-op thread pool when the grid is large
  (``cpu_parallel.py``), then reads the status record and turns a failure into an
  ``XLA_FFI_Error`` whose message names kernel, array and index.
* ``cuda`` / ``rocm``: gets the stream (``XLA_FFI_Stream_Get``) and the device ordinal
  (``XLA_FFI_DeviceOrdinal_Get``), picks that device's loaded function and status record
  from tables baked into the handler, and calls ``cuLaunchKernel`` /
  ``hipModuleLaunchKernel`` (1-D blocks of ``BLOCK_SIZE``; ``kernelParams[i] = &slots[i]``).
  Scalars arrive as device buffers and are passed by reference. Device-side failures land
  in a host-mapped status record that ``adoffload.jax.check_errors()`` reads; with
  ``sync=True`` the handler synchronizes the stream and returns the error itself.

Reverse kernels with a dynamic tape get handlers that size the tape first (``tape_handler.py``).

Struct offsets follow ``xla/ffi/api/c_api.h`` (``jax.ffi.include_dir()``) on 64-bit hosts.
"""
from __future__ import annotations

import ctypes
import re

from . import cpu_parallel
from .ffi_layout import (BLOCK_SIZE, ERROR_INTERNAL, ERROR_OUT_OF_RANGE, TRAIT_COMMAND_BUFFER_COMPATIBLE, GpuTables,
                         HandlerLayout)
from .handler_ir import (Emitter, c_string, cpu_frame, error_return, fill_slots, grid_values, handler_globals, metadata_block, prologue, snprintf_address, status_check,
                         stream_and_ordinal, table, zero_outputs)
from .tape_handler import cpu_tape_handler_ir, gpu_tape_handler_ir


def cpu_handler_ir(layout: HandlerLayout, host_entry: int, count_entry=0, min_chunk: int = 4096,
                   serial: bool = False) -> str:
    """The CPU handler: fill slots, run the host entry over the whole grid, check the status.

    ``serial``: the entry was built with plain atomics (codegen/host/serial.py), so the handler runs
    it on XLA's calling thread only, never sharing the grid with the pool.

    With a dynamic tape (``layout.tape``), ``count_entry`` is the counting kernel's host entry
    (a tuple of them, one per level, when ``layout.tapes`` has two)
    and the handler sizes the tape first (``tape_handler.py``).
    """
    if layout.tape is not None:
        return cpu_tape_handler_ir(layout, host_entry, count_entry, min_chunk)
    if serial and layout.tape is not None:
        raise ValueError("a serial CPU handler has no dynamic tape")
    e = Emitter()
    slots, status, total = cpu_frame(e, layout)
    cpu_parallel.run_host_entry(e, slots, total, host_entry, "run", min_chunk, status, serial=serial)
    status_check(e, layout, status, snprintf_address(), reset=False)
    e.lines.append("}")
    memset = ["declare void @llvm.memset.p0.i64(ptr, i8, i64, i1)"]
    pool = [] if serial else cpu_parallel.host_functions()
    return "\n".join(handler_globals(layout, memset + pool) + e.lines) + "\n"


def gpu_handler_ir(layout: HandlerLayout, tables: GpuTables, *, sync: bool = False,
                   elements_per_thread: int = 1, block_size: int = BLOCK_SIZE, max_threads: int = 0) -> str:
    """The CUDA/ROCm handler: slots (scalars by reference), stream, per-device function, launch.

    Without ``sync`` the handler never waits on the device, so XLA may capture it in a
    command buffer (CUDA graph); device-side failures are read later by ``check_errors``.
    ``elements_per_thread``: the k the kernel was compiled with (codegen/gpu/vectorize.py); the
    launch has ``ceil(total / k)`` threads. ``block_size``: threads per block (a block kernel's
    block, codegen/blocks.py; the grid is then a whole number of blocks). ``max_threads`` (> 0
    only for entries that loop over the grid, codegen/gpu/grid_stride.py): launch at most this many
    threads, one resident wave.
    """
    if layout.tape is not None:
        if elements_per_thread != 1:
            raise ValueError("dynamic-tape handlers launch one element per thread")
        return gpu_tape_handler_ir(layout, tables, sync=sync, block_size=block_size)
    n_devices = len(tables.functions)
    extra = [table("functions", tables.functions, cells=True), table("statuses", tables.statuses),
             table("host_statuses", tables.host_statuses)]
    e = Emitter()
    prologue(e)
    metadata_block(e, traits=0 if sync else TRAIT_COMMAND_BUFFER_COMPATIBLE)
    e.label("execute")
    stream, ordinal = stream_and_ordinal(e, layout, extra, n_devices)
    e.label("launch")
    n = len(layout.slots)
    n_slots = n + layout.grid_rank + 1
    slots = e.fresh("slots")
    e.emit(f"{slots} = alloca [{n_slots} x i64], align 8")
    fill_slots(e, layout, slots)
    zero_outputs(e, layout, tables.memset, stream)
    total = grid_values(e, layout, slots, n)
    status = e.element("@statuses", ordinal)
    e.store_at(slots, 8 * (n + layout.grid_rank), "ptr", status)
    params = e.fresh("params")
    e.emit(f"{params} = alloca [{n_slots} x ptr], align 8")
    for k in range(n_slots):
        at, cell = e.fresh("p"), e.fresh("p")
        e.emit(f"{at} = getelementptr i64, ptr {slots}, i64 {k}")
        e.emit(f"{cell} = getelementptr ptr, ptr {params}, i64 {k}")
        e.emit(f"store ptr {at}, ptr {cell}")
    empty = e.fresh("empty")
    e.emit(f"{empty} = icmp eq i64 {total}, 0")
    e.emit(f"br i1 {empty}, label %done, label %nonempty")
    e.label("nonempty")
    threads = total
    if elements_per_thread > 1:
        k = elements_per_thread
        grouped, threads = e.fresh("grouped"), e.fresh("threads")
        e.emit(f"{grouped} = add i64 {total}, {k - 1}")
        e.emit(f"{threads} = udiv i64 {grouped}, {k}")
    if max_threads > 0:
        capped = e.fresh("capped")
        e.emit(f"{capped} = call i64 @llvm.umin.i64(i64 {threads}, i64 {int(max_threads)})")
        extra.append("declare i64 @llvm.umin.i64(i64, i64)")
        threads = capped
    blocks64, rounded = e.fresh("blocks"), e.fresh("rounded")
    e.emit(f"{rounded} = add i64 {threads}, {block_size - 1}")
    e.emit(f"{blocks64} = udiv i64 {rounded}, {block_size}")
    fits = e.fresh("fits")
    e.emit(f"{fits} = icmp ule i64 {blocks64}, 2147483647")
    e.emit(f"br i1 {fits}, label %do_launch, label %too_big")
    e.label("too_big")
    text, size = c_string(f"kernel '{layout.kernel_name}': grid too large for a 1-D launch")
    extra.append(f"@msg.grid = private unnamed_addr constant [{size} x i8] {text}")
    error_return(e, "@msg.grid", ERROR_OUT_OF_RANGE)
    e.label("do_launch")
    blocks = e.fresh("blocks")
    e.emit(f"{blocks} = trunc i64 {blocks64} to i32")
    function = e.cell("@functions", ordinal)
    launch = e.fresh("launchfn")
    e.emit(f"{launch} = inttoptr i64 {tables.launch} to ptr")
    rc = e.fresh("rc")
    e.emit(f"{rc} = call i32 {launch}(ptr {function}, i32 {blocks}, i32 1, i32 1, i32 {block_size}, "
           f"i32 1, i32 1, i32 0, ptr {stream}, ptr {params}, ptr null)")
    launched = e.fresh("launched")
    e.emit(f"{launched} = icmp eq i32 {rc}, 0")
    e.emit(f"br i1 {launched}, label %after_launch, label %launch_failed")
    e.label("launch_failed")
    text, size = c_string(f"kernel '{layout.kernel_name}': the driver refused the launch")
    extra.append(f"@msg.launch = private unnamed_addr constant [{size} x i8] {text}")
    error_return(e, "@msg.launch", ERROR_INTERNAL)
    e.label("after_launch")
    if sync:
        sync_fn = e.fresh("syncfn")
        e.emit(f"{sync_fn} = inttoptr i64 {tables.synchronize} to ptr")
        e.emit(f"call i32 {sync_fn}(ptr {stream})")
        status_check(e, layout, e.element("@host_statuses", ordinal), snprintf_address(), reset=True)
    else:
        e.emit("ret ptr null")
    e.label("done")
    e.emit("ret ptr null")
    e.lines.append("}")
    return "\n".join(handler_globals(layout, extra) + e.lines) + "\n"


# A handler is straight-line slot filling around one launch (~17 KB of IR with its error paths):
# LLVM's O3 pipeline and instruction selection took ~50 ms per handler on the 2-core host, against
# ~10 ms unoptimized (benchmarks/results/2026-12-04-research-host), four times per first compile of
# a second-order training step, while what the handler does per call is a few dozen loads and stores.
HANDLER_OPT_LEVEL = 0
HANDLER_CODEGEN_LEVEL = 0


class CompiledHandler:
    """A handler JIT-compiled for the host (unoptimized: it runs once per call, around a kernel);
    keeps its code alive and exposes the PyCapsule."""

    def __init__(self, text: str, keep_alive=()):
        from ..codegen.host.program import HostProgram
        self.text = text
        self.program = HostProgram(text, opt_level=HANDLER_OPT_LEVEL, codegen_level=HANDLER_CODEGEN_LEVEL)
        self.address = self.program.address("handler")
        self._callable = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p)(self.address)
        self.keep_alive = tuple(keep_alive)

    def write_cell(self, table: str, index: int, value: int) -> None:
        """Store ``value`` in entry ``index`` of the handler's function table ``table`` (a
        ``table(..., cells=True)``): one aligned pointer-sized store, which the next call reads."""
        found = re.search(rf"^@{re.escape(table)} = global \[(\d+) x ptr\]", self.text, re.MULTILINE)
        if found is None:
            raise KeyError(f"the handler has no function table @{table}")
        n = int(found.group(1))
        if not 0 <= index < n:
            raise IndexError(f"handler table @{table} has {n} entries, not {index + 1}")
        ctypes.c_void_p.from_address(self.program.global_address(table) + 8 * index).value = int(value)

    def capsule(self):
        import jax
        return jax.ffi.pycapsule(self._callable)
