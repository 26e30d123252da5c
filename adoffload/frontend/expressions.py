"""Expressions: constants, names, operators, comparisons, boolean logic, subscripts."""
from __future__ import annotations

import ast
import operator

from llvmlite import ir

from ..errors import KernelTypeError, UnsupportedConstructError
from ..language.types import ScalarType, bool_
from . import typing_rules as rules
from ..language.status import DIVISION_BY_ZERO, INTEGER_OVERFLOW, INVALID_VALUE, SHIFT_COUNT
from .context import I1, I64, llvm_type
from .values import ArrayRef, Literal, PyObject, Scalar, describe

# Python operator -> (folding function, integer instruction, float instruction).
# None marks operators lowered by a method of their own (floor semantics, true division, pow).
ARITHMETIC = {
    ast.Add: (operator.add, "add", "fadd"),
    ast.Sub: (operator.sub, "sub", "fsub"),
    ast.Mult: (operator.mul, "mul", "fmul"),
    ast.Div: (operator.truediv, None, "fdiv"),
    ast.FloorDiv: (operator.floordiv, None, None),
    ast.Mod: (operator.mod, None, None),
    ast.Pow: (operator.pow, None, None),
}
BITWISE = {  # integer and bool operands only
    ast.BitAnd: (operator.and_, "and_"), ast.BitOr: (operator.or_, "or_"),
    ast.BitXor: (operator.xor, "xor"), ast.LShift: (operator.lshift, "shl"),
    ast.RShift: (operator.rshift, "ashr"),
}
COMPARISON = {
    ast.Lt: (operator.lt, "<"), ast.LtE: (operator.le, "<="), ast.Gt: (operator.gt, ">"),
    ast.GtE: (operator.ge, ">="), ast.Eq: (operator.eq, "=="), ast.NotEq: (operator.ne, "!="),
}
OPERATOR_SYMBOLS = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.FloorDiv: "//",
                    ast.Mod: "%", ast.Pow: "**", ast.BitAnd: "&", ast.BitOr: "|", ast.BitXor: "^",
                    ast.LShift: "<<", ast.RShift: ">>", ast.MatMult: "@"}
MAX_UNROLLED_POWER = 64     # x ** n with |n| <= this is lowered to multiplications


class ExpressionLowering:
    """Mixin of FunctionLowering: ``visit_<Expr>`` methods return values (see ``values``)."""

    def visit_Constant(self, node: ast.Constant):
        if isinstance(node.value, (bool, int, float)):
            return Literal(node.value)
        if node.value is None:
            return PyObject(None)
        raise UnsupportedConstructError(f"{type(node.value).__name__} constants are not "
                                        f"supported in kernels")

    def visit_Name(self, node: ast.Name):
        return self.lookup(node.id, node)

    def visit_Attribute(self, node: ast.Attribute):
        base = self.visit(node.value)
        if isinstance(base, ArrayRef):
            if node.attr == "shape":
                return tuple(Scalar(s, rules.i64) for s in base.shape)
            if node.attr == "ndim":
                return Literal(base.type.ndim)
            raise UnsupportedConstructError(f"arrays have no attribute '{node.attr}' in kernels "
                                            f"(only .shape and .ndim)")
        if isinstance(base, PyObject):
            if not hasattr(base.obj, node.attr):
                raise UnsupportedConstructError(f"{base.obj!r} has no attribute '{node.attr}'")
            from .lowering import python_constant
            return python_constant(getattr(base.obj, node.attr))
        raise KernelTypeError(f"{describe(base)} has no attribute '{node.attr}'")

    def visit_Tuple(self, node: ast.Tuple):
        return tuple(self.visit(e) for e in node.elts)

    def visit_Expr(self, node: ast.Expr):       # an expression statement
        if isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            return None                         # a docstring
        self.visit(node.value)

    # --- arithmetic ----------------------------------------------------------------------

    def visit_BinOp(self, node: ast.BinOp):
        return self.binary(type(node.op), self.visit(node.left), self.visit(node.right))

    def binary(self, op: type, left, right):
        symbol = OPERATOR_SYMBOLS.get(op, op.__name__)
        left = self.scalar(left, f"left operand of '{symbol}'")
        right = self.scalar(right, f"right operand of '{symbol}'")
        if isinstance(left, Literal) and isinstance(right, Literal):
            return self.fold(op, left, right, symbol)
        if op is ast.Pow:
            return self.power(left, right)
        if op in BITWISE:
            return self.bitwise(op, left, right, symbol)
        if op not in ARITHMETIC:
            raise UnsupportedConstructError(f"operator '{symbol}' is not supported in kernels")
        left, right = self.unify(left, right, symbol)
        t, b = left.type, self.builder
        if op is ast.Div and not t.is_float:
            left, right = self.convert(left, self.default_float), self.convert(right, self.default_float)
            t = self.default_float
        if op is ast.FloorDiv:
            return self.floor_divide(left, right)
        if op is ast.Mod:
            return self.modulo(left, right)
        instruction = ARITHMETIC[op][2 if t.is_float else 1]
        return Scalar(getattr(b, instruction)(left.value, right.value), t)

    def fold(self, op, left: Literal, right: Literal, symbol: str) -> Literal:
        table = ARITHMETIC if op in ARITHMETIC else BITWISE
        if op not in table:
            raise UnsupportedConstructError(f"operator '{symbol}' is not supported in kernels")
        try:
            value = table[op][0](left.value, right.value)
        except (ArithmeticError, ValueError) as exc:         # 1 // 0, 1 << -1
            raise KernelTypeError(f"constant expression {left.value!r} {symbol} {right.value!r} "
                                  f"fails: {exc}") from None
        if isinstance(value, complex):                        # (-8.0) ** 0.5 in Python
            raise KernelTypeError(f"constant expression {left.value!r} {symbol} {right.value!r} is the complex "
                                  f"number {value!r}; kernels compute with real numbers")
        return Literal(value)

    def unify(self, left, right, symbol: str) -> tuple[Scalar, Scalar]:
        """Bring two operands (at most one literal) to their common type (see typing_rules)."""
        if isinstance(left, Literal):
            t = rules.literal_adopts(left.value, right.type, self.default_float)
        elif isinstance(right, Literal):
            t = rules.literal_adopts(right.value, left.type, self.default_float)
        else:
            t = rules.promote(left.type, right.type)
        if t is None:
            raise KernelTypeError(f"operator '{symbol}' between {describe(left)} and "
                                  f"{describe(right)} is not allowed (cast with int(...) or "
                                  f"an ado type first)")
        return self.materialize(left, t), self.materialize(right, t)

    def floor_divide(self, a: Scalar, b: Scalar) -> Scalar:
        """Python ``//``: rounds toward minus infinity (also for negative ints)."""
        bld = self.builder
        if a.type.is_float:
            return self.float_divmod(a, b)[0]
        dividend, divisor = self.trap_free_operands(a, b, floor_division=True)
        q = bld.sdiv(dividend, divisor)
        r = bld.srem(dividend, divisor)
        zero = ir.Constant(r.type, 0)
        adjust = bld.and_(bld.icmp_signed("!=", r, zero),
                          bld.icmp_signed("<", bld.xor(r, divisor), zero))
        return Scalar(bld.sub(q, bld.zext(adjust, q.type)), a.type)

    def modulo(self, a: Scalar, b: Scalar) -> Scalar:
        """Python ``%``: the result has the sign of the divisor."""
        bld = self.builder
        if a.type.is_float:
            return self.float_divmod(a, b)[1]
        dividend, divisor = self.trap_free_operands(a, b, floor_division=False)
        r = bld.srem(dividend, divisor)
        zero = ir.Constant(r.type, 0)
        adjust = bld.and_(bld.icmp_signed("!=", r, zero),
                          bld.icmp_signed("<", bld.xor(r, divisor), zero))
        return Scalar(bld.select(adjust, bld.add(r, divisor), r), a.type)

    def float_divmod(self, a: Scalar, b: Scalar) -> tuple[Scalar, Scalar]:
        """Python's float ``//`` and ``%`` as CPython computes them (``_float_div_mod``), not
        ``floor(a / b)``: the quotient is rounded from ``(a - a % b) / b``, so ``1.0 // 0.1`` is 9.0
        (``1.0 / 0.1`` rounds to 10.0), ``1.0 // -inf`` is -1.0, and a zero result takes the sign
        Python gives it (``-0.0 % 5.0`` is 0.0). Branch-free (selects), so AD sees floor's zero
        derivative for ``//`` and fmod's for ``%``. A zero divisor gives NaN (Python raises
        ZeroDivisionError; docs/language.md)."""
        bld, t = self.builder, a.type
        x, y = a.value, b.value
        zero, one = ir.Constant(x.type, 0.0), ir.Constant(x.type, 1.0)
        mod = bld.frem(x, y)
        div = bld.fdiv(bld.fsub(x, mod), y)
        mod_nonzero = bld.fcmp_unordered("!=", mod, zero)        # C's ``if (mod)``: NaN is true
        signs_differ = bld.xor(bld.fcmp_ordered("<", y, zero), bld.fcmp_ordered("<", mod, zero))
        adjust = bld.and_(mod_nonzero, signs_differ)
        signed_zero = self.call_intrinsic("copysign", [zero, y], t)
        mod = bld.select(adjust, bld.fadd(mod, y), bld.select(mod_nonzero, mod, signed_zero))
        div = bld.select(adjust, bld.fsub(div, one), div)
        floor = self.call_intrinsic("floor", [div], t)
        round_up = bld.fcmp_ordered(">", bld.fsub(div, floor), ir.Constant(x.type, 0.5))
        floor = bld.select(round_up, bld.fadd(floor, one), floor)
        zero_quotient = self.call_intrinsic("copysign", [zero, bld.fdiv(x, y)], t)
        quotient = bld.select(bld.fcmp_unordered("!=", div, zero), floor, zero_quotient)
        return Scalar(quotient, t), Scalar(mod, t)

    def trap_free_operands(self, a: Scalar, b: Scalar, *, floor_division: bool) -> tuple[ir.Value, ir.Value]:
        """Operands for ``sdiv``/``srem`` that cannot trap (x86 raises SIGFPE for a zero divisor
        and for MIN / -1, which would kill the process). A divisor of 0 records
        DIVISION_BY_ZERO and stops the thread; ``MIN // -1`` (not representable) records
        INTEGER_OVERFLOW. Other divisors of -1 divide ``-a`` by 1 instead, which gives the same
        quotient and remainder. The fast path is one add, one unsigned compare and a branch;
        a constant divisor other than 0 and -1 needs none."""
        divisor = b.value
        if isinstance(divisor, ir.Constant):
            if divisor.constant == 0:
                raise KernelTypeError("integer division or modulo by the constant zero")
            if divisor.constant != -1:
                return a.value, divisor
        bld, t = self.builder, divisor.type
        line = ir.Constant(I64, self.current_line)
        entry = bld.block
        risky = bld.icmp_unsigned("<", bld.add(divisor, ir.Constant(t, 1)), ir.Constant(t, 2))  # 0 or -1
        rare, divide = self.new_block("div.rare"), self.new_block("div")
        bld.cbranch(risky, rare, divide).set_weights([1, 1 << 20])
        bld.position_at_end(rare)
        self.guard(bld.icmp_signed("!=", divisor, ir.Constant(t, 0)),
                   lambda: self.record_status(DIVISION_BY_ZERO, -1, line, -1))
        if floor_division:
            smallest = ir.Constant(t, -(1 << (t.width - 1)))
            self.guard(bld.icmp_signed("!=", a.value, smallest),
                       lambda: self.record_status(INTEGER_OVERFLOW, -1, line, -1))
        negated = bld.sub(ir.Constant(t, 0), a.value)
        rare_end = bld.block
        bld.branch(divide)
        bld.position_at_end(divide)
        dividend, safe_divisor = bld.phi(t), bld.phi(t)
        dividend.add_incoming(a.value, entry)
        dividend.add_incoming(negated, rare_end)
        safe_divisor.add_incoming(divisor, entry)
        safe_divisor.add_incoming(ir.Constant(t, 1), rare_end)
        return dividend, safe_divisor

    def power(self, base, exponent):
        """``**``: small constant int exponents become multiplications, others llvm.pow."""
        if isinstance(exponent, Literal) and rules.literal_kind(exponent.value) == "int" \
                and abs(exponent.value) <= MAX_UNROLLED_POWER:
            base = self.materialize(base)
            n = exponent.value
            if n < 0 and not base.type.is_float:
                raise KernelTypeError("an integer raised to a negative power is not an integer; "
                                      "convert the base to a float first")
            result = self.multiply_power(base, abs(n))
            if n < 0:
                one = ir.Constant(llvm_type(base.type), 1.0)
                result = Scalar(self.builder.fdiv(one, result.value), base.type)
            return result
        base, exponent = self.unify(base, exponent, "**")
        if not base.type.is_float:
            raise KernelTypeError(f"'**' between integers needs a constant exponent from 0 to "
                                  f"{MAX_UNROLLED_POWER}; convert the base to a float for another exponent")
        return Scalar(self.call_intrinsic("pow", [base.value, exponent.value], base.type), base.type)

    def multiply_power(self, base: Scalar, n: int) -> Scalar:
        """base ** n for n >= 0 by repeated squaring."""
        one = self.constant(1, base.type)
        result, square = None, base.value
        mul = self.builder.fmul if base.type.is_float else self.builder.mul
        while n:
            if n & 1:
                result = square if result is None else mul(result, square)
            n >>= 1
            if n:
                square = mul(square, square)
        return Scalar(result if result is not None else one, base.type)

    def bitwise(self, op, left, right, symbol: str) -> Scalar:
        types = [v.type for v in (left, right) if isinstance(v, Scalar)]
        if any(t.is_float for t in types):
            raise KernelTypeError(f"operator '{symbol}' needs integer or bool operands, got "
                                  f"{describe(left)} and {describe(right)}")
        if all(t == bool_ for t in types) and op in (ast.BitAnd, ast.BitOr, ast.BitXor):
            left, right = self.materialize(left, bool_), self.materialize(right, bool_)
        else:
            if bool_ in types:
                raise KernelTypeError(f"operator '{symbol}' mixes a bool with a number")
            if op in (ast.LShift, ast.RShift):
                return self.shift(op, left, right, symbol)
            left, right = self.unify(left, right, symbol)
        return Scalar(getattr(self.builder, BITWISE[op][1])(left.value, right.value), left.type)

    def shift(self, op, left, right, symbol: str) -> Scalar:
        """``a << n`` and ``a >> n`` as Python's, modulo 2**bits (docs/language.md): a count of the
        bit width or more gives 0 (``<<``) or the sign (``>>``), where LLVM's shifts are poison; a
        negative count stops the thread (Python raises ValueError), at compile time if constant."""
        if isinstance(right, Literal) and right.value < 0:
            raise KernelTypeError(f"negative shift count {right.value} (Python raises ValueError)")
        left, right = self.unify(left, right, symbol)
        bld, t = self.builder, left.value.type
        count = right.value
        if not isinstance(count, ir.Constant):
            self.guard(bld.icmp_signed(">=", count, ir.Constant(t, 0)),
                       lambda: self.record_status(INVALID_VALUE, -1, ir.Constant(I64, self.current_line),
                                                  SHIFT_COUNT))
        widest = ir.Constant(t, t.width - 1)
        too_far = bld.icmp_unsigned(">", count, widest)
        if op is ast.RShift:                     # the sign fills every bit: a shift by width - 1
            return Scalar(bld.ashr(left.value, bld.select(too_far, widest, count)), left.type)
        shifted = bld.shl(left.value, bld.select(too_far, ir.Constant(t, 0), count))
        return Scalar(bld.select(too_far, ir.Constant(t, 0), shifted), left.type)

    def visit_UnaryOp(self, node: ast.UnaryOp):
        operand = self.scalar(self.visit_condition(node.operand) if isinstance(node.op, ast.Not) else
                              self.visit(node.operand), "operand of a unary operator")
        if isinstance(node.op, ast.Not):
            if isinstance(operand, Literal):
                return Literal(not operand.value)
            return Scalar(self.builder.not_(self.truth(operand)), bool_)
        if isinstance(operand, Literal):
            fold = {ast.USub: operator.neg, ast.UAdd: operator.pos, ast.Invert: operator.invert}
            return Literal(fold[type(node.op)](operand.value))
        t = operand.type
        if isinstance(node.op, ast.UAdd):
            return operand
        if t == bool_:
            raise KernelTypeError("arithmetic on a bool; cast with int(...) first")
        if isinstance(node.op, ast.USub):
            neg = self.builder.fneg(operand.value) if t.is_float else self.builder.neg(operand.value)
            return Scalar(neg, t)
        if t.is_float:
            raise KernelTypeError("'~' needs an integer operand")
        return Scalar(self.builder.not_(operand.value), t)

    # --- comparisons and boolean logic ---------------------------------------------------

    def visit_Compare(self, node: ast.Compare):
        """``a < b < c`` evaluates b once and stops at the first false comparison."""
        left = self.visit(node.left)
        pieces = list(zip(node.ops, node.comparators))

        def chain(left, k):
            op, comparator = pieces[k]
            right = self.visit(comparator)
            result = self.compare(type(op), left, right)
            if k + 1 == len(pieces):
                return result
            return self.short_circuit(result, lambda: chain(right, k + 1), is_and=True)
        return chain(left, 0)

    def compare(self, op: type, left, right):
        if op not in COMPARISON:
            raise UnsupportedConstructError(f"comparison '{op.__name__}' is not supported in kernels")
        symbol = COMPARISON[op][1]
        left = self.scalar(left, f"left operand of '{symbol}'")
        right = self.scalar(right, f"right operand of '{symbol}'")
        if isinstance(left, Literal) and isinstance(right, Literal):
            return Literal(COMPARISON[op][0](left.value, right.value))
        types = {v.type for v in (left, right) if isinstance(v, Scalar)}
        if bool_ in types and types != {bool_} or (bool_ in types and symbol not in ("==", "!=")):
            raise KernelTypeError(f"comparison '{symbol}' between {describe(left)} and "
                                  f"{describe(right)} is not allowed")
        if types == {bool_} and any(isinstance(v, Literal) and rules.literal_kind(v.value) != "bool"
                                    for v in (left, right)):
            # ``flag == 2``: Python compares True as 1 (never equal to 2); an i1 constant would wrap 2 to 0
            number = next(v for v in (left, right) if isinstance(v, Literal))
            as_number = rules.i64 if rules.literal_kind(number.value) == "int" else self.default_float
            left, right = (self.convert(v, as_number) if isinstance(v, Scalar) else v for v in (left, right))
            left, right = self.unify(left, right, symbol)
        elif types == {bool_}:
            left, right = self.materialize(left, bool_), self.materialize(right, bool_)
        else:
            left, right = self.unify(left, right, symbol)
        b = self.builder
        if left.type.is_float:
            # ordered comparisons (false with NaN) except '!=' (true with NaN), like Python
            cmp = b.fcmp_unordered if symbol == "!=" else b.fcmp_ordered
            return Scalar(cmp(symbol, left.value, right.value), bool_)
        return Scalar(b.icmp_signed(symbol, left.value, right.value), bool_)

    def short_circuit(self, first, rest, *, is_and: bool):
        """``first and rest()`` / ``first or rest()`` as truth values, evaluating rest lazily."""
        if isinstance(first, Literal):
            if bool(first.value) != is_and:
                return Literal(bool(first.value))
            second = rest()
            return Literal(bool(second.value)) if isinstance(second, Literal) else \
                Scalar(self.truth(second), bool_)
        b = self.builder
        first_bit = self.truth(first)
        first_block = b.block
        rest_block, merge = self.new_block("logic.rhs"), self.new_block("logic.end")
        if is_and:
            b.cbranch(first_bit, rest_block, merge)
        else:
            b.cbranch(first_bit, merge, rest_block)
        b.position_at_end(rest_block)
        second_bit = self.truth(rest())
        rest_end = b.block
        b.branch(merge)
        b.position_at_end(merge)
        phi = b.phi(I1)
        phi.add_incoming(ir.Constant(I1, 0 if is_and else 1), first_block)
        phi.add_incoming(second_bit, rest_end)
        return Scalar(phi, bool_)

    def visit_condition(self, node: ast.expr):
        """An expression used for its truth only (``if``, ``while``, ``assert``, a conditional
        expression's test, ``not``): its ``and``/``or`` may mix bools and numbers."""
        self.mark_truth_only(node)
        return self.visit(node)

    def mark_truth_only(self, node: ast.expr) -> None:
        if isinstance(node, ast.BoolOp):
            self.truth_only_nodes = getattr(self, "truth_only_nodes", set()) | {id(node)}
            for value in node.values:
                self.mark_truth_only(value)
        elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            self.mark_truth_only(node.operand)

    def visit_BoolOp(self, node: ast.BoolOp):
        """``a and b`` / ``a or b`` with Python's value: the first operand whose truth ends the chain
        (falsy for ``and``, truthy for ``or``), else the last, each evaluated only if reached
        (``n or 1``, ``x and y``). Operands of one kind give a value of their common type; bools mixed
        with numbers are refused except where only the truth is used (``if n and flag:``)."""
        is_and = isinstance(node.op, ast.And)
        truth_only = id(node) in getattr(self, "truth_only_nodes", ())
        b = self.builder
        pending = []               # (value, its block, the next operand's block or None for the last)
        for k, expr in enumerate(node.values):
            value = self.scalar(self.visit(expr), f"operand of '{'and' if is_and else 'or'}'")
            last = k + 1 == len(node.values)
            if isinstance(value, Literal) and not last:
                if bool(value.value) == is_and:
                    continue       # ``True and x``, ``0 or x``: the chain goes on without a branch
                last = True        # ``0 and x``, ``5 or x``: this is the value, the rest never runs
            if last:
                pending.append((value, b.block, None))
                break
            following = self.new_block("logic.next")
            pending.append((value, b.block, following))
            b.position_at_end(following)
        kinds = {rules.literal_kind(v.value) if isinstance(v, Literal) else rules.kind(v.type) for v, _, _ in pending}
        if truth_only or kinds == {"bool"}:
            result_type = bool_
        elif "bool" in kinds:
            raise KernelTypeError(f"'{'and' if is_and else 'or'}' between a bool and a number gives one of "
                                  f"the operands in Python, not a bool; write bool(...) around the numbers, or a "
                                  f"conditional expression")
        else:
            result_type = self.common_type([v for v, _, _ in pending])
        if len(pending) == 1:      # no branch was made
            value = pending[0][0]
            if isinstance(value, Literal):
                return Literal(bool(value.value)) if result_type == bool_ else value
            return Scalar(self.truth(value), bool_) if result_type == bool_ else self.materialize(value, result_type)
        incoming, merge = [], self.new_block("logic.end")
        for value, block, following in pending:
            b.position_at_end(block)
            result = Scalar(self.truth(value), bool_) if result_type == bool_ else self.materialize(value, result_type)
            if following is None:
                b.branch(merge)
            elif is_and:
                b.cbranch(self.truth(value), following, merge)
            else:
                b.cbranch(self.truth(value), merge, following)
            incoming.append((result.value, b.block))
        b.position_at_end(merge)
        phi = b.phi(llvm_type(result_type))
        for value, block in incoming:
            phi.add_incoming(value, block)
        return Scalar(phi, result_type)

    def common_type(self, values) -> ScalarType:
        """The type several number operands meet in (as a chain of binary operators would)."""
        typed = [v.type for v in values if isinstance(v, Scalar)]
        if not typed:
            kinds = {rules.literal_kind(v.value) for v in values}
            return self.default_float if "float" in kinds else rules.i64
        t = typed[0]
        for other in typed[1:]:
            t = rules.promote(t, other)
        for v in values:
            if isinstance(v, Literal):
                t = rules.literal_adopts(v.value, t, self.default_float) if rules.kind(t) == "int" else t
        return t

    def visit_IfExp(self, node: ast.IfExp):
        """``a if c else b``: only the chosen side is evaluated."""
        condition = self.scalar(self.visit_condition(node.test), "condition")
        if isinstance(condition, Literal):
            return self.visit(node.body if condition.value else node.orelse)
        b = self.builder
        then_block, else_block, merge = (self.new_block(n) for n in ("ifexp.then", "ifexp.else",
                                                                      "ifexp.end"))
        b.cbranch(self.truth(condition), then_block, else_block)
        b.position_at_end(then_block)
        then_value = self.scalar(self.visit(node.body), "a conditional expression branch")
        then_end = b.block
        b.position_at_end(else_block)
        else_value = self.scalar(self.visit(node.orelse), "a conditional expression branch")
        else_end = b.block
        if isinstance(then_value, Literal) and isinstance(else_value, Literal):
            t = rules.default_literal_type(then_value.value, self.default_float)
            t2 = rules.default_literal_type(else_value.value, self.default_float)
            t = rules.promote(t, t2) or t if t != t2 else t
        elif isinstance(then_value, Literal):
            t = rules.literal_adopts(then_value.value, else_value.type, self.default_float)
        elif isinstance(else_value, Literal):
            t = rules.literal_adopts(else_value.value, then_value.type, self.default_float)
        else:
            t = then_value.type if then_value.type == else_value.type else \
                rules.promote(then_value.type, else_value.type)
        if t is None:
            raise KernelTypeError(f"the branches of a conditional expression have incompatible "
                                  f"types: {describe(then_value)} and {describe(else_value)}")
        incoming = []
        for value, end in ((then_value, then_end), (else_value, else_end)):
            b.position_at_end(end)
            incoming.append((self.materialize(value, t).value, b.block))
            b.branch(merge)
        b.position_at_end(merge)
        phi = b.phi(llvm_type(t))
        for value, block in incoming:
            phi.add_incoming(value, block)
        return Scalar(phi, t)

    # --- subscripts ----------------------------------------------------------------------

    def visit_Subscript(self, node: ast.Subscript):
        base = self.visit(node.value)
        if isinstance(base, tuple):
            index = self.visit(node.slice)
            if not isinstance(index, Literal) or rules.literal_kind(index.value) != "int":
                raise KernelTypeError("a tuple (such as x.shape) can only be indexed with a "
                                      "constant integer")
            try:
                return base[index.value]
            except IndexError:
                raise KernelTypeError(f"tuple index {index.value} out of range for a tuple of "
                                      f"{len(base)}") from None
        if isinstance(base, ArrayRef):
            address = self.element_address(base, node.slice)
            self.ctx.accessed(base, load=True, store=False)
            dtype = base.type.dtype           # arrays are element-aligned (the launcher checks)
            return Scalar(self.builder.load(address, typ=llvm_type(dtype), align=dtype.dtype.itemsize), dtype)
        raise KernelTypeError(f"{describe(base)} cannot be indexed")

    def call_intrinsic(self, name: str, args: list[ir.Value], t: ScalarType) -> ir.Value:
        """Call ``llvm.<name>.<f32|f64>`` with all arguments of type t."""
        suffix = "f32" if t.bits == 32 else "f64"
        lt = llvm_type(t)
        fn = self.ctx.declare(f"llvm.{name}.{suffix}", lt, [lt] * len(args))
        return self.builder.call(fn, args)


