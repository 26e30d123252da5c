"""Statements: assignments, control flow (if/for/while/break/continue/return), assert.

``for v in range(start, stop, step)`` evaluates its bounds once; a hidden counter drives the
loop and ``v`` receives a copy each iteration (so assigning to ``v`` in the body does not
change the iteration, as in Python). A constant step picks ``<`` or ``>`` at compile time; a
step known only at run time picks by its sign at run time (a step of 0 stops the thread with
INVALID_VALUE, as Python raises ValueError).
"""
from __future__ import annotations

import ast
import builtins

from llvmlite import ir

from ..language import builtins as language
from ..language.status import INVALID_VALUE, RANGE_LIMIT, RANGE_STEP, TRAP
from ..errors import KernelTypeError, UnsupportedConstructError
from . import typing_rules as rules
from .context import I64, llvm_type
from .values import ArrayRef, Literal, PyObject, Scalar, describe


class StatementLowering:
    """Mixin of FunctionLowering: ``visit_<Stmt>`` methods emit code and return nothing."""

    def visit_Pass(self, node):
        pass

    # --- assignment ----------------------------------------------------------------------

    def visit_Assign(self, node: ast.Assign):
        value = self.visit(node.value)
        for target in node.targets:
            self.assign(target, value)

    def visit_AnnAssign(self, node: ast.AnnAssign):
        """``x: ado.f32 = value`` declares the variable's type explicitly."""
        if not isinstance(node.target, ast.Name) or node.value is None:
            raise UnsupportedConstructError("annotated assignments must assign a value to a name")
        declared = self.visit(node.annotation)
        from ..language.types import ScalarType
        if not (isinstance(declared, PyObject) and isinstance(declared.obj, ScalarType)):
            raise KernelTypeError(f"annotation must be an ado scalar type, got {describe(declared)}")
        name = node.target.id
        if name in self.variables and self.variables[name].type != declared.obj:
            raise KernelTypeError(f"variable '{name}' already has type {self.variables[name].type!r}")
        value = self.visit(node.value)        # before the declaration: ``x: f32 = x + 1`` reads the old x
        if name not in self.variables:
            self.new_variable(name, declared.obj)
        self.assign(node.target, value)

    def assign(self, target: ast.expr, value) -> None:
        if isinstance(target, ast.Name):
            self.assign_name(target.id, value)
        elif isinstance(target, ast.Subscript):
            self.store_element(target, value)
        elif isinstance(target, (ast.Tuple, ast.List)):
            if not isinstance(value, tuple):
                raise KernelTypeError(f"cannot unpack {describe(value)} into {len(target.elts)} names")
            if len(value) != len(target.elts):
                raise KernelTypeError(f"cannot unpack a tuple of {len(value)} into "
                                      f"{len(target.elts)} names")
            for element_target, element in zip(target.elts, value):
                self.assign(element_target, element)
        else:
            raise UnsupportedConstructError(f"cannot assign to {type(target).__name__} in kernels")

    def array_target(self, target: ast.Subscript) -> ArrayRef:
        array = self.visit(target.value)
        if not isinstance(array, ArrayRef):
            raise KernelTypeError(f"cannot assign to an element of {describe(array)}")
        if not array.type.writes:
            raise KernelTypeError(f"array '{array.name}' is an input ({array.type!r}) and cannot "
                                  f"be written; declare it ado.Out or ado.InOut")
        return array

    def store_element(self, target: ast.Subscript, value) -> None:
        array = self.array_target(target)
        what = f"an element of '{array.name}'"
        stored = self.coerce(value, array.type.dtype, what)
        self.ctx.accessed(array, load=False, store=True)
        self.builder.store(stored, self.element_address(array, target.slice), align=array.type.dtype.dtype.itemsize)

    def visit_AugAssign(self, node: ast.AugAssign):
        """``x op= v`` and ``a[i] op= v`` (the element address and index are computed once)."""
        op = type(node.op)
        if isinstance(node.target, ast.Name):
            current = self.lookup(node.target.id)
            self.assign_name(node.target.id, self.binary(op, current, self.visit(node.value)))
        elif isinstance(node.target, ast.Subscript):
            array = self.array_target(node.target)
            address = self.element_address(array, node.target.slice)
            self.ctx.accessed(array, load=True, store=True)
            dtype = array.type.dtype
            current = Scalar(self.builder.load(address, typ=llvm_type(dtype), align=dtype.dtype.itemsize), dtype)
            result = self.binary(op, current, self.visit(node.value))
            self.builder.store(self.coerce(result, dtype, f"an element of '{array.name}'"), address,
                               align=dtype.dtype.itemsize)
        else:
            raise UnsupportedConstructError(f"cannot assign to {type(node.target).__name__}")

    # --- control flow --------------------------------------------------------------------

    def visit_If(self, node: ast.If):
        condition = self.scalar(self.visit_condition(node.test), "if condition")
        if isinstance(condition, Literal):        # compile-time branch: emit one side only
            self.visit_body(node.body if condition.value else node.orelse)
            return
        b = self.builder
        then_block, merge = self.new_block("if.then"), self.new_block("if.end")
        else_block = self.new_block("if.else") if node.orelse else merge
        b.cbranch(self.truth(condition), then_block, else_block)
        b.position_at_end(then_block)
        before = _copy(self.defined)
        self.visit_body(node.body)
        self.branch_to(merge)
        after_then, self.defined = self.defined, before
        if node.orelse:
            b.position_at_end(else_block)
            self.visit_body(node.orelse)
            self.branch_to(merge)
        self.defined = meet([after_then, self.defined])
        b.position_at_end(merge)

    def visit_While(self, node: ast.While):
        if node.orelse:
            raise UnsupportedConstructError("'while ... else' is not supported in kernels")
        b = self.builder
        header, body, exit_ = (self.new_block(n) for n in ("while.cond", "while.body", "while.end"))
        b.branch(header)
        b.position_at_end(header)
        test = self.visit_condition(node.test)
        b.cbranch(self.truth(test), body, exit_)
        b.position_at_end(body)
        before = _copy(self.defined)
        breaks, _ = self.loop_body(node.body, header, exit_)
        # the body may run no iterations (breaks assign no less), unless only a break leaves: while True
        self.defined = meet(breaks) if isinstance(test, Literal) and test.value else before
        b.position_at_end(exit_)

    def loop_body(self, statements, continue_target: ir.Block, break_target: ir.Block) -> tuple[list, list]:
        """The body of a loop; returns the assignment states at its breaks and at its continues (the
        end of the body among them)."""
        self.loops.append((continue_target, break_target))
        self.loop_exits.append(([], []))
        try:
            self.visit_body(statements)
        finally:
            self.loops.pop()
            breaks, continues = self.loop_exits.pop()
        continues.append(self.defined)
        self.branch_to(continue_target)
        return breaks, continues

    def visit_For(self, node: ast.For):
        if node.orelse:
            raise UnsupportedConstructError("'for ... else' is not supported in kernels")
        if self.is_static_range(node.iter):
            return self.static_for(node)
        start, stop, step = bounds = self.range_bounds(node.iter)
        b = self.builder
        counter_type = self.range_type(start, stop, step)
        start, stop = self.materialize(start, counter_type), self.materialize(stop, counter_type)
        counter = self.alloca_builder.alloca(llvm_type(counter_type), name="range.counter")
        b.store(start.value, counter)
        header, body, latch, exit_ = (self.new_block(n) for n in
                                      ("for.cond", "for.body", "for.next", "for.end"))
        step_value = self.materialize(step, counter_type)
        if not isinstance(step, Literal):         # range(a, b, 0) raises ValueError in Python
            self.guard(b.icmp_signed("!=", step_value.value, ir.Constant(step_value.value.type, 0)),
                       lambda: self.record_status(INVALID_VALUE, -1, ir.Constant(I64, self.current_line),
                                                  RANGE_STEP))
        self.check_range_limit(bounds, counter_type, start, stop, step_value)
        b.branch(header)
        b.position_at_end(header)
        current = b.load(counter)
        b.cbranch(self.range_condition(current, stop.value, step, step_value.value), body, exit_)
        b.position_at_end(body)
        before = _copy(self.defined)
        self.assign(node.target, Scalar(current, counter_type))
        breaks, continues = self.loop_body(node.body, latch, exit_)
        # A range of compile-time bounds that is not empty runs the body once at least; any other
        # may run it no times, and leaves the variables as they were before the loop.
        runs = all(isinstance(v, Literal) for v in bounds) and len(range(*(v.value for v in bounds))) > 0
        self.defined = meet(breaks + continues) if runs else before
        b.position_at_end(latch)
        b.store(b.add(b.load(counter), step_value.value), counter)
        b.branch(header)
        b.position_at_end(exit_)

    def is_static_range(self, iterator: ast.expr) -> bool:
        if not isinstance(iterator, ast.Call):
            return False
        func = self.visit(iterator.func)
        return isinstance(func, PyObject) and func.obj is language.static_range

    def static_for(self, node: ast.For) -> None:
        """``for v in ado.static_range(...)``: the body once per value, ``v`` a constant in each copy;
        ``continue`` goes to the next copy, ``break`` past the last."""
        if node.iter.keywords or not 1 <= len(node.iter.args) <= 3:
            raise KernelTypeError("ado.static_range() takes 1 to 3 positional arguments")
        bounds = [self.visit(a) for a in node.iter.args]
        if not all(isinstance(v, Literal) and isinstance(v.value, int) and not isinstance(v.value, bool)
                   for v in bounds):
            raise KernelTypeError("ado.static_range() arguments must be compile-time integers (literals or "
                                  "module-level int constants), got " + ", ".join(describe(v) for v in bounds)
                                  + "; use range() for a loop whose bounds are known at run time")
        if len(bounds) == 3 and bounds[2].value == 0:
            raise KernelTypeError("ado.static_range() step must not be zero")
        values = range(*(v.value for v in bounds))
        if len(values) > language.MAX_STATIC_ITERATIONS:
            raise KernelTypeError(f"ado.static_range() unrolls {len(values)} iterations, more than "
                                  f"{language.MAX_STATIC_ITERATIONS}; use range()")
        exit_ = self.new_block("static.end")
        breaks = []
        for value in values:
            following = self.new_block("static.next")
            self.assign(node.target, Literal(value))
            copy_breaks, continues = self.loop_body(node.body, following, exit_)
            breaks += copy_breaks
            self.defined = meet(continues)
            self.builder.position_at_end(following)
        self.defined = meet(breaks + [self.defined])
        self.branch_to(exit_)
        self.builder.position_at_end(exit_)

    def range_bounds(self, iterator: ast.expr):
        if not (isinstance(iterator, ast.Call) and isinstance(self.visit(iterator.func), PyObject)
                and self.visit(iterator.func).obj is builtins.range):
            raise UnsupportedConstructError("kernels can only loop over range(...)")
        if iterator.keywords or not 1 <= len(iterator.args) <= 3:
            raise KernelTypeError("range() takes 1 to 3 positional arguments")
        args = [self.scalar(self.visit(a), "range() argument") for a in iterator.args]
        for a in args:
            kind = rules.literal_kind(a.value) if isinstance(a, Literal) else rules.kind(a.type)
            if kind != "int":
                raise KernelTypeError(f"range() arguments must be integers, got {describe(a)}")
        if len(args) == 1:
            return Literal(0), args[0], Literal(1)
        if len(args) == 2:
            return args[0], args[1], Literal(1)
        if isinstance(args[2], Literal) and args[2].value == 0:
            raise KernelTypeError("range() step must not be zero")
        return tuple(args)

    def range_type(self, *bounds):
        types = [v.type for v in bounds if isinstance(v, Scalar)]
        result = types[0] if types else rules.i64
        for t in types[1:]:
            result = rules.promote(result, t)
        return result

    def check_range_limit(self, bounds, counter_type, start: Scalar, stop: Scalar, step_value: Scalar) -> None:
        """A loop whose counter would pass the type's limit after its last iteration (``range(2**63 - 3,
        2**63 - 1, 5)``) would wrap and run on; it is refused at compile time (constant bounds) or stops
        the thread before the loop (RANGE_LIMIT). A step of 1 or -1 never passes it; otherwise the check
        computes the last value once (a udiv, by a constant for a constant step)."""
        step = bounds[2]
        if isinstance(step, Literal) and abs(step.value) == 1:
            return
        low, high = rules.INT_LIMITS[counter_type]
        if all(isinstance(v, Literal) for v in bounds):
            values = range(*(v.value for v in bounds))
            if len(values) and not low <= values[-1] + step.value <= high:
                raise KernelTypeError(f"range{tuple(v.value for v in bounds)} passes the limit of "
                                      f"{counter_type!r} after its last value (the counter would wrap)")
            return
        b, t = self.builder, start.value.type
        first, end, by = start.value, stop.value, step_value.value

        def passes(upward: bool) -> ir.Value:
            nonempty = b.icmp_signed("<" if upward else ">", first, end)
            size = by if upward else b.sub(ir.Constant(t, 0), by)               # |step|, unsigned
            span = b.sub(b.sub(end, first) if upward else b.sub(first, end), ir.Constant(t, 1))
            offset = b.mul(b.udiv(span, size), size)
            last = b.add(first, offset) if upward else b.sub(first, offset)
            limit = b.sub(ir.Constant(t, high if upward else low), by)
            return b.and_(nonempty, b.icmp_signed(">" if upward else "<", last, limit))

        if isinstance(step, Literal):
            wraps = passes(step.value > 0)
        else:
            wraps = b.select(b.icmp_signed(">", by, ir.Constant(t, 0)), passes(True), passes(False))
        self.guard(b.not_(wraps), lambda: self.record_status(INVALID_VALUE, -1, ir.Constant(I64, self.current_line),
                                                             RANGE_LIMIT))

    def range_condition(self, current, stop, step, step_value) -> ir.Value:
        b = self.builder
        if isinstance(step, Literal):
            return b.icmp_signed("<" if step.value > 0 else ">", current, stop)
        zero = ir.Constant(step_value.type, 0)
        upward = b.and_(b.icmp_signed(">", step_value, zero), b.icmp_signed("<", current, stop))
        downward = b.and_(b.icmp_signed("<", step_value, zero), b.icmp_signed(">", current, stop))
        return b.or_(upward, downward)

    def visit_Break(self, node):
        if not self.loops:
            raise UnsupportedConstructError("'break' outside a loop")
        self.loop_exits[-1][0].append(_copy(self.defined))
        self.builder.branch(self.loops[-1][1])

    def visit_Continue(self, node):
        if not self.loops:
            raise UnsupportedConstructError("'continue' outside a loop")
        self.loop_exits[-1][1].append(_copy(self.defined))
        self.builder.branch(self.loops[-1][0])

    def visit_Assert(self, node: ast.Assert):
        """``assert cond``: a failing thread records {2 (TRAP), -1, source line, -1} and stops."""
        condition = self.scalar(self.visit_condition(node.test), "assert condition")
        if isinstance(condition, Literal):
            if not condition.value:
                raise KernelTypeError("assertion is always false")
            return
        self.guard(self.truth(condition),
                   lambda: self.record_status(TRAP, -1, ir.Constant(I64, self.source.location(node)[1]), -1))



def _copy(state: set[str] | None) -> set[str] | None:
    return None if state is None else set(state)


def meet(states: list) -> set[str] | None:
    """The variables assigned on every one of several paths that join (None: an unreachable path)."""
    reachable = [state for state in states if state is not None]
    if not reachable:
        return None
    return set.intersection(*reachable)
