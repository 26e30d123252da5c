"""``compile_ahead``: build the kernel a JAX ``minimize`` call will run, in a background thread.

The optimizer kernel of ``minimize`` is generated and compiled when JAX traces and lowers the call,
and XLA's compilation of the jitted function around it waits for that. ``compile_ahead`` does the
same work (generation, front end, AD, LLVM, ptxas) on adoffload's compile-ahead thread
(jax/ahead.py) from the call's arguments -- ``x0`` may be a ``jax.ShapeDtypeStruct`` -- so that it
overlaps whatever the program does meanwhile (imports, JAX's GPU start-up, other compiles); the
call then finds the kernel built. The result of the call does not depend on it.

JAX's x64 mode at the ``compile_ahead`` call decides the kernel's integer type (``inputs.int_type``),
as it does for the call: enable it first. A call under another mode builds its own kernel (the build
ahead was wasted time, not a wrong result).
"""
from __future__ import annotations

import numpy as np

from .api import minimize_call
from .inputs import int_type


def compile_ahead(fun, x0, args=(), method: str = "lbfgs", tol: float | None = None, maxiter: int | None = None,
                  options: dict | None = None, platform: str = "cuda", archs=None, layout: str = "auto"):
    """Start building the kernel of ``minimize(fun, x0, args, method, tol, maxiter, options=options)``
    called with JAX arrays on ``platform`` ("cuda" | "cpu"; CUDA: every architecture the driver sees,
    or ``archs``), with ``layout`` as minimize's (chosen for ``platform``). Returns a ``concurrent.futures.Future`` of the compiled artifacts; the build's
    errors are its exception (the call itself raises them again)."""
    from ..jax.ahead import build_for_call, submit
    I = int_type(True)        # read here, not on the build thread: the caller may change the mode next

    def build():
        what = "adoffload.optimize.compile_ahead"
        kernel, inputs, shapes, _, batch = minimize_call(fun, x0, args, method, tol, maxiter, options, what,
                                                         use_jax=True, values=False, layout=layout,
                                                         device=platform, I=I)
        operand_shapes = [tuple(getattr(v, "shape", np.shape(v))) for v in inputs]
        return build_for_call(kernel, operand_shapes, grid=(batch * getattr(kernel, "problems_per_launch", 1),), out_shapes=list(shapes.values()),
                              platform=platform, archs=archs)
    return submit(build)


__all__ = ["compile_ahead"]
