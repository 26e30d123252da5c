"""The README's known limits on derivatives of gradients under JAX are what happens (issue 14,
item 9: they implied that jax.grad of jax.grad works where it is refused)."""
from __future__ import annotations

import re
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


def test_second_derivatives_of_a_kernel_whose_first_adjoint_needs_a_tape_are_refused():
    assert ("`jax.grad(jax.grad(f))`, `jax.jacrev(jax.grad(f))` and `ado.vjp(ado.vjp(k))` are refused with a "
            "`DifferentiationError`") in README
    assert "`jax.hessian(f)` and `jax.jacfwd(jax.grad(f))` with a `JaxIntegrationError`" in README
    assert ado.vjp(walk, ["x"]).tape is not None
    f = ado.jax_kernel(walk)
    n, x = jnp.asarray([2, 3, 4]), jnp.asarray([0.3, 0.5, 0.7])
    loss = lambda v: f(v, n).sum()
    assert np.all(np.isfinite(jax.grad(loss)(x)))                       # first derivatives work
    for second in (jax.grad(lambda v: jax.grad(loss)(v).sum()), jax.jacrev(jax.grad(loss))):
        with pytest.raises(ado.DifferentiationError, match="dynamic tape.*shadow of the tape"):
            second(x)
    for second in (jax.hessian(loss), jax.jacfwd(jax.grad(loss))):
        with pytest.raises(ado.JaxIntegrationError, match=re.escape("kernel 'walk_vjp' is a reverse kernel with a "
                                                                    "dynamic tape: forward mode through it")):
            second(x)
    with pytest.raises(ado.DifferentiationError, match="shadow of the tape"):
        ado.vjp(ado.vjp(walk, ["x"]), ["x"])
