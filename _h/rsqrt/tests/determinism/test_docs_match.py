"""docs/determinism.md says what JAX does with kernels that need a tape or a log, and that is
what happens (issue 14, item 9: it said both were refused; tape kernels work)."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import adoffload as ado

DOC = (Path(__file__).resolve().parents[2] / "docs" / "determinism.md").read_text()


@ado.kernel
def gather(x: ado.In[ado.f64], idx: ado.In[ado.i64], out: ado.Out[ado.f64]):
    i = ado.tid()
    out[i] = x[idx[i]] * x[idx[i]]


@ado.kernel
def walk(x: ado.In[ado.f64], n: ado.In[ado.i64], out: ado.Out[ado.f64]):
    i = ado.tid()
    acc = x[i]
    k = 0
    while k < n[i]:
        acc = ado.sin(acc) * x[i]
        k += 1
    out[i] = acc


@pytest.fixture
def jax():
    jax = pytest.importorskip("jax")
    previous = jax.config.jax_enable_x64
    jax.config.update("jax_enable_x64", True)
    yield jax
    jax.config.update("jax_enable_x64", previous)


def test_doc_states_the_jax_behaviour():
    assert "Kernels with a tape or a log are refused" not in DOC
    assert "A deterministic reverse kernel is refused by `ado.jax_kernel`" in DOC
    assert "Reverse kernels with a dynamic\n  tape, and no log, do run under JAX" in DOC


def test_deterministic_kernel_is_refused_under_jax(jax):
    rev = ado.vjp(gather, ["x"], deterministic=True)
    x, idx = jax.numpy.arange(4.0), jax.numpy.asarray([0, 0, 3, 1])
    with pytest.raises(ado.JaxIntegrationError, match="deterministic"):
        ado.jax_kernel(rev, out_shapes={"out": (4,)})(x, idx, jax.numpy.zeros(4), jax.numpy.ones(4))


def test_a_kernel_with_a_dynamic_tape_runs_under_jax(jax):
    assert ado.vjp(walk, ["x"]).tape is not None
    f = ado.jax_kernel(walk)
    x, n = np.array([0.3, 0.5, 0.7]), np.array([2, 3, 4])
    got = jax.grad(lambda v: f(v, n).sum())(jax.numpy.asarray(x))
    h = 1e-6
    fd = [(np.asarray(f(x + h * e, n)).sum() - np.asarray(f(x - h * e, n)).sum()) / (2 * h) for e in np.eye(3)]
    np.testing.assert_allclose(got, fd, rtol=1e-6)
