"""Vector operations on the thread's local arrays (kernel-language helpers of the optimizers)."""
from __future__ import annotations

import adoffload as ado


@ado.func
def dot(a, b):
    s = 0.0
    for j in range(len(a)):
        s += a[j] * b[j]
    return s


@ado.func
def row_dot(m, k, b):
    """<m[k, :], b>."""
    s = 0.0
    for j in range(len(b)):
        s += m[k, j] * b[j]
    return s


@ado.func
def max_abs(a):
    """The largest |a[j]|; NaN when an element is NaN (so a test `max_abs(g) <= gtol` fails on NaN)."""
    s = 0.0
    for j in range(len(a)):
        v = ado.abs(a[j])
        if not (v <= s):
            s = v
    return s


@ado.func
def norm(a):
    return ado.sqrt(dot(a, a))


@ado.func
def copy(source, target):
    for j in range(len(source)):
        target[j] = source[j]


@ado.func
def step_from(x, d, alpha, target):
    """target = x + alpha * d."""
    for j in range(len(x)):
        target[j] = x[j] + alpha * d[j]


@ado.func
def negate(source, target):
    for j in range(len(source)):
        target[j] = -source[j]


@ado.func
def all_finite(a):
    ok = True
    for j in range(len(a)):
        if not ((a[j] - a[j]) == 0.0):
            ok = False
    return ok
