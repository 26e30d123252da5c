"""The checker itself catches wrong derivatives (custom derivatives that lie, one way each)."""
import numpy as np
import pytest

import adoffload as ado
from adoffload import In, Out, f64

from .check_grads import check_grads


def _true_jvp(x, dx):
    return ado.cos(x) * dx


def _wrong_jvp(x, dx):
    return 1.01 * ado.cos(x) * dx


def _true_vjp(x, dy):
    return ado.cos(x) * dy


def _wrong_vjp(x, dy):
    return 1.01 * ado.cos(x) * dy


@ado.func(jvp=_wrong_jvp, vjp=_wrong_vjp)
def _sin_bad_both(x):
    return ado.sin(x)


@ado.func(jvp=_true_jvp, vjp=_wrong_vjp)
def _sin_bad_vjp(x):
    return ado.sin(x)


@ado.func(jvp=_true_jvp, vjp=_true_vjp)
def _sin_good(x):
    return ado.sin(x)


@ado.kernel
def _bad_both(x: In[f64], y: Out[f64]):
    i = ado.tid()
    y[i] = _sin_bad_both(x[i])


@ado.kernel
def _bad_vjp(x: In[f64], y: Out[f64]):
    i = ado.tid()
    y[i] = _sin_bad_vjp(x[i])


@ado.kernel
def _good(x: In[f64], y: Out[f64]):
    i = ado.tid()
    y[i] = _sin_good(x[i])


def _inputs():
    return dict(x=np.array([0.1, 0.7, -1.2, 2.0]), y=np.zeros(4))


def test_accepts_correct_custom_derivatives():
    check_grads(_good, _inputs(), ["x"], 4, width=2)


def test_wrong_forward_derivative_fails_finite_differences():
    with pytest.raises(AssertionError, match="finite differences"):
        check_grads(_bad_both, _inputs(), ["x"], 4)


def test_wrong_reverse_derivative_fails_the_inner_product_identity():
    with pytest.raises(AssertionError, match="<Jv, w>"):
        check_grads(_bad_vjp, _inputs(), ["x"], 4)
