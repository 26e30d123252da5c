"""adoffload: differentiable offload kernels.

Write a kernel once in a small Python kernel language (or bring LLVM IR); adoffload
differentiates it at the IR level (forward and reverse, Enzyme-style), compiles primal and
derivative kernels through one LLVM path for the host CPU, NVIDIA (PTX) and AMD (GCN), and
exposes them to JAX as custom calls.

Public names are loaded on first use, so ``import adoffload`` stays cheap and the
sub-packages (``adoffload.ir``, ``adoffload.enzyme``, ...) import independently.
"""
from __future__ import annotations

import importlib

from .errors import *  # noqa: F401,F403  (every error class is public)
from .errors import Error
from .types import In, InOut, Out, bool_, f32, f64, i32, i64
# Eager, because the submodule ``adoffload.kernel`` would otherwise shadow the decorator.
from .kernel import Kernel, jvp, kernel, vjp  # noqa: E402

__version__ = "0.1.0"

_LAZY = {
    # kernels and derivatives
    # kernel language
    "func": "language", "tid": "language", "atomic_add": "language", "atomic_min": "language",
    "atomic_max": "language", "zeros": "language", "grad": "language",
    "value_and_grad": "language",
    "sqrt": "language", "rsqrt": "language", "exp": "language", "log": "language", "sin": "language", "cos": "language",
    "tan": "language", "tanh": "language", "pow": "language", "abs": "language", "min": "language",
    "max": "language", "floor": "language", "erf": "language", "atan2": "language",
    "exp2": "language", "log2": "language", "log1p": "language", "expm1": "language",
    "sinh": "language", "cosh": "language", "asin": "language", "acos": "language", "atan": "language",
    "ceil": "language", "fma": "language", "copysign": "language", "static_range": "language",
    # block-level kernels
    "thread_id": "language", "block_id": "language", "block_dim": "language", "lane_id": "language",
    "warp_size": "language", "shared": "language", "sync_threads": "language", "warp_sum": "language",
    "warp_max": "language", "shuffle": "language", "shuffle_down": "language", "block_sum": "language",
    "block_max": "language",
    # foreign IR and JAX
    "from_llvm": "foreign", "from_numba": "foreign", "jax_kernel": "jax", "from_cuda": "foreign_cuda", "from_hip": "foreign_cuda",
    "struct": "foreign_cuda",
}
_SUBMODULES = {"enzyme", "ir", "codegen", "runtime", "frontend", "chemistry", "cache"}


def __getattr__(name: str):
    if name in _LAZY:
        value = getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
        globals()[name] = value
        return value
    if name in _SUBMODULES:
        return importlib.import_module(f".{name}", __name__)
    raise AttributeError(f"module 'adoffload' has no attribute '{name}'")


def __dir__():
    return sorted(set(globals()) | set(_LAZY) | _SUBMODULES)
