"""Entries of block kernels (``@ado.kernel(block=B)``): one GPU block, or one host loop, per block.

Same packed-slot ABI and entry symbols as abi.py; the body takes one ``ptr`` per shared array
between its flattened params and the status pointer (frontend/blocks.py). ``shared`` is one
``(nbytes, zero)`` per shared array; ``zero`` arrays (derivative kernels' shadows) start each
block zero-filled. Threads are numbered block-major: block ``b`` (row-major over ``grid / B``)
holds the linear ids ``b*T .. b*T+T-1`` (``T = prod(B)``), thread ``t`` of it sits at row-major
``t`` over ``B``, and its tids are ``block_coords * B + thread_coords``.

* host: ``void @<body>.host(ptr slots, i64 start, i64 end)`` runs the blocks whose first linear id
  is in ``[start, end)``, each as phases of a loop over its threads (codegen/host/block_split.py), with
  the thread states, resume points, exchange slots and shared arrays in buffers it allocates once.
* GPU: ``<cc> void @<body>.kernel(<params>, i64 grid.., ptr status)`` launched with blocks of
  exactly T threads (the launcher passes ``block_size``); shared arrays are ``addrspace(3)``
  globals, barriers ``bar.sync`` / ``s_barrier`` (codegen/block_ops.py).
"""
from __future__ import annotations

from collections.abc import Sequence

import llvmlite.binding as llvm
from llvmlite import ir

from .. import ir as adoir
from ..errors import CompilationError
from . import abi
from .block_ops import gpu_definitions, host_definitions
from .gpu.shared_alignment import aligned_shared_pointer
from .gpu.shared_atomics import aggregate_shared_adds, nvptx_definitions
from .host.block_split import SCRATCH_SLOT, resume_name, split_at_barriers
from .gpu.ordered_shared import order_shared_adds, ordered_definitions

_I1, _I8, _I32, _I64 = ir.IntType(1), ir.IntType(8), ir.IntType(32), ir.IntType(64)
_PTR = ir.PointerType()
SHARED_ALIGN = 16


def block_threads(block: Sequence[int]) -> int:
    total = 1
    for extent in block:
        total *= int(extent)
    return total


def _offsets(shared) -> tuple[list[int], int]:
    offsets, total = [], 0
    for nbytes, _ in shared:
        offsets.append(total)
        total += -(-int(nbytes) // SHARED_ALIGN) * SHARED_ALIGN
    return offsets, max(total, SHARED_ALIGN)


def _check(body_module: llvm.ModuleRef, body_name: str, types: list[str], grid_rank: int, block, shared):
    if len(block) != grid_rank:
        raise CompilationError(f"block {tuple(block)} has {len(block)} axes, the grid {grid_rank}")
    abi._check_body(body_module, body_name, types + ["ptr"] * len(shared), grid_rank)


def _counted_loop(b: ir.IRBuilder, fn: ir.Function, start, stop, name: str):
    """``for i in range(start, stop)`` (``start < stop`` checked first); yields i, leaves b after it."""
    class Loop:
        def __enter__(self):
            self.before = b.block
            self.body = fn.append_basic_block(f"{name}.body")
            self.after = fn.append_basic_block(f"{name}.after")
            b.cbranch(b.icmp_unsigned("<", start, stop), self.body, self.after)
            b.position_at_end(self.body)
            self.index = b.phi(start.type, name)
            self.index.add_incoming(start, self.before)
            return self.index

        def __exit__(self, *exc):
            if exc[0] is not None:
                return False
            following = b.add(self.index, ir.Constant(start.type, 1))
            self.index.add_incoming(following, b.block)
            b.cbranch(b.icmp_unsigned("<", following, stop), self.body, self.after)
            b.position_at_end(self.after)
            return False
    return Loop()


def _coords(b: ir.IRBuilder, linear, extents: list) -> list:
    """Row-major coordinates of ``linear`` over ``extents`` (the last varies fastest)."""
    out = [None] * len(extents)
    rest = linear
    for axis in range(len(extents) - 1, 0, -1):
        out[axis] = b.urem(rest, extents[axis])
        rest = b.udiv(rest, extents[axis])
    out[0] = rest
    return out


def _tids(b: ir.IRBuilder, block_coords: list, thread_coords: list, block: Sequence[int]) -> list:
    return [b.add(b.mul(bc, _I64(e)), tc) for bc, tc, e in zip(block_coords, thread_coords, block)]


# --- host ----------------------------------------------------------------------------------------

def add_block_host_entry(module_text: str, body_name: str, flat_types: Sequence, grid_rank: int, block,
                         shared, noalias: bool = False, warp_size: int = 32) -> str:
    """``warp_size`` 64: AMD's wavefronts on the host (block_split.py), to test AMD semantics."""
    types = abi.flat_type_names(flat_types)
    _check(abi._parse(module_text), body_name, types, grid_rank, block, shared)
    threads = block_threads(block)
    module = _inline_everything(module_text, body_name)
    state_bytes = split_at_barriers(module, body_name, threads, warp_size)
    body_module = abi._parse(adoir.export_module(module))
    body_module.link_in(abi._parse(host_definitions(warp_size)))
    m = ir.Module()
    m.triple, m.data_layout = body_module.triple, body_module.data_layout
    resume_type = ir.FunctionType(_I32, [_PTR, _I32, _I32, _PTR] + [_I64] * grid_rank
                                  + [abi._llvm_type(t) for t in types] + [_PTR] * len(shared) + [_PTR])
    resume = ir.Function(m, resume_type, resume_name(body_name))
    malloc = ir.Function(m, ir.FunctionType(_PTR, [_I64]), "malloc")
    free = ir.Function(m, ir.FunctionType(ir.VoidType(), [_PTR]), "free")
    memset = ir.Function(m, ir.FunctionType(ir.VoidType(), [_PTR, _I8, _I64, _I1]), "llvm.memset.p0.i64")
    fn = ir.Function(m, ir.FunctionType(ir.VoidType(), [_PTR, _I64, _I64]), abi.host_entry_name(body_name))
    slots, start, end = fn.args
    b = ir.IRBuilder(fn.append_basic_block("entry"))

    def slot(k):
        return b.gep(slots, [_I64(k)], source_etype=_I64, inbounds=True)
    params = [abi._load_slot(b, slot(k), t) for k, t in enumerate(types)]
    grid = [b.load(slot(len(types) + a), typ=_I64, align=8) for a in range(grid_rank)]
    status = b.load(slot(len(types) + grid_rank), typ=_PTR, align=8)
    blocks_per_axis = [b.udiv(g, _I64(e)) for g, e in zip(grid, block)]
    total_blocks = blocks_per_axis[0]
    for n in blocks_per_axis[1:]:
        total_blocks = b.mul(total_blocks, n)
    first = b.udiv(b.add(start, _I64(threads - 1)), _I64(threads))
    last = b.udiv(b.add(end, _I64(threads - 1)), _I64(threads))
    last = b.select(b.icmp_unsigned("<", last, total_blocks), last, total_blocks)   # whole blocks only
    offsets, shared_bytes = _offsets(shared)
    state_size = max(state_bytes, 16)
    point_slot = b.alloca(_I32, name="point")       # the barrier the block's threads wait at (0: start)
    next_slot = b.alloca(_I32, name="next")
    diverged = b.alloca(_I1, name="diverged")
    has_blocks = b.icmp_unsigned("<", first, last)
    with b.if_then(has_blocks):
        state = b.call(malloc, [_I64(state_size * threads)])
        finished_flags = b.call(malloc, [_I64(threads)])
        scratch = b.call(malloc, [_I64(SCRATCH_SLOT * threads)])
        memory = b.call(malloc, [_I64(shared_bytes)])
        shared_ptrs = [b.gep(memory, [_I64(o)], source_etype=_I8, inbounds=True) for o in offsets]
        with _counted_loop(b, fn, first, last, "block") as block_index:
            block_coords = _coords(b, block_index, blocks_per_axis)
            for pointer, (nbytes, zero) in zip(shared_ptrs, shared):
                if zero:
                    b.call(memset, [pointer, _I8(0), _I64(int(nbytes)), _I1(0)])
            b.call(memset, [finished_flags, _I8(0), _I64(threads), _I1(0)])
            b.store(_I32(0), point_slot)
            phase = fn.append_basic_block("phase")
            b.branch(phase)
            b.position_at_end(phase)
            b.store(_I32(0), next_slot)
            b.store(_I1(0), diverged)
            # one resume point for the whole block (its control flow is uniform), so LLVM can
            # unswitch the resume function's dispatch out of the thread loop: one loop per phase
            point = b.load(point_slot)
            with _counted_loop(b, fn, _I32(0), _I32(threads), "thread") as t:
                flag = b.gep(finished_flags, [t], source_etype=_I8, inbounds=True)
                with b.if_then(b.icmp_unsigned("==", b.load(flag, typ=_I8), _I8(0))):
                    t64 = b.zext(t, _I64)
                    tids = _tids(b, block_coords, _coords(b, t64, [_I64(e) for e in block]), block)
                    thread_state = b.gep(state, [b.mul(t64, _I64(state_size))], source_etype=_I8, inbounds=True)
                    reached = b.call(resume, [thread_state, point, t, scratch] + tids + params + shared_ptrs
                                     + [status])
                    with b.if_else(b.icmp_unsigned("==", reached, _I32(0))) as (ended, waiting):
                        with ended:
                            b.store(_I8(1), flag)
                        with waiting:
                            earlier = b.load(next_slot)
                            other = b.and_(b.icmp_unsigned("!=", earlier, _I32(0)),
                                           b.icmp_unsigned("!=", earlier, reached))
                            with b.if_then(other, likely=False):       # cannot happen in uniform control flow
                                _record_divergence(b, status, block_index)
                                b.store(_I1(1), diverged)
                            b.store(reached, next_slot)
            following = b.load(next_slot)
            done = fn.append_basic_block("phases.done")
            b.store(following, point_slot)
            again = b.and_(b.icmp_unsigned("!=", following, _I32(0)), b.not_(b.load(diverged)))
            b.cbranch(again, phase, done)          # a diverged block stops: its threads' states disagree
            b.position_at_end(done)
        for pointer in (state, finished_flags, scratch, memory):
            b.call(free, [pointer])
    b.ret_void()
    return _link(body_module, m, body_name, resume_name(body_name))


def _record_divergence(b: ir.IRBuilder, status, block_index) -> None:
    """Threads of one block stopped at different barriers: status code DIVERGED (language/status.py),
    the block's index as the index word; the launch raises instead of returning wrong values."""
    from ..language.status import DIVERGED
    old = b.atomic_rmw("xchg", status, _I64(DIVERGED), "monotonic")
    with b.if_then(b.icmp_unsigned("==", old, _I64(0))):
        for word, value in ((1, _I64(-1)), (2, block_index), (3, _I64(0))):
            b.store(value, b.gep(status, [_I64(word)], source_etype=_I64, inbounds=True))


def _inline_everything(module_text: str, body_name: str):
    """The body with every function it calls inlined (a reverse kernel's counting function, helpers
    with custom derivatives): barriers must all be in the one function the host splits."""
    module = adoir.import_module(module_text)
    for fn in module.functions.values():
        if fn.name != body_name and not fn.is_declaration:
            fn.attributes.discard("noinline")
            fn.attributes.discard("optnone")
            fn.attributes.add("alwaysinline")
            fn.linkage = "internal"
    return adoir.import_module(adoir.canonicalize(adoir.export_module(module)))


def _link(body_module: llvm.ModuleRef, entry: ir.Module, body_name: str, inner_name: str) -> str:
    try:
        body_module.link_in(llvm.parse_assembly(str(entry)))
    except RuntimeError as exc:
        raise CompilationError(f"linking the block entry for @{body_name} failed: {exc}") from exc
    _internalize_ops(body_module)
    entry_name = abi.host_entry_name(body_name)
    for fn in body_module.functions:     # other bodies in the module (a derivative's primal) keep barriers
        if not fn.is_declaration and fn.name != entry_name:
            fn.linkage = llvm.Linkage.internal
    inner = body_module.get_function(inner_name)
    inner.add_function_attribute("alwaysinline")
    body_module.verify()
    return str(body_module)


# --- GPUs ----------------------------------------------------------------------------------------

def add_block_gpu_entry(module_text: str, body_name: str, flat_types: Sequence, grid_rank: int, target: str,
                        block, shared, arch: str | None = None, scalars_by_reference=False,
                        noalias: bool = False, ordered: bool = False) -> str:
    """``ordered``: float adds into shared arrays in thread order (a deterministic kernel's:
    codegen/gpu/ordered_shared.py)."""
    types = abi.flat_type_names(flat_types)
    by_ref = abi._by_reference_mask(flat_types, scalars_by_reference)
    aggregated = ordered_adds = False
    if ordered:
        first = grid_rank + len(types)
        module_text, ordered_adds = order_shared_adds(module_text, body_name, grid_rank, block,
                                                      range(first, first + len(shared)), body_name)
    if target == "nvptx":          # no native float add on shared memory there (shared_atomics.py)
        first = grid_rank + len(types)
        module_text, aggregated = aggregate_shared_adds(module_text, body_name, range(first, first + len(shared)),
                                                         block)
    body_module = abi._parse(module_text)
    _check(body_module, body_name, types, grid_rank, block, shared)
    threads = block_threads(block)
    warp = 32 if target == "nvptx" else 64
    _check_warp_ops(body_module, threads, warp, target, arch)
    body_module.link_in(abi._parse(gpu_definitions(target, threads) + (nvptx_definitions(aggregated) if aggregated else "")
                                   + (ordered_definitions(target, threads) if ordered_adds else "")))
    m = ir.Module()
    m.triple, m.data_layout = body_module.triple, body_module.data_layout
    body = ir.Function(m, ir.FunctionType(ir.VoidType(), [_I64] * grid_rank + [abi._llvm_type(t) for t in types]
                                          + [_PTR] * (len(shared) + 1)), body_name)
    entry_types = [_PTR if r else (_I8 if t == "i1" else abi._llvm_type(t)) for t, r in zip(types, by_ref)]
    fn = ir.Function(m, ir.FunctionType(ir.VoidType(), entry_types + [_I64] * grid_rank + [_PTR]),
                     abi.kernel_entry_name(body_name))
    fn.calling_convention = abi.GPU_CALLING_CONVENTION[target]
    for k, t in enumerate(types):
        if noalias and t == "ptr" and not by_ref[k]:
            fn.args[k].add_attribute("noalias")
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    params = []
    for arg, t, r in zip(fn.args, types, by_ref):
        if r:
            params.append(abi._load_slot(b, arg, t))
        elif t == "i1":
            params.append(b.icmp_unsigned("!=", arg, _I8(0)))
        else:
            params.append(arg)
    grid = list(fn.args[len(types):len(types) + grid_rank])
    status = fn.args[-1]
    block_index, thread = _gpu_block_and_thread(m, b, target)
    blocks_per_axis = [b.udiv(g, _I64(e)) for g, e in zip(grid, block)]
    total_blocks = blocks_per_axis[0]
    for n in blocks_per_axis[1:]:
        total_blocks = b.mul(total_blocks, n)
    shared_ptrs = []
    for k, (nbytes, zero) in enumerate(shared):
        words = -(-int(nbytes) // 4)
        storage = ir.GlobalVariable(m, ir.ArrayType(_I32, max(words, 1)), f"{body_name}.shared.{k}", addrspace=3)
        storage.linkage, storage.align = "internal", SHARED_ALIGN   # one copy per block (addrspace 3)
        storage.initializer = ir.Constant(storage.value_type, ir.Undefined)
        shared_ptrs.append((storage, words, zero))
    with b.if_then(b.icmp_unsigned("<", block_index, total_blocks), likely=True):   # uniform per block
        barrier = ir.Function(m, ir.FunctionType(ir.VoidType(), []), "adoffload.sync_threads")
        zeroed = False
        for storage, words, zero in shared_ptrs:
            if not zero:
                continue
            zeroed = True
            with _counted_loop_stride(b, fn, thread, _I64(words), threads, f"{storage.name}.zero") as i:
                b.store(_I32(0), b.gep(storage, [_I64(0), i], inbounds=True))
        if zeroed:
            b.call(barrier, [])
        block_coords = _coords(b, block_index, blocks_per_axis)
        thread_coords = _coords(b, thread, [_I64(e) for e in block])
        tids = _tids(b, block_coords, thread_coords, block)
        pointers = [aligned_shared_pointer(b, storage, SHARED_ALIGN) for storage, _, _ in shared_ptrs]
        b.call(body, tids + params + pointers + [status], attrs=("alwaysinline",))
    b.ret_void()
    text = abi._link(body_module, m, body_name)      # the entry's barrier resolves to the definition
    module = abi._parse(text)
    _internalize_ops(module)
    for function in module.functions:
        if not function.is_declaration and function.name != abi.kernel_entry_name(body_name):
            function.linkage = llvm.Linkage.internal
    return str(module)


def _internalize_ops(module: llvm.ModuleRef) -> None:
    """The operation definitions (block_ops.py) are linked in external, to resolve the body's
    declarations; afterwards they are private to the kernel."""
    for fn in module.functions:
        if fn.name.startswith("adoffload.") and not fn.is_declaration:
            fn.linkage = llvm.Linkage.internal
    for variable in module.global_variables:
        if variable.name.startswith("adoffload."):
            variable.linkage = llvm.Linkage.internal


def _check_warp_ops(body_module: llvm.ModuleRef, threads: int, warp: int, target: str, arch: str | None) -> None:
    from ..language import collectives
    used = {collectives.parse(f.name)[0] for f in body_module.functions if collectives.parse(f.name)}
    warp_ops = used & {"warp_sum", "warp_max", "shuffle", "shuffle_t", "warp_first_lane", "warp_ballot"}
    if warp_ops and threads % warp:
        raise CompilationError(f"warp operations ({', '.join(sorted(warp_ops))}) need whole warps: the block has "
                               f"{threads} threads, not a multiple of {target}'s warp size {warp}")
    if used and target == "amdgpu" and arch and not arch.startswith("gfx9"):
        raise CompilationError(f"block kernels with warp operations assume 64-lane wavefronts; {arch} runs "
                               f"32-lane ones by default (supported: gfx9xx)")


def _gpu_block_and_thread(m: ir.Module, b: ir.IRBuilder, target: str):
    def read(name):
        f = ir.Function(m, ir.FunctionType(_I32, []), name)
        return b.zext(b.call(f, []), _I64)
    if target == "nvptx":
        # runtime/gpu.py launch_grid uses grid.y only past 2^31 - 1 blocks
        sreg = "llvm.nvvm.read.ptx.sreg."
        block = b.add(b.mul(read(sreg + "ctaid.y"), read(sreg + "nctaid.x")), read(sreg + "ctaid.x"))
        return block, read(sreg + "tid.x")
    return read("llvm.amdgcn.workgroup.id.x"), read("llvm.amdgcn.workitem.id.x")


def _counted_loop_stride(b: ir.IRBuilder, fn: ir.Function, start, stop, step: int, name: str):
    """``for i in range(start, stop, step)`` (start < stop checked first)."""
    class Loop:
        def __enter__(self):
            self.before = b.block
            self.body = fn.append_basic_block(f"{name}.body")
            self.after = fn.append_basic_block(f"{name}.after")
            b.cbranch(b.icmp_unsigned("<", start, stop), self.body, self.after)
            b.position_at_end(self.body)
            self.index = b.phi(_I64, name)
            self.index.add_incoming(start, self.before)
            return self.index

        def __exit__(self, *exc):
            if exc[0] is not None:
                return False
            following = b.add(self.index, _I64(step))
            self.index.add_incoming(following, b.block)
            b.cbranch(b.icmp_unsigned("<", following, stop), self.body, self.after)
            b.position_at_end(self.after)
            return False
    return Loop()
