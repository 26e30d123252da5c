"""Found by the differential tester (``python -m adoffload.testing.differential --seeds 544 --opt 1``):
a WRONG GRADIENT, silently, in reverse mode (fixed).

Heap scratch filled from an input by a copy loop, then grown with ``realloc``, then read: at
-O1..-O3 clang turns the copy loop into ``memcpy``, and reverse mode returns a zero gradient for
``p`` (no error). -O0 (a loop of loads and stores) and forward mode at every level are right.
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
#include <stdlib.h>
double grown(int n, const double* p) {
    double* t = (double*)malloc((size_t)n * sizeof(double));
    for (int i = 0; i < n; i++) t[i] = p[i];                 /* -O1 and up: a memcpy */
    t = (double*)realloc(t, (size_t)(2 * n) * sizeof(double));
    double s = 0;
    for (int j = 0; j < n; j++) s += t[j] * t[j];
    free(t);
    return s;
}
"""
P = np.array([0.3, -0.5, 0.7, 0.2, 0.9])


@pytest.mark.parametrize("opt", [0, 1, 2, 3])
def test_forward_mode(opt):
    fn = ado.from_llvm(clang.compile_c(SOURCE, opt))["grown"]
    assert fn(5, P.copy()) == pytest.approx(float(np.sum(P * P)))
    v = np.linspace(-1.0, 1.0, 5)
    assert ez.autodiff(ez.Forward, fn, 5, ez.Duplicated(P.copy(), v.copy())) == pytest.approx(float(2 * P @ v))


@pytest.mark.parametrize("opt", [0, 1, 2, 3])
def test_reverse_mode(opt):
    """Reverse mode used to drop the adjoint of memory copied by memcpy into a block that realloc
    then moves (the copy's element type was not followed through realloc: enzyme/memory.py)."""
    fn = ado.from_llvm(clang.compile_c(SOURCE, opt))["grown"]
    dp = np.zeros(5)
    ez.autodiff(ez.Reverse, fn, 5, ez.Duplicated(P.copy(), dp))
    np.testing.assert_allclose(dp, 2 * P, rtol=1e-12)
