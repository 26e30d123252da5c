"""Foreign IR from clang and rustc (tests/fixtures/foreign) through ``enzyme.autodiff``.

Every fixture function with float arguments, both compilers, Forward and Reverse, with Active,
Const and Duplicated annotations, checked against central finite differences of the function
itself (called on the host) and, for the array functions, against the inner-product identity
between the forward and reverse derivatives. ``sum_until`` leaves its loop on a data-dependent
condition; its derivative is the indicator of the elements summed before the exit.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import adoffload as ado
from adoffload import enzyme as ez

FOREIGN = Path(__file__).parent.parent / "fixtures" / "foreign"
COMPILERS = {"clang": "clang_kernels.ll", "rustc": "rust_kernels.ll"}
# (compiler, function) -> float dtype of its values
DTYPES = {("clang", "lj"): np.float64, ("rustc", "lj"): np.float64,
          ("clang", "poly_exp"): np.float64, ("rustc", "poly_exp"): np.float32,
          ("clang", "axpy"): np.float32, ("rustc", "axpy"): np.float32,
          ("clang", "sum_until"): np.float32, ("rustc", "sum_until"): np.float64}


@pytest.fixture(scope="module", params=sorted(COMPILERS))
def foreign(request):
    return request.param, ado.from_llvm((FOREIGN / COMPILERS[request.param]).read_text())


def _tolerances(dtype) -> dict:
    return dict(rel=2e-3, abs=2e-3) if dtype == np.float32 else dict(rel=1e-6, abs=1e-9)


def _step(dtype) -> float:
    return 1e-2 if dtype == np.float32 else 1e-6


def test_every_fixture_function_is_covered(foreign):
    compiler, module = foreign
    assert {name for c, name in DTYPES if c == compiler} == set(module.names())


# ---------------------------------------------------------------- scalar functions

@pytest.mark.parametrize("name,point", [("lj", (1.2, 1.0, 0.7)), ("poly_exp", (0.6,))])
def test_scalar_functions_forward_and_reverse_match_finite_differences(foreign, name, point):
    compiler, module = foreign
    fn = module[name]
    dtype = DTYPES[compiler, name]
    h, tol = _step(dtype), _tolerances(dtype)
    fd = []
    for k in range(len(point)):
        up, down = list(point), list(point)
        up[k] += h
        down[k] -= h
        fd.append((float(fn(*up)) - float(fn(*down))) / (2 * h))
    adjoints = ez.autodiff(ez.Reverse, fn, *(ez.Active(p) for p in point))
    assert adjoints == pytest.approx(fd, **tol)
    for k in range(len(point)):        # one Duplicated argument at a time, the others Const
        args = [ez.Duplicated(p, 1.0) if j == k else ez.Const(p) for j, p in enumerate(point)]
        assert ez.autodiff(ez.Forward, fn, *args) == pytest.approx(fd[k], **tol)
    if len(point) > 1:                 # Const in reverse: None, the others unchanged
        mixed = ez.autodiff(ez.Reverse, fn, ez.Const(point[0]), *(ez.Active(p) for p in point[1:]))
        assert mixed[0] is None and list(mixed[1:]) == pytest.approx(fd[1:], **tol)


# ---------------------------------------------------------------- axpy: y += a x (arrays, loop)

@pytest.mark.parametrize("n", [1, 4, 7])       # the rustc loop is unrolled by two with an epilogue
def test_axpy_forward_reverse_and_inner_product(foreign, n):
    compiler, module = foreign
    fn = module["axpy"]
    rng = np.random.default_rng(n)
    a = 0.7
    x = rng.uniform(-1, 1, n).astype(np.float32)
    y = rng.uniform(-1, 1, n).astype(np.float32)
    ta, tx, ty = 0.3, rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)

    out_tangent = ty.copy()
    result = ez.autodiff(ez.Forward, fn, n, ez.Duplicated(a, ta), ez.Duplicated(x.copy(), tx.copy()),
                         ez.Duplicated(y.copy(), out_tangent))
    assert result is None
    np.testing.assert_allclose(out_tangent, ty + ta * x + a * tx, rtol=1e-5, atol=1e-6)

    w = rng.standard_normal(n).astype(np.float32)
    dx, dy = np.zeros(n, np.float32), w.copy()
    _, da, _, _ = ez.autodiff(ez.Reverse, fn, n, ez.Active(a), ez.Duplicated(x.copy(), dx),
                              ez.Duplicated(y.copy(), dy))
    assert da == pytest.approx(float(np.dot(w, x)), rel=1e-5)
    np.testing.assert_allclose(dx, a * w, rtol=1e-6)
    np.testing.assert_allclose(dy, w, rtol=1e-6)        # y_out = y_in + ...: the seed passes through
    lhs = float(np.dot(out_tangent, w))
    rhs = ta * da + float(np.dot(tx, dx)) + float(np.dot(ty, dy))
    assert lhs == pytest.approx(rhs, rel=1e-5)

    # Const x: only a and y carry derivatives
    dy = w.copy()
    _, da_only, _, _ = ez.autodiff(ez.Reverse, fn, n, ez.Active(a), ez.Const(x.copy()), ez.Duplicated(y.copy(), dy))
    assert da_only == pytest.approx(da, rel=1e-6)


# ---------------------------------------------------------------- sum_until: data-dependent exit

@pytest.mark.parametrize("limit", [0.5, 1.7, 100.0])
def test_sum_until_with_a_data_dependent_exit(foreign, limit):
    compiler, module = foreign
    fn = module["sum_until"]
    dtype = DTYPES[compiler, "sum_until"]
    x = np.array([0.3, 0.45, 0.2, 0.6, 0.35, 0.5], dtype)
    partial = np.cumsum(x.astype(np.float64))
    stop = int(np.argmax(partial > limit)) if partial[-1] > limit else len(x) - 1
    expected = np.zeros(len(x))
    expected[:stop + 1] = 1.0                       # d total / d x_k: the elements summed before the exit
    assert float(fn(len(x), x, limit)) == pytest.approx(partial[stop], rel=1e-6)

    dx = np.zeros_like(x)
    result = ez.autodiff(ez.Reverse, fn, len(x), ez.Duplicated(x.copy(), dx), ez.Active(limit))
    np.testing.assert_allclose(dx, expected)
    assert result[2] == 0.0                          # the limit only decides where to stop

    v = np.random.default_rng(2).standard_normal(len(x)).astype(dtype)
    tangent = ez.autodiff(ez.Forward, fn, len(x), ez.Duplicated(x.copy(), v.copy()), ez.Const(limit))
    assert tangent == pytest.approx(float(np.dot(expected, v)), rel=1e-5)
    h = _step(dtype)
    fd = (float(fn(len(x), (x + h * v).astype(dtype), limit)) - float(fn(len(x), (x - h * v).astype(dtype), limit))) / (2 * h)
    assert tangent == pytest.approx(fd, **_tolerances(dtype))
