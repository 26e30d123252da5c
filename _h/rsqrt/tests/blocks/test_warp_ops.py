"""Warp and block operations on the host CPU: values, and forward/reverse derivatives, against the same
computation written without blocks, against finite differences, and forward against reverse."""
import numpy as np
import pytest

import adoffload as ado

from .warp_kernels import PAIRS

N = 128


def _inputs(name):
    dtype = np.float32 if name == "f32" else np.float64
    rng = np.random.default_rng(sum(map(ord, name)))
    return rng.standard_normal(N).astype(dtype), rng.standard_normal(N).astype(dtype), dtype


def _run(kernel, x, dtype):
    y = np.zeros(N, dtype)
    kernel(x, y, grid=N)
    return y


def _jvp(kernel, x, dx, dtype):
    y, dy = np.zeros(N, dtype), np.zeros(N, dtype)
    ado.jvp(kernel, "x")(x, y, dx, dy, grid=N)
    return dy


def _vjp(kernel, x, w, dtype):
    y, gx = np.zeros(N, dtype), np.zeros(N, dtype)
    ado.vjp(kernel, "x")(x, y, gx, w.copy(), grid=N)
    return gx


@pytest.mark.parametrize("name", sorted(PAIRS))
def test_value_matches_the_plain_kernel(name):
    block, plain = PAIRS[name]
    x, _, dtype = _inputs(name)
    tol = 1e-5 if dtype == np.float32 else 1e-13
    np.testing.assert_allclose(_run(block, x, dtype), _run(plain, x, dtype), rtol=tol, atol=tol)


@pytest.mark.parametrize("name", sorted(PAIRS))
def test_derivatives_match_the_plain_kernel_and_each_other(name):
    block, plain = PAIRS[name]
    x, dx, dtype = _inputs(name)
    w = np.random.default_rng(7).standard_normal(N).astype(dtype)
    tol = 2e-4 if dtype == np.float32 else 1e-12
    tangent, cotangent = _jvp(block, x, dx, dtype), _vjp(block, x, w, dtype)
    np.testing.assert_allclose(tangent, _jvp(plain, x, dx, dtype), rtol=tol, atol=tol)
    np.testing.assert_allclose(cotangent, _vjp(plain, x, w, dtype), rtol=tol, atol=tol)
    # <J dx, w> == <dx, J^T w>
    assert abs(np.dot(tangent, w) - np.dot(dx, cotangent)) <= tol * 10 * (1 + abs(np.dot(tangent, w)))


@pytest.mark.parametrize("name", sorted(set(PAIRS) - {"f32"}))
def test_forward_derivative_matches_finite_differences(name):
    block, _ = PAIRS[name]
    x, dx, dtype = _inputs(name)
    h = 1e-6
    fd = (_run(block, x + h * dx, dtype) - _run(block, x - h * dx, dtype)) / (2 * h)
    np.testing.assert_allclose(_jvp(block, x, dx, dtype), fd, rtol=1e-6, atol=1e-6)
