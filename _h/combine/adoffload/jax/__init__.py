"""Kernels as JAX custom calls: ``jax_kernel``, the ``kernel_call_p`` primitive and its rules.

See ``api.py`` (calling convention), ``primitive.py`` (the primitive and its lowering),
``rules.py`` (JVP, transpose, batching), ``scalar_jvp.py`` (the JVP rule used when a few
scalars are differentiated: one vector-forward call), ``handler.py`` (FFI handlers in LLVM IR) and
``targets.py`` (FFI target registration and GPU error checks).
"""
from .api import jax_kernel
from .primitive import CallSpec, kernel_call_p
from .targets import check_errors

__all__ = ["CallSpec", "check_errors", "jax_kernel", "kernel_call_p"]
