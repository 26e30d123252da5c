"""Skipped adds of -0.0 (codegen/gpu/zero_adds.py) on the GPU: the gather energy's adjoint, whose d_pos[j]
adds past the cutoff are skipped, gives the host's gradient (numpy launcher and JAX), with the -0.0 guards
really in its PTX (so a pass that stopped firing fails here); and an adjoint whose missing contributions
meet +0.0, -0.0 and NaN in the array keeps them bit for bit."""
from __future__ import annotations

import re

import numpy as np
import pytest

import adoffload as ado
from tests.ad.test_reverse_host_speed import BOX, CUTOFF, _system, pair_energy

pytestmark = pytest.mark.gpu


def _gradient(pos, nbr, seed, device, lean):
    d_pos = np.zeros_like(pos)
    kernel = ado.vjp(pair_energy, ["pos"], primal_outputs=not lean)
    kernel(pos, nbr, BOX, CUTOFF, np.zeros(len(pos)), d_pos=d_pos, d_energy=seed.copy(), grid=len(pos), device=device)
    return d_pos


@pytest.mark.parametrize("lean", [False, True])
@pytest.mark.parametrize("n", [40, 343])
def test_gather_adjoint_matches_the_host(cuda, n, lean):
    pos, nbr = _system(n, seed=n)
    seed = np.random.default_rng(n).uniform(0.5, 1.5, len(pos))
    kernel = ado.vjp(pair_energy, ["pos"], primal_outputs=not lean)
    ptx = kernel.compiled("nvptx", noalias=True).artifact
    assert len(re.findall(r"-9223372036854775808", ptx)) >= 3
    # the GPU's atomics add in another order than the host: an element that is a near-cancelling sum
    # of terms of the array's size differs by rounding of that size (1e-11 relative was seen)
    host = _gradient(pos, nbr, seed, "cpu", lean)
    np.testing.assert_allclose(_gradient(pos, nbr, seed, "cuda", lean), host, rtol=1e-12,
                               atol=1e-13 * np.abs(host).max())


def test_gather_gradient_through_jax_on_the_gpu_matches_the_host(cuda):
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp
    pos, nbr = _system(216, seed=5)
    energy = ado.jax_kernel(pair_energy)
    f = jax.jit(jax.value_and_grad(lambda p, nb: jnp.sum(energy(p, nb, BOX, CUTOFF))))
    gpu = jax.devices("gpu")[0]
    e, g = f(jax.device_put(pos, gpu), jax.device_put(nbr, gpu))
    host = _gradient(pos, nbr, np.ones(len(pos)), "cpu", True)
    np.testing.assert_allclose(np.asarray(g), host, rtol=1e-12, atol=1e-12)


@ado.kernel
def gated(x: ado.In[ado.f64], c: ado.In[ado.f64], y: ado.Out[ado.f64]):
    i = ado.tid()
    xv = x[i // 4]          # loaded before the branch: its adjoint is -0.0 where the branch was not taken
    v = 0.0
    if c[i] > 0.0:
        v = xv * 3.0
    y[i] = v


def test_skipped_adds_leave_signed_zeros_and_nans_as_they_were(cuda):
    """Four threads share one x element; d_x[k] starts at +0.0, -0.0, NaN, 1.0; threads whose branch was
    not taken add -0.0 (skipped on the GPU), so elements all of whose threads skip keep their bits."""
    n = 64
    rng = np.random.default_rng(2)
    x, c = rng.standard_normal(n // 4), np.where(np.arange(n) % 32 < 16, -1.0, 1.0)
    ptx = ado.vjp(gated, ["x"]).compiled("nvptx", noalias=True).artifact
    assert "-9223372036854775808" in ptx
    start = np.tile(np.array([0.0, -0.0, np.nan, 1.0]), n // 16)
    results = []
    for device in ("cuda", "cpu"):
        d_x = start.copy()
        ado.vjp(gated, ["x"])(x, c, np.zeros(n), d_x=d_x, d_y=np.ones(n), grid=n, device=device)
        results.append(d_x)
    gpu, cpu = results
    np.testing.assert_array_equal(np.isnan(gpu), np.isnan(cpu))
    np.testing.assert_array_equal(np.signbit(gpu[~np.isnan(gpu)]), np.signbit(cpu[~np.isnan(cpu)]))
    np.testing.assert_allclose(gpu, cpu, rtol=1e-15)
