"""Calling kernels: argument checks before anything runs, grids, bounds errors, data movement."""
import numpy as np
import pytest

import adoffload as ado


@ado.kernel
def saxpy(a: ado.f32, x: ado.In[ado.f32], y: ado.In[ado.f32], out: ado.Out[ado.f32]):
    i = ado.tid()
    out[i] = a * x[i] + y[i]


@ado.kernel
def shifted(x: ado.In[ado.f64], out: ado.Out[ado.f64]):
    i = ado.tid()
    out[i] = x[i + 1]


@ado.kernel
def grid2(a: ado.InOut[ado.i64, 2]):
    i, j = ado.tid()
    a[i, j] = i * 100 + j


def _xy(n=1000):
    rng = np.random.default_rng(0)
    return rng.random(n, dtype=np.float32), rng.random(n, dtype=np.float32)


def test_saxpy_runs_on_host():
    x, y = _xy()
    out = np.zeros_like(x)
    saxpy(2.0, x, y, out, grid=x.size)
    np.testing.assert_allclose(out, 2 * x + y, rtol=1e-6)


def test_keyword_arguments_and_numpy_scalars():
    x, y = _xy()
    out = np.zeros_like(x)
    saxpy(np.float32(3.0), x, y=y, out=out, grid=(x.size,))
    np.testing.assert_allclose(out, 3 * x + y, rtol=1e-6)


def test_two_dimensional_grid_runs_every_thread_once():
    a = np.full((7, 5), -1, np.int64)
    grid2(a, grid=(7, 5))
    i, j = np.meshgrid(np.arange(7), np.arange(5), indexing="ij")
    np.testing.assert_array_equal(a, i * 100 + j)


def test_threads_beyond_the_grid_do_not_run():
    a = np.full((7, 5), -1, np.int64)
    grid2(a, grid=(3, 2))
    assert (a[3:, :] == -1).all() and (a[:, 2:] == -1).all()
    assert a[2, 1] == 201


@pytest.mark.parametrize("call, message", [
    (lambda x, y, o: saxpy(2.0, x, y, grid=10), "missing argument(s): out"),
    (lambda x, y, o: saxpy(2.0, x, y, o, o, grid=10), "takes 4 arguments"),
    (lambda x, y, o: saxpy(2.0, x.astype(np.float64), y, o, grid=10), "parameter 'x': expected dtype float32"),
    (lambda x, y, o: saxpy(2.0, x.reshape(10, 100), y, o, grid=10), "parameter 'x': expected a 1-D array"),
    (lambda x, y, o: saxpy(2.0, x[::2], y, o, grid=10), "parameter 'x': the array is not C-contiguous"),
    (lambda x, y, o: saxpy(x, x, y, o, grid=10), "parameter 'a': expected a scalar"),
    (lambda x, y, o: saxpy(2.0, 1.0, y, o, grid=10), "parameter 'x': expected an array"),
    (lambda x, y, o: saxpy(2.0, x, y, o, grid=-1), "grid sizes must be >= 0"),
    (lambda x, y, o: saxpy(2.0, x, y, o, grid=(10, 10)), "uses a 1-D grid"),
    (lambda x, y, o: saxpy(2.0, x, y, o, grid=10, z=1), "has no parameter 'z'"),
    (lambda x, y, o: saxpy("2", x, y, o, grid=10), "parameter 'a': expected a float"),
    (lambda x, y, o: saxpy(2 ** 2000, x, y, o, grid=10), "parameter 'a': 1148"),    # was a bare OverflowError
])
def test_bad_arguments_are_reported_before_running(call, message):
    x, y = _xy()
    out = np.full_like(x, 7.0)
    with pytest.raises(ado.Error) as info:
        call(x, y, out)
    assert message in str(info.value)
    assert (out == 7.0).all(), "nothing may run when the arguments are wrong"


def test_read_only_out_array_is_rejected():
    x, y = _xy()
    out = np.zeros_like(x)
    out.flags.writeable = False
    with pytest.raises(ado.ArgumentError, match="read-only"):
        saxpy(2.0, x, y, out, grid=x.size)


def test_out_arrays_start_at_zero_like_on_gpus_and_in_jax():
    x = np.arange(10, dtype=np.float64)
    out = np.full(10, 7.0)
    shifted(x, out, grid=5)
    np.testing.assert_array_equal(out, np.r_[x[1:6], np.zeros(5)])


def test_zero_grid_is_a_no_op():
    x, y = _xy()
    out = np.full_like(x, 7.0)
    saxpy(2.0, x, y, out, grid=0)
    assert (out == 7.0).all()


def test_out_of_bounds_raises_and_touches_nothing_outside():
    x = np.arange(10, dtype=np.float64)
    out = np.zeros(10)
    with pytest.raises(ado.BoundsError) as info:
        shifted(x, out, grid=10)
    text = str(info.value)
    assert "shifted" in text and "'x'" in text and "index 10" in text and "(10,)" in text
    np.testing.assert_array_equal(out[:9], x[1:])


def test_proven_bounds_facts_select_an_unchecked_variant():
    x, y = _xy(64)
    out = np.zeros_like(x)
    saxpy(2.0, x, y, out, grid=64)
    proven_texts = [t for facts, t in saxpy._texts.items() if facts]
    assert proven_texts, "grid == shape should prove x[i], y[i], out[i] in bounds"
    assert "atomicrmw" not in proven_texts[0], "proven accesses need no status write"
    # a grid larger than the arrays proves nothing and the checks catch the overflow
    with pytest.raises(ado.BoundsError):
        saxpy(2.0, x, y, out, grid=65)


def test_bounds_check_can_be_disabled():
    @ado.kernel(bounds_check=False)
    def copy(x: ado.In[ado.f64], out: ado.Out[ado.f64]):
        i = ado.tid()
        out[i] = x[i]
    assert "atomicrmw" not in copy.module_text()
    x = np.arange(5.0)
    out = np.zeros(5)
    copy(x, out, grid=5)
    np.testing.assert_array_equal(out, x)
