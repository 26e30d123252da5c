"""memcpy/memmove in reverse mode move adjoints element by element, so the engine must know the
float type of the copied memory. It follows the contents through copies and realloc to the loads
and stores that show it; when nothing in the function shows it, the copy is refused (it used to
zero the destination's adjoint: a silent wrong gradient)."""
from __future__ import annotations

import numpy as np
import pytest

import adoffload as ado
from adoffload import enzyme as ez
from adoffload.errors import DifferentiationError
from adoffload.testing import differential

pytestmark = pytest.mark.skipif(not differential.clang_available(), reason="the ziglang wheel (clang) is not installed")

SOURCE = """#include <stdlib.h>
#include <string.h>
void copy(double* out, const double* in, int n) { memcpy(out, in, n * sizeof(double)); }
double grown(int n, const double* p) {                /* the differential tester's seed 544 */
    double* t = (double*)malloc((size_t)n * sizeof(double));
    for (int i = 0; i < n; i++) t[i] = p[i];           /* -O1 and up: a memcpy */
    t = (double*)realloc(t, (size_t)(2 * n) * sizeof(double));
    double s = 0;
    for (int j = 0; j < n; j++) s += t[j] * t[j];
    free(t);
    return s;
}
double twice_copied(int n, const double* p) {
    double a[8], b[8];
    memcpy(a, p, n * sizeof(double));
    memmove(b, a, n * sizeof(double));
    double s = 0;
    for (int j = 0; j < n; j++) s += b[j] * b[j] * b[j];
    return s;
}
"""
P = np.array([0.3, -0.5, 0.7, 0.2, 0.9])


@pytest.fixture(scope="module", params=[0, 1, 2, 3], ids=lambda n: f"O{n}")
def functions(request):
    return ado.from_llvm(differential.compile_c(SOURCE, request.param))


@pytest.mark.parametrize("name,expected", [("grown", 2 * P), ("twice_copied", 3 * P * P)])
def test_the_element_type_is_found_through_copies_and_realloc(functions, name, expected):
    dp = np.zeros(5)
    ez.autodiff(ez.Reverse, functions[name], 5, ez.Duplicated(P.copy(), dp))
    np.testing.assert_allclose(dp, expected, rtol=1e-12)


def test_a_copy_whose_element_type_nothing_shows_is_refused(functions):
    out, d_out, x, dx = np.zeros(3), np.array([1.0, 10.0, 100.0]), np.array([1.0, 2.0, 3.0]), np.zeros(3)
    with pytest.raises(DifferentiationError, match="element type"):
        ez.autodiff(ez.Reverse, functions["copy"], ez.Duplicated(out, d_out), ez.Duplicated(x, dx), 3)
    v = np.array([0.5, -1.0, 2.0])            # forward mode copies the tangent bytes: no type needed
    tangent_out = np.zeros(3)
    ez.autodiff(ez.Forward, functions["copy"], ez.Duplicated(out, tangent_out), ez.Duplicated(x, v), 3)
    np.testing.assert_array_equal(tangent_out, v)
