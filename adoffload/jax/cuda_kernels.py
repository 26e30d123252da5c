"""``ado.jax_kernel(k, blocks=..., threads=..., out_shapes=...)`` for CUDA kernels.

The function JAX sees is ``ado.jax_kernel`` of the block kernel ``k.specialize(threads)`` (so jit,
grad, vmap and the rest work as for any kernel), wrapped so that it reads like the CUDA launch:
it takes the In, InOut and scalar parameters in order or by name (arrays of any shape, passed flattened to
the raw pointers; the ``gridDim`` parameters are filled from ``blocks``) and returns the Out and
InOut arrays, Outs shaped as ``out_shapes`` says and InOuts shaped like their inputs.
"""
from __future__ import annotations

import numpy as np

import jax.numpy as jnp

from ..errors import JaxIntegrationError
from ..sources.cuda.kernel import CudaLaunchable, check_shared_bytes, launch_shape
from ..sources.cuda.translate import GRID_PARAMS
from .kernel_functions import call_arguments, kernel_function


def jax_cuda_kernel(launchable: CudaLaunchable, *, blocks, threads, out_shapes=None, shared_bytes: int = 0):
    blocks, threads = launch_shape(launchable.name, blocks, threads)
    kernel = launchable.specialize(threads, check_shared_bytes(launchable.name, shared_bytes))
    grid = tuple(b * t for b, t in zip(reversed(blocks), reversed(threads)))
    params = kernel.signature.visible_params
    inputs = [p for p in params if p.name not in GRID_PARAMS and not (p.is_array and p.type.intent == "out")]
    outs = [p for p in params if p.is_array and p.type.intent == "out"]
    shapes = dict(out_shapes or {})
    unknown = set(shapes) - {p.name for p in outs}
    missing = [p.name for p in outs if p.name not in shapes]
    if unknown or missing:
        raise JaxIntegrationError(f"kernel '{launchable.name}': out_shapes must give the shape of every Out array "
                                  f"({', '.join(p.name for p in outs) or 'none'}); "
                                  f"{'missing ' + ', '.join(missing) if missing else 'unknown ' + ', '.join(unknown)}")
    shapes = {name: (int(s),) if np.ndim(s) == 0 else tuple(int(e) for e in s) for name, s in shapes.items()}
    flat_shapes = {name: (int(np.prod(s)),) if p.type.ndim == 1 else s
                   for p in outs for name, s in [(p.name, shapes[p.name])]}
    inner = kernel_function(kernel, grid=grid, out_shapes=flat_shapes)
    grid_dims = [jnp.int32(b) for b in (*blocks, 1, 1)[:3]]

    def call(*args, **kwargs):
        args = call_arguments(kernel, inputs, args, kwargs)
        operands = [jnp.reshape(a, (-1,)) if p.is_array and p.type.ndim == 1 and np.ndim(a) > 1 else a
                    for p, a in zip(inputs, args)]
        results = inner(*operands, *grid_dims)
        results = results if isinstance(results, tuple) else (results,)
        written = [p for p in params if p.is_array and p.type.intent in ("out", "inout")]
        shaped = []
        for p, r in zip(written, results):
            shape = shapes[p.name] if p.type.intent == "out" else np.shape(args[inputs.index(p)])
            shaped.append(jnp.reshape(r, shape))
        return shaped[0] if len(shaped) == 1 else tuple(shaped)

    call.__name__ = launchable.name
    call.kernel = kernel
    return call
