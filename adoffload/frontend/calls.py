"""Calls inside kernels: builtins of ``adoffload.language``, casts, Python builtins, helpers.

Math functions lower to LLVM intrinsics where LLVM has one and to libm names otherwise
(``MATH_LOWERING``); integer ``abs``/``min``/``max`` are selects. Integer arguments to float
math functions are converted to the default float first.
"""
from __future__ import annotations

import ast
import builtins

import numpy as np
from llvmlite import ir

from ..language import builtins as language
from ..errors import KernelTypeError, UnsupportedConstructError
from ..language.types import ScalarType, bool_
from . import typing_rules as rules
from .context import llvm_type
from .values import ArrayRef, Literal, PyObject, Scalar, describe

# kernel math name -> ("intrinsic" | "libm", LLVM intrinsic stem or libm double-precision name)
MATH_LOWERING = {
    "sqrt": ("intrinsic", "sqrt"), "exp": ("intrinsic", "exp"), "exp2": ("intrinsic", "exp2"),
    "log": ("intrinsic", "log"), "log2": ("intrinsic", "log2"), "sin": ("intrinsic", "sin"),
    "cos": ("intrinsic", "cos"), "tan": ("intrinsic", "tan"), "sinh": ("intrinsic", "sinh"),
    "cosh": ("intrinsic", "cosh"), "tanh": ("intrinsic", "tanh"), "asin": ("intrinsic", "asin"),
    "acos": ("intrinsic", "acos"), "atan": ("intrinsic", "atan"), "floor": ("intrinsic", "floor"),
    "ceil": ("intrinsic", "ceil"), "abs": ("intrinsic", "fabs"), "atan2": ("intrinsic", "atan2"),
    "pow": ("intrinsic", "pow"), "copysign": ("intrinsic", "copysign"), "fma": ("intrinsic", "fma"),
    "min": ("intrinsic", "minnum"), "max": ("intrinsic", "maxnum"),
    "erf": ("libm", "erf"), "log1p": ("libm", "log1p"), "expm1": ("libm", "expm1"),
    # no libm has rsqrt: the host defines it as 1/sqrt (codegen/host/program.py), GPUs call their device rsqrt
    "rsqrt": ("libm", "rsqrt"),
}
ATOMIC_OPS = {"atomic_add": ("add", "fadd"), "atomic_min": ("min", "fmin"),
              "atomic_max": ("max", "fmax")}


class CallLowering:
    """Mixin of FunctionLowering for ``visit_Call``."""

    def visit_Call(self, node: ast.Call):
        callee = self.visit(node.func)
        if not isinstance(callee, PyObject):
            raise KernelTypeError(f"{describe(callee)} is not callable")
        target = callee.obj
        if isinstance(target, language.Func):
            return self.call_helper(target, node)
        if isinstance(target, language.FuncDerivative):
            return self.call_derivative(target, node)
        if _hashable(target) and getattr(target, "__ado_compile_time__", False):
            return self.compile_time_call(target, node)
        if isinstance(target, language.KernelBuiltin):
            return self.call_builtin(target.name, node)
        if isinstance(target, ScalarType):
            return self.cast(self.single_argument(node, target.name), target)
        python_builtin = PYTHON_BUILTINS.get(target) if _hashable(target) else None
        if python_builtin is not None:
            return python_builtin(self, node)
        name = getattr(target, "__name__", repr(target))
        kernel_name = _kernel_math_name(target)
        if kernel_name is not None:
            raise UnsupportedConstructError(
                f"{getattr(target, '__module__', None) or 'numpy'}.{name} cannot run inside a kernel; use "
                f"ado.{kernel_name}(...) (numpy and math functions are Python code; ado.{kernel_name} compiles "
                f"to the device's own math)")
        module = getattr(target, "__module__", None) or ""
        if isinstance(target, np.ufunc) or module == "math" or module.startswith("numpy"):
            raise UnsupportedConstructError(
                f"{module or 'numpy'}.{name} cannot run inside a kernel and the kernel language has no version "
                f"of it (its math: {', '.join('ado.' + m for m in sorted(language.MATH_FUNCTIONS))})")
        raise UnsupportedConstructError(f"cannot call Python function '{name}' inside a kernel; "
                                        f"decorate it with @ado.func to make it a helper")

    def positional(self, node: ast.Call, name: str) -> list:
        if node.keywords:
            raise KernelTypeError(f"{name}() takes no keyword arguments here")
        return [self.visit(a) for a in node.args]

    def single_argument(self, node: ast.Call, name: str):
        args = self.positional(node, name)
        if len(args) != 1:
            raise KernelTypeError(f"{name}() takes exactly one argument ({len(args)} given)")
        return args[0]

    def cast(self, value, target: ScalarType):
        value = self.scalar(value, f"argument of {target!r}()")
        if isinstance(value, Literal):
            python_type = {"bool": bool, "int": int, "float": float}[rules.kind(target)]
            folded = python_type(value.value)
            if target in rules.INT_LIMITS and not rules.fits(folded, target):
                raise KernelTypeError(f"constant {folded} does not fit in {target!r}")
            return Scalar(self.constant(folded, target), target)
        return self.convert(value, target)

    # --- adoffload.language builtins -------------------------------------------------------

    def call_builtin(self, name: str, node: ast.Call):
        if name == "tid":
            return self.thread_index(node)
        if name in ATOMIC_OPS:
            return self.atomic(name, node)
        if name == "zeros":
            return self.local_zeros(node)
        if name in language.BLOCK_BUILTINS:
            return self.block_builtin(name, node)
        return self.math(name, self.positional(node, name))

    def block_builtin(self, name: str, node: ast.Call):
        raise UnsupportedConstructError(f"ado.{name}() can only be used in a block kernel itself, not in a "
                                        f"helper (see frontend/blocks.py)")

    def thread_index(self, node):
        raise UnsupportedConstructError("ado.tid() can only be used in the kernel itself, not in "
                                        "a helper (pass the index as an argument)")

    def math(self, name: str, args: list):
        arity = language.MATH_FUNCTIONS.get(name, (None, None))[1]
        if name in ("min", "max"):
            if len(args) < 2:
                raise KernelTypeError(f"{name}() needs at least two arguments")
            result = args[0]
            for arg in args[1:]:
                result = self.min_max(name, result, arg)
            return result
        if len(args) != arity:
            raise KernelTypeError(f"ado.{name}() takes {arity} argument(s) ({len(args)} given)")
        args = [self.scalar(a, f"argument of ado.{name}()") for a in args]
        if name == "pow":
            return self.power(args[0], args[1])
        if name == "abs" and self.all_int(args):
            return self.integer_abs(args[0])
        t = self.math_type(args, name)
        values = [self.materialize(a, t).value for a in args]
        how, stem = MATH_LOWERING[name]
        if how == "intrinsic":
            return Scalar(self.call_intrinsic(stem, values, t), t)
        libm_name = stem + ("f" if t.bits == 32 else "")
        lt = llvm_type(t)
        fn = self.ctx.declare(libm_name, lt, [lt] * len(values))
        return Scalar(self.builder.call(fn, values), t)

    def all_int(self, args) -> bool:
        kinds = [rules.literal_kind(a.value) if isinstance(a, Literal) else rules.kind(a.type)
                 for a in args]
        return all(k == "int" for k in kinds)

    def math_type(self, args, name: str) -> ScalarType:
        """Common float type of math arguments (ints become the default float)."""
        types = [a.type for a in args if isinstance(a, Scalar)]
        if bool_ in types:
            raise KernelTypeError(f"ado.{name}() does not take a bool")
        floats = [t for t in types if t.is_float]
        if not floats:
            return self.default_float
        result = floats[0]
        for t in floats[1:]:
            result = rules.promote(result, t)
        return result

    def integer_abs(self, value):
        if isinstance(value, Literal):
            return Literal(abs(value.value))
        b = self.builder
        negative = b.icmp_signed("<", value.value, ir.Constant(value.value.type, 0))
        return Scalar(b.select(negative, b.neg(value.value), value.value), value.type)

    def min_max(self, name: str, a, b):
        a, b = self.scalar(a, f"argument of {name}()"), self.scalar(b, f"argument of {name}()")
        if isinstance(a, Literal) and isinstance(b, Literal):
            return Literal(builtins.min(a.value, b.value) if name == "min" else builtins.max(a.value, b.value))
        a, b = self.unify(a, b, name)
        if a.type.is_float:
            return Scalar(self.call_intrinsic("minnum" if name == "min" else "maxnum",
                                              [a.value, b.value], a.type), a.type)
        pick_a = self.builder.icmp_signed("<" if name == "min" else ">", a.value, b.value)
        return Scalar(self.builder.select(pick_a, a.value, b.value), a.type)

    def python_min_max(self, name: str, args: list):
        """Python's ``min``/``max``: the first argument that no later one beats by ``<`` (``>``), so
        ``min(nan, 1.0)`` is nan but ``min(1.0, nan)`` is 1.0, and ``min(0.0, -0.0)`` is 0.0
        (``ado.min``/``ado.max`` are llvm.minnum/maxnum: NaN ignored)."""
        if len(args) < 2:
            raise KernelTypeError(f"{name}() needs at least two arguments in kernels (no iterables)")
        result = self.scalar(args[0], f"argument of {name}()")
        for arg in args[1:]:
            arg = self.scalar(arg, f"argument of {name}()")
            if isinstance(result, Literal) and isinstance(arg, Literal):
                result = Literal(builtins.min(result.value, arg.value) if name == "min" else
                                 builtins.max(result.value, arg.value))
                continue
            current, candidate = self.unify(result, arg, name)
            if current.type.is_float:
                beats = self.builder.fcmp_ordered("<" if name == "min" else ">", candidate.value, current.value)
            else:
                beats = self.builder.icmp_signed("<" if name == "min" else ">", candidate.value, current.value)
            result = Scalar(self.builder.select(beats, candidate.value, current.value), current.type)
        return result

    def python_divmod(self, args: list):
        if len(args) != 2:
            raise KernelTypeError(f"divmod() takes exactly two arguments ({len(args)} given)")
        a, b = (self.scalar(v, "argument of divmod()") for v in args)
        if isinstance(a, Literal) and isinstance(b, Literal):
            return self.fold(ast.FloorDiv, a, b, "//"), self.fold(ast.Mod, a, b, "%")
        a, b = self.unify(a, b, "divmod")
        if a.type.is_float:
            return self.float_divmod(a, b)
        return self.floor_divide(a, b), self.modulo(a, b)

    def python_round(self, args: list):
        """``round(x)``: the nearest int, ties to even (Python's rounding), an i64; NaN and infinities
        stop the thread as ``int()`` does. ``round(x, ndigits)`` (decimal rounding) is refused."""
        if len(args) != 1:
            raise UnsupportedConstructError("round() with ndigits is not supported in kernels (Python rounds "
                                            "the decimal value; no device instruction does); round(x) is")
        x = self.scalar(args[0], "argument of round()")
        if isinstance(x, Literal):
            return Literal(builtins.round(x.value))
        if not x.type.is_float:
            if x.type == bool_:
                raise KernelTypeError("round() of a bool; cast with int(...) first")
            return x
        bld, t = self.builder, x.type
        lt = llvm_type(t)
        down = self.call_intrinsic("floor", [x.value], t)
        fraction = bld.fsub(x.value, down)                       # exact: down is within 1 of x
        half = ir.Constant(lt, 0.5)
        odd = bld.fcmp_ordered("!=", bld.frem(down, ir.Constant(lt, 2.0)), ir.Constant(lt, 0.0))
        up = bld.or_(bld.fcmp_ordered(">", fraction, half),
                     bld.and_(bld.fcmp_ordered("==", fraction, half), odd))
        nearest = bld.select(up, bld.fadd(down, ir.Constant(lt, 1.0)), down)
        return self.convert(Scalar(nearest, t), rules.i64)

    def python_pow(self, args: list):
        if len(args) != 2:
            raise UnsupportedConstructError("pow() takes two arguments in kernels (no modulus)")
        return self.binary(ast.Pow, args[0], args[1])

    def atomic(self, name: str, node: ast.Call):
        args = self.positional(node, f"ado.{name}")
        if len(args) != 3:
            raise KernelTypeError(f"ado.{name}(array, index, value) takes 3 arguments")
        array, index, value = args
        if not isinstance(array, ArrayRef):
            raise KernelTypeError(f"the first argument of ado.{name}() must be an array, got "
                                  f"{describe(array)}")
        if not array.type.writes:
            raise KernelTypeError(f"array '{array.name}' is an input ({array.type!r}) and cannot "
                                  f"be updated atomically; declare it ado.Out or ado.InOut")
        dtype = array.type.dtype
        if dtype == bool_:
            raise KernelTypeError(f"ado.{name}() does not work on bool arrays")
        stored = self.coerce(value, dtype, f"ado.{name}() on '{array.name}'")
        address = self.address_of(array, self.index_list(array, index))
        self.ctx.accessed(array, load=True, store=True)
        operation = ATOMIC_OPS[name][1 if dtype.is_float else 0]
        return Scalar(self.builder.atomic_rmw(operation, address, stored, "monotonic"), dtype)

    def local_zeros(self, node: ast.Call):
        args = self.positional(node, "ado.zeros")
        if len(args) != 2:
            raise KernelTypeError("ado.zeros(shape, dtype) takes 2 arguments")
        shape, dtype = args
        shape = shape if isinstance(shape, tuple) else (shape,)
        if not all(isinstance(e, Literal) and rules.literal_kind(e.value) == "int" and e.value > 0
                   for e in shape) or not 1 <= len(shape) <= 3:
            raise KernelTypeError("ado.zeros() needs a compile-time shape: a positive int or a "
                                  "tuple of 1 to 3 positive ints")
        if not (isinstance(dtype, PyObject) and isinstance(dtype.obj, ScalarType)):
            raise KernelTypeError(f"ado.zeros() dtype must be an ado scalar type, got {describe(dtype)}")
        return self.new_local_array(tuple(e.value for e in shape), dtype.obj)


def _hashable(obj) -> bool:
    try:
        hash(obj)
    except TypeError:
        return False
    return True


def _len(lowering, node):
    array = lowering.single_argument(node, "len")
    if isinstance(array, ArrayRef):
        return Scalar(array.shape[0], rules.i64)
    if isinstance(array, tuple):
        return Literal(len(array))
    raise KernelTypeError(f"len() needs an array, got {describe(array)}")


def _python_cast(kind):
    def lower(lowering, node):
        target = {"int": rules.i64, "bool": bool_}.get(kind, lowering.default_float)
        if kind == "float" and len(node.args) == 1 and isinstance(node.args[0], ast.Constant) \
                and isinstance(node.args[0].value, str) and not node.keywords:
            try:                                  # float("inf"), float("-inf"), float("nan")
                return Literal(float(node.args[0].value))
            except ValueError:
                raise KernelTypeError(f"could not convert string to float: {node.args[0].value!r}") from None
        return lowering.cast(lowering.single_argument(node, kind), target)
    return lower


def _python_math(name):
    def lower(lowering, node):
        args = lowering.positional(node, name)
        return lowering.math(name, args)
    return lower


def _python_builtin(method, *bound):
    def lower(lowering, node):
        return getattr(lowering, method)(*bound, lowering.positional(node, node.func.id
                                                                     if isinstance(node.func, ast.Name) else method))
    return lower


PYTHON_BUILTINS = {
    builtins.len: _len, builtins.int: _python_cast("int"), builtins.float: _python_cast("float"),
    builtins.bool: _python_cast("bool"), builtins.abs: _python_math("abs"),
    builtins.min: _python_builtin("python_min_max", "min"), builtins.max: _python_builtin("python_min_max", "max"),
    builtins.divmod: _python_builtin("python_divmod"), builtins.round: _python_builtin("python_round"),
    builtins.pow: _python_builtin("python_pow"),
}


# numpy / math names whose ado spelling differs (np.arcsin is ado.asin); the rest keep their name.
_NUMPY_SPELLINGS = {"arcsin": "asin", "arccos": "acos", "arctan": "atan", "arctan2": "atan2",
                    "power": "pow", "fabs": "abs", "absolute": "abs", "minimum": "min", "maximum": "max",
                    "fmin": "min", "fmax": "max"}


def _kernel_math_name(target) -> str | None:
    """The ado math function a numpy ufunc or a ``math`` function stands for, if any."""
    module = getattr(target, "__module__", None)
    is_numpy = isinstance(target, np.ufunc) or (module or "").startswith("numpy")
    if not (is_numpy or module == "math"):
        return None
    name = getattr(target, "__name__", "")
    name = _NUMPY_SPELLINGS.get(name, name)
    return name if name in language.MATH_FUNCTIONS or name in ("min", "max") else None
