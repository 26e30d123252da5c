"""x86 packed max/min intrinsics (std::arch's _mm_max_pd, _mm256_min_ps, ...; enzyme/rules.py):
lane by lane the first operand where it is strictly greater (smaller), the second otherwise, on
equality and NaN included, as MAXPD/MINPD define them; the derivative follows the lane chosen.
The scalar forms (max.sd) keep the first operand's upper lanes and are refused."""
from __future__ import annotations

import numpy as np
import pytest

import adoffload as ado
from adoffload import enzyme as ez
from adoffload.errors import DifferentiationError

SOURCE = """
declare <2 x double> @llvm.x86.sse2.OP.pd(<2 x double>, <2 x double>)
define double @f(ptr %x) {
entry:
  %a = load <2 x double>, ptr %x
  %bp = getelementptr double, ptr %x, i64 2
  %b = load <2 x double>, ptr %bp
  %m = call <2 x double> @llvm.x86.sse2.OP.pd(<2 x double> %a, <2 x double> %b)
  %m0 = extractelement <2 x double> %m, i64 0
  %m1 = extractelement <2 x double> %m, i64 1
  %t = fmul double %m1, 3.0
  %r = fadd double %m0, %t
  ret double %r
}
"""


@pytest.mark.parametrize("op,chosen", [("max", [1, 0, 0, 3]), ("min", [0, 0, 1, 3])])
def test_the_lane_chosen_gets_the_derivative(op, chosen):
    """x = [a0, a1, b0, b1] = [1, 2, 0.5, 2]: lane 0 picks a0 (max) or b0 (min); lane 1 is a tie, b1."""
    fn = ado.from_llvm(SOURCE.replace("OP", op))["f"]
    x = np.array([1.0, 2.0, 0.5, 2.0])
    assert fn(x.copy()) == (1.0 if op == "max" else 0.5) + 6.0
    grad = np.zeros(4)
    ez.autodiff(ez.Reverse, fn, ez.Duplicated(x.copy(), grad))
    np.testing.assert_array_equal(grad, chosen)
    tangents = [ez.autodiff(ez.Forward, fn, ez.Duplicated(x.copy(), np.eye(4)[k])) for k in range(4)]
    np.testing.assert_array_equal(tangents, chosen)


def test_the_scalar_form_is_refused():
    text = SOURCE.replace("OP.pd", "max.sd")
    with pytest.raises(DifferentiationError, match="max.sd"):
        ez.autodiff(ez.Reverse, ado.from_llvm(text)["f"], ez.Duplicated(np.ones(4), np.zeros(4)))


@pytest.mark.parametrize("op", ["max", "min"])
def test_a_nan_lane_gives_the_derivative_to_the_second_operand(op):
    """MAXPD/MINPD return the second operand where either is NaN: lane 1 is (NaN, 2), so b1 = 2
    is the result and gets the derivative; a1 gets none (lane 0 as in the test above)."""
    fn = ado.from_llvm(SOURCE.replace("OP", op))["f"]
    x = np.array([1.0, np.nan, 0.5, 2.0])
    assert fn(x.copy()) == (1.0 if op == "max" else 0.5) + 6.0
    grad = np.zeros(4)
    ez.autodiff(ez.Reverse, fn, ez.Duplicated(x.copy(), grad))
    np.testing.assert_array_equal(grad, [1, 0, 0, 3] if op == "max" else [0, 0, 1, 3])
    tangents = [ez.autodiff(ez.Forward, fn, ez.Duplicated(x.copy(), np.eye(4)[k])) for k in range(4)]
    np.testing.assert_array_equal(tangents, [1, 0, 0, 3] if op == "max" else [0, 0, 1, 3])
