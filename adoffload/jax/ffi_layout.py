"""The XLA FFI structs a handler reads (byte offsets of ``xla/ffi/api/c_api.h`` on 64-bit hosts) and the
layout of one kernel's handler: which call-frame buffer or attribute fills which packed slot."""
from __future__ import annotations

from dataclasses import dataclass

from ..errors import JaxIntegrationError
from ..language.signature import HIDDEN_PREFIX, KernelSignature

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

ELEMENT_STORE = {"float": "float", "double": "double", "i32": "i32", "i64": "i64", "i1": "i8"}


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


def is_hidden(param) -> bool:
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
        if is_hidden(p):
            continue
        if not (p.is_array and p.type.intent == "out"):
            operand_of[k] = len(operand_of)
        if p.is_array and p.type.writes:
            result_of[k] = len(result_of)
    slots = []
    for f in signature.flat_params():
        k = f.param_index
        if is_hidden(signature.params[k]):
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
                   if p.is_array and p.type.intent == "out" and k not in written and not is_hidden(p))
    tapes = ()
    if any(is_hidden(p) for p in signature.params):
        tapes = tuple(tape_layout(signature, *level) for level in levels)
        covered = {name for _, tape, offsets, shadows in levels for name in (tape, offsets, *shadows)}
        hidden = [p.name for p in signature.params if is_hidden(p)]
        if not levels or set(hidden) != covered:
            raise JaxIntegrationError(
                f"kernel '{signature.name}' has launcher-filled params {hidden}; JAX handlers size dynamic tapes "
                f"(with their counting kernels) and their shadows, and nothing else (a deterministic kernel's "
                "contribution log runs through the numpy launcher only)")
    return HandlerLayout(signature.name, tuple(p.name for p in signature.params), tuple(slots),
                         signature.grid_rank, zeroed, tapes)


def tape_layout(signature: KernelSignature, count_signature: KernelSignature, tape_param: str,
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
                    for k, p in enumerate(primal) if p.is_array and p.type.writes and not is_hidden(p))
    names = [p.name for p in signature.params]
    return TapeLayout(count_signature.name, shared, scratch, start[names.index(tape_param)],
                      start[names.index(offsets_param)], tuple(start[names.index(s)] for s in shadow_params))


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
