"""jax_kernel: calling convention, defaults, jit vs eager, argument errors, bounds errors."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import adoffload as ado
from adoffload.errors import GridError, JaxIntegrationError

from kernels import (outer, cube3, cube3_ref, energy, energy_ref, rowscale, rowscale_ref, saxpy, saxpy32, saxpy_ref,
                     clamp_count, scale_inplace, scale_inplace_ref, shifted, wave, wave_ref)

X = np.linspace(-1.0, 2.0, 7)
Y = np.cos(X) + 0.5


@pytest.mark.parametrize("jit", [False, True])
def test_single_output_matches_reference(jit):
    f = ado.jax_kernel(saxpy)
    f = jax.jit(f) if jit else f
    np.testing.assert_allclose(f(1.5, X, Y), saxpy_ref(1.5, X, Y), rtol=1e-14)


def test_two_outputs_come_back_in_parameter_order():
    out, sq = jax.jit(ado.jax_kernel(wave))(0.3, X, Y)
    ref_out, ref_sq = wave_ref(0.3, X, Y)
    np.testing.assert_allclose(out, ref_out, rtol=1e-13)
    np.testing.assert_allclose(sq, ref_sq, rtol=1e-13)


def test_inout_returns_new_value_and_leaves_input_alone():
    f = jax.jit(ado.jax_kernel(scale_inplace))
    y = Y + 1.0
    result = f(2.0, X, y)
    np.testing.assert_allclose(result, scale_inplace_ref(2.0, X, y), rtol=1e-14)
    np.testing.assert_allclose(y, Y + 1.0)          # the caller's array is not mutated


def test_two_dimensional_grid_defaults_to_out_shape():
    x = jnp.arange(12.0).reshape(3, 4)
    w = jnp.array([1.0, -2.0, 0.5, 3.0])
    np.testing.assert_allclose(ado.jax_kernel(rowscale)(x, w), rowscale_ref(x, w))


def test_grid_rank_three():
    x = jnp.arange(24.0).reshape(2, 3, 4) / 7
    np.testing.assert_allclose(jax.jit(ado.jax_kernel(cube3))(x), cube3_ref(x), rtol=1e-14)


def test_out_shapes_dict():
    out = jax.jit(ado.jax_kernel(outer, out_shapes={"out": (7, 7)}))(X, Y)
    np.testing.assert_allclose(out, np.outer(X, Y))


def test_out_shapes_and_grid_callables():
    f = ado.jax_kernel(energy, out_shapes=lambda x: {"e": (1,)}, grid=lambda x: x.shape[0])
    g = jax.jit(f)
    for _ in range(3):      # Out arrays start at zero on every call, as in the launcher
        np.testing.assert_allclose(g(X), energy_ref(X), rtol=1e-13)


def test_explicit_grid_smaller_than_output_touches_prefix_only():
    f = ado.jax_kernel(saxpy, grid=3)
    out = f(1.0, X, Y)
    np.testing.assert_allclose(out[:3], saxpy_ref(1.0, X, Y)[:3])


def test_traced_scalar_argument():
    f = ado.jax_kernel(saxpy)
    g = jax.jit(lambda a: f(a * 2.0, X, Y))
    np.testing.assert_allclose(g(0.25), saxpy_ref(0.5, X, Y))
    np.testing.assert_allclose(g(1.0), saxpy_ref(2.0, X, Y))


def test_python_float_converted_for_f32_parameter():
    f = ado.jax_kernel(saxpy32)
    x = jnp.arange(4, dtype=jnp.float32)
    out = f(2.0, x, x)
    assert out.dtype == jnp.float32
    np.testing.assert_allclose(out, 3 * x)


@pytest.mark.parametrize("args, words", [
    ((2.0, np.arange(4.0), jnp.arange(4, dtype=jnp.float32)), ["saxpy32", "'x'", "float32", "float64"]),
    ((2.0, jnp.ones((2, 2), jnp.float32), jnp.ones(4, jnp.float32)), ["saxpy32", "'x'", "ndim 1", "ndim 2"]),
    ((jnp.ones(3, jnp.float32), jnp.ones(4, jnp.float32), jnp.ones(4, jnp.float32)), ["'a'", "ndim 0"]),
    ((2.0, jnp.ones(4, jnp.float32)), ["3 arguments", "got 2"]),
    # Python scalars get the launcher's checks (jnp.asarray raised a bare OverflowError for 2**2000)
    ((2 ** 2000, jnp.ones(4, jnp.float32), jnp.ones(4, jnp.float32)), ["saxpy32", "'a'", "does not fit in ado.f32"]),
    ((True, jnp.ones(4, jnp.float32), jnp.ones(4, jnp.float32)), ["saxpy32", "'a'", "expected a float"]),
])
def test_argument_errors_name_kernel_parameter_expected_and_given(args, words):
    with pytest.raises(JaxIntegrationError) as info:
        ado.jax_kernel(saxpy32)(*args)
    for word in words:
        assert word in str(info.value)


def test_python_int_out_of_range_of_an_int_parameter_is_refused():
    """jnp.asarray raised a bare OverflowError for 2**40 as an i32 (2**2000 as an f64 too)."""
    f = ado.jax_kernel(clamp_count)
    with pytest.raises(JaxIntegrationError, match="parameter 'n': 1099511627776 does not fit in ado.i32"):
        f(2 ** 40, X)
    with pytest.raises(JaxIntegrationError, match="parameter 'n': expected an integer ado.i32, got bool"):
        f(True, X)
    np.testing.assert_allclose(f(3, X), np.minimum(X, 3.0))


def test_argument_errors_under_jit_too():
    with pytest.raises(JaxIntegrationError, match="dtype float32, got int32"):
        jax.jit(ado.jax_kernel(saxpy32))(1.0, jnp.arange(4, dtype=jnp.int32), jnp.ones(4, jnp.float32))


def test_missing_out_shape_asks_for_out_shapes():
    # out[i, j] = x[i] * y[j]: the shape comes from the thread ids (test_default_out_shapes.py)
    assert ado.jax_kernel(outer)(X, Y).shape == (7, 7)
    with pytest.raises(JaxIntegrationError, match="out_shapes"):
        ado.jax_kernel(energy, out_shapes={"e": (1, 1)})(X)


def test_bad_grid_rank():
    with pytest.raises(GridError, match="grid rank 2"):
        ado.jax_kernel(rowscale, grid=5)(jnp.ones((2, 2)), jnp.ones(2))


def test_a_bool_is_not_a_grid_or_an_extent():
    """grid=True ran one thread and out_shapes={'out': (True,)} made one element, as operator.index
    takes a bool for 1; the numpy launcher refuses a bool grid."""
    with pytest.raises(GridError, match="must be static ints, got True"):
        ado.jax_kernel(saxpy, grid=True)(1.0, X, Y)
    with pytest.raises(JaxIntegrationError, match=r"out_shapes\['out'\] of kernel 'saxpy' must be static ints"):
        ado.jax_kernel(saxpy, out_shapes={"out": (True,)})(1.0, X, Y)


def test_f64_kernel_without_x64_says_how_to_enable_it():
    jax.config.update("jax_enable_x64", False)
    with pytest.raises(JaxIntegrationError, match="jax_enable_x64"):
        ado.jax_kernel(saxpy)(1.0, jnp.ones(3), jnp.ones(3))


def test_bounds_error_is_a_python_exception_and_later_calls_work():
    # The host handler reports the error from the call itself (GPUs report it through
    # adoffload.jax.check_errors(): tests/jax/test_gpu.py), so pin this test to the CPU.
    with jax.default_device(jax.devices("cpu")[0]):
        f = jax.jit(ado.jax_kernel(shifted, out_shapes={"out": X.shape}))
        with pytest.raises(Exception, match=r"kernel 'shifted': index 7 out of bounds for axis 0 of array 'x'"):
            jax.block_until_ready(f(X))
        g = ado.jax_kernel(shifted, grid=6)
        np.testing.assert_allclose(jax.jit(g)(X)[:6], X[1:])
        np.testing.assert_allclose(ado.jax_kernel(saxpy)(1.0, X, Y), saxpy_ref(1.0, X, Y))
