"""Grid-stride reduction entries (codegen/gpu/grid_stride.py) on a real CUDA device: the launcher caps
the launch at one resident wave, so every thread loops over many groups; sizes around the
groups and past several waves, k forced to 1/2/4 or left to the policy, misaligned views (the
checked path), a failing thread-independent check, launches of arbitrary thread counts, and an
adjoint's reduction. Integer reductions are compared exactly. Skips without a CUDA GPU."""
from __future__ import annotations

import numpy as np
import pytest

import adoffload as ado
from adoffload.codegen.gpu import vectorize
from adoffload.codegen.slots import pack_slots
from adoffload.errors import BoundsError

pytestmark = pytest.mark.gpu

# past one H200 wave (132 x 2048 threads) several times, at k = 1, 2 and 4
SIZES = (1, 5, 1000, (1 << 20) + 3, 3 * (1 << 20) + 5)


@ado.kernel
def dot(a: ado.In[ado.f64], b: ado.In[ado.f64], out: ado.InOut[ado.f64]):
    i = ado.tid()
    ado.atomic_add(out, 0, a[i] * b[i])


@ado.kernel
def stats(vec: ado.In[ado.i32], vsum: ado.InOut[ado.i64], vmin: ado.InOut[ado.i32], vmax: ado.InOut[ado.i32]):
    i = ado.tid()
    v = vec[i]
    ado.atomic_add(vsum, 0, ado.i64(v))
    ado.atomic_min(vmin, 0, v)
    ado.atomic_max(vmax, 0, v)


@ado.kernel
def scale(x: ado.In[ado.f64], y: ado.Out[ado.f64], alpha: ado.f64):
    i = ado.tid()
    y[i] = alpha * x[i]


@pytest.fixture(params=["1", "2", "4", "policy"])
def per_thread(request, monkeypatch):
    if request.param == "policy":
        monkeypatch.delenv(vectorize.ENV_VAR, raising=False)
    else:
        monkeypatch.setenv(vectorize.ENV_VAR, request.param)
    return request.param


def _small_floats(rng, n):
    """Integers as f64: every partial sum is exact, so any summation order gives the same total."""
    return rng.integers(-64, 64, n).astype(np.float64)


def test_dot_every_size(cuda, per_thread):
    rng = np.random.default_rng(3)
    for n in SIZES:
        a, b = _small_floats(rng, n), _small_floats(rng, n)
        out = np.array([0.5])
        dot(a, b, out, grid=n, device="cuda")
        assert out[0] == 0.5 + a @ b, n


def test_integer_stats_every_size(cuda, per_thread):
    rng = np.random.default_rng(4)
    for n in SIZES:
        v = rng.integers(-10**6, 10**6, n).astype(np.int32)
        s, lo, hi = np.array([7], np.int64), np.array([2**31 - 1], np.int32), np.array([-2**31], np.int32)
        stats(v, s, lo, hi, grid=n, device="cuda")
        assert (s[0], lo[0], hi[0]) == (7 + v.astype(np.int64).sum(), v.min(), v.max()), n


def test_misaligned_views_take_the_checked_path(cuda, per_thread):
    rng = np.random.default_rng(5)
    n = 3 * (1 << 20) + 5
    base_a, base_b = _small_floats(rng, n + 1), _small_floats(rng, n + 1)
    a, b = base_a[1:], base_b[:-1]
    out = np.zeros(1)
    dot(a, b, out, grid=n, device="cuda")
    assert out[0] == a @ b


def test_empty_total_is_a_bounds_error(cuda):
    a = np.ones(1 << 20)
    with pytest.raises(BoundsError, match="out"):
        dot(a, a, np.zeros(0), grid=a.size, device="cuda")


@pytest.mark.parametrize("threads", [1, 33, 1000, 270_336])
def test_any_thread_count_is_right(cuda, threads):
    """The compiled entry launched by hand with a thread count that is not the launcher's."""
    n = (1 << 20) + 3
    rng = np.random.default_rng(threads)
    a, b = _small_floats(rng, n), _small_floats(rng, n)
    compiled = dot.compiled("nvptx", arch=cuda.arch, noalias=True, elements_per_thread=2)
    assert compiled.grid_stride
    module = cuda.load_module(compiled.ptx)
    function = module.function(compiled.entry_name)
    bufs = [cuda.to_device(x) for x in (a, b, np.zeros(1), np.zeros(4, np.int64))]
    try:
        slots = pack_slots([bufs[0].ptr, n, bufs[1].ptr, n, bufs[2].ptr, 1], compiled.flat_types, (n,), bufs[3].ptr)
        cuda.launch(function, threads, slots, block_size=256)
        cuda.synchronize()
        out, status = np.zeros(1), np.zeros(4, np.int64)
        cuda.copy_to_host(bufs[2], out)
        cuda.copy_to_host(bufs[3], status)
        assert status[0] == 0 and out[0] == a @ b
    finally:
        for buf in bufs:
            cuda.free(buf)


def test_adjoint_of_a_scalar_parameter(cuda, per_thread):
    grad = ado.vjp(scale, ["alpha"])
    rng = np.random.default_rng(6)
    n = 3 * (1 << 20) + 5
    x, d_y = _small_floats(rng, n), _small_floats(rng, n)
    values = {"x": x, "y": np.zeros(n), "alpha": 0.5, "d_y": d_y, "d_alpha": np.zeros(1)}
    grad(*[values[p.name] for p in grad.signature.visible_params], grid=n, device="cuda")
    assert values["d_alpha"][0] == x @ d_y


def test_jax_calls_of_looping_entries(cuda):
    """Under jax.jit the CUDA handler launches one resident wave too (max_threads): the sum over
    3M elements and the gradient of a scalar parameter (an adjoint's uniform accumulation)."""
    jax = pytest.importorskip("jax")
    import jax.numpy as jnp
    try:
        jax.devices("cuda")
    except RuntimeError as exc:
        pytest.skip(f"JAX sees no CUDA device: {exc}")
    previous = jax.config.jax_enable_x64
    jax.config.update("jax_enable_x64", True)
    try:
        rng = np.random.default_rng(8)
        n = 3 * (1 << 20) + 5
        a, b = _small_floats(rng, n), _small_floats(rng, n)
        total = ado.jax_kernel(dot, grid=lambda a, b, out: a.shape)
        assert float(jax.jit(total)(jnp.asarray(a), jnp.asarray(b), jnp.full(1, 0.5))[0]) == 0.5 + a @ b

        def loss(alpha, x):
            return jnp.sum(ado.jax_kernel(scale, out_shapes={"y": x.shape})(x, alpha))
        grad = jax.jit(jax.grad(loss))(0.5, jnp.asarray(a))
        assert float(grad) == a.sum()
    finally:
        jax.config.update("jax_enable_x64", previous)
