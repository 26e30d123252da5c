"""The names used inside kernels (``ado.tid``, ``ado.sqrt``, ``ado.atomic_add``, ``@ado.func``...).

The front end recognises these objects by identity: each builtin is a ``KernelBuiltin`` whose
``name`` keys the front end's lowering tables. Outside a kernel the math builtins compute on
plain numbers and numpy arrays, ``atomic_add`` updates a numpy array in place, ``zeros``
returns a numpy array, and ``tid()`` raises, so helpers stay testable in plain Python.
"""
from __future__ import annotations

import builtins
import math

import numpy as np

from ..errors import ArgumentError, Error
from .types import In, InOut, Out, ScalarType, bool_, f32, f64, i32, i64  # noqa: F401 (re-exported)

_min, _max = builtins.min, builtins.max  # the Python ones; this module defines its own min/max


class KernelBuiltin:
    """A function usable inside kernels; ``python_impl`` runs when it is called outside one."""

    def __init__(self, name: str, python_impl, doc: str):
        self.name = name
        self._python_impl = python_impl
        self.__doc__ = doc
        self.__name__ = name

    def __call__(self, *args, **kwargs):
        return self._python_impl(*args, **kwargs)

    def __repr__(self) -> str:
        return f"ado.{self.name}"


BUILTINS: dict[str, KernelBuiltin] = {}


def _builtin(name: str, doc: str):
    def register(python_impl):
        if name in BUILTINS:
            raise ValueError(f"kernel builtin {name!r} registered twice")
        BUILTINS[name] = KernelBuiltin(name, python_impl, doc)
        return BUILTINS[name]
    return register


def _tid_outside_kernel(*_args):
    raise Error("ado.tid() only has a meaning inside a kernel: it is the index of the running "
                "thread of the launch grid (call the kernel with grid=... instead)")


tid = _builtin("tid", "Thread index in the launch grid: an i64 for a 1-D grid, a tuple for 2-D/3-D.")(
    _tid_outside_kernel)


def _scalar_math(numpy_fn):
    """Math on numbers and numpy arrays outside kernels (numpy keeps float32 inputs float32)."""
    return lambda *args: numpy_fn(*args)


def _rsqrt(x):
    """1 / sqrt(x), the IEEE composition (what the host computes; GPUs use their device rsqrt)."""
    return 1 / np.sqrt(x)


def _erf(x):
    if isinstance(x, np.ndarray):
        return np.vectorize(math.erf, otypes=[x.dtype])(x)
    return type(x)(math.erf(x)) if isinstance(x, np.floating) else math.erf(x)


# name -> (numpy implementation used outside kernels, number of arguments)
MATH_FUNCTIONS = {
    "sqrt": (np.sqrt, 1), "rsqrt": (_rsqrt, 1), "exp": (np.exp, 1), "exp2": (np.exp2, 1), "log": (np.log, 1),
    "log2": (np.log2, 1), "log1p": (np.log1p, 1), "expm1": (np.expm1, 1),
    "sin": (np.sin, 1), "cos": (np.cos, 1), "tan": (np.tan, 1), "sinh": (np.sinh, 1),
    "cosh": (np.cosh, 1), "tanh": (np.tanh, 1), "asin": (np.arcsin, 1), "acos": (np.arccos, 1),
    "atan": (np.arctan, 1), "floor": (np.floor, 1), "ceil": (np.ceil, 1), "erf": (_erf, 1),
    "abs": (np.abs, 1), "atan2": (np.arctan2, 2), "pow": (np.power, 2),
    "copysign": (np.copysign, 2), "fma": (lambda a, b, c: a * b + c, 3),
}

for _name, (_impl, _arity) in MATH_FUNCTIONS.items():
    globals()[_name] = _builtin(_name, f"Math function {_name} ({_arity} argument(s)); an LLVM "
                                      f"intrinsic or libm call inside kernels.")(_scalar_math(_impl))

def _py_min(*args):
    return np.minimum.reduce(args) if any(isinstance(a, np.ndarray) for a in args) else _min(args)


def _py_max(*args):
    return np.maximum.reduce(args) if any(isinstance(a, np.ndarray) for a in args) else _max(args)


min = _builtin("min", "Minimum of two or more values (llvm.minnum for floats).")(_py_min)
max = _builtin("max", "Maximum of two or more values (llvm.maxnum for floats).")(_py_max)


def _atomic(update):
    def apply(array, index, value):
        old = array[index].copy() if isinstance(array[index], np.ndarray) else array[index]
        array[index] = update(old, value)
        return old
    return apply


atomic_add = _builtin("atomic_add", "atomic_add(array, index, value): array[index] += value "
                                    "atomically; returns the old value.")(_atomic(lambda a, b: a + b))
atomic_min = _builtin("atomic_min", "atomic_min(array, index, value): array[index] = min(...) "
                                    "atomically; returns the old value.")(_atomic(_min))
atomic_max = _builtin("atomic_max", "atomic_max(array, index, value): array[index] = max(...) "
                                    "atomically; returns the old value.")(_atomic(_max))


def _zeros(shape, dtype: ScalarType):
    return np.zeros(shape, dtype=dtype.dtype)


zeros = _builtin("zeros", "zeros(shape, dtype): a small local array of compile-time shape "
                          "(an int or a tuple of ints), zero-filled, private to the thread.")(_zeros)


class Func:
    """A helper usable inside kernels (made by ``@ado.func``); inlined into the kernels that call it.

    Called from plain Python it simply runs ``pyfunc``. ``custom_jvp`` / ``custom_vjp`` hold the
    user's derivative functions when given (see ``func``).
    """

    def __init__(self, pyfunc, custom_jvp=None, custom_vjp=None):
        self.pyfunc = pyfunc
        self.custom_jvp = custom_jvp
        self.custom_vjp = custom_vjp
        self.__name__ = getattr(pyfunc, "__name__", "helper")
        self.__doc__ = getattr(pyfunc, "__doc__", None)
        self.__wrapped__ = pyfunc

    @property
    def has_custom_derivative(self) -> bool:
        return self.custom_jvp is not None or self.custom_vjp is not None

    def defjvp(self, jvp_function):
        """Decorator form: ``@f.defjvp`` sets the custom forward derivative."""
        self.custom_jvp = _unwrap(jvp_function)
        return jvp_function

    def defvjp(self, vjp_function):
        """Decorator form: ``@f.defvjp`` sets the custom reverse derivative."""
        self.custom_vjp = _unwrap(vjp_function)
        return vjp_function

    def __call__(self, *args, **kwargs):
        return self.pyfunc(*args, **kwargs)

    def __repr__(self) -> str:
        return f"<ado.func {self.__name__}>"


def _unwrap(function):
    return function.pyfunc if isinstance(function, Func) else function


def func(pyfunc=None, *, jvp=None, vjp=None):
    """Make a kernel helper: ``@ado.func`` or ``@ado.func(jvp=f_jvp, vjp=f_vjp)``.

    Custom derivatives (scalar float arguments and results only):

    * ``jvp(x1, ..., xn, dx1, ..., dxn) -> dy`` — the tangent of the result given the
      arguments and their tangents (a tuple ``(dy1, ..., dym)`` when the helper returns a tuple).
    * ``vjp(x1, ..., xn, dy) -> (dx1, ..., dxn)`` — the cotangents of the arguments given the
      cotangent of the result (``dy1, ..., dym`` when the helper returns a tuple); a single
      value may be returned when n == 1.

    Both are written in the kernel language and compiled with the argument types of each call
    site. A helper with a custom derivative is emitted as a separate ``noinline`` function
    ``@<name>`` next to ``@<name>.adoffload.jvp`` / ``@<name>.adoffload.vjp``, so the AD engine
    calls the user's derivative instead of differentiating the body.
    """
    def make(function):
        return Func(_unwrap(function), _unwrap(jvp) if jvp is not None else None,
                    _unwrap(vjp) if vjp is not None else None)
    if pyfunc is None:
        return make
    return make(pyfunc)


# --- block-level kernels (``@ado.kernel(block=...)``; see frontend/blocks.py) ----------------

def _block_builtin_outside(name: str):
    def outside(*_args, **_kwargs):
        raise Error(f"ado.{name}() only has a meaning inside a block kernel (@ado.kernel(block=...)): "
                    f"it talks to the other threads of the running block")
    return outside


BLOCK_BUILTINS = {
    "thread_id": "Index of the running thread inside its block: an i64 (1-D) or a tuple (2-D/3-D).",
    "block_id": "Index of the running thread's block in the grid of blocks: an i64 or a tuple.",
    "block_dim": "The block shape given to @ado.kernel(block=...): an int or a tuple of ints.",
    "lane_id": "Index of the running thread inside its warp (0..warp_size-1; warps are consecutive "
               "threads of the block in row-major order).",
    "warp_size": "Threads per warp on the target: 32 on NVIDIA and the host CPU, 64 on AMD (wavefronts) and on "
                 "the host device 'cpu:wave64' (AMD's semantics, for testing).",
    "shared": "shared(shape, dtype): an array of compile-time shape shared by the threads of a block "
              "(one copy per block; uninitialized). Only at the kernel's top level, assigned to a name.",
    "sync_threads": "Barrier: every thread of the block waits here until all have arrived; shared-memory "
                    "writes before it are visible after it. Only under block-uniform control flow.",
    "warp_sum": "warp_sum(v): the sum of v over the threads of the warp; every lane receives it.",
    "warp_max": "warp_max(v): the maximum of v over the threads of the warp; every lane receives it. NaN "
                "lanes are ignored (as ado.max), NaN only if every lane is; the derivative flows through the "
                "lowest lane holding the maximum (none when every lane is NaN).",
    "shuffle": "shuffle(v, lane): the value of v held by lane ``lane`` (taken modulo warp_size) of this warp.",
    "shuffle_down": "shuffle_down(v, delta): the value of v of lane lane_id()+delta, or this lane's own "
                    "value when that lane is past the warp's end (CUDA's __shfl_down_sync).",
    "block_sum": "block_sum(v): the sum of v over the threads of the block; every thread receives it.",
    "block_max": "block_max(v): the maximum of v over the threads of the block; every thread receives it. "
                 "NaN and ties as warp_max (the lowest thread in row-major order).",
}

for _name, _doc in BLOCK_BUILTINS.items():
    globals()[_name] = _builtin(_name, _doc)(_block_builtin_outside(_name))


# --- loops unrolled by the front end ----------------------------------------------------------

MAX_STATIC_ITERATIONS = 1024

static_range = _builtin(
    "static_range",
    "static_range(stop) / (start, stop[, step]): a loop the front end unrolls (``for m in "
    "ado.static_range(8):``), its counter a compile-time constant in each copy; arguments must be "
    "compile-time integers, at most 1024 iterations. A register tile indexed by such counters stays "
    "in registers in the derivative kernels too (their loops are not reversed: there are none). "
    "Outside a kernel it is range().")(range)


# --- derivatives of helpers, callable inside kernels ----------------------------------------

class FuncDerivative:
    """``ado.grad(f)``, ``ado.value_and_grad(f)`` or ``ado.jvp(f)`` of an ``@ado.func``.

    Inside a kernel, a call lowers to the derivative of ``f``'s LLVM function, built by the AD
    engine when the kernel is compiled (``adoffload.enzyme.inner``). Conventions follow
    ``jax.grad``: ``argnums`` (default 0) picks the differentiated arguments; an int gives one
    partial, a tuple a tuple of partials. ``jvp``: ``y, dy = ado.jvp(f)(x1..xn, dx1..dxn)``.
    """

    KINDS = ("grad", "value_and_grad", "jvp")

    def __init__(self, helper: Func, kind: str, argnums=0, width: int | None = None):
        """``argnums`` of a ``jvp`` may be None: every argument gets a tangent. ``width`` (jvp only):
        K tangents at once, each tangent array with a leading axis of K (None: one tangent, no axis)."""
        if not isinstance(helper, Func):
            raise ArgumentError(f"ado.{kind} inside kernels differentiates an @ado.func helper; got "
                        f"{type(helper).__name__} {helper!r} (for a kernel use ado.vjp / ado.jvp "
                        f"with the names of its parameters)")
        self.helper, self.kind = helper, kind
        self.argnums = _check_argnums(helper, kind, argnums)
        if width is not None and (isinstance(width, bool) or not isinstance(width, int) or width < 1
                                  or kind != "jvp"):
            raise ArgumentError(f"ado.{kind}({helper.__name__}): width must be a positive int"
                                + (" (jvp only)" if kind != "jvp" else "") + f", got {width!r}")
        self.width = width

    @property
    def positions(self) -> tuple[int, ...]:
        """The differentiated argument positions, always as a tuple."""
        return self.argnums if isinstance(self.argnums, tuple) else (self.argnums,)

    def __call__(self, *args, **kwargs):
        raise ArgumentError(f"ado.{self.kind}({self.helper.__name__}) runs inside kernels only (its "
                    f"derivative is built from the compiled helper); outside, use jax.{self.kind} "
                    f"on a JAX version of the function")

    def __repr__(self) -> str:
        extra = f", width={self.width}" if self.width is not None else ""
        return f"ado.{self.kind}({self.helper.__name__}, argnums={self.argnums}{extra})"


def _check_argnums(helper: Func, kind: str, argnums):
    import inspect
    n = len(inspect.signature(helper.pyfunc).parameters)
    if kind == "jvp" and argnums is None:
        return tuple(range(n))
    many = isinstance(argnums, (tuple, list))
    values = tuple(argnums) if many else (argnums,)
    if not values or not all(isinstance(a, int) and not isinstance(a, bool) for a in values):
        raise ArgumentError(f"ado.{kind}({helper.__name__}): argnums must be an int or a non-empty tuple "
                    f"of ints, got {argnums!r}")
    normal = tuple(a + n if a < 0 else a for a in values)
    if any(not 0 <= a < n for a in normal):
        raise ArgumentError(f"ado.{kind}({helper.__name__}): argnums {argnums!r} out of range for a "
                    f"helper of {n} parameter(s)")
    if len(set(normal)) != len(normal):
        raise ArgumentError(f"ado.{kind}({helper.__name__}): argnums {argnums!r} repeats an argument")
    return normal if many else normal[0]


def grad(helper, argnums=0) -> FuncDerivative:
    """``ado.grad(f, argnums=0)``: the partial(s) of a scalar float helper, inside kernels."""
    return FuncDerivative(helper, "grad", argnums)


def value_and_grad(helper, argnums=0) -> FuncDerivative:
    """``ado.value_and_grad(f, argnums=0)``: ``(f(...), partials)`` inside kernels, in one call."""
    return FuncDerivative(helper, "value_and_grad", argnums)


def helper_jvp(helper, argnums=None, width: int | None = None) -> FuncDerivative:
    """``ado.jvp(f)`` of a helper: ``y, dy = ado.jvp(f)(x1..xn, dx1..dxn)`` inside kernels;
    ``ado.jvp(f, argnums=(0, 3))`` takes tangents of those arguments only, in argnums order;
    ``width=K`` (array arguments, a helper returning nothing): K tangents in one call, each tangent
    array of shape ``(K, *argument shape)``, lane ``l`` in row ``l``."""
    return FuncDerivative(helper, "jvp", argnums, width)


# Called during kernel compilation with Python values (the front end evaluates them).
grad.__ado_compile_time__ = True
value_and_grad.__ado_compile_time__ = True
