"""JVP, transpose and batching rules of ``kernel_call_p``: every transformation from one kernel.

* JVP: the primal call, plus a call of ``ado.jvp(k, wrt)`` (``wrt``: the params whose
  tangents are not symbolic zeros) marked ``tangent_of=(k, wrt)``: linear in its shadow
  operands, so ``linearize``/``vjp`` can stage and transpose it.
* Transpose of such a call: one call of ``ado.vjp(k, wrt)`` (output cotangents are the
  seeds, input adjoints accumulate from zero).
* Batching: a call of ``adoffload.batching.batched_kernel`` with the batch as a leading
  grid axis. A tangent call is batched consistently with its base kernel (a param and its
  shadow share one batch flag), so it stays transposable.

Derivative kernels are kernels, so these rules compose: ``hessian`` binds the JVP of the
adjoint kernel (forward over reverse), ``vmap(grad)`` batches the adjoint kernel.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jax.interpreters import ad, batching

from .. import batching as kernel_batching
from ..errors import JaxIntegrationError
from .primitive import CallSpec, bind, kernel_call_p

SHADOW_PREFIX = "d_"


def _derivative(kind: str, kernel, wrt):
    from ..kernel import jvp, vjp
    return (jvp if kind == "jvp" else vjp)(kernel, list(wrt))


def _is_zero(tangent) -> bool:
    if type(tangent) is ad.Zero:
        return True
    return jax.dtypes.result_type(tangent) == jax.dtypes.float0


def _zero_like(value):
    return ad.Zero(jax.typeof(value).to_tangent_aval())


def _shapes_by_name(spec: CallSpec, operand_shapes) -> dict[str, tuple[int, ...]]:
    """Shape of every param of ``spec.kernel`` (scalars: ())."""
    shapes = {}
    for k, shape in zip(spec.operand_params, operand_shapes):
        shapes[spec.params[k].name] = tuple(shape)
    for k, shape in zip(spec.result_params, spec.result_shapes(operand_shapes)):
        shapes[spec.params[k].name] = tuple(shape)
    return shapes


def _shadow_shape(derived_param, base_shapes) -> tuple[int, ...]:
    """Shape of a param of a derived kernel: its own name's shape, or its primal's for ``d_x``.

    A reverse-mode adjoint of a scalar is a 1-element array.
    """
    name = derived_param.name
    if name in base_shapes:
        return base_shapes[name]
    base = base_shapes[name[len(SHADOW_PREFIX):]]
    if derived_param.is_array and len(base) < derived_param.type.ndim:
        return (1,) * (derived_param.type.ndim - len(base)) + base
    return base


def _derived_spec(derived, spec: CallSpec, base_shapes, tangent_of=None) -> CallSpec:
    out_shapes = tuple(_shadow_shape(p, base_shapes) for p in derived.signature.params
                       if p.is_array and p.type.intent == "out")
    return CallSpec(derived, spec.grid, out_shapes, tangent_of)


# ----------------------------------------------------------------------------- JVP

def _jvp(primals, tangents, *, spec: CallSpec):
    kernel = spec.kernel
    primal_out = bind(primals, spec)
    wrt = tuple(spec.params[k].name for k, t in zip(spec.operand_params, tangents)
                if spec.params[k].dtype.is_float and not _is_zero(t))
    if not wrt:
        return primal_out, [_zero_like(o) for o in primal_out]
    forward = _derivative("jvp", kernel, wrt)
    shapes = _shapes_by_name(spec, [np.shape(p) for p in primals])
    fspec = _derived_spec(forward, spec, shapes, tangent_of=(kernel, wrt))
    tangent_of_param = {spec.params[k].name: t for k, t in zip(spec.operand_params, tangents)}
    operands = []
    for k in fspec.operand_params:
        p = fspec.params[k]
        if k < len(spec.params):
            operands.append(primals[spec.operand_params.index(k)])
            continue
        tangent = tangent_of_param.get(p.name[len(SHADOW_PREFIX):])
        if tangent is None or _is_zero(tangent):
            operands.append(jnp.zeros(_shadow_shape(p, shapes), p.dtype.dtype))
        else:
            operands.append(jnp.asarray(tangent, p.dtype.dtype).reshape(_shadow_shape(p, shapes)))
    outs = bind(operands, fspec)
    tangent_out = []
    for k, primal in zip(spec.result_params, primal_out):
        r = fspec.result_index(SHADOW_PREFIX + spec.params[k].name) \
            if SHADOW_PREFIX + spec.params[k].name in _names(forward) else None
        tangent_out.append(_zero_like(primal) if r is None else outs[r])
    return primal_out, tangent_out


def _names(kernel) -> set[str]:
    return {p.name for p in kernel.signature.params}


ad.primitive_jvps[kernel_call_p] = _jvp


# ----------------------------------------------------------------------------- transpose

def _transpose(cts, *operands, spec: CallSpec):
    if spec.tangent_of is None:
        raise JaxIntegrationError(f"kernel '{spec.kernel.name}' is not linear in any operand; only the "
                                  "tangent calls that the JVP rule makes can be transposed")
    base, wrt = spec.tangent_of
    n_primal = len(base.signature.params)
    for index, k in enumerate(spec.operand_params):
        if k < n_primal and ad.is_undefined_primal(operands[index]):
            raise JaxIntegrationError(f"kernel '{base.name}': cannot transpose with respect to the primal "
                                      f"parameter '{spec.params[k].name}' (it enters non-linearly)")
    adjoint = _derivative("vjp", base, wrt)
    shapes = _shapes_by_name(spec, [_aval(o).shape for o in operands])
    rspec = _derived_spec(adjoint, spec, shapes)
    r_operands = []
    for k in rspec.operand_params:
        p = rspec.params[k]
        if k < n_primal:
            r_operands.append(operands[spec.operand_params.index(k)])
            continue
        shape = _shadow_shape(p, shapes)
        seed_index = spec.result_index(p.name) if p.name in _names(spec.kernel) else None
        if seed_index is not None and not _is_zero(cts[seed_index]):
            r_operands.append(jnp.asarray(cts[seed_index], p.dtype.dtype).reshape(shape))
        else:
            r_operands.append(jnp.zeros(shape, p.dtype.dtype))
    outs = bind(r_operands, rspec)
    result = []
    for index, k in enumerate(spec.operand_params):
        operand = operands[index]
        if not ad.is_undefined_primal(operand):
            result.append(None)
            continue
        name = spec.params[k].name
        r = rspec.result_index(name) if name in _names(adjoint) else None
        if r is None:
            result.append(ad.Zero(operand.aval))
        else:
            result.append(outs[r].reshape(operand.aval.shape).astype(operand.aval.dtype))
    return result


def _aval(x):
    return x.aval if ad.is_undefined_primal(x) else jax.typeof(x)


ad.primitive_transposes[kernel_call_p] = _transpose


# ----------------------------------------------------------------------------- batching

def _batch(args, dims, *, spec: CallSpec):
    size = next(a.shape[d] for a, d in zip(args, dims) if d is not None)
    flags = _flags(spec, dims)
    fold = spec.grid[0] if len(spec.grid) == 3 else None
    kernel = kernel_batching.batched_kernel(spec.kernel, flags, fold)
    tangent_of = None
    if spec.tangent_of is not None:
        base, wrt = spec.tangent_of
        tangent_of = (kernel_batching.batched_kernel(base, flags[:len(base.signature.params)], fold), wrt)
    operands = []
    for a, d, k in zip(args, dims, spec.operand_params):
        if d is not None:
            operands.append(jnp.moveaxis(a, d, 0))
        elif flags[k]:
            operands.append(jnp.broadcast_to(a, (size, *np.shape(a))))
        else:
            operands.append(a)
    out_shapes = tuple((size, *s) for s in spec.out_shapes)
    bspec = CallSpec(kernel, kernel_batching.batched_grid(spec.grid, size), out_shapes, tangent_of)
    outs = bind(operands, bspec)
    return outs, [0] * len(outs)


def _flags(spec: CallSpec, dims) -> tuple[bool, ...]:
    """Which params of ``spec.kernel`` carry the batch axis.

    Written params always do; in a tangent call a param and its shadow ``d_x`` share one
    flag, so the batched call is still the JVP of the batched base kernel.
    """
    names = [p.name for p in spec.params]
    batched = {spec.params[k].name for k, d in zip(spec.operand_params, dims) if d is not None}
    batched |= {p.name for p in spec.params if p.is_array and p.type.writes}
    if spec.tangent_of is not None:
        linked = {n[len(SHADOW_PREFIX):] for n in batched if n.startswith(SHADOW_PREFIX)}
        linked |= {n for n in batched}
        batched = {n for n in names if n in linked or (n.startswith(SHADOW_PREFIX)
                                                       and n[len(SHADOW_PREFIX):] in linked)}
    return tuple(n in batched for n in names)


batching.primitive_batchers[kernel_call_p] = _batch
