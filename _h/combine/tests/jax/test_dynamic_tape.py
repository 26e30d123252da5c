"""Reverse kernels with a dynamic tape as JAX custom calls: the handler counts, prefix-sums and
allocates the tape itself (handler.py, TapeLayout). CPU here; the CUDA case runs where a GPU is."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.test_util import check_grads

import adoffload as ado
from adoffload.errors import JaxIntegrationError


@ado.kernel
def newton(a: ado.In[ado.f64], out: ado.Out[ado.f64]):
    """sqrt(a) * sin(sqrt(a)) with sqrt by Newton's iteration: a while loop whose trip count
    depends on the data, so the adjoint stores a different number of records per thread."""
    i = ado.tid()
    y = a[i] + 1.0
    while ado.abs(y * y - a[i]) > 1e-13 * a[i]:
        y = 0.5 * (y + a[i] / y)
    out[i] = y * ado.sin(y)


def newton_ref(a):
    return jnp.sqrt(a) * jnp.sin(jnp.sqrt(a))


@ado.kernel
def gathered(x: ado.In[ado.f64], idx: ado.In[ado.i64], steps: ado.In[ado.i64], out: ado.Out[ado.f64]):
    """A recurrence with a per-thread trip count reading x through an index array."""
    i = ado.tid()
    acc = x[i]
    for j in range(steps[i]):
        acc = ado.sin(acc) * x[idx[i]] + 0.5
    out[i] = acc


@pytest.fixture(autouse=True)
def on_the_host():
    with jax.default_device(jax.devices("cpu")[0]):
        yield


A = np.linspace(0.3, 40.0, 37)       # float64 (numpy: made before the x64 fixture runs)
f = ado.jax_kernel(newton)
loss = lambda a: jnp.sum(f(a) ** 2)
loss_ref = lambda a: jnp.sum(newton_ref(a) ** 2)


def test_the_adjoint_needs_a_dynamic_tape():
    assert ado.vjp(newton, ["a"]).tape is not None


def test_grad_and_vjp_match_the_numpy_launcher_and_the_reference():
    g = jax.grad(loss)(A)
    np.testing.assert_allclose(g, jax.grad(loss_ref)(A), rtol=1e-10)
    seed = np.cos(A)
    out, pullback = jax.vjp(f, A)
    (ct,) = pullback(seed)
    np.testing.assert_allclose(out, newton_ref(A), rtol=1e-12)
    a = A.copy()
    d_a = np.zeros_like(a)
    ado.vjp(newton, ["a"])(a, np.zeros_like(a), d_a, seed.copy(), grid=len(a))
    np.testing.assert_allclose(ct, d_a, rtol=1e-13)
    np.testing.assert_allclose(ct, jax.vjp(newton_ref, A)[1](seed)[0], rtol=1e-10)


def test_check_grads_and_jit():
    check_grads(f, (A,), order=1, modes=["rev"], atol=1e-6, rtol=1e-6)
    g = jax.jit(jax.grad(loss))
    np.testing.assert_allclose(g(A), jax.grad(loss_ref)(A), rtol=1e-10)
    np.testing.assert_allclose(g(2 * A), jax.grad(loss_ref)(2 * A), rtol=1e-10)    # the tape is sized per call


def test_vmap_of_grad_binds_one_batched_kernel():
    # The batched adjoint and its counting kernel get a batch grid axis; one tape serves the
    # whole batched grid (offsets from one prefix sum over it). No loop over the batch.
    batch = np.stack([A, 0.5 * A, A + 3.0])
    ours = jax.jit(jax.vmap(jax.grad(loss)))(batch)
    np.testing.assert_allclose(ours, jax.vmap(jax.grad(loss_ref))(batch), rtol=1e-10)
    jaxpr = str(jax.make_jaxpr(jax.vmap(jax.grad(loss)))(batch))
    assert "newton_vjp" in jaxpr and "scan" not in jaxpr and "while" not in jaxpr
    rows = [jax.grad(loss)(row) for row in batch]
    np.testing.assert_allclose(ours, np.stack(rows), rtol=1e-13)
    per_example = jax.jit(jax.vmap(jax.grad(lambda a, s: jnp.sum(f(a) * s), argnums=0), in_axes=(0, None)))
    np.testing.assert_allclose(per_example(batch, 2.0), 2.0 * jax.vmap(jax.grad(lambda a: jnp.sum(newton_ref(a))))(batch),
                               rtol=1e-10)


def test_second_derivatives_through_the_tape_in_both_modes():
    # forward over reverse (a shadow tape beside the tape) and reverse over reverse (plus a
    # second-level tape sized after the first), against the closed form's Hessian (diagonal)
    a = A[:5]
    expected = jax.hessian(loss_ref)(a)
    for second in (jax.jacfwd(jax.grad(loss)), jax.jacrev(jax.grad(loss)), jax.jit(jax.hessian(loss))):
        np.testing.assert_allclose(second(a), expected, rtol=1e-7, atol=1e-9)


def test_zero_size_grid():
    empty = jnp.zeros((0,))
    assert jax.grad(loss)(empty).shape == (0,)
    assert jax.jit(jax.grad(loss))(empty).shape == (0,)


def _adjoint_call(x, idx, steps, seed):
    """Bind gathered's adjoint kernel directly (as the transpose rule does), so the first pass
    that reads ``idx`` is the handler's counting pass."""
    from adoffload.jax.primitive import bind
    from adoffload.jax.rules import TapeCallSpec
    adjoint = ado.vjp(gathered, ["x"])
    spec = TapeCallSpec(adjoint, (x.shape[0],), ((x.shape[0],),))
    out, d_x, d_out = bind([x, idx, steps, jnp.zeros_like(x), seed], spec)
    return d_x


def test_a_bounds_error_while_counting_is_an_exception_and_later_calls_work():
    x = jnp.linspace(0.1, 1.0, 8)
    steps = jnp.arange(8, dtype=jnp.int64) % 4
    seed = jnp.ones(8)
    bad = jnp.arange(8, dtype=jnp.int64).at[5].set(11)
    call = jax.jit(_adjoint_call)
    with pytest.raises(Exception, match=r"kernel 'gathered_vjp': index 11 out of bounds for axis 0 of array 'x'"):
        jax.block_until_ready(call(x, bad, steps, seed))
    good = (jnp.arange(8, dtype=jnp.int64) * 3) % 8
    ours = call(x, good, steps, seed)

    def ref(x):
        acc = x
        for j in range(3):
            acc = jnp.where(j < steps, jnp.sin(acc) * x[good] + 0.5, acc)
        return jnp.sum(acc)
    np.testing.assert_allclose(ours, jax.grad(ref)(x), rtol=1e-12)
    g = jax.grad(lambda x: jnp.sum(ado.jax_kernel(gathered)(x, good, steps)))(x)
    np.testing.assert_allclose(g, jax.grad(ref)(x), rtol=1e-12)


def test_deterministic_kernels_are_refused_clearly():
    from adoffload.enzyme.kernels import LOG_PARAM
    from adoffload.jax import targets
    kernel = ado.vjp(gathered, ["x"], deterministic=True)    # logs its scattered d_x[idx[i]] updates
    assert LOG_PARAM in [p.name for p in kernel.signature.params]
    with pytest.raises(JaxIntegrationError, match="deterministic"):
        targets.ensure_target(kernel, "cpu")


def _lj_setup():
    from adoffload.chemistry import kernels, reference
    pos = jnp.array([[0.0, 0.0, 0.0], [1.1, 0.2, -0.1], [0.3, 1.0, 0.2], [1.2, 1.1, 0.9]])
    box, neighbors = jnp.full(3, 10.0), jnp.array([[1, 2, 3], [0, 2, 3], [0, 1, 3], [0, 1, 2]], dtype=jnp.int64)
    ours = ado.jax_kernel(kernels.lj_energy, grid=4, out_shapes={"e": (4,)})
    return pos, box, neighbors, ours, reference.lj_energy


def _force_matching(energy, box, neighbors, targets):
    def loss(pos, sigma, epsilon):
        forces = -jax.grad(lambda x: jnp.sum(energy(x, box, neighbors, sigma, epsilon, 2.5)))(pos)
        return jnp.sum((forces - targets) ** 2)
    return loss


def test_reverse_over_reverse_through_the_lj_neighbor_kernel():
    import adoffload.chemistry.kernels as kernels
    adjoint = ado.vjp(kernels.lj_energy, ["pos", "sigma", "epsilon"])
    assert ado.vjp(adjoint, ["pos", "sigma", "epsilon"]).tape is not None     # the case this is about
    pos, box, neighbors, ours, theirs = _lj_setup()
    targets = jnp.full_like(pos, 0.05)
    grad = jax.grad(_force_matching(ours, box, neighbors, targets), argnums=(0, 1, 2))
    expected = jax.grad(_force_matching(theirs, box, neighbors, targets), argnums=(0, 1, 2))(pos, 1.0, 0.8)
    for got in (grad(pos, 1.0, 0.8), jax.jit(grad)(pos, 1.0, 0.8)):
        for a, b in zip(got, expected):
            np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)


def _has_cuda() -> bool:
    try:
        return bool(jax.devices("cuda"))
    except RuntimeError:
        return False


@pytest.mark.skipif(not _has_cuda(), reason="no CUDA GPU visible to JAX")
def test_reverse_over_reverse_on_cuda():
    from adoffload.jax import check_errors
    gpu = jax.devices("cuda")[0]
    with jax.default_device(gpu):
        pos, box, neighbors, ours, theirs = _lj_setup()
        targets = jnp.full_like(pos, 0.05)
        grad = jax.jit(jax.grad(_force_matching(ours, box, neighbors, targets), argnums=(0, 1, 2)))
        got = grad(pos, 1.0, 0.8)
        check_errors()
        expected = jax.grad(_force_matching(theirs, box, neighbors, targets), argnums=(0, 1, 2))(pos, 1.0, 0.8)
        for a, b in zip(got, expected):
            np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)
        g = jax.jit(jax.grad(loss))(A)
        np.testing.assert_allclose(g, jax.grad(loss_ref)(A), rtol=1e-10)
        assert jax.jit(jax.grad(loss))(jnp.zeros((0,))).shape == (0,)
        # second order through the dynamic tape: two tape levels (reverse over reverse) and a
        # shadow tape (forward over reverse), sized by the GPU handler level by level
        a = jnp.asarray(A[:7])
        expected = jax.hessian(loss_ref)(a)
        for second in (jax.jit(jax.jacrev(jax.grad(loss))), jax.jit(jax.hessian(loss))):
            np.testing.assert_allclose(second(a), expected, rtol=1e-7, atol=1e-9)
        check_errors()
        with pytest.raises(Exception, match="index 11 out of bounds"):
            x = jnp.linspace(0.1, 1.0, 8)
            bad = jnp.arange(8, dtype=jnp.int64).at[5].set(11)
            jax.block_until_ready(jax.jit(_adjoint_call)(x, bad, jnp.ones(8, jnp.int64), jnp.ones(8)))
        check_errors()                       # the counting pass reported it itself and cleared the record


def test_large_grids_count_and_run_on_xlas_thread_pool():
    # Above the CPU handler's threshold, the counting pass and the kernel both run in chunks on
    # XLA's pool (jax/cpu_parallel.py); each thread's tape offset comes from the one prefix sum.
    from adoffload.jax import cpu_parallel
    big = np.linspace(0.3, 40.0, 3 * cpu_parallel.MIN_CHUNK_THREADS + 5)
    g = jax.jit(jax.grad(loss))
    np.testing.assert_allclose(g(big), jax.grad(loss_ref)(big), rtol=1e-10)


def test_a_tape_kernel_wrapped_directly_takes_only_its_visible_params():
    # The tape and its offsets are hidden params the handler fills: ado.jax_kernel of the
    # adjoint itself takes (a, d_out) and returns (out, d_a, d_out), like the numpy launcher's.
    adjoint = ado.vjp(newton, ["a"])
    g = ado.jax_kernel(adjoint)
    seed = np.cos(A)
    out, d_a, _ = jax.jit(g)(A, np.zeros_like(A), seed)
    a, expected_out, expected = A.copy(), np.zeros_like(A), np.zeros_like(A)
    adjoint(a, expected_out, expected, seed.copy(), grid=len(a))
    np.testing.assert_allclose(out, expected_out, rtol=1e-13)
    np.testing.assert_allclose(d_a, expected, rtol=1e-13)
    with pytest.raises(JaxIntegrationError, match="takes 3 arguments"):
        g(A, seed)
