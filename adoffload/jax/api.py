"""``ado.jax_kernel``: a kernel as a JAX function (jit, grad, vmap, shard_map all work on it).

The function takes the kernel's In, InOut and scalar params positionally in parameter order, or by
name (Out params are skipped), and returns its Out and InOut arrays in parameter order, a single
array when there is one (kernel_functions.py; CUDA kernels: cuda_kernels.py).
"""
from __future__ import annotations

from ..errors import JaxIntegrationError
from ..kernels.kernel import Kernel
from ..sources.cuda.kernel import CudaLaunchable
from . import rules  # noqa: F401  (registers the JVP, transpose and batching rules)
from . import scalar_jvp  # noqa: F401  (the JVP rule: one vector-forward call when a few scalars vary)
from .cuda_kernels import jax_cuda_kernel
from .kernel_functions import kernel_function


def jax_kernel(kernel, *, grid=None, out_shapes=None, blocks=None, threads=None, shared_bytes=0):
    """Wrap ``kernel`` as a JAX function; see the module docstring for the calling convention.

    ``grid``: an int, a tuple, or a callable taking the function's arguments and returning
    one (default: the shape of the first Out array, cut to the kernel's grid rank, where the kernel
    indexes each of its axes with that grid axis's thread id; otherwise grid= is required).
    ``out_shapes``: ``{out_name: shape}`` or a callable returning that dict (default: derived
    from the kernel where it indexes the Out array and some input arrays with the same thread
    ids, ``out[i] = ... x[i] ...``; otherwise out_shapes is required).
    ``blocks``/``threads``/``shared_bytes``: instead of ``grid``, for CUDA kernels (jax/cuda_kernels.py).
    """
    if isinstance(kernel, CudaLaunchable):       # CUDA kernels (ado.from_cuda): jax/cuda_kernels.py
        if grid is not None or blocks is None or threads is None:
            raise JaxIntegrationError(f"ado.jax_kernel of the CUDA kernel '{kernel.name}' takes blocks= and "
                                      f"threads= (as its launches do), not grid=")
        return jax_cuda_kernel(kernel, blocks=blocks, threads=threads, out_shapes=out_shapes, shared_bytes=shared_bytes)
    if blocks is not None or threads is not None:
        raise JaxIntegrationError(f"ado.jax_kernel: blocks=/threads= are for CUDA kernels (ado.from_cuda); "
                                  f"give kernel '{getattr(kernel, 'name', kernel)}' a grid=")
    if not isinstance(kernel, Kernel):
        raise JaxIntegrationError(f"ado.jax_kernel expects a kernel made with @ado.kernel, got "
                                  f"{type(kernel).__name__}")
    return kernel_function(kernel, grid=grid, out_shapes=out_shapes)
