"""The derivative rules of LLVM's float arithmetic and of the elementary functions (exp, log, pow,
trigonometry, complex arithmetic, rounding), as data: each registers the partials of its result by each
operand in rules.RULES, which forward and reverse mode both read (rules.py has the machinery; special.py
the special functions; vectors.py the vector lane ops)."""
from __future__ import annotations

import math

from ..ir.core import Constant, Instruction, StructType, Type, Value, VectorType, const, i32, type_suffix
from .rules import Rule, RuleContext, defpartials, defunary, defzero, register


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
def _frem(ctx, inst):       # n overflows for tiny b while a rem b is finite
    # a rem b = a - n b, n the integer quotient that fmod used: ∂/∂a = 1, ∂/∂b = -n. n is taken back from
    # the exact result, rint((a - r) / b), as for remainder: trunc(a / b) rounds a quotient just under an
    # integer up to it (fmod(1, 0.1) = 0.09999999999999995 is 1 - 9 b, but 1 / 0.1 = 10 exactly)
    a, b, r = ctx.operand(inst, 0), ctx.operand(inst, 1), ctx.result(inst)
    return [_c(ctx, a, 1.0), ctx.neg(ctx.math("rint", ctx.builder.fdiv(ctx.sub(a, r), b)))]


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


# The smallest normal number of each float format (x86_fp80, fp128: a double's, which is larger).
_SMALLEST_NORMAL = {16: 2.0 ** -14, 32: 2.0 ** -126}


def inverse_parts(ctx, a: Value, b: Value) -> list[Value]:
    """(a, -b) / (a² + b²): the real and imaginary parts of 1/(a + ib), and the partials of
    atan2(b, a). Where a² + b² is not a normal number (|a|, |b| under ~1e-154 at doubles, where it
    loses its digits and reaches 0, or over ~1e154, where it is inf) they are formed after scaling
    by s = max(|a|, |b|): (a/s) / ((a/s)² + (b/s)²) / s. 0 where an operand is infinite; NaN at 0."""
    r2 = ctx.add(ctx.mul(a, a), ctx.mul(b, b))
    plain = [ctx.div(a, r2), ctx.neg(ctx.div(b, r2))]
    s = ctx.math("maxnum", ctx.math("fabs", a), ctx.math("fabs", b))
    a_s, b_s = ctx.div(a, s), ctx.div(b, s)
    q = ctx.add(ctx.mul(a_s, a_s), ctx.mul(b_s, b_s))
    infinite = ctx.fcmp("oeq", s, _c(ctx, s, math.inf))
    scaled = [ctx.select(infinite, _c(ctx, p, 0.0), p)
              for p in (ctx.div(ctx.div(a_s, q), s), ctx.neg(ctx.div(ctx.div(b_s, q), s)))]
    element = getattr(r2.type, "element", r2.type)
    normal = ctx.fcmp("oge", r2, _c(ctx, r2, _SMALLEST_NORMAL.get(element.bits, 2.0 ** -1022)))
    finite = ctx.fcmp("olt", r2, _c(ctx, r2, math.inf))
    return [ctx.select(normal, ctx.select(finite, p, p_s), p_s) for p, p_s in zip(plain, scaled)]


def atan2_partials(ctx, y: Value, x: Value) -> list[Value]:
    """∂atan2(y, x)/∂y = x / r², ∂/∂x = -y / r² (inverse_parts: unscaled, r² underflowed to 0
    below ~1e-154 and the partials, ~1/r, came out 0 by the origin's convention: 5e199 at
    (1e-200, 2e-200)); 0 at the origin."""
    return zero_at_origin(ctx, ctx.math("maxnum", ctx.math("fabs", x), ctx.math("fabs", y)), inverse_parts(ctx, x, y))


@defpartials("call:atan2", strong_zero=True)
def _atan2(ctx, inst):       # atan2(y, x): ∂/∂y = x / r², ∂/∂x = -y / r²
    return atan2_partials(ctx, ctx.operand(inst, 0), ctx.operand(inst, 1))


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


def _pick(ctx, inst, predicate: str, quiet: bool = False):
    """Partials of min/max: 1 for the operand chosen, 0 for the other. ``quiet``: a NaN operand is
    ignored (``minnum``/``maxnum``: the other operand is the result), so a NaN second operand
    chooses the first; otherwise the first is chosen where ``predicate`` holds (ties by it)."""
    a, b = ctx.operand(inst, 0), ctx.operand(inst, 1)
    first = ctx.fcmp(predicate, a, b)
    if quiet:
        first = ctx.builder.emit("or", first.type, [first, ctx.fcmp("uno", b, b)])
    one, zero = _c(ctx, a, 1.0), _c(ctx, a, 0.0)
    return [ctx.select(first, one, zero), ctx.select(first, zero, one)]


# minnum/maxnum may return either operand on a tie (LLVM leaves it open, and under -ffast-math clang
# makes them from ``a > b ? a : b`` and from ``a >= b ? a : b`` alike): the derivative goes to the
# first, a one-sided derivative, as Enzyme's does.
register("call:minnum", Rule(partials=lambda ctx, inst: _pick(ctx, inst, "ole", quiet=True)))
register("call:maxnum", Rule(partials=lambda ctx, inst: _pick(ctx, inst, "oge", quiet=True)))
register("call:minimum", Rule(partials=lambda ctx, inst: _pick(ctx, inst, "ole")))
register("call:maximum", Rule(partials=lambda ctx, inst: _pick(ctx, inst, "oge")))
defzero("call:floor", "call:ceil", "call:trunc", "call:round")
# x86 packed max/min (std::arch's _mm_max_pd, _mm256_min_ps, ...): lane by lane ``a > b ? a : b``
# (``a < b ? a : b``), the second operand on equality and on any NaN, as MAXPD/MINPD define them.
# The scalar forms (max.sd, min.ss) keep the first operand's upper lanes: no rule, refused.
for _width in ("sse.{}.ps", "sse2.{}.pd", "avx.{}.ps.256", "avx.{}.pd.256"):
    register("call:x86." + _width.format("max"), Rule(partials=lambda ctx, inst: _pick(ctx, inst, "ogt")))
    register("call:x86." + _width.format("min"), Rule(partials=lambda ctx, inst: _pick(ctx, inst, "olt")))
