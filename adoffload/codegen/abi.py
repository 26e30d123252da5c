"""The packed-slot ABI: entry wrappers around a kernel body (the slot packer launchers use: codegen/slots.py).

Every flattened parameter occupies one 8-byte slot (scalars in the low bytes, little-endian,
``i1`` as one byte), then one slot per grid dimension, then the status pointer
(docs/ARCHITECTURE.md §4). Everything here is written in terms of a flat list of LLVM
parameter types and a grid rank, so primal and derivative kernels share it.

Entries:

* host: ``void @<body>.host(ptr slots, i64 start, i64 end)`` runs linear threads
  ``[start, end)``; tids follow row-major order (the last grid axis varies fastest).
* GPU: ``<cc> void @<body>.kernel(<params>, i64 grid.., ptr status)``, launched 1-D. The
  linear id is ``block_id.x * block_size.x + thread_id.x``; threads at or past
  ``grid0*...*grid<R-1>`` return. On AMDGPU the block size is read from the HSA dispatch
  packet (``llvm.amdgcn.dispatch.ptr``, ``workgroup_size_x`` at byte 4), so the launch
  needs no extra argument. GPU entries take ``i1`` parameters as ``i8`` (one byte of the
  slot), since the drivers copy whole bytes.
* GPU with ``elements_per_thread=k > 1`` (rank-1 grids only): thread ``linear`` runs the
  contiguous ids ``base = linear*k .. base+k-1`` and the launch has ``ceil(total/k)``
  threads. If ``base + k <= total`` and every data pointer param is 16-byte aligned (a test
  on kernel parameters, so uniform across the launch), k unguarded body calls follow
  ``llvm.assume`` align bundles on those pointers -- alignment known to LLVM only where it
  was checked -- and the LoadStoreVectorizer merges the adjacent accesses into 128-bit
  ones. Otherwise (a misaligned view, the grid's last partial group) a guarded loop runs
  the same body element by element. Deferred-atomic accumulators span all k calls and are
  flushed once. Pointer params the body never writes are marked ``readonly`` (LLVM's own
  inference on the body), since the alignment test's ``ptrtoint`` hides that from it. The
  fast path also requires the body's thread-independent checks to pass
  (codegen/gpu/uniform_checks.py), so their inlined copies fold away.
* NVPTX, rank 2/3, one element per thread: a launch with ``gridDim.z > 1`` is a row launch whose
  block indices are the tids (codegen/gpu/rows.py); 1-D launches decompose the linear id as above.
* GPU, one element per thread, loop-free body with several checks decided by its arguments:
  one test per thread, then a copy of the body without them (uniform_checks.py
  ``add_thread_checks_function``); where the test fails, the body as it was.
* GPU with ``grid_stride`` (by default NVPTX entries with deferred uniform-address atomics):
  each thread loops over groups of k ids with the launch's thread count as stride
  (codegen/gpu/grid_stride.py), so any thread count is correct and launchers launch one resident
  wave; the artifact says so (``GRID_STRIDE_MARK``, read by ``codegen.loops_over_grid``).
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from llvmlite import ir
import llvmlite.binding as llvm

from ..errors import CompilationError, IRError
from .slots import flat_type_names, pack_slots  # noqa: F401  (pack_slots: re-exported, the launchers' half of the ABI)
from .gpu.vectorize import MAX_ELEMENTS_PER_THREAD
from .gpu.rows import LAUNCH_INDICES, ROW_LAUNCH_MARK, emit_rows_or_linear
from .gpu.uniform_checks import checks_function_name, thread_checks_function_name, unchecked_function_name

HOST_SUFFIX = ".host"
KERNEL_SUFFIX = ".kernel"
GPU_CALLING_CONVENTION = {"nvptx": "ptx_kernel", "amdgpu": "amdgpu_kernel"}

_I1, _I8, _I16, _I32, _I64 = (ir.IntType(n) for n in (1, 8, 16, 32, 64))
_PTR = ir.PointerType()
_SCALAR_TYPES = {"float": ir.FloatType(), "double": ir.DoubleType(), "i1": _I1, "i8": _I8,
                 "i32": _I32, "i64": _I64, "ptr": _PTR}


def host_entry_name(body_name: str) -> str:
    return body_name + HOST_SUFFIX


def kernel_entry_name(body_name: str) -> str:
    return body_name + KERNEL_SUFFIX


def _by_reference_mask(flat_params, scalars_by_reference) -> list[bool]:
    """Which flat params are passed as pointers to their value (JAX on GPU).

    ``True`` means every scalar: params with role "scalar" when ``FlatParam`` objects are
    given (shapes stay by value), every non-pointer param for plain type strings. A sequence
    of flat indices picks them explicitly.
    """
    types = flat_type_names(flat_params)
    if scalars_by_reference is False or scalars_by_reference is None:
        return [False] * len(types)
    if scalars_by_reference is True:
        return [t != "ptr" and getattr(p, "role", "scalar") == "scalar"
                for p, t in zip(flat_params, types)]
    chosen = set(scalars_by_reference)
    return [k in chosen for k in range(len(types))]


# --- reading and preparing the body module ------------------------------------------------

def _llvm_type(name: str) -> ir.Type:
    try:
        return _SCALAR_TYPES[name]
    except KeyError:
        raise IRError(f"unsupported flattened parameter type {name!r}; expected one of "
                      f"{sorted(_SCALAR_TYPES)}") from None


def _parse(text: str) -> llvm.ModuleRef:
    try:
        module = llvm.parse_assembly(text)
        module.verify()
    except RuntimeError as exc:
        raise IRError(f"kernel module does not parse or verify: {exc}") from exc
    return module


def _check_body(module: llvm.ModuleRef, body_name: str, types: list[str], grid_rank: int):
    try:
        body = module.get_function(body_name)
    except NameError:
        raise IRError(f"kernel body @{body_name} is not in the module") from None
    if body.is_declaration:
        raise IRError(f"kernel body @{body_name} is only declared, not defined")
    expected = ["i64"] * grid_rank + types + ["ptr"]
    actual = [str(a.type) for a in body.arguments]
    if actual != expected:
        raise IRError(f"kernel body @{body_name} takes ({', '.join(actual)}) but grid rank "
                      f"{grid_rank} and the flattened params give ({', '.join(expected)})")
    if not 1 <= grid_rank <= 3:
        raise IRError(f"grid rank must be 1, 2 or 3, got {grid_rank}")


def _entry_module(body_module: llvm.ModuleRef, body_name: str, types: list[str], grid_rank: int,
                  accumulators: int = 0):
    """A fresh llvmlite.ir module holding a declaration of the body, for building an entry."""
    m = ir.Module()
    m.triple = body_module.triple
    m.data_layout = body_module.data_layout
    body_ty = ir.FunctionType(ir.VoidType(), [_I64] * grid_rank + [_llvm_type(t) for t in types] + [_PTR]
                              + [_PTR] * accumulators)
    return m, ir.Function(m, body_ty, name=body_name)


def _prepare_body(module_text: str, body_name: str, types: list[str], grid_rank: int, reductions: str,
                  checks: bool = False, thread_checks: bool = False):
    """Parse and check the body; with ``checks``, add ``@<body>.checks_ok`` where it has
    thread-independent checks, with ``thread_checks`` ``@<body>.thread_checks_ok`` where it has
    several checks decided by its arguments (codegen/gpu/uniform_checks.py); with ``reductions`` other
    than "off", defer its uniform-address atomics (codegen/gpu/reductions.py). Returns (parsed module,
    sites, name of the checks function or None, name of the thread checks function or None)."""
    from .gpu import reductions as red
    from .gpu.uniform_checks import add_checks_function, add_thread_checks_function
    if reductions not in red.MODES:
        raise CompilationError(f"reductions={reductions!r}; expected one of {list(red.MODES)}")
    body_module = _parse(module_text)
    _check_body(body_module, body_name, types, grid_rank)
    checks_name = thread_checks_name = None
    if checks:
        module_text, checks_name = add_checks_function(module_text, body_name, grid_rank)
    if reductions != "off":
        deferred = red.defer_uniform_atomics(module_text, body_name, grid_rank)
        if deferred.sites:
            return _parse(deferred.text), deferred.sites, checks_name, None
    if thread_checks:    # after deferring: the unchecked copy has the body's final parameters
        module_text, thread_checks_name = add_thread_checks_function(module_text, body_name)
    changed = checks_name or thread_checks_name
    return (_parse(module_text) if changed else body_module), [], checks_name, thread_checks_name


def _link(body_module: llvm.ModuleRef, entry: ir.Module, body_name: str, only_entry: str | None = None) -> str:
    """Link the entry into the body module, then make the body internal and always-inlined.
    ``only_entry``: every other defined function of external linkage becomes internal too (a
    derivative's module still defines the bodies it was derived from, which nothing calls once the
    derivative is canonical: internal, O3 drops them instead of optimizing and compiling them)."""
    try:
        body_module.link_in(llvm.parse_assembly(str(entry)))
    except RuntimeError as exc:
        raise CompilationError(f"linking the entry wrapper for @{body_name} failed: {exc}") from exc
    body = body_module.get_function(body_name)
    if any(a.startswith(b"noinline") or a.startswith(b"optnone") for a in body.attributes):
        raise CompilationError(f"kernel body @{body_name} is marked noinline/optnone; "
                               "canonicalize it before code generation")
    for copy in (body, *(f for f in body_module.functions if f.name == unchecked_function_name(body_name))):
        copy.linkage = llvm.Linkage.internal
        copy.add_function_attribute("alwaysinline")
    # pointer functions of deferred atomics (reductions.py), the checks function (uniform_checks.py)
    for fn in body_module.functions:
        if (fn.name.startswith(body_name + ".uptr")
                or fn.name in (checks_function_name(body_name), thread_checks_function_name(body_name))) \
                and not fn.is_declaration:
            fn.linkage = llvm.Linkage.internal
    if only_entry is not None:
        for fn in body_module.functions:
            if not fn.is_declaration and fn.name != only_entry and fn.linkage == llvm.Linkage.external:
                fn.linkage = llvm.Linkage.internal
    body_module.verify()
    return str(body_module)


# --- shared pieces of both entries ------------------------------------------------------------

def _decompose(b: ir.IRBuilder, linear: ir.Value, grid: list[ir.Value], width: ir.IntType) -> list[ir.Value]:
    """Row-major tids of ``linear``: the last axis varies fastest. Works in ``width`` bits."""
    tids = [None] * len(grid)
    rest = linear
    for axis in range(len(grid) - 1, 0, -1):
        tids[axis] = b.urem(rest, grid[axis])
        rest = b.udiv(rest, grid[axis])
    tids[0] = rest
    return tids


def _load_slot(b: ir.IRBuilder, slot_ptr: ir.Value, type_name: str) -> ir.Value:
    if type_name == "i1":
        return b.icmp_unsigned("!=", b.load(slot_ptr, typ=_I8, align=1), _I8(0))
    return b.load(slot_ptr, typ=_llvm_type(type_name), align=8)


# --- host entry -------------------------------------------------------------------------------

def add_host_entry(module_text: str, body_name: str, flat_types: Sequence, grid_rank: int,
                   noalias: bool = False, reductions: str = "block", serial: bool = False,
                   private: tuple = ()) -> str:
    """Add ``void @<body>.host(ptr slots, i64 start, i64 end)`` (see the module docstring).

    ``reductions``: unless "off", uniform-address atomics are summed per call (per chunk of
    threads) and added once at its end (codegen/gpu/reductions.py). ``serial``: the launcher runs
    every thread of a launch on one OS thread, so the body's atomics become plain
    read-modify-writes (codegen/host/serial.py). ``private``: ``(flat index, ndim, element type)``
    of arrays the body only adds into (codegen/host/serial.private_updates, which must hold): each
    call (a chunk of threads) adds into a zeroed copy on its stack with plain adds, then adds the
    copy into the array once, atomically, so chunks may run concurrently; the body's other atomics
    but the status record's ``xchg`` become plain too (private_updates admits no others).
    """
    from .gpu.reductions import EntryAccumulators
    types = flat_type_names(flat_types)
    if noalias:      # on the body's own parameters: the inliner makes alias scopes only of those
        from .host.noalias import noalias_parameters
        module_text = noalias_parameters(module_text, body_name, [grid_rank + k for k, t in enumerate(types) if t == "ptr"])
    body_module, sites, _, _ = _prepare_body(module_text, body_name, types, grid_rank, reductions)
    m, body = _entry_module(body_module, body_name, types, grid_rank, len(sites))
    fn = ir.Function(m, ir.FunctionType(ir.VoidType(), [_PTR, _I64, _I64]), name=host_entry_name(body_name))
    slots, start, end = fn.args
    b = ir.IRBuilder(fn.append_basic_block("entry"))

    def slot(k):
        return b.gep(slots, [_I64(k)], source_etype=_I64, inbounds=True)

    params = [_load_slot(b, slot(k), t) for k, t in enumerate(types)]
    grid = [b.load(slot(len(types) + a), typ=_I64, align=8) for a in range(grid_rank)]
    status = b.load(slot(len(types) + grid_rank), typ=_PTR, align=8)
    from .host.private_copies import flush_private, private_copy
    copies = [private_copy(fn, b, params, k, ndim, _llvm_type(t)) for k, ndim, t in private]
    body_params = list(params)
    for (k, _, _), (copy, _) in zip(private, copies):
        body_params[k] = copy
    first_tids = _decompose(b, start, grid, _I64)
    accumulators = EntryAccumulators(m, b, sites, list(body.function_type.args[:grid_rank + len(types) + 1]))
    has_work = b.icmp_signed("<", start, end)
    entry_block = b.block
    loop = fn.append_basic_block("loop")
    flush = fn.append_basic_block("flush")
    done = fn.append_basic_block("done")
    b.cbranch(has_work, loop, done)

    # Loop over linear ids with the tids carried along (increment with carry: no division
    # per thread).
    b.position_at_end(loop)
    linear = b.phi(_I64, "linear")
    tids = [b.phi(_I64, f"tid{a}") for a in range(grid_rank)]
    arg_attrs = {grid_rank + k: ("noalias",) for k, t in enumerate(types) if noalias and t == "ptr"}
    b.call(body, tids + body_params + [status] + accumulators.pointers, attrs=("alwaysinline",),
           arg_attrs=arg_attrs or None)
    next_tids = _increment_with_carry(b, tids, grid)
    next_linear = b.add(linear, _I64(1), flags=("nuw", "nsw"))
    latch = b.block
    linear.add_incoming(start, entry_block)
    linear.add_incoming(next_linear, latch)
    for phi, first, nxt in zip(tids, first_tids, next_tids):
        phi.add_incoming(first, entry_block)
        phi.add_incoming(nxt, latch)
    b.cbranch(b.icmp_signed("<", next_linear, end), loop, flush)
    b.position_at_end(flush)
    if sites:
        accumulators.atomics(b, accumulators.values(b), [_I64(0)] * grid_rank + params + [status])
    for (k, _, t), (copy, count) in zip(private, copies):
        flush_private(fn, b, copy, params[k], count, _llvm_type(t))
    b.branch(done)
    b.position_at_end(done)
    b.ret_void()
    linked = _link(body_module, m, body_name, only_entry=host_entry_name(body_name))
    if not serial and not private:
        return linked
    from .host.serial import plain_atomics
    return plain_atomics(linked, body_name, keep_xchg=bool(private))[0]


def _increment_with_carry(b: ir.IRBuilder, tids: list[ir.Value], grid: list[ir.Value]) -> list[ir.Value]:
    """Advance row-major tids by one (selects only; the carry out of axis 0 is never used)."""
    out = list(tids)
    carry = ir.Constant(_I1, 1)
    for axis in range(len(tids) - 1, -1, -1):
        bumped = b.add(tids[axis], b.zext(carry, _I64))
        if axis == 0:
            out[axis] = bumped
            break
        wraps = b.icmp_unsigned("==", bumped, grid[axis])
        out[axis] = b.select(wraps, _I64(0), bumped)
        carry = wraps
    return out


# --- GPU entry --------------------------------------------------------------------------------

def _linear_id_nvptx(m: ir.Module, b: ir.IRBuilder) -> ir.Value:
    def sreg(name):
        f = ir.Function(m, ir.FunctionType(_I32, []), name=f"llvm.nvvm.read.ptx.sreg.{name}")
        return b.zext(b.call(f, []), _I64)
    # The runtime uses grid.y only past 2^31 - 1 blocks (runtime/gpu.py launch_grid); the block index
    # is then ctaid.y * nctaid.x + ctaid.x (ctaid.y is 0 otherwise, so this costs one multiply-add).
    block = b.add(b.mul(sreg("ctaid.y"), sreg("nctaid.x"), flags=("nuw",)), sreg("ctaid.x"), flags=("nuw",))
    return b.add(b.mul(block, sreg("ntid.x"), flags=("nuw",)), sreg("tid.x"), flags=("nuw",))


def _linear_id_amdgpu(m: ir.Module, b: ir.IRBuilder) -> ir.Value:
    group = ir.Function(m, ir.FunctionType(_I32, []), name="llvm.amdgcn.workgroup.id.x")
    item = ir.Function(m, ir.FunctionType(_I32, []), name="llvm.amdgcn.workitem.id.x")
    dispatch = ir.Function(m, ir.FunctionType(ir.PointerType(addrspace=4), []), name="llvm.amdgcn.dispatch.ptr")
    packet = b.call(dispatch, [])
    size_ptr = b.gep(packet, [_I64(4)], source_etype=_I8, inbounds=True)   # workgroup_size_x (u16)
    size = b.zext(b.load(size_ptr, typ=_I16, align=4), _I64)
    return b.add(b.mul(b.zext(b.call(group, []), _I64), size, flags=("nuw",)),
                 b.zext(b.call(item, []), _I64), flags=("nuw",))


_LINEAR_ID = {"nvptx": _linear_id_nvptx, "amdgpu": _linear_id_amdgpu}


def add_gpu_entry(module_text: str, body_name: str, flat_types: Sequence, grid_rank: int,
                  target: str = "nvptx", scalars_by_reference=False, noalias: bool = False,
                  reductions: str = "block", elements_per_thread: int = 1, grid_stride="auto") -> str:
    """Add ``<cc> void @<body>.kernel(<params>, i64 grid.., ptr status)`` for ``target``.

    ``scalars_by_reference``: see ``_by_reference_mask``; those params arrive as ``ptr`` and
    are loaded. ``noalias``: the runtime promises that no two pointer params overlap.
    ``reductions``: how uniform-address atomics are combined (codegen/gpu/reductions.py): NVPTX
    "block" (warp shuffles, shared memory, one atomic per block; the default), "warp" (one
    per warp), "thread" (one per thread, after the body), "off" (left in the body). AMDGPU
    treats "block"/"warp" as "thread" (the backend's atomic optimizer combines a wavefront).
    ``elements_per_thread`` (k, rank-1 grids only): each thread runs the linear ids
    ``linear*k .. linear*k+k-1``; launch ``ceil(total / k)`` threads (see the module docstring).
    ``grid_stride``: whether the entry loops over the grid (codegen/gpu/grid_stride.py; any thread
    count is then correct): True, False, or "auto" (the default: NVPTX entries whose uniform-address
    atomics are deferred and combined per block or warp). An entry that loops carries the named
    metadata ``!adoffload.grid_stride`` (``GRID_STRIDE_MARK``), which codegen turns into a PTX
    comment that ``Compiled.grid_stride`` reads: the artifact itself says how to launch it.
    """
    from .gpu.reductions import EntryAccumulators
    per_thread = check_elements_per_thread(elements_per_thread, grid_rank)
    if target not in GPU_CALLING_CONVENTION:
        raise CompilationError(f"unknown GPU target {target!r}; expected one of {sorted(GPU_CALLING_CONVENTION)}")
    types = flat_type_names(flat_types)
    by_ref = _by_reference_mask(flat_types, scalars_by_reference)
    from .gpu.grid_stride import UNROLL, has_loop
    from .gpu.reductions import might_defer
    auto = grid_stride == "auto"
    if auto:
        grid_stride = target in _LAUNCHED_THREADS and reductions in ("block", "warp") and might_defer(module_text)
    if grid_stride and target not in _LAUNCHED_THREADS:
        raise CompilationError(f"grid_stride entries are built for {sorted(_LAUNCHED_THREADS)} only, not {target!r}")
    # a body with a loop of its own gets a plain grid-stride loop: one copy, no hoisted checks
    loop_free = not has_loop(_parse(module_text), body_name)
    light = bool(grid_stride) and loop_free
    # one thread, one element, no loop: its argument-decided checks tested once (uniform_checks.py)
    body_module, sites, checks_name, thread_checks_name = _prepare_body(
        module_text, body_name, types, grid_rank, reductions, checks=per_thread > 1 or light,
        thread_checks=per_thread == 1 and loop_free and not grid_stride)
    if auto:
        grid_stride = grid_stride and bool(sites)
    m, body = _entry_module(body_module, body_name, types, grid_rank, len(sites))
    entry_types = [_PTR if r else (_I8 if t == "i1" else _llvm_type(t)) for t, r in zip(types, by_ref)]
    fn = ir.Function(m, ir.FunctionType(ir.VoidType(), entry_types + [_I64] * grid_rank + [_PTR]),
                     name=kernel_entry_name(body_name))
    fn.calling_convention = GPU_CALLING_CONVENTION[target]
    for k, t in enumerate(types):
        if noalias and t == "ptr" and not by_ref[k]:
            fn.args[k].add_attribute("noalias")
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    params = []
    for arg, t, r in zip(fn.args, types, by_ref):
        if r:
            params.append(_load_slot(b, arg, t))
        elif t == "i1":
            params.append(b.icmp_unsigned("!=", arg, _I8(0)))
        else:
            params.append(arg)
    grid = list(fn.args[len(types):len(types) + grid_rank])
    status = fn.args[-1]
    body_param_types = list(body.function_type.args[:grid_rank + len(types) + 1])
    body_args = [_I64(0)] * grid_rank + params + [status]      # for the pointer and checks functions
    accumulators = EntryAccumulators(m, b, sites, body_param_types, alloca_addrspace=5 if target == "amdgpu" else 0)
    linear = _LINEAR_ID[target](m, b)
    total = grid[0]
    for g in grid[1:]:
        total = b.mul(total, g, flags=("nuw",))
    data_pointers = [i for i, (t, r) in enumerate(zip(types, by_ref)) if t == "ptr" and not r] if per_thread > 1 else []
    if data_pointers:
        # The alignment test's ptrtoint hides from LLVM that the entry only reads these
        # arrays (no readonly inferred, so no ld.global.nc): state what the body proves.
        for i in _read_only_params(body_module, body_name, grid_rank) & set(data_pointers):
            set.add(fn.args[i].attributes, "readonly")    # llvmlite.ir's list of argument attributes lacks it
    checks_ok = None
    if checks_name is not None:
        checks_fn = ir.Function(m, ir.FunctionType(_I1, body_param_types), name=checks_name)
        checks_ok = b.call(checks_fn, body_args)
    fast, enter_fast = _fast_path(m, b, params, data_pointers, checks_ok)
    thread_ok = None
    if thread_checks_name is not None and not grid_stride:
        thread_ok = ir.Function(m, ir.FunctionType(_I1, body_param_types), name=thread_checks_name)
        unchecked = ir.Function(m, body.function_type, name=unchecked_function_name(body_name))

    def call_body(b, tids):
        args = tids + params + [status] + accumulators.pointers
        if thread_ok is None:
            b.call(body, args, attrs=("alwaysinline",))
            return
        ok = b.call(thread_ok, tids + params + [status])     # every argument-decided check passes
        with b.if_else(ok, likely=True) as (checked_once, checked_in_body):
            with checked_once:
                b.call(unchecked, args, attrs=("alwaysinline",))
            with checked_in_body:
                b.call(body, args, attrs=("alwaysinline",))

    def run(b, linear_id):
        call_body(b, [linear_id] if grid_rank == 1 else _gpu_tids(b, linear_id, grid, total))

    if grid_stride:
        from .gpu.grid_stride import emit_grid_stride
        m.add_named_metadata(GRID_STRIDE_MARK, [])
        in_range = emit_grid_stride(b, linear, total, _LAUNCHED_THREADS[target](m, b), per_thread, fast, enter_fast, run,
                                    unroll=UNROLL if light else 1)
    elif per_thread == 1 and grid_rank > 1 and target in LAUNCH_INDICES and not sites:
        # rank 2/3: the launch shape says whether the block indices are the tids (codegen/gpu/rows.py)
        m.add_named_metadata(ROW_LAUNCH_MARK, [])
        emit_rows_or_linear(m, b, target, grid, linear, total, lambda b: _gpu_tids(b, linear, grid, total), call_body)
        in_range = None
    elif per_thread == 1:
        in_range = b.icmp_unsigned("<", linear, total)
        with b.if_then(in_range, likely=True):
            run(b, linear)
    else:
        in_range = _several_elements(b, linear, total, per_thread, fast, enter_fast, run)
    if sites:
        if target == "nvptx" and reductions in ("block", "warp"):
            accumulators.flush_nvptx(b, in_range, body_args, reductions)
        else:
            with b.if_then(in_range):
                accumulators.atomics(b, accumulators.values(b), body_args)
    b.ret_void()
    return _link(body_module, m, body_name)


GRID_STRIDE_MARK = "adoffload.grid_stride"     # named metadata of entries that loop over the grid


def _launched_threads_nvptx(m: ir.Module, b: ir.IRBuilder) -> ir.Value:
    """GPU threads of the launch: nctaid.x * nctaid.y * ntid.x (see _linear_id_nvptx)."""
    from .gpu.reductions import _sreg
    blocks = b.mul(b.zext(_sreg(m, b, "nctaid.x"), _I64), b.zext(_sreg(m, b, "nctaid.y"), _I64), flags=("nuw",))
    return b.mul(blocks, b.zext(_sreg(m, b, "ntid.x"), _I64), flags=("nuw",))


_LAUNCHED_THREADS = {"nvptx": _launched_threads_nvptx}


def _fast_path(m: ir.Module, b: ir.IRBuilder, params: list, data_pointers: list[int], checks_ok):
    """(test, enter) of the unguarded fast path: every data pointer 16-byte aligned (a test on
    kernel parameters only, so uniform across the launch) and every thread-independent check
    passing (codegen/gpu/uniform_checks.py). ``enter(b)`` states both to LLVM inside the branch that
    tested them (``llvm.assume``; an align bundle per pointer -- ``llvm.ptrmask`` would say the
    same but crashes the NVPTX backend of LLVM 22). test is None when there is nothing to test."""
    test = checks_ok
    for index in data_pointers:
        low = b.and_(b.ptrtoint(params[index], _I64), _I64(VECTOR_ALIGNMENT - 1))
        aligned = b.icmp_unsigned("==", low, _I64(0))
        test = aligned if test is None else b.and_(test, aligned)
    if test is None:
        return None, None

    def enter(b):
        assume = _declare_assume(m)
        for index in data_pointers:
            b._insert(_AlignAssume(b.block, assume, params[index], VECTOR_ALIGNMENT))
        if checks_ok is not None:
            b.call(assume, [checks_ok])
    return test, enter


def _declare_assume(m: ir.Module) -> ir.Function:
    existing = m.globals.get("llvm.assume")
    return existing if existing is not None else ir.Function(m, ir.FunctionType(ir.VoidType(), [_I1]), name="llvm.assume")


VECTOR_ALIGNMENT = 16      # bytes: one 128-bit access (ld.global.v4.f32 / v2.f64, global_load_dwordx4)


def check_elements_per_thread(k, grid_rank: int) -> int:
    """``k`` as an int, or a CompilationError: 1..16, and above 1 only for rank-1 grids."""
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or not 1 <= int(k) <= MAX_ELEMENTS_PER_THREAD:
        raise CompilationError(f"elements_per_thread must be an int from 1 to {MAX_ELEMENTS_PER_THREAD}, got {k!r}")
    if int(k) > 1 and grid_rank != 1:
        raise CompilationError(f"elements_per_thread={int(k)} needs a rank-1 grid; this kernel's grid has rank "
                               f"{grid_rank} (use elements_per_thread=1)")
    return int(k)


def _several_elements(b: ir.IRBuilder, linear: ir.Value, total: ir.Value, k: int, fast, enter_fast,
                      run) -> ir.Value:
    """Rank 1, k elements per thread: linear ids ``base = linear*k .. base+k-1``.

    Fast path (every thread but the last, where ``fast`` holds: see ``_fast_path``): k
    unguarded body calls in straight-line code after ``enter_fast``'s assumes, so the
    LoadStoreVectorizer can merge the k adjacent accesses into 128-bit ones. Otherwise (a
    misaligned pointer, a failing thread-independent check, or the grid's last partial group)
    a guarded loop over ``base .. min(base+k, total)``. Returns ``base < total`` (whether the
    thread ran anything).
    """
    base = b.mul(linear, _I64(k), flags=("nuw",))
    in_range = b.icmp_unsigned("<", base, total)
    with b.if_then(in_range, likely=True):
        full = b.icmp_unsigned(">=", b.sub(total, base, flags=("nuw",)), _I64(k))
        with b.if_else(full if fast is None else b.and_(full, fast), likely=True) as (fast_path, scalar):
            with fast_path:
                if enter_fast is not None:
                    enter_fast(b)
                for j in range(k):
                    run(b, b.add(base, _I64(j), flags=("nuw", "nsw")) if j else base)
            with scalar:
                end = b.select(full, b.add(base, _I64(k), flags=("nuw", "nsw")), total)
                before = b.block
                loop = b.append_basic_block("element")
                after = b.append_basic_block("elements.done")
                b.branch(loop)
                b.position_at_end(loop)
                tid = b.phi(_I64, "tid")
                run(b, tid)
                following = b.add(tid, _I64(1), flags=("nuw", "nsw"))
                tid.add_incoming(base, before)
                tid.add_incoming(following, b.block)
                b.cbranch(b.icmp_unsigned("<", following, end), loop, after)
                b.position_at_end(after)
    return in_range


def _read_only_params(body_module: llvm.ModuleRef, body_name: str, grid_rank: int) -> set[int]:
    """Flat indices of the body's pointer params that it never writes through, as LLVM's
    function-attribute inference proves on a copy of the module (readonly or readnone)."""
    from .targets import host_target_machine
    copy = llvm.parse_assembly(str(body_module))
    passes = llvm.create_new_module_pass_manager()
    passes.add_post_order_function_attributes_pass()
    passes.run(copy, llvm.create_pass_builder(host_target_machine(), llvm.create_pipeline_tuning_options(0)))
    args = list(copy.get_function(body_name).arguments)
    return {k - grid_rank for k, arg in enumerate(args)
            if k >= grid_rank and {b"readonly", b"readnone"} & set(arg.attributes)}


class _AlignAssume(ir.instructions.Instruction):
    """``call void @llvm.assume(i1 true) ["align"(ptr %p, i64 N)]`` (llvmlite.ir has no
    operand bundles). Valid only where ``p`` is known to be N-aligned: the caller emits it
    inside the branch that tested exactly that."""

    def __init__(self, parent, assume: ir.Function, pointer: ir.Value, alignment: int):
        super().__init__(parent, ir.VoidType(), "call", [assume, pointer])
        self.alignment = alignment

    def descr(self, buf):
        assume, pointer = self.operands
        buf.append(f'call void {assume.get_reference()}(i1 true) [ "align"({pointer.type} '
                   f'{pointer.get_reference()}, i64 {self.alignment}) ]\n')


def _gpu_tids(b: ir.IRBuilder, linear: ir.Value, grid: list[ir.Value], total: ir.Value) -> list[ir.Value]:
    """Row-major tids; 32-bit division when the grid has fewer than 2^32 threads (64-bit
    division is many times slower on GPUs). The branch is uniform across the launch."""
    if len(grid) == 1:
        return [linear]
    fits = b.icmp_unsigned("<=", total, _I64(0xFFFFFFFF))
    with b.if_else(fits, likely=True) as (narrow, wide):
        with narrow:
            small = _decompose(b, b.trunc(linear, _I32), [b.trunc(g, _I32) for g in grid], _I32)
            small = [b.zext(t, _I64) for t in small]
            narrow_block = b.block
        with wide:
            big = _decompose(b, linear, grid, _I64)
            wide_block = b.block
    tids = []
    for s, w in zip(small, big):
        phi = b.phi(_I64)
        phi.add_incoming(s, narrow_block)
        phi.add_incoming(w, wide_block)
        tids.append(phi)
    return tids
