"""JVP, transpose and batching rules of ``kernel_call_p``: every transformation from one kernel.

* JVP: the primal call, plus a call of ``ado.jvp(k, wrt, primal_outputs=False)`` (``wrt``: the
  params whose tangents are not symbolic zeros) marked ``tangent_of=(k, wrt)``: linear in its
  shadow operands, so ``linearize``/``vjp`` can stage and transpose it. Outputs the lean kernel
  does not store are In params there: an Out one is given zeros (never read; not the primal
  call's output, so that a VJP whose primal output is unused does not run the primal call), an
  InOut one its input, as before.
* Transpose of such a call: one call of ``ado.vjp(k, wrt, primal_outputs=False)`` (output
  cotangents are the seeds, In where the lean kernel only reads them; input adjoints accumulate
  from zero, or are Out results where the lean kernel writes them once; an InOut whose seed the
  lean kernel never writes passes its cotangent through as its input's gradient).
* Batching: a call of ``adoffload.batching.batched_kernel`` with the batch as a leading
  grid axis. A tangent call is batched consistently with its base kernel (a param and its
  shadow share one batch flag), so it stays transposable.

Derivative kernels are kernels, so these rules compose: ``hessian`` binds the JVP of the
adjoint kernel (forward over reverse), ``vmap(grad)`` batches the adjoint kernel.

``scalar_jvp.py`` registers the JVP rule actually used: when the differentiated operands are
a few scalars it binds one ``ado.jvp(k, wrt, width=K)`` call (outputs and Jacobian columns)
and makes the tangent in plain JAX, so no tangent call (and no ``vjp``) is made; otherwise it
calls ``_jvp`` here.
"""
from __future__ import annotations

import functools
import re
from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np
from jax.interpreters import ad, batching

from ..kernels import batching as kernel_batching
from ..errors import JaxIntegrationError
from ..language.signature import HIDDEN_PREFIX
from .primitive import _varying_axes, CallSpec, bind, kernel_call_p



def _derivative(kind: str, kernel, wrt):
    """The lean derivative kernel (enzyme/lean.py): the rules have the primal outputs already, so
    the tangent call and the adjoint skip storing them, and the adjoint reads once-stored seeds.
    The tangent kernel is lazy (kernels/kernel.py ``lazy_jvp``): binding its call needs only its
    signature, and under ``jax.grad`` it is transposed away, never lowered, so never derived."""
    from ..kernels.kernel import lazy_jvp, vjp
    return (lazy_jvp if kind == "jvp" else vjp)(kernel, list(wrt), primal_outputs=False)


def _is_zero(tangent) -> bool:
    if type(tangent) is ad.Zero:
        return True
    return jax.dtypes.result_type(tangent) == jax.dtypes.float0


def _zero_like(value):
    return ad.Zero(jax.typeof(value).to_tangent_aval())


def _param_shapes(spec: CallSpec, operand_shapes) -> list[tuple[int, ...]]:
    """Shape of every param of ``spec.kernel``, by parameter index (scalars: ())."""
    shapes: list = [None] * len(spec.params)
    for k, shape in zip(spec.operand_params, operand_shapes):
        shapes[k] = tuple(shape)
    for k, shape in zip(spec.result_params, spec.result_shapes(operand_shapes)):
        shapes[k] = tuple(shape)
    return shapes


def shadows(derived, base) -> dict[int, int]:
    """base param index -> index of its shadow in ``derived``.

    Shadows follow the base's params and are named ``d_<name>`` (``d2_<name>``, ... when a
    derivative of a derivative already has a ``d_<name>``), so only that tail is searched.
    """
    n = len(base.signature.params)
    index = {p.name: k for k, p in enumerate(base.signature.params)}
    found = {}
    for j, p in enumerate(derived.signature.params[n:]):
        match = _SHADOW_NAME.match(p.name)
        if match and match.group(1) in index:
            found[index[match.group(1)]] = n + j
    return found


_SHADOW_NAME = re.compile(r"d\d*_(.+)$")


def _derived_shapes(derived, base, base_shapes) -> list[tuple[int, ...]]:
    """Shapes of every param of a derivative of ``base``: primal params keep theirs, a shadow
    takes its primal's (a reverse-mode adjoint of a scalar is a 1-element array)."""
    shapes = list(base_shapes) + [None] * (len(derived.signature.params) - len(base_shapes))
    for k, s in shadows(derived, base).items():
        p = derived.signature.params[s]
        base_shape = base_shapes[k]
        if p.is_array and len(base_shape) < p.type.ndim:
            base_shape = (1,) * (p.type.ndim - len(base_shape)) + base_shape
        shapes[s] = base_shape
    return shapes


def _derived_spec(derived, spec: CallSpec, shapes, tangent_of=None) -> CallSpec:
    out_shapes = tuple(shapes[k] for k, p in enumerate(derived.signature.params)
                       if p.is_array and p.type.intent == "out" and not _hidden(p))
    kind = TapeCallSpec if has_hidden_params(derived) else CallSpec
    return kind(derived, spec.grid, out_shapes, tangent_of)


def _hidden(param) -> bool:
    return param.name.startswith(HIDDEN_PREFIX)


def has_hidden_params(kernel) -> bool:
    """Whether the kernel takes launcher-filled params (a reverse kernel's dynamic tape)."""
    return any(_hidden(p) for p in kernel.signature.params)


@dataclass(frozen=True, repr=False)
class TapeCallSpec(CallSpec):
    """The call of a kernel with hidden params (a dynamic tape): those are neither operands nor
    results, since the FFI handler sizes and allocates them itself (handler.py, TapeLayout)."""

    @functools.cached_property
    def operand_params(self) -> tuple[int, ...]:
        return tuple(k for k, p in enumerate(self.params)
                     if not (p.is_array and p.type.intent == "out") and not _hidden(p))

    @functools.cached_property
    def result_params(self) -> tuple[int, ...]:
        return tuple(k for k, p in enumerate(self.params) if p.is_array and p.type.writes and not _hidden(p))


# ----------------------------------------------------------------------------- JVP

def _jvp(primals, tangents, *, spec: CallSpec):
    kernel = spec.kernel
    primal_out = bind(primals, spec)
    wrt = tuple(spec.params[k].name for k, t in zip(spec.operand_params, tangents)
                if spec.params[k].dtype.is_float and not _is_zero(t))
    if not wrt:
        return primal_out, [_zero_like(o) for o in primal_out]
    forward = _derivative("jvp", kernel, wrt)      # through a dynamic tape, with its shadow tape
    shapes = _derived_shapes(forward, kernel, _param_shapes(spec, [np.shape(p) for p in primals]))
    fspec = _derived_spec(forward, spec, shapes, tangent_of=(kernel, wrt))
    shadow_of = {s: k for k, s in shadows(forward, kernel).items()}
    tangent_of_param = dict(zip(spec.operand_params, tangents))
    operands = []
    for k in fspec.operand_params:
        p = fspec.params[k]
        if k < len(spec.params):
            # an Out param the lean kernel neither stores nor reads gets zeros, not the primal call's
            # output: then the tangent call does not depend on the primal call, and a VJP whose
            # primal output nobody uses lets XLA drop that call (as the transpose rule does)
            operands.append(primals[spec.operand_params.index(k)] if k in spec.operand_params
                            else jnp.zeros(shapes[k], p.dtype.dtype))
            continue
        tangent = tangent_of_param.get(shadow_of[k])
        if tangent is None or _is_zero(tangent):
            operands.append(jnp.zeros(shapes[k], p.dtype.dtype))
        else:
            operands.append(jnp.asarray(tangent, p.dtype.dtype).reshape(shapes[k]))
    outs = bind(operands, fspec)
    shadow_index = shadows(forward, kernel)
    tangent_out = []
    for k, primal in zip(spec.result_params, primal_out):
        s = shadow_index.get(k)
        tangent_out.append(_zero_like(primal) if s not in fspec.result_params
                           else outs[fspec.result_params.index(s)])
    return primal_out, tangent_out


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
    adjoint = _derivative("vjp", base, wrt)     # may have a dynamic tape: its handler sizes it
    base_shapes = _param_shapes(spec, [_aval(o).shape for o in operands])[:n_primal]
    shapes = _derived_shapes(adjoint, base, base_shapes)
    rspec = _derived_spec(adjoint, spec, shapes)
    tangent_shadow = shadows(spec.kernel, base)          # base param -> its shadow in this (forward) call
    r_base = {s: k for k, s in shadows(adjoint, base).items()}
    r_operands = []
    for k in rspec.operand_params:
        p = rspec.params[k]
        if k < n_primal:
            r_operands.append(operands[spec.operand_params.index(k)] if k in spec.operand_params
                              else jnp.zeros(shapes[k], p.dtype.dtype))   # skipped output, unread
            continue
        seed = tangent_shadow.get(r_base[k])
        if seed in spec.result_params and not _is_zero(cts[spec.result_params.index(seed)]):
            r_operands.append(jnp.asarray(cts[spec.result_params.index(seed)], p.dtype.dtype).reshape(shapes[k]))
        else:
            r_operands.append(jnp.zeros(shapes[k], p.dtype.dtype))
    outs = bind(r_operands, rspec)
    adjoint_of = shadows(adjoint, base)
    forward_base = {s: k for k, s in tangent_shadow.items()}
    result = []
    for index, k in enumerate(spec.operand_params):
        operand = operands[index]
        if not ad.is_undefined_primal(operand):
            result.append(None)
            continue
        r = adjoint_of.get(forward_base.get(k))
        if r is not None and r not in rspec.result_params and r in rspec.operand_params:
            # a read-only seed (lean.py: an InOut the adjoint never writes, e.g. only read or only
            # atomically updated): its input's gradient is the seed, unchanged
            value = r_operands[rspec.operand_params.index(r)]
            value = jnp.asarray(value).reshape(operand.aval.shape).astype(operand.aval.dtype)
            result.append(_sum_over_unshared_axes(value, operand.aval))
        elif r not in rspec.result_params:
            result.append(ad.Zero(operand.aval))
        else:
            value = outs[rspec.result_params.index(r)].reshape(operand.aval.shape).astype(operand.aval.dtype)
            result.append(_sum_over_unshared_axes(value, operand.aval))
    return result


def _sum_over_unshared_axes(value, aval):
    """Under shard_map, an operand that is the same on every device (say a parameter) gets
    per-device adjoint contributions: its cotangent is their sum over the extra mesh axes."""
    extra = _varying_axes(jax.typeof(value)) - _varying_axes(aval)
    return jax.lax.psum(value, tuple(sorted(extra))) if extra else value


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
    bspec = type(spec)(kernel, kernel_batching.batched_grid(spec.grid, size), out_shapes, tangent_of)
    outs = bind(operands, bspec)
    return outs, [0] * len(outs)


def _flags(spec: CallSpec, dims) -> tuple[bool, ...]:
    """Which params of ``spec.kernel`` carry the batch axis.

    Written params always do; in a tangent call a param and its shadow share one flag, so
    the batched call is still the JVP of the batched base kernel.
    """
    flags = [False] * len(spec.params)
    for k, d in zip(spec.operand_params, dims):
        flags[k] = d is not None
    for k, p in enumerate(spec.params):
        flags[k] = flags[k] or (p.is_array and p.type.writes)
    if spec.tangent_of is not None:
        for k, s in shadows(spec.kernel, spec.tangent_of[0]).items():
            flags[k] = flags[s] = flags[k] or flags[s]
    return tuple(flags)


batching.primitive_batchers[kernel_call_p] = _batch


# ----------------------------------------------------------------------------- Taylor mode

def _no_jet(primals, series, *, spec: CallSpec):
    """``jax.experimental.jet`` looks its rules up by primitive: without one it raised a bare
    ``KeyError: adoffload_kernel_call``. Taylor series of a call are not propagated (no rule builds
    them from the kernel's derivatives), so the refusal names the kernel and says what works."""
    kernel = spec.tangent_of[0] if spec.tangent_of else spec.kernel
    raise JaxIntegrationError(f"kernel '{kernel.name}': jax.experimental.jet (Taylor mode) is not supported for "
                              "adoffload kernel calls; nested jax.jvp (or jax.jacfwd) gives the higher derivatives")


try:                                    # experimental: registered only where this JAX has it
    from jax.experimental import jet as _jet
    _jet.jet_rules[kernel_call_p] = _no_jet
except (ImportError, AttributeError):
    pass
