"""``compile_ahead``: build a kernel's JAX target for a call signature in a background thread.

A JAX call of a kernel compiles it when XLA lowers the jitted function that holds the call, and
XLA's own compilation of that function waits for it. Started earlier -- while the program imports,
JAX brings up its GPU client, or XLA compiles other functions -- the build overlaps that work: the
lowering then finds the compiled kernel (``Kernel.compiled`` holds each variant once, under the
kernel's lock, so a lowering that comes first waits for the build in flight, never repeats it) and,
on CUDA, ptxas's cubin (codegen/gpu/cubin.py). What overlaps, measured in benchmarks/results/2026-12-04-coldcompile: LLVM's
passes and ptxas release the GIL (llvmlite serializes its own calls behind one lock, so two builds
do not run LLVM at once); the front end and AD are Python and share the GIL with the caller.
"""
from __future__ import annotations

import concurrent.futures
import threading

from . import targets
from .primitive import CallSpec, call_variant

_POOL = None
_POOL_LOCK = threading.Lock()


def _pool() -> concurrent.futures.ThreadPoolExecutor:
    global _POOL
    with _POOL_LOCK:
        if _POOL is None:       # one worker: llvmlite runs one LLVM call at a time anyway
            _POOL = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="adoffload-ahead")
        return _POOL


def submit(work, *args, **kwargs) -> concurrent.futures.Future:
    """Run ``work(*args, **kwargs)`` on the compile-ahead thread."""
    return _pool().submit(work, *args, **kwargs)


def build_for_call(kernel, operand_shapes, *, grid, out_shapes, platform: str = "cuda", archs=None) -> list:
    """What ``compile_ahead`` runs, on the calling thread: the compiled artifacts of the call's target."""
    spec = CallSpec(kernel, tuple(int(g) for g in (grid if isinstance(grid, (tuple, list)) else (grid,))),
                    tuple(tuple(int(e) for e in shape) for shape in out_shapes))
    return targets.build_ahead(kernel, platform, call_variant(spec, operand_shapes, platform), archs)


def compile_ahead(kernel, operand_shapes, *, grid, out_shapes, platform: str = "cuda",
                  archs=None) -> concurrent.futures.Future:
    """Start building ``kernel`` for a JAX call on ``platform`` ("cuda" | "cpu") with operands of
    ``operand_shapes`` (one shape per In/InOut/scalar param, in parameter order; () for a scalar),
    ``grid`` and ``out_shapes`` (one per Out param, in order, as ``jax_kernel`` gets them); CUDA: for
    every architecture the driver sees, or ``archs``. Returns a Future of the compiled artifacts; its
    exception is the build's error (the lowering raises the same one)."""
    return submit(build_for_call, kernel, operand_shapes, grid=grid, out_shapes=out_shapes, platform=platform,
                  archs=archs)


__all__ = ["build_for_call", "compile_ahead", "submit"]
