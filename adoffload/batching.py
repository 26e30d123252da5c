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
"""
from __future__ import annotations

import threading

import llvmlite.binding as llvm

from . import ir
from .signature import KernelSignature, Param
from .types import ArrayType

_ELEMENT = {"float": "float", "double": "double", "i32": "i32", "i64": "i64", "i1": "i8"}
_CACHE: dict[tuple, object] = {}
_LOCK = threading.Lock()


def batched_signature(signature: KernelSignature, batched: tuple[bool, ...]) -> KernelSignature:
    """Batched arrays gain a leading axis, batched scalars become 1-D In arrays."""
    params = []
    for p, b in zip(signature.params, _normalize(signature, batched)):
        if p.is_array and b:
            params.append(Param(p.name, ArrayType(p.type.dtype, p.type.ndim + 1, p.type.intent)))
        elif b:
            params.append(Param(p.name, ArrayType(p.type, 1, "in")))
        else:
            params.append(p)
    return KernelSignature(signature.name, tuple(params), min(signature.grid_rank + 1, 3))


def batched_grid(grid: tuple[int, ...], size: int) -> tuple[int, ...]:
    if len(grid) < 3:
        return (size, *grid)
    return (size * grid[0], *grid[1:])


def _normalize(signature: KernelSignature, batched) -> tuple[bool, ...]:
    """Written arrays are always batched, except a dynamic tape: one buffer for the whole
    batched grid, whose per-thread offsets (grid-shaped) carry the batch axis instead."""
    from .enzyme.kernels import OFFSETS2_PARAM, OFFSETS_PARAM, TAPE2_PARAM, TAPE_PARAM, TAPE_SHADOW_PARAM
    if len(batched) != len(signature.params):
        raise ValueError(f"batched flags {batched} do not match the {len(signature.params)} params of "
                         f"kernel '{signature.name}'")
    shared, per_thread = {TAPE_PARAM, TAPE2_PARAM, TAPE_SHADOW_PARAM}, {OFFSETS_PARAM, OFFSETS2_PARAM}
    return tuple(p.name not in shared and (bool(b) or p.name in per_thread or (p.is_array and p.type.writes))
                 for p, b in zip(signature.params, batched))


def batched_kernel(kernel, batched: tuple[bool, ...], inner_grid0: int | None = None):
    """The batched variant of ``kernel`` (cached per kernel, flags and, for grid rank 3, grid0)."""
    from .kernel import Kernel
    if getattr(kernel, "block", None) is not None:
        from .errors import JaxIntegrationError
        raise JaxIntegrationError(f"kernel '{kernel.name}' is a block kernel (block={kernel.block}); batching "
                                  f"(jax.vmap) of block kernels is not supported yet: loop over the batch, or "
                                  f"give the kernel a grid axis for it")
    flags = _normalize(kernel.signature, batched)
    fold = kernel.signature.grid_rank == 3
    if fold and inner_grid0 is None:
        raise ValueError("batching a grid-rank-3 kernel needs the inner grid's axis-0 size")
    key = (id(kernel), flags, inner_grid0 if fold else None)
    with _LOCK:
        hit = _CACHE.get(key)
        if hit is not None and hit[0] is kernel:
            return hit[1]
    signature = batched_signature(kernel.signature, flags)
    body = kernel.body_name + ".batched"
    text = _batched_module(kernel, flags, body, inner_grid0 if fold else None)
    result = Kernel.from_ir(signature, text, body, tape=getattr(kernel, "tape", None))
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


def _batched_module(kernel, flags, body_name: str, fold_grid0: int | None) -> str:
    module = llvm.parse_assembly(kernel.module_text())
    original = module.get_function(kernel.body_name)
    original.linkage = llvm.Linkage.internal
    original.add_function_attribute("alwaysinline")
    wrapper = _wrapper(kernel.signature, flags, kernel.body_name, body_name, fold_grid0)
    return ir.canonicalize(str(module) + "\n" + wrapper)


def _wrapper(signature: KernelSignature, flags, inner: str, name: str, fold_grid0: int | None) -> str:
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
        if p.is_array and batched:
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
    args.append("ptr %status")
    call_args.append("ptr %status")
    lines.append(f"call void @\"{inner}\"({', '.join(call_args)})")
    lines.append("ret void")
    body = "\n  ".join(lines)
    return f"define void @\"{name}\"({', '.join(args)}) {{\nentry:\n  {body}\n}}\n"
