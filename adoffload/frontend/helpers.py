"""Helpers (``@ado.func``): specialised per argument types, emitted as separate LLVM functions.

An ordinary helper becomes ``define internal <ret> @<name>(<flat args>, ptr %status,
ptr %failed) alwaysinline``: scalars by value, arrays as data pointer + shapes (the array's
kernel parameter index is part of the specialisation, so a bounds failure inside the helper
records the right parameter). After a failure the helper stores ``true`` to ``*failed`` and
returns; the caller then aborts too. Canonicalization inlines it and folds the flag away.
The result is a scalar, a literal struct for a returned tuple, or void.

A helper with a custom derivative (``@ado.func(jvp=..., vjp=...)``) takes and returns scalar
floats only and becomes ``define internal <ret> @<name>(x1..xn) noinline``, plus
``@<name>.adoffload.jvp(x1..xn, dx1..dxn) -> dy`` (a struct for tuple results) and
``@<name>.adoffload.vjp(x1..xn, dy1..dym) -> {dx1..dxn}`` (always a literal struct of the
argument types). The jvp/vjp functions have external linkage (nothing calls them until the AD
engine does, and global DCE in canonicalization would drop internal ones); their names are
unique within the module. None of the three has a status record: a failed bounds check (on a
local array) inside them calls ``llvm.trap``.
"""
from __future__ import annotations

import ast
import inspect

from llvmlite import ir

from ..errors import KernelTypeError, UnsupportedConstructError
from .context import I1, llvm_type
from .source import parse_function
from .values import ArrayRef, Literal, PyObject, Scalar, describe

PTR = ir.PointerType()


class CompiledHelper:
    def __init__(self, function: ir.Function, results, struct_return: bool, may_fail: bool):
        self.function = function
        self.results = results              # None | ScalarType | tuple[ScalarType, ...]
        self.struct_return = struct_return
        self.may_fail = may_fail


class HelperCalls:
    """Mixin of FunctionLowering: calling ``@ado.func`` helpers."""

    def call_helper(self, helper, node: ast.Call):
        args = self.bind_helper_arguments(helper, node)
        if helper.has_custom_derivative:
            return self.call_custom_helper(helper, args)
        key = (helper.pyfunc, tuple(argument_key(a) for a in args), self.default_float)
        compiled = self.ctx.helpers.get(key)
        if compiled is None:
            if key in self.ctx.helpers_in_progress:
                raise UnsupportedConstructError(f"helper '{helper.__name__}' calls itself; "
                                                f"recursion is not supported in kernels")
            self.ctx.helpers_in_progress.add(key)
            try:
                compiled = compile_helper(self, helper.pyfunc, args, mode="inline")
            finally:
                self.ctx.helpers_in_progress.discard(key)
            self.ctx.helpers[key] = compiled
        flat = []
        for a in args:
            if isinstance(a, ArrayRef):
                flat.append(a.pointer)
                flat.extend(a.shape)
            elif isinstance(a, Scalar):
                flat.append(a.value)
        status = self.status if self.status is not None else ir.Constant(PTR, None)
        failed = self.alloca_builder.alloca(I1, name="helper.failed")
        self.builder.store(ir.Constant(I1, 0), failed)
        result = self.builder.call(compiled.function, flat + [status, failed])
        if compiled.may_fail:
            ok = self.builder.not_(self.builder.load(failed))
            self.guard(ok, lambda: None)
        return self.helper_result(result, compiled)

    def helper_result(self, result, compiled: CompiledHelper):
        if compiled.results is None:
            return PyObject(None)
        if isinstance(compiled.results, tuple):
            return tuple(Scalar(self.builder.extract_value(result, k), t)
                         for k, t in enumerate(compiled.results))
        return Scalar(result, compiled.results)

    def bind_helper_arguments(self, helper, node: ast.Call) -> list:
        """Positional, keyword and default arguments, as kernel values in parameter order."""
        positional = [self.visit(a) for a in node.args]
        keywords = {k.arg: self.visit(k.value) for k in node.keywords if k.arg is not None}
        if any(k.arg is None for k in node.keywords):
            raise UnsupportedConstructError("'**kwargs' in helper calls is not supported")
        try:
            bound = inspect.signature(helper.pyfunc).bind(*positional, **keywords)
        except TypeError as exc:
            raise KernelTypeError(f"bad call of helper '{helper.__name__}': {exc}") from None
        bound.apply_defaults()
        args = []
        for name, value in bound.arguments.items():
            if isinstance(value, (Literal, Scalar, ArrayRef, PyObject)):
                args.append(self.materialize(value) if isinstance(value, Literal) else value)
            elif isinstance(value, (bool, int, float)):         # a Python default value
                args.append(self.materialize(Literal(value)))
            elif isinstance(value, tuple):
                raise KernelTypeError(f"helper '{helper.__name__}' argument '{name}': tuples "
                                      f"cannot be passed to helpers; pass the elements")
            else:
                args.append(PyObject(value))
        return args

    def call_custom_helper(self, helper, args):
        for a in args:
            if not (isinstance(a, Scalar) and a.type.is_float):
                raise KernelTypeError(f"helper '{helper.__name__}' has a custom derivative, so "
                                      f"its arguments must be float scalars; got {describe(a)}")
        types = tuple(a.type for a in args)
        key = ("custom", helper.pyfunc, types, self.default_float)
        compiled = self.ctx.helpers.get(key)
        if compiled is None:
            compiled = compile_custom_helper(self, helper, args)
            self.ctx.helpers[key] = compiled
        result = self.builder.call(compiled.function, [a.value for a in args])
        return self.helper_result(result, compiled)


def argument_key(value):
    if isinstance(value, Scalar):
        return ("scalar", value.type)
    if isinstance(value, ArrayRef):
        return ("array", value.type, value.param_index)
    return ("object", id(value.obj))


def helper_source(ctx, pyfunc):
    cache = ctx.__dict__.setdefault("sources", {})
    if pyfunc not in cache:
        cache[pyfunc] = parse_function(pyfunc)
    return cache[pyfunc]


def compile_helper(caller, pyfunc, args, *, mode: str, name: str | None = None,
                   fixed_results=None, struct_return: bool = False) -> CompiledHelper:
    """Lower `pyfunc` specialised for `args` (kernel values standing for its parameters)."""
    ctx = caller.ctx
    source = helper_source(ctx, pyfunc)
    lowering = caller.make_helper_lowering(ctx, source, pyfunc, args, caller.default_float, mode=mode,
                              name=name or ctx.unique_name(source.name),
                              fixed_results=fixed_results, struct_return=struct_return)
    lowering.lower()
    return CompiledHelper(lowering.function, lowering.results, lowering.struct_return,
                          lowering.failure_count > 0)


def compile_custom_helper(caller, helper, args) -> CompiledHelper:
    """The primal (noinline) and the user's jvp / vjp as ``<name>.adoffload.{jvp,vjp}``."""
    primal = compile_helper(caller, helper.pyfunc, args, mode="custom")
    results = primal.results
    if results is None or not all(t.is_float for t in _as_tuple(results)):
        raise KernelTypeError(f"helper '{helper.__name__}' has a custom derivative, so it must "
                              f"return a float or a tuple of floats")
    base = primal.function.name
    argument_types = [a.type for a in args]
    stand_ins = [Scalar(None, t) for t in argument_types]
    if helper.custom_jvp is not None:
        jvp = compile_helper(caller, helper.custom_jvp, stand_ins + stand_ins, mode="custom",
                             name=f"{base}.adoffload.jvp", fixed_results=results,
                             struct_return=isinstance(results, tuple))
        jvp.function.linkage = ""
    if helper.custom_vjp is not None:
        cotangents = [Scalar(None, t) for t in _as_tuple(results)]
        vjp = compile_helper(caller, helper.custom_vjp, stand_ins + cotangents, mode="custom",
                             name=f"{base}.adoffload.vjp", fixed_results=tuple(argument_types),
                             struct_return=True)
        vjp.function.linkage = ""
    return primal


def _as_tuple(results):
    return results if isinstance(results, tuple) else (results,)


def flat_argument_types(args) -> list[ir.Type]:
    types = []
    for a in args:
        if isinstance(a, ArrayRef):
            types.append(PTR)
            types.extend(ir.IntType(64) for _ in range(a.type.ndim))
        elif isinstance(a, Scalar):
            types.append(llvm_type(a.type))
    return types


def result_type(results, struct_return: bool) -> ir.Type:
    if results is None:
        return ir.VoidType()
    if isinstance(results, tuple) or struct_return:
        return ir.LiteralStructType([llvm_type(t) for t in _as_tuple(results)])
    return llvm_type(results)

