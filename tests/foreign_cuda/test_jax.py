"""CUDA kernels as JAX functions: ``ado.jax_kernel(k, blocks=, threads=, out_shapes=)`` with jit,
grad (against central differences) and jvp; shapes of multi-dimensional arrays kept."""
import numpy as np
import pytest

import adoffload as ado
from adoffload.errors import JaxIntegrationError

from .sources import KERNELS

jax = pytest.importorskip("jax")
jnp = pytest.importorskip("jax.numpy")


@pytest.fixture(autouse=True)
def x64():
    previous = jax.config.jax_enable_x64
    jax.config.update("jax_enable_x64", True)
    yield
    jax.config.update("jax_enable_x64", previous)


@pytest.fixture(scope="module")
def mod():
    return ado.from_cuda(KERNELS)


def test_stencil_value_grad_and_jvp(mod):
    k = mod.kernel("stencil", u=ado.In[ado.f64], v=ado.Out[ado.f64], nx=ado.i32, ny=ado.i32)
    f = ado.jax_kernel(k, blocks=(2, 2), threads=(16, 8), out_shapes={"v": (12, 21)})
    u = jnp.asarray(np.random.default_rng(0).random((12, 21)))
    v = np.zeros((12, 21))
    k(np.asarray(u), v, 21, 12, blocks=(2, 2), threads=(16, 8))
    # (JAX's default device may be a GPU, whose FMA contraction differs from the host's in the last bit)
    np.testing.assert_allclose(np.asarray(jax.jit(f, static_argnums=(1, 2))(u, 21, 12)), v, rtol=1e-13, atol=1e-15)

    def loss(u):
        return jnp.sum(jnp.sin(f(u, 21, 12)))
    d = jnp.asarray(np.random.default_rng(1).standard_normal(u.shape))
    h = 1e-6
    difference = (loss(u + h * d) - loss(u - h * d)) / (2 * h)
    grad = jax.grad(loss)(u)
    assert grad.shape == u.shape
    np.testing.assert_allclose(float(jnp.vdot(grad, d)), float(difference), rtol=1e-6)
    np.testing.assert_allclose(float(jax.jvp(loss, (u,), (d,))[1]), float(jnp.vdot(grad, d)), rtol=1e-12)


def test_block_reduction_gradient(mod):
    k = mod.kernel("block_sum_d", x=ado.In[ado.f64], out=ado.Out[ado.f64], n=ado.i32)
    f = ado.jax_kernel(k, blocks=3, threads=128, out_shapes={"out": 3})
    x = jnp.asarray(np.random.default_rng(2).standard_normal(300))
    w = jnp.asarray([1.0, -2.0, 0.5])
    grad = jax.grad(lambda x: jnp.vdot(f(x, 300), w))(x)
    np.testing.assert_allclose(np.asarray(grad), 2 * np.asarray(x) * np.repeat(np.asarray(w), 128)[:300], rtol=1e-13)


def test_inout_arrays_come_back_shaped_like_their_input(mod):
    k = mod.kernel("daxpy", a=ado.f64, x=ado.In[ado.f64], y=ado.InOut[ado.f64], n=ado.i32)
    f = ado.jax_kernel(k, blocks=1, threads=64)
    x, y = jnp.ones((4, 5)), jnp.arange(20.0).reshape(4, 5)
    np.testing.assert_array_equal(np.asarray(f(2.0, x, y, 20)), 2.0 + np.arange(20.0).reshape(4, 5))


def test_arguments_by_keyword_as_for_our_kernels(mod):
    """``f(2.0, x, y=y, n=20)`` binds as the launch does; an Out array, an unknown name or a
    gridDim parameter given by keyword is a JaxIntegrationError naming the kernel."""
    k = mod.kernel("daxpy", a=ado.f64, x=ado.In[ado.f64], y=ado.InOut[ado.f64], n=ado.i32)
    f = ado.jax_kernel(k, blocks=1, threads=64)
    x, y = jnp.ones(20), jnp.arange(20.0)
    np.testing.assert_array_equal(np.asarray(f(2.0, x, n=20, y=y)), 2.0 + np.arange(20.0))
    np.testing.assert_array_equal(np.asarray(f(n=20, y=y, a=3.0, x=x)), 3.0 + np.arange(20.0))
    for kwargs, message in (({"n": 20, "z": 1.0}, "; the keyword 'z' is not one of them"),
                            ({"n": 20, "gridDim_x": 1}, "; the keyword 'gridDim_x' is not one of them"),
                            ({"y": y}, "; missing 'n'"),
                            ({}, ", got 2")):
        with pytest.raises(JaxIntegrationError, match=r"kernel 'daxpy' as a JAX function takes 4 arguments "
                                                      r"\(a, x, y, n\)" + message):
            f(2.0, x, **kwargs)
    sums = mod.kernel("block_sum_d", x=ado.In[ado.f64], out=ado.Out[ado.f64], n=ado.i32)
    g = ado.jax_kernel(sums, blocks=3, threads=128, out_shapes={"out": 3})
    with pytest.raises(JaxIntegrationError, match="the keyword 'out' is an Out array, which is a result"):
        g(jnp.ones(300), n=300, out=jnp.zeros(3))


def test_out_shapes_are_required_and_grid_is_refused(mod):
    k = mod.kernel("block_sum_d", x=ado.In[ado.f64], out=ado.Out[ado.f64], n=ado.i32)
    with pytest.raises(JaxIntegrationError, match="missing out"):
        ado.jax_kernel(k, blocks=3, threads=128)
    with pytest.raises(JaxIntegrationError, match="blocks= and threads="):
        ado.jax_kernel(k, grid=384)


def test_struct_fields_are_scalar_arguments():
    from .sources import STRUCTS
    from .test_structs import LJ, atoms, tile_energy_reference
    k = ado.from_cuda(STRUCTS).kernel("tile_energy", p=LJ, pos=ado.In[ado.f64], energy=ado.Out[ado.f64])
    f = ado.jax_kernel(k, blocks=2, threads=64, out_shapes={"energy": 128})
    pos = atoms()
    np.testing.assert_allclose(np.asarray(f(1.5, 0.9, jnp.asarray(pos))), tile_energy_reference(pos, 1.5, 0.9),
                               rtol=1e-12)
    d_sigma = jax.grad(lambda sigma: jnp.sum(f(1.5, sigma, jnp.asarray(pos))))(0.9)
    h = 1e-6
    slope = (tile_energy_reference(pos, 1.5, 0.9 + h).sum() - tile_energy_reference(pos, 1.5, 0.9 - h).sum()) / (2 * h)
    np.testing.assert_allclose(float(d_sigma), slope, rtol=1e-6)
