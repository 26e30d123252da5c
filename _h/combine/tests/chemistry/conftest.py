"""Shared fixtures: float64 JAX for every chemistry test, and the backends to check.

The JAX reference always runs; the adoffload backend runs on JAX's default device, and is
skipped (with the reason) only where adoffload cannot use that device. A kernel that fails
to compile, or a failed self-check, is an error, not a skip.
"""
from __future__ import annotations

import os
import sys

import jax
import pytest

EXAMPLES = os.path.join(os.path.dirname(__file__), "..", "..", "examples", "chemistry")


@pytest.fixture(autouse=True)
def float64():
    previous = jax.config.read("jax_enable_x64")
    jax.config.update("jax_enable_x64", True)
    yield
    jax.config.update("jax_enable_x64", previous)


@pytest.fixture(params=["jax", "adoffload"])
def backend(request, float64):
    from adoffload.chemistry import available
    ok, why = available(request.param)
    if not ok:
        pytest.skip(why)
    return request.param


@pytest.fixture(params=["jax", "adoffload"])
def primal_backend(request, float64):
    """Like ``backend``, but the adoffload side needs only primal kernels (no adjoints)."""
    from adoffload.chemistry import available
    ok, why = available(request.param, adjoint=False)
    if not ok:
        pytest.skip(why)
    return request.param


@pytest.fixture
def examples_path():
    sys.path.insert(0, os.path.abspath(EXAMPLES))
    yield os.path.abspath(EXAMPLES)
    sys.path.remove(os.path.abspath(EXAMPLES))
