"""The kernel-language front end: a Python function -> the LLVM IR body of docs/ARCHITECTURE.md §1.

``compile_kernel(pyfunc)`` returns a ``KernelSource``; the language itself (promotion rules,
casts, loops, bounds checks, helpers, custom derivatives) is described in ``typing_rules``,
``statements``, ``arrays``, ``calls``, ``helpers`` and ``adoffload.language``.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..errors import KernelTypeError
from ..language.builtins import Func
from ..language.signature import KernelSignature
from .context import ModuleContext
from .coverage import full_writes
from .blocks import check_block, check_uniform_collectives, shared_arrays
from .kernel import KernelLowering, infer_grid_rank, kernel_signature, uses_tid
from .lowering import captured_names
from .source import parse_function


@dataclass(frozen=True)
class KernelSource:
    """The front end's product: the body's LLVM IR text and what the launcher needs to know."""
    signature: KernelSignature
    llvm_ir: str
    candidate_facts: frozenset   # {(param_index, dim, grid_axis)}: index == unmodified tid(axis)
    filename: str
    first_line: int
    full_writes: frozenset = frozenset()   # {(param_index, ((axis, scale), ...))}: Out arrays written in full (coverage.py)
    block: tuple[int, ...] | None = None   # a block kernel's block shape (frontend/blocks.py)
    shared: tuple = ()                     # its SharedArray list, in body-argument order
    loaded_and_stored: frozenset | None = None   # array params with an element both loaded and stored


def compile_kernel(pyfunc, *, bounds_check: bool = True, proven=frozenset(),
                   grid_rank: int | None = None, block=None) -> KernelSource:
    """Compile a Python kernel function to the LLVM IR of its body (one logical thread)."""
    if isinstance(pyfunc, Func):
        pyfunc = pyfunc.pyfunc
    source = parse_function(pyfunc)
    rank = grid_rank if grid_rank is not None else infer_grid_rank(source, pyfunc)
    block = check_block(block, source.name)
    if block is not None and grid_rank is None and not uses_tid(source, pyfunc):
        rank = len(block)          # a block kernel may index by thread_id()/block_id() only
    signature = kernel_signature(pyfunc, source, rank)
    ctx = ModuleContext(source.name, bounds_check=bounds_check, proven=frozenset(proven))
    shared, shared_index = (), {}
    if block is not None:
        if len(block) != rank:
            raise source.error(KernelTypeError, f"block {block} has {len(block)} axes but the grid has "
                               f"{rank} (ado.tid() gives {rank} index{'es' if rank > 1 else ''})", source.tree)
        names = captured_names(pyfunc)
        shared, shared_index = shared_arrays(source, names)
        arrays = {p.name for p in signature.params if p.is_array} | {a.name for a in shared}
        check_uniform_collectives(source, names, arrays)
    KernelLowering(ctx, source, pyfunc, signature, block, tuple(shared), shared_index).lower()
    return KernelSource(signature, ctx.finish(), frozenset(ctx.candidate_facts),
                        source.filename, source.first_line,
                        full_writes(source.tree, signature, block, captured_names(pyfunc)),
                        block, tuple(shared), frozenset(ctx.loaded_params & ctx.stored_params))


__all__ = ["compile_kernel", "KernelSource", "Func"]
