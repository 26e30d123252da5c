"""Pointers kept in memory (issue 30, item 2; enzyme/pointer_memory.py): llm.c's GPT-2 fills a struct of
``float*`` from one parameter block through a table of pointers to the struct's fields and then loads
each layer's pointers from the struct. At clang -O0/-O1 that table and the struct stay memory, and the
engine refused "stores a pointer to differentiated memory into memory". Now the shadow of such a
pointer goes into the shadow memory beside it and a load of it loads the shadow, where the memory is
the function's own (an alloca or heap block that holds only pointers with shadows). Checked by central
differences of the host-run primal and by the forward/reverse identity <Jv, w> = <v, J^T w>, at every
optimization level; what is not proven stays refused, naming the instruction and its source line.
"""
from __future__ import annotations

import functools
import re

import numpy as np
import pytest

import adoffload as ado
from adoffload import enzyme as ez
from adoffload.errors import DifferentiationError
from adoffload.testing import differential

from .test_foreign_c import isolated

pytestmark = pytest.mark.skipif(not differential.clang_available(),
                                reason="the ziglang wheel (the clang these tests compile C with) is not installed")

LEVELS = [0, 1, 2, 3]
HEADER = "#include <math.h>\n#include <stdlib.h>\n#include <stddef.h>\n#include <string.h>\n#include <stdint.h>\n"

GPT = """
/* llm.c's shape: parameters and activations are one block each, reached through a struct of
   pointers that a table of pointers to the struct's fields fills; every layer loads its
   pointers from the structs. */
#define NPARAM 5
typedef struct { double* wte; double* lnw; double* lnb; double* fcw; double* fcb; } Params;
#define NACT 3
typedef struct { double* emb; double* ln; double* logits; } Acts;

static void point_parameters(Params* params, double* memory, const size_t* sizes) {
    double** ptrs[NPARAM] = {&params->wte, &params->lnw, &params->lnb, &params->fcw, &params->fcb};
    double* it = memory;
    for (int i = 0; i < NPARAM; i++) { *(ptrs[i]) = it; it += sizes[i]; }
}

static double* malloc_and_point_acts(Acts* acts, const size_t* sizes) {
    size_t total = 0;
    for (int i = 0; i < NACT; i++) total += sizes[i];
    double* memory = (double*)malloc(total * sizeof(double));
    double** ptrs[NACT] = {&acts->emb, &acts->ln, &acts->logits};
    double* it = memory;
    for (int i = 0; i < NACT; i++) { *(ptrs[i]) = it; it += sizes[i]; }
    return memory;
}

static void encoder(double* out, const int* tokens, const double* wte, int T, int C) {
    for (int t = 0; t < T; t++)
        for (int c = 0; c < C; c++) out[t * C + c] = wte[tokens[t] * C + c];
}

static void layernorm(double* out, const double* inp, const double* w, const double* b, int T, int C) {
    for (int t = 0; t < T; t++) {
        const double* x = inp + t * C;
        double mean = 0.0, var = 0.0;
        for (int c = 0; c < C; c++) mean += x[c];
        mean /= C;
        for (int c = 0; c < C; c++) var += (x[c] - mean) * (x[c] - mean);
        double rstd = 1.0 / sqrt(var / C + 1e-5);
        for (int c = 0; c < C; c++) out[t * C + c] = (x[c] - mean) * rstd * w[c] + b[c];
    }
}

static void matmul(double* out, const double* inp, const double* w, const double* bias, int T, int C, int OC) {
    for (int t = 0; t < T; t++)
        for (int o = 0; o < OC; o++) {
            double s = bias[o];
            for (int c = 0; c < C; c++) s += inp[t * C + c] * w[o * C + c];
            out[t * OC + o] = s;
        }
}

static double crossentropy(const double* logits, const int* targets, int T, int V) {
    double loss = 0.0;
    for (int t = 0; t < T; t++) {
        const double* l = logits + t * V;
        double m = l[0];
        for (int v = 1; v < V; v++) m = l[v] > m ? l[v] : m;
        double s = 0.0;
        for (int v = 0; v < V; v++) s += exp(l[v] - m);
        loss += log(s) + m - l[targets[t]];
    }
    return loss / T;
}

double gpt_loss(double* params_memory, const int* tokens, const int* targets, int T, int V, int C) {
    size_t psizes[NPARAM] = {(size_t)V * C, (size_t)C, (size_t)C, (size_t)V * C, (size_t)V};
    Params params;
    point_parameters(&params, params_memory, psizes);
    size_t asizes[NACT] = {(size_t)T * C, (size_t)T * C, (size_t)T * V};
    Acts acts;
    double* acts_memory = malloc_and_point_acts(&acts, asizes);
    encoder(acts.emb, tokens, params.wte, T, C);
    layernorm(acts.ln, acts.emb, params.lnw, params.lnb, T, C);
    matmul(acts.logits, acts.ln, params.fcw, params.fcb, T, C, V);
    double loss = crossentropy(acts.logits, targets, T, V);
    free(acts_memory);
    return loss;
}
"""

ROWS = """
double rows_loss(const double* a, int n, int m) {
    const double** rows = (const double**)malloc((size_t)n * sizeof(double*));
    for (int i = 0; i < n; i++) rows[i] = a + (size_t)i * m;        /* row pointers in heap memory */
    double s = 0.0;
    for (int i = 0; i < n; i++)
        for (int j = 0; j < m; j++) s += rows[i][j] * rows[(i + 1) % n][j];
    free(rows);
    return s;
}
"""


@functools.cache
def load(source: str, opt: int):
    return ado.from_llvm(differential.compile_c(HEADER + source, opt))


def central_differences(f, x: np.ndarray, h: float = 1e-6) -> np.ndarray:
    return np.array([(f(x + h * e) - f(x - h * e)) / (2 * h) for e in np.eye(x.size)])


T, V, C = 3, 5, 4
N_PARAMS = 2 * V * C + 2 * C + V
TOKENS = np.array([1, 3, 0], dtype=np.int32)
TARGETS = np.array([2, 0, 4], dtype=np.int32)


@pytest.mark.parametrize("opt", LEVELS)
@isolated
def test_a_gpt_shaped_loss_through_structs_of_pointers(opt):
    fn = load(GPT, opt)["gpt_loss"]
    rng = np.random.default_rng(opt)
    params = 0.5 * rng.standard_normal(N_PARAMS)
    params[V * C:V * C + C] += 1.0                     # layernorm weights near 1
    rest = (ez.Const(TOKENS), ez.Const(TARGETS), T, V, C)
    grad = np.zeros(N_PARAMS)
    ez.autodiff(ez.Reverse, fn, ez.Duplicated(params.copy(), grad), *rest)
    fd = central_differences(lambda p: float(fn(p.copy(), TOKENS, TARGETS, T, V, C)), params)
    assert np.count_nonzero(grad) > N_PARAMS // 2     # the parameters reached through the structs all count
    np.testing.assert_allclose(grad, fd, rtol=1e-6, atol=1e-8)
    v = rng.standard_normal(N_PARAMS)
    tangent = ez.autodiff(ez.Forward, fn, ez.Duplicated(params.copy(), v.copy()), *rest)
    assert float(tangent) == pytest.approx(float(grad @ v), rel=1e-12, abs=1e-14)


GPT_F32 = (GPT.replace("double", "float").replace("sqrt(", "sqrtf(").replace("exp(", "expf(")
           .replace("log(", "logf(").replace("1e-5", "1e-5f"))


@pytest.mark.parametrize("opt", LEVELS)
@isolated
def test_the_same_loss_in_float_as_llm_c_has_it(opt):
    fn = load(GPT_F32, opt)["gpt_loss"]
    rng = np.random.default_rng(opt)
    params = (0.5 * rng.standard_normal(N_PARAMS)).astype(np.float32)
    params[V * C:V * C + C] += 1.0
    rest = (ez.Const(TOKENS), ez.Const(TARGETS), T, V, C)
    grad = np.zeros_like(params)
    ez.autodiff(ez.Reverse, fn, ez.Duplicated(params.copy(), grad), *rest)
    fd = central_differences(lambda p: float(fn(p.astype(np.float32), TOKENS, TARGETS, T, V, C)), params, h=1e-2)
    np.testing.assert_allclose(grad, fd, rtol=0, atol=3e-3)        # f32 central differences: h = 1e-2
    v = rng.standard_normal(N_PARAMS).astype(np.float32)
    tangent = ez.autodiff(ez.Forward, fn, ez.Duplicated(params.copy(), v.copy()), *rest)
    assert float(tangent) == pytest.approx(float(grad.astype(np.float64) @ v), rel=1e-5, abs=1e-6)


@pytest.mark.parametrize("opt", LEVELS)
@isolated
def test_row_pointers_in_a_heap_block(opt):
    """At -O2/-O3 the vectorizer fills the table with vector stores of pointers (ir/masked_memory.py
    makes those one store per lane): ``<4 x ptr>`` or ``<8 x ptr>``, by the clang and the host's
    vector width."""
    vector_stores = re.findall(r"store <\d+ x ptr>", differential.compile_c(HEADER + ROWS, opt))
    assert bool(vector_stores) == (opt >= 2)
    fn = load(ROWS, opt)["rows_loss"]
    n, m = 3, 4
    a = np.random.default_rng(10 + opt).standard_normal(n * m)
    grad = np.zeros(n * m)
    ez.autodiff(ez.Reverse, fn, ez.Duplicated(a.copy(), grad), n, m)
    rows = a.reshape(n, m)
    expected = np.roll(rows, -1, axis=0) + np.roll(rows, 1, axis=0)     # d/da_i of sum_i a_i . a_{i+1}
    np.testing.assert_allclose(grad, expected.ravel(), rtol=1e-12)
    np.testing.assert_allclose(grad, central_differences(lambda x: float(fn(x.copy(), n, m)), a), rtol=1e-6)
    v = np.random.default_rng(20 + opt).standard_normal(n * m)
    tangent = ez.autodiff(ez.Forward, fn, ez.Duplicated(a.copy(), v.copy()), n, m)
    assert float(tangent) == pytest.approx(float(grad @ v), rel=1e-12)


# ------------------------------------------------------------------ what stays refused

REFUSED = {
    # into a Const argument's memory: the caller's memory has no shadow to keep the shadow in
    "to_const": ("void to_const(double* x, double** out) { *out = x + 1; }",
                 lambda: (ez.Duplicated(np.ones(3), np.zeros(3)), ez.Const(np.zeros(1, dtype=np.uint64))),
                 r"stores a pointer to differentiated memory .* into memory that has no shadow"),
    # a table holding a pointer with a shadow and one without: which one a load gets is not known
    "mixed": ("double mixed(double* x, const double* c, int k) {\n"
              "    const double* t[2] = {x, c}; double s = 0;\n"
              "    for (int i = 0; i < 2; i++) s += t[(i + k) & 1][0] * t[i][1];\n    return s; }",
              lambda: (ez.Duplicated(np.ones(2), np.zeros(2)), ez.Const(np.ones(2)), 1), r"pointer of unknown origin"),
    # pointers kept as integers
    "as_int": ("double as_int(double* x, int n) {\n"
               "    uintptr_t t[2]; t[0] = (uintptr_t)x; t[1] = (uintptr_t)(x + 1); double s = 0;\n"
               "    for (int i = 0; i < n; i++) s += ((double*)t[i & 1])[0];\n    return s; }",
               lambda: (ez.Duplicated(np.ones(2), np.zeros(2)), 2), r"pointer of unknown origin"),
    # the table is also written by memset: its contents are not only the pointers stored
    "zeroed": ("double zeroed(double* x, int n, int k) {\n"
               "    double* t[4]; memset(t, 0, sizeof t); for (int i = 0; i < n; i++) t[i] = x + i;\n"
               "    double s = 0; for (int i = 0; i < n; i++) s += t[(i + k) % n][0] * t[i][0];\n    return s; }",
               lambda: (ez.Duplicated(np.ones(4), np.zeros(4)), 4, 1), r"pointer of unknown origin"),
    # a table written through a pointer loaded from a table whose contents are not known (memset):
    # the write may put any pointer into it
    "indirect": ("double indirect(double* x, const double* y, int k) {\n"
                 "    const double* t[2] = {x, x + 1}; const double** u[2]; memset(u, 0, sizeof u);\n"
                 "    u[0] = &t[0]; u[1] = &t[1]; *u[k] = y;\n"
                 "    double s = 0; for (int i = 0; i < 2; i++) s += t[(i + k) & 1][0];\n    return s; }",
                 lambda: (ez.Duplicated(np.ones(2), np.zeros(2)), ez.Const(np.ones(2)), 1),
                 r"pointer of unknown origin|memory that has no shadow"),
    # the table goes to a function whose body is not there
    "external": ("void keep(double** t, int n);\n"
                 "double external(double* x, int n) { double* t[2] = {x, x + 1}; keep(t, n); return t[0][0] * t[1][0]; }",
                 lambda: (ez.Duplicated(np.ones(2), np.zeros(2)), 2), r"@keep receives a pointer to differentiated memory"),
}


@pytest.mark.parametrize("opt", LEVELS)
@pytest.mark.parametrize("name", list(REFUSED))
def test_pointers_in_memory_the_engine_cannot_follow_stay_refused(name, opt):
    source, arguments, pattern = REFUSED[name]
    fn = load(source, opt)[name]
    for mode in (ez.Reverse, ez.Forward):
        with pytest.raises(DifferentiationError, match=pattern) as refusal:
            ez.autodiff(mode, fn, *arguments())
        assert "source.c:" in str(refusal.value)           # names the C line
