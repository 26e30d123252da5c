"""``ado.jax_kernel`` never guesses an Out shape (issue 14, item 4): it derives it from the
kernel where the Out array and some input arrays are indexed by the same thread ids, and
otherwise asks for out_shapes. A 5x3 matrix-vector product used to return 3 values."""
from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import pytest

import adoffload as ado


@ado.kernel
def matvec(a: ado.In[ado.f64, 2], x: ado.In[ado.f64], y: ado.Out[ado.f64]):
    i = ado.tid()
    acc = 0.0
    for j in range(x.shape[0]):
        acc += a[i, j] * x[j]
    y[i] = acc


@ado.kernel
def outer(x: ado.In[ado.f64], y: ado.In[ado.f64], out: ado.Out[ado.f64, 2]):
    i, j = ado.tid()
    out[i, j] = x[i] * y[j]


@ado.kernel
def histogram(idx: ado.In[ado.i64], counts: ado.Out[ado.f64]):
    i = ado.tid()
    ado.atomic_add(counts, idx[i], 1.0)


@ado.kernel
def pairwise_sum(x: ado.In[ado.f64], y: ado.In[ado.f64], out: ado.Out[ado.f64]):
    i = ado.tid()
    out[i] = x[i] + y[i]


def test_matvec_output_takes_the_rows_of_the_matrix():
    a, x = np.arange(15.0).reshape(5, 3), np.array([1.0, -1.0, 2.0])
    y = ado.jax_kernel(matvec)(a, x)
    assert y.shape == (5,)
    np.testing.assert_allclose(y, a @ x)


def test_two_dimensional_output_from_two_thread_axes():
    x, y = jnp.arange(4.0), jnp.arange(3.0)
    out = ado.jax_kernel(outer)(x, y)
    np.testing.assert_allclose(out, np.outer(np.arange(4.0), np.arange(3.0)))


def test_output_not_indexed_by_thread_ids_needs_out_shapes():
    idx = jnp.asarray([0, 2, 2, 1])
    with pytest.raises(ado.JaxIntegrationError, match=r"out_shapes=\{'counts': shape\}"):
        ado.jax_kernel(histogram, grid=4)(idx)
    counts = ado.jax_kernel(histogram, grid=4, out_shapes={"counts": (3,)})(idx)
    np.testing.assert_allclose(counts, [1.0, 1.0, 2.0])


def test_inputs_that_disagree_on_the_extent_need_out_shapes():
    with pytest.raises(ado.JaxIntegrationError, match="disagree on its extent"):
        ado.jax_kernel(pairwise_sum)(jnp.ones(4), jnp.ones(5))


def test_derived_without_bounds_checks_too():
    @ado.kernel(bounds_check=False)
    def unchecked(x: ado.In[ado.f64], y: ado.Out[ado.f64]):
        i = ado.tid()
        y[i] = 2.0 * x[i]
    np.testing.assert_allclose(ado.jax_kernel(unchecked)(jnp.arange(5.0)), 2.0 * np.arange(5.0))


def test_derived_for_the_shadows_of_a_derivative_kernel():
    forward = ado.jax_kernel(ado.jvp(pairwise_sum, ["x"]))            # (x, y, d_x) -> (out, d_out)
    out, d_out = forward(jnp.ones(4), jnp.ones(4), jnp.arange(4.0))
    np.testing.assert_allclose(out, 2.0)
    np.testing.assert_allclose(d_out, np.arange(4.0))


# ------------------------------------------------------------------ the default grid, never guessed either

@ado.kernel
def energy(x: ado.In[ado.f64], e: ado.Out[ado.f64]):
    i = ado.tid()
    ado.atomic_add(e, 0, x[i] * x[i])


@ado.kernel
def transpose(x: ado.In[ado.f64, 2], y: ado.Out[ado.f64, 2]):
    i, j = ado.tid()
    y[j, i] = 2.0 * x[i, j]


def test_a_default_grid_the_kernel_does_not_prove_is_refused():
    """The default grid, the first Out's shape, once ran one thread for an energy of shape (1,): it
    returned x[0]**2 for sum(x**2). The Out's axis must be indexed by that grid axis's thread id."""
    x = jnp.arange(1.0, 6.0)
    with pytest.raises(ado.GridError, match=r"default grid, the shape of its Out array 'e', would be \(1,\).*pass grid="):
        ado.jax_kernel(energy, out_shapes={"e": (1,)})(x)
    e = ado.jax_kernel(energy, out_shapes={"e": (1,)}, grid=lambda x: x.shape)(x)
    np.testing.assert_allclose(e, [55.0])
    idx = jnp.asarray([0, 2, 2, 1])           # 3 bins, 4 items: the default grid counted 3 of them
    with pytest.raises(ado.GridError, match="default grid"):
        ado.jax_kernel(histogram, out_shapes={"counts": (3,)})(idx)


def test_a_default_grid_with_its_axes_swapped_is_refused():
    """y[j, i] = x[i, j]: the Out shape (3, 2) is derived, but it is not the grid (2, 3)."""
    x = jnp.arange(6.0).reshape(2, 3)
    with pytest.raises(ado.GridError, match="axis 0"):
        ado.jax_kernel(transpose)(x)
    np.testing.assert_allclose(ado.jax_kernel(transpose, grid=lambda x: x.shape)(x), 2.0 * x.T)


def test_a_default_grid_an_input_of_that_extent_proves_is_kept():
    """out[idx[i]] = ...: the Out is not indexed by the thread id, but x[i] is, and has its extent."""
    @ado.kernel
    def permute(x: ado.In[ado.f64], idx: ado.In[ado.i64], out: ado.Out[ado.f64]):
        i = ado.tid()
        out[idx[i]] = x[i]
    x, idx = jnp.arange(4.0), jnp.asarray([2, 0, 3, 1])
    np.testing.assert_allclose(ado.jax_kernel(permute, out_shapes={"out": (4,)})(x, idx), [1.0, 3.0, 0.0, 2.0])
    with pytest.raises(ado.GridError, match="default grid"):        # 3 slots for 4 values: which 3?
        ado.jax_kernel(permute, out_shapes={"out": (3,)})(x, idx)
