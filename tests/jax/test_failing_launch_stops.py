"""A JAX CPU call whose kernel fails stops early: once the status record is set no new chunk of
threads starts, on XLA's pool and on one thread alike, as the numpy launcher does
(tests/runtime/test_launch_stops.py). Before, every thread of the grid ran first: a bounds error
in a grid of 2**36 threads took minutes to be reported."""
from __future__ import annotations

import time

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import adoffload as ado


@ado.kernel
def read_past(x: ado.In[ado.f32], y: ado.Out[ado.f32]):
    i = ado.tid()
    y[0] = x[i]


@pytest.mark.parametrize("pool", ["1", "0"], ids=["xla_pool", "one_thread"])
def test_a_bounds_error_in_a_huge_grid_is_reported_at_once(pool, monkeypatch):
    monkeypatch.setenv("ADOFFLOAD_JAX_CPU_POOL", pool)      # read when the handler is built
    x = jnp.ones(4, jnp.float32)
    with jax.default_device(jax.devices("cpu")[0]):
        small = ado.jax_kernel(read_past, grid=4, out_shapes={"y": (1,)})
        np.testing.assert_array_equal(np.asarray(small(x)), [1.0])           # built and run once
        huge = jax.jit(ado.jax_kernel(read_past, grid=2**36, out_shapes={"y": (1,)}))
        huge.lower(x).compile()                                             # compile outside the timing
        began = time.perf_counter()
        with pytest.raises(Exception, match=r"kernel 'read_past': index \d+ out of bounds for axis 0 of array 'x'"):
            jax.block_until_ready(huge(x))               # 6.9e10 threads: minutes if run to the end
        assert time.perf_counter() - began < 20
        np.testing.assert_array_equal(np.asarray(small(x)), [1.0])           # later calls work
