"""Derivative rules of libm's special functions: inverse hyperbolics, the gamma family, Bessel
functions of integer order, the piecewise-constant or integer-valued ones, and C99's complex
functions (cexp, clog, csqrt, csin, ccos, csinh, ccosh, cabs, carg).

lgamma' and tgamma' need the digamma function, which libm lacks: ``digamma`` defines it in the
module (recurrence up to x >= 10, then the asymptotic series; reflection for x < 0), in double
precision for both float widths, so it runs on every target.
"""
from __future__ import annotations

import math

from ..ir.builder import Builder
from ..ir.core import Argument, Constant, Function, FunctionType, Value, f64
from .elementary_rules import _complex_pack, _complex_parts, atan2_partials, inverse_parts, zero_at_origin
from .rules import Rule, RuleContext, defpartials, defunary, defzero, register


def _c(ctx: RuleContext, like: Value, x: float) -> Constant:
    return ctx.const(like.type, x)


# |x| above which 1 + x² rounds to x² (1/x² below the type's epsilon) while x² is still finite
_SQUARE_DROPS_ONE = {16: 2.0 ** 6, 32: 2.0 ** 13, 64: 2.0 ** 27}


@defunary("call:asinh")
def _asinh(ctx, x, y):
    """1 / sqrt(x² + 1), as 1 / |x| where the 1 no longer counts: x² overflowed to inf above ~1e154
    and the derivative came out 0."""
    ax = ctx.math("fabs", x)
    big = ctx.fcmp("ogt", ax, _c(ctx, x, _SQUARE_DROPS_ONE.get(getattr(x.type, "bits", 0), 2.0 ** 60)))
    near = ctx.div(_c(ctx, x, 1.0), ctx.math("sqrt", ctx.add(ctx.mul(x, x), _c(ctx, x, 1.0))))
    return ctx.select(big, ctx.div(_c(ctx, x, 1.0), ax), near)


@defunary("call:acosh", strong_zero=True)
def _acosh(ctx, x, y):
    """1 / sqrt((x - 1)(x + 1)) as a product of square roots: no overflow of x², and x - 1 is exact
    near 1, where x² - 1 cancels."""
    one = _c(ctx, x, 1.0)
    return ctx.div(one, ctx.mul(ctx.math("sqrt", ctx.sub(x, one)), ctx.math("sqrt", ctx.add(x, one))))


@defunary("call:atanh", strong_zero=True)
def _atanh(ctx, x, y):
    return ctx.div(_c(ctx, x, 1.0), ctx.sub(_c(ctx, x, 1.0), ctx.mul(x, x)))


@defpartials("call:fdim")
def _fdim(ctx, inst):        # max(a - b, 0)
    a, b = ctx.operand(inst, 0), ctx.operand(inst, 1)
    above = ctx.fcmp("ogt", a, b)
    return [ctx.select(above, _c(ctx, a, 1.0), _c(ctx, a, 0.0)), ctx.select(above, _c(ctx, a, -1.0), _c(ctx, a, 0.0))]


@defpartials("call:nextafter", "call:nexttoward")
def _nextafter(ctx, inst):   # one ulp from x: the derivative of x, none through the direction
    return [_c(ctx, inst.operands[0], 1.0), None]


@defpartials("call:remainder")
def _remainder(ctx, inst):   # a - n b with n the integer nearest a / b, constant almost everywhere
    a, b, r = ctx.operand(inst, 0), ctx.operand(inst, 1), ctx.result(inst)
    n = ctx.math("rint", ctx.div(ctx.sub(a, r), b))
    return [_c(ctx, a, 1.0), ctx.neg(n)]


# integer-valued or piecewise constant: no derivative (results that are integers carry none anyway)
defzero("call:logb", "call:ilogb", "call:lrint", "call:llrint", "call:lround", "call:llround")


# ----------------------------------------------------------------------------- gamma family

def digamma(ctx: RuleContext, x: Value) -> Value:
    """ψ(x), through the module's ``adoffload.digamma`` (defined on first use)."""
    fn = ctx.module.functions.get("adoffload.digamma")
    if fn is None:
        fn = _define_digamma(ctx.module)
    if x.type == f64:
        return ctx.builder.call(fn, [x])
    wider = getattr(x.type, "bits", 0) > 64          # long double, fp128: psi in double precision
    psi = ctx.builder.call(fn, [ctx.cast("fptrunc" if wider else "fpext", x, f64)])
    return ctx.cast("fpext" if wider else "fptrunc", psi, x.type)


def _define_digamma(module) -> Function:
    fn = Function("adoffload.digamma", FunctionType(f64, (f64,)), [Argument(f64, "x", 0)],
                  linkage="internal", attributes={"nounwind"})
    module.add_function(fn)
    x = fn.args[0]
    entry, reflect, loop, series = (fn.add_block(n) for n in ("entry", "reflect", "loop", "series"))
    call = lambda b, name, *args: b.call_intrinsic(module, name, f64, list(args))
    c = lambda v: Constant(f64, v)
    b = Builder(entry)
    negative = b.fcmp("olt", x, c(0.0))
    b.cbranch(negative, reflect, loop)
    # ψ(x) = ψ(1 - x) - π / tan(π x) for x < 0 (a pole, inf or NaN, at the non-positive integers)
    b = Builder(reflect)
    tangent = call(b, "llvm.tan.f64", b.fmul(c(math.pi), x))
    shift = b.fneg(b.fdiv(c(math.pi), tangent))
    mirrored = b.fsub(c(1.0), x)
    b.br(loop)
    # ψ(x) = ψ(x + 1) - 1/x until x >= 10
    b = Builder(loop)
    z = b.phi(f64, [(x, entry), (mirrored, reflect)])
    acc = b.phi(f64, [(c(0.0), entry), (shift, reflect)])
    small = b.fcmp("olt", z, c(10.0))
    z_next = b.fadd(z, c(1.0))
    acc_next = b.fsub(acc, b.fdiv(c(1.0), z))
    z.operands.append(z_next)
    z.blocks.append(loop)
    acc.operands.append(acc_next)
    acc.blocks.append(loop)
    b.cbranch(small, loop, series)
    # log z - 1/(2z) - Σ B_2k / (2k z^2k), seven terms (the next is below 1e-17 for z >= 10)
    b = Builder(series)
    zf = b.phi(f64, [(z, loop)])
    accf = b.phi(f64, [(acc, loop)])
    inv2 = b.fdiv(c(1.0), b.fmul(zf, zf))
    poly = c(1.0 / 12.0)
    for coefficient in (691.0 / 32760.0, 1.0 / 132.0, 1.0 / 240.0, 1.0 / 252.0, 1.0 / 120.0, 1.0 / 12.0):
        poly = b.fsub(c(coefficient), b.fmul(inv2, poly))
    value = b.fsub(b.fsub(call(b, "llvm.log.f64", zf), b.fdiv(c(0.5), zf)), b.fmul(inv2, poly))
    b.ret(b.fadd(accf, value))
    return fn


@defunary("call:lgamma")
def _lgamma(ctx, x, y):
    return digamma(ctx, x)


@defunary("call:tgamma", "call:numba_gamma")   # numba_gamma: numba's math.gamma (Python's algorithm)
def _tgamma(ctx, x, y):
    return ctx.mul(y, digamma(ctx, x))


# ----------------------------------------------------------------------------- Bessel functions

def _libm(ctx: RuleContext, name: str, *args: Value) -> Value:
    suffix = "f" if args[-1].type != f64 else ""
    return ctx.builder.call_intrinsic(ctx.module, name + suffix, args[-1].type, list(args))


@defunary("call:j0")
def _j0(ctx, x, y):
    return ctx.neg(_libm(ctx, "j1", x))


@defunary("call:y0")
def _y0(ctx, x, y):
    return ctx.neg(_libm(ctx, "y1", x))


@defunary("call:j1")
def _j1(ctx, x, y):          # J1' = J0 - J1 / x
    return ctx.sub(_libm(ctx, "j0", x), ctx.div(y, x))


@defunary("call:y1")
def _y1(ctx, x, y):
    return ctx.sub(_libm(ctx, "y0", x), ctx.div(y, x))


def _bessel_n(name: str):
    def partials(ctx, inst):         # Z_n' = (Z_{n-1} - Z_{n+1}) / 2, for n of either sign
        n, x = ctx.operand(inst, 0), ctx.operand(inst, 1)
        one = Constant(n.type, 1)
        below = _libm(ctx, name, ctx.builder.sub(n, one), x)
        above = _libm(ctx, name, ctx.builder.add(n, one), x)
        return [None, ctx.mul(ctx.sub(below, above), _c(ctx, x, 0.5))]
    return partials


register("call:jn", Rule(partials=_bessel_n("jn")))
register("call:yn", Rule(partials=_bessel_n("yn")))


# ----------------------------------------------------------------------------- C99 complex functions
# ``double complex cexp(double complex)`` is ``{double, double} @cexp(double, double)`` in the
# x86-64 ABI and ``<2 x float> @cexpf(<2 x float>)`` for float. The holomorphic ones have one
# complex partial P = f'(z): tangent P·dz; for a real adjoint (u, v) of (Re q, Im q), z's adjoint
# is (u·Re P + v·Im P, v·Re P - u·Im P). cabs and carg are real functions of (Re z, Im z).

def _z(ctx: RuleContext, inst) -> tuple[Value, Value]:
    if len(inst.operands) == 2:
        return ctx.operand(inst, 0), ctx.operand(inst, 1)
    z = ctx.operand(inst, 0)
    return _complex_parts(ctx, z, 0), _complex_parts(ctx, z, 1)


def _dz(ctx: RuleContext, inst, tangents) -> tuple[Value, Value] | None:
    if all(t is None for t in tangents):
        return None
    if len(inst.operands) == 2:
        zero = ctx.const(inst.operands[0].type, 0.0)
        return tuple(t if t is not None else zero for t in tangents)
    return _complex_parts(ctx, tangents[0], 0), _complex_parts(ctx, tangents[0], 1)


def _z_adjoint(ctx: RuleContext, inst, re_: Value, im: Value) -> list[Value]:
    if len(inst.operands) == 2:
        return [re_, im]
    return [_complex_pack(ctx, inst.operands[0].type, re_, im)]


def _holomorphic(derivative):
    """A Rule from ``derivative(ctx, a, b, q_re, q_im) -> (Re P, Im P)``."""
    def partial(ctx, inst):
        a, b = _z(ctx, inst)
        q = ctx.result(inst)
        return derivative(ctx, a, b, _complex_parts(ctx, q, 0), _complex_parts(ctx, q, 1))

    def forward(ctx, inst, tangents):
        dz = _dz(ctx, inst, tangents)
        if dz is None:
            return None
        pr, pi = partial(ctx, inst)
        return _complex_pack(ctx, inst.type, ctx.sub(ctx.mul(pr, dz[0]), ctx.mul(pi, dz[1])),
                             ctx.add(ctx.mul(pr, dz[1]), ctx.mul(pi, dz[0])))

    def reverse(ctx, inst, adjoint):
        u, v = _complex_parts(ctx, adjoint, 0), _complex_parts(ctx, adjoint, 1)
        pr, pi = partial(ctx, inst)
        return _z_adjoint(ctx, inst, ctx.add(ctx.mul(u, pr), ctx.mul(v, pi)), ctx.sub(ctx.mul(v, pr), ctx.mul(u, pi)))
    return Rule(forward=forward, reverse=reverse)


def _inverse(ctx, a, b):
    """1/z as (re, im), scaled where |z|² underflows or overflows (clog's derivative was NaN at 1e-200)."""
    return tuple(inverse_parts(ctx, a, b))


_COMPLEX = {
    "cexp": lambda ctx, a, b, qr, qi: (qr, qi),
    "clog": lambda ctx, a, b, qr, qi: _inverse(ctx, a, b),
    "csqrt": lambda ctx, a, b, qr, qi: tuple(ctx.mul(p, _c(ctx, a, 0.5)) for p in _inverse(ctx, qr, qi)),
    "csin": lambda ctx, a, b, qr, qi: (ctx.mul(ctx.math("cos", a), ctx.math("cosh", b)),
                                       ctx.neg(ctx.mul(ctx.math("sin", a), ctx.math("sinh", b)))),
    "ccos": lambda ctx, a, b, qr, qi: (ctx.neg(ctx.mul(ctx.math("sin", a), ctx.math("cosh", b))),
                                       ctx.neg(ctx.mul(ctx.math("cos", a), ctx.math("sinh", b)))),
    "csinh": lambda ctx, a, b, qr, qi: (ctx.mul(ctx.math("cosh", a), ctx.math("cos", b)),
                                        ctx.mul(ctx.math("sinh", a), ctx.math("sin", b))),
    "ccosh": lambda ctx, a, b, qr, qi: (ctx.mul(ctx.math("sinh", a), ctx.math("cos", b)),
                                        ctx.mul(ctx.math("cosh", a), ctx.math("sin", b))),
}
for _name, _derivative in _COMPLEX.items():
    register(f"call:{_name}", _holomorphic(_derivative))


def _real_of_complex(partials):
    """A Rule for a real function of z from ``partials(ctx, a, b, result) -> (∂/∂Re z, ∂/∂Im z)``."""
    def forward(ctx, inst, tangents):
        dz = _dz(ctx, inst, tangents)
        if dz is None:
            return None
        pa, pb = partials(ctx, *_z(ctx, inst), ctx.result(inst))
        return ctx.add(ctx.strong_mul(pa, dz[0]), ctx.strong_mul(pb, dz[1]))

    def reverse(ctx, inst, adjoint):
        pa, pb = partials(ctx, *_z(ctx, inst), ctx.result(inst))
        return _z_adjoint(ctx, inst, ctx.strong_mul(pa, adjoint), ctx.strong_mul(pb, adjoint))
    return Rule(forward=forward, reverse=reverse)


register("call:cabs", _real_of_complex(lambda ctx, a, b, r: zero_at_origin(ctx, r, [ctx.div(a, r), ctx.div(b, r)])))


def _carg(ctx, a, b, angle):      # atan2(b, a)
    d_b, d_a = atan2_partials(ctx, b, a)
    return [d_a, d_b]


register("call:carg", _real_of_complex(_carg))


# ----------------------------------------------------------------------------- modf
# llvm.modf(x) = {x - trunc(x), trunc(x)}: the fraction moves with x, the integer part is piecewise
# constant. libm's modf(x, &ip) writes the integer part through memory, whose shadow this rule
# could not zero: that form is refused.

def _modf_pair(inst):
    from ..errors import DifferentiationError
    from ..ir.core import StructType
    from .rules import describe
    if not isinstance(inst.type, StructType):
        raise DifferentiationError(f"cannot differentiate {describe(inst)}: modf returning its integer part "
                                   f"through a pointer has no rule (llvm.modf, which returns both, has one)")
    return inst.type


def _modf_forward(ctx, inst, tangents):
    pair = _modf_pair(inst)
    if tangents[0] is None:
        return None
    return ctx.builder.emit("insertvalue", pair, [Constant(pair, None, kind="zero"), tangents[0]], indices=(0,))


def _modf_reverse(ctx, inst, adjoint):
    pair = _modf_pair(inst)
    return [ctx.builder.emit("extractvalue", pair.elements[0], [adjoint], indices=(0,))]


register("call:modf", Rule(forward=_modf_forward, reverse=_modf_reverse))
