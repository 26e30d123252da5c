"""The core of lowering one Python function to one LLVM function: visiting, names, conversions.

Statements, expressions and calls live in their own mixins (``statements``, ``expressions``,
``calls``); ``kernel`` and ``helpers`` subclass ``FunctionLowering`` for the two kinds of
functions, which differ in how they abort after a failed bounds check.
"""
from __future__ import annotations

import ast
import builtins

import numpy as np
from llvmlite import ir

from ..errors import KernelTypeError, SourceError, UndefinedNameError, UnsupportedConstructError
from ..language.status import FLOAT_TO_INT, INVALID_VALUE, UNASSIGNED
from ..language.types import ScalarType, bool_
from . import typing_rules as rules
from .context import I1, I64, LocatedBuilder, ModuleContext, llvm_type
from .source import Source
from .values import ArrayRef, Literal, PyObject, Scalar, describe

# Python builtins a kernel may name; everything else from builtins is undefined in kernels.
KERNEL_PYTHON_BUILTINS = {"range", "len", "int", "float", "bool", "abs", "min", "max", "divmod", "round", "pow"}


class Variable:
    """A local scalar variable: a stack slot with a fixed type (SROA turns it into SSA), and an ``i1``
    slot ``assigned`` (false at entry, true after each assignment) that only a read on a path that may
    not have assigned the variable loads (FunctionLowering.check_assigned); LLVM deletes it elsewhere."""

    def __init__(self, slot: ir.Value, type_: ScalarType, tid_axis: int | None = None,
                 assigned: ir.Value | None = None):
        self.slot, self.type, self.tid_axis, self.assigned = slot, type_, tid_axis, assigned


def python_constant(obj):
    """A captured Python object as a kernel value (numbers become weak literals)."""
    if isinstance(obj, (bool, np.bool_)):
        return Literal(bool(obj))
    if isinstance(obj, (int, np.integer)):
        return Literal(int(obj))
    if isinstance(obj, (float, np.floating)):
        return Literal(float(obj))
    return PyObject(obj)


def _ado_dtype_name(dtype) -> str:
    """The ado name of a numpy dtype (for messages), e.g. float64 -> f64."""
    return {"float32": "f32", "float64": "f64", "int32": "i32", "int64": "i64", "bool": "bool_"}.get(
        np.dtype(dtype).name, np.dtype(dtype).name)


def captured_names(pyfunc) -> dict:
    """The globals and closure variables a function can see (closure cells win)."""
    names = dict(pyfunc.__globals__)
    for name, cell in zip(pyfunc.__code__.co_freevars, pyfunc.__closure__ or ()):
        try:
            names[name] = cell.cell_contents
        except ValueError:     # an empty cell: the name is not bound yet
            pass
    return names


class FunctionLowering:
    """Lowers one Python function body into one LLVM function (kernel body or helper)."""

    def __init__(self, ctx: ModuleContext, source: Source, pyfunc, function: ir.Function,
                 default_float: ScalarType):
        self.ctx, self.source, self.pyfunc, self.function = ctx, source, pyfunc, function
        self.default_float = default_float
        self.globals = captured_names(pyfunc)
        self.variables: dict[str, Variable] = {}
        self.bindings: dict[str, object] = {}      # names bound to arrays (not reassignable)
        self.loops: list[tuple[ir.Block, ir.Block]] = []   # (continue target, break target)
        # Definite assignment: the variables assigned on every path to the code being lowered (None:
        # the code is unreachable). A read of one that is not is refused where Python could raise
        # UnboundLocalError: the stack slot would be read uninitialized, and LLVM may fold that to any value.
        self.defined: set[str] | None = set()
        self.loop_exits: list[tuple[list, list]] = []      # per loop: the states at its breaks, continues
        self.status: ir.Value | None = None
        self.current_line = source.first_line      # the file line of the node being lowered
        self.alloca_block = function.append_basic_block("entry")
        body_block = function.append_basic_block("body")
        self.builder = LocatedBuilder(body_block)
        self.alloca_builder = ir.IRBuilder(self.alloca_block)

    # --- visiting ------------------------------------------------------------------------

    def visit(self, node: ast.AST):
        method = getattr(self, "visit_" + type(node).__name__, None)
        if method is None:
            raise self.source.error(UnsupportedConstructError, unsupported_message(node), node)
        previous, previous_line = self.builder.location, self.current_line
        if hasattr(node, "lineno"):
            where = self.source.location(node)
            self.builder.location, self.current_line = self.ctx.location(*where), where[1]
        try:
            return method(node)
        except SourceError as exc:
            if exc.line is None:       # raised deep inside without a place: locate it here
                raise self.source.error(type(exc), exc.message, node) from None
            raise
        except RecursionError:
            raise
        except Exception as exc:       # a foreign exception: give it this node's location
            raise self.source.error(SourceError, f"internal error while compiling this "
                                    f"construct: {type(exc).__name__}: {exc}", node) from exc
        finally:
            self.builder.location, self.current_line = previous, previous_line

    def visit_body(self, statements: list[ast.stmt]) -> None:
        for statement in statements:
            if self.builder.block.is_terminated:      # code after return/break/continue
                self.builder.position_at_end(self.new_block("dead"))
            self.visit(statement)
            if self.builder.block.is_terminated:
                self.defined = None

    def new_block(self, name: str) -> ir.Block:
        return self.function.append_basic_block(name)

    def branch_to(self, block: ir.Block) -> None:
        if not self.builder.block.is_terminated:
            self.builder.branch(block)

    # --- names ---------------------------------------------------------------------------

    def lookup(self, name: str, node: ast.AST | None = None):
        if name in self.variables:
            var = self.variables[name]
            if self.defined is not None and name not in self.defined:
                self.check_assigned(name, var)
            return Scalar(self.builder.load(var.slot, name=name), var.type, var.tid_axis)
        if name in self.bindings:
            return self.bindings[name]
        if name in self.globals:
            value = self.globals[name]
            if isinstance(value, np.ndarray) and value.ndim > 0:
                raise KernelTypeError(
                    f"'{name}' is a numpy array of the enclosing Python code (shape {value.shape}); kernels "
                    f"cannot capture arrays: pass it as a parameter, e.g. {name}: "
                    f"ado.In[ado.{_ado_dtype_name(value.dtype)}, {min(value.ndim, 3)}], and give it in the call")
            return python_constant(value)
        if name in KERNEL_PYTHON_BUILTINS:
            return PyObject(getattr(builtins, name))
        if hasattr(builtins, name):
            raise UnsupportedConstructError(f"the Python builtin '{name}' is not supported in "
                                            f"kernels (available: {', '.join(sorted(KERNEL_PYTHON_BUILTINS))})")
        raise UndefinedNameError(f"name '{name}' is not defined (not a local variable, a "
                                 f"parameter, a helper or a global constant)")

    def new_variable(self, name: str, type_: ScalarType, tid_axis=None) -> Variable:
        slot = self.alloca_builder.alloca(llvm_type(type_), name=name)
        assigned = self.alloca_builder.alloca(I1, name=f"{name}.assigned")
        self.alloca_builder.store(ir.Constant(I1, 0), assigned)
        self.variables[name] = Variable(slot, type_, tid_axis, assigned)
        self.mark_defined(name)
        return self.variables[name]

    def check_assigned(self, name: str, var: Variable) -> None:
        """A read of ``name`` where some path to it has not assigned it (only in a branch, or in a loop
        body that may run no iterations), as Python allows: the thread checks at run time that an
        assignment ran and otherwise stops with UNASSIGNED (Python's UnboundLocalError), since the slot
        is uninitialized and LLVM may fold it to any value. Where no status record can say so (block
        kernels, whose threads must reach their barriers together; helpers of scalar derivatives) the
        read is refused here."""
        if self.status is None or getattr(self, "block", None) is not None:
            raise UndefinedNameError(
                f"variable '{name}' is not assigned on every path that reaches this use (only in a branch, "
                f"or in a loop body that may run no iterations); Python would raise UnboundLocalError on "
                f"such a path and the kernel would read an uninitialized value: assign '{name}' before "
                f"the branch or loop")
        line = ir.Constant(I64, self.current_line)
        self.guard(self.builder.load(var.assigned, name=f"{name}.assigned"),
                   lambda: self.record_status(UNASSIGNED, -1, line, -1))

    def assign_name(self, name: str, value) -> None:
        """``name = value``: the first assignment fixes the variable's type."""
        if name in self.bindings:
            raise KernelTypeError(f"'{name}' is an array and cannot be reassigned")
        if isinstance(value, ArrayRef):
            if name in self.variables:
                raise KernelTypeError(f"cannot assign {describe(value)} to scalar variable '{name}'")
            self.bindings[name] = value
            return
        if isinstance(value, tuple):
            raise KernelTypeError(f"cannot bind a tuple to the single name '{name}': unpack it "
                                  f"(e.g. 'a, b = ...')")
        if isinstance(value, PyObject):
            raise KernelTypeError(f"cannot assign {describe(value)} to a kernel variable")
        var = self.variables.get(name)
        if var is None:
            type_ = value.type if isinstance(value, Scalar) else \
                rules.default_literal_type(value.value, self.default_float)
            var = self.new_variable(name, type_)
        self.builder.store(self.coerce(value, var.type, f"variable '{name}'"), var.slot)
        self.builder.store(ir.Constant(I1, 1), var.assigned)
        self.mark_defined(name)

    def mark_defined(self, name: str) -> None:
        if self.defined is not None:
            self.defined.add(name)

    # --- conversions ---------------------------------------------------------------------

    def scalar(self, value, what: str = "this operand"):
        """Check that a value is a scalar (Literal or Scalar)."""
        if isinstance(value, (Literal, Scalar)):
            return value
        if isinstance(value, ArrayRef):
            raise KernelTypeError(f"{describe(value)} used as a scalar ({what}); index it, "
                                  f"e.g. {value.name}[i]")
        raise KernelTypeError(f"{describe(value)} used as a scalar ({what})")

    def constant(self, value, type_: ScalarType) -> ir.Constant:
        if type_.is_float:
            return ir.Constant(llvm_type(type_), float(value))
        return ir.Constant(llvm_type(type_), int(value))

    def materialize(self, value, type_: ScalarType | None = None) -> Scalar:
        """A Scalar of `type_` (explicit conversion), or of a literal's default type."""
        value = self.scalar(value)
        if isinstance(value, Literal):
            target = type_ or rules.default_literal_type(value.value, self.default_float)
            if not target.is_float and rules.literal_kind(value.value) == "float":
                return self.convert(Scalar(self.constant(value.value, self.default_float),
                                           self.default_float), target)
            if target == bool_ and rules.literal_kind(value.value) != "bool":
                raise KernelTypeError(f"constant {value.value!r} used as a bool here; Python keeps it a number "
                                      f"(True is 1): cast the bool with int(...) or write True/False")
            if target in rules.INT_LIMITS and not rules.fits(int(value.value), target):
                raise KernelTypeError(f"constant {value.value} does not fit in {target!r}")
            return Scalar(self.constant(value.value, target), target)
        return value if type_ is None else self.convert(value, type_)

    def convert(self, value: Scalar, target: ScalarType) -> Scalar:
        """Explicit conversion between scalar types (casts, promotion)."""
        source, v, b = value.type, value.value, self.builder
        if source == target:
            return value
        sk, tk, tt = rules.kind(source), rules.kind(target), llvm_type(target)
        if tk == "bool":
            zero = ir.Constant(v.type, 0.0 if source.is_float else 0)
            out = b.fcmp_unordered("!=", v, zero) if source.is_float else b.icmp_signed("!=", v, zero)
        elif sk == "bool":
            out = b.uitofp(v, tt) if target.is_float else b.zext(v, tt)
        elif sk == tk == "int":
            out = b.sext(v, tt) if target.bits > source.bits else b.trunc(v, tt)
        elif sk == "int":
            out = b.sitofp(v, tt)
        elif tk == "int":
            self.check_float_fits(value, target)
            out = b.fptosi(v, tt)
        else:
            out = b.fpext(v, tt) if target.bits > source.bits else b.fptrunc(v, tt)
        return Scalar(out, target)

    def check_float_fits(self, value: Scalar, target: ScalarType) -> None:
        """``int(x)`` of a NaN, an infinity or a float whose integer part is outside the target type
        stops the thread (Python raises ValueError or OverflowError, or gives an int the type cannot
        hold; LLVM's ``fptosi`` would give poison)."""
        low, high = rules.INT_LIMITS[target]
        width = 32 if value.type.bits == 32 else 64
        below = float(low - 1)
        exact_below = (float(np.float32(below)) if width == 32 else below) == low - 1
        b, t = self.builder, value.value.type
        above_low = b.fcmp_ordered(">", value.value, ir.Constant(t, float(low - 1))) if exact_below else \
            b.fcmp_ordered(">=", value.value, ir.Constant(t, float(low)))
        fits = b.and_(above_low, b.fcmp_ordered("<", value.value, ir.Constant(t, float(high + 1))))
        self.guard(fits, lambda: self.record_status(INVALID_VALUE, -1, ir.Constant(I64, self.current_line),
                                                    FLOAT_TO_INT))

    def coerce(self, value, target: ScalarType, what: str) -> ir.Value:
        """Implicit conversion for stores, assignments and helper results (see typing_rules)."""
        value = self.scalar(value, what)
        if isinstance(value, Literal):
            if not rules.literal_assignable(value.value, target):
                raise KernelTypeError(f"cannot store constant {value.value!r} into {what} of type "
                                      f"{target!r}")
            return self.materialize(value, target).value
        if not rules.assignable(value.type, target):
            raise KernelTypeError(f"cannot store a {value.type!r} value into {what} of type "
                                  f"{target!r} without an explicit cast (e.g. {target!r}(...))")
        return self.convert(value, target).value

    def truth(self, value) -> ir.Value:
        """An i1 truth value of a scalar (``x != 0`` for numbers)."""
        value = self.scalar(value, "a condition")
        if isinstance(value, Literal):
            return ir.Constant(I1, int(bool(value.value)))
        return self.convert(value, bool_).value

    # --- failure protocol ----------------------------------------------------------------

    def record_status(self, code: int, param_index: int, index: ir.Value, dim: int) -> None:
        """First failing thread wins: xchg status[0]; if it was 0, write the rest of the record."""
        if self.status is None:
            return
        b = self.builder
        old = b.atomic_rmw("xchg", self.status, ir.Constant(I64, code), "monotonic")
        first = b.icmp_signed("==", old, ir.Constant(I64, 0))
        write, done = self.new_block("status.write"), self.new_block("status.done")
        b.cbranch(first, write, done)
        b.position_at_end(write)
        for word, val in ((1, ir.Constant(I64, param_index)), (2, index), (3, ir.Constant(I64, dim))):
            slot = b.gep(self.status, [ir.Constant(I64, word)], inbounds=True, source_etype=I64)
            b.store(val, slot)
        b.branch(done)
        b.position_at_end(done)

    def guard(self, ok: ir.Value, on_failure) -> None:
        """Continue where `ok` holds; otherwise run `on_failure()` (which must abort)."""
        fail, cont = self.new_block("check.fail"), self.new_block("check.ok")
        self.builder.cbranch(ok, cont, fail).set_weights([1 << 20, 1])
        self.builder.position_at_end(fail)
        on_failure()
        self.abort()
        self.builder.position_at_end(cont)

    def abort(self) -> None:
        """Leave the function after a failure (kernel: return; helper: report to the caller)."""
        raise NotImplementedError(f"{type(self).__name__} must say how it leaves after a failure")

    def finish_allocas(self) -> None:
        self.alloca_builder.branch(self.function.blocks[1])


def unsupported_message(node: ast.AST) -> str:
    names = {"ListComp": "list comprehensions", "DictComp": "dict comprehensions",
             "SetComp": "set comprehensions", "GeneratorExp": "generator expressions",
             "Lambda": "lambda", "With": "'with' statements", "Try": "'try' statements",
             "Raise": "'raise'", "Global": "'global'", "Nonlocal": "'nonlocal'",
             "FunctionDef": "nested function definitions", "ClassDef": "class definitions",
             "Import": "imports", "ImportFrom": "imports", "Yield": "'yield'", "Await": "'await'",
             "List": "lists", "Dict": "dicts", "Set": "sets", "JoinedStr": "f-strings",
             "Starred": "starred expressions", "Delete": "'del'", "Match": "'match'",
             "NamedExpr": "':=' expressions", "Slice": "slices"}
    name = type(node).__name__
    return f"{names.get(name, name)} {'are' if names.get(name, '').endswith('s') else 'is'} " \
           f"not supported in kernels"
