"""Building blocks of FFI handlers in LLVM IR text: an emitter of numbered values, the metadata
answer, slots filled from the call frame, outputs zeroed, the grid, status checks turned into
``XLA_FFI_Error`` messages, and the per-device tables of GPU handlers."""
from __future__ import annotations

import ctypes

from ..language import status as abi_status
from .ffi_layout import (API, API_VERSION, ARRAY_ATTR_DATA, BUFFER, CALL_FRAME, ELEMENT_STORE, ERROR_INTERNAL,
                         ERROR_OUT_OF_RANGE, MESSAGE_BYTES, METADATA, METADATA_EXTENSION_METADATA, HandlerLayout)

class Emitter:
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

    def cell(self, base: str, index) -> str:
        """A pointer of a ``table(..., cells=True)``: one atomic load per call (another thread
        may store a new function there at any time)."""
        at = self.fresh("p")
        self.emit(f"{at} = getelementptr ptr, ptr {base}, i64 {index}")
        value = self.fresh()
        self.emit(f"{value} = load atomic ptr, ptr {at} monotonic, align 8")
        return value


def c_string(text: str) -> tuple[str, int]:
    data = text.encode() + b"\0"
    body = "".join(chr(c) if 32 <= c < 127 and c not in (34, 92) else f"\\{c:02X}" for c in data)
    return f'c"{body}"', len(data)


_LINE_FORMATS = {
    "trap": "kernel '{kernel}': an assert failed at line %lld of its source",
    "division": "kernel '{kernel}': integer division or modulo by zero ('//' or '%%') at line %lld of its source",
    "overflow": "kernel '{kernel}': integer overflow (the most negative integer // -1, or a from_cuda kernel's "
                "signed index arithmetic) at line %lld of its source",
    "null": "kernel '{kernel}': a load or store through a null pointer at line %lld of its source (0: not known)",
    "unassigned": "kernel '{kernel}': a variable was read at line %lld of its source on a path that had not "
                  "assigned it (Python would raise UnboundLocalError)",
    "invalid": "kernel '{kernel}': a value Python would reject (a negative shift count, a range() step of zero "
               "or one passing its integer type's limit, or a NaN, infinite or out-of-range float converted to an "
               "integer) at line %lld of its source",
    "diverged": "kernel '{kernel}': the threads of block %lld reached different barriers (control flow that is "
                "not uniform across the block); the block was stopped",
    "other": "kernel '{kernel}' stopped with a status record (value %lld, code %lld, parameter %lld)",
}

# Bounds failures of arrays that are not params (language/status.py): a block kernel's shared array n
# reports SHARED_INDEX_BASE - n, a thread-private array n reports -1 - n. Printed with the index,
# the axis and n, in the numpy launcher's words.
_ARRAY_FORMATS = {
    "shared": "kernel '{kernel}': index %lld out of bounds for axis %lld of shared array #%lld "
              "(the access was skipped; no memory outside the array was touched)",
    "local": "kernel '{kernel}': index %lld out of bounds for axis %lld of local array #%lld "
             "(the access was skipped; no memory outside the array was touched)",
}


def handler_globals(layout: HandlerLayout, extra: list[str]) -> list[str]:
    """Message format strings and the table of array names indexed by parameter index."""
    lines = []
    for k, name in enumerate(layout.param_names):
        text, n = c_string(name)
        lines.append(f"@name.{k} = private unnamed_addr constant [{n} x i8] {text}")
    table = ", ".join(f"ptr @name.{k}" for k in range(len(layout.param_names)))
    lines.append(f"@names = private constant [{len(layout.param_names)} x ptr] [{table}]")
    bounds, n_bounds = c_string(
        f"kernel '{layout.kernel_name}': index %lld out of bounds for axis %lld of array '%s' "
        "(the access was skipped; no memory outside the array was touched)")
    lines.append(f"@fmt.bounds = private unnamed_addr constant [{n_bounds} x i8] {bounds}")
    # The other records (abi_status codes 2-5 and unknown ones) are printed with the record's
    # index word first: the source line for codes 2-4.
    for name, text in (_LINE_FORMATS | _ARRAY_FORMATS).items():
        text, n = c_string(text.format(kernel=layout.kernel_name))
        lines.append(f"@fmt.{name} = private unnamed_addr constant [{n} x i8] {text}")
    return lines + extra


def metadata_block(e: Emitter, traits: int) -> None:
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


def fill_slots(e: Emitter, layout: HandlerLayout, slots: str) -> None:
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
            type_ = ELEMENT_STORE[s.llvm_type]
            e.emit(f"store i64 0, ptr {at}")
            e.emit(f"store {type_} {e.field(e.field(buf, BUFFER['data']), 0, type_)}, ptr {at}")


def zero_outputs(e: Emitter, layout: HandlerLayout, gpu_memset: int | None = None, stream: str = "") -> None:
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


def grid_values(e: Emitter, layout: HandlerLayout, slots: str, first_slot: int) -> str:
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


def error_return(e: Emitter, message: str, code: int) -> None:
    """``return api->XLA_FFI_Error_Create({.message, .errc})``."""
    api = e.field("%frame", CALL_FRAME["api"])
    create = e.field(api, API["error_create"])
    args = e.ffi_args("eargs", [("ptr", message), ("i32", str(code))], struct_size=28)
    err = e.fresh("err")
    e.emit(f"{err} = call ptr {create}(ptr {args})")
    e.emit(f"ret ptr {err}")



def destroy_error(e: Emitter, api: str, error: str) -> None:
    """``XLA_FFI_Error_Destroy({error})``: an error the handler handles is its to free."""
    e.emit(f"call void {e.field(api, API['error_destroy'])}(ptr {e.ffi_args('dargs', [('ptr', error)])})")

def status_check(e: Emitter, layout: HandlerLayout, status: str, snprintf: int, reset: bool) -> None:
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
                              (abi_status.INTEGER_OVERFLOW, "overflow"), (abi_status.DIVERGED, "diverged"),
                              (abi_status.NULL_POINTER, "null"), (abi_status.UNASSIGNED, "unassigned"),
                              (abi_status.INVALID_VALUE, "invalid")):
        is_code, chosen = e.fresh("is_code"), e.fresh("fmt")
        e.emit(f"{is_code} = icmp eq i64 {code}, {status_code}")
        e.emit(f"{chosen} = select i1 {is_code}, ptr @fmt.{name}, ptr {fmt}")
        fmt = chosen
    e.emit(f"call i32 (ptr, i64, ptr, ...) {fmt_fn}(ptr {message}, i64 {MESSAGE_BYTES}, ptr {fmt}, "
           f"i64 {index}, i64 {code}, i64 {param})")
    e.emit("br label %raise")
    e.label("raise")
    error_return(e, message, ERROR_OUT_OF_RANGE)


def _unnamed_array_message(e: Emitter, is_bounds: str, param: str, index: str, dim: str, message: str,
                           fmt_fn: str) -> None:
    """Block ``fmt_unnamed``: a bounds failure of a shared or thread-private array (a negative
    parameter index, language/status.py) names that array by its number; anything else goes on to
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


def prologue(e: Emitter) -> None:
    e.lines.append("define ptr @handler(ptr %frame) {")
    e.label("entry")
    ext = e.field("%frame", CALL_FRAME["extension_start"])
    is_query = e.fresh("query")
    e.emit(f"{is_query} = icmp ne ptr {ext}, null")
    e.emit(f"br i1 {is_query}, label %metadata, label %execute")


def snprintf_address() -> int:
    return ctypes.cast(ctypes.CDLL(None).snprintf, ctypes.c_void_p).value


def fn_pointer(e: Emitter, address: int) -> str:
    fn = e.fresh("fn")
    e.emit(f"{fn} = inttoptr i64 {address} to ptr")
    return fn


def cpu_frame(e: Emitter, layout: HandlerLayout) -> tuple[str, str, str]:
    """A CPU handler's start: metadata answer, slots filled from the call frame, Out arrays
    zeroed, a cleared status record in the last slot. Returns (slots, status, total threads)."""
    prologue(e)
    metadata_block(e, traits=0)
    e.label("execute")
    n = len(layout.slots)
    slots = e.fresh("slots")
    e.emit(f"{slots} = alloca [{n + layout.grid_rank + 1} x i64], align 8")
    status = e.fresh("status")
    e.emit(f"{status} = alloca [4 x i64], align 8")
    for offset in (0, 8, 16, 24):
        e.store_at(status, offset, "i64", "0")
    fill_slots(e, layout, slots)
    zero_outputs(e, layout)
    total = grid_values(e, layout, slots, n)
    e.store_at(slots, 8 * (n + layout.grid_rank), "ptr", status)
    return slots, status, total


def table(name: str, values, *, cells: bool = False) -> str:
    """A table of addresses baked into the handler. ``cells``: a global the loader may update
    after JIT compilation (the kernel's functions: a tiered module's -O3 swap,
    codegen/gpu/tiered.py); externally visible so that no pass folds its loads, read with
    ``Emitter.cell`` and written by ``CompiledHandler.write_cell``."""
    items = ", ".join(f"ptr inttoptr (i64 {v} to ptr)" for v in values)
    if cells:
        return f"@{name} = global [{len(values)} x ptr] [{items}], align 8"
    return f"@{name} = private constant [{len(values)} x ptr] [{items}]"


def stream_and_ordinal(e: Emitter, layout: HandlerLayout, extra: list[str], n_devices: int) -> tuple[str, str]:
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
    ordinal = device_ordinal(e, api, ctx)
    in_range = e.fresh("inrange")
    e.emit(f"{in_range} = icmp ult i64 {ordinal}, {n_devices}")
    e.emit(f"br i1 {in_range}, label %launch, label %bad_device")
    e.label("bad_device")
    text, size = c_string(f"kernel '{layout.kernel_name}': no module loaded for this device ordinal")
    extra.append(f"@msg.device = private unnamed_addr constant [{size} x i8] {text}")
    error_return(e, "@msg.device", ERROR_INTERNAL)
    return stream, ordinal


def device_ordinal(e: Emitter, api: str, ctx: str) -> str:
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
