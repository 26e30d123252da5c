"""Values invariant in an inner loop are taped once per execution of the loop, not once per iteration
(reverse_values._invariant; benchmarks/results/2026-12-04-tapesize's part 2, item 2): llm.c's layernorm
pushed a row's mean and variance C times each. The value goes into the record of the loop's exits
(popped before the reverse sweep enters the loop) and a slot the loop's reverse reads; where an exit
is not dominated by it or can be entered from outside the loop, it stays taped per iteration.

Each program runs at -O0..-O3: gradients against central differences of the host-run primal and the
forward/reverse identity <J v, w> = <v, J^T w>; the programs whose invariants are hoisted also have a
tape whose size does not grow with the inner trip count.
"""
from __future__ import annotations

import functools

import numpy as np
import pytest

import adoffload as ado
from adoffload import enzyme as ez
from adoffload.enzyme import api
from adoffload.testing import differential

from .test_foreign_c import isolated

pytestmark = pytest.mark.skipif(not differential.clang_available(),
                                reason="the ziglang wheel (the clang these tests compile C with) is not installed")

LEVELS = [0, 1, 2, 3]
HEADER = "#include <math.h>\n#include <stdlib.h>\n#include <string.h>\n#include <stddef.h>\n"

# f(double* x, double* out, int R, int C) -> double; x has R*C elements, out R*C.
PROGRAMS = {
    # a layernorm: the row's mean and inverse deviation (reductions: taped) used in the output loop
    "rows": """
double f(double* x, double* out, int R, int C) {
    double s = 0.0;
    for (int r = 0; r < R; r++) {
        const double* row = x + r * C;
        double m = 0.0, v = 0.0;
        for (int c = 0; c < C; c++) m += row[c];
        m /= C;
        for (int c = 0; c < C; c++) v += (row[c] - m) * (row[c] - m);
        double rs = 1.0 / sqrt(v / C + 1e-3);
        for (int c = 0; c < C; c++) { double n = (row[c] - m) * rs; out[r * C + c] = n; s += n * n * n + sin(n); }
    }
    return s;
}""",
    # the inner loop left by a break too: two exits, both after the invariant
    "break": """
double f(double* x, double* out, int R, int C) {
    double s = 0.0;
    for (int r = 0; r < R; r++) {
        double a = 0.0;
        for (int c = 0; c < C; c++) a += x[r * C + c] * x[r * C + c];
        for (int c = 0; c < C; c++) {
            double t = sin(a) * x[r * C + c];
            if (t > 0.6) break;
            out[r * C + c] = t;
            s += t * a;
        }
    }
    return s;
}""",
    # an invariant of the outer loop used two loops further in: taped at the middle loop's exits
    "nest": """
double f(double* x, double* out, int R, int C) {
    double s = 0.0;
    for (int r = 0; r < R; r++) {
        double g = 0.0;
        for (int c = 0; c < C; c++) g += exp(0.1 * x[r * C + c]);
        for (int k = 0; k < 3; k++)
            for (int c = 0; c < C; c++) { double t = x[r * C + c] * g + k; s += t * t; out[r * C + c] += t; }
    }
    return s;
}""",
    # the invariant is a load of memory the function overwrites, and an inner while loop of
    # data-dependent length uses it
    "overwritten": """
double f(double* x, double* out, int R, int C) {
    double s = 0.0;
    for (int r = 0; r < R; r++) {
        double a = x[r * C];
        x[r * C] = 0.5 * a + 0.1;
        for (int c = 0; c < C; c++) {
            double b = x[r * C + c];
            int steps = 0;
            while (b * b < 2.0 && steps < 4) { b = b * 1.3 + a * 0.2; steps++; }
            out[r * C + c] = b;
            s += a * b * b;
        }
    }
    return s;
}""",
    # a return from inside the inner loop: an exit the reverse sweep reaches from elsewhere
    "return": """
double f(double* x, double* out, int R, int C) {
    double s = 0.0;
    for (int r = 0; r < R; r++) {
        double a = 0.0;
        for (int c = 0; c < C; c++) a += sin(x[r * C + c]);
        for (int c = 0; c < C; c++) {
            double t = a * x[r * C + c];
            if (t > 1.5) return s + t;
            out[r * C + c] = t;
            s += t * t * a;
        }
    }
    return s;
}""",
}
HOISTED = ("rows", "nest")      # a tape independent of C at -O1 (no vectorized variants, no while loop)


@functools.cache
def load(name: str, opt: int):
    return ado.from_llvm(differential.compile_c(HEADER + PROGRAMS[name], opt))["f"]


def central_differences(f, x: np.ndarray, h: float = 1e-6) -> np.ndarray:
    return np.array([(f(x + h * e) - f(x - h * e)) / (2 * h) for e in np.eye(x.size)])


def gradient(fn, x, out, R, C):
    gx, gout = np.zeros_like(x), np.zeros_like(out)
    ez.autodiff(ez.Reverse, fn, ez.Duplicated(x.copy(), gx), ez.Duplicated(out.copy(), gout), R, C)
    return gx, gout


def tape_bytes(fn, x, out, R, C) -> int:
    entries = [v for key, v in api._CACHE.items() if key[0] == id(fn.module.ir) and key[2] == "Reverse"]
    count = entries[-1][2]
    if count is None:
        return 0
    nbytes = np.zeros(1, np.int64)
    count(x.copy(), out.copy(), R, C, nbytes)
    return int(nbytes[0])


@pytest.mark.parametrize("name", sorted(PROGRAMS))
@pytest.mark.parametrize("opt", LEVELS)
@isolated
def test_invariants_of_inner_loops_are_taped_once_per_loop(name, opt):
    fn = load(name, opt)
    rng = np.random.default_rng(opt)
    sizes = []
    for R, C in ((3, 4), (2, 7), (3, 12)):
        x = rng.uniform(-1.0, 1.0, R * C)
        out = rng.uniform(-0.5, 0.5, R * C)
        gx, gout = gradient(fn, x, out, R, C)
        fd = central_differences(lambda z: float(fn(z[:R * C].copy(), z[R * C:].copy(), R, C)), np.concatenate([x, out]))
        np.testing.assert_allclose(np.concatenate([gx, gout]), fd, rtol=1e-6, atol=1e-7)
        v, w = rng.standard_normal(R * C), rng.standard_normal(R * C)
        tangent = ez.autodiff(ez.Forward, fn, ez.Duplicated(x.copy(), v.copy()), ez.Duplicated(out.copy(), w.copy()),
                              R, C)
        assert float(tangent) == pytest.approx(float(gx @ v + gout @ w), rel=1e-11, abs=1e-12)
        sizes.append((R, tape_bytes(fn, x, out, R, C)))
    if opt == 1 and name in HOISTED:
        per_row = {nbytes / R for R, nbytes in sizes}
        assert len(per_row) == 1, sizes              # C = 4, 7, 12: the same bytes per row
