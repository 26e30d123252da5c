"""Calls of ``ado.grad(f)``, ``ado.value_and_grad(f)`` and ``ado.jvp(f)`` inside kernels.

The front end does not differentiate: it compiles the helper ``f`` once per argument types as
a separate function (``mode="custom"``: scalars in, one float out, no status record) and emits
a call to a *placeholder declaration* whose name says what is wanted::

    declare {double, double} @adoffload.inner.value_and_grad.0.lj_pair(double, double, double)

``adoffload.enzyme.inner`` then defines each placeholder from the AD engine's derivative of
``@lj_pair`` after canonicalization (so the helper is in SSA form), before anything else reads
the kernel's IR. The helper has external linkage until then, so canonicalization keeps it.

Placeholder results: ``grad`` with an int argnums returns the partial, with a tuple a struct of
partials; ``value_and_grad`` a struct ``{value, partials...}``; ``jvp`` a struct ``{y, dy}``.
"""
from __future__ import annotations

import ast
import inspect

from llvmlite import ir

from ..language import builtins as language
from ..errors import Error, KernelTypeError
from ..language.types import ScalarType
from .context import llvm_type
from .array_derivatives import ArrayDerivativeCalls, has_arrays
from .helpers import compile_custom_helper, compile_helper
from .values import ArrayRef, Literal, PyObject, Scalar, describe

PLACEHOLDER_PREFIX = "adoffload.inner."


def placeholder_name(kind: str, positions: tuple[int, ...], helper_name: str) -> str:
    return f"{PLACEHOLDER_PREFIX}{kind}.{'_'.join(map(str, positions))}.{helper_name}"


class DerivativeCalls(ArrayDerivativeCalls):
    """Mixin of FunctionLowering: compile-time calls (``ado.grad(f)``) and derivative calls
    (those with array arguments: ``array_derivatives.py``)."""

    def compile_time_call(self, target, node: ast.Call):
        """Evaluate ``ado.grad(f, argnums=(0, 2))`` and the like while compiling."""
        args = [self.python_value(self.visit(a), target) for a in node.args]
        keywords = {k.arg: self.python_value(self.visit(k.value), target) for k in node.keywords}
        try:
            return PyObject(target(*args, **keywords))
        except Error as exc:
            raise KernelTypeError(str(exc)) from None
        except TypeError as exc:           # an unknown keyword or a missing argument
            raise KernelTypeError(f"bad call of {getattr(target, '__name__', 'this function')}(): {exc}") from None

    def python_value(self, value, target):
        if isinstance(value, PyObject):
            return value.obj
        if isinstance(value, Literal):
            return value.value
        if isinstance(value, tuple):
            return tuple(self.python_value(v, target) for v in value)
        raise KernelTypeError(f"{getattr(target, '__name__', 'this function')}() is evaluated while "
                              f"compiling, so its arguments must be compile-time values (helpers, "
                              f"constants); got {describe(value)}")

    def call_derivative(self, derivative: language.FuncDerivative, node: ast.Call):
        helper, kind = derivative.helper, derivative.kind
        what = f"ado.{kind}({helper.__name__})"
        out = None
        for keyword in node.keywords:
            if keyword.arg != "out" or kind == "jvp":
                raise KernelTypeError(f"{what} takes positional arguments only"
                                      + ("" if kind == "jvp" else " (and out= for the gradient of an array)"))
            out = self.visit(keyword.value)
        values = [self.visit(a) for a in node.args]
        expected = len(inspect.signature(helper.pyfunc).parameters)
        tangents_count = len(derivative.positions) if kind == "jvp" else 0
        n = expected
        if len(values) != expected + tangents_count:
            if kind != "jvp":
                count = str(expected)
            elif tangents_count == expected:
                count = f"{2 * expected} (x1..x{expected}, dx1..dx{expected})"
            else:
                count = f"{expected + tangents_count} ({expected} arguments, then the tangents of argnums " \
                        f"{derivative.positions})"
            raise KernelTypeError(f"{what} takes {count} argument(s), got {len(values)}")
        if has_arrays(values, out):
            return self.call_array_derivative(derivative, values, out, what)
        if getattr(derivative, "width", None) is not None:
            raise KernelTypeError(f"{what}: width={derivative.width} takes array arguments (each tangent an "
                                  f"array with a leading axis of the width); these are scalars")
        args = [self.derivative_argument(v, k, what) for k, v in enumerate(values[:n])]
        for k in derivative.positions:
            if not args[k].type.is_float:
                raise KernelTypeError(f"{what}: argument {k} is {describe(args[k])}; only float "
                                      f"arguments can be differentiated")
        tangents = [self.coerce(t, args[k].type, f"the tangent of argument {k} of {what}")
                    for k, t in zip(derivative.positions, values[n:])]
        function, result = self.compile_differentiable_helper(helper, args, what)
        return self.emit_placeholder_call(derivative, function, result, args, tangents)

    def derivative_argument(self, value, k: int, what: str) -> Scalar:
        if isinstance(value, ArrayRef) or isinstance(value, (tuple, PyObject)):
            raise KernelTypeError(f"{what}: argument {k} is {describe(value)}; derivatives of "
                                  f"helpers take scalar arguments only")
        return self.materialize(value)

    def compile_differentiable_helper(self, helper: language.Func, args: list[Scalar], what: str):
        """The helper as its own function (a custom derivative's primal when it has one)."""
        types = tuple(a.type for a in args)
        custom = helper.has_custom_derivative
        key = ("custom" if custom else "differentiable", helper.pyfunc, types, self.default_float)
        compiled = self.ctx.helpers.get(key)
        if compiled is None:
            compiled = compile_custom_helper(self, helper, args) if custom else \
                compile_helper(self, helper.pyfunc, args, mode="custom")
            self.ctx.helpers[key] = compiled
        if not isinstance(compiled.results, ScalarType) or not compiled.results.is_float:
            raise KernelTypeError(f"{what}: the helper must return one float value (it returns "
                                  f"{compiled.results!r})")
        compiled.function.linkage = ""      # kept through canonicalization until enzyme.inner runs
        return compiled.function, compiled.results

    def emit_placeholder_call(self, derivative, function, result: ScalarType, args, tangents):
        kind, positions = derivative.kind, derivative.positions
        single = kind == "grad" and not isinstance(derivative.argnums, tuple)
        partials = [args[k].type for k in positions]          # a partial has its argument's type
        fields = {"grad": partials, "value_and_grad": [result] + partials, "jvp": [result, result]}[kind]
        ret = llvm_type(fields[0]) if single else ir.LiteralStructType([llvm_type(t) for t in fields])
        arg_types = [llvm_type(a.type) for a in args] + [llvm_type(args[k].type) for k in positions][:len(tangents)]
        name = placeholder_name(kind, positions, function.name)
        declaration = self.ctx.declare(name, ret, arg_types)
        call = self.builder.call(declaration, [a.value for a in args] + tangents)
        if single:
            return Scalar(call, fields[0])
        values = [Scalar(self.builder.extract_value(call, k), t) for k, t in enumerate(fields)]
        if kind == "grad":
            return tuple(values)
        if kind == "value_and_grad":
            rest = tuple(values[1:]) if isinstance(derivative.argnums, tuple) else values[1]
            return values[0], rest
        return values[0], values[1]
