"""The same calls on a GPU (CUDA); skipped without one. The lead runs these on an H200."""
import numpy as np
import pytest

jax = pytest.importorskip("jax")


def _has_gpu() -> bool:
    try:
        return bool(jax.devices("cuda"))
    except RuntimeError:
        return False


pytestmark = pytest.mark.skipif(not _has_gpu(), reason="no CUDA GPU visible to JAX")


def test_gpu_values_grad_vmap_and_bounds():
    import jax.numpy as jnp
    import adoffload as ado
    from adoffload.jax import check_errors
    from kernels import cube3, cube3_ref, energy, energy_ref, shifted, wave, wave_ref
    from adoffload.errors import BoundsError
    x = jnp.linspace(0.1, 2.0, 1000)
    y = jnp.cos(x)
    f = jax.jit(ado.jax_kernel(wave))
    for a, b in zip(f(0.3, x, y), wave_ref(0.3, x, y)):
        np.testing.assert_allclose(a, b, rtol=1e-12)
    loss = lambda x, y: jnp.sum(ado.jax_kernel(wave)(0.3, x, y)[0] ** 2)
    ref = lambda x, y: jnp.sum(wave_ref(0.3, x, y)[0] ** 2)
    np.testing.assert_allclose(jax.jit(jax.grad(loss))(x, y), jax.grad(ref)(x, y), rtol=1e-11)
    xs = jnp.stack([x, 2 * x])
    np.testing.assert_allclose(jax.vmap(ado.jax_kernel(wave), in_axes=(None, 0, None))(0.3, xs, y)[0],
                               jax.vmap(wave_ref, in_axes=(None, 0, None))(0.3, xs, y)[0], rtol=1e-12)
    c = jnp.arange(24.0).reshape(2, 3, 4)
    np.testing.assert_allclose(jax.jit(ado.jax_kernel(cube3))(c), cube3_ref(c), rtol=1e-13)
    e = ado.jax_kernel(energy, out_shapes={"e": (1,)}, grid=lambda x: x.shape)
    np.testing.assert_allclose(jax.jit(e)(x), energy_ref(x), rtol=1e-10)
    bad = jax.jit(ado.jax_kernel(shifted, out_shapes={"out": x.shape}))(x)
    jax.block_until_ready(bad)
    with pytest.raises(BoundsError, match="array 'x'"):
        check_errors()
    check_errors()          # cleared once reported
