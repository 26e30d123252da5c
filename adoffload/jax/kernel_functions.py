"""A kernel as a JAX function (api.py's ``ado.jax_kernel`` for kernels of our own and, through
cuda_kernels.py, for CUDA kernels).

The returned function takes the kernel's In, InOut and scalar params positionally in
parameter order, or by name (Out params are skipped) and returns its Out and InOut arrays in
parameter order, a single array when there is one. Arguments are checked at trace time:
dtypes and ranks must match the kernel's annotations (Python scalars are converted).
"""
from __future__ import annotations

import functools
import operator

import numpy as np

import jax
import jax.numpy as jnp

from ..errors import ArgumentError, GridError, JaxIntegrationError
from ..kernels.arguments import check_argument
from ..kernels.launch import check_block_grid
from .primitive import CallSpec, bind
from .rules import TapeCallSpec


def kernel_function(kernel, *, grid=None, out_shapes=None):
    """``ado.jax_kernel`` of a kernel of our own (api.py has the arguments' meaning)."""
    signature = kernel.signature
    # Hidden params (a reverse kernel's dynamic tape) are filled by the FFI handler itself.
    inputs = [p for p in signature.visible_params if not (p.is_array and p.type.intent == "out")]
    spec_type = CallSpec if len(signature.visible_params) == len(signature.params) else TapeCallSpec

    @functools.wraps(getattr(kernel, "pyfunc", lambda *a: None), assigned=("__doc__",))
    def call(*args, **kwargs):
        args = call_arguments(kernel, inputs, args, kwargs)
        operands = [_convert(kernel, p, a) for p, a in zip(inputs, args)]
        for p in signature.visible_params:      # an Out's 64-bit seed would be cut to 32 bits in derivatives
            if p.is_array and p.type.intent == "out":
                _check_x64(kernel, p)
        given_grid = None if grid is None else _grid(kernel, grid, args, operands, ())
        shapes = _out_shapes(kernel, out_shapes, args, operands, given_grid)
        call_grid = given_grid or _grid(kernel, grid, args, operands, shapes)
        _check_block_grid(kernel, call_grid, defaulted=given_grid is None)
        spec = spec_type(kernel, call_grid, shapes)
        results = bind(operands, spec)
        return results[0] if len(results) == 1 else tuple(results)

    call.__name__ = kernel.name
    call.kernel = kernel
    return call


def call_arguments(kernel, inputs, args: tuple, kwargs: dict) -> tuple:
    """The call's arguments in parameter order: positional ones first, then the rest by name
    (``f(x, w=0.3)``, as in Python). Python's own TypeError would name ``call()``, not the kernel."""
    names = [p.name for p in inputs]
    takes = f"kernel '{kernel.name}' as a JAX function takes {len(inputs)} arguments ({', '.join(names)})"
    if not kwargs and len(args) != len(inputs) or len(args) > len(inputs):
        raise JaxIntegrationError(f"{takes}, got {len(args)}")
    bound = dict(zip(names, args))
    outs = {p.name for p in kernel.signature.visible_params if p.is_array and p.type.intent == "out"}
    for name, value in kwargs.items():
        if name not in names:
            what = "an Out array, which is a result" if name in outs else "not one of them"
            raise JaxIntegrationError(f"{takes}; the keyword '{name}' is {what}")
        if name in bound:
            raise JaxIntegrationError(f"{takes}; '{name}' was given by position and by keyword")
        bound[name] = value
    missing = [name for name in names if name not in bound]
    if missing:
        raise JaxIntegrationError(f"{takes}; missing {', '.join(repr(n) for n in missing)}")
    return tuple(bound[name] for name in names)


def _convert(kernel, param, value):
    """``value`` as a JAX array of the param's dtype; raises JaxIntegrationError on a mismatch."""
    expected = param.dtype.dtype
    ndim = param.type.ndim if param.is_array else 0
    what = f"{'array' if param.is_array else 'scalar'} parameter '{param.name}' of kernel '{kernel.name}'"
    # first: without x64, JAX turns the caller's float64 arrays into float32 ones, and "expects
    # float64, got float32" would blame the caller for what the flag did
    _check_x64(kernel, param)
    if isinstance(value, (bool, int, float)) and not param.is_array:
        if isinstance(value, float) and not param.dtype.is_float:
            raise JaxIntegrationError(f"{what} expects {expected} (ndim 0), got the Python float {value!r}")
        try:            # the launcher's checks: jnp.asarray raises a bare OverflowError for 2**40 as
            value = check_argument(kernel.signature, param, value)     # an i32, makes 1e300 an f32 inf
        except ArgumentError as exc:
            raise JaxIntegrationError(str(exc)) from None
        return jnp.asarray(value, dtype=expected)
    if isinstance(value, (bool, int, float)):
        raise JaxIntegrationError(f"{what} expects a {expected} array of ndim {ndim}, got the Python "
                                  f"scalar {value!r}")
    given_dtype = getattr(value, "dtype", None)
    given_shape = getattr(value, "shape", None)
    if given_dtype is None or given_shape is None:
        raise JaxIntegrationError(f"{what} expects {expected} with ndim {ndim}, got {type(value).__name__}")
    if len(given_shape) != ndim:
        raise JaxIntegrationError(f"{what} expects ndim {ndim} ({expected}), got ndim {len(given_shape)} "
                                  f"(shape {tuple(given_shape)})")
    weak = getattr(jax.typeof(value), "weak_type", False) if isinstance(value, jax.Array) else False
    if np.dtype(given_dtype) != expected and not (weak and _same_kind(given_dtype, expected)):
        raise JaxIntegrationError(f"{what} expects dtype {expected}, got {np.dtype(given_dtype)}")
    return jnp.asarray(value, dtype=expected)


def _same_kind(given, expected) -> bool:
    return np.dtype(given).kind == np.dtype(expected).kind


def _check_x64(kernel, param) -> None:
    if param.dtype.dtype.itemsize == 8 and not jax.config.jax_enable_x64:
        raise JaxIntegrationError(f"parameter '{param.name}' of kernel '{kernel.name}' is "
                                  f"{param.dtype.dtype}; enable 64-bit types in JAX first "
                                  "(jax.config.update('jax_enable_x64', True))")


def _out_shapes(kernel, given, args, operands, grid) -> tuple[tuple[int, ...], ...]:
    outs = [p for p in kernel.signature.visible_params if p.is_array and p.type.intent == "out"]
    table = given(*args) if callable(given) else (given or {})
    if not isinstance(table, dict):
        raise JaxIntegrationError(f"out_shapes for kernel '{kernel.name}' must be a dict from Out "
                                  f"parameter name to shape, got {type(table).__name__}")
    unknown = set(table) - {p.name for p in outs}
    if unknown:
        raise JaxIntegrationError(f"out_shapes for kernel '{kernel.name}' names {sorted(unknown)}, which "
                                  f"are not Out parameters ({[p.name for p in outs]})")
    shapes = []
    for p in outs:
        if p.name in table:
            try:
                shape = _static_ints(table[p.name])
            except (TypeError, ValueError):
                raise JaxIntegrationError(f"out_shapes['{p.name}'] of kernel '{kernel.name}' must be static ints, got "
                                          f"{_short(table[p.name])}{_traced(table[p.name])}") from None
            if any(extent < 0 for extent in shape):
                raise JaxIntegrationError(f"out_shapes['{p.name}'] of kernel '{kernel.name}' must be non-negative, "
                                          f"got {shape}")
            if len(shape) != p.type.ndim:
                raise JaxIntegrationError(f"out_shapes['{p.name}'] of kernel '{kernel.name}' has rank "
                                          f"{len(shape)}, but the parameter has ndim {p.type.ndim}")
        else:
            shape = _shape_from_thread_indices(kernel, p, operands, grid)
        shapes.append(shape)
    return tuple(shapes)


def _shape_from_thread_indices(kernel, out, operands, grid) -> tuple[int, ...]:
    """The shape of Out param ``out`` when the kernel proves it: every dim d of ``out`` is indexed
    by the thread id of some grid axis (``out[i, j]``), and the inputs indexed by that same thread
    id (``x[i]``) agree on its extent; where no input is, a ``grid`` given to jax_kernel sets it.
    Anything else is not guessed: out_shapes is required."""
    signature = kernel.signature
    visible_inputs = [k for k, p in enumerate(signature.params)
                      if p in signature.visible_params and not (p.is_array and p.type.intent == "out")]
    extents = {}                      # grid axis -> the extents that input arrays give it
    for param, dim, axis in kernel.thread_indexed:
        if param in visible_inputs:
            extents.setdefault(axis, set()).add(int(operands[visible_inputs.index(param)].shape[dim]))
    index = signature.params.index(out)
    axes = {dim: axis for param, dim, axis in kernel.thread_indexed if param == index}
    shape = []
    for dim in range(out.type.ndim):
        known = extents.get(axes.get(dim), set())
        if not known and grid is not None and dim in axes:
            known = {grid[axes[dim]]}
        if len(known) != 1:
            why = ("is not indexed by a thread id there" if dim not in axes else
                   "is indexed by a thread id that indexes no input array (and no grid= was given)"
                   if not known else
                   f"is indexed by a thread id whose input arrays disagree on its extent ({sorted(known)})")
            raise JaxIntegrationError(
                f"kernel '{kernel.name}': the shape of Out parameter '{out.name}' cannot be derived (its "
                f"axis {dim} {why}); pass out_shapes={{'{out.name}': shape}} to ado.jax_kernel")
        shape.append(known.pop())
    return tuple(shape)


def _check_block_grid(kernel, grid, defaulted: bool) -> None:
    """A block kernel's grid is whole blocks. Where the grid is the default (the first output's
    shape) rather than the caller's, the error says so: a per-block output (``s[block_id()]``)
    makes a default grid the caller never wrote, and "pad the arrays" would not help there."""
    try:
        check_block_grid(kernel, grid)
    except GridError as exc:
        if not defaulted:
            raise
        raise GridError(f"{exc}. That grid is ado.jax_kernel's default, the shape of {_grid_source(kernel)}: "
                        "pass grid= (an int, a tuple, or a callable of the arguments) to ado.jax_kernel "
                        "if the kernel runs one thread per element of something else") from None


def _grid_source(kernel) -> str:
    """The array whose shape gives the default grid: the first Out array, else the first InOut."""
    params = kernel.signature.visible_params
    first = next((p for p in params if p.is_array and p.type.intent == "out"), None) or \
        next(p for p in params if p.is_array and p.type.intent == "inout")
    return f"its {'Out' if first.type.intent == 'out' else 'InOut'} array '{first.name}'"


def _traced(value) -> str:
    """Why a traced value cannot be a shape, when ``value`` holds one (else nothing)."""
    if not any(isinstance(leaf, jax.core.Tracer) for leaf in jax.tree.leaves(value)):
        return ""
    return (" (shapes are static under jit; a value computed from a traced argument is not: take it from the "
            "arguments' shapes, or make that argument static with jax.jit(..., static_argnums=...))")


def _static_ints(value) -> tuple[int, ...]:
    """``value`` (an int or a sequence of ints) as a tuple of Python ints; TypeError if it is not
    one, as for a traced value under jit (JAX's conversion errors subclass TypeError)."""
    items = value if isinstance(value, (tuple, list)) else [value] if np.ndim(value) == 0 else list(value)
    if any(isinstance(v, (bool, np.bool_)) for v in items):   # grid=True was one thread (the launcher refuses it)
        raise TypeError("a bool is not an extent")
    return tuple(operator.index(v) for v in items)      # 32.5 is refused, not cut to 32


def _short(value) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _default_grid(kernel, operands, out_shapes) -> tuple[int, ...]:
    """The shape of the first Out array (else the first InOut), cut to the grid rank, where the kernel
    proves that extent is grid axis a's: the array's dim a, or a dim of an input array of that extent, is
    indexed by the thread id of axis a (``out[i]``, ``x[i]``). Anything else is not guessed: an energy
    ``atomic_add(e, 0, x[i] ** 2)`` with ``out_shapes={"e": (1,)}`` ran one thread and summed x[0] only."""
    signature, rank = kernel.signature, kernel.signature.grid_rank
    inputs = [p for p in signature.visible_params if not (p.is_array and p.type.intent == "out")]
    outs = [p for p in signature.visible_params if p.is_array and p.type.intent == "out"]
    candidates = list(zip(outs, out_shapes)) + [(p, o.shape) for p, o in zip(inputs, operands)
                                                if p.is_array and p.type.intent == "inout"]
    if not candidates:
        raise GridError(f"kernel '{kernel.name}' has no Out or InOut array to take the grid from; "
                        "pass grid= to ado.jax_kernel")
    param, shape = candidates[0]
    if len(shape) < rank:
        raise GridError(f"kernel '{kernel.name}' has grid rank {rank} but its first output has shape "
                        f"{tuple(shape)}; pass grid= to ado.jax_kernel")
    grid = tuple(int(s) for s in shape[:rank])
    index = signature.params.index(param)
    extents = {(axis, int(operands[inputs.index(signature.params[k])].shape[dim]))
               for k, dim, axis in kernel.thread_indexed if signature.params[k] in inputs}
    unproven = [a for a in range(rank) if (index, a, a) not in kernel.thread_indexed and (a, grid[a]) not in extents]
    if unproven:
        a = unproven[0]
        raise GridError(f"kernel '{kernel.name}': the default grid, the shape of {_grid_source(kernel)}, would be "
                        f"{grid}, but the kernel does not index that array's axis {a} (nor an input's axis of "
                        f"extent {grid[a]}) with the thread id of grid axis {a}, so that extent need not be the "
                        "grid; pass grid= (an int, a tuple, or a callable of the arguments) to ado.jax_kernel")
    return grid


def _grid(kernel, given, args, operands, out_shapes) -> tuple[int, ...]:
    rank = kernel.signature.grid_rank
    if given is None:
        return _default_grid(kernel, operands, out_shapes)
    value = given(*args) if callable(given) else given
    try:
        grid = _static_ints(value)
    except (TypeError, ValueError):        # JAX's tracer conversion errors are TypeErrors too
        raise GridError(f"grid for kernel '{kernel.name}' must be static ints, got {_short(value)}"
                        f"{_traced(value)}") from None
    if len(grid) != rank:
        raise GridError(f"kernel '{kernel.name}' has grid rank {rank}, got grid {grid}")
    if any(g < 0 for g in grid):
        raise GridError(f"grid for kernel '{kernel.name}' must be non-negative, got {grid}")
    return grid
