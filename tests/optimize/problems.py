"""Test problems of adoffload.optimize, as @ado.func helpers, and their scipy twins."""
import numpy as np

import adoffload as ado

M = 30                      # points per decay curve
T = np.linspace(0.0, 4.0, M)


@ado.func
def rosen(x):
    s = 0.0
    for i in range(len(x) - 1):
        s += 100.0 * (x[i + 1] - x[i] * x[i]) ** 2 + (1.0 - x[i]) ** 2
    return s


@ado.func
def quadratic(x, a, b):
    """0.5 x^T A x - b^T x for the problem's own A (n x n) and b."""
    s = 0.0
    for p in range(len(x)):
        t = 0.0
        for q in range(len(x)):
            t += a[p, q] * x[q]
        s += x[p] * (0.5 * t - b[p])
    return s


@ado.func
def decay(x, t, y, r):
    """Residuals of y ~ x0 exp(-x1 t) + x2."""
    for k in range(len(r)):
        r[k] = x[0] * ado.exp(-x[1] * t[k]) + x[2] - y[k]


@ado.func
def shifted_bowl(x, c, w):
    """sum w (x - c)^2 with a per-problem weight w (a scalar) and a shared centre c."""
    s = 0.0
    for i in range(len(x)):
        s += w * (x[i] - c) ** 2
    return s


@ado.func
def log_barrier(x):
    """NaN wherever x[0] < 0 (log of a negative number): the start of such a problem is refused per problem."""
    return ado.log(x[0]) * ado.log(x[0]) + x[1] * x[1]


def random_quadratics(rng, batch, n):
    q = rng.normal(size=(batch, n, n))
    a = q @ np.swapaxes(q, 1, 2) + n * np.eye(n)
    b = rng.normal(size=(batch, n))
    return np.ascontiguousarray(a), b


def decay_data(rng, batch, noise=0.01):
    true = np.stack([rng.uniform(0.5, 2.0, batch), rng.uniform(0.3, 3.0, batch), rng.uniform(-0.5, 0.5, batch)], 1)
    y = true[:, :1] * np.exp(-true[:, 1:2] * T) + true[:, 2:] + noise * rng.normal(size=(batch, M))
    return true, y
