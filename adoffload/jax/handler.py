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
from dataclasses import dataclass

from .. import abi_status
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
    tapes: "tuple[TapeLayout, ...]" = ()             # dynamic tapes, sized in this order (tape_handler.py)

    @property
    def tape(self) -> "TapeLayout | None":
        """The kernel's own dynamic tape (the last level), None without one."""
        return self.tapes[-1] if self.tapes else None


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
    shadow_slots: tuple[int, ...] = ()                   # shadow tapes laid out like this one (zeroed, same size)

    def count_slots(self, grid_rank: int) -> int:
        return self.shared + 1 + 2 * grid_rank + 1


def _is_hidden(param) -> bool:
    return param.name.startswith(HIDDEN_PREFIX)


def layout_for(signature: KernelSignature, *, scalars_by_reference: bool,
               written: frozenset = frozenset(), count_signature: KernelSignature | None = None,
               levels: tuple = ()) -> HandlerLayout:
    """Map the flattened params onto call-frame buffers.

    Operands are the In, InOut and scalar params in order; results are the Out and InOut
    arrays in order. InOut data is taken from the result buffer (it aliases the operand).
    Out arrays are zeroed before the launch, except the params in ``written`` (written in
    full by the kernel at this grid: no memset needed). Hidden params (a reverse kernel's
    dynamic tape, ``adoffload_*``) are neither operands nor results: the handler sizes them
    by running ``count_signature``'s kernel first (see ``TapeLayout``). A second derivative
    through a dynamic tape has two levels: ``levels`` gives ``(count signature, tape param,
    offsets param, shadow params)`` per level, in sizing order (launch.tape_levels).
    """
    from ..enzyme.kernels import OFFSETS_PARAM, TAPE_PARAM
    if not levels and count_signature is not None:
        levels = ((count_signature, TAPE_PARAM, OFFSETS_PARAM, ()),)
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
    tapes = ()
    if any(_is_hidden(p) for p in signature.params):
        tapes = tuple(_tape_layout(signature, *level) for level in levels)
        covered = {name for _, tape, offsets, shadows in levels for name in (tape, offsets, *shadows)}
        hidden = [p.name for p in signature.params if _is_hidden(p)]
        if not levels or set(hidden) != covered:
            raise JaxIntegrationError(
                f"kernel '{signature.name}' has launcher-filled params {hidden}; JAX handlers size dynamic tapes "
                f"(with their counting kernels) and their shadows, and nothing else (a deterministic kernel's "
                "contribution log runs through the numpy launcher only)")
    return HandlerLayout(signature.name, tuple(p.name for p in signature.params), tuple(slots),
                         signature.grid_rank, zeroed, tapes)


def _tape_layout(signature: KernelSignature, count_signature: KernelSignature, tape_param: str,
                 offsets_param: str, shadow_params: tuple = ()) -> TapeLayout:
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
                    for k, p in enumerate(primal) if p.is_array and p.type.writes and not _is_hidden(p))
    names = [p.name for p in signature.params]
    return TapeLayout(count_signature.name, shared, scratch, start[names.index(tape_param)],
                      start[names.index(offsets_param)], tuple(start[names.index(s)] for s in shadow_params))


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

    def ffi_args(self, base: str, fields: list[tuple[str, str]], struct_size: int | None = None) -> str:
        """An XLA FFI API argument record on the stack: ``{struct_size, extension_start = null,
        fields...}``, each field in an 8-byte slot. ``struct_size`` defaults to the whole record
        (records whose last field is an i32 are shorter: pass it)."""
        args = self.fresh(base)
        self.emit(f"{args} = alloca [{2 + len(fields)} x i64], align 8")
        self.store_at(args, 0, "i64", str(struct_size or 8 * (2 + len(fields))))
        self.store_at(args, 8, "ptr", "null")
        for k, (type_, value) in enumerate(fields):
            self.store_at(args, 16 + 8 * k, type_, value)
        return args

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


_LINE_FORMATS = {
    "trap": "kernel '{kernel}': an assert failed at line %lld of its source",
    "division": "kernel '{kernel}': integer division or modulo by zero ('//' or '%%') at line %lld of its source",
    "overflow": "kernel '{kernel}': integer overflow (the most negative integer // -1) at line %lld of its source",
    "diverged": "kernel '{kernel}': the threads of block %lld reached different barriers (control flow that is "
                "not uniform across the block); the block was stopped",
    "other": "kernel '{kernel}' stopped with a status record (value %lld, code %lld, parameter %lld)",
}

# Bounds failures of arrays that are not params (abi_status.py): a block kernel's shared array n
# reports SHARED_INDEX_BASE - n, a thread-private array n reports -1 - n. Printed with the index,
# the axis and n, in the numpy launcher's words.
_ARRAY_FORMATS = {
    "shared": "kernel '{kernel}': index %lld out of bounds for axis %lld of shared array #%lld "
              "(the access was skipped; no memory outside the array was touched)",
    "local": "kernel '{kernel}': index %lld out of bounds for axis %lld of local array #%lld "
             "(the access was skipped; no memory outside the array was touched)",
}


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
    lines.append(f"@fmt.bounds = private unnamed_addr constant [{n_bounds} x i8] {bounds}")
    # The other records (abi_status codes 2-5 and unknown ones) are printed with the record's
    # index word first: the source line for codes 2-4.
    for name, text in (_LINE_FORMATS | _ARRAY_FORMATS).items():
        text, n = _c_string(text.format(kernel=layout.kernel_name))
        lines.append(f"@fmt.{name} = private unnamed_addr constant [{n} x i8] {text}")
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
    args = e.ffi_args("eargs", [("ptr", message), ("i32", str(code))], struct_size=28)
    err = e.fresh("err")
    e.emit(f"{err} = call ptr {create}(ptr {args})")
    e.emit(f"ret ptr {err}")



def _destroy_error(e: _Emitter, api: str, error: str) -> None:
    """``XLA_FFI_Error_Destroy({error})``: an error the handler handles is its to free."""
    e.emit(f"call void {e.field(api, API['error_destroy'])}(ptr {e.ffi_args('dargs', [('ptr', error)])})")

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
    e.emit(f"br i1 {both}, label %fmt_bounds, label %fmt_unnamed")
    e.label("fmt_bounds")
    name = e.element("@names", param)
    e.emit(f"call i32 (ptr, i64, ptr, ...) {fmt_fn}(ptr {message}, i64 {MESSAGE_BYTES}, ptr @fmt.bounds, "
           f"i64 {index}, i64 {dim}, ptr {name})")
    e.emit("br label %raise")
    _unnamed_array_message(e, is_bounds, param, index, dim, message, fmt_fn)
    e.label("fmt_other")
    fmt = "@fmt.other"
    for status_code, name in ((abi_status.TRAP, "trap"), (abi_status.DIVISION_BY_ZERO, "division"),
                              (abi_status.INTEGER_OVERFLOW, "overflow"), (abi_status.DIVERGED, "diverged")):
        is_code, chosen = e.fresh("is_code"), e.fresh("fmt")
        e.emit(f"{is_code} = icmp eq i64 {code}, {status_code}")
        e.emit(f"{chosen} = select i1 {is_code}, ptr @fmt.{name}, ptr {fmt}")
        fmt = chosen
    e.emit(f"call i32 (ptr, i64, ptr, ...) {fmt_fn}(ptr {message}, i64 {MESSAGE_BYTES}, ptr {fmt}, "
           f"i64 {index}, i64 {code}, i64 {param})")
    e.emit("br label %raise")
    e.label("raise")
    _error_return(e, message, ERROR_OUT_OF_RANGE)


def _unnamed_array_message(e: _Emitter, is_bounds: str, param: str, index: str, dim: str, message: str,
                           fmt_fn: str) -> None:
    """Block ``fmt_unnamed``: a bounds failure of a shared or thread-private array (a negative
    parameter index, abi_status.py) names that array by its number; anything else goes on to
    ``fmt_other``."""
    e.label("fmt_unnamed")
    for kind, test, base in (("shared", "sle", abi_status.SHARED_INDEX_BASE), ("local", "slt", -1)):
        matches, chosen = e.fresh(f"is_{kind}"), e.fresh(kind)
        bound = abi_status.SHARED_INDEX_BASE if kind == "shared" else 0
        e.emit(f"{matches} = icmp {test} i64 {param}, {bound}")
        e.emit(f"{chosen} = and i1 {is_bounds}, {matches}")
        e.emit(f"br i1 {chosen}, label %fmt_{kind}, label %fmt_not_{kind}")
        e.label(f"fmt_{kind}")
        number = e.fresh("number")
        e.emit(f"{number} = sub i64 {base}, {param}")
        e.emit(f"call i32 (ptr, i64, ptr, ...) {fmt_fn}(ptr {message}, i64 {MESSAGE_BYTES}, ptr @fmt.{kind}, "
               f"i64 {index}, i64 {dim}, i64 {number})")
        e.emit("br label %raise")
        e.label(f"fmt_not_{kind}")
    e.emit("br label %fmt_other")


def _prologue(e: _Emitter) -> None:
    e.lines.append("define ptr @handler(ptr %frame) {")
    e.label("entry")
    ext = e.field("%frame", CALL_FRAME["extension_start"])
    is_query = e.fresh("query")
    e.emit(f"{is_query} = icmp ne ptr {ext}, null")
    e.emit(f"br i1 {is_query}, label %metadata, label %execute")


def _snprintf_address() -> int:
    return ctypes.cast(ctypes.CDLL(None).snprintf, ctypes.c_void_p).value


def _fn(e: _Emitter, address: int) -> str:
    fn = e.fresh("fn")
    e.emit(f"{fn} = inttoptr i64 {address} to ptr")
    return fn


def cpu_handler_ir(layout: HandlerLayout, host_entry: int, count_entry=0, min_chunk: int = 4096) -> str:
    """The CPU handler: fill slots, run the host entry over the whole grid, check the status.

    With a dynamic tape (``layout.tape``), ``count_entry`` is the counting kernel's host entry
    (a tuple of them, one per level, when ``layout.tapes`` has two)
    and the handler sizes the tape first (``tape_handler.py``).
    """
    if layout.tape is not None:
        from .tape_handler import cpu_tape_handler_ir
        return cpu_tape_handler_ir(layout, host_entry, count_entry, min_chunk)
    e = _Emitter()
    slots, status, total = _cpu_frame(e, layout)
    _run_host_entry(e, slots, total, host_entry, "run", min_chunk)
    _status_check(e, layout, status, _snprintf_address(), reset=False)
    e.lines.append("}")
    memset = ["declare void @llvm.memset.p0.i64(ptr, i8, i64, i1)"]
    return "\n".join(_globals(layout, memset + _host_functions()) + e.lines) + "\n"


def _cpu_frame(e: _Emitter, layout: HandlerLayout) -> tuple[str, str, str]:
    """A CPU handler's start: metadata answer, slots filled from the call frame, Out arrays
    zeroed, a cleared status record in the last slot. Returns (slots, status, total threads)."""
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
    return slots, status, total


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
    count_functions: tuple[int, ...] = ()   # the counting kernels, per device (level after level)
    scan_functions: tuple[int, ...] = ()    # tape_scan.SCAN_KERNELS, per device (kernel after kernel)
    copy_dtod: int = 0                  # cuMemcpyDtoDAsync / hipMemcpyDtoDAsync
    copy_dtoh: int = 0                  # cuMemcpyDtoHAsync / hipMemcpyDtoHAsync
    copy_htod: int = 0                  # cuMemcpyHtoDAsync / hipMemcpyHtoDAsync
    driver: str = "cuda"                # "cuda" | "hip": names the calls in error messages


def gpu_handler_ir(layout: HandlerLayout, tables: GpuTables, *, sync: bool = False,
                   elements_per_thread: int = 1, block_size: int = BLOCK_SIZE, max_threads: int = 0) -> str:
    """The CUDA/ROCm handler: slots (scalars by reference), stream, per-device function, launch.

    Without ``sync`` the handler never waits on the device, so XLA may capture it in a
    command buffer (CUDA graph); device-side failures are read later by ``check_errors``.
    ``elements_per_thread``: the k the kernel was compiled with (codegen/vectorize.py); the
    launch has ``ceil(total / k)`` threads. ``block_size``: threads per block (a block kernel's
    block, codegen/blocks.py; the grid is then a whole number of blocks). ``max_threads`` (> 0
    only for entries that loop over the grid, codegen/grid_stride.py): launch at most this many
    threads, one resident wave.
    """
    if layout.tape is not None:
        if elements_per_thread != 1:
            raise ValueError("dynamic-tape handlers launch one element per thread")
        from .tape_handler import gpu_tape_handler_ir
        return gpu_tape_handler_ir(layout, tables, sync=sync, block_size=block_size)
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
    e.emit(f"{rc} = call i32 {launch}(ptr {function}, i32 {blocks}, i32 1, i32 1, i32 {block_size}, "
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
    sargs = e.ffi_args("sargs", [("ptr", ctx), ("ptr", "null")])
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
    oargs = e.ffi_args("oargs", [("ptr", ctx), ("i32", "0")], struct_size=28)
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
