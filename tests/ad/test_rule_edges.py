"""Derivative rules at their edge values and the exponent-scaling rules (frexp, ldexp), on
one-instruction LLVM functions through ``ado.from_llvm`` + ``autodiff``, in both modes.

Each check uses two oracles: central differences where the function is smooth around the point,
and the identity <J v, w> = <v, Jᵀ w> between forward and reverse mode. The edge cases pin
strong zeros: a partial that is ±inf or NaN at a point where the tangent or adjoint it
multiplies is exactly 0 must contribute 0 (0·log 0 in d/dy pow(0, y); -q/b for b = 1e-160)."""
from __future__ import annotations

import math

import numpy as np
import pytest

import adoffload as ado
from adoffload.enzyme.api import Active, Duplicated, Forward, Reverse, autodiff
from adoffload.errors import DifferentiationError


def _module(body: str, declarations: str = "", params: str = "double %x, double %y") -> ado.foreign.ForeignModule:
    # not canonicalized: instcombine would fold some cases (powi(x, 0) -> 1.0) before the rule sees them
    return ado.from_llvm(f"{declarations}\ndefine double @f({params}) {{\n{body}\n}}\n", canonical=False)


def _forward(fn, point, tangent, ints=()):
    args = [Duplicated(float(p), float(t)) for p, t in zip(point, tangent)]
    return autodiff(Forward, fn, *args, *ints)


def _gradient(fn, point, ints=()):
    return np.array(autodiff(Reverse, fn, *[Active(float(p)) for p in point], *ints)[:len(point)])


def _central(fn, point, k, h, ints=()):
    up, down = list(point), list(point)
    up[k] += h
    down[k] -= h
    return (fn(*up, *ints) - fn(*down, *ints)) / (2 * h)


def check_both_oracles(fn, point, ints=(), h=1e-6, rtol=1e-6, fd_axes=None, seed=0):
    """Forward columns vs central differences (on ``fd_axes``), and <J v, w> = <v, Jᵀ w>."""
    n = len(point)
    columns = np.array([_forward(fn, point, np.eye(n)[k], ints) for k in range(n)])
    gradient = _gradient(fn, point, ints)
    np.testing.assert_allclose(gradient, columns, rtol=1e-12)
    for k in (range(n) if fd_axes is None else fd_axes):
        assert columns[k] == pytest.approx(_central(fn, point, k, h, ints), rel=rtol, abs=rtol), k
    rng = np.random.default_rng(seed)
    v, w = rng.standard_normal(n), rng.standard_normal()
    jv = _forward(fn, point, v, ints)
    assert jv * w == pytest.approx(float(v @ (gradient * w)), rel=1e-12, abs=1e-300)
    return columns


_POW = "declare double @llvm.pow.f64(double, double)"


def test_pow_exponent_partial_is_a_strong_zero_at_base_zero():
    """d/dy 0^y = 0 (0^y is flat for y > 0), though log 0 = -inf; d/dx at (0, 1) is 1."""
    fn = _module("  %z = call double @llvm.pow.f64(double %x, double %y)\n  ret double %z", _POW)["f"]
    columns = check_both_oracles(fn, (0.0, 1.0), fd_axes=[1])
    assert columns.tolist() == [1.0, 0.0]
    assert _forward(fn, (0.0, 2.5), (0.0, 1.0)) == 0.0
    assert _gradient(fn, (0.0, 2.5)).tolist() == [0.0, 0.0]


def test_pow_base_partial_is_a_strong_zero_for_exponent_zero():
    """d/dx x^0 = 0, though 0 · x^-1 at x = 0 is 0 · inf."""
    fn = _module("  %z = call double @llvm.pow.f64(double %x, double %y)\n  ret double %z", _POW)["f"]
    assert _forward(fn, (0.0, 0.0), (1.0, 0.0)) == 0.0
    assert _gradient(fn, (0.0, 0.0))[0] == 0.0
    check_both_oracles(fn, (1.7, 2.3))


@pytest.mark.parametrize("n", [0, 3])
def test_powi_partial_is_a_strong_zero_for_exponent_zero(n):
    """d/dx x^0 = 0 at x = 0 (0 · x^-1 = 0 · inf otherwise). The exponent is a constant: with a
    variable one the host calls compiler-rt's __powidf2, which MCJIT does not resolve."""
    fn = _module(f"  %z = call double @llvm.powi.f64.i32(double %x, i32 {n})\n  ret double %z",
                 "declare double @llvm.powi.f64.i32(double, i32)", "double %x")["f"]
    assert _forward(fn, (0.0,), (1.0,)) == 0.0
    assert _gradient(fn, (0.0,))[0] == 0.0
    assert check_both_oracles(fn, (1.3,)).tolist() == [pytest.approx(n * 1.3 ** (n - 1), rel=1e-14)]


def test_division_by_a_tiny_denominator_with_a_zero_tangent():
    """x / y at y = 1e-160: ∂/∂y = -q/y overflows to -inf; times dy = 0 it must give 0, not NaN."""
    fn = _module("  %q = fdiv double %x, %y\n  ret double %q")["f"]
    assert _forward(fn, (1.0, 1e-160), (1.0, 0.0)) == pytest.approx(1e160, rel=1e-15)
    assert _forward(fn, (1.0, 1e-160), (0.0, 0.0)) == 0.0
    check_both_oracles(fn, (1e-170, 1e-160), h=1e-176, fd_axes=[0])
    check_both_oracles(fn, (1.3, -0.7))


def test_division_adjoint_zero_through_an_untaken_select():
    """Reverse mode: the division's adjoint is exactly 0 (the select takes x), so the overflowing
    partial must contribute 0 to y's adjoint."""
    fn = _module("  %q = fdiv double %x, %y\n  %c = fcmp olt double %y, 0.0\n"
                 "  %r = select i1 %c, double %q, double %x\n  ret double %r")["f"]
    assert _gradient(fn, (1.0, 1e-160)).tolist() == [1.0, 0.0]
    assert _forward(fn, (1.0, 1e-160), (0.0, 1.0)) == 0.0


def test_ldexp_is_exact_and_linear():
    fn = _module("  %r = call double @llvm.ldexp.f64.i32(double %x, i32 %e)\n  ret double %r",
                 "declare double @llvm.ldexp.f64.i32(double, i32)", "double %x, i32 %e")["f"]
    for e in (-3, 0, 7):
        assert check_both_oracles(fn, (1.37,), ints=(e,)).tolist() == [2.0 ** e]
    # 2^1100 overflows, x·2^1100 does not: the tangent stays exact (1e-300 · 2^1100)
    assert _forward(fn, (1e-300,), (1e-300,), ints=(1100,)) == pytest.approx(math.ldexp(1e-300, 1100), rel=1e-15)
    lib = _module("  %r = call double @ldexp(double %x, i32 %e)\n  ret double %r",
                  "declare double @ldexp(double, i32)", "double %x, i32 %e")["f"]
    assert check_both_oracles(lib, (-0.6,), ints=(5,)).tolist() == [32.0]


def test_frexp_intrinsic_mantissa_derivative():
    """{m, e} = frexp(x), m = x·2^-e: dm/dx = 2^-e, the exponent carries no derivative."""
    fn = _module("  %p = call { double, i32 } @llvm.frexp.f64.i32(double %x)\n"
                 "  %m = extractvalue { double, i32 } %p, 0\n  %e = extractvalue { double, i32 } %p, 1\n"
                 "  %ef = sitofp i32 %e to double\n  %s = fadd double %m, %ef\n  %r = fmul double %s, %y\n"
                 "  ret double %r", "declare { double, i32 } @llvm.frexp.f64.i32(double)")["f"]
    for x in (5.3, -0.3, 1000.0):
        m, e = math.frexp(x)
        columns = check_both_oracles(fn, (x, 1.5), h=1e-7 * abs(x))
        assert columns.tolist() == [1.5 * 2.0 ** -e, m + e]


def test_frexp_libm_form_through_memory():
    """libm frexp(x, &e) returns the mantissa and writes e through a pointer."""
    fn = _module("  %slot = alloca i32\n  %m = call double @frexp(double %x, ptr %slot)\n"
                 "  %e = load i32, ptr %slot\n  %ef = sitofp i32 %e to double\n  %r = fadd double %m, %ef\n"
                 "  ret double %r", "declare double @frexp(double, ptr)", "double %x")["f"]
    for x in (5.3, -0.3):
        _, e = math.frexp(x)
        assert check_both_oracles(fn, (x,), h=1e-7).tolist() == [2.0 ** -e]


_SCOPED = r'''
declare void @llvm.experimental.noalias.scope.decl(metadata)

define void @scaled_square(ptr noalias %x, ptr noalias %y, double %a) {
  call void @llvm.experimental.noalias.scope.decl(metadata !0)
  %v = load double, ptr %x, align 8, !alias.scope !0
  %s = fmul double %v, %v
  %r = fmul double %s, %a
  store double %r, ptr %y, align 8, !noalias !0
  ret void
}

!0 = !{!1}
!1 = distinct !{!1, !2, !"scaled_square: %x"}
!2 = distinct !{!2, !"scaled_square"}
'''


def test_noalias_scope_declaration_is_ignored_by_both_modes():
    """The aliasing hint imports (with its metadata argument), carries no derivative, and is
    dropped at export; y = a·x² differentiates as without it."""
    mod = ado.from_llvm(_SCOPED, canonical=False)
    fn = mod["scaled_square"]
    assert any(getattr(i.callee, "name", "") == "llvm.experimental.noalias.scope.decl" for i in fn.ir.instructions())
    x, y, a = np.array([1.5]), np.zeros(1), 0.7
    fn(x, y, a)
    assert y[0] == pytest.approx(a * 1.5 ** 2)
    dx, dy = np.array([1.0]), np.zeros(1)
    autodiff(Forward, fn, Duplicated(x, dx), Duplicated(y, dy), Duplicated(a, 0.5))
    jv = 2 * a * 1.5 * 1.0 + 1.5 ** 2 * 0.5
    assert dy[0] == pytest.approx(jv, rel=1e-14)
    bx, by = np.zeros(1), np.array([2.0])
    _, _, ba = autodiff(Reverse, fn, Duplicated(x, bx), Duplicated(y, by), Active(a))
    assert bx[0] == pytest.approx(2 * 2 * a * 1.5, rel=1e-14) and ba == pytest.approx(2 * 1.5 ** 2, rel=1e-14)
    assert jv * 2.0 == pytest.approx(bx[0] * 1.0 + ba * 0.5, rel=1e-14)   # <J v, w> = <v, Jᵀ w>
    # central differences in a
    up, down = np.zeros(1), np.zeros(1)
    fn(x, up, a + 1e-6)
    fn(x, down, a - 1e-6)
    assert (up[0] - down[0]) / 2e-6 == pytest.approx(1.5 ** 2, rel=1e-8)


@pytest.mark.parametrize("name, op", [("__muldc3", lambda z, w: z * w), ("__divdc3", lambda z, w: z / w)])
def test_complex_product_and_quotient_of_compiler_rt(name, op):
    """C _Complex arithmetic calls compiler-rt; f = Re q + 0.5 Im q of q = z (op) w."""
    fn = _module(f"  %q = call {{ double, double }} @{name}(double %a, double %b, double %c, double %d)\n"
                 "  %re = extractvalue { double, double } %q, 0\n  %im = extractvalue { double, double } %q, 1\n"
                 "  %h = fmul double %im, 0.5\n  %r = fadd double %re, %h\n  ret double %r",
                 f"declare {{ double, double }} @{name}(double, double, double, double)",
                 "double %a, double %b, double %c, double %d")["f"]
    point = (0.3, -1.2, 2.0, 0.5)
    columns = check_both_oracles(fn, point)
    z, w = complex(*point[:2]), complex(*point[2:])
    dz = (op(z + 1e-7, w) - op(z - 1e-7, w)) / 2e-7          # ∂q/∂a; ∂q/∂b = i·∂q/∂a (holomorphic)
    assert columns[0] == pytest.approx(dz.real + 0.5 * dz.imag, rel=1e-6)
    assert columns[1] == pytest.approx(-dz.imag + 0.5 * dz.real, rel=1e-6)


def test_complex_float_product_returns_a_vector():
    """__mulsc3 returns <2 x float> on x86-64. Forward mode only: reverse mode needs the adjoint
    of extractelement, which the reverse engine does not have yet."""
    fn = _module("  %q = call <2 x float> @__mulsc3(float %a, float %b, float %c, float %d)\n"
                 "  %re = extractelement <2 x float> %q, i32 0\n  %im = extractelement <2 x float> %q, i32 1\n"
                 "  %s = fadd float %re, %im\n  %r = fpext float %s to double\n  ret double %r",
                 "declare <2 x float> @__mulsc3(float, float, float, float)",
                 "float %a, float %b, float %c, float %d")["f"]
    a, b, c, d = 0.5, -1.0, 2.0, 0.25
    # Re + Im of (a + ib)(c + id) = ac - bd + ad + bc: partials (c + d, c - d, a + b, a - b)
    assert [_forward(fn, (a, b, c, d), np.eye(4)[k]) for k in range(4)] == [c + d, c - d, a + b, a - b]


def test_inline_asm_is_refused_on_an_active_path_and_fine_off_it():
    text = (r'define double @f(double %x, i32 %k) {' '\n'
            r'  %y = call double asm "", "=x,0"(double %x)' '\n'
            r'  %j = call i32 asm "", "=r,0"(i32 %k)' '\n'
            r'  call void asm sideeffect "", "~{memory}"()' '\n'
            r'  %c = sitofp i32 %j to double' '\n  %z = fmul double %c, %x\n'
            r'  %w = fmul double %y, %c' '\n  %r = select i1 false, double %w, double %z\n  ret double %r\n}')
    fn = ado.from_llvm(text, canonical=False)["f"]
    assert fn(3.0, 2) == 6.0
    with pytest.raises(DifferentiationError, match=r"call asm"):
        autodiff(Forward, fn, Duplicated(3.0, 1.0), 2)
    inactive = ado.from_llvm(text.replace("%r = select i1 false, double %w, double %z", "%r = fadd double %z, 0.0"),
                             canonical=False)["f"]
    assert autodiff(Forward, inactive, Duplicated(3.0, 1.0), 2) == 2.0
    assert autodiff(Reverse, inactive, Active(3.0), 2)[0] == 2.0


def test_atan2_and_hypot_have_zero_partials_at_the_origin_in_both_modes():
    """0/0 partials at the origin are 0 by convention, so forward and reverse mode agree (the
    differential tester found reverse NaN against forward 0 where a zero value reached atan2(0, 0))."""
    module = ado.from_llvm("""
declare double @atan2(double, double)
declare double @hypot(double, double)
define double @f(double %y, double %x) {
  %a = call double @atan2(double %y, double %x)
  %h = call double @hypot(double %y, double %x)
  %s = fadd double %a, %h
  ret double %s
}""")
    fn = module["f"]
    assert autodiff(Reverse, fn, Active(0.0), Active(0.0)) == (0.0, 0.0)
    assert autodiff(Forward, fn, Duplicated(0.0, 1.0), Duplicated(0.0, -1.0)) == 0.0
    d_y, d_x = autodiff(Reverse, fn, Active(0.6), Active(0.8))       # away from it: unchanged
    assert d_y == pytest.approx(0.8 + 0.6) and d_x == pytest.approx(-0.6 + 0.8)


@pytest.mark.parametrize("y, x", [(1e-200, 2e-200), (-3e-170, 1e-171), (3e200, -1e200), (2e160, 1e150)])
def test_atan2_partials_where_x2_plus_y2_underflows_or_overflows(y, x):
    """∂atan2(y, x) = (x, -y) / (x² + y²): x² + y² underflowed to 0 below ~1e-154, where the
    partials (~1/r, 4e199 at (1e-200, 2e-200)) then came out 0 by the origin's convention, and
    overflowed above ~1e154 (0 where they are ~1/r, 3e-201). carg(x + iy) is the same angle."""
    from fractions import Fraction
    module = ado.from_llvm("""
declare double @atan2(double, double)
declare double @carg(double, double)
define double @f(double %y, double %x) {
  %a = call double @atan2(double %y, double %x)
  ret double %a
}
define double @g(double %x, double %y) {
  %a = call double @carg(double %x, double %y)
  ret double %a
}""")
    r2 = Fraction(x) ** 2 + Fraction(y) ** 2
    d_y, d_x = float(Fraction(x) / r2), float(-Fraction(y) / r2)
    assert autodiff(Reverse, module["f"], Active(y), Active(x)) == pytest.approx((d_y, d_x), rel=1e-14, abs=0)
    assert autodiff(Forward, module["f"], Duplicated(y, 1.0), Duplicated(x, 0.0)) == pytest.approx(d_y, rel=1e-14, abs=0)
    assert autodiff(Forward, module["f"], Duplicated(y, 0.0), Duplicated(x, 1.0)) == pytest.approx(d_x, rel=1e-14, abs=0)
    assert autodiff(Reverse, module["g"], Active(x), Active(y)) == pytest.approx((d_x, d_y), rel=1e-14, abs=0)


def test_atan2_partials_are_zero_where_an_operand_is_infinite():
    module = ado.from_llvm("""
declare double @atan2(double, double)
define double @f(double %y, double %x) {
  %a = call double @atan2(double %y, double %x)
  ret double %a
}""")
    assert autodiff(Reverse, module["f"], Active(1.5), Active(float("inf"))) == (0.0, 0.0)
    assert autodiff(Reverse, module["f"], Active(float("-inf")), Active(2.0)) == (0.0, 0.0)


@pytest.mark.parametrize("a, b, n", [(1.0, 0.1, 9), (-1.0, 0.1, -9), (1.0, -0.1, -9), (0.3, 0.1, 2), (7.5, 2.0, 3)])
def test_frem_partial_is_the_quotient_fmod_used(a, b, n):
    """fmod(a, b) = a - n b with n the quotient fmod used: ∂/∂b = -n. The rule took n = trunc(a / b),
    which rounds a quotient just under an integer up to it: fmod(1, 0.1) = 0.09999999999999995 is
    1 - 9 b (b = 0.1000000000000000055 > 1/10), but 1 / 0.1 is 10.0, and ∂/∂b came out -10."""
    module = ado.from_llvm(f"""
declare double @fmod(double, double)
define double @f(double %a, double %b) {{
  %r = frem double %a, %b
  ret double %r
}}
define double @g(double %a, double %b) {{
  %r = call double @fmod(double %a, double %b)
  ret double %r
}}
define float @h(float %a, float %b) {{
  %r = frem float %a, %b
  ret float %r
}}""")
    assert math.fmod(a, b) == pytest.approx(a - n * b, abs=1e-15)
    for name in ("f", "g"):
        assert autodiff(Reverse, module[name], Active(a), Active(b)) == (1.0, float(-n))
        assert autodiff(Forward, module[name], Duplicated(a, 0.0), Duplicated(b, 1.0)) == float(-n)
    if (a, b) == (1.0, 0.1):      # 1 / 0.1f rounds to 10.0f too, and fmodf(1, 0.1f) is 1 - 9 b
        assert autodiff(Reverse, module["h"], Active(a), Active(b)) == (1.0, -9.0)
