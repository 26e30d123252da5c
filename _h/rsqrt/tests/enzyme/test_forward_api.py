"""The Enzyme-style API on foreign LLVM IR: autodiff(Forward | Reverse, mod["f"], annotations...)."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import adoffload as ado
from adoffload import enzyme as ez
from adoffload.errors import ArgumentError, ShapeError

FIXTURE = Path(__file__).parent / "fixtures" / "lj_scale.ll"


@pytest.fixture(scope="module")
def mod():
    return ado.from_llvm(FIXTURE.read_text())


def lj(r2, sigma, eps):
    q = sigma * sigma / r2
    return 4 * eps * (q ** 6 - q ** 3)


def _fd(f, x, k, h=1e-6):
    up, down = list(x), list(x)
    up[k] += h
    down[k] -= h
    return (f(*up) - f(*down)) / (2 * h)


def test_reverse_active_scalars_give_adjoints_and_none_for_const(mod):
    d_r2, d_sigma, d_eps = ez.autodiff(ez.Reverse, mod["lj"], ez.Active(1.2), ez.Active(1.0), ez.Const(1.0))
    assert d_eps is None
    assert d_r2 == pytest.approx(_fd(lj, (1.2, 1.0, 1.0), 0), rel=1e-7)
    assert d_sigma == pytest.approx(_fd(lj, (1.2, 1.0, 1.0), 1), rel=1e-7)


def test_forward_tangent_matches_reverse_adjoint(mod):
    grads = ez.autodiff(ez.Reverse, mod["lj"], ez.Active(1.3), 0.9, ez.Active(0.7))
    tangent = ez.autodiff(ez.Forward, mod["lj"], ez.Duplicated(1.3, 0.5), 0.9, ez.Duplicated(0.7, -2.0))
    assert tangent == pytest.approx(0.5 * grads[0] - 2.0 * grads[2], rel=1e-12)


def test_duplicated_arrays_accumulate_in_place(mod):
    x = np.array([0.1, 0.5, -0.3])
    dx, out, dout = np.full(3, 10.0), np.zeros(3), np.ones(3)
    _, _, d_a, _ = ez.autodiff(ez.Reverse, mod["scale"], ez.Duplicated(x, dx), ez.Duplicated(out, dout),
                               ez.Active(2.0), 3)
    np.testing.assert_allclose(dx, 10.0 + 2.0 * np.cos(x))      # accumulated, not overwritten
    np.testing.assert_allclose(dout, 0.0)                        # the seed is consumed
    assert d_a == pytest.approx(np.sin(x).sum())
    np.testing.assert_allclose(out, 2.0 * np.sin(x))             # the primal ran too


def test_forward_void_function_writes_output_tangents(mod):
    x, tx = np.array([0.1, 0.5, -0.3]), np.array([1.0, -1.0, 2.0])
    out, tout = np.zeros(3), np.zeros(3)
    assert ez.autodiff(ez.Forward, mod["scale"], ez.Duplicated(x, tx), ez.Duplicated(out, tout), 2.0, 3) is None
    np.testing.assert_allclose(tout, 2.0 * np.cos(x) * tx)


def test_bad_annotations_are_argument_errors(mod):
    with pytest.raises(ArgumentError, match="Active is for reverse mode"):
        ez.autodiff(ez.Forward, mod["lj"], ez.Active(1.0), 1.0, 1.0)
    with pytest.raises(ArgumentError, match="takes 3 arguments"):
        ez.autodiff(ez.Reverse, mod["lj"], ez.Active(1.0))
    with pytest.raises(ArgumentError, match="use Active"):
        ez.autodiff(ez.Reverse, mod["lj"], ez.Duplicated(1.0, 0.0), 1.0, 1.0)
    with pytest.raises(ShapeError, match="does not match"):
        ez.autodiff(ez.Forward, mod["scale"], ez.Duplicated(np.zeros(3), np.zeros(2)), np.zeros(3), 1.0, 3)


def test_public_names():
    for name in ("Forward", "Reverse", "Active", "Const", "Duplicated", "autodiff", "forward", "reverse",
                 "derive_kernel", "Activity", "RULES", "rule_for", "DifferentiationError"):
        assert hasattr(ez, name), name
