"""Ties and NaNs of selections (issue 30, item 1): the derivative goes to the element the program
returns. Enzyme's ``ReverseMode/vecmax.c`` (``ret = (ret > v[i]) ? ret : v[i]``) returns the later
of equal elements; C comparisons ``>``, ``>=``, ``<``, ``<=`` in both operand orders decide ties
differently, and each is compared with a Python replay of the loop that records which index the
program selected. ``-ffast-math`` is the case that went wrong: its ``nnan nsz`` flags let
instcombine turn the select into ``maxnum``, which may return either operand on a tie;
``ir.prepare_for_analysis`` drops those flags from fcmp/select/phi. ``minnum``/``maxnum``
themselves ignore a NaN operand, and so must their derivatives.
"""
from __future__ import annotations

import functools

import numpy as np
import pytest

import adoffload as ado
from adoffload import enzyme as ez
from adoffload import ir
from adoffload.testing import differential

needs_clang = pytest.mark.skipif(not differential.clang_available(),
                                 reason="the ziglang wheel (the clang these tests compile C with) is not installed")
LEVELS = [0, 1, 2, 3]

VECMAX = """#include <math.h>
double reduce_max(double* vec, int size) {
  double ret = -INFINITY;
  for (int i = 0; i < size; i++)
    ret = (ret > vec[i]) ? ret : vec[i];
  return ret;
}
"""

OPS = {"gt": ">", "ge": ">=", "lt": "<", "le": "<="}
# (name, C statement, Python test of "keep r"): order "rx" is (r OP x) ? r : x, order "xr" is (x OP r) ? x : r
ORDERS = {"rx": ("r = (r {op} x[i]) ? r : x[i];", lambda op, r, x: op(r, x)),
          "xr": ("r = (x[i] {op} r) ? x[i] : r;", lambda op, r, x: not op(x, r))}
PY_OPS = {"gt": lambda a, b: a > b, "ge": lambda a, b: a >= b, "lt": lambda a, b: a < b, "le": lambda a, b: a <= b}
SELECTS = "".join(
    f"double sel_{name}_{order}(int n, const double* x) {{\n"
    f"  double r = x[0];\n  for (int i = 1; i < n; i++) {statement.format(op=op)}\n  return r;\n}}\n"
    for name, op in OPS.items() for order, (statement, _) in ORDERS.items())


def selected(name: str, order: str, x: np.ndarray) -> int:
    """The index whose element the C loop of ``sel_<name>_<order>`` returns, replayed exactly."""
    keep = ORDERS[order][1]
    k = 0
    for i in range(1, x.size):
        if not keep(PY_OPS[name], x[k], x[i]):
            k = i
    return k


@functools.cache
def load(source: str, opt: int, flags: tuple[str, ...] = ()):
    return ado.from_llvm(differential.compile_c(source, opt, flags))


def gradient_and_tangent(fn, x: np.ndarray, v: np.ndarray, *lead) -> tuple[np.ndarray, float]:
    grad = np.zeros_like(x)
    ez.autodiff(ez.Reverse, fn, *lead, ez.Duplicated(x.copy(), grad), *(() if lead else (x.size,)))
    tangent = ez.autodiff(ez.Forward, fn, *lead, ez.Duplicated(x.copy(), v.copy()), *(() if lead else (x.size,)))
    return grad, float(tangent)


TIES = [[-1.0, 2.0, -0.2, 2.0, 1.0],          # Enzyme's vector: the answer is d_vec = e3
        [3.0, 3.0, 1.0, 0.0, -1.0],           # a tie at the start
        [0.0, 1.0, 2.0, 5.0, 5.0],            # at the end
        [4.0, 4.0, 4.0, 4.0, 4.0],            # everywhere
        [1.0, 7.0, 2.0, 7.0, 7.0, 0.5, 7.0]]  # several, the last one away from the end


@needs_clang
@pytest.mark.parametrize("opt", LEVELS)
@pytest.mark.parametrize("vec", TIES)
def test_vecmax_gives_the_later_of_equal_elements(opt, vec):
    x = np.array(vec)
    fn = load(VECMAX, opt)["reduce_max"]
    assert fn(x.copy(), x.size) == x.max()
    last = int(np.flatnonzero(x == x.max())[-1])      # `ret > v ? ret : v` takes v on a tie
    v = np.random.default_rng(opt).standard_normal(x.size)
    grad, tangent = gradient_and_tangent(fn, x, v)
    np.testing.assert_array_equal(grad, np.eye(x.size)[last])
    assert tangent == v[last]


@needs_clang
@pytest.mark.parametrize("vec", TIES)
def test_vecmax_under_fast_math_at_O0_follows_the_select(vec):
    """-O0 leaves the select to our canonicalization: it stays a select with the tie it had."""
    x = np.array(vec)
    fn = load(VECMAX, 0, ("-ffast-math",))["reduce_max"]
    grad, _ = gradient_and_tangent(fn, x, np.ones(x.size))
    np.testing.assert_array_equal(grad, np.eye(x.size)[int(np.flatnonzero(x == x.max())[-1])])


@needs_clang
@pytest.mark.parametrize("opt", [1, 2, 3])
@pytest.mark.parametrize("vec", TIES)
def test_vecmax_under_fast_math_optimized_gives_one_maximal_element(opt, vec):
    """Clang -O1.. -ffast-math emits maxnum (and a vector reduction) itself: which of equal
    elements it returns is left open, so the derivative is one one-sided derivative, the
    derivative of one maximal element; away from ties it is exact."""
    x = np.array(vec)
    fn = load(VECMAX, opt, ("-ffast-math",))["reduce_max"]
    grad, _ = gradient_and_tangent(fn, x, np.ones(x.size))
    assert grad.sum() == 1.0 and np.count_nonzero(grad) == 1, grad
    assert x[int(np.argmax(grad))] == x.max()
    y = x + np.arange(x.size) * 1e-3                   # distinct: the one maximum
    grad, _ = gradient_and_tangent(fn, y, np.ones(y.size))
    np.testing.assert_array_equal(grad, np.eye(y.size)[int(np.argmax(y))])


@needs_clang
@pytest.mark.parametrize("opt", LEVELS)
@pytest.mark.parametrize("order", list(ORDERS))
@pytest.mark.parametrize("name", list(OPS))
def test_random_ties_follow_the_element_selected(opt, name, order):
    fn = load(SELECTS, opt)[f"sel_{name}_{order}"]
    rng = np.random.default_rng([opt, list(OPS).index(name), list(ORDERS).index(order)])
    for trial in range(12):
        x = rng.integers(0, 3, size=int(rng.integers(2, 10))).astype(float)   # ties are the rule
        k = selected(name, order, x)
        assert fn(x.size, x.copy()) == x[k]
        v = rng.standard_normal(x.size)
        grad, tangent = gradient_and_tangent(fn, x, v, x.size)
        np.testing.assert_array_equal(grad, np.eye(x.size)[k], err_msg=f"x={x}, selected {k}")
        assert tangent == v[k], (x, k)


# ------------------------------------------------------------------ the IR level

SELECT_IR = """define double @f(double %a, double %b) {
  %c = fcmp FLAGSPRED double %a, %b
  %r = select FLAGSi1 %c, double %THEN, double %ELSE
  ret double %r
}
"""
PREDICATES = ["ogt", "oge", "olt", "ole", "ugt", "uge", "ult", "ule"]


@pytest.mark.parametrize("flags", ["", "fast ", "nnan nsz "])
@pytest.mark.parametrize("then", ["a", "b"])
@pytest.mark.parametrize("pred", PREDICATES)
def test_a_select_of_a_tie_keeps_its_operand_whatever_its_flags(pred, then, flags):
    text = (SELECT_IR.replace("FLAGS", flags).replace("PRED", pred)
            .replace("THEN", then).replace("ELSE", "b" if then == "a" else "a"))
    assert "maxnum" not in ir.canonicalize(ir.prepare_for_analysis(text))
    assert "minnum" not in ir.canonicalize(ir.prepare_for_analysis(text))
    fn = ado.from_llvm(text)["f"]
    holds = pred in ("oge", "ole", "uge", "ule")       # on a tie (no NaN) the predicate holds iff it admits equality
    chosen = then if holds else ("b" if then == "a" else "a")
    expected = (1.0, 0.0) if chosen == "a" else (0.0, 1.0)
    assert ez.autodiff(ez.Reverse, fn, ez.Active(2.5), ez.Active(2.5)) == expected
    assert ez.autodiff(ez.Forward, fn, ez.Duplicated(2.5, 1.0), ez.Const(2.5)) == expected[0]


@pytest.mark.parametrize("then", ["a", "b"])
@pytest.mark.parametrize("pred", PREDICATES)
def test_a_select_with_a_nan_operand_follows_its_comparison(pred, then):
    text = SELECT_IR.replace("FLAGS", "").replace("PRED", pred).replace("THEN", then).replace(
        "ELSE", "b" if then == "a" else "a")
    fn = ado.from_llvm(text)["f"]
    nan = float("nan")
    holds = pred.startswith("u")                       # unordered predicates hold with a NaN
    chosen = then if holds else ("b" if then == "a" else "a")
    for a, b in ((nan, 1.5), (1.5, nan)):
        if chosen == "a" and np.isnan(a) or chosen == "b" and np.isnan(b):
            continue                                   # the result is NaN: no finite derivative to compare
        assert ez.autodiff(ez.Reverse, fn, ez.Active(a), ez.Active(b)) == ((1.0, 0.0) if chosen == "a" else (0.0, 1.0))


MINMAX_IR = """declare double @llvm.OP.f64(double, double)
define double @f(double %a, double %b) {
  %r = call double @llvm.OP.f64(double %a, double %b)
  ret double %r
}
"""


@pytest.mark.parametrize("op", ["maxnum", "minnum"])
def test_minnum_maxnum_ignore_a_nan_operand_and_give_ties_to_the_first(op):
    fn = ado.from_llvm(MINMAX_IR.replace("OP", op))["f"]
    nan = float("nan")
    for a, b, expected in ((1.0, nan, (1.0, 0.0)), (nan, 1.0, (0.0, 1.0)), (1.0, 1.0, (1.0, 0.0)),
                           (1.0, 2.0, (0.0, 1.0) if op == "maxnum" else (1.0, 0.0)),
                           (2.0, 1.0, (1.0, 0.0) if op == "maxnum" else (0.0, 1.0))):
        assert fn(a, b) == (np.fmax if op == "maxnum" else np.fmin)(a, b)
        assert ez.autodiff(ez.Reverse, fn, ez.Active(a), ez.Active(b)) == expected, (a, b)
        assert ez.autodiff(ez.Forward, fn, ez.Duplicated(a, 1.0), ez.Const(b)) == expected[0], (a, b)
        assert ez.autodiff(ez.Forward, fn, ez.Const(a), ez.Duplicated(b, 1.0)) == expected[1], (a, b)
