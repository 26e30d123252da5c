"""The same memory passed as two array arguments, one of them written, is refused before the
launch (issue 14, item 3): a stencil with ``out is x`` used to return garbage silently."""
from __future__ import annotations

import numpy as np
import pytest

import adoffload as ado


@ado.kernel
def smooth(x: ado.In[ado.f64], out: ado.Out[ado.f64]):
    i = ado.tid()
    if 0 < i < x.shape[0] - 1:
        out[i] = (x[i - 1] + x[i] + x[i + 1]) / 3.0


@ado.kernel
def add(a: ado.In[ado.f64], b: ado.In[ado.f64], out: ado.Out[ado.f64]):
    i = ado.tid()
    out[i] = a[i] + b[i]


def test_same_array_as_in_and_out_is_refused():
    x = np.arange(8.0)
    with pytest.raises(ado.ArgumentError, match="arrays 'x' and 'out' share memory and 'out' is written"):
        smooth(x, x, grid=8)
    assert x.tolist() == list(np.arange(8.0))          # nothing ran


def test_overlapping_views_are_refused():
    buffer = np.arange(10.0)
    with pytest.raises(ado.ArgumentError, match="share memory"):
        smooth(buffer[:8], buffer[2:], grid=8)


def test_read_only_sharing_and_disjoint_views_are_fine():
    x = np.arange(8.0)
    out = np.zeros(8)
    add(x, x, out, grid=8)                              # both only read
    np.testing.assert_array_equal(out, 2 * x)
    buffer = np.arange(16.0)
    smooth(buffer[:8], buffer[8:], grid=8)              # adjacent, not overlapping
    np.testing.assert_allclose(buffer[9:15], np.arange(1.0, 7.0))


def test_derivative_kernel_shadow_aliasing_its_primal_is_refused():
    x, out = np.arange(8.0), np.zeros(8)
    with pytest.raises(ado.ArgumentError, match="share memory"):
        ado.vjp(smooth, ["x"])(x, out, d_x=x, d_out=np.ones(8), grid=8)


def test_the_message_names_the_overlapping_arguments_and_the_one_to_copy():
    a, out = np.arange(8.0), np.zeros(8)
    with pytest.raises(ado.ArgumentError) as info:
        add(a, np.ones(8), a, grid=8)                   # out is a
    message = str(info.value)
    assert "arrays 'a' and 'out' share memory and 'out' is written" in message
    assert "a copy of the array given for 'a'" in message and "a separate array for 'out'" in message
    assert "x.copy()" not in message                    # it used to suggest a copy of an unrelated 'x'
    with pytest.raises(ado.ArgumentError) as info:
        ado.vjp(add, ["a"])(a, np.ones(8), out, d_a=a, d_out=np.ones(8), grid=8)
    message = str(info.value)
    assert "arrays 'a' and 'd_a' share memory and 'd_a' is written" in message
    assert "a copy of the array given for 'a'" in message


def test_two_written_arrays_sharing_memory_are_both_named():
    @ado.kernel
    def two(x: ado.InOut[ado.f64], y: ado.InOut[ado.f64]):
        i = ado.tid()
        x[i] += y[i]
        y[i] *= 2.0

    x = np.arange(8.0)
    with pytest.raises(ado.ArgumentError, match="'x' and 'y' are written.*separate array for one of them"):
        two(x, x, grid=8)


def test_a_seed_is_only_read_so_it_may_share_memory_with_other_inputs():
    x, out = np.arange(8.0), np.zeros(8)
    d_x = np.zeros(8)
    ado.vjp(add, ["a"])(x, x, out, d_a=d_x, d_out=x, grid=8)     # d_out is x: read, like x
    np.testing.assert_array_equal(d_x, x)
    np.testing.assert_array_equal(x, np.arange(8.0))             # the seed is kept
    with pytest.raises(ado.ArgumentError, match="arrays 'd_a' and 'd_out' share memory and 'd_a' is written"):
        ado.vjp(add, ["a"])(x, x, out, d_a=d_x, d_out=d_x, grid=8)
