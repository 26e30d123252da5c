"""Lean reverse kernels of threads that store several rows each (enzyme/lean.py's
``_disjoint_rows_once``, parallel.py's ``AddressClassifier.disjoint_rows``): a thread storing rows
``a*t + c`` of one column for distinct ``c`` less than ``|a|`` apart writes elements no other store
reaches, so its seed needs no clearing (``d_y`` In). Each case also checks the lean adjoint against
the full one, finite differences and <Jv, w> = <v, Jᵀw>; the near misses must keep the clearing."""
from __future__ import annotations

import numpy as np
import pytest

import adoffload as ado
from adoffload import ir as adoir
from adoffload.analysis.address_classes import _linear
from adoffload.language.types import In, Out, f64

N = 8          # threads per axis


@ado.kernel
def four_rows(a: In[f64], x: Out[f64]):
    """Thread i writes x[4i .. 4i+3]: disjoint across threads and stores."""
    i = ado.tid()
    x[4 * i] = a[4 * i] * a[4 * i + 1]
    x[4 * i + 1] = ado.sin(a[4 * i + 1])
    x[4 * i + 3] = a[4 * i + 2] * a[4 * i + 3]
    x[4 * i + 2] = ado.exp(a[4 * i])


@ado.kernel
def apart_but_unproven(a: In[f64], x: Out[f64]):
    """x[4i] and x[4i + 5] never meet (5 is not a multiple of 4), but the offsets are 5 apart with
    a = 4: not proven, the clearing stays (and the derivative is right either way)."""
    i = ado.tid()
    x[4 * i] = a[4 * i] * a[4 * i]
    x[4 * i + 5] = ado.sin(a[4 * i])


@ado.kernel
def overlapping_rows(a: In[f64], x: Out[f64]):
    """x[2i + 2] of thread i is x[2(i+1)] of thread i + 1 (a race: which store lands is undefined,
    so only the refusal is checked): the clearing must stay."""
    i = ado.tid()
    x[2 * i] = a[2 * i] * a[2 * i]
    x[2 * i + 1] = ado.sin(a[2 * i])
    x[2 * i + 2] = 3.0 * a[2 * i + 1]


@ado.kernel
def same_row_twice(a: In[f64], x: Out[f64]):
    """Two stores to x[2i]: the first one's adjoint must see a cleared seed."""
    i = ado.tid()
    x[2 * i] = a[2 * i] * a[2 * i]
    x[2 * i + 1] = ado.sin(a[2 * i])
    x[2 * i] = 3.0 * a[2 * i + 1]


@ado.kernel
def two_rows_2d(x: In[f64, 2], y: Out[f64, 2]):
    """Thread (i, j) writes y[2i, j] and y[2i + 1, j]."""
    i, j = ado.tid()
    y[2 * i, j] = x[2 * i, j] * x[2 * i + 1, j]
    y[2 * i + 1, j] = ado.cos(x[2 * i + 1, j]) + x[2 * i, j]


@ado.kernel
def rows_shared_column(x: In[f64, 2], y: Out[f64, 2]):
    """Column j // 2: threads (i, 2k) and (i, 2k + 1) write the same elements (a race: only the
    refusal is checked)."""
    i, j = ado.tid()
    y[2 * i, j // 2] = x[2 * i, j] * 2.0
    y[2 * i + 1, j // 2] = x[2 * i + 1, j] * 3.0


SY, SX, SR = 2, 4, 4


@ado.kernel(block=(SY, SX))
def stencil_rows(x: In[f64, 2], y: Out[f64, 2]):
    """benchmarks/kernels/blocks.py's stencil_shared in small: 4 rows per thread, the left and right
    neighbours from a shared tile."""
    ti, tj = ado.thread_id()
    bi, bj = ado.block_id()
    T = ado.shared((SY * SR, SX + 2), ado.f64)
    m = x.shape[1]
    r = ti * SR
    r0 = bi * SY * SR + r
    c = bj * SX + tj
    v0 = x[r0, c]
    v1 = x[r0 + 1, c]
    v2 = x[r0 + 2, c]
    v3 = x[r0 + 3, c]
    T[r, 1 + tj] = v0
    T[r + 1, 1 + tj] = v1
    T[r + 2, 1 + tj] = v2
    T[r + 3, 1 + tj] = v3
    if tj == 0:
        for q in range(SR):
            T[r + q, 0] = x[r0 + q, c - 1] if c > 0 else 0.0
    if tj == SX - 1:
        for q in range(SR):
            T[r + q, SX + 1] = x[r0 + q, c + 1] if c + 1 < m else 0.0
    ado.sync_threads()
    y[r0, c] = 0.5 * v0 * v1 + 0.125 * (T[r, tj] + T[r, tj + 2])
    y[r0 + 1, c] = 0.5 * v1 + 0.125 * (v0 * v2 + T[r + 1, tj] + T[r + 1, tj + 2])
    y[r0 + 2, c] = 0.5 * v2 + 0.125 * (v1 + v3 * T[r + 2, tj] + T[r + 2, tj + 2])
    y[r0 + 3, c] = ado.sin(v3) + 0.125 * (T[r + 3, tj] + T[r + 3, tj + 2])


# kernel, shapes of (input, output), grid, whether the lean seed is read-only
CASES = {
    "four_rows": (four_rows, (4 * N,), (4 * N,), (N,), True),
    "apart_but_unproven": (apart_but_unproven, (4 * N + 6,), (4 * N + 6,), (N,), False),
    "overlapping_rows": (overlapping_rows, (2 * N + 2,), (2 * N + 2,), (N,), False),
    "same_row_twice": (same_row_twice, (2 * N,), (2 * N,), (N,), False),
    "two_rows_2d": (two_rows_2d, (2 * N, N), (2 * N, N), (N, N), True),
    "rows_shared_column": (rows_shared_column, (2 * N, 2 * N), (2 * N, N), (N, 2 * N), False),
    "stencil_rows": (stencil_rows, (16, 8), (16, 8), (4, 8), True),
}


def _names(kernel):
    params = kernel.signature.params
    return params[0].name, params[1].name


@pytest.mark.parametrize("name", CASES)
def test_seed_clearing_kept_only_where_rows_are_disjoint(name):
    kernel, _, _, _, read_only = CASES[name]
    inp, out = _names(kernel)
    lean = ado.vjp(kernel, [inp], primal_outputs=False)
    intents = {p.name: p.type.intent for p in lean.signature.params}
    assert intents[f"d_{out}"] == ("in" if read_only else "inout"), intents


RACES = {"overlapping_rows", "rows_shared_column"}


@pytest.mark.parametrize("name", sorted(set(CASES) - RACES))
def test_lean_adjoint_is_the_full_one_and_the_derivative(name):
    kernel, in_shape, out_shape, grid, _ = CASES[name]
    inp, out = _names(kernel)
    rng = np.random.default_rng(11)
    x = rng.uniform(0.3, 1.3, in_shape)
    w = rng.standard_normal(out_shape)
    v = rng.standard_normal(in_shape)

    def run(kernel_, **values):
        values = {k: np.array(a, copy=True) for k, a in values.items()}
        kernel_(**values, grid=grid)
        return values

    grads = {}
    for lean in (True, False):
        rev = ado.vjp(kernel, [inp], primal_outputs=not lean)
        got = run(rev, **{inp: x, out: np.zeros(out_shape), f"d_{inp}": np.zeros(in_shape), f"d_{out}": w})
        grads[lean] = got[f"d_{inp}"]
    np.testing.assert_array_equal(grads[True], grads[False])
    fwd = ado.jvp(kernel, [inp])
    jv = run(fwd, **{inp: x, out: np.zeros(out_shape), f"d_{inp}": v, f"d_{out}": np.zeros(out_shape)})[f"d_{out}"]
    lhs, rhs = float(np.sum(jv * w)), float(np.sum(v * grads[True]))
    assert abs(lhs - rhs) <= 1e-11 * (abs(lhs) + 1.0), (lhs, rhs)
    h = 1e-6
    up = run(kernel, **{inp: x + h * v, out: np.zeros(out_shape)})[out]
    down = run(kernel, **{inp: x - h * v, out: np.zeros(out_shape)})[out]
    np.testing.assert_allclose(float(np.sum((up - down) / (2 * h) * w)), rhs, rtol=1e-7, atol=1e-9)


def test_an_or_folds_into_an_add_only_where_the_constant_fits_the_zero_low_bits():
    module = adoir.import_module("""
define void @f(i64 %t) {
  %a = shl i64 %t, 2
  %b = or i64 %a, 3
  %c = or i64 %a, 5
  %d = mul i64 %t, 8
  %e = or i64 %d, 7
  ret void
}
""")
    fn = module.functions["f"]
    values = {inst.name: inst for inst in fn.instructions()}
    t = fn.args[0]
    assert _linear(values["b"]) == {t: 4, 1: 3}
    assert _linear(values["c"]) == {values["c"]: 1}          # 5 needs 3 bits; t << 2 clears 2
    assert _linear(values["e"]) == {t: 8, 1: 7}
