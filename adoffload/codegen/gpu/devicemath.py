"""Device math in LLVM IR, for AMDGPU when ROCm's ocml bitcode is not installed.

Each function is generated with llvmlite.ir from nothing but +, *, fma, rint, bit casts
and selects, so it compiles for any target (and for the host, which is how the tests
check it against numpy). The f64 versions use classic argument reduction and Taylor /
series kernels, evaluated with fma and, where cancellation would cost accuracy
(``log`` inside ``pow``, the ``sin``/``cos`` reduction, ``exp(-x^2)`` in ``erf``), in
double-double. The f32 versions evaluate the f64 version and round once: within 1 ulp,
at f64 speed (fine on MI200/MI300, slow on RDNA; dedicated f32 kernels are a follow-up).

Limits: ``sin``/``cos``/``tan`` reduce with a 3-part Cody-Waite pi/2, exact for
|x| < 2^19 * pi/2 (about 8.2e5); beyond that accuracy degrades (no Payne-Hanek yet).
"""
from __future__ import annotations

import decimal
import functools
import math
from collections.abc import Callable

from llvmlite import ir

from ...errors import CompilationError

F64, F32, I1, I32, I64 = ir.DoubleType(), ir.FloatType(), ir.IntType(1), ir.IntType(32), ir.IntType(64)
INF, NAN = math.inf, math.nan

# Constants (values as in fdlibm / exact decimal expansions).
LOG2E = 1.4426950408889634
LN2_HI, LN2_LO = 6.93147180559945286227e-01, 2.319046813846299558e-17      # ln2 = HI + LO
LN2_HI_T, LN2_LO_T = 6.93147180369123816490e-01, 1.90821492927058770002e-10  # HI has 32 trailing zeros
PIO2_1, PIO2_2, PIO2_3 = 1.57079632673412561417e+00, 6.07710050630396597660e-11, 2.02226624871116645580e-21
PIO2_3T = 8.47842766036889956997e-32
TWO_OVER_PI = 6.36619772367581382433e-01
PI_HI, PI_LO = 3.141592653589793116, 1.2246467991473532e-16
PIO2_HI, PIO2_LO = 1.5707963267948966, 6.123233995736766e-17
PIO4_HI, PIO4_LO = 0.7853981633974483, 3.061616997868383e-17
TWO_OVER_SQRT_PI = 1.1283791670955126
INV_SQRT_PI = 0.5641895835477563

EXP_COEFFS = [1.0 / math.factorial(n) for n in range(14)]            # exp(r), |r| <= ln2/2
EXPM1_COEFFS = [1.0 / math.factorial(n) for n in range(1, 24)]       # expm1(u)/u, |u| <= 1.1
LOG_COEFFS = [2.0 / (2 * j + 3) for j in range(11)]                  # (2 atanh(s) - 2s) / s^3
SIN_COEFFS = [(-1) ** (j + 1) / math.factorial(2 * j + 3) for j in range(8)]
COS_COEFFS = [(-1) ** j / math.factorial(2 * j + 4) for j in range(8)]
ATAN_COEFFS = [(-1) ** (j + 1) / (2 * j + 3) for j in range(21)]
ERFC_FRACTION_DEPTH = 60


class _Ops:
    """Scalar f64 operations on an IRBuilder, named like the math they do."""

    def __init__(self, module: ir.Module, builder: ir.IRBuilder):
        self.m, self.b = module, builder

    def c(self, v: float) -> ir.Constant:
        return ir.Constant(F64, v)

    def intrinsic(self, name: str, *args):
        fn = self.m.globals.get(name) or ir.Function(self.m, ir.FunctionType(F64, [F64] * len(args)), name=name)
        return self.b.call(fn, list(args))

    def fma(self, a, b, c):
        return self.intrinsic("llvm.fma.f64", a, b, c)

    def fabs(self, a):
        return self.intrinsic("llvm.fabs.f64", a)

    def rint(self, a):
        return self.intrinsic("llvm.rint.f64", a)

    def copysign(self, a, sign):
        return self.intrinsic("llvm.copysign.f64", a, sign)

    def add(self, a, b): return self.b.fadd(a, b)
    def sub(self, a, b): return self.b.fsub(a, b)
    def mul(self, a, b): return self.b.fmul(a, b)
    def div(self, a, b): return self.b.fdiv(a, b)
    def neg(self, a): return self.b.fneg(a)
    def lt(self, a, b): return self.b.fcmp_ordered("<", a, b)
    def gt(self, a, b): return self.b.fcmp_ordered(">", a, b)
    def ge(self, a, b): return self.b.fcmp_ordered(">=", a, b)
    def eq(self, a, b): return self.b.fcmp_ordered("==", a, b)
    def ne(self, a, b): return self.b.fcmp_ordered("!=", a, b)   # ordered: false for NaN
    def isnan(self, a): return self.b.fcmp_unordered("uno", a, a)
    def sel(self, cond, a, b): return self.b.select(cond, a, b)
    def and_(self, a, b): return self.b.and_(a, b)
    def or_(self, a, b): return self.b.or_(a, b)
    def not_(self, a): return self.b.not_(a)

    def const(self, v):
        return v if isinstance(v, ir.Value) else self.c(v)

    def horner(self, x, coeffs):
        """coeffs[0] + coeffs[1] x + ... with fma."""
        acc = self.c(coeffs[-1])
        for k in reversed(coeffs[:-1]):
            acc = self.fma(acc, x, self.c(k))
        return acc

    def two_sum(self, a, b):
        s = self.add(a, b)
        bb = self.sub(s, a)
        return s, self.add(self.sub(a, self.sub(s, bb)), self.sub(b, bb))

    def fast_two_sum(self, a, b):         # needs |a| >= |b|
        s = self.add(a, b)
        return s, self.sub(b, self.sub(s, a))

    def pow2(self, k_i64):
        """2^k as a double for k in [-1022, 1023], from its bits."""
        bits = self.b.shl(self.b.add(k_i64, ir.Constant(I64, 1023)), ir.Constant(I64, 52))
        return self.b.bitcast(bits, F64)


# --- kernels shared by several functions --------------------------------------------------------

def _exp_dd(o: _Ops, xh, xl):
    """exp(xh + xl) for |xl| <= ulp(xh); overflow, underflow and NaN decided on xh."""
    k = o.rint(o.mul(xh, o.c(LOG2E)))
    r = o.fma(o.neg(k), o.c(LN2_HI), xh)
    r = o.fma(o.neg(k), o.c(LN2_LO), r)
    r = o.add(r, xl)
    p = o.horner(r, EXP_COEFFS)
    in_range = o.lt(o.fabs(xh), o.c(746.0))
    ki = o.b.fptosi(o.sel(in_range, k, o.c(0.0)), I64)
    half = o.b.ashr(ki, ir.Constant(I64, 1))            # split 2^k so each factor is normal
    result = o.mul(o.mul(p, o.pow2(half)), o.pow2(o.b.sub(ki, half)))
    result = o.sel(o.gt(xh, o.c(709.782712893384)), o.c(INF), result)
    result = o.sel(o.lt(xh, o.c(-745.1332191019412)), o.c(0.0), result)
    return o.sel(o.isnan(xh), xh, result)


def _log_dd(o: _Ops, x):
    """log(x) as a double-double (hi, lo) for finite x > 0 (subnormals included)."""
    b = o.b
    subnormal = o.lt(x, o.c(2.2250738585072014e-308))
    xs = o.sel(subnormal, o.mul(x, o.c(2.0 ** 54)), x)
    bits = b.bitcast(xs, I64)
    e = b.sub(b.and_(b.lshr(bits, ir.Constant(I64, 52)), ir.Constant(I64, 0x7FF)), ir.Constant(I64, 1022))
    e = b.select(subnormal, b.sub(e, ir.Constant(I64, 54)), e)
    mant = b.or_(b.and_(bits, ir.Constant(I64, 0x000FFFFFFFFFFFFF)), ir.Constant(I64, 0x3FE0000000000000))
    m = b.bitcast(mant, F64)                                # in [0.5, 1)
    low = o.lt(m, o.c(0.7071067811865476))
    m = o.sel(low, o.mul(m, o.c(2.0)), m)                   # in [sqrt(1/2), sqrt(2))
    e = b.select(low, b.sub(e, ir.Constant(I64, 1)), e)
    f = o.sub(m, o.c(1.0))                                  # exact
    d = o.add(o.c(2.0), f)
    d_lo = o.add(o.sub(o.c(2.0), d), f)
    s = o.div(f, d)                                         # log(m) = 2 atanh(s)
    rem = o.fma(o.neg(s), d, f)
    rem = o.fma(o.neg(s), d_lo, rem)
    s_lo = o.div(rem, d)
    z = o.mul(s, s)
    tail = o.mul(o.mul(s, z), o.horner(z, LOG_COEFFS))
    hi, lo = o.mul(s, o.c(2.0)), o.fma(s_lo, o.c(2.0), tail)
    ef = b.sitofp(e, F64)
    s1, err = o.two_sum(o.mul(ef, o.c(LN2_HI_T)), hi)
    lo_total = o.add(o.add(err, lo), o.mul(ef, o.c(LN2_LO_T)))
    return o.fast_two_sum(s1, lo_total)


def _trig_reduce(o: _Ops, x):
    """x = k pi/2 + (rh + rl), |rh| <= pi/4; returns (rh, rl, quadrant k mod 4 as i64)."""
    k = o.rint(o.mul(x, o.c(TWO_OVER_PI)))
    t = o.fma(o.neg(k), o.c(PIO2_1), x)                    # exact for |k| < 2^19
    u = o.mul(k, o.c(PIO2_2))                               # exact (33-bit constant)
    t2, err = o.two_sum(t, o.neg(u))
    u3 = o.mul(k, o.c(PIO2_3))
    rh0 = o.sub(t2, u3)
    rl0 = o.sub(o.sub(o.sub(t2, rh0), u3), o.sub(o.mul(k, o.c(PIO2_3T)), err))
    rh, rl = o.fast_two_sum(rh0, rl0)
    finite = o.lt(o.fabs(k), o.c(2.0 ** 62))
    q = o.b.and_(o.b.fptosi(o.sel(finite, k, o.c(0.0)), I64), ir.Constant(I64, 3))
    return rh, rl, q


def _sin_cos_kernel(o: _Ops, rh, rl):
    """(sin, cos) of rh + rl for |rh| <= pi/4 + tiny."""
    z = o.mul(rh, rh)
    sin = o.add(rh, o.fma(o.mul(rh, z), o.horner(z, SIN_COEFFS), rl))
    hz = o.mul(z, o.c(0.5))
    w = o.sub(o.c(1.0), hz)
    cos_tail = o.sub(o.mul(o.mul(z, z), o.horner(z, COS_COEFFS)), o.mul(rh, rl))
    cos = o.add(w, o.add(o.sub(o.sub(o.c(1.0), w), hz), cos_tail))
    return sin, cos


def _quadrant_select(o: _Ops, q, value_even, value_odd, negate_bit_offset: int):
    """Pick by quadrant: odd q swaps, and ((q + offset) & 2) negates."""
    b = o.b
    odd = b.icmp_unsigned("!=", b.and_(q, ir.Constant(I64, 1)), ir.Constant(I64, 0))
    v = o.sel(odd, value_odd, value_even)
    shifted = b.add(q, ir.Constant(I64, negate_bit_offset))
    negate = b.icmp_unsigned("!=", b.and_(shifted, ir.Constant(I64, 2)), ir.Constant(I64, 0))
    return o.sel(negate, o.neg(v), v)


def _expm1_small(o: _Ops, u):
    """expm1(u) for |u| <= 1.1 (Taylor, degree 23)."""
    return o.mul(u, o.horner(u, EXPM1_COEFFS))


def _atan_unit(o: _Ops, t):
    """atan(t) for t in [0, 1]."""
    big = o.gt(t, o.c(0.41421356237309503))
    u = o.sel(big, o.div(o.sub(t, o.c(1.0)), o.add(t, o.c(1.0))), t)
    z = o.mul(u, u)
    a = o.fma(o.mul(u, z), o.horner(z, ATAN_COEFFS), u)
    return o.sel(big, o.add(o.c(PIO4_HI), o.add(a, o.c(PIO4_LO))), a)


# --- the functions ---------------------------------------------------------------------------------

def _exp(o, x):
    return _exp_dd(o, x, o.c(0.0))


def _log(o, x):
    hi, _ = _log_dd(o, x)
    r = o.sel(o.eq(x, o.c(0.0)), o.c(-INF), hi)
    r = o.sel(o.lt(x, o.c(0.0)), o.c(NAN), r)
    r = o.sel(o.eq(x, o.c(INF)), x, r)
    return o.sel(o.isnan(x), x, r)


def _log2(o, x):
    hi, lo = _log_dd(o, x)
    v = o.fma(hi, o.c(LOG2E), o.mul(lo, o.c(LOG2E)))
    return _log_specials(o, x, v)


def _log10(o, x):
    hi, lo = _log_dd(o, x)
    v = o.fma(hi, o.c(0.4342944819032518), o.mul(lo, o.c(0.4342944819032518)))
    return _log_specials(o, x, v)


def _log_specials(o, x, v):
    r = o.sel(o.eq(x, o.c(0.0)), o.c(-INF), v)
    r = o.sel(o.lt(x, o.c(0.0)), o.c(NAN), r)
    r = o.sel(o.eq(x, o.c(INF)), x, r)
    return o.sel(o.isnan(x), x, r)


def _pow(o, x, y):
    ax = o.fabs(x)
    lh, ll = _log_dd(o, ax)
    ph = o.mul(y, lh)
    pl = o.fma(y, ll, o.fma(y, lh, o.neg(ph)))
    r = _exp_dd(o, ph, o.sel(o.lt(o.fabs(ph), o.c(INF)), pl, o.c(0.0)))
    y_int = o.eq(o.rint(y), y)
    half = o.mul(y, o.c(0.5))
    y_odd = o.and_(y_int, o.ne(o.rint(half), half))
    negative = o.lt(x, o.c(0.0))
    x_finite = o.lt(ax, o.c(INF))
    r = o.sel(o.and_(negative, y_odd), o.neg(r), r)
    r = o.sel(o.and_(o.and_(negative, o.not_(y_int)), x_finite), o.c(NAN), r)
    zero_r = o.sel(o.lt(y, o.c(0.0)), o.c(INF), o.c(0.0))
    r = o.sel(o.eq(ax, o.c(0.0)), o.sel(y_odd, o.copysign(zero_r, x), zero_r), r)
    inf_r = o.sel(o.lt(y, o.c(0.0)), o.c(0.0), o.c(INF))
    r = o.sel(o.eq(ax, o.c(INF)), o.sel(o.and_(y_odd, negative), o.neg(inf_r), inf_r), r)
    grows = o.b.icmp_unsigned("==", o.gt(ax, o.c(1.0)), o.gt(y, o.c(0.0)))
    y_inf_r = o.sel(o.eq(ax, o.c(1.0)), o.c(1.0), o.sel(grows, o.c(INF), o.c(0.0)))
    r = o.sel(o.eq(o.fabs(y), o.c(INF)), y_inf_r, r)
    r = o.sel(o.or_(o.isnan(x), o.isnan(y)), o.add(x, y), r)
    return o.sel(o.or_(o.eq(y, o.c(0.0)), o.eq(x, o.c(1.0))), o.c(1.0), r)


def _sin(o, x):
    rh, rl, q = _trig_reduce(o, x)
    s, c = _sin_cos_kernel(o, rh, rl)
    r = _quadrant_select(o, q, s, c, 0)
    r = o.sel(o.eq(o.fabs(x), o.c(INF)), o.c(NAN), r)
    return o.sel(o.eq(x, o.c(0.0)), x, r)          # keeps the sign of zero


def _cos(o, x):
    rh, rl, q = _trig_reduce(o, x)
    s, c = _sin_cos_kernel(o, rh, rl)
    r = _quadrant_select(o, q, c, s, 1)
    return o.sel(o.eq(o.fabs(x), o.c(INF)), o.c(NAN), r)


def _tan(o, x):
    rh, rl, q = _trig_reduce(o, x)
    s, c = _sin_cos_kernel(o, rh, rl)
    odd = o.b.icmp_unsigned("!=", o.b.and_(q, ir.Constant(I64, 1)), ir.Constant(I64, 0))
    r = o.sel(odd, o.neg(o.div(c, s)), o.div(s, c))
    r = o.sel(o.eq(o.fabs(x), o.c(INF)), o.c(NAN), r)
    return o.sel(o.eq(x, o.c(0.0)), x, r)


def _tanh(o, x):
    ax = o.fabs(x)
    two_ax = o.mul(ax, o.c(2.0))
    em = _expm1_small(o, two_ax)
    small = o.div(em, o.add(em, o.c(2.0)))
    big = o.sub(o.c(1.0), o.div(o.c(2.0), o.add(_exp(o, two_ax), o.c(1.0))))
    r = o.sel(o.lt(ax, o.c(0.55)), small, big)
    r = o.sel(o.gt(ax, o.c(22.0)), o.c(1.0), r)
    return o.copysign(r, x)


def _atan2(o, y, x):
    a, b_ = o.fabs(y), o.fabs(x)
    y_bigger = o.gt(a, b_)
    lo, hi = o.sel(y_bigger, b_, a), o.sel(y_bigger, a, b_)
    t = o.sel(o.eq(a, b_), o.c(1.0), o.div(lo, hi))
    t = o.sel(o.eq(hi, o.c(0.0)), o.c(0.0), t)
    theta = _atan_unit(o, t)
    theta = o.sel(y_bigger, o.add(o.c(PIO2_HI), o.sub(o.c(PIO2_LO), theta)), theta)
    x_negative = o.b.icmp_signed("<", o.b.bitcast(x, I64), ir.Constant(I64, 0))   # sign bit, -0 included
    theta = o.sel(x_negative, o.add(o.c(PI_HI), o.sub(o.c(PI_LO), theta)), theta)
    theta = o.sel(o.or_(o.isnan(x), o.isnan(y)), o.add(x, y), theta)
    return o.copysign(theta, y)


def _atan(o, x):
    return _atan2(o, x, o.c(1.0))


ERF_SMALL_COEFFS = [TWO_OVER_SQRT_PI * (-1) ** n / (math.factorial(n) * (2 * n + 1)) for n in range(13)]
ERF_CENTERS = (0.75, 1.25, 1.75)     # Taylor pieces covering [0.5, 2), |x - center| <= 0.25
ERF_PIECE_DEGREE = 24


@functools.cache
def erf_taylor_coefficients(center: float, degree: int) -> tuple[float, ...]:
    """erf(center + h) = sum_k a_k h^k, computed exactly enough in 60-digit decimal arithmetic:
    a_0 = erf(c), a_k = 2/sqrt(pi) (-1)^(k-1) H_(k-1)(c) e^(-c^2) / k!  (physicists' Hermite H)."""
    with decimal.localcontext() as ctx:
        ctx.prec = 60
        c = decimal.Decimal(center)
        pi = decimal.Decimal("3.14159265358979323846264338327950288419716939937510582097494459")
        two_over_sqrt_pi = 2 / pi.sqrt()
        gauss = (-c * c).exp()
        series, term, n = decimal.Decimal(1), decimal.Decimal(1), 1
        while term > decimal.Decimal(10) ** -55:
            term = term * 2 * c * c / (2 * n + 1)
            series += term
            n += 1
        coeffs = [two_over_sqrt_pi * c * gauss * series]
        h_prev, h = decimal.Decimal(0), decimal.Decimal(1)           # H_{-1} (unused), H_0
        for k in range(1, degree + 1):
            coeffs.append(two_over_sqrt_pi * (-1) ** (k - 1) * h * gauss / math.factorial(k))
            h_prev, h = h, 2 * c * h - 2 * (k - 1) * h_prev          # H_k = 2c H_(k-1) - 2(k-1) H_(k-2)
        return tuple(float(a) for a in coeffs)


def _erf(o, x):
    ax = o.fabs(x)
    z = o.mul(ax, ax)
    small = o.mul(ax, o.horner(z, ERF_SMALL_COEFFS))                  # |x| < 0.5: odd Taylor series
    # 0.5 <= |x| < 2: Taylor around the nearest center; coefficients picked by selects.
    piece_tables = [erf_taylor_coefficients(c, ERF_PIECE_DEGREE) for c in ERF_CENTERS]
    second, third = o.ge(ax, o.c(1.0)), o.ge(ax, o.c(1.5))

    def pick(values):
        return o.sel(third, o.const(values[2]), o.sel(second, o.const(values[1]), o.const(values[0])))

    h = o.sub(ax, pick([o.c(c) for c in ERF_CENTERS]))
    acc = pick([o.c(t[-1]) for t in piece_tables])
    for k in range(ERF_PIECE_DEGREE - 1, -1, -1):
        acc = o.fma(acc, h, pick([o.c(t[k]) for t in piece_tables]))
    middle = acc
    # |x| >= 2: erfc = e^{-x^2} / (sqrt(pi) K), K the Laplace continued fraction, evaluated bottom up.
    x2l = o.fma(ax, ax, o.neg(z))
    exp_neg_x2 = _exp_dd(o, o.neg(z), o.neg(x2l))
    k = ax
    for n in range(ERFC_FRACTION_DEPTH, 0, -1):
        k = o.add(ax, o.div(o.c(n / 2.0), k))
    big = o.sub(o.c(1.0), o.div(o.mul(exp_neg_x2, o.c(INV_SQRT_PI)), k))
    r = o.sel(o.lt(ax, o.c(2.0)), middle, big)
    r = o.sel(o.lt(ax, o.c(0.5)), small, r)
    r = o.sel(o.ge(ax, o.c(6.0)), o.c(1.0), r)
    return o.copysign(r, x)


def _rsqrt(o, x):
    """1/sqrt(x), the IEEE composition (the host's meaning of ``rsqrt``; ocml's is its own)."""
    return o.div(o.c(1.0), o.intrinsic("llvm.sqrt.f64", x))


# op -> (arity, f64 generator)
FUNCTIONS: dict[str, tuple[int, Callable]] = {
    "exp": (1, _exp), "log": (1, _log), "log2": (1, _log2), "log10": (1, _log10), "pow": (2, _pow),
    "sin": (1, _sin), "cos": (1, _cos), "tan": (1, _tan), "tanh": (1, _tanh),
    "atan2": (2, _atan2), "atan": (1, _atan), "erf": (1, _erf),
    "rsqrt": (1, _rsqrt),
}


def function_name(op: str, kind: str) -> str:
    return f"__ado_{op}_{kind}"


def supported(op: str) -> bool:
    return op in FUNCTIONS


def _define(module: ir.Module, op: str, kind: str) -> None:
    arity, generate = FUNCTIONS[op]
    ty = F64 if kind == "f64" else F32
    fn = ir.Function(module, ir.FunctionType(ty, [ty] * arity), name=function_name(op, kind))
    fn.attributes.add("alwaysinline")
    fn.attributes.add("nounwind")
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    o = _Ops(module, b)
    args = [a if kind == "f64" else b.fpext(a, F64) for a in fn.args]
    result = generate(o, *args)
    b.ret(result if kind == "f64" else b.fptrunc(result, F32))


def devicemath_module(names, triple: str = "", data_layout: str = "") -> str:
    """LLVM IR defining the requested ``__ado_<op>_<f32|f64>`` functions."""
    module = ir.Module(name="adoffload.devicemath")
    module.triple, module.data_layout = triple, data_layout
    for name in sorted(set(names)):
        parts = name.removeprefix("__ado_").rsplit("_", 1)
        if len(parts) != 2 or parts[0] not in FUNCTIONS or parts[1] not in ("f32", "f64"):
            raise CompilationError(f"no device math implementation for {name!r}; available: "
                                   f"{sorted(FUNCTIONS)} (install ROCm to use its ocml library)")
        _define(module, parts[0], parts[1])
    return str(module)
