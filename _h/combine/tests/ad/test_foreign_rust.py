"""Rust from rustc at opt-level 0..3 (tests/fixtures/foreign/corpus/rs_O*.ll, numerics.rs):
slices with bounds checks, iterators, ``Vec`` scratch, f32 and f64, differentiated in both
modes and checked against central differences and against each other (<J v, w> = <v, J^T w>).
A function may also be refused with a DifferentiationError, never answered wrongly."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

import adoffload as ado
from adoffload import enzyme as ez
from adoffload.errors import DifferentiationError
from adoffload.testing.irtext import FunctionModules

sys.path.insert(0, str(Path(__file__).parents[1] / "ir"))
from foreign_runtime import provide_runtime  # noqa: E402  (the corpus's runtime stand-ins)

CORPUS = Path(__file__).parents[1] / "fixtures" / "foreign" / "corpus"


@pytest.fixture(scope="module", params=[0, 1, 2, 3], ids=lambda n: f"O{n}")
def rust(request):
    """The whole module, imported once per level; each function is then run and differentiated in
    a module of its own cut from that import (``FunctionModules``): the host JIT compiles the whole
    module again for every derivative, seconds per call for rustc's -O0 output."""
    return FunctionModules(ado.from_llvm((CORPUS / f"rs_O{request.param}.ll").read_text()), provide_runtime)


def _function(rust, name):
    if name not in rust:
        pytest.skip(f"{name} is not in this module")
    fn = rust[name]
    unavailable = rust.prepared[name]
    if name in unavailable:
        pytest.skip(f"{name} is not runnable on the host from this module: {unavailable[name]}")
    return fn


@pytest.mark.parametrize("name,point", [("rs_math64", (0.8, 1.3)), ("rs_fixed_point", (2.0, 1e-12))])
def test_scalar_functions(rust, name, point):
    fn = _function(rust, name)
    h = 1e-6
    fd = [(float(fn(*[p + h * (k == j) for j, p in enumerate(point)]))
           - float(fn(*[p - h * (k == j) for j, p in enumerate(point)]))) / (2 * h) for k in range(len(point))]
    reverse = ez.autodiff(ez.Reverse, fn, *(ez.Active(p) for p in point))
    forward = [ez.autodiff(ez.Forward, fn, *(ez.Duplicated(p, float(k == j)) for j, p in enumerate(point)))
               for k in range(len(point))]
    np.testing.assert_allclose(reverse, fd, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(forward, reverse, rtol=1e-12, atol=1e-14)


def _slice_case(name):
    rng = np.random.default_rng(7)
    x = rng.uniform(0.2, 1.5, 6)
    if name == "rs_dot":
        y = rng.uniform(-1.0, 1.0, 6)
        return lambda xx: [xx, y, 6]
    if name == "rs_gather_sum":
        return lambda xx: [xx, 6, np.array([5, 0, 3, 3], np.int64), 4]
    return lambda xx: [xx, 6]                  # rs_max_or, rs_prefix_mean


@pytest.mark.parametrize("name", ["rs_dot", "rs_gather_sum", "rs_max_or", "rs_prefix_mean"])
def test_slice_functions(rust, name):
    fn = _function(rust, name)
    make = _slice_case(name)
    rng = np.random.default_rng(8)
    x, v = rng.uniform(0.2, 1.5, 6), rng.standard_normal(6)
    h = 1e-6
    fd = (float(fn(*make(x + h * v))) - float(fn(*make(x - h * v)))) / (2 * h)
    try:
        args = make(x.copy())
        jv = ez.autodiff(ez.Forward, fn, ez.Duplicated(args[0], v.copy()), *args[1:])
        args = make(x.copy())
        grad = np.zeros(6)
        ez.autodiff(ez.Reverse, fn, ez.Duplicated(args[0], grad), *args[1:])
    except DifferentiationError as refusal:               # refused is allowed, wrong is not
        assert name == "rs_prefix_mean", refusal
        return
    assert jv == pytest.approx(fd, rel=1e-6, abs=1e-8)
    assert float(np.dot(grad, v)) == pytest.approx(jv, rel=1e-12, abs=1e-12)


def test_in_place_f32_slice_update(rust):
    """rs_softplus_inplace: x[i] = softplus(beta x[i]) / beta, f32 in place; forward and reverse
    agree exactly (<J v, w> = <v, J^T w>) and match the closed form sigmoid(beta x)."""
    fn = _function(rust, "rs_softplus_inplace")
    rng = np.random.default_rng(9)
    x = rng.uniform(-2.0, 2.0, 7).astype(np.float32)
    v, w = rng.standard_normal(7).astype(np.float32), rng.standard_normal(7).astype(np.float32)
    beta = 1.5
    tangent = v.copy()
    ez.autodiff(ez.Forward, fn, ez.Duplicated(x.copy(), tangent), 7, beta)
    adjoint = w.copy()
    ez.autodiff(ez.Reverse, fn, ez.Duplicated(x.copy(), adjoint), 7, beta)
    assert float(np.dot(tangent, w)) == pytest.approx(float(np.dot(v, adjoint)), rel=1e-5)
    slope = 1.0 / (1.0 + np.exp(-beta * x.astype(np.float64)))
    np.testing.assert_allclose(tangent, slope * v, rtol=1e-4, atol=1e-5)
