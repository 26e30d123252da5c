"""The last join of a kernel threaded into its reverse (enzyme/reverse_thread.py): each arm of a
final if/else branches straight to its own reverse, so the reverse reuses the arm's square root
and divisions (LLVM does not thread jumps on GPU targets), and the gradient is unchanged."""
from __future__ import annotations

import numpy as np

import adoffload as ado


@ado.kernel
def roots(a: ado.In[ado.f64], b: ado.In[ado.f64], x1: ado.Out[ado.f64], x2: ado.Out[ado.f64]):
    i = ado.tid()
    s = b[i] * b[i] - 4.0 * a[i]
    if s >= 0.0:
        s = ado.sqrt(s)
        x1[i] = (-b[i] + s) / (2.0 * a[i])
        x2[i] = (-b[i] - s) / (2.0 * a[i])
    else:
        x1[i] = a[i] * b[i]
        x2[i] = 0.0


def _outputs(a, b):
    x1, x2 = np.zeros_like(a), np.zeros_like(a)
    roots(a=a, b=b, x1=x1, x2=x2, grid=(len(a),))
    return x1, x2


def test_gradient_through_both_arms():
    rng = np.random.default_rng(1)
    n = 16
    a, b = rng.uniform(0.2, 1.0, n), rng.uniform(-3.0, 3.0, n)      # both signs of s occur
    assert ((b * b - 4 * a) >= 0).any() and ((b * b - 4 * a) < 0).any()
    w1, w2 = rng.standard_normal(n), rng.standard_normal(n)
    d_a, d_b = np.zeros(n), np.zeros(n)
    ado.vjp(roots, ["a", "b"])(a=a, b=b, x1=np.zeros(n), x2=np.zeros(n), d_a=d_a, d_b=d_b,
                               d_x1=w1.copy(), d_x2=w2.copy(), grid=(n,))
    h = 1e-7
    for name, got in (("a", d_a), ("b", d_b)):
        for e in range(n):
            up, down = dict(a=a.copy(), b=b.copy()), dict(a=a.copy(), b=b.copy())
            up[name][e] += h
            down[name][e] -= h
            fd = sum(float(w @ (u - d)) for w, u, d in zip((w1, w2), _outputs(**up), _outputs(**down))) / (2 * h)
            np.testing.assert_allclose(got[e], fd, rtol=1e-6, atol=1e-7, err_msg=f"d_{name}[{e}]")


def test_the_reverse_reuses_the_arms_square_root_on_the_gpu():
    ptx = ado.vjp(roots, ["a", "b"]).compiled("nvptx", arch="sm_90", noalias=True).artifact
    # One square root per version of the body -- the checked one and the copy without its bounds
    # checks that runs when a thread's checks all pass up front (codegen/gpu/uniform_checks.py): the
    # forward arm's. A reverse sweep that recomputed it would double the count.
    assert ptx.count("sqrt.rn.f64") == 2
