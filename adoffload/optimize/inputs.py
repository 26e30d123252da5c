"""The arguments of ``minimize`` / ``least_squares``: checked, and described for the generated kernel.

Each of ``args`` is, for the problem ``i``:

* a Python or numpy scalar: the same value for every problem (a scalar kernel parameter);
* an array of shape ``(batch,)``: the scalar ``a[i]``;
* an array of shape ``(batch, k)`` or ``(batch, k, l)``: the problem's own array ``a[i]``;
* ``adoffload.optimize.shared(a)``: the array ``a`` (1 to 3 dimensions), the same for every problem.

A float array (float64 or float32) is passed in ``x0``'s dtype, as a float scalar is.

The kernel copies each array into a local array of the thread (so the helper sees an array of a
compile-time shape whatever the batch) before the iteration starts; ``least_squares`` passes a shared
array as the kernel parameter itself (generate._binding: forward mode needs no constant trip counts).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import ArgumentError, ShapeError
from ..language.builtins import Func

DTYPES = {np.dtype(np.float64): "ado.f64", np.dtype(np.float32): "ado.f32", np.dtype(np.int64): "ado.i64",
          np.dtype(np.int32): "ado.i32"}


class NonFiniteStartError(ShapeError):
    """A start ``x0`` holds NaN or infinity (ValueError, as scipy's)."""


@dataclass(frozen=True)
class Shared:
    """An array the same for every problem (``adoffload.optimize.shared``)."""
    array: object


def shared(array) -> Shared:
    """Mark ``array`` (1 to 3 dimensions) as one array that every problem's function receives."""
    if isinstance(array, Shared):
        return array
    return Shared(array)


@dataclass(frozen=True)
class ArgSpec:
    """How one argument reaches the user's function: ``kind`` is scalar | batch_scalar | batch_array |
    shared_array; ``dtype`` an ado type name; ``shape`` the per-problem shape of an array."""
    kind: str
    dtype: str
    shape: tuple = ()


def int_type(use_jax: bool) -> str:
    """The type of the kernels' visible integers (maxiter, int scalar args, the status and count
    outputs): int32 under JAX without its x64 mode (which has no int64 arrays; float32 problems run
    there), else int64."""
    if use_jax:
        import jax
        if not jax.config.jax_enable_x64:
            return "ado.i32"
    return "ado.i64"


def check_function(fun, what: str, name: str) -> None:
    if not isinstance(fun, Func):
        raise ArgumentError(f"{what}: {name} must be an @ado.func helper (written in the kernel language, "
                            f"so that it runs inside the optimizer's kernel and is differentiated there); got "
                            f"{type(fun).__name__} {getattr(fun, '__name__', fun)!r}")
    if fun.has_custom_derivative:
        raise ArgumentError(f"{what}: {name} '{fun.__name__}' has a custom derivative, which takes scalars only; "
                            f"it cannot take the parameter vector")


def is_jax(value) -> bool:
    return type(value).__module__.startswith(("jax", "jaxlib"))


def check_start(x0, what: str, values: bool = True):
    """(batch, n, numpy dtype) of the starts; refuses anything but a finite (batch, n) float array.
    ``values=False``: ``x0`` only describes the starts (shape and dtype, a ``jax.ShapeDtypeStruct``)."""
    if not is_jax(x0):                  # a list, or an array-like whose dtype only numpy's conversion tells
        try:
            x0 = np.asarray(x0)
        except (TypeError, ValueError) as exc:
            raise ShapeError(f"{what}: x0 must be an array of shape (batch, n), got {type(x0).__name__} "
                             f"({exc})") from None
    shape = x0.shape
    dtype = np.dtype(x0.dtype)
    if len(shape) != 2 or shape[1] < 1:
        one = "; for one problem pass x0[None, :] (a batch of 1)" if len(shape) == 1 and shape[0] else ""
        raise ShapeError(f"{what}: x0 must have shape (batch, n), one start of n parameters per problem "
                         f"(n >= 1); got shape {tuple(shape)}{one}")
    if dtype not in (np.dtype(np.float64), np.dtype(np.float32)):
        raise ArgumentError(f"{what}: x0 must be float64 or float32, got {dtype}")
    if values and (not is_jax(x0) or not is_traced(x0)):
        bad = ~np.isfinite(np.asarray(x0))
        if bad.any():
            rows = np.flatnonzero(bad.any(axis=1))
            raise NonFiniteStartError(f"{what}: x0 holds NaN or infinity in {len(rows)} problem(s), the first "
                                      f"at row {rows[0]}: {np.asarray(x0)[rows[0]].tolist()}")
    return int(shape[0]), int(shape[1]), dtype


def start_array(x0, use_jax: bool):
    """``x0`` as the kernel takes it (after ``check_start``): a JAX array as it is; anything else a
    C-contiguous numpy array (a list, a Fortran-ordered array or a strided view of one)."""
    return x0 if use_jax else np.ascontiguousarray(x0)


def is_traced(value) -> bool:
    """Whether a JAX value (``is_jax``) is a tracer: inside ``jit``, no values to read."""
    import jax
    return isinstance(value, jax.core.Tracer)


def prepare(args, batch: int, x_dtype: np.dtype, what: str, use_jax: bool):
    """(specs, values): one ArgSpec per argument, and what the kernel gets for it (arrays C-contiguous)."""
    if not isinstance(args, (tuple, list)):
        args = (args,)
    specs, values = [], []
    for k, a in enumerate(args):
        spec, value = _prepare_one(a, k, batch, x_dtype, what, use_jax)
        specs.append(spec)
        values.append(value)
    return tuple(specs), values


def _prepare_one(a, k: int, batch: int, x_dtype, what: str, use_jax: bool):
    name = f"{what}: args[{k}]"
    if isinstance(a, Shared):
        array = _as_array(a.array, name, use_jax)
        if not 1 <= array.ndim <= 3:
            raise ShapeError(f"{name}: a shared array has 1 to 3 dimensions, got shape {tuple(array.shape)}")
        _nonempty(array.shape, name)
        array = _float_as(array, x_dtype)
        return ArgSpec("shared_array", _dtype(array, name), tuple(int(e) for e in array.shape)), array
    if isinstance(a, (bool, np.bool_)):
        raise ArgumentError(f"{name} is a bool; pass 0 or 1 (an int) or a float")
    if isinstance(a, (int, np.integer)):
        return ArgSpec("scalar", int_type(use_jax)), int(a)
    if isinstance(a, (float, np.floating)):
        return ArgSpec("scalar", DTYPES[np.dtype(x_dtype)]), float(a)
    if isinstance(a, (str, bytes, complex, np.complexfloating)):
        raise ArgumentError(f"{name} is {type(a).__name__} {a!r}; an argument is an int or float scalar or an "
                            f"array of float64, float32, int64 or int32")
    array = _as_array(a, name, use_jax)
    if array.ndim == 0:
        traced = " (a traced value under jax.jit: pass jnp.full((batch,), value), one per problem)" \
            if is_jax(array) else ""
        raise ArgumentError(f"{name} is a 0-d array; pass a Python scalar (shared by all problems) or an array "
                            f"with the batch as its leading axis{traced}")
    if array.shape[0] != batch:
        raise ShapeError(f"{name} has shape {tuple(array.shape)}, but its leading axis must be the batch "
                         f"({batch} problems, one slice each); wrap an array that every problem shares in "
                         f"adoffload.optimize.shared(...)")
    if array.ndim > 3:
        raise ShapeError(f"{name}: a per-problem array has at most 2 dimensions after the batch, got shape "
                         f"{tuple(array.shape)}")
    _nonempty(array.shape[1:], name)
    array = _float_as(array, x_dtype)
    dtype = _dtype(array, name)
    if array.ndim == 1:
        return ArgSpec("batch_scalar", dtype), array
    return ArgSpec("batch_array", dtype, tuple(int(e) for e in array.shape[1:])), array


def _as_array(a, name: str, use_jax: bool):
    if is_jax(a):
        if not use_jax:
            raise ArgumentError(f"{name} is a JAX array but x0 is not; pass x0 as a JAX array too (the call then "
                                f"runs through JAX) or every argument as numpy")
        return a
    if not isinstance(a, np.ndarray):
        try:
            a = np.asarray(a)
        except (TypeError, ValueError) as exc:
            raise ArgumentError(f"{name} is {type(a).__name__}, not an array or a scalar ({exc})") from None
    if a.dtype == object:
        raise ArgumentError(f"{name} is not a numeric array (dtype object)")
    return np.ascontiguousarray(a) if not use_jax and a.ndim else a


def copied_bytes(specs: tuple[ArgSpec, ...], shared_direct: bool = False) -> int:
    """Bytes of the problem's arrays the kernel copies into each thread's local memory (generate._binding;
    ``shared_direct``: least_squares, whose shared arrays are not copied)."""
    total = 0
    for spec in specs:
        if spec.kind == "batch_array" or (spec.kind == "shared_array" and not shared_direct):
            total += int(np.prod(spec.shape)) * (8 if spec.dtype in ("ado.f64", "ado.i64") else 4)
    return total


def _nonempty(shape, name: str) -> None:
    """The function receives an array of this shape (a local array of compile-time extents >= 1)."""
    if 0 in tuple(shape):
        raise ShapeError(f"{name}: the function would receive an empty array (shape {tuple(int(e) for e in shape)}); "
                         f"leave the argument out, or give each axis at least one element")


def _float_as(array, x_dtype):
    """A float64 or float32 array in ``x0``'s dtype (the kernel computes in it, as a float scalar is
    passed in it); other dtypes as they are (``_dtype`` checks them)."""
    dtype = np.dtype(array.dtype)
    if dtype not in (np.dtype(np.float64), np.dtype(np.float32)) or dtype == np.dtype(x_dtype):
        return array
    if isinstance(array, np.ndarray):
        return np.ascontiguousarray(array, dtype=x_dtype)
    if hasattr(array, "astype"):
        return array.astype(x_dtype)
    import jax                                   # a jax.ShapeDtypeStruct (compile_ahead)
    return jax.ShapeDtypeStruct(array.shape, np.dtype(x_dtype))


def _dtype(array, name: str) -> str:
    dtype = np.dtype(array.dtype)
    if dtype not in DTYPES:
        raise ArgumentError(f"{name} has dtype {dtype}; arrays passed to the function are float64, float32, "
                            f"int64 or int32")
    return DTYPES[dtype]
