"""The seed ``d_out`` of a reverse kernel survives the call (issue 14, item 5): reusing it, as
the README invites, used to give zero gradients on the second call."""
from __future__ import annotations

import numpy as np

import adoffload as ado


@ado.kernel
def saxpy(a: ado.f32, x: ado.In[ado.f32], y: ado.In[ado.f32], out: ado.Out[ado.f32]):
    i = ado.tid()
    out[i] = a * x[i] + y[i]


@ado.kernel
def scale_in_place(a: ado.f64, x: ado.InOut[ado.f64]):
    i = ado.tid()
    x[i] = a * x[i]


def test_seed_is_kept_and_a_second_call_accumulates_again():
    n = 16
    x, y = np.linspace(0, 1, n, dtype=np.float32), np.ones(n, np.float32)
    rev = ado.vjp(saxpy, wrt=["a", "x"])
    d_a, d_x, d_out = np.zeros(1, np.float32), np.zeros_like(x), np.ones_like(x)
    for call in (1, 2):
        rev(2.0, x, y, np.empty_like(x), d_a=d_a, d_x=d_x, d_out=d_out, grid=n)
        np.testing.assert_array_equal(d_out, 1.0)                     # read, not consumed
        np.testing.assert_allclose(d_x, 2.0 * call)                   # accumulated
        np.testing.assert_allclose(d_a[0], call * x.astype(np.float64).sum(), rtol=1e-5)


def test_inout_shadow_is_the_seed_in_and_the_adjoint_out():
    x, d_a, d_x = np.array([1.0, 2.0, 3.0]), np.zeros(1), np.array([1.0, 1.0, 2.0])
    ado.vjp(scale_in_place, ["a", "x"])(3.0, x, d_a=d_a, d_x=d_x, grid=3)
    np.testing.assert_allclose(d_x, [3.0, 3.0, 6.0])                   # d(x_out)/d(x_in) = a, times the seed
    np.testing.assert_allclose(d_a, [1.0 + 2.0 + 6.0])


def test_vjp_docstring_states_the_calling_convention():
    doc = ado.vjp.__doc__
    for words in ("accumulated", "d_<out>", "kept", "InOut"):
        assert words in doc, words
