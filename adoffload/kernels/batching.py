"""Batched kernels: the IR transformation behind ``jax.vmap`` of a kernel call.

``batched_kernel(k, batched, inner_grid0)`` returns a Kernel whose body runs one thread of
``k`` for one batch element ``b``: a new body with an extra leading thread axis ``b``
that offsets the data pointers of batched arrays by ``b * elements_per_batch``, loads
batched scalars (now 1-D arrays) at ``[b]``, and calls the original body, which
canonicalization inlines. Grid rank 3 has no spare axis: the batch is folded into axis 0
(``b = tid0 / grid0``, ``tid0 = tid0 % grid0``), so ``grid0`` is baked into the body.

Out and InOut arrays are always batched (every batch element writes its own copy), except a
reverse kernel's dynamic tape (and a second derivative's base tape and shadow tape): one tape
serves the whole batched grid, its per-thread offsets are batched, and so are the counting
kernels that size it.
Bounds checks stay those of the original body, against per-batch shapes, and report the
same parameter index (batching keeps the parameter order).

Block kernels (``block=B``) batch the same way, the batch axis getting a block extent of 1: the
batched kernel's block is ``(1, *B)`` (grid rank 3: ``B``, the batch folded into axis 0, whose
``grid0`` is a multiple of ``B[0]``), so every block, its shared arrays, barriers and warps
belong to one batch element, and ``thread_id()``/``block_id()`` (computed from the original
tids inside the called body) keep their meaning. The body's shared-array pointers pass through.
"""
from __future__ import annotations

import threading

import llvmlite.binding as llvm

from .. import ir
from ..language.signature import KernelSignature, Param
from ..language.types import ArrayType

_ELEMENT = {"float": "float", "double": "double", "i32": "i32", "i64": "i64", "i1": "i8"}
_CACHE: dict[tuple, object] = {}
_LOCK = threading.Lock()


def batched_signature(signature: KernelSignature, batched: tuple[bool, ...], fold: bool = False,
                      grid_shaped: frozenset[str] = frozenset()) -> KernelSignature:
    """Batched arrays gain a leading axis, batched scalars become 1-D In arrays. With ``fold``
    (grid rank 3), the ``grid_shaped`` per-thread arrays (``_grid_shaped``) keep their rank, the
    batch folded into axis 0 like the grid's: launchers shape them like the grid."""
    params = []
    for p, b in zip(signature.params, _normalize(signature, batched, grid_shaped)):
        if p.is_array and b and not (fold and p.name in grid_shaped):
            params.append(Param(p.name, ArrayType(p.type.dtype, p.type.ndim + 1, p.type.intent)))
        elif b and not p.is_array:
            params.append(Param(p.name, ArrayType(p.type, 1, "in")))
        else:
            params.append(p)
    return KernelSignature(signature.name, tuple(params), min(signature.grid_rank + 1, 3))


def _grid_shaped(kernel) -> frozenset[str]:
    """Params of ``kernel`` shaped like the grid, one element per thread: a tape's offsets (hidden
    params) and, in a counting kernel (or a batched one), its counts."""
    from ..enzyme.kernels import OFFSETS2_PARAM, OFFSETS_PARAM
    from .kernel import TapeCountKernel
    names = {p.name for p in kernel.signature.params} & {OFFSETS_PARAM, OFFSETS2_PARAM}
    while kernel is not None:
        if isinstance(kernel, TapeCountKernel):
            return frozenset(names | set(kernel.derived.tape.counters))
        kernel = getattr(kernel, "batched_from", (None,))[0]
    return frozenset(names)


def batched_grid(grid: tuple[int, ...], size: int) -> tuple[int, ...]:
    if len(grid) < 3:
        return (size, *grid)
    return (size * grid[0], *grid[1:])


def _normalize(signature: KernelSignature, batched, grid_shaped: frozenset[str] = frozenset()) -> tuple[bool, ...]:
    """Written arrays are always batched, except a dynamic tape: one buffer for the whole
    batched grid, whose per-thread offsets (grid-shaped) carry the batch axis instead."""
    from ..enzyme.kernels import TAPE2_PARAM, TAPE_PARAM, TAPE_SHADOW_PARAM
    if len(batched) != len(signature.params):
        raise ValueError(f"batched flags {batched} do not match the {len(signature.params)} params of "
                         f"kernel '{signature.name}'")
    shared, per_thread = {TAPE_PARAM, TAPE2_PARAM, TAPE_SHADOW_PARAM}, grid_shaped
    return tuple(p.name not in shared and (bool(b) or p.name in per_thread or (p.is_array and p.type.writes))
                 for p, b in zip(signature.params, batched))


def batched_kernel(kernel, batched: tuple[bool, ...], inner_grid0: int | None = None):
    """The batched variant of ``kernel`` (cached per kernel, flags and, for grid rank 3, grid0)."""
    from .kernel import Kernel
    grid_shaped = _grid_shaped(kernel)
    flags = _normalize(kernel.signature, batched, grid_shaped)
    fold = kernel.signature.grid_rank == 3
    if fold and inner_grid0 is None:
        raise ValueError("batching a grid-rank-3 kernel needs the inner grid's axis-0 size")
    block = getattr(kernel, "block", None)
    if block is not None and fold and inner_grid0 % block[0]:
        from ..errors import GridError
        raise GridError(f"kernel '{kernel.name}' runs in blocks of {tuple(block)} threads; its grid's axis 0 "
                        f"({inner_grid0}) is not a multiple of {block[0]}, so a block would mix batch elements")
    key = (id(kernel), flags, inner_grid0 if fold else None)
    with _LOCK:
        hit = _CACHE.get(key)
        if hit is not None and hit[0] is kernel:
            return hit[1]
    signature = batched_signature(kernel.signature, flags, fold, grid_shaped)
    body = kernel.body_name + ".batched"
    shared_count = len(kernel.shared) if block is not None else 0
    text = _batched_module(kernel, flags, body, inner_grid0 if fold else None, shared_count, grid_shaped)
    result = Kernel.from_ir(signature, text, body, tape=getattr(kernel, "tape", None))
    if block is not None:
        result.block = tuple(block) if fold else (1, *block)
        result.shared = tuple(kernel.shared)
    result.batched_from = (kernel, flags)
    if result.tape is not None:
        # The counting kernel batched the same way: its primal params share the flags, its
        # counts are per thread. The handler prefix-sums them over the whole batched grid.
        counting = kernel.count_kernel
        primal = len(counting.signature.params) - 1
        result.count_kernel = batched_kernel(counting, flags[:primal] + (True,), inner_grid0)
    base_counting = getattr(kernel, "base_count_kernel", None)
    if base_counting is not None:      # a second derivative's base tape (launch.tape_levels), batched alike
        primal = len(base_counting.signature.params) - 1
        result.base_count_kernel = batched_kernel(base_counting, flags[:primal] + (True,), inner_grid0)
    with _LOCK:
        _CACHE[key] = (kernel, result)
    return result


def _batched_module(kernel, flags, body_name: str, fold_grid0: int | None, shared_count: int = 0,
                    grid_shaped: frozenset[str] = frozenset()) -> str:
    module = llvm.parse_assembly(kernel.module_text())
    original = module.get_function(kernel.body_name)
    original.linkage = llvm.Linkage.internal
    original.add_function_attribute("alwaysinline")
    wrapper = _wrapper(kernel.signature, flags, kernel.body_name, body_name, fold_grid0, shared_count, grid_shaped)
    return ir.canonicalize(str(module) + "\n" + wrapper)


def _wrapper(signature: KernelSignature, flags, inner: str, name: str, fold_grid0: int | None,
             shared_count: int = 0, grid_shaped: frozenset[str] = frozenset()) -> str:
    """The batched body; ``shared_count``: a block kernel's shared-array pointers, passed through;
    ``grid_shaped``: params folded like the grid when ``fold_grid0`` is given."""
    rank = signature.grid_rank
    lines: list[str] = []
    args: list[str] = []
    if fold_grid0 is None:
        args.append("i64 %b")
        args += [f"i64 %t{a}" for a in range(rank)]
    else:
        args += ["i64 %t0.folded"] + [f"i64 %t{a}" for a in range(1, rank)]
        lines += [f"%b = udiv i64 %t0.folded, {fold_grid0}", f"%t0 = urem i64 %t0.folded, {fold_grid0}"]
    call_args = [f"i64 %t{a}" for a in range(rank)]
    for k, (p, batched) in enumerate(zip(signature.params, flags)):
        v = f"%p{k}"
        if p.is_array and batched and fold_grid0 is not None and p.name in grid_shaped:
            # folded like the grid: this element's threads are rows b*grid0 .. b*grid0 + grid0-1
            element = _ELEMENT[p.type.dtype.llvm]
            args.append(f"ptr {v}")
            args += [f"i64 {v}.s{d}" for d in range(p.type.ndim)]
            stride = str(fold_grid0)
            for d in range(1, p.type.ndim):
                lines.append(f"{v}.n{d} = mul i64 {stride}, {v}.s{d}")
                stride = f"{v}.n{d}"
            lines += [f"{v}.off = mul i64 %b, {stride}",
                      f"{v}.b = getelementptr {element}, ptr {v}, i64 {v}.off"]
            call_args += [f"ptr {v}.b", f"i64 {fold_grid0}"] + [f"i64 {v}.s{d}" for d in range(1, p.type.ndim)]
        elif p.is_array and batched:
            element = _ELEMENT[p.type.dtype.llvm]
            args.append(f"ptr {v}")
            args += [f"i64 {v}.s{d}" for d in range(p.type.ndim + 1)]
            stride = "1"
            for d in range(1, p.type.ndim + 1):
                lines.append(f"{v}.n{d} = mul i64 {stride}, {v}.s{d}")
                stride = f"{v}.n{d}"
            lines += [f"{v}.off = mul i64 %b, {stride}",
                      f"{v}.b = getelementptr {element}, ptr {v}, i64 {v}.off"]
            call_args.append(f"ptr {v}.b")
            call_args += [f"i64 {v}.s{d}" for d in range(1, p.type.ndim + 1)]
        elif p.is_array:
            args.append(f"ptr {v}")
            args += [f"i64 {v}.s{d}" for d in range(p.type.ndim)]
            call_args.append(f"ptr {v}")
            call_args += [f"i64 {v}.s{d}" for d in range(p.type.ndim)]
        elif batched:
            element = _ELEMENT[p.type.llvm]
            args += [f"ptr {v}", f"i64 {v}.s0"]
            lines.append(f"{v}.at = getelementptr {element}, ptr {v}, i64 %b")
            lines.append(f"{v}.raw = load {element}, ptr {v}.at")
            if p.type.llvm == "i1":
                lines.append(f"{v}.v = icmp ne i8 {v}.raw, 0")
                call_args.append(f"i1 {v}.v")
            else:
                call_args.append(f"{p.type.llvm} {v}.raw")
        else:
            args.append(f"{p.type.llvm} {v}")
            call_args.append(f"{p.type.llvm} {v}")
    for k in range(shared_count):
        args.append(f"ptr %shared{k}")
        call_args.append(f"ptr %shared{k}")
    args.append("ptr %status")
    call_args.append("ptr %status")
    lines.append(f"call void @\"{inner}\"({', '.join(call_args)})")
    lines.append("ret void")
    body = "\n  ".join(lines)
    return f"define void @\"{name}\"({', '.join(args)}) {{\nentry:\n  {body}\n}}\n"
