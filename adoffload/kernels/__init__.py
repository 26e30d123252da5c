"""Kernels as users hold them: ``@ado.kernel`` objects, their derivative kernels, and launches.

``kernel`` (Kernel, the decorator, ``jvp``/``vjp``), ``launch`` (numpy and DLPack launches: check the
arguments, pick the variant, move data by intent; with ``arguments`` (binding and checks), ``shadows``
(shadow shapes against primals), ``overlap`` (arrays sharing memory), ``launch_plan`` (what an argument
signature decides, cached), ``signature_match`` (the quick check of a repeated signature),
``launch_run`` (one launch of a plan), ``hidden_buffers`` (reverse kernels' tapes and logs)), ``batching`` (the IR transformation behind
``jax.vmap``), ``tape_scan`` (the device prefix sum of dynamic tapes), ``local_memory`` (the per-thread
budget of local arrays).
"""
from .kernel import Kernel, jvp, kernel, vjp

__all__ = ["Kernel", "jvp", "kernel", "vjp"]
