"""A deterministic CUDA-source block kernel on an NVIDIA GPU (device="cuda"; skipped without one):
the tiled matmul's adjoint adds into its shadow tiles in thread order (codegen/gpu/ordered_shared.py),
so the gradients are bitwise identical run to run. Here rather than in tests/determinism, whose
conftest gives every test a fresh compile cache: a GPU machine without clang reads this source's
IR from the carried cache (python -m tests.foreign_cuda.warm_clang_cache)."""
from __future__ import annotations

import numpy as np
import pytest

import adoffload as ado
from adoffload.errors import Error


def _cuda_or_none():
    try:
        from adoffload.runtime import get_device
        return get_device("cuda")
    except (Error, ImportError, OSError):
        return None


pytestmark = [pytest.mark.gpu, pytest.mark.skipif(_cuda_or_none() is None, reason="no CUDA device / driver")]


def test_cuda_source_tiled_matmul_deterministic_adjoint():
    from tests.foreign_cuda.sources import TILED_MATMUL
    k = ado.from_cuda(TILED_MATMUL).kernel("matmul", A=ado.In[ado.f64], B=ado.In[ado.f64], C=ado.Out[ado.f64],
                                           n=ado.i32, k=ado.i32, m=ado.i32)
    rng = np.random.default_rng(1)
    n, kk, m = 64, 40, 48
    A, B, w = rng.standard_normal((n, kk)), rng.standard_normal((kk, m)), rng.standard_normal((n, m))
    prints, result = set(), None
    for _ in range(5):
        gA, gB = np.zeros_like(A), np.zeros_like(B)
        ado.vjp(k, ["A", "B"], deterministic=True)(A, B, np.zeros((n, m)), n, kk, m, d_A=gA, d_B=gB, d_C=w.copy(),
                                                   blocks=(m // 8, n // 8), threads=(8, 8), device="cuda")
        prints.add(gA.tobytes() + gB.tobytes())
        result = (gA, gB)
    assert len(prints) == 1
    np.testing.assert_allclose(result[0], w @ B.T, rtol=1e-11, atol=1e-12)
    np.testing.assert_allclose(result[1], A.T @ w, rtol=1e-11, atol=1e-12)
