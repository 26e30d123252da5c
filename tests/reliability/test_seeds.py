"""A reverse kernel's seed ``d_<out>`` is only read (issue 30): the launcher gives the kernel a copy,
so a read-only seed is accepted and every caller's seed is kept, on the host and on the device path,
and so is a second derivative's outer seed ``d2_<out>``."""
from __future__ import annotations

import numpy as np
import pytest

import adoffload as ado
from tests.gpu.test_device_path import fake_gpu  # noqa: F401  (the host-backed fake GPU fixture)


@ado.kernel
def cube(x: ado.In[ado.f64], out: ado.Out[ado.f64]):
    i = ado.tid()
    out[i] = x[i] * x[i] * x[i]


def frozen(array: np.ndarray) -> np.ndarray:
    array.flags.writeable = False
    return array


@pytest.mark.parametrize("device", ["cpu", "fake_gpu"])
def test_a_read_only_seed_is_accepted_and_kept(device, request):
    if device == "fake_gpu":
        device = request.getfixturevalue("fake_gpu")
    x, seed = np.arange(1.0, 9.0), frozen(np.full(8, 2.0))
    for _ in range(2):                              # the first launch, and one through the cached plan
        d_x = np.zeros(8)
        ado.vjp(cube, ["x"])(x, np.zeros(8), d_x=d_x, d_out=seed, grid=8, device=device)
        np.testing.assert_allclose(d_x, 6.0 * x * x)
        np.testing.assert_array_equal(seed, 2.0)


def test_read_only_gradients_and_outputs_are_still_refused():
    x = np.arange(1.0, 9.0)
    with pytest.raises(ado.ArgumentError, match="'d_x': the array is read-only"):
        ado.vjp(cube, ["x"])(x, np.zeros(8), d_x=frozen(np.zeros(8)), d_out=np.ones(8), grid=8)
    with pytest.raises(ado.ArgumentError, match="'out': the array is read-only"):
        ado.vjp(cube, ["x"])(x, frozen(np.zeros(8)), d_x=np.zeros(8), d_out=np.ones(8), grid=8)


def test_second_derivative_seeds_are_kept():
    second = ado.vjp(ado.vjp(cube, ["x"]), ["x"])
    x, v = np.arange(1.0, 5.0), np.array([0.5, -1.0, 2.0, 0.25])
    d_out, d2_out = frozen(np.ones(4)), frozen(np.full(4, 3.0))
    d2_x, d_d_x, d_d_out = np.zeros(4), v.copy(), np.zeros(4)
    second(x, np.zeros(4), np.zeros(4), d_out, d2_x=d2_x, d2_out=d2_out, d_d_x=d_d_x, d_d_out=d_d_out, grid=4)
    # d/dx of <x^3, d2_out> + <3 x^2 d_out, v>
    np.testing.assert_allclose(d2_x, 3.0 * x * x * 3.0 + 6.0 * x * 1.0 * v, rtol=1e-14)
    np.testing.assert_array_equal(d_out, 1.0)
    np.testing.assert_array_equal(d2_out, 3.0)
