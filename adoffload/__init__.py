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
from .language.types import In, InOut, Out, bool_, f32, f64, i32, i64
from .kernels.kernel import Kernel, jvp, kernel, vjp

__version__ = "0.1.0"

_LAZY = {
    # kernels and derivatives
    # kernel language
    "func": "language.builtins", "tid": "language.builtins", "atomic_add": "language.builtins", "atomic_min": "language.builtins",
    "atomic_max": "language.builtins", "zeros": "language.builtins", "grad": "language.builtins",
    "value_and_grad": "language.builtins",
    "sqrt": "language.builtins", "rsqrt": "language.builtins", "exp": "language.builtins", "log": "language.builtins", "sin": "language.builtins", "cos": "language.builtins",
    "tan": "language.builtins", "tanh": "language.builtins", "pow": "language.builtins", "abs": "language.builtins", "min": "language.builtins",
    "max": "language.builtins", "floor": "language.builtins", "erf": "language.builtins", "atan2": "language.builtins",
    "exp2": "language.builtins", "log2": "language.builtins", "log1p": "language.builtins", "expm1": "language.builtins",
    "sinh": "language.builtins", "cosh": "language.builtins", "asin": "language.builtins", "acos": "language.builtins", "atan": "language.builtins",
    "ceil": "language.builtins", "fma": "language.builtins", "copysign": "language.builtins", "static_range": "language.builtins",
    # block-level kernels
    "thread_id": "language.builtins", "block_id": "language.builtins", "block_dim": "language.builtins", "lane_id": "language.builtins",
    "warp_size": "language.builtins", "shared": "language.builtins", "sync_threads": "language.builtins", "warp_sum": "language.builtins",
    "warp_max": "language.builtins", "shuffle": "language.builtins", "shuffle_down": "language.builtins", "block_sum": "language.builtins",
    "block_max": "language.builtins",
    # foreign IR and JAX
    "from_llvm": "sources.llvm", "from_numba": "sources.llvm", "jax_kernel": "jax", "from_cuda": "sources.cuda",
    "from_hip": "sources.cuda", "struct": "sources.cuda", "from_c": "sources.c",
}
# sub-packages reachable as attributes (``ado.enzyme``), and where ``ado.cache`` now lives
_SUBMODULES = {"enzyme": "enzyme", "ir": "ir", "codegen": "codegen", "runtime": "runtime", "frontend": "frontend",
               "chemistry": "chemistry", "optimize": "optimize", "cache": "codegen.cache", "analysis": "analysis", "types": "language.types"}


def __getattr__(name: str):
    if name in _LAZY:
        value = getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
        globals()[name] = value
        return value
    if name in _SUBMODULES:
        return importlib.import_module(f".{_SUBMODULES[name]}", __name__)
    raise AttributeError(f"module 'adoffload' has no attribute '{name}'")


def __dir__():
    return sorted(set(globals()) | set(_LAZY) | set(_SUBMODULES))
