"""Batch optimization: thousands to millions of small problems, each solved inside one kernel launch.

``minimize(fun, x0, args, method="lbfgs" | "bfgs" | "fire")`` and ``least_squares(residual, x0, args,
m=..., method="lm" | "gn")`` mirror scipy.optimize's names and conventions (docs/optimize.md). The
function is an ``@ado.func`` in the kernel language; the optimizer kernel is generated for it
(generate.py: one problem per thread, or per warp with ``layout="warp"``: layout.py; the whole
iteration in one launch), and its derivatives are
built inside the kernel by the AD engine. Usable from numpy and from JAX (jit, vmap).
"""
from __future__ import annotations

from .ahead import compile_ahead
from .api import least_squares, minimize
from .inputs import NonFiniteStartError, shared
from .result import OptimizeResult
from .status import MESSAGES

__all__ = ["compile_ahead", "minimize", "least_squares", "shared", "OptimizeResult", "NonFiniteStartError", "MESSAGES"]
