import jax
import pytest


@pytest.fixture(autouse=True)
def x64():
    """The JAX tests use f64 kernels (check_grads needs the precision); restore the flag after."""
    previous = jax.config.jax_enable_x64
    jax.config.update("jax_enable_x64", True)
    yield
    jax.config.update("jax_enable_x64", previous)
