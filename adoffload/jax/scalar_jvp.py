"""The JVP of a kernel call differentiated in a few scalars: one vector-forward call for all of them.

``rules.py``'s JVP binds a tangent call of ``ado.jvp(k, wrt)``, which ``jax.grad`` transposes
into a call of ``ado.vjp(k, wrt)``: the reverse sweep, with a tape when the kernel loops and
an atomic (combined per block) for every scalar adjoint. When every differentiated operand is
a float scalar and there are at most ``MAX_WIDTH`` of them (the parameters of a potential in
force matching), this rule instead binds ONE call of ``ado.jvp(k, wrt, width=K)`` with the K
unit tangents: it returns the outputs and their K columns ``d out / d theta_j`` (no tape, no
atomics), and the tangent is ``sum_j t_j * column_j``, plain JAX that is linear in the
tangents. So ``jax.grad`` needs no adjoint kernel at all: the pullback of that sum is K dot
products of the cotangent with the columns, which XLA fuses; and the primal outputs come
from the same launch, so the forward pass is that one call. It is the same derivative, only
evaluated by columns (the columns are kept for the backward pass: K times the outputs' size).

Strategy: ``ADOFFLOAD_SCALAR_JVP`` in the environment, ``columns`` (the default: this rule
wherever it applies) or ``tangent`` (always ``rules.py``'s tangent call, so ``jax.grad`` runs
``vjp``; for comparisons). It does not apply when an array is differentiated (positions: the
reverse sweep is the cheaper one then), when the kernel takes hidden (tape) params (vector
forward mode of a kernel reading a tape is not available), or when the engine refuses the
forward derivative (DifferentiationError: ``rules.py`` then derives what it can, or raises).

``api.py`` imports this module, which registers ``jvp`` as the JVP rule of ``kernel_call_p``.
"""
from __future__ import annotations

import os

import jax.numpy as jnp
import numpy as np
from jax.interpreters import ad

from ..errors import DifferentiationError, JaxIntegrationError
from . import rules
from .primitive import CallSpec, bind, kernel_call_p

MAX_WIDTH = 8
STRATEGY_VARIABLE = "ADOFFLOAD_SCALAR_JVP"
STRATEGIES = ("columns", "tangent")


def strategy() -> str:
    """``columns`` or ``tangent``, from ``ADOFFLOAD_SCALAR_JVP`` (default ``columns``)."""
    value = os.environ.get(STRATEGY_VARIABLE, "").strip().lower() or "columns"
    if value not in STRATEGIES:
        raise JaxIntegrationError(f"{STRATEGY_VARIABLE}={value!r} in the environment: choose one of "
                                  f"{', '.join(STRATEGIES)}")
    return value


def scalar_wrt(spec: CallSpec, tangents) -> tuple[str, ...] | None:
    """The differentiated params when every one is a float scalar (at most MAX_WIDTH), else None."""
    wrt = tuple(spec.params[k].name for k, t in zip(spec.operand_params, tangents)
                if spec.params[k].dtype.is_float and not rules._is_zero(t))
    if not wrt or len(wrt) > MAX_WIDTH or rules.has_hidden_params(spec.kernel):
        return None
    if any(spec.params[spec.kernel.signature.index_of(name)].is_array for name in wrt):
        return None
    return wrt if strategy() == "columns" else None


def _forward_kernel(kernel, wrt):
    """``jvp(kernel, wrt, width=K)``, or None when the engine refuses it."""
    from ..kernels.kernel import jvp
    try:
        return jvp(kernel, list(wrt), width=len(wrt))
    except DifferentiationError:
        return None


def jvp(primals, tangents, *, spec: CallSpec):
    """JVP rule of ``kernel_call_p``: by columns for a few scalars, else ``rules.py``'s tangent call."""
    wrt = scalar_wrt(spec, tangents)
    forward = None if wrt is None else _forward_kernel(spec.kernel, wrt)
    if forward is None:
        return rules._jvp(primals, tangents, spec=spec)
    return _jvp_by_columns(primals, tangents, spec, forward, wrt)


def _jvp_by_columns(primals, tangents, spec: CallSpec, forward, wrt):
    kernel = spec.kernel
    n_primal = len(spec.params)
    width = len(wrt)
    base_shapes = rules._param_shapes(spec, [np.shape(p) for p in primals])
    lane = {kernel.signature.index_of(name): j for j, name in enumerate(wrt)}
    shadow = rules.shadows(forward, kernel)                 # param -> its shadow in `forward`
    shapes = list(base_shapes) + [None] * (len(forward.signature.params) - n_primal)
    for k, s in shadow.items():
        shapes[s] = tuple(base_shapes[k]) if width == 1 else (width, *base_shapes[k])
    out_shapes = tuple(shapes[k] for k, p in enumerate(forward.signature.params)
                       if p.is_array and p.type.intent == "out")
    fspec = CallSpec(forward, spec.grid, out_shapes)
    shadow_of = {s: k for k, s in shadow.items()}
    operands = []
    for k in fspec.operand_params:
        p = fspec.params[k]
        if k < n_primal:
            operands.append(primals[spec.operand_params.index(k)])
        elif shadow_of[k] in lane:                          # theta_j's shadow: the unit tangent e_j
            j = lane[shadow_of[k]]
            operands.append(jnp.asarray(1.0 if width == 1 else np.eye(width)[j], p.dtype.dtype))
        else:                                               # everything else: tangent zero
            operands.append(jnp.zeros(shapes[k], p.dtype.dtype))
    outs = bind(operands, fspec)
    given = dict(zip(spec.operand_params, tangents))
    t = [given[kernel.signature.index_of(name)] for name in wrt]
    primal_out, tangent_out = [], []
    for k in spec.result_params:
        primal = outs[fspec.result_params.index(k)]
        primal_out.append(primal)
        s = shadow.get(k)
        if s not in fspec.result_params:
            tangent_out.append(rules._zero_like(primal))
            continue
        columns = outs[fspec.result_params.index(s)]
        if width == 1:
            tangent_out.append(jnp.asarray(t[0], columns.dtype) * columns)
        else:
            weights = jnp.stack([jnp.asarray(tj, columns.dtype) for tj in t])
            tangent_out.append(jnp.tensordot(weights, columns, axes=1))
    return primal_out, tangent_out


ad.primitive_jvps[kernel_call_p] = jvp


__all__ = ["MAX_WIDTH", "STRATEGY_VARIABLE", "jvp", "scalar_wrt", "strategy"]
