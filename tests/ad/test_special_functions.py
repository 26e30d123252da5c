"""libm's special functions in C (clang -O0..-O3): inverse hyperbolics, the gamma family (through
the engine's digamma), Bessel functions, fdim/remainder/nextafter, integer-valued rounding.
Both modes against central differences of the host-run primal, at points on both sides of the
digamma's reflection (x < 0) and recurrence (x < 6) branches."""
from __future__ import annotations

import math

import numpy as np
import pytest

import adoffload as ado
from adoffload import enzyme as ez
from adoffload.testing import differential

pytestmark = pytest.mark.skipif(not differential.clang_available(), reason="the ziglang wheel (clang) is not installed")

SOURCE = """#include <math.h>
double special(const double* x) {
    return asinh(x[0]) + acosh(1.5 + x[1] * x[1]) + atanh(0.5 * tanh(x[2]))
         + lgamma(x[3]) + 0.1 * tgamma(x[4]) + j0(x[0]) + j1(x[1]) + y0(2.0 + x[2] * x[2]) + y1(1.5 + x[4])
         + jn(3, x[4]) + yn(2, 2.5 + x[0] * x[0]) + fdim(x[0], x[1]) + remainder(7.0 * x[2], 1.3)
         + nextafter(x[4], 0.0) + (double)lrint(x[3] * 3.1) + logb(8.0 + x[4]);
}
"""


def _gradient_fd(fn, x, h=1e-6):
    g = np.zeros_like(x)
    for j in range(x.size):
        up, down = x.copy(), x.copy()
        up[j] += h
        down[j] -= h
        g[j] = (fn(up) - fn(down)) / (2 * h)
    return g


@pytest.fixture(scope="module", params=[0, 1, 2, 3], ids=lambda n: f"O{n}")
def special(request):
    return ado.from_llvm(differential.compile_c(SOURCE, request.param))["special"]


@pytest.mark.parametrize("x", [[0.4, -0.7, 0.3, 2.7, 1.3],            # lgamma through the recurrence
                               [-0.9, 0.2, -0.6, -2.5, 0.6],           # lgamma's reflection (x < 0)
                               [1.1, 1.3, 0.9, 12.5, 2.2]])            # the asymptotic series directly
def test_special_functions_in_both_modes(special, x):
    x = np.asarray(x)
    expected = _gradient_fd(special, x)
    dx = np.zeros_like(x)
    ez.autodiff(ez.Reverse, special, ez.Duplicated(x.copy(), dx))
    np.testing.assert_allclose(dx, expected, rtol=2e-6, atol=2e-6)
    v = np.array([0.3, -1.0, 0.5, 0.7, -0.2])
    tangent = ez.autodiff(ez.Forward, special, ez.Duplicated(x.copy(), v.copy()))
    assert tangent == pytest.approx(float(dx @ v), rel=1e-12, abs=1e-12)


def test_the_digamma_matches_known_values():
    """ψ(1) = -γ, ψ(1/2) = -γ - 2 ln 2, ψ(-1/2) = ψ(1/2) + 2 (through lgamma's derivative)."""
    fn = ado.from_llvm(differential.compile_c("#include <math.h>\ndouble lg(double x) { return lgamma(x); }", 2))["lg"]
    gamma = 0.5772156649015329
    for x, psi in ((1.0, -gamma), (0.5, -gamma - 2 * math.log(2)), (-0.5, -gamma - 2 * math.log(2) + 2.0),
                   (30.0, 3.384438132685525)):
        (d,) = ez.autodiff(ez.Reverse, fn, ez.Active(x))
        assert d == pytest.approx(psi, rel=1e-14, abs=1e-14), x


MODF = """#include <math.h>
double split(double x) { double ip; double fp = modf(3.0 * x, &ip); return fp * fp + 0.5 * ip; }
"""


@pytest.mark.parametrize("opt", [0, 2])
def test_modf_fraction_moves_integer_part_does_not(opt):
    # clang turns modf(x, &ip) into llvm.modf's {fraction, integer} pair: d fraction = dx
    fn = ado.from_llvm(differential.compile_c(MODF, opt))["split"]
    x = 1.37
    fp = 3 * x - math.trunc(3 * x)
    (d,) = ez.autodiff(ez.Reverse, fn, ez.Active(x))
    assert d == pytest.approx(2 * fp * 3, rel=1e-13)
    assert ez.autodiff(ez.Forward, fn, ez.Duplicated(x, 1.0)) == pytest.approx(d, rel=1e-13)


WIDE_SOURCE = """#include <math.h>
double f_asinh(double x) { return asinh(x); }
double f_acosh(double x) { return acosh(x); }
float f_asinhf(float x) { return asinhf(x); }
float f_acoshf(float x) { return acoshf(x); }
"""


@pytest.mark.parametrize("opt", [0, 2])
def test_inverse_hyperbolics_at_huge_and_near_one_arguments(opt):
    """asinh'(x) = 1/sqrt(x² + 1) came out 0 above ~1e154 (x² overflowed), acosh' too; and acosh's
    x² - 1 cancelled near 1. Exact references: 1/|x| where the 1 no longer counts, and
    1/sqrt((x - 1)(x + 1)) with x - 1 exact."""
    fns = ado.from_llvm(differential.compile_c(WIDE_SOURCE, opt))
    cases = [("f_asinh", 1e200, 1e-200), ("f_asinh", -3e300, 1 / 3e300), ("f_asinh", 3.0, 1 / math.sqrt(10.0)),
             ("f_asinh", 1e9, 1e-9), ("f_acosh", 1e200, 1e-200), ("f_acosh", 4.0, 1 / math.sqrt(15.0)),
             ("f_acosh", 1.0 + 2.0 ** -40, 1 / math.sqrt(2.0 ** -40 * (2.0 + 2.0 ** -40)))]
    for name, x, expected in cases:
        (grad,) = ez.autodiff(ez.Reverse, fns[name], ez.Active(x))
        tangent = ez.autodiff(ez.Forward, fns[name], ez.Duplicated(x, 1.0))
        for got in (grad, tangent):
            assert float(got) == pytest.approx(expected, rel=1e-13, abs=0), (name, x, got)
    for name, x, expected in (("f_asinhf", 1e20, 1e-20), ("f_acoshf", 1e30, 1e-30), ("f_asinhf", 2.0, 1 / math.sqrt(5.0))):
        (grad,) = ez.autodiff(ez.Reverse, fns[name], ez.Active(np.float32(x)))
        assert float(grad) == pytest.approx(expected, rel=2e-6, abs=0), (name, x, grad)
