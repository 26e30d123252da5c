"""C99 complex functions (<complex.h>) in double and float, clang -O0..-O3, both modes, against
central differences: cexp, clog, csqrt, csin, ccos, csinh, ccosh, cabs, carg, with complex
products and quotients between them."""
from __future__ import annotations

import numpy as np
import pytest

import adoffload as ado
from adoffload import enzyme as ez
from adoffload.testing import differential

pytestmark = pytest.mark.skipif(not differential.clang_available(), reason="the ziglang wheel (clang) is not installed")

SOURCE = """#include <complex.h>
#include <math.h>
double cd(const double* x) {
    double complex z = x[0] + I * x[1], w = x[2] - I * x[0];
    double complex q = cexp(z) * clog(w) / (1.0 + csqrt(z * w)) + csin(z) * ccos(w) - csinh(w) / ccosh(z);
    return creal(q) + 0.7 * cimag(q) + cabs(z - w) + carg(w);
}
float cf(const float* x) {
    float complex z = x[0] + I * x[1], w = x[2] - I * x[0];
    float complex q = cexpf(z) * clogf(w) + csqrtf(z) * csinf(w) + ccosf(z) - csinhf(w) * ccoshf(z);
    return crealf(q) + 0.7f * cimagf(q) + cabsf(z * w) + cargf(w);
}
"""


@pytest.fixture(scope="module", params=[0, 1, 2, 3], ids=lambda n: f"O{n}")
def functions(request):
    return ado.from_llvm(differential.compile_c(SOURCE, request.param))


@pytest.mark.parametrize("name,dtype,h,tol", [("cd", np.float64, 1e-6, 1e-6), ("cf", np.float32, 1e-2, 2e-3)])
def test_complex_functions_in_both_modes(functions, name, dtype, h, tol):
    fn = functions[name]
    x = np.array([0.4, -0.3, 0.8], dtype)
    expected = np.zeros(3)
    for j in range(3):      # central differences in double around the float point
        up, down = x.astype(np.float64), x.astype(np.float64)
        up[j] += h
        down[j] -= h
        expected[j] = (float(fn(up.astype(dtype))) - float(fn(down.astype(dtype)))) / (2 * h)
    dx = np.zeros(3, dtype)
    ez.autodiff(ez.Reverse, fn, ez.Duplicated(x.copy(), dx))
    np.testing.assert_allclose(dx, expected, rtol=tol, atol=tol)
    v = np.array([0.5, -1.0, 0.25], dtype)
    tangent = ez.autodiff(ez.Forward, fn, ez.Duplicated(x.copy(), v))
    assert tangent == pytest.approx(float(dx.astype(np.float64) @ v), rel=float(10 * np.finfo(dtype).eps ** 0.5))


TINY_SOURCE = """#include <complex.h>
double log_abs(double a, double b) { return creal(clog(a + I * b)); }
double log_angle(double a, double b) { return cimag(clog(a + I * b)); }
double angle(double a, double b) { return carg(a + I * b); }
"""


@pytest.mark.parametrize("a, b", [(1e-200, 2e-200), (3e200, -1e200), (0.3, 0.4)])
def test_clog_and_carg_where_the_squared_modulus_underflows_or_overflows(a, b):
    """d log z = 1/z = (a, -b) / (a² + b²): a² + b² underflowed to 0 at |z| ~ 1e-200, where the
    gradient of log|z| came out NaN (it is (a, b) / |z|² ~ 1e199), and carg's 0 (the origin's
    convention); it overflowed to inf at 1e200 (0 where the gradient is ~1e-201)."""
    from fractions import Fraction
    fns = ado.from_llvm(differential.compile_c(TINY_SOURCE, 2))
    r2 = Fraction(a) ** 2 + Fraction(b) ** 2
    expected = {"log_abs": (Fraction(a) / r2, Fraction(b) / r2), "log_angle": (-Fraction(b) / r2, Fraction(a) / r2),
                "angle": (-Fraction(b) / r2, Fraction(a) / r2)}
    for name, (d_a, d_b) in expected.items():
        grad = ez.autodiff(ez.Reverse, fns[name], ez.Active(a), ez.Active(b))
        assert grad == pytest.approx((float(d_a), float(d_b)), rel=1e-14, abs=0), name
        tangent = ez.autodiff(ez.Forward, fns[name], ez.Duplicated(a, 1.0), ez.Duplicated(b, 0.0))
        assert tangent == pytest.approx(float(d_a), rel=1e-14, abs=0), name
