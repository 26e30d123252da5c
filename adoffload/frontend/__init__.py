"""The kernel-language front end: a Python function -> the LLVM IR body of docs/ARCHITECTURE.md §1.

``compile_kernel(pyfunc)`` returns a ``KernelSource``; the language itself (promotion rules,
casts, loops, bounds checks, helpers, custom derivatives) is described in ``typing_rules``,
``statements``, ``arrays``, ``calls``, ``helpers`` and ``adoffload.language``.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..language import Func
from ..signature import KernelSignature
from .context import ModuleContext
from .coverage import full_writes
from .kernel import KernelLowering, infer_grid_rank, kernel_signature
from .source import parse_function


@dataclass(frozen=True)
class KernelSource:
    """The front end's product: the body's LLVM IR text and what the launcher needs to know."""
    signature: KernelSignature
    llvm_ir: str
    candidate_facts: frozenset   # {(param_index, dim, grid_axis)}: index == unmodified tid(axis)
    filename: str
    first_line: int
    full_writes: frozenset = frozenset()   # {(param_index, axes)}: Out arrays written in full (coverage.py)


def compile_kernel(pyfunc, *, bounds_check: bool = True, proven=frozenset(),
                   grid_rank: int | None = None) -> KernelSource:
    """Compile a Python kernel function to the LLVM IR of its body (one logical thread)."""
    if isinstance(pyfunc, Func):
        pyfunc = pyfunc.pyfunc
    source = parse_function(pyfunc)
    rank = grid_rank if grid_rank is not None else infer_grid_rank(source, pyfunc)
    signature = kernel_signature(pyfunc, source, rank)
    ctx = ModuleContext(source.name, bounds_check=bounds_check, proven=frozenset(proven))
    KernelLowering(ctx, source, pyfunc, signature).lower()
    return KernelSource(signature, ctx.finish(), frozenset(ctx.candidate_facts),
                        source.filename, source.first_line, full_writes(source.tree, signature))


__all__ = ["compile_kernel", "KernelSource", "Func"]
