"""A variable read where some path has not assigned it is refused at compile time. Python would
raise UnboundLocalError on such a path; the kernel read an uninitialized stack slot, which LLVM
folded to the other path's value: ``if x[i] > 0: q = 3 * x[i]`` then ``y[i] = q`` gave ``3 * x[i]``
for every thread, and a gradient of 0 where x <= 0 that disagreed with that value."""
from __future__ import annotations

import numpy as np
import pytest

import adoffload as ado

X = np.array([3.0, -1.0, 2.0, 0.0, 5.0])


def run(kernel, x=X):
    y = np.zeros_like(x)
    kernel(x, y, grid=x.size)
    return y


def test_a_variable_assigned_in_one_branch_only_is_refused_where_it_is_read():
    with pytest.raises(ado.UndefinedNameError) as info:
        @ado.kernel
        def k(x: ado.In[ado.f64], y: ado.Out[ado.f64]):
            i = ado.tid()
            if x[i] > 0.0:
                q = x[i] * 3.0
            y[i] = q
    message = str(info.value)
    assert "variable 'q' is not assigned on every path" in message and "y[i] = q" in message
    assert f"{__file__}:" in message


def test_a_variable_assigned_in_a_loop_that_may_not_run_is_refused():
    with pytest.raises(ado.UndefinedNameError, match="variable 'last'"):
        @ado.kernel
        def k(x: ado.In[ado.f64], y: ado.Out[ado.f64]):
            i = ado.tid()
            for j in range(i):
                last = x[j]
            y[i] = last
    with pytest.raises(ado.UndefinedNameError, match="variable 'q'"):
        @ado.kernel
        def w(x: ado.In[ado.f64], y: ado.Out[ado.f64]):
            i = ado.tid()
            while x[i] > 1.0:
                q = x[i]
                break
            y[i] = q


def test_a_helper_is_checked_too():
    @ado.func
    def pick(v):
        if v > 0.0:
            r = v
        return r

    with pytest.raises(ado.UndefinedNameError, match="variable 'r'"):
        @ado.kernel
        def k(x: ado.In[ado.f64], y: ado.Out[ado.f64]):
            i = ado.tid()
            y[i] = pick(x[i])


def test_every_path_that_assigns_or_leaves_is_accepted():
    @ado.kernel
    def both(x: ado.In[ado.f64], y: ado.Out[ado.f64]):
        i = ado.tid()
        if x[i] > 0.0:
            q = x[i] * 3.0
        elif x[i] < -0.5:
            q = 1.0
        else:
            return
        y[i] = q
    np.testing.assert_array_equal(run(both), [9.0, 1.0, 6.0, 0.0, 15.0])

    @ado.kernel
    def skip(x: ado.In[ado.f64], y: ado.Out[ado.f64]):
        i = ado.tid()
        acc = 0.0
        for j in range(x.shape[0]):
            if x[j] > 0.0:
                v = x[j]
            else:
                continue
            acc += v
        y[i] = acc
    np.testing.assert_array_equal(run(skip), 10.0)


def test_loops_that_always_run_define_what_their_bodies_assign():
    """A range of constant bounds that is not empty, and ado.static_range, run the body at least once,
    as Python does: the search index ``j`` after a loop with ``break`` is its Python value."""
    @ado.kernel
    def search(x: ado.In[ado.f64], y: ado.Out[ado.f64]):
        i = ado.tid()
        for j in range(5):
            last = x[j]
            if x[j] > x[i]:
                break
        y[i] = ado.f64(j) + 0.0 * last

    want = []
    for i in range(5):
        for j in range(5):
            if X[j] > X[i]:
                break
        want.append(j)
    np.testing.assert_array_equal(run(search), want)

    @ado.kernel
    def unrolled(x: ado.In[ado.f64], y: ado.Out[ado.f64]):
        i = ado.tid()
        for m in ado.static_range(3):
            t = x[i] * m
        y[i] = t
    np.testing.assert_array_equal(run(unrolled), 2.0 * X)

    @ado.kernel
    def newton(x: ado.In[ado.f64], y: ado.Out[ado.f64]):
        i = ado.tid()
        r = 1.0
        while True:                       # left only by the break, after r_new is assigned
            r_new = 0.5 * (r + (x[i] * x[i] + 1.0) / r)
            if ado.abs(r_new - r) < 1e-14:
                break
            r = r_new
        y[i] = r_new
    np.testing.assert_allclose(run(newton), np.sqrt(X * X + 1.0), rtol=1e-14)

    with pytest.raises(ado.UndefinedNameError, match="variable 't'"):
        @ado.kernel
        def empty(x: ado.In[ado.f64], y: ado.Out[ado.f64]):
            i = ado.tid()
            for m in range(0):
                t = x[i]
            y[i] = t
