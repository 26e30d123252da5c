"""Derivative rules as data: one table of partial derivatives serves forward and reverse mode.

A rule gives ``∂result/∂operand_i`` for each operand of an instruction, built at the
builder's insertion point from primal values (``ctx.primal(v)``: the value itself in forward
mode, the recomputed or cached copy in reverse mode). Forward mode combines them as
``tangent = Σ partial_i · tangent_i``; reverse mode adds ``partial_i · adjoint`` into each
operand's adjoint. An operand with no derivative (an exponent that is an integer, a rounding
function's argument) gets ``None``. Ops whose derivative is not a weighted sum (casts that
change type, select) override ``forward``/``reverse`` instead.

Keys are LLVM opcodes (``"fmul"``) or ``"call:<name>"`` with the callee normalized, so
``llvm.sin.f64``, ``sin``, ``sinf``, ``__nv_sin``, ``__nv_sinf`` and ``__ocml_sin_f32`` all
find ``"call:sin"``. Memory and control-flow ops (phi, load, store, getelementptr,
atomicrmw, memcpy/memset) belong to the mode engines, not to this table.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Callable

from ..errors import DifferentiationError
from ..ir.builder import Builder
from ..ir.core import (Constant, GlobalVariable, Function, Instruction, Module, Type, Value,
                       type_suffix, VectorType, const, i1)

PartialsFn = Callable[["RuleContext", Instruction], "list[Value | None]"]
ForwardFn = Callable[["RuleContext", Instruction, "list[Value | None]"], "Value | None"]
ReverseFn = Callable[["RuleContext", Instruction, Value], "list[Value | None]"]


@dataclass(frozen=True)
class Rule:
    """How to differentiate one op: partials (default), or explicit forward/reverse overrides.

    ``strong_zero``: a partial may be ±inf/NaN where the tangent or adjoint is exactly zero
    (sqrt at 0, log at 0, pow's exponent partial at x = 0); products with it then use
    ``strong_mul`` so that 0 · inf = 0, as Enzyme's CheckedMul does.
    """
    partials: PartialsFn | None = None
    forward: ForwardFn | None = None
    reverse: ReverseFn | None = None
    strong_zero: bool = False


RULES: dict[str, Rule] = {}


def register(key: str, rule: Rule) -> Rule:
    """Add ``rule`` under ``key``; registering a key twice is a programming error."""
    if key in RULES:
        raise ValueError(f"derivative rule {key!r} registered twice")
    RULES[key] = rule
    return rule


# ----------------------------------------------------------------------------- context

def constant(t: Type, x: float) -> Constant:
    """A float constant of scalar or vector type ``t`` (vectors are splats)."""
    if isinstance(t, VectorType):
        return Constant(t, tuple(const(t.element, x) for _ in range(t.count)), kind="aggregate")
    return const(t, x)


def constant_value(v: Value) -> float | None:
    """The float a scalar constant (or splat vector constant) holds, else None."""
    if not isinstance(v, Constant):
        return None
    if v.kind == "zero":
        return 0.0
    if v.kind == "scalar":      # (a long double's or fp128's literal is LLVM's hex text: not folded)
        return None if isinstance(v.value, str) else float(v.value)
    if v.kind == "aggregate" and v.value:
        xs = {constant_value(c) for c in v.value}
        return xs.pop() if len(xs) == 1 else None
    return None


class RuleContext:
    """What a rule may use: a builder at the insertion point, the module, primal values, helpers.

    The helpers fold the trivial cases (multiply by a constant 1, add a symbolic zero) so that
    rules can be written plainly and the emitted IR stays small.
    """

    def __init__(self, builder: Builder, module: Module, primal: Callable[[Value], Value] | None = None):
        self.builder = builder
        self.module = module
        self._primal = primal

    def primal(self, v: Value) -> Value:
        if self._primal is None or isinstance(v, (Constant, GlobalVariable, Function)):
            return v
        return self._primal(v)

    def operand(self, inst: Instruction, k: int) -> Value:
        return self.primal(inst.operands[k])

    def result(self, inst: Instruction) -> Value:
        return self.primal(inst)

    def const(self, t: Type, x: float) -> Constant:
        return constant(t, x)

    # ---- arithmetic that folds constants 0, 1, -1
    def add(self, a: Value | None, b: Value | None) -> Value | None:
        if a is None or constant_value(a) == 0.0:
            return b
        if b is None or constant_value(b) == 0.0:
            return a
        return self.builder.fadd(a, b)

    def sub(self, a: Value, b: Value) -> Value:
        if constant_value(b) == 0.0:
            return a
        if constant_value(a) == 0.0:
            return self.neg(b)
        return self.builder.fsub(a, b)

    def mul(self, a: Value, b: Value) -> Value:
        for x, y in ((a, b), (b, a)):
            c = constant_value(x)
            if c == 1.0:
                return y
            if c == -1.0:
                return self.neg(y)
        return self.builder.fmul(a, b)

    def div(self, a: Value, b: Value) -> Value:
        return a if constant_value(b) == 1.0 else self.builder.fdiv(a, b)

    def neg(self, a: Value) -> Value:
        c = constant_value(a)
        if c is not None and not isinstance(a.type, VectorType):
            return self.const(a.type, -c)
        return self.builder.fneg(a)

    def strong_mul(self, a: Value, b: Value) -> Value:
        """``a · b`` that is 0 whenever ``b`` is 0, even for a = ±inf or NaN. That zero is -0.0, the
        identity of ``fadd``: added into an adjoint or tangent it folds away (``x + -0.0`` is x bit
        for bit), where +0.0 would stay as an add."""
        product = self.mul(a, b)
        if isinstance(product, Constant) or constant_value(b) not in (None, 0.0):
            return product
        zero = self.const(b.type, -0.0)
        is_zero = self.builder.fcmp("oeq", b, zero)
        if isinstance(b.type, VectorType):
            is_zero.type = VectorType(i1, b.type.count)
        return self.builder.select(is_zero, zero, product)

    def scale(self, partial: Value | None, delta: Value | None, strong: bool = False) -> Value | None:
        """``partial · delta`` with symbolic zeros (None) propagated."""
        if partial is None or delta is None:
            return None
        c = constant_value(partial)
        if c == 0.0:
            return None
        if strong and (c is None or not math.isfinite(c)):    # a finite constant times 0 is 0 already
            return self.strong_mul(partial, delta)
        return self.mul(partial, delta)

    def select(self, cond: Value, a: Value, b: Value) -> Value:
        return self.builder.select(cond, a, b)

    def fcmp(self, predicate: str, a: Value, b: Value) -> Value:
        inst = self.builder.fcmp(predicate, a, b)
        if isinstance(a.type, VectorType):
            inst.type = VectorType(i1, a.type.count)
        return inst

    def cast(self, opcode: str, value: Value, to: Type) -> Value:
        return self.builder.cast(opcode, value, to)

    def math(self, name: str, *args: Value) -> Value:
        """Call the LLVM intrinsic ``llvm.<name>.<type>`` on float arguments of one type."""
        t = args[0].type
        return self.builder.call_intrinsic(self.module, f"llvm.{name}.{type_suffix(t)}", t, list(args))

    def powi(self, x: Value, n: Value) -> Value:
        name = f"llvm.powi.{type_suffix(x.type)}.{n.type}"
        return self.builder.call_intrinsic(self.module, name, x.type, [x, n])


# ----------------------------------------------------------------------------- combining

def forward_tangent(ctx: RuleContext, rule: Rule, inst: Instruction, tangents: list[Value | None],
                    partials: list[Value | None] | None = None) -> Value | None:
    """The tangent of ``inst`` given operand tangents (None = symbolic zero).

    ``partials`` may be passed in when the caller evaluates several tangent lanes with one set
    of partials (vector mode).
    """
    if rule.forward is not None:
        return rule.forward(ctx, inst, tangents)
    if all(t is None for t in tangents):
        return None
    if partials is None:
        partials = rule.partials(ctx, inst)
    total = None
    for p, t in zip(partials, tangents):
        total = ctx.add(total, ctx.scale(p, t, rule.strong_zero))
    return total


def reverse_contributions(ctx: RuleContext, rule: Rule, inst: Instruction, adjoint: Value,
                          strong: bool = False) -> list[Value | None]:
    """What ``inst``'s adjoint adds to each operand's adjoint (None: nothing). ``strong``: the adjoint
    may be a structural zero while a partial is not finite (zero_adjoints.py), so 0 · partial = 0."""
    if rule.reverse is not None:
        return rule.reverse(ctx, inst, adjoint)
    return [ctx.scale(p, adjoint, rule.strong_zero or strong) for p in rule.partials(ctx, inst)]


# ----------------------------------------------------------------------------- lookup

# Spellings of one function in libm, libdevice and ocml that differ from our key.
_ALIASES = {"fmin": "minnum", "fmax": "maxnum", "pown": "powi", "powr": "pow", "fmod": "frem",
            "fmuladd": "fma", "rint": "round", "nearbyint": "round", "roundeven": "round",
            "scalbn": "ldexp", "scalbln": "ldexp"}
_INTRINSIC_SUFFIX = re.compile(r"(\.(v\d+)?(f16|bf16|f32|f64|f80|f128|i\d+))+$")
_OCML_SUFFIX = re.compile(r"_(f16|f32|f64)$")


def callee_key(name: str) -> str:
    """Normalize a math function name to a rule key: ``__nv_sinf`` -> ``call:sin``."""
    base = name
    if base.startswith("llvm."):
        base = _INTRINSIC_SUFFIX.sub("", base[5:])
    elif base.startswith("__ocml_"):
        base = _OCML_SUFFIX.sub("", base[7:])
    else:
        if base.startswith("__nv_"):
            base = base[5:]
        if f"call:{base}" not in RULES and base not in _ALIASES and base.endswith(("f", "l")):
            base = base[:-1]            # C float and long double variants: sinf, erff, atan2f, sqrtl
    base = _ALIASES.get(base, base)
    return f"call:{base}"


def rule_key(inst: Instruction) -> str:
    if inst.opcode == "call":
        callee = inst.callee
        name = callee.name if isinstance(callee, Function) else "<indirect>"
        return callee_key(name)
    return inst.opcode


def describe(inst: Instruction) -> str:
    """``call @llvm.foo.f64 (at kernel.py:12)``: an instruction as error messages name it."""
    what = inst.opcode
    if inst.opcode == "call":   # an indirect call or inline asm names its callee as it is spelled
        callee = inst.callee
        what = f"call @{callee.name}" if isinstance(callee, Function) else f"call {callee.ref()[:80]}"
    elif inst.opcode == "atomicrmw":
        what = f"atomicrmw {inst.op}"
    where = f" at {inst.location}" if inst.location is not None else ""
    name = f" %{inst.name}" if inst.name else ""
    return f"'{what}'{name}{where}"


def rule_for(inst: Instruction) -> Rule:
    """The rule for ``inst``; DifferentiationError naming the op and its source line if none."""
    rule = RULES.get(rule_key(inst))
    if rule is None:
        raise DifferentiationError(
            f"cannot differentiate {describe(inst)}: no derivative rule for it, and it lies on an active path "
            f"(mark the inputs it depends on Const, or give the function a custom derivative)")
    return rule


# ----------------------------------------------------------------------------- rule helpers

def defpartials(*keys: str, strong_zero: bool = False):
    """Decorator: register a partials function under one or more keys."""
    def wrap(fn: PartialsFn) -> PartialsFn:
        for key in keys:
            register(key, Rule(partials=fn, strong_zero=strong_zero))
        return fn
    return wrap


def defunary(*keys: str, strong_zero: bool = False):
    """Decorator for one-operand ops: ``fn(ctx, x, y) -> dy/dx`` with x the operand, y the result."""
    def wrap(fn):
        def partials(ctx: RuleContext, inst: Instruction):
            return [fn(ctx, ctx.operand(inst, 0), ctx.result(inst))]
        for key in keys:
            register(key, Rule(partials=partials, strong_zero=strong_zero))
        return fn
    return wrap


def defzero(*keys: str) -> None:
    """Piecewise-constant ops: derivative zero almost everywhere (floor, round, int->float)."""
    for key in keys:
        register(key, Rule(partials=lambda ctx, inst: [None] * len(inst.operands)))


def supported_keys() -> list[str]:
    """Every op the table differentiates, sorted (for error messages and the docs)."""
    return sorted(RULES)
