"""A variable read where some path has not assigned it: the kernel read an uninitialized stack slot,
which LLVM folded to the other path's value (``if x[i] > 0: q = 3 * x[i]`` then ``y[i] = q`` gave
``3 * x[i]`` for every thread, and a gradient of 0 where x <= 0 that disagreed with that value). Now,
as in Python, such a read runs where an assignment did run and stops the thread with a
KernelFaultError naming the line where none did (Python's UnboundLocalError); where no status record
can report it (block kernels, helpers of scalar derivatives) it is refused at compile time."""
from __future__ import annotations

import numpy as np
import pytest

import adoffload as ado

X = np.array([3.0, -1.0, 2.0, 0.0, 5.0])
POSITIVE = np.array([3.0, 1.0, 2.0, 0.5, 5.0])


def run(kernel, x=X):
    y = np.zeros_like(x)
    kernel(x, y, grid=x.size)
    return y


@ado.kernel
def one_branch(x: ado.In[ado.f64], y: ado.Out[ado.f64]):
    i = ado.tid()
    if x[i] > 0.0:
        q = x[i] * 3.0
    y[i] = q


def test_a_read_after_an_assignment_in_one_branch_stops_where_that_branch_did_not_run():
    with pytest.raises(ado.KernelFaultError) as info:
        run(one_branch)
    message = str(info.value)
    assert "a variable was read at line" in message and "y[i] = q" in message
    assert "UnboundLocalError" in message
    np.testing.assert_array_equal(run(one_branch, POSITIVE), 3.0 * POSITIVE)


def test_its_derivatives_follow_the_value_where_it_runs():
    rev = ado.vjp(one_branch, wrt=["x"])
    d_x = np.zeros_like(POSITIVE)
    rev(POSITIVE, np.zeros_like(POSITIVE), d_x=d_x, d_y=np.ones_like(POSITIVE), grid=POSITIVE.size)
    np.testing.assert_array_equal(d_x, 3.0)
    fwd = ado.jvp(one_branch, wrt=["x"])
    d_y = np.zeros_like(POSITIVE)
    fwd(POSITIVE, np.zeros_like(POSITIVE), d_x=np.ones_like(POSITIVE), d_y=d_y, grid=POSITIVE.size)
    np.testing.assert_array_equal(d_y, 3.0)
    with pytest.raises(ado.KernelFaultError, match="UnboundLocalError"):
        rev(X, np.zeros_like(X), d_x=np.zeros_like(X), d_y=np.ones_like(X), grid=X.size)


def test_a_value_carried_across_iterations_runs_as_in_python():
    """``best`` is assigned on the first iteration and read on the later ones: valid Python, and
    right here; a loop that runs no iterations stops at the read after it."""
    @ado.kernel
    def running_max(x: ado.In[ado.f64], n: ado.i64, y: ado.Out[ado.f64]):
        i = ado.tid()
        for k in range(n):
            if k == 0:
                best = x[k]
            else:
                best = ado.max(best, x[k])
        y[i] = best
    y = np.zeros_like(X)
    running_max(X, 5, y, grid=X.size)
    np.testing.assert_array_equal(y, 5.0)
    running_max(X, 2, y, grid=X.size)
    np.testing.assert_array_equal(y, 3.0)
    with pytest.raises(ado.KernelFaultError, match="UnboundLocalError"):
        running_max(X, 0, y, grid=X.size)


def test_a_loop_that_may_not_run_and_a_while_loop_are_checked_at_run_time():
    @ado.kernel
    def k(x: ado.In[ado.f64], y: ado.Out[ado.f64]):
        i = ado.tid()
        for j in range(i):
            last = x[j]
        y[i] = last
    with pytest.raises(ado.KernelFaultError, match="y\\[i\\] = last"):
        run(k)                                   # thread 0 runs no iterations

    @ado.kernel
    def w(x: ado.In[ado.f64], y: ado.Out[ado.f64]):
        i = ado.tid()
        while x[i] > 1.0:
            q = x[i]
            break
        y[i] = q
    np.testing.assert_array_equal(run(w, np.array([2.0, 4.0])), [2.0, 4.0])
    with pytest.raises(ado.KernelFaultError, match="y\\[i\\] = q"):
        run(w, np.array([2.0, 0.5]))


def test_a_helper_is_checked_too():
    @ado.func
    def pick(v):
        if v > 0.0:
            r = v
        return r

    @ado.kernel
    def k(x: ado.In[ado.f64], y: ado.Out[ado.f64]):
        i = ado.tid()
        y[i] = pick(x[i])
    np.testing.assert_array_equal(run(k, POSITIVE), POSITIVE)
    with pytest.raises(ado.KernelFaultError, match="return r"):
        run(k)


def test_a_block_kernel_refuses_it_at_compile_time():
    """A block's threads must reach their barriers together, so no thread may stop early there."""
    with pytest.raises(ado.UndefinedNameError, match="variable 'q' is not assigned on every path"):
        @ado.kernel(block=(32,))
        def k(x: ado.In[ado.f64], y: ado.Out[ado.f64]):
            i = ado.block_id() * 32 + ado.thread_id()
            if x[i] > 0.0:
                q = x[i]
            y[i] = q


def test_an_annotated_assignment_reads_the_old_value():
    with pytest.raises(ado.UndefinedNameError, match="name 'x2' is not defined"):
        @ado.kernel
        def k(x: ado.In[ado.f64], y: ado.Out[ado.f64]):
            i = ado.tid()
            x2: ado.f64 = x2 + x[i]
            y[i] = x2


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

    @ado.kernel
    def empty(x: ado.In[ado.f64], y: ado.Out[ado.f64]):
        i = ado.tid()
        for m in range(0):
            t = x[i]
        y[i] = t
    with pytest.raises(ado.KernelFaultError, match="y\\[i\\] = t"):
        run(empty)


def test_under_jax_the_handler_names_it():
    import jax.numpy as jnp

    @ado.kernel
    def one_branch_f32(x: ado.In[ado.f32], y: ado.Out[ado.f32]):
        i = ado.tid()
        if x[i] > 0.0:
            q = x[i] * 3.0
        y[i] = q
    f = ado.jax_kernel(one_branch_f32)
    np.testing.assert_array_equal(np.asarray(f(jnp.asarray(POSITIVE, jnp.float32))), 3.0 * POSITIVE.astype(np.float32))
    with pytest.raises(Exception, match="kernel .one_branch_f32.: a variable was read at line .* UnboundLocalError"):
        np.asarray(f(jnp.asarray(X, jnp.float32)))
