"""Launch behaviour on CUDA: bounds errors, multi-dimensional and empty grids, big grids.

Skips cleanly without a CUDA GPU (the ``cuda`` fixture)."""
from __future__ import annotations

import numpy as np
import pytest

import adoffload as ado

pytestmark = pytest.mark.gpu


@ado.kernel
def shifted(x: ado.In[ado.f64], out: ado.Out[ado.f64]):
    i = ado.tid()
    out[i] = x[i + 1]


@ado.kernel
def gather2(x: ado.In[ado.f32, 2], rows: ado.In[ado.i64], out: ado.Out[ado.f32, 2]):
    i, j = ado.tid()
    out[i, j] = x[rows[i], j]


@ado.kernel
def stamp2(a: ado.Out[ado.i64, 2]):
    i, j = ado.tid()
    a[i, j] = i * 1000 + j


@ado.kernel
def stamp3(a: ado.InOut[ado.i64, 3]):
    i, j, k = ado.tid()
    a[i, j, k] = a[i, j, k] + i * 1000000 + j * 1000 + k


@ado.kernel
def fill(value: ado.f32, out: ado.Out[ado.f32]):
    i = ado.tid()
    out[i] = value


@ado.kernel
def checked_assert(x: ado.In[ado.f64], out: ado.Out[ado.f64]):
    i = ado.tid()
    assert x[i] >= 0.0
    out[i] = ado.sqrt(x[i])


def test_out_of_bounds_raises_bounds_error_and_the_device_stays_usable(cuda):
    x = np.arange(10, dtype=np.float64)
    out = np.zeros(10)
    with pytest.raises(ado.BoundsError) as info:
        shifted(x, out, grid=10, device=cuda.spec)
    text = str(info.value)
    assert "shifted" in text and "'x'" in text and "index 10" in text and "(10,)" in text, text
    # the faulting thread touched nothing; every other thread ran
    np.testing.assert_array_equal(out[:9], x[1:])
    assert out[9] == 0.0
    # later launches work (a bounds error is a status record, not a sticky fault)
    again = np.zeros(9)
    shifted(x, again, grid=9, device=cuda.spec)
    np.testing.assert_array_equal(again, x[1:])
    assert cuda.fault is None


def test_bounds_error_names_the_dimension_of_a_2d_array(cuda):
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    rows = np.array([0, 2, 7], np.int64)
    out = np.zeros((3, 4), np.float32)
    with pytest.raises(ado.BoundsError) as info:
        gather2(x, rows, out, grid=(3, 4), device=cuda.spec)
    text = str(info.value)
    assert "'x'" in text and "index 7" in text and "(3, 4)" in text, text
    np.testing.assert_array_equal(out[:2], x[[0, 2]])
    rows[2] = 1
    gather2(x, rows, out, grid=(3, 4), device=cuda.spec)
    np.testing.assert_array_equal(out, x[[0, 2, 1]])


def test_failed_assert_is_reported_and_later_launches_work(cuda):
    out = np.zeros(4)
    with pytest.raises(ado.Error):
        checked_assert(np.array([1.0, -1.0, 4.0, 9.0]), out, grid=4, device=cuda.spec)
    checked_assert(np.array([1.0, 4.0, 9.0, 16.0]), out, grid=4, device=cuda.spec)
    np.testing.assert_array_equal(out, [1.0, 2.0, 3.0, 4.0])


@pytest.mark.parametrize("shape", [(1, 1), (7, 5), (300, 3), (3, 1025)])
def test_2d_grid_runs_every_thread_once(cuda, shape):
    a = np.full(shape, -1, np.int64)
    stamp2(a, grid=shape, device=cuda.spec)
    i, j = np.meshgrid(*(np.arange(n) for n in shape), indexing="ij")
    np.testing.assert_array_equal(a, i * 1000 + j)


def test_2d_grid_smaller_than_the_array_leaves_the_rest(cuda):
    # Out arrays start at zero on the device (the launcher memsets them), whatever the host held
    a = np.full((7, 5), -1, np.int64)
    stamp2(a, grid=(3, 2), device=cuda.spec)
    assert (a[3:, :] == 0).all() and (a[:, 2:] == 0).all()
    assert a[2, 1] == 2001


@pytest.mark.parametrize("shape", [(1, 1, 1), (2, 3, 4), (5, 1, 301), (17, 19, 23)])
def test_3d_grid_runs_every_thread_once(cuda, shape):
    a = np.ones(shape, np.int64)
    stamp3(a, grid=shape, device=cuda.spec)
    i, j, k = np.meshgrid(*(np.arange(n) for n in shape), indexing="ij")
    np.testing.assert_array_equal(a, 1 + i * 1000000 + j * 1000 + k)


def test_zero_grid_is_a_no_op(cuda):
    out = np.full(8, 7.0, np.float32)
    fill(1.0, out, grid=0, device=cuda.spec)
    assert (out == 7.0).all()
    a = np.full((4, 4, 4), 5, np.int64)
    stamp3(a, grid=(4, 0, 4), device=cuda.spec)
    assert (a == 5).all()
    fill(2.0, out, grid=8, device=cuda.spec)     # and the device still works
    assert (out == 2.0).all()


def test_empty_arrays_move_fine(cuda):
    out = np.zeros(0, np.float32)
    fill(1.0, out, grid=0, device=cuda.spec)
    x = np.zeros(0)
    with pytest.raises(ado.BoundsError):
        shifted(x, np.zeros(1), grid=1, device=cuda.spec)


@pytest.mark.parametrize("n", [1, 255, 257, 1 << 20, (1 << 22) + 3])
def test_1d_grids_of_many_blocks(cuda, n):
    out = np.zeros(n, np.float32)
    fill(3.5, out, grid=n, device=cuda.spec)
    assert (out == 3.5).all()


def test_dynamic_tape_with_different_sizes_per_thread(cuda):
    """The recurrence's adjoint tape holds steps[i] records for thread i; the counting
    kernel sizes it on the device, the launcher prefix-sums the offsets."""
    from .kernels import recurrence
    rng = np.random.default_rng(5)
    n = 4099
    x, steps = rng.uniform(0.2, 1.2, n), rng.integers(0, 40, n)
    seeds = rng.standard_normal(n)
    grads = {}
    for spec in ("cpu", cuda.spec):
        d_x = np.zeros(n)
        ado.vjp(recurrence, ["x"])(x, steps, np.zeros(n), d_x, seeds.copy(), grid=n, device=spec)
        grads[spec] = d_x
    np.testing.assert_allclose(grads[cuda.spec], grads["cpu"], rtol=1e-10, atol=1e-12)
    assert np.abs(grads["cpu"]).max() > 0
