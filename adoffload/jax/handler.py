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

Struct offsets follow ``xla/ffi/api/c_api.h`` (``jax.ffi.include_dir()``) on 64-bit hosts.
"""
from __future__ import annotations

import ctypes
from dataclasses import dataclass

from ..errors import JaxIntegrationError
from ..signature import HIDDEN_PREFIX, KernelSignature

BLOCK_SIZE = 256
MESSAGE_BYTES = 512
TRAIT_COMMAND_BUFFER_COMPATIBLE = 1
ERROR_OUT_OF_RANGE, ERROR_INTERNAL = 11, 13

# Byte offsets inside the C API structs (c_api.h, LP64).
CALL_FRAME = {"extension_start": 8, "api": 16, "ctx": 24, "args": 72, "rets": 112, "attrs": 160}
METADATA_EXTENSION_METADATA = 24
METADATA = {"version_size": 8, "version_ext": 16, "major": 24, "minor": 28, "traits": 32}
API = {"struct_size": 0, "error_create": 48, "error_get_message": 56, "error_destroy": 64, "stream_get": 80, "memory_allocate": 120,
       "memory_free": 128, "thread_pool_schedule": 136, "thread_pool_num_threads": 144, "device_ordinal_get": 184}
BUFFER = {"data": 24, "dims": 40}
ARRAY_ATTR_DATA = 16
# The handler declares the API version it was written against; 0.1 is accepted by every
# jaxlib from 0.4.3x on (seen on 0.10.2 CPU and 0.11.2 CUDA).
API_VERSION = (0, 1)

_ELEMENT_STORE = {"float": "float", "double": "double", "i32": "i32", "i64": "i64", "i1": "i8"}


@dataclass(frozen=True)
class Slot:
    """Where one packed slot's value comes from: a call-frame buffer and what to take from it."""
    kind: str          # "data" (pointer) | "dim" (i64) | "value" (scalar loaded from a 0-d buffer) | "ref"
                       # | "hidden" (a launcher-filled param: the handler sizes and fills it itself)
    side: str          # "arg" | "ret"
    buffer: int        # index into args / rets
    dim: int = 0
    llvm_type: str = "i64"


@dataclass(frozen=True)
class HandlerLayout:
    """Everything a handler needs to know about one kernel variant's calling convention."""
    kernel_name: str
    param_names: tuple[str, ...]
    slots: tuple[Slot, ...]
    grid_rank: int
    zeroed: tuple[tuple[int, int, int], ...] = ()    # Out results: (ret index, ndim, element bytes)
    tape: "TapeLayout | None" = None                 # a reverse kernel with a dynamic tape


@dataclass(frozen=True)
class TapeLayout:
    """How a handler sizes a dynamic tape (enzyme/tape.py): the counting kernel's packed slots.

    The counting kernel takes the primal's params (a prefix of the reverse kernel's: its
    first ``shared`` slots hold the same values), then one grid-shaped counts array; then
    grid and status like every kernel. Arrays the primal writes get private buffers
    (``scratch``), so counting leaves the call's buffers untouched.
    """
    count_name: str
    shared: int                                          # slots [0, shared) copy the kernel's slots
    scratch: tuple[tuple[int, int, int, bool], ...]      # (data slot, ndim, element bytes, copy the contents?)
    tape_slot: int                                       # the kernel's adoffload_tape data slot (its length follows)
    offsets_slot: int                                    # adoffload_tape_offsets' data slot (grid_rank dims follow)

    def count_slots(self, grid_rank: int) -> int:
        return self.shared + 1 + 2 * grid_rank + 1


def _is_hidden(param) -> bool:
    return param.name.startswith(HIDDEN_PREFIX)


def layout_for(signature: KernelSignature, *, scalars_by_reference: bool,
               written: frozenset = frozenset(), count_signature: KernelSignature | None = None) -> HandlerLayout:
    """Map the flattened params onto call-frame buffers.

    Operands are the In, InOut and scalar params in order; results are the Out and InOut
    arrays in order. InOut data is taken from the result buffer (it aliases the operand).
    Out arrays are zeroed before the launch, except the params in ``written`` (written in
    full by the kernel at this grid: no memset needed). Hidden params (a reverse kernel's
    dynamic tape, ``adoffload_*``) are neither operands nor results: the handler sizes them
    by running ``count_signature``'s kernel first (see ``TapeLayout``).
    """
    operand_of, result_of = {}, {}
    for k, p in enumerate(signature.params):
        if _is_hidden(p):
            continue
        if not (p.is_array and p.type.intent == "out"):
            operand_of[k] = len(operand_of)
        if p.is_array and p.type.writes:
            result_of[k] = len(result_of)
    slots = []
    for f in signature.flat_params():
        k = f.param_index
        if _is_hidden(signature.params[k]):
            slots.append(Slot("hidden", "arg", -1, dim=f.dim))
            continue
        side, index = ("ret", result_of[k]) if k in result_of else ("arg", operand_of[k])
        if f.role == "array":
            slots.append(Slot("data", side, index))
        elif f.role == "shape":
            slots.append(Slot("dim", side, index, dim=f.dim))
        else:
            slots.append(Slot("ref" if scalars_by_reference else "value", side, index, llvm_type=f.llvm_type))
    zeroed = tuple((result_of[k], p.type.ndim, p.dtype.dtype.itemsize)
                   for k, p in enumerate(signature.params)
                   if p.is_array and p.type.intent == "out" and k not in written and not _is_hidden(p))
    tape = _tape_layout(signature, count_signature) if any(_is_hidden(p) for p in signature.params) else None
    return HandlerLayout(signature.name, tuple(p.name for p in signature.params), tuple(slots),
                         signature.grid_rank, zeroed, tape)


def _tape_layout(signature: KernelSignature, count_signature: KernelSignature | None) -> TapeLayout:
    from ..enzyme.kernels import OFFSETS_PARAM, TAPE_PARAM
    hidden = [p.name for p in signature.params if _is_hidden(p)]
    if hidden != [TAPE_PARAM, OFFSETS_PARAM] or count_signature is None:
        raise JaxIntegrationError(
            f"kernel '{signature.name}' has launcher-filled params {hidden}; JAX handlers size a dynamic "
            f"tape ({TAPE_PARAM}, {OFFSETS_PARAM}, with its counting kernel) and nothing else (a deterministic "
            "kernel's contribution log runs through the numpy launcher only)")
    primal = count_signature.params[:-1]
    if tuple(signature.params[:len(primal)]) != tuple(primal):
        raise JaxIntegrationError(f"kernel '{signature.name}': its counting kernel '{count_signature.name}' does "
                                  "not take the kernel's leading params (internal error)")
    flat = signature.flat_params()
    start = {}
    for slot, f in enumerate(flat):
        start.setdefault(f.param_index, slot)
    shared = sum(1 for f in flat if f.param_index < len(primal))
    scratch = tuple((start[k], p.type.ndim, p.dtype.dtype.itemsize, p.type.intent == "inout")
                    for k, p in enumerate(primal) if p.is_array and p.type.writes)
    names = [p.name for p in signature.params]
    return TapeLayout(count_signature.name, shared, scratch, start[names.index(TAPE_PARAM)],
                      start[names.index(OFFSETS_PARAM)])


class _Emitter:
    """Line-by-line LLVM IR text with fresh value names (indirect calls are awkward in llvmlite.ir)."""

    def __init__(self):
        self.lines: list[str] = []
        self._count = 0

    def fresh(self, base: str = "v") -> str:
        self._count += 1
        return f"%{base}{self._count}"

    def emit(self, text: str) -> None:
        self.lines.append("  " + text)

    def label(self, name: str) -> None:
        self.lines.append(f"{name}:")

    def field(self, base: str, offset: int, type_: str = "ptr") -> str:
        """Load the ``type_`` at ``base + offset`` bytes."""
        at = self.fresh("p")
        self.emit(f"{at} = getelementptr i8, ptr {base}, i64 {offset}")
        value = self.fresh()
        self.emit(f"{value} = load {type_}, ptr {at}")
        return value

    def store_at(self, base: str, offset: int, type_: str, value: str) -> None:
        at = self.fresh("p")
        self.emit(f"{at} = getelementptr i8, ptr {base}, i64 {offset}")
        self.emit(f"store {type_} {value}, ptr {at}")

    def element(self, base: str, index, type_: str = "ptr") -> str:
        at = self.fresh("p")
        self.emit(f"{at} = getelementptr {type_}, ptr {base}, i64 {index}")
        value = self.fresh()
        self.emit(f"{value} = load {type_}, ptr {at}")
        return value


def _c_string(text: str) -> tuple[str, int]:
    data = text.encode() + b"\0"
    body = "".join(chr(c) if 32 <= c < 127 and c not in (34, 92) else f"\\{c:02X}" for c in data)
    return f'c"{body}"', len(data)


def _globals(layout: HandlerLayout, extra: list[str]) -> list[str]:
    """Message format strings and the table of array names indexed by parameter index."""
    lines = []
    for k, name in enumerate(layout.param_names):
        text, n = _c_string(name)
        lines.append(f"@name.{k} = private unnamed_addr constant [{n} x i8] {text}")
    table = ", ".join(f"ptr @name.{k}" for k in range(len(layout.param_names)))
    lines.append(f"@names = private constant [{len(layout.param_names)} x ptr] [{table}]")
    bounds, n_bounds = _c_string(
        f"kernel '{layout.kernel_name}': index %lld out of bounds for axis %lld of array '%s' "
        "(the access was skipped; no memory outside the array was touched)")
    other, n_other = _c_string(f"kernel '{layout.kernel_name}' stopped with status code %lld "
                               "(parameter %lld, value %lld)")
    lines.append(f"@fmt.bounds = private unnamed_addr constant [{n_bounds} x i8] {bounds}")
    lines.append(f"@fmt.other = private unnamed_addr constant [{n_other} x i8] {other}")
    return lines + extra


def _metadata_block(e: _Emitter, traits: int) -> None:
    """Answer XLA's metadata query: API version and handler traits."""
    e.label("metadata")
    ext = e.field("%frame", CALL_FRAME["extension_start"])
    md = e.field(ext, METADATA_EXTENSION_METADATA)
    e.store_at(md, METADATA["version_size"], "i64", "24")
    e.store_at(md, METADATA["version_ext"], "ptr", "null")
    e.store_at(md, METADATA["major"], "i32", str(API_VERSION[0]))
    e.store_at(md, METADATA["minor"], "i32", str(API_VERSION[1]))
    e.store_at(md, METADATA["traits"], "i32", str(traits))
    e.emit("ret ptr null")


def _fill_slots(e: _Emitter, layout: HandlerLayout, slots: str) -> None:
    """Store every flattened param into its 8-byte slot."""
    args = e.field("%frame", CALL_FRAME["args"])
    rets = e.field("%frame", CALL_FRAME["rets"])
    buffers: dict[tuple[str, int], str] = {}
    for k, s in enumerate(layout.slots):
        if s.kind == "hidden":
            continue
        key = (s.side, s.buffer)
        if key not in buffers:
            buffers[key] = e.element(args if s.side == "arg" else rets, s.buffer)
        buf = buffers[key]
        at = e.fresh("slot")
        e.emit(f"{at} = getelementptr i64, ptr {slots}, i64 {k}")
        if s.kind in ("data", "ref"):
            e.emit(f"store ptr {e.field(buf, BUFFER['data'])}, ptr {at}")
        elif s.kind == "dim":
            dims = e.field(buf, BUFFER["dims"])
            e.emit(f"store i64 {e.element(dims, s.dim, 'i64')}, ptr {at}")
        else:
            type_ = _ELEMENT_STORE[s.llvm_type]
            e.emit(f"store i64 0, ptr {at}")
            e.emit(f"store {type_} {e.field(e.field(buf, BUFFER['data']), 0, type_)}, ptr {at}")


def _zero_outputs(e: _Emitter, layout: HandlerLayout, gpu_memset: int | None = None, stream: str = "") -> None:
    """Out arrays start at zero, as in the launcher (kernels may accumulate into them).

    Host: ``llvm.memset``; GPU: ``cuMemsetD8Async``/``hipMemsetD8Async`` on the call's stream.
    """
    if not layout.zeroed:
        return
    rets = e.field("%frame", CALL_FRAME["rets"])
    for index, ndim, itemsize in layout.zeroed:
        buf = e.element(rets, index)
        data = e.field(buf, BUFFER["data"])
        dims = e.field(buf, BUFFER["dims"])
        size = str(itemsize)
        for d in range(ndim):
            product = e.fresh("bytes")
            e.emit(f"{product} = mul i64 {size}, {e.element(dims, d, 'i64')}")
            size = product
        if gpu_memset is None:
            e.emit(f"call void @llvm.memset.p0.i64(ptr {data}, i8 0, i64 {size}, i1 false)")
        else:
            fn = e.fresh("memset")
            e.emit(f"{fn} = inttoptr i64 {gpu_memset} to ptr")
            e.emit(f"call i32 {fn}(ptr {data}, i8 0, i64 {size}, ptr {stream})")


def _grid(e: _Emitter, layout: HandlerLayout, slots: str, first_slot: int) -> str:
    """Copy the ``grid`` attribute (an i64 array, the only attribute) into the grid slots; return the total."""
    attrs = e.field("%frame", CALL_FRAME["attrs"])
    grid_attr = e.element(attrs, 0)
    grid = e.field(grid_attr, ARRAY_ATTR_DATA)
    total = "1"
    for axis in range(layout.grid_rank):
        g = e.element(grid, axis, "i64")
        at = e.fresh("slot")
        e.emit(f"{at} = getelementptr i64, ptr {slots}, i64 {first_slot + axis}")
        e.emit(f"store i64 {g}, ptr {at}")
        product = e.fresh("total")
        e.emit(f"{product} = mul i64 {total}, {g}")
        total = product
    return total


def _error_return(e: _Emitter, message: str, code: int) -> None:
    """``return api->XLA_FFI_Error_Create({.message, .errc})``."""
    api = e.field("%frame", CALL_FRAME["api"])
    create = e.field(api, API["error_create"])
    args = e.fresh("eargs")
    e.emit(f"{args} = alloca [4 x i64], align 8")
    e.store_at(args, 0, "i64", "28")
    e.store_at(args, 8, "ptr", "null")
    e.store_at(args, 16, "ptr", message)
    e.store_at(args, 24, "i32", str(code))
    err = e.fresh("err")
    e.emit(f"{err} = call ptr {create}(ptr {args})")
    e.emit(f"ret ptr {err}")


def _status_check(e: _Emitter, layout: HandlerLayout, status: str, snprintf: int, reset: bool) -> None:
    """Branch on status[0]; on failure format the message and return an XLA error."""
    code = e.field(status, 0, "i64")
    failed = e.fresh("failed")
    e.emit(f"{failed} = icmp ne i64 {code}, 0")
    e.emit(f"br i1 {failed}, label %fail, label %ok")
    e.label("ok")
    e.emit("ret ptr null")
    e.label("fail")
    param = e.field(status, 8, "i64")
    index = e.field(status, 16, "i64")
    dim = e.field(status, 24, "i64")
    if reset:
        for offset in (0, 8, 16, 24):
            e.store_at(status, offset, "i64", "0")
    message = e.fresh("msg")
    e.emit(f"{message} = alloca [{MESSAGE_BYTES} x i8], align 8")
    fmt_fn = e.fresh("snprintf")
    e.emit(f"{fmt_fn} = inttoptr i64 {snprintf} to ptr")
    n = len(layout.param_names)
    is_bounds = e.fresh("bounds")
    e.emit(f"{is_bounds} = icmp eq i64 {code}, 1")
    known = e.fresh("known")
    e.emit(f"{known} = icmp ult i64 {param}, {n}")
    both = e.fresh("both")
    e.emit(f"{both} = and i1 {is_bounds}, {known}")
    e.emit(f"br i1 {both}, label %fmt_bounds, label %fmt_other")
    e.label("fmt_bounds")
    name = e.element("@names", param)
    e.emit(f"call i32 (ptr, i64, ptr, ...) {fmt_fn}(ptr {message}, i64 {MESSAGE_BYTES}, ptr @fmt.bounds, "
           f"i64 {index}, i64 {dim}, ptr {name})")
    e.emit("br label %raise")
    e.label("fmt_other")
    e.emit(f"call i32 (ptr, i64, ptr, ...) {fmt_fn}(ptr {message}, i64 {MESSAGE_BYTES}, ptr @fmt.other, "
           f"i64 {code}, i64 {param}, i64 {index})")
    e.emit("br label %raise")
    e.label("raise")
    _error_return(e, message, ERROR_OUT_OF_RANGE)


def _prologue(e: _Emitter) -> None:
    e.lines.append("define ptr @handler(ptr %frame) {")
    e.label("entry")
    ext = e.field("%frame", CALL_FRAME["extension_start"])
    is_query = e.fresh("query")
    e.emit(f"{is_query} = icmp ne ptr {ext}, null")
    e.emit(f"br i1 {is_query}, label %metadata, label %execute")


def _snprintf_address() -> int:
    return ctypes.cast(ctypes.CDLL(None).snprintf, ctypes.c_void_p).value


def cpu_handler_ir(layout: HandlerLayout, host_entry: int, count_entry: int = 0, min_chunk: int = 4096) -> str:
    """The CPU handler: fill slots, run the host entry over the whole grid, check the status.

    With a dynamic tape (``layout.tape``), ``count_entry`` is the counting kernel's host entry
    and the handler sizes the tape first (``_cpu_tape_handler_ir``).
    """
    if layout.tape is not None:
        return _cpu_tape_handler_ir(layout, host_entry, count_entry, min_chunk)
    e = _Emitter()
    _prologue(e)
    _metadata_block(e, traits=0)
    e.label("execute")
    n = len(layout.slots)
    slots = e.fresh("slots")
    e.emit(f"{slots} = alloca [{n + layout.grid_rank + 1} x i64], align 8")
    status = e.fresh("status")
    e.emit(f"{status} = alloca [4 x i64], align 8")
    for offset in (0, 8, 16, 24):
        e.store_at(status, offset, "i64", "0")
    _fill_slots(e, layout, slots)
    _zero_outputs(e, layout)
    total = _grid(e, layout, slots, n)
    e.store_at(slots, 8 * (n + layout.grid_rank), "ptr", status)
    _run_host_entry(e, slots, total, host_entry, "run", min_chunk)
    _status_check(e, layout, status, _snprintf_address(), reset=False)
    e.lines.append("}")
    memset = ["declare void @llvm.memset.p0.i64(ptr, i8, i64, i1)"]
    return "\n".join(_globals(layout, memset + _host_functions()) + e.lines) + "\n"


def _run_host_entry(e: _Emitter, slots: str, total: str, address: int, tag: str, min_chunk: int) -> None:
    """``entry(slots, 0, total)`` for the host entry at ``address``: shared with XLA's thread
    pool (cpu_parallel.py) unless ``ADOFFLOAD_JAX_CPU_POOL=0``."""
    from . import cpu_parallel
    entry = _fn(e, address)
    if cpu_parallel.enabled():
        cpu_parallel.emit_parallel_call(e, slots, total, entry, tag, min_chunk)
    else:
        e.emit(f"call void {entry}(ptr {slots}, i64 0, i64 {total})")


def _host_functions() -> list[str]:
    """The module-level functions ``_run_host_entry`` calls."""
    from . import cpu_parallel
    return [cpu_parallel.functions()] if cpu_parallel.enabled() else []


# ----------------------------------------------------------------------------- dynamic tapes
# A reverse kernel with a dynamic tape (enzyme/tape.py) gets its tape from the handler, as the
# numpy launcher's ``launch.tape_arguments`` does: run the counting kernel over the grid (on
# private copies of the arrays its primal writes), exclusive prefix sum of the per-thread byte
# counts, allocate the tape, pass tape and offsets in the hidden params' slots, launch.

ERROR_RESOURCE_EXHAUSTED = 8


def _libc_address(name: str) -> int:
    return ctypes.cast(getattr(ctypes.CDLL(None), name), ctypes.c_void_p).value


def _label(e: _Emitter, base: str) -> str:
    return e.fresh(base)[1:]


def _fn(e: _Emitter, address: int) -> str:
    fn = e.fresh("fn")
    e.emit(f"{fn} = inttoptr i64 {address} to ptr")
    return fn


def _slot_at(e: _Emitter, slots: str, k: int) -> str:
    at = e.fresh("slot")
    e.emit(f"{at} = getelementptr i64, ptr {slots}, i64 {k}")
    return at


def _load_slot(e: _Emitter, slots: str, k: int, type_: str = "i64") -> str:
    value = e.fresh()
    e.emit(f"{value} = load {type_}, ptr {_slot_at(e, slots, k)}")
    return value


def _store_slot(e: _Emitter, slots: str, k: int, value: str, type_: str = "i64") -> None:
    e.emit(f"store {type_} {value}, ptr {_slot_at(e, slots, k)}")


def _array_bytes(e: _Emitter, slots: str, data_slot: int, ndim: int, itemsize: int) -> str:
    """Bytes of the array whose data pointer is in ``data_slot`` (its dims in the following slots)."""
    size = str(itemsize)
    for d in range(ndim):
        product = e.fresh("bytes")
        e.emit(f"{product} = mul i64 {size}, {_load_slot(e, slots, data_slot + 1 + d)}")
        size = product
    return size


def _at_least(e: _Emitter, value: str, floor: int) -> str:
    out = e.fresh("atleast")
    e.emit(f"{out} = call i64 @llvm.umax.i64(i64 {value}, i64 {floor})")
    return out


def _count_slots(e: _Emitter, layout: HandlerLayout, slots: str) -> str:
    """The counting kernel's slots, its first ``shared`` copied from the kernel's (scratch and
    counts pointers, grid and status are stored by the caller)."""
    tape = layout.tape
    cslots = e.fresh("cslots")
    e.emit(f"{cslots} = alloca [{tape.count_slots(layout.grid_rank)} x i64], align 8")
    for k in range(tape.shared):
        _store_slot(e, cslots, k, _load_slot(e, slots, k))
    return cslots


def _count_grid_and_status(e: _Emitter, layout: HandlerLayout, slots: str, cslots: str, status: str) -> None:
    """The counts array is shaped like the grid: its dims and the grid slots are the grid."""
    n, rank, shared = len(layout.slots), layout.grid_rank, layout.tape.shared
    for d in range(rank):
        g = _load_slot(e, slots, n + d)
        _store_slot(e, cslots, shared + 1 + d, g)
        _store_slot(e, cslots, shared + 1 + rank + d, g)
    _store_slot(e, cslots, shared + 1 + 2 * rank, status, "ptr")


def _hidden_slots(e: _Emitter, layout: HandlerLayout, slots: str, tape: str, tape_bytes: str, offsets: str) -> None:
    """adoffload_tape (an i64 array of tape_bytes / 8) and adoffload_tape_offsets (shaped like the grid)."""
    t = layout.tape
    words = e.fresh("words")
    e.emit(f"{words} = udiv i64 {tape_bytes}, 8")
    _store_slot(e, slots, t.tape_slot, tape, "ptr")
    _store_slot(e, slots, t.tape_slot + 1, words)
    _store_slot(e, slots, t.offsets_slot, offsets, "ptr")
    n = len(layout.slots)
    for d in range(layout.grid_rank):
        _store_slot(e, slots, t.offsets_slot + 1 + d, _load_slot(e, slots, n + d))


def _exclusive_scan(e: _Emitter, counts: str, offsets: str, total: str) -> str:
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


def _cpu_tape_handler_ir(layout: HandlerLayout, host_entry: int, count_entry: int, min_chunk: int) -> str:
    """CPU handler of a kernel with a dynamic tape: count, scan, allocate, run, free (every path)."""
    tape = layout.tape
    malloc, calloc, free = (_libc_address(n) for n in ("malloc", "calloc", "free"))
    text, size = _c_string(f"kernel '{layout.kernel_name}': out of host memory while sizing its dynamic tape")
    extra = _tape_globals(layout) + [f"@msg.oom = private unnamed_addr constant [{size} x i8] {text}"]
    e = _Emitter()
    _prologue(e)
    _metadata_block(e, traits=0)
    e.label("execute")
    n = len(layout.slots)
    slots = e.fresh("slots")
    e.emit(f"{slots} = alloca [{n + layout.grid_rank + 1} x i64], align 8")
    status = e.fresh("status")
    e.emit(f"{status} = alloca [4 x i64], align 8")
    for offset in (0, 8, 16, 24):
        e.store_at(status, offset, "i64", "0")
    _fill_slots(e, layout, slots)
    _zero_outputs(e, layout)
    total = _grid(e, layout, slots, n)
    e.store_at(slots, 8 * (n + layout.grid_rank), "ptr", status)
    # Every buffer the handler allocates is recorded here and freed on every way out.
    owned = len(tape.scratch) + 3
    buffers = e.fresh("owned")
    e.emit(f"{buffers} = alloca [{owned} x ptr], align 8")
    for j in range(owned):
        e.store_at(buffers, 8 * j, "ptr", "null")

    def release():
        free_fn = _fn(e, free)
        for j in range(owned):
            e.emit(f"call void {free_fn}(ptr {e.field(buffers, 8 * j)})")

    def allocate(j: int, nbytes: str, zeroed: bool) -> str:
        fn = _fn(e, calloc if zeroed else malloc)
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

    cslots = _count_slots(e, layout, slots)
    for j, (data_slot, ndim, itemsize, copy) in enumerate(tape.scratch):
        nbytes = _array_bytes(e, slots, data_slot, ndim, itemsize)
        p = allocate(j, _at_least(e, nbytes, 1), zeroed=not copy)
        if copy:
            source = _load_slot(e, slots, data_slot, "ptr")
            e.emit(f"call void @llvm.memcpy.p0.p0.i64(ptr {p}, ptr {source}, i64 {nbytes}, i1 false)")
        _store_slot(e, cslots, data_slot, p, "ptr")
    count_bytes = e.fresh("bytes")
    e.emit(f"{count_bytes} = mul i64 {_at_least(e, total, 1)}, 8")
    counts = allocate(owned - 3, count_bytes, zeroed=True)
    _store_slot(e, cslots, tape.shared, counts, "ptr")
    _count_grid_and_status(e, layout, slots, cslots, status)
    _run_host_entry(e, cslots, total, count_entry, "count", min_chunk)
    code = e.field(status, 0, "i64")
    counted = e.fresh("counted")
    e.emit(f"{counted} = icmp eq i64 {code}, 0")
    e.emit("br i1 %s, label %%counted, label %%count_failed" % counted)
    e.label("count_failed")
    release()
    e.emit("br label %check_status")
    e.label("counted")
    offsets = allocate(owned - 2, count_bytes, zeroed=False)
    tape_bytes = _at_least(e, _exclusive_scan(e, counts, offsets, total), 8)
    tape_buffer = allocate(owned - 1, tape_bytes, zeroed=True)
    _hidden_slots(e, layout, slots, tape_buffer, tape_bytes, offsets)
    _run_host_entry(e, slots, total, host_entry, "run", min_chunk)
    release()
    e.emit("br label %check_status")
    e.label("check_status")
    _status_check(e, layout, status, _snprintf_address(), reset=False)
    e.label("oom")
    release()
    _error_return(e, "@msg.oom", ERROR_RESOURCE_EXHAUSTED)
    e.lines.append("}")
    return "\n".join(_globals(layout, extra + _host_functions()) + e.lines) + "\n"


@dataclass(frozen=True)
class GpuTables:
    """Per-device addresses baked into a GPU handler (index = XLA device ordinal)."""
    functions: tuple[int, ...]          # CUfunction / hipFunction_t
    statuses: tuple[int, ...]           # device addresses of host-mapped status records
    host_statuses: tuple[int, ...]      # the same records' host addresses (read after a sync)
    launch: int                         # address of cuLaunchKernel / hipModuleLaunchKernel
    synchronize: int                    # address of cuStreamSynchronize / hipStreamSynchronize
    memset: int = 0                     # address of cuMemsetD8Async / hipMemsetD8Async
    # Kernels with a dynamic tape only:
    count_functions: tuple[int, ...] = ()   # the counting kernel, per device
    copy_dtod: int = 0                  # cuMemcpyDtoDAsync / hipMemcpyDtoDAsync
    copy_dtoh: int = 0                  # cuMemcpyDtoHAsync / hipMemcpyDtoHAsync
    copy_htod: int = 0                  # cuMemcpyHtoDAsync / hipMemcpyHtoDAsync
    driver: str = "cuda"                # "cuda" | "hip": names the calls in error messages


def gpu_handler_ir(layout: HandlerLayout, tables: GpuTables, *, sync: bool = False,
                   elements_per_thread: int = 1) -> str:
    """The CUDA/ROCm handler: slots (scalars by reference), stream, per-device function, launch.

    Without ``sync`` the handler never waits on the device, so XLA may capture it in a
    command buffer (CUDA graph); device-side failures are read later by ``check_errors``.
    ``elements_per_thread``: the k the kernel was compiled with (codegen/vectorize.py); the
    launch has ``ceil(total / k)`` threads.
    """
    if layout.tape is not None:
        if elements_per_thread != 1:
            raise ValueError("dynamic-tape handlers launch one element per thread")
        return _gpu_tape_handler_ir(layout, tables, sync=sync)
    n_devices = len(tables.functions)
    extra = [_table("functions", tables.functions), _table("statuses", tables.statuses),
             _table("host_statuses", tables.host_statuses)]
    e = _Emitter()
    _prologue(e)
    _metadata_block(e, traits=0 if sync else TRAIT_COMMAND_BUFFER_COMPATIBLE)
    e.label("execute")
    stream, ordinal = _stream_and_ordinal(e, layout, extra, n_devices)
    e.label("launch")
    n = len(layout.slots)
    n_slots = n + layout.grid_rank + 1
    slots = e.fresh("slots")
    e.emit(f"{slots} = alloca [{n_slots} x i64], align 8")
    _fill_slots(e, layout, slots)
    _zero_outputs(e, layout, tables.memset, stream)
    total = _grid(e, layout, slots, n)
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
    blocks64, rounded = e.fresh("blocks"), e.fresh("rounded")
    e.emit(f"{rounded} = add i64 {threads}, {BLOCK_SIZE - 1}")
    e.emit(f"{blocks64} = udiv i64 {rounded}, {BLOCK_SIZE}")
    fits = e.fresh("fits")
    e.emit(f"{fits} = icmp ule i64 {blocks64}, 2147483647")
    e.emit(f"br i1 {fits}, label %do_launch, label %too_big")
    e.label("too_big")
    text, size = _c_string(f"kernel '{layout.kernel_name}': grid too large for a 1-D launch")
    extra.append(f"@msg.grid = private unnamed_addr constant [{size} x i8] {text}")
    _error_return(e, "@msg.grid", ERROR_OUT_OF_RANGE)
    e.label("do_launch")
    blocks = e.fresh("blocks")
    e.emit(f"{blocks} = trunc i64 {blocks64} to i32")
    function = e.element("@functions", ordinal)
    launch = e.fresh("launchfn")
    e.emit(f"{launch} = inttoptr i64 {tables.launch} to ptr")
    rc = e.fresh("rc")
    e.emit(f"{rc} = call i32 {launch}(ptr {function}, i32 {blocks}, i32 1, i32 1, i32 {BLOCK_SIZE}, "
           f"i32 1, i32 1, i32 0, ptr {stream}, ptr {params}, ptr null)")
    launched = e.fresh("launched")
    e.emit(f"{launched} = icmp eq i32 {rc}, 0")
    e.emit(f"br i1 {launched}, label %after_launch, label %launch_failed")
    e.label("launch_failed")
    text, size = _c_string(f"kernel '{layout.kernel_name}': the driver refused the launch")
    extra.append(f"@msg.launch = private unnamed_addr constant [{size} x i8] {text}")
    _error_return(e, "@msg.launch", ERROR_INTERNAL)
    e.label("after_launch")
    if sync:
        sync_fn = e.fresh("syncfn")
        e.emit(f"{sync_fn} = inttoptr i64 {tables.synchronize} to ptr")
        e.emit(f"call i32 {sync_fn}(ptr {stream})")
        _status_check(e, layout, e.element("@host_statuses", ordinal), _snprintf_address(), reset=True)
    else:
        e.emit("ret ptr null")
    e.label("done")
    e.emit("ret ptr null")
    e.lines.append("}")
    return "\n".join(_globals(layout, extra) + e.lines) + "\n"


_DRIVER_CALLS = {
    "cuda": {"launch": "cuLaunchKernel", "sync": "cuStreamSynchronize", "memset": "cuMemsetD8Async",
             "dtod": "cuMemcpyDtoDAsync", "dtoh": "cuMemcpyDtoHAsync", "htod": "cuMemcpyHtoDAsync"},
    "hip": {"launch": "hipModuleLaunchKernel", "sync": "hipStreamSynchronize", "memset": "hipMemsetD8Async",
            "dtod": "hipMemcpyDtoDAsync", "dtoh": "hipMemcpyDtoHAsync", "htod": "hipMemcpyHtoDAsync"},
}
DEVICE_ALIGNMENT = 16       # the largest XLA_FFI_DeviceMemory_Allocate accepts (its buffers are 256-aligned anyway)


def _release_function() -> str:
    """``@release(api, ctx, buffers, sizes, n, host, free)``: give the non-null device buffers back
    to XLA's allocator (dropping any error it returns) and free the host buffer."""
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


def _gpu_tape_handler_ir(layout: HandlerLayout, tables: GpuTables, *, sync: bool) -> str:
    """CUDA/ROCm handler of a kernel with a dynamic tape.

    On the call's stream: private copies of the arrays the primal writes, the counting kernel,
    counts copied to the host; the stream is synchronized, the counts prefix-summed on the host
    and the offsets copied back; the tape is allocated and the kernel launched. Device buffers
    come from XLA's FFI allocator (``XLA_FFI_DeviceMemory_Allocate``: the memory JAX already
    owns, freed in stream order) and go back to it on every path, errors included. Since it
    synchronizes, this handler is never captured in a command buffer (traits 0). A failure in
    counting (say an index out of bounds) is reported by this call itself.
    """
    tape = layout.tape
    names = _DRIVER_CALLS[tables.driver]
    n_devices = len(tables.functions)
    if len(tables.count_functions) != n_devices:
        raise JaxIntegrationError(f"kernel '{layout.kernel_name}': a counting kernel per device is needed to "
                                  "size its dynamic tape (internal error)")
    extra = _tape_globals(layout) + [
        _table("functions", tables.functions), _table("count_functions", tables.count_functions),
        _table("statuses", tables.statuses), _table("host_statuses", tables.host_statuses), _release_function()]
    for key, call in names.items():
        text, size = _c_string(call)
        extra.append(f"@call.{key} = private unnamed_addr constant [{size} x i8] {text}")
    for key, message in (
            ("driver", f"kernel '{layout.kernel_name}': %s failed with error %d (dynamic tape handler)"),
            ("alloc", f"kernel '{layout.kernel_name}': XLA_FFI_DeviceMemory_Allocate could not allocate %lld "
                      "bytes of device memory for its dynamic tape (%s)"),
            ("oom", f"kernel '{layout.kernel_name}': out of host memory while sizing its dynamic tape"),
            ("grid", f"kernel '{layout.kernel_name}': grid too large for a 1-D launch")):
        text, size = _c_string(message)
        extra.append(f"@msg.{key} = private unnamed_addr constant [{size} x i8] {text}")
    snprintf = _snprintf_address()
    malloc, free = _libc_address("malloc"), _libc_address("free")
    e = _Emitter()
    _prologue(e)
    _metadata_block(e, traits=0)
    e.label("execute")
    stream, ordinal = _stream_and_ordinal(e, layout, extra, n_devices)
    e.label("launch")
    api = e.field("%frame", CALL_FRAME["api"])
    ctx = e.field("%frame", CALL_FRAME["ctx"])
    n, rank = len(layout.slots), layout.grid_rank
    slots = e.fresh("slots")
    e.emit(f"{slots} = alloca [{n + rank + 1} x i64], align 8")
    _fill_slots(e, layout, slots)
    _zero_outputs(e, layout, tables.memset, stream)
    total = _grid(e, layout, slots, n)
    e.store_at(slots, 8 * (n + rank), "ptr", e.element("@statuses", ordinal))
    host_status = e.element("@host_statuses", ordinal)
    empty = e.fresh("empty")
    e.emit(f"{empty} = icmp eq i64 {total}, 0")
    e.emit(f"br i1 {empty}, label %done, label %nonempty")
    e.label("nonempty")
    blocks64, rounded, fits = e.fresh("blocks"), e.fresh("rounded"), e.fresh("fits")
    e.emit(f"{rounded} = add i64 {total}, {BLOCK_SIZE - 1}")
    e.emit(f"{blocks64} = udiv i64 {rounded}, {BLOCK_SIZE}")
    e.emit(f"{fits} = icmp ule i64 {blocks64}, 2147483647")
    e.emit(f"br i1 {fits}, label %sizing, label %too_big")
    e.label("too_big")
    _error_return(e, "@msg.grid", ERROR_OUT_OF_RANGE)
    e.label("sizing")
    blocks = e.fresh("blocks")
    e.emit(f"{blocks} = trunc i64 {blocks64} to i32")
    owned = len(tape.scratch) + 3
    buffers, sizes, host = e.fresh("owned"), e.fresh("sizes"), e.fresh("host")
    fail_call, fail_code, fail_size, fail_error = e.fresh("fcall"), e.fresh("fcode"), e.fresh("fsize"), e.fresh("ferr")
    e.emit(f"{buffers} = alloca [{owned} x ptr], align 8")
    e.emit(f"{sizes} = alloca [{owned} x i64], align 8")
    for j in range(owned):
        e.store_at(buffers, 8 * j, "ptr", "null")
        e.store_at(sizes, 8 * j, "i64", "0")
    for name, type_ in ((host, "ptr"), (fail_call, "ptr"), (fail_code, "i32"), (fail_size, "i64"), (fail_error, "ptr")):
        e.emit(f"{name} = alloca {type_}, align 8")
        e.emit(f"store {type_} {'null' if type_ == 'ptr' else '0'}, ptr {name}")
    allocate_fn = e.field(api, API["memory_allocate"])

    def release():
        e.emit(f"call void @release(ptr {api}, ptr {ctx}, ptr {buffers}, ptr {sizes}, i64 {owned}, "
               f"ptr {e.field(host, 0)}, ptr {_fn(e, free)})")

    def checked(key: str, rc: str) -> None:
        ok, next_ = e.fresh("ok"), _label(e, key + "_ok")
        e.emit(f"store ptr @call.{key}, ptr {fail_call}")
        e.emit(f"store i32 {rc}, ptr {fail_code}")
        e.emit(f"{ok} = icmp eq i32 {rc}, 0")
        e.emit(f"br i1 {ok}, label %{next_}, label %driver_failed")
        e.label(next_)

    def driver(key: str, address: int, *args: str) -> None:
        rc = e.fresh("rc")
        e.emit(f"{rc} = call i32 {_fn(e, address)}({', '.join(args)})")
        checked(key, rc)

    def allocate(j: int, nbytes: str) -> str:
        size = _at_least(e, nbytes, 8)
        args = e.fresh("aargs")
        e.emit(f"{args} = alloca [6 x i64], align 8")
        for offset, type_, value in ((0, "i64", "48"), (8, "ptr", "null"), (16, "ptr", ctx), (24, "i64", size),
                                     (32, "i64", str(DEVICE_ALIGNMENT)), (40, "ptr", "null")):
            e.store_at(args, offset, type_, value)
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

    def launch(table: str, slot_values: str, count: int) -> None:
        params = e.fresh("params")
        e.emit(f"{params} = alloca [{count} x ptr], align 8")
        for k in range(count):
            cell = e.fresh("p")
            e.emit(f"{cell} = getelementptr ptr, ptr {params}, i64 {k}")
            e.emit(f"store ptr {_slot_at(e, slot_values, k)}, ptr {cell}")
        function = e.element(table, ordinal)
        driver("launch", tables.launch, f"ptr {function}", f"i32 {blocks}", "i32 1", "i32 1", f"i32 {BLOCK_SIZE}",
               "i32 1", "i32 1", "i32 0", f"ptr {stream}", f"ptr {params}", "ptr null")

    # 1. count on private copies of the arrays the primal writes
    cslots = _count_slots(e, layout, slots)
    for j, (data_slot, ndim, itemsize, copy) in enumerate(tape.scratch):
        nbytes = _array_bytes(e, slots, data_slot, ndim, itemsize)
        p = allocate(j, nbytes)
        if copy:
            source = _load_slot(e, slots, data_slot, "ptr")
            driver("dtod", tables.copy_dtod, f"ptr {p}", f"ptr {source}", f"i64 {nbytes}", f"ptr {stream}")
        else:
            driver("memset", tables.memset, f"ptr {p}", "i8 0", f"i64 {nbytes}", f"ptr {stream}")
        _store_slot(e, cslots, data_slot, p, "ptr")
    count_bytes = e.fresh("bytes")
    e.emit(f"{count_bytes} = mul i64 {total}, 8")
    counts = allocate(owned - 3, count_bytes)
    driver("memset", tables.memset, f"ptr {counts}", "i8 0", f"i64 {count_bytes}", f"ptr {stream}")
    _store_slot(e, cslots, tape.shared, counts, "ptr")
    _count_grid_and_status(e, layout, slots, cslots, e.element("@statuses", ordinal))
    launch("@count_functions", cslots, tape.count_slots(rank))
    # 2. counts to the host, wait, prefix sum (in place), offsets back
    host_counts = e.fresh("hcounts")
    e.emit(f"{host_counts} = call ptr {_fn(e, malloc)}(i64 {count_bytes})")
    e.emit(f"store ptr {host_counts}, ptr {host}")
    no_host = e.fresh("nohost")
    e.emit(f"{no_host} = icmp eq ptr {host_counts}, null")
    e.emit(f"br i1 {no_host}, label %host_oom, label %have_host")
    e.label("have_host")
    driver("dtoh", tables.copy_dtoh, f"ptr {host_counts}", f"ptr {counts}", f"i64 {count_bytes}", f"ptr {stream}")
    driver("sync", tables.synchronize, f"ptr {stream}")
    code = e.field(host_status, 0, "i64")
    counted = e.fresh("counted")
    e.emit(f"{counted} = icmp eq i64 {code}, 0")
    e.emit(f"br i1 {counted}, label %counted, label %count_failed")
    e.label("count_failed")
    release()
    e.emit("br label %check_status")
    e.label("counted")
    tape_sum = _exclusive_scan(e, host_counts, host_counts, total)
    offsets = allocate(owned - 2, count_bytes)
    driver("htod", tables.copy_htod, f"ptr {offsets}", f"ptr {host_counts}", f"i64 {count_bytes}", f"ptr {stream}")
    # 3. the tape, the kernel
    tape_bytes = _at_least(e, tape_sum, 8)
    tape_buffer = allocate(owned - 1, tape_bytes)
    driver("memset", tables.memset, f"ptr {tape_buffer}", "i8 0", f"i64 {tape_bytes}", f"ptr {stream}")
    _hidden_slots(e, layout, slots, tape_buffer, tape_bytes, offsets)
    launch("@functions", slots, n + rank + 1)
    release()
    if sync:
        e.emit(f"call i32 {_fn(e, tables.synchronize)}(ptr {stream})")
        e.emit("br label %check_status")
    else:
        e.emit("ret ptr null")
    e.label("check_status")
    _status_check(e, layout, host_status, snprintf, reset=True)
    e.label("driver_failed")
    release()
    message = e.fresh("msg")
    e.emit(f"{message} = alloca [{MESSAGE_BYTES} x i8], align 8")
    e.emit(f"call i32 (ptr, i64, ptr, ...) {_fn(e, snprintf)}(ptr {message}, i64 {MESSAGE_BYTES}, ptr @msg.driver, "
           f"ptr {e.field(fail_call, 0)}, i32 {e.field(fail_code, 0, 'i32')})")
    _error_return(e, message, ERROR_INTERNAL)
    e.label("alloc_failed")
    release()
    xla_error = e.field(fail_error, 0)
    margs = e.fresh("margs")             # XLA_FFI_Error_GetMessage({size, null, error, &message})
    e.emit(f"{margs} = alloca [4 x i64], align 8")
    e.store_at(margs, 0, "i64", "32")
    e.store_at(margs, 8, "ptr", "null")
    e.store_at(margs, 16, "ptr", xla_error)
    e.store_at(margs, 24, "ptr", "null")
    e.emit(f"call void {e.field(api, API['error_get_message'])}(ptr {margs})")
    message = e.fresh("msg")
    e.emit(f"{message} = alloca [{MESSAGE_BYTES} x i8], align 8")
    e.emit(f"call i32 (ptr, i64, ptr, ...) {_fn(e, snprintf)}(ptr {message}, i64 {MESSAGE_BYTES}, ptr @msg.alloc, "
           f"i64 {e.field(fail_size, 0, 'i64')}, ptr {e.field(margs, 24)})")
    dargs = e.fresh("dargs")             # the message is copied: now the error can go
    e.emit(f"{dargs} = alloca [3 x i64], align 8")
    e.store_at(dargs, 0, "i64", "24")
    e.store_at(dargs, 8, "ptr", "null")
    e.store_at(dargs, 16, "ptr", xla_error)
    e.emit(f"call void {e.field(api, API['error_destroy'])}(ptr {dargs})")
    _error_return(e, message, ERROR_RESOURCE_EXHAUSTED)
    e.label("host_oom")
    release()
    _error_return(e, "@msg.oom", ERROR_RESOURCE_EXHAUSTED)
    e.label("done")
    e.emit("ret ptr null")
    e.lines.append("}")
    return "\n".join(_globals(layout, extra) + e.lines) + "\n"


def _table(name: str, values) -> str:
    items = ", ".join(f"ptr inttoptr (i64 {v} to ptr)" for v in values)
    return f"@{name} = private constant [{len(values)} x ptr] [{items}]"


def _stream_and_ordinal(e: _Emitter, layout: HandlerLayout, extra: list[str], n_devices: int) -> tuple[str, str]:
    """The call's stream and device ordinal (an error for an ordinal without a loaded module);
    continues at label ``launch``."""
    api = e.field("%frame", CALL_FRAME["api"])
    ctx = e.field("%frame", CALL_FRAME["ctx"])
    # stream = XLA_FFI_Stream_Get({.ctx}).stream
    stream_get = e.field(api, API["stream_get"])
    sargs = e.fresh("sargs")
    e.emit(f"{sargs} = alloca [4 x i64], align 8")
    e.store_at(sargs, 0, "i64", "32")
    e.store_at(sargs, 8, "ptr", "null")
    e.store_at(sargs, 16, "ptr", ctx)
    e.store_at(sargs, 24, "ptr", "null")
    serr = e.fresh("serr")
    e.emit(f"{serr} = call ptr {stream_get}(ptr {sargs})")
    stream_failed = e.fresh("sfail")
    e.emit(f"{stream_failed} = icmp ne ptr {serr}, null")
    e.emit(f"br i1 {stream_failed}, label %pass_error, label %got_stream")
    e.label("pass_error")
    e.emit(f"ret ptr {serr}")
    e.label("got_stream")
    stream = e.field(sargs, 24)
    ordinal = _device_ordinal(e, api, ctx)
    in_range = e.fresh("inrange")
    e.emit(f"{in_range} = icmp ult i64 {ordinal}, {n_devices}")
    e.emit(f"br i1 {in_range}, label %launch, label %bad_device")
    e.label("bad_device")
    text, size = _c_string(f"kernel '{layout.kernel_name}': no module loaded for this device ordinal")
    extra.append(f"@msg.device = private unnamed_addr constant [{size} x i8] {text}")
    _error_return(e, "@msg.device", ERROR_INTERNAL)
    return stream, ordinal


def _device_ordinal(e: _Emitter, api: str, ctx: str) -> str:
    """``XLA_FFI_DeviceOrdinal_Get`` when the API struct has it, else device 0."""
    size = e.field(api, API["struct_size"], "i64")
    has = e.fresh("has")
    e.emit(f"{has} = icmp ugt i64 {size}, {API['device_ordinal_get']}")
    e.emit(f"br i1 {has}, label %ask_ordinal, label %ordinal_zero")
    e.label("ask_ordinal")
    get = e.field(api, API["device_ordinal_get"])
    oargs = e.fresh("oargs")
    e.emit(f"{oargs} = alloca [4 x i64], align 8")
    e.store_at(oargs, 0, "i64", "28")
    e.store_at(oargs, 8, "ptr", "null")
    e.store_at(oargs, 16, "ptr", ctx)
    e.store_at(oargs, 24, "i32", "0")
    e.emit(f"call ptr {get}(ptr {oargs})")
    asked = e.field(oargs, 24, "i32")
    e.emit("br label %ordinal_known")
    e.label("ordinal_zero")
    e.emit("br label %ordinal_known")
    e.label("ordinal_known")
    merged, wide = e.fresh("ord"), e.fresh("ord")
    e.emit(f"{merged} = phi i32 [{asked}, %ask_ordinal], [0, %ordinal_zero]")
    e.emit(f"{wide} = zext i32 {merged} to i64")
    return wide


class CompiledHandler:
    """A handler JIT-compiled for the host; keeps its code alive and exposes the PyCapsule."""

    def __init__(self, text: str, keep_alive=()):
        from ..codegen.host import HostProgram
        self.text = text
        self.program = HostProgram(text)
        self.address = self.program.address("handler")
        self._callable = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p)(self.address)
        self.keep_alive = tuple(keep_alive)

    def capsule(self):
        import jax
        return jax.ffi.pycapsule(self._callable)
