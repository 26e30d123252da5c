"""Found by the differential tester (``python -m adoffload.testing.differential --seeds 671 --opt 0``):
forward and reverse mode disagree where a runtime-zero partial meets an undefined one.

``s`` starts at 0 and is only ever multiplied, so it is 0 for every ``x`` and ``f`` is 0 for every
``x``: the gradient is 0. The result ``atan2(|s|, tanh(s))`` is taken at (0, 0), where atan2 has no
partials (0/0). Forward mode gives 0 (a zero tangent times an undefined partial counts as zero, the
"strong zero" of issue 11 item 5); reverse mode gives NaN: the adjoint of ``s`` is NaN, and
``adj(s * g(x)) * s`` with ``s == 0`` is NaN * 0. The expected value is the forward one. Fixed:
atan2's (and hypot's) 0/0 partials at the origin are 0 by convention (enzyme/rules.py).
"""
from __future__ import annotations

import numpy as np
import pytest

import adoffload as ado
from adoffload import enzyme as ez
from adoffload.testing import clang

pytestmark = pytest.mark.skipif(not clang.clang_available(),
                                reason="the ziglang wheel (the clang these tests compile C with) is not installed")

SOURCE = """
#include <math.h>
double f(int k, const double* x) {
    double s = 0.0;
    for (int i = 0; i < k; i++) s *= 1.0 + 0.25 * tanh(s * x[i]);
    return atan2(fabs(s), tanh(s));
}
"""


@pytest.mark.parametrize("opt", [0, 2])
def test_forward_gives_the_zero_gradient(opt):
    fn = ado.from_llvm(clang.compile_c(SOURCE, opt))["f"]
    x = np.array([0.3, -0.5])
    assert fn(2, x.copy()) == 0.0
    assert ez.autodiff(ez.Forward, fn, 2, ez.Duplicated(x.copy(), np.ones(2))) == 0.0


@pytest.mark.parametrize("opt", [0, 2])
def test_reverse_gives_the_zero_gradient(opt):
    fn = ado.from_llvm(clang.compile_c(SOURCE, opt))["f"]
    x = np.array([0.3, -0.5])
    dx = np.zeros(2)
    ez.autodiff(ez.Reverse, fn, 2, ez.Duplicated(x.copy(), dx))
    np.testing.assert_array_equal(dx, [0.0, 0.0])
