"""The lowering of a function body (``Lowering``: every statement, expression and call a body may hold),
and its specialisation for one helper body (see ``helpers`` for the calling convention it implements)."""
from __future__ import annotations

import ast

from llvmlite import ir

from ..errors import KernelTypeError
from . import typing_rules as rules
from .context import I1, llvm_type
from .arrays import ArrayLowering
from .calls import CallLowering
from .derivative_calls import DerivativeCalls
from .expressions import ExpressionLowering
from .helpers import PTR, HelperCalls, flat_argument_types, result_type
from .lowering import FunctionLowering
from .statements import StatementLowering
from .values import ArrayRef, Literal, PyObject, Scalar


class Lowering(StatementLowering, ExpressionLowering, CallLowering, ArrayLowering, HelperCalls,
               DerivativeCalls, FunctionLowering):
    """Everything a function body needs; kernels and helpers specialise the ends."""

    def make_helper_lowering(self, *args, **options) -> "HelperLowering":
        """The lowering of a helper this body calls (a helper's body is lowered like any other)."""
        return HelperLowering(*args, **options)


class HelperLowering(Lowering):
    """A helper specialised for one list of argument values (types, arrays, constants)."""

    def __init__(self, ctx, source, pyfunc, args, caller_default_float, *, mode: str, name: str,
                 fixed_results=None, struct_return: bool = False):
        self.mode = mode
        arg_types = flat_argument_types(args) + ([PTR, PTR] if mode == "inline" else [])
        ret = result_type(fixed_results, struct_return) if fixed_results is not None else ir.VoidType()
        function = ir.Function(ctx.module, ir.FunctionType(ret, arg_types), name)
        function.linkage = "internal"
        function.attributes.add("alwaysinline" if mode == "inline" else "noinline")
        floats = [a.type for a in args if isinstance(a, Scalar)] + \
                 [a.type.dtype for a in args if isinstance(a, ArrayRef)]
        default_float = rules.kernel_default_float(floats) if any(t.is_float for t in floats) \
            else caller_default_float
        super().__init__(ctx, source, pyfunc, function, default_float)
        self.results = fixed_results
        self.results_known = fixed_results is not None
        self.struct_return = struct_return
        self.failure_count = 0
        self.return_slots: list = []
        self.return_block: ir.Block | None = None
        if mode == "inline":
            self.status, self.failed = function.args[-2], function.args[-1]
            self.status.name, self.failed.name = "status", "failed"
        self.bind_parameters(args)

    def bind_parameters(self, args) -> None:
        parameters = self.source.tree.args
        names = [a.arg for a in parameters.args]
        if parameters.vararg or parameters.kwarg or parameters.kwonlyargs or len(names) != len(args):
            raise self.source.error(KernelTypeError, f"'{self.source.name}' must take exactly "
                                    f"{len(args)} plain positional parameter(s) here", self.source.tree)
        flat = iter(self.function.args)
        for name, value in zip(names, args):
            if isinstance(value, Scalar):
                argument = next(flat)
                argument.name = name
                self.builder.store(argument, self.new_variable(name, value.type).slot)
            elif isinstance(value, ArrayRef):
                pointer = next(flat)
                pointer.name = name
                shape = tuple(next(flat) for _ in range(value.type.ndim))
                for dim, extent in enumerate(shape):
                    extent.name = f"{name}.shape{dim}"
                self.bindings[name] = ArrayRef(value.name, value.type, pointer, shape, value.param_index)
            else:
                self.globals[name] = value.obj

    # --- returns -------------------------------------------------------------------------

    def visit_Return(self, node: ast.Return):
        value = self.visit(node.value) if node.value is not None else PyObject(None)
        if isinstance(value, PyObject) and value.obj is None:
            value = None
        if self.struct_return and isinstance(self.results, tuple) and len(self.results) == 1 \
                and not isinstance(value, tuple) and value is not None:
            value = (value,)          # a vjp of one argument may return a single value
        if not self.results_known:
            self.results = self.result_types_of(value)
            self.results_known = True
        self.store_result(value)
        self.builder.branch(self.get_return_block())

    def result_types_of(self, value):
        if value is None:
            return None
        if isinstance(value, tuple):
            return tuple(self.result_type_of(v) for v in value)
        return self.result_type_of(value)

    def result_type_of(self, value):
        value = self.scalar(value, "a helper result")
        if isinstance(value, Literal):
            return rules.default_literal_type(value.value, self.default_float)
        return value.type

    def store_result(self, value) -> None:
        expected = self.results
        if (expected is None) != (value is None) or \
                isinstance(expected, tuple) != isinstance(value, tuple) or \
                (isinstance(value, tuple) and len(value) != len(expected)):
            raise KernelTypeError(f"helper '{self.source.name}' returns {describe_result(value)} "
                                  f"here but {describe_result(expected, types=True)} elsewhere")
        if value is None:
            return
        values = value if isinstance(value, tuple) else (value,)
        types = expected if isinstance(expected, tuple) else (expected,)
        if not self.return_slots:
            self.return_slots = [self.alloca_builder.alloca(llvm_type(t), name="result")
                                 for t in types]
        for slot, v, t in zip(self.return_slots, values, types):
            self.builder.store(self.coerce(v, t, f"the result of '{self.source.name}'"), slot)

    def get_return_block(self) -> ir.Block:
        if self.return_block is None:
            self.return_block = self.new_block("return")
        return self.return_block

    def abort(self) -> None:
        self.failure_count += 1
        if self.mode == "inline":
            self.builder.store(ir.Constant(I1, 1), self.failed)
            self.builder.branch(self.get_return_block())
        else:
            trap = self.ctx.declare("llvm.trap", ir.VoidType(), [])
            self.builder.call(trap, [])
            self.builder.unreachable()

    def lower(self) -> None:
        body = self.source.tree.body
        self.visit_body(body)
        if not self.builder.block.is_terminated:
            if not self.reachable(self.builder.block):
                self.builder.unreachable()
            elif self.results_known and self.results is not None:
                raise self.source.error(KernelTypeError, f"helper '{self.source.name}' can reach "
                                        f"its end without returning a value", body[-1])
            else:
                self.results_known = True
                self.builder.branch(self.get_return_block())
        self.emit_return()
        self.finish_allocas()

    def reachable(self, block: ir.Block) -> bool:
        if block is self.function.blocks[1]:
            return True
        return any(block in b.terminator.operands for b in self.function.blocks
                   if b.terminator is not None and b is not block)

    def emit_return(self) -> None:
        ret = result_type(self.results, self.struct_return)
        self.function.ftype = ir.FunctionType(ret, self.function.ftype.args)
        self.function.type = self.function.ftype.as_pointer()   # calls read the type from here
        self.function.return_value = ir.ReturnValue(self.function, ret)
        if self.return_block is None:
            return
        self.builder.position_at_end(self.return_block)
        self.builder.location = None
        if self.results is None:
            self.builder.ret_void()
            return
        values = [self.builder.load(slot) for slot in self.return_slots] if self.return_slots else \
            [ir.Constant(t, ir.Undefined) for t in _element_types(ret)]
        if isinstance(ret, ir.LiteralStructType):
            aggregate = ir.Constant(ret, ir.Undefined)
            for k, v in enumerate(values):
                aggregate = self.builder.insert_value(aggregate, v, k)
            self.builder.ret(aggregate)
        else:
            self.builder.ret(values[0])


def _element_types(ret):
    return list(ret.elements) if isinstance(ret, ir.LiteralStructType) else [ret]


def describe_result(value, types: bool = False) -> str:
    if value is None:
        return "nothing"
    if isinstance(value, tuple):
        return f"a tuple of {len(value)}"
    return "one value" if not types else f"one {value!r} value"
