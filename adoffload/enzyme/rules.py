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
from ..ir.core import (Constant, FloatType, GlobalVariable, Function, Instruction, Module, StructType,
                       Type, Value, type_suffix, VectorType, const, i1, i32)

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
        """``a · b`` that is 0 whenever ``b`` is 0, even for a = ±inf or NaN."""
        product = self.mul(a, b)
        if isinstance(product, Constant) or constant_value(b) not in (None, 0.0):
            return product
        zero = self.const(b.type, 0.0)
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


def _c(ctx: RuleContext, like: Value, x: float) -> Constant:
    return ctx.const(like.type, x)


# ----------------------------------------------------------------------------- arithmetic

@defpartials("fadd")
def _fadd(ctx, inst):
    t = inst.type
    return [ctx.const(t, 1.0), ctx.const(t, 1.0)]


@defpartials("fsub")
def _fsub(ctx, inst):
    t = inst.type
    return [ctx.const(t, 1.0), ctx.const(t, -1.0)]


@defpartials("fmul")
def _fmul(ctx, inst):
    return [ctx.operand(inst, 1), ctx.operand(inst, 0)]


@defpartials("fdiv", strong_zero=True)
def _fdiv(ctx, inst):       # ∂/∂b = -q/b overflows for tiny b (1e-160) while q is finite
    b, q = ctx.operand(inst, 1), ctx.result(inst)
    inv_b = ctx.div(_c(ctx, b, 1.0), b)
    return [inv_b, ctx.neg(ctx.div(q, b))]


@defpartials("fneg")
def _fneg(ctx, inst):
    return [ctx.const(inst.type, -1.0)]


@defpartials("frem", "call:frem", strong_zero=True)
def _frem(ctx, inst):       # trunc(a / b) overflows for tiny b while a rem b is finite
    # a rem b = a - b * trunc(a / b): ∂/∂a = 1, ∂/∂b = -trunc(a / b)
    a, b = ctx.operand(inst, 0), ctx.operand(inst, 1)
    return [_c(ctx, a, 1.0), ctx.neg(ctx.math("trunc", ctx.builder.fdiv(a, b)))]


@defpartials("call:fma")
def _fma(ctx, inst):
    a, b = ctx.operand(inst, 0), ctx.operand(inst, 1)
    return [b, a, _c(ctx, a, 1.0)]


# ----------------------------------------------------------------------------- casts and select

def _cast_forward(ctx, inst, tangents):
    t = tangents[0]
    return None if t is None else ctx.cast(inst.opcode, t, inst.type)


def _cast_reverse(inverse: str):
    def reverse(ctx, inst, adjoint):
        return [ctx.cast(inverse, adjoint, inst.operands[0].type)]
    return reverse


register("fpext", Rule(forward=_cast_forward, reverse=_cast_reverse("fptrunc")))
register("fptrunc", Rule(forward=_cast_forward, reverse=_cast_reverse("fpext")))
defzero("sitofp", "uitofp")


def _select_forward(ctx, inst, tangents):
    _, ta, tb = tangents
    if ta is None and tb is None:
        return None
    zero = ctx.const(inst.type, 0.0)
    return ctx.select(ctx.primal(inst.operands[0]), ta if ta is not None else zero,
                      tb if tb is not None else zero)


def _select_reverse(ctx, inst, adjoint):
    cond, zero = ctx.primal(inst.operands[0]), ctx.const(inst.type, 0.0)
    return [None, ctx.select(cond, adjoint, zero), ctx.select(cond, zero, adjoint)]


register("select", Rule(forward=_select_forward, reverse=_select_reverse))


# ----------------------------------------------------------------------------- exp and log

@defunary("call:exp")
def _exp(ctx, x, y):
    return y


@defunary("call:exp2")
def _exp2(ctx, x, y):
    return ctx.mul(y, _c(ctx, x, math.log(2.0)))


@defunary("call:exp10")
def _exp10(ctx, x, y):
    return ctx.mul(y, _c(ctx, x, math.log(10.0)))


@defunary("call:expm1")
def _expm1(ctx, x, y):
    return ctx.add(y, _c(ctx, x, 1.0))


@defunary("call:log", strong_zero=True)
def _log(ctx, x, y):
    return ctx.div(_c(ctx, x, 1.0), x)


@defunary("call:log2", strong_zero=True)
def _log2(ctx, x, y):
    return ctx.div(_c(ctx, x, 1.0), ctx.mul(x, _c(ctx, x, math.log(2.0))))


@defunary("call:log10", strong_zero=True)
def _log10(ctx, x, y):
    return ctx.div(_c(ctx, x, 1.0), ctx.mul(x, _c(ctx, x, math.log(10.0))))


@defunary("call:log1p", strong_zero=True)
def _log1p(ctx, x, y):
    return ctx.div(_c(ctx, x, 1.0), ctx.add(x, _c(ctx, x, 1.0)))


@defunary("call:sqrt", strong_zero=True)
def _sqrt(ctx, x, y):
    return ctx.div(_c(ctx, x, 0.5), y)


@defunary("call:rsqrt", strong_zero=True)
def _rsqrt(ctx, x, y):       # y = x^-1/2, dy/dx = -y^3 / 2
    return ctx.mul(_c(ctx, x, -0.5), ctx.mul(y, ctx.mul(y, y)))


@defunary("call:cbrt", strong_zero=True)
def _cbrt(ctx, x, y):        # dy/dx = 1 / (3 y^2)
    return ctx.div(_c(ctx, x, 1.0), ctx.mul(_c(ctx, x, 3.0), ctx.mul(y, y)))


@defpartials("call:pow", strong_zero=True)
def _pow(ctx, inst):
    # ∂/∂x = p·x^(p-1), 0 when p = 0 (x^-1 is inf at x = 0); ∂/∂p = z·log x, 0 when z = 0
    # (x = 0: log 0 = -inf, but 0^p is flat in p)
    x, p, z = ctx.operand(inst, 0), ctx.operand(inst, 1), ctx.result(inst)
    dx = ctx.strong_mul(ctx.math("pow", x, ctx.sub(p, _c(ctx, p, 1.0))), p)
    dp = None if isinstance(inst.operands[1], Constant) else ctx.strong_mul(ctx.math("log", x), z)
    return [dx, dp]


@defpartials("call:powi", strong_zero=True)
def _powi(ctx, inst):       # n·x^(n-1), 0 when n = 0 (x^-1 is inf at x = 0)
    x, n = ctx.operand(inst, 0), ctx.operand(inst, 1)
    n_minus_1 = ctx.builder.sub(n, const(n.type, 1))
    return [ctx.strong_mul(ctx.powi(x, n_minus_1), ctx.cast("sitofp", n, x.type)), None]


# ----------------------------------------------------------------------------- exponent scaling
# ldexp(x, e) = x·2^e is linear in x: its tangent is ldexp(dx, e), exact and free of the
# overflow a computed 2^e would bring. frexp(x) = {m, e} with m = x·2^-e (e piecewise constant).

def _ldexp(ctx: RuleContext, x: Value, e: Value) -> Value:
    return ctx.builder.call_intrinsic(ctx.module, f"llvm.ldexp.{type_suffix(x.type)}.{type_suffix(e.type)}",
                                      x.type, [x, e])


def _ldexp_forward(ctx, inst, tangents):
    return None if tangents[0] is None else _ldexp(ctx, tangents[0], ctx.operand(inst, 1))


def _ldexp_reverse(ctx, inst, adjoint):
    return [_ldexp(ctx, adjoint, ctx.operand(inst, 1)), None]


register("call:ldexp", Rule(forward=_ldexp_forward, reverse=_ldexp_reverse))


def _frexp_exponent(ctx: RuleContext, inst: Instruction) -> Value:
    """-e of frexp(x), recomputed from x with llvm.frexp (libm's frexp returns e through memory)."""
    x = ctx.operand(inst, 0)
    int_type = VectorType(i32, x.type.count) if isinstance(x.type, VectorType) else i32
    pair_type = StructType((x.type, int_type))
    pair = ctx.builder.call_intrinsic(ctx.module, f"llvm.frexp.{type_suffix(x.type)}.{type_suffix(int_type)}",
                                      pair_type, [x])
    exponent = ctx.builder.emit("extractvalue", int_type, [pair], indices=(1,))
    return ctx.builder.sub(Constant(int_type, None, kind="zero"), exponent)


def _frexp_forward(ctx, inst, tangents):
    if tangents[0] is None:
        return None
    dm = _ldexp(ctx, tangents[0], _frexp_exponent(ctx, inst))
    if isinstance(inst.type, StructType):   # llvm.frexp: {mantissa, exponent}
        return ctx.builder.emit("insertvalue", inst.type, [Constant(inst.type, None, kind="zero"), dm], indices=(0,))
    return dm                                # libm frexp(x, &e): the mantissa


def _frexp_reverse(ctx, inst, adjoint):
    if isinstance(inst.type, StructType):
        adjoint = ctx.builder.emit("extractvalue", inst.type.elements[0], [adjoint], indices=(0,))
    return [_ldexp(ctx, adjoint, _frexp_exponent(ctx, inst))] + [None] * (len(inst.operands) - 1)


register("call:frexp", Rule(forward=_frexp_forward, reverse=_frexp_reverse))


# ----------------------------------------------------------------------------- complex arithmetic
# clang lowers C ``_Complex`` products and quotients to compiler-rt's __muldc3/__divdc3
# (``{re, im}`` results; float: __mulsc3/__divsc3, ``<2 x float>``). Both are holomorphic in
# z = a + ib and w = c + id, so one complex partial per input, P = ∂q/∂z, gives the tangent
# dq = P·dz and, for a real adjoint (u, v) of (Re q, Im q), the adjoint of (re, im) of z:
# (u·Re P + v·Im P, v·Re P - u·Im P). The partials are those of the finite-case formulas.

def _complex_parts(ctx, value: Value, k: int) -> Value:
    op = "extractelement" if isinstance(value.type, VectorType) else "extractvalue"
    element = value.type.element if isinstance(value.type, VectorType) else value.type.elements[k]
    if op == "extractelement":
        return ctx.builder.emit(op, element, [value, const(i32, k)])
    return ctx.builder.emit(op, element, [value], indices=(k,))


def _complex_pack(ctx, t: Type, re_: Value, im: Value) -> Value:
    zero = Constant(t, None, kind="zero")
    if isinstance(t, VectorType):
        first = ctx.builder.emit("insertelement", t, [zero, re_, const(i32, 0)])
        return ctx.builder.emit("insertelement", t, [first, im, const(i32, 1)])
    first = ctx.builder.emit("insertvalue", t, [zero, re_], indices=(0,))
    return ctx.builder.emit("insertvalue", t, [first, im], indices=(1,))


def _cmul(ctx, a, b, c, d):
    return ctx.sub(ctx.mul(a, c), ctx.mul(b, d)), ctx.add(ctx.mul(a, d), ctx.mul(b, c))


def _complex_partials(ctx, inst, divide: bool):
    """(∂q/∂z, ∂q/∂w) as (re, im) pairs: w and z for a product; 1/w and -q/w for a quotient."""
    a, b, c, d = (ctx.operand(inst, k) for k in range(4))
    if not divide:
        return (c, d), (a, b)
    den = ctx.add(ctx.mul(c, c), ctx.mul(d, d))
    inv = (ctx.div(c, den), ctx.neg(ctx.div(d, den)))
    q = ctx.result(inst)
    qr, qi = _complex_parts(ctx, q, 0), _complex_parts(ctx, q, 1)
    minus_q_over_w = _cmul(ctx, ctx.neg(qr), ctx.neg(qi), *inv)
    return inv, minus_q_over_w


def _complex_forward(divide: bool):
    def forward(ctx, inst, tangents):
        if all(t is None for t in tangents):
            return None
        zero = ctx.const(inst.operands[0].type, 0.0)
        da, db, dc, dd = (t if t is not None else zero for t in tangents)
        (pr, pi), (sr, si) = _complex_partials(ctx, inst, divide)
        re1, im1 = _cmul(ctx, pr, pi, da, db)
        re2, im2 = _cmul(ctx, sr, si, dc, dd)
        return _complex_pack(ctx, inst.type, ctx.add(re1, re2), ctx.add(im1, im2))
    return forward


def _complex_reverse(divide: bool):
    def reverse(ctx, inst, adjoint):
        u, v = _complex_parts(ctx, adjoint, 0), _complex_parts(ctx, adjoint, 1)
        out = []
        for pr, pi in _complex_partials(ctx, inst, divide):
            out += [ctx.add(ctx.mul(u, pr), ctx.mul(v, pi)), ctx.sub(ctx.mul(v, pr), ctx.mul(u, pi))]
        return out
    return reverse


for _name, _divide in (("__muldc3", False), ("__mulsc3", False), ("__divdc3", True), ("__divsc3", True)):
    register(f"call:{_name}", Rule(forward=_complex_forward(_divide), reverse=_complex_reverse(_divide)))


# ----------------------------------------------------------------------------- trigonometry

@defunary("call:sin")
def _sin(ctx, x, y):
    return ctx.math("cos", x)


@defunary("call:cos")
def _cos(ctx, x, y):
    return ctx.neg(ctx.math("sin", x))


@defunary("call:tan")
def _tan(ctx, x, y):         # 1 + y² cannot overflow: |tan| <= 1.6e16 at doubles (2.3e7 at floats)
    return ctx.add(_c(ctx, x, 1.0), ctx.mul(y, y))


@defunary("call:asin", strong_zero=True)
def _asin(ctx, x, y):
    return ctx.div(_c(ctx, x, 1.0), ctx.math("sqrt", ctx.sub(_c(ctx, x, 1.0), ctx.mul(x, x))))


@defunary("call:acos", strong_zero=True)
def _acos(ctx, x, y):
    return ctx.div(_c(ctx, x, -1.0), ctx.math("sqrt", ctx.sub(_c(ctx, x, 1.0), ctx.mul(x, x))))


@defunary("call:atan")
def _atan(ctx, x, y):
    return ctx.div(_c(ctx, x, 1.0), ctx.add(_c(ctx, x, 1.0), ctx.mul(x, x)))


def zero_at_origin(ctx, norm: Value, partials: list[Value]) -> list[Value]:
    """Partials of the form v / |(x, y)|^k are 0/0 at the origin, where the function has no
    derivative: they are 0 there by convention (a subgradient, as for |x| at 0), so the
    modes agree (reverse mode would otherwise carry NaN into partials that are exactly 0)."""
    at_origin = ctx.fcmp("oeq", norm, _c(ctx, norm, 0.0))
    return [ctx.select(at_origin, _c(ctx, p, 0.0), p) for p in partials]


@defpartials("call:atan2", strong_zero=True)
def _atan2(ctx, inst):       # atan2(y, x): ∂/∂y = x / r², ∂/∂x = -y / r²
    y, x = ctx.operand(inst, 0), ctx.operand(inst, 1)
    r2 = ctx.add(ctx.mul(x, x), ctx.mul(y, y))
    return zero_at_origin(ctx, r2, [ctx.div(x, r2), ctx.neg(ctx.div(y, r2))])


@defpartials("call:hypot", strong_zero=True)
def _hypot(ctx, inst):
    a, b, h = ctx.operand(inst, 0), ctx.operand(inst, 1), ctx.result(inst)
    return zero_at_origin(ctx, h, [ctx.div(a, h), ctx.div(b, h)])


@defunary("call:sinh")
def _sinh(ctx, x, y):
    return ctx.math("cosh", x)


@defunary("call:cosh")
def _cosh(ctx, x, y):
    return ctx.math("sinh", x)


@defunary("call:tanh")
def _tanh(ctx, x, y):
    return ctx.sub(_c(ctx, x, 1.0), ctx.mul(y, y))


def _gauss(ctx, x, scale):   # scale · exp(-x²), the derivative of erf up to sign
    return ctx.mul(_c(ctx, x, scale), ctx.math("exp", ctx.neg(ctx.mul(x, x))))


@defunary("call:erf")
def _erf(ctx, x, y):
    return _gauss(ctx, x, 2.0 / math.sqrt(math.pi))


@defunary("call:erfc")
def _erfc(ctx, x, y):
    return _gauss(ctx, x, -2.0 / math.sqrt(math.pi))


# ----------------------------------------------------------------------------- piecewise

@defunary("call:fabs")
def _fabs(ctx, x, y):
    return ctx.math("copysign", _c(ctx, x, 1.0), x)


@defpartials("call:copysign")
def _copysign(ctx, inst):    # |a| with b's sign: ∂/∂a = sign(a)·sign(b); b only through its sign
    a, b = ctx.operand(inst, 0), ctx.operand(inst, 1)
    one = _c(ctx, a, 1.0)
    return [ctx.mul(ctx.math("copysign", one, a), ctx.math("copysign", one, b)), None]


def _pick(ctx, inst, predicate: str):
    """Partials of min/max: 1 for the operand chosen, 0 for the other."""
    a, b = ctx.operand(inst, 0), ctx.operand(inst, 1)
    first = ctx.fcmp(predicate, a, b)
    one, zero = _c(ctx, a, 1.0), _c(ctx, a, 0.0)
    return [ctx.select(first, one, zero), ctx.select(first, zero, one)]


register("call:minnum", Rule(partials=lambda ctx, inst: _pick(ctx, inst, "ole")))
register("call:maxnum", Rule(partials=lambda ctx, inst: _pick(ctx, inst, "oge")))
register("call:minimum", Rule(partials=lambda ctx, inst: _pick(ctx, inst, "ole")))
register("call:maximum", Rule(partials=lambda ctx, inst: _pick(ctx, inst, "oge")))
defzero("call:floor", "call:ceil", "call:trunc", "call:round")
# x86 packed max/min (std::arch's _mm_max_pd, _mm256_min_ps, ...): lane by lane ``a > b ? a : b``
# (``a < b ? a : b``), the second operand on equality and on any NaN, as MAXPD/MINPD define them.
# The scalar forms (max.sd, min.ss) keep the first operand's upper lanes: no rule, refused.
for _width in ("sse.{}.ps", "sse2.{}.pd", "avx.{}.ps.256", "avx.{}.pd.256"):
    register("call:x86." + _width.format("max"), Rule(partials=lambda ctx, inst: _pick(ctx, inst, "ogt")))
    register("call:x86." + _width.format("min"), Rule(partials=lambda ctx, inst: _pick(ctx, inst, "olt")))


def supported_keys() -> list[str]:
    """Every op this table differentiates, sorted (for error messages and the docs)."""
    return sorted(RULES)
