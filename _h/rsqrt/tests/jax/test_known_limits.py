"""The README's known limits on derivatives of gradients under JAX are what happens (issue 14,
item 9: they implied that jax.grad of jax.grad works where it is refused)."""
from __future__ import annotations

from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import adoffload as ado

README = " ".join((Path(__file__).resolve().parents[2] / "README.md").read_text().split())


@ado.kernel
def walk(x: ado.In[ado.f64], n: ado.In[ado.i64], out: ado.Out[ado.f64]):
    i = ado.tid()
    acc = x[i]
    k = 0
    while k < n[i]:
        acc = ado.sin(acc) * x[i]
        k += 1
    out[i] = acc


def _reference(v, n):
    """``walk`` in plain JAX (the loop unrolled per element)."""
    out = []
    for i in range(v.shape[0]):
        acc = v[i]
        for _ in range(int(n[i])):
            acc = jnp.sin(acc) * v[i]
        out.append(acc)
    return jnp.stack(out)


def test_second_derivatives_through_a_first_adjoints_dynamic_tape_match_plain_jax():
    """The README's promise: every second-derivative form works through a dynamic tape (its
    shadow tape), and one level deeper is refused."""
    assert "differentiate through its tape with a shadow tape" in README
    assert ado.vjp(walk, ["x"]).tape is not None
    f = ado.jax_kernel(walk)
    n, x = np.array([2, 3, 4, 0]), jnp.asarray([0.3, 0.5, 0.7, 1.1])
    loss = lambda v: (f(v, jnp.asarray(n)) ** 2).sum() + (f(v, jnp.asarray(n)) * v[::-1]).sum()
    ref = lambda v: (_reference(v, n) ** 2).sum() + (_reference(v, n) * v[::-1]).sum()
    np.testing.assert_allclose(jax.grad(loss)(x), jax.grad(ref)(x), rtol=1e-12)
    hessian = jax.hessian(ref)(x)
    assert np.abs(hessian - np.diag(np.diag(hessian))).max() > 0.1        # not diagonal: v[::-1] couples
    for second in (jax.jacrev(jax.grad(loss)), jax.jacfwd(jax.grad(loss)), jax.hessian(loss),
                   jax.jit(jax.hessian(loss))):
        np.testing.assert_allclose(second(x), hessian, rtol=1e-10, atol=1e-12)
    w = jnp.asarray([0.5, -1.0, 2.0, 0.25])
    np.testing.assert_allclose(jax.grad(lambda v: jax.grad(loss)(v) @ w)(x), hessian @ w, rtol=1e-10)
    with pytest.raises(ado.ArgumentError, match="two levels of dynamic tapes"):
        ado.vjp(ado.vjp(ado.vjp(walk, ["x"]), ["x"]), ["x"])
