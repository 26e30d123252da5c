"""The GPT-2 of benchmarks/kernels/gpt2.c (issue 31's llm.c row), at a tiny size: the gradient that
``ez.autodiff`` gets by reversing the forward + loss equals the hand-written backward's, and the hand
backward matches central differences of the native forward (so neither side checks itself)."""
from __future__ import annotations

import numpy as np
import pytest

from benchmarks import gpt2

pytestmark = pytest.mark.skipif(not gpt2.clang_available(),
                                reason="needs clang from the ziglang wheel (pip install ziglang) to compile gpt2.c")


@pytest.fixture(scope="module")
def model():
    return gpt2.GPT2(gpt2.SMALL, seed=3)


def test_the_reversed_forward_matches_the_hand_backward(model):
    error = model.gradient_error()
    assert np.count_nonzero(model.grads) > 0.9 * model.n_params - model.config["V"] * model.config["C"]
    assert error < 1e-5, error
    loss = model.loss()
    assert np.isfinite(loss) and abs(loss - np.log(model.config["V"])) < 0.5     # near-uniform predictions


def test_the_hand_backward_matches_central_differences(model):
    model.hand_step()
    rng = np.random.default_rng(0)
    h = 1e-2
    for _ in range(4):
        d = rng.standard_normal(model.n_params)
        d = (d / np.linalg.norm(d)).astype(np.float32)           # a unit step direction
        fd = (model.loss(model.params + h * d) - model.loss(model.params - h * d)) / (2 * h)
        assert float(model.grads.astype(np.float64) @ d) == pytest.approx(fd, rel=1e-2, abs=1e-3)
    for name in ("wpe", "qkvw", "fcprojb", "lnfw"):        # one element of a few tensors
        start, size = model.tensor(name)
        k = start + int(rng.integers(size))
        e = np.zeros(model.n_params, np.float32)
        e[k] = 1.0
        fd = (model.loss(model.params + h * e) - model.loss(model.params - h * e)) / (2 * h)
        assert float(model.grads[k]) == pytest.approx(fd, rel=5e-2, abs=2e-4), name
