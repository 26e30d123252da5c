"""Bring your GPU kernel: CUDA C/C++ (and HIP) kernels compiled by clang, run and differentiated.

``mod = ado.from_cuda(source)`` compiles the device code with the ziglang wheel's clang and our
header (ado_cuda.h, no CUDA toolkit); ``k = mod.kernel("saxpy", a=ado.f32, x=ado.In[ado.f32], ...)``
types a ``__global__`` function; ``k(a, x, ..., blocks=..., threads=...)`` launches it on any
target (the host CPU included, barriers through the host block split), and ``ado.jvp(k, wrt)``
/ ``ado.vjp(k, wrt)`` differentiate it. See kernel.py (launches) and translate.py (the IR).
"""
from __future__ import annotations

from .compile import compile_to_llvm
from .kernel import CudaKernel, CudaModule
from .structs import Struct, struct


def from_cuda(source: str, arch: str = "sm_90", *, options=()) -> CudaModule:
    """Compile CUDA C/C++ device code (``__global__`` kernels) for ``arch``; ``options`` are extra
    clang flags (``-DBLOCK=256``)."""
    return CudaModule(compile_to_llvm(source, language="cuda", arch=arch, options=tuple(options)), "cuda", arch)


def from_hip(source: str, arch: str = "gfx942", *, options=()) -> CudaModule:
    """Compile HIP device code (``__global__`` kernels, the CUDA spelling: threadIdx, __syncthreads,
    __shfl_*_sync, atomicAdd) for ``arch``; the kernels then behave as ``from_cuda``'s."""
    return CudaModule(compile_to_llvm(source, language="hip", arch=arch, options=tuple(options)), "hip", arch)


__all__ = ["CudaKernel", "CudaModule", "Struct", "from_cuda", "from_hip", "struct"]
