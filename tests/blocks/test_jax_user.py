"""Block kernels under JAX transformations, written as an outside user would (issue 13), host CPU.

Each kernel has a plain ``jnp`` version of the same math. Every derivative is checked twice:
against that version's JAX derivative, and on our function alone, by central differences and the
inner-product identity <J v, w> = <v, J^T w> between forward and reverse mode. Bad calls must raise
an ``adoffload.Error`` naming what was wrong."""
import numpy as np
import pytest

jax = pytest.importorskip("jax")
jax.config.update("jax_enable_x64", True)
import jax.numpy as jnp  # noqa: E402

import adoffload as ado  # noqa: E402
from adoffload.errors import GridError, JaxIntegrationError  # noqa: E402


# ----------------------------------------------------------------------------- kernels and references

@ado.kernel(block=32)
def blur(x: ado.In[ado.f64], w: ado.f64, y: ado.Out[ado.f64]):
    """A 3-point blur inside each block (neighbours weighted by w, zero past the block's ends) plus x^2."""
    i = ado.tid()
    t = ado.thread_id()
    S = ado.shared(32, ado.f64)
    S[t] = x[i]
    ado.sync_threads()
    left = 0.0
    right = 0.0
    if t > 0:
        left = S[t - 1]
    if t < 31:
        right = S[t + 1]
    y[i] = w * (left + right) + S[t] * S[t]


def blur_ref(x, w):
    xb = x.reshape(-1, 32)
    left = jnp.pad(xb, ((0, 0), (1, 0)))[:, :-1]
    right = jnp.pad(xb, ((0, 0), (0, 1)))[:, 1:]
    return (w * (left + right) + xb * xb).reshape(x.shape)


@ado.kernel(block=64)
def normalize(x: ado.In[ado.f64], scale: ado.In[ado.f64], y: ado.Out[ado.f64], s: ado.Out[ado.f64]):
    """y = x * scale / sqrt(1 + block sum of x^2); thread 0 of each block stores that sum in s."""
    i = ado.tid()
    total = ado.block_sum(x[i] * x[i])
    y[i] = x[i] * scale[i] / ado.sqrt(total + 1.0)
    if ado.thread_id() == 0:
        s[ado.block_id()] = total


def normalize_ref(x, scale):
    total = (x * x).reshape(-1, 64).sum(axis=1)
    return x * scale / jnp.sqrt(jnp.repeat(total, 64) + 1.0), total


@ado.kernel(block=32)
def gather_warp(x: ado.In[ado.f32], idx: ado.In[ado.i32], y: ado.Out[ado.f32]):
    """f32, an integer index array: y = warp max * v + warp sum of v^2, with v = x[idx]."""
    i = ado.tid()
    v = x[idx[i]]
    y[i] = ado.warp_max(v) * v + ado.warp_sum(v * v)


def gather_warp_ref(x, idx):
    v = jnp.asarray(x)[idx].reshape(-1, 32)
    return (v.max(axis=1, keepdims=True) * v + (v * v).sum(axis=1, keepdims=True)).reshape(-1)


@ado.kernel(block=16)
def accumulate(x: ado.In[ado.f64], y: ado.InOut[ado.f64], a: ado.f64):
    """InOut: y = a * y + sin(x of the mirror thread in the block)."""
    i = ado.tid()
    t = ado.thread_id()
    S = ado.shared(16, ado.f64)
    S[t] = x[i]
    ado.sync_threads()
    y[i] = a * y[i] + ado.sin(S[15 - t])


def accumulate_ref(x, y, a):
    return a * y + jnp.sin(x.reshape(-1, 16)[:, ::-1].reshape(-1))


@ado.kernel(block=16)
def three_scalars(x: ado.In[ado.f64], a: ado.f64, b: ado.f64, c: ado.f64, y: ado.Out[ado.f64]):
    """Three scalar parameters mixed through shared memory (one of them stored by thread 0 only)."""
    i = ado.tid()
    t = ado.thread_id()
    S = ado.shared(17, ado.f64)
    S[t] = a * x[i] + b
    if t == 0:
        S[16] = c
    ado.sync_threads()
    y[i] = a * S[15 - t] * S[15 - t] + b * ado.sin(S[t + 1]) + c * S[t] * x[i]


def three_scalars_ref(x, a, b, c):
    S = (a * x + b).reshape(-1, 16)
    shifted = jnp.concatenate([S, jnp.full((S.shape[0], 1), c)], axis=1)[:, 1:]
    return (a * S[:, ::-1] ** 2 + b * jnp.sin(shifted) + c * S * x.reshape(-1, 16)).reshape(-1)


@ado.kernel(block=32)
def padded_norm(x: ado.In[ado.f32], n: ado.i32, g: ado.f32, y: ado.Out[ado.f32]):
    """The grid is rounded up to whole blocks; the threads past n are guarded."""
    i = ado.tid()
    v = ado.f32(0.0)
    if i < n:
        v = x[i]
    s = ado.block_sum(v * v)
    if i < n:
        y[i] = g * v / ado.sqrt(s + ado.f32(1.0))


def padded_norm_ref(x, g):
    m = x.shape[0]
    xb = jnp.pad(x, (0, -m % 32)).reshape(-1, 32)
    return (g * xb / jnp.sqrt((xb * xb).sum(axis=1, keepdims=True) + 1.0)).reshape(-1)[:m]


@ado.kernel(block=8)
def off_by_one(x: ado.In[ado.f64], k: ado.i64, y: ado.Out[ado.f64]):
    """Reads shared element t + k and private element k: out of bounds for k >= 1 (thread 7) and k >= 2."""
    i = ado.tid()
    t = ado.thread_id()
    S = ado.shared(8, ado.f64)
    history = ado.zeros(2, ado.f64)
    S[t] = x[i]
    ado.sync_threads()
    history[k] = S[t + k]
    y[i] = history[0] + history[1]


@ado.kernel(block=16)
def accumulate_then_scale(x: ado.In[ado.f64], w: ado.f64, y: ado.Out[ado.f64]):
    """Reads its Out array before the final store that covers it: it relies on the zeros."""
    i = ado.tid()
    t = ado.thread_id()
    S = ado.shared(16, ado.f64)
    S[t] = x[i]
    ado.sync_threads()
    for r in range(3):
        y[i] += w * S[(t + r) % 16] * y[i] + S[(t + r) % 16]
    y[i] = y[i] * x[i]


def accumulate_then_scale_ref(x, w):
    xb, y = x.reshape(-1, 16), jnp.zeros((x.shape[0] // 16, 16))
    for r in range(3):
        y = y + w * jnp.roll(xb, -r, axis=1) * y + jnp.roll(xb, -r, axis=1)
    return (y * xb).reshape(-1)


@ado.kernel(block=32)
def block_result(x: ado.In[ado.f64], s: ado.Out[ado.f64]):
    """Every thread stores its block's sum to s[block] (CUDA's out[blockIdx.x] = total, unguarded)."""
    i = ado.tid()
    s[ado.block_id()] = ado.block_sum(ado.sin(x[i]) * x[i])


# ----------------------------------------------------------------------------- helpers

def _close(ours, theirs, rtol=1e-12, atol=1e-12):
    for a, b in zip(jax.tree.leaves(ours), jax.tree.leaves(theirs), strict=True):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=rtol, atol=atol)


def _same(transform, ours, theirs, *args, rtol=1e-12, atol=1e-12):
    """``transform(ours)`` and ``transform(theirs)`` at ``args``, each jitted (eager JAX would
    compile every jnp operation on its own, which is most of the time such a test takes)."""
    _close(jax.jit(transform(ours))(*args), jax.jit(transform(theirs))(*args), rtol=rtol, atol=atol)


def _check_derivatives(f, args, rng, eps=1e-6, rtol=1e-7):
    """Central differences for jax.jvp, and <J v, w> = <v, J^T w> between jax.jvp and jax.vjp."""
    tangents = tuple(np.asarray(rng.standard_normal(np.shape(a))) for a in args)
    cotangent = rng.standard_normal(jax.eval_shape(f, *args).shape)
    out, jv = jax.jit(lambda *a: jax.jvp(f, a, tangents))(*args)
    plus = jax.jit(f)(*[a + eps * t for a, t in zip(args, tangents)])
    minus = jax.jit(f)(*[a - eps * t for a, t in zip(args, tangents)])
    np.testing.assert_allclose(jv, (np.asarray(plus) - np.asarray(minus)) / (2 * eps), rtol=rtol, atol=rtol)
    pulled = jax.jit(lambda *a: jax.vjp(f, *a)[1](cotangent))(*args)
    forward = float(np.vdot(np.asarray(jv), cotangent))
    reverse = sum(float(np.vdot(np.asarray(p), t)) for p, t in zip(pulled, tangents))
    assert forward == pytest.approx(reverse, rel=1e-12, abs=1e-12)


def _sin_sum(f):
    return lambda *args: jnp.sum(jnp.sin(f(*args)))


# ----------------------------------------------------------------------------- values and first derivatives

def test_shared_memory_blur_values_and_derivatives_in_both_modes():
    rng = np.random.default_rng(0)
    f = ado.jax_kernel(blur)
    x = rng.standard_normal(64)
    _close(jax.jit(f)(x, 0.3), blur_ref(x, 0.3), rtol=0, atol=0)
    _check_derivatives(f, (x, 0.3), rng)
    # a loss mixing the kernel with jnp ops; both arguments differentiated, then the scalar alone
    # (one vector-forward call, jax/scalar_jvp.py)
    loss = lambda f: lambda x, w: jnp.sum(jnp.cos(f(x, w)) * x) + w ** 2      # noqa: E731
    _same(lambda g: jax.grad(loss(g), (0, 1)), f, blur_ref, x, 0.3)
    _same(lambda g: jax.grad(loss(g), 1), f, blur_ref, x, 0.3)
    _same(jax.jacrev, f, blur_ref, x, 0.3)
    _same(lambda g: jax.jacfwd(g, 1), f, blur_ref, x, 0.3)


def test_second_order_forward_over_reverse_and_jvp_of_vjp():
    rng = np.random.default_rng(1)
    f = ado.jax_kernel(blur)
    x, v, cotangent = rng.standard_normal((3, 64))
    _same(lambda g: jax.hessian(_sin_sum(g), (0, 1)), f, blur_ref, x[:32], 0.3, rtol=1e-11)
    _same(lambda g: lambda x, w: jax.jvp(jax.grad(_sin_sum(g), (0, 1)), (x, w), (v, 0.5)), f, blur_ref, x, 0.3,
          rtol=1e-11)
    pullback = lambda g: lambda x, w: jax.vjp(g, x, w)[1](cotangent)     # noqa: E731
    _same(lambda g: lambda x, w: jax.jvp(pullback(g), (x, w), (v, -1.0)), f, blur_ref, x, 0.3, rtol=1e-11)


def test_several_outputs_of_which_the_loss_uses_one_or_none():
    rng = np.random.default_rng(2)
    f = ado.jax_kernel(normalize, out_shapes=lambda x, scale: {"y": x.shape, "s": (x.shape[0] // 64,)})
    x, scale = rng.standard_normal((2, 128))
    _close(f(x, scale), normalize_ref(x, scale), rtol=1e-14, atol=1e-14)
    losses = [lambda y, s: jnp.sum(jnp.sin(y)), lambda y, s: jnp.sum(s ** 3) / 1e4,
              lambda y, s: jnp.sum(s) + jnp.sum(y * y)]
    for loss in losses:
        of = lambda g: lambda x, scale: loss(*g(x, scale))     # noqa: E731
        _same(lambda g: jax.grad(of(g), (0, 1)), f, normalize_ref, x, scale)
        _same(lambda g: jax.grad(of(g), 1), f, normalize_ref, x, scale)
    # both outputs unused: a zero gradient from the kernel
    unused = lambda x: (f(x, scale), jnp.sum(x ** 2))[1]      # noqa: E731
    _close(jax.jit(jax.grad(unused))(x), 2 * x, rtol=0, atol=0)
    _same(lambda g: jax.jacrev(lambda x: g(x, scale)[1]), f, normalize_ref, x)


def test_f32_kernel_with_an_integer_input():
    rng = np.random.default_rng(3)
    f = ado.jax_kernel(gather_warp)
    x = rng.standard_normal(64).astype(np.float32)
    idx = rng.integers(0, 64, 64).astype(np.int32)
    _close(f(x, idx), gather_warp_ref(x, idx), rtol=1e-6, atol=1e-5)
    loss = lambda g: lambda x, idx: jnp.sum(jnp.tanh(g(x, idx)))     # noqa: E731
    _same(lambda g: jax.grad(loss(g)), f, gather_warp_ref, x, idx, rtol=1e-5, atol=1e-5)
    gidx = jax.grad(loss(f), (0, 1), allow_int=True)(x, idx)[1]
    assert gidx.dtype == jax.dtypes.float0
    float0 = np.zeros(64, jax.dtypes.float0)
    _same(lambda g: lambda x, idx: jax.jvp(g, (x, idx), (x, float0))[1], f, gather_warp_ref, x, idx,
          rtol=1e-5, atol=1e-4)
    idxs = np.stack([idx, idx[::-1]])
    _same(lambda g: jax.vmap(jax.grad(loss(g)), (None, 0)), f, gather_warp_ref, x, idxs, rtol=1e-5, atol=1e-5)


def test_inout_array_and_a_scalar():
    rng = np.random.default_rng(4)
    f = ado.jax_kernel(accumulate)
    x, y = rng.standard_normal((2, 32))
    _close(f(x, y, 0.7), accumulate_ref(x, y, 0.7), rtol=0, atol=0)
    weights = jnp.arange(32.0)
    loss = lambda g: lambda x, y, a: jnp.sum(g(x, y, a) ** 2 * weights)     # noqa: E731
    _same(lambda g: jax.grad(loss(g), (0, 1, 2)), f, accumulate_ref, x, y, 0.7)
    _check_derivatives(f, (x, y, 0.7), rng)
    _same(lambda g: jax.grad(lambda x: jnp.sum(g(x, x, 0.5) ** 2)), f, accumulate_ref, x)   # x as In and InOut
    xs = np.stack([x, -x])                                                                  # y unbatched
    _same(lambda g: jax.vmap(g, (0, None, None)), f, accumulate_ref, xs, y, 0.7)


def test_a_few_scalars_differentiated_through_shared_memory():
    rng = np.random.default_rng(5)
    f = ado.jax_kernel(three_scalars)
    x, p = rng.standard_normal(48), (0.7, -0.4, 1.3)
    _same(lambda g: jax.grad(_sin_sum(g), (1, 2, 3)), f, three_scalars_ref, x, *p)
    _same(lambda g: jax.hessian(_sin_sum(g), (1, 2, 3)), f, three_scalars_ref, x, *p, rtol=1e-11)
    bs = jnp.array([0.1, 0.5, -1.0])
    _same(lambda g: jax.vmap(jax.grad(_sin_sum(g), (1, 2, 3)), (None, None, 0, None)), f, three_scalars_ref,
          x, 0.7, bs, 1.3)


def test_an_out_array_read_before_its_covering_store_is_still_zeroed():
    """frontend/coverage.py took the final ``y[i] = y[i] * x[i]`` for a full write and skipped the
    zeroing, so the += loop read stale memory: the numpy launcher read the caller's array, and the
    tangent call under jax.jvp/jax.grad read whatever XLA's buffer held (NaNs, no error)."""
    assert accumulate_then_scale.full_writes == frozenset()
    rng = np.random.default_rng(12)
    x, dx = rng.standard_normal((2, 32))
    y = np.full(32, 7.0)
    accumulate_then_scale(x, 0.3, y, grid=32)
    _close(y, accumulate_then_scale_ref(x, 0.3), rtol=1e-13, atol=1e-13)
    f = ado.jax_kernel(accumulate_then_scale)
    _same(lambda g: lambda x, w: jax.jvp(g, (x, w), (dx, 1.0)), f, accumulate_then_scale_ref, x, 0.3, rtol=1e-12)
    _same(lambda g: jax.grad(_sin_sum(g), (0, 1)), f, accumulate_then_scale_ref, x, 0.3)


def test_a_store_every_thread_of_a_block_makes_differentiates_once_and_refuses_twice_clearly():
    """The adjoint takes that store's seed with an atomic exchange; forward mode over it (hessian)
    is refused. The message blamed a user atomic and advised a prefix sum; it names the store and
    the fix (one thread stores), with which the second derivative works (normalize, below)."""
    f = ado.jax_kernel(block_result, grid=lambda x: x.shape, out_shapes=lambda x: {"s": (x.shape[0] // 32,)})
    ref = lambda x: (jnp.sin(x) * x).reshape(-1, 32).sum(axis=1)      # noqa: E731
    x = np.random.default_rng(13).standard_normal(64)
    _same(jax.jacrev, f, ref, x)
    _same(lambda g: jax.grad(lambda x: jnp.sum(g(x) ** 2)), f, ref, x)
    with pytest.raises(ado.DifferentiationError, match=r"test_jax_user.py:\d+ in forward mode .*every thread of a "
                       r"block makes to one element.*thread_id\(\) == 0"):
        jax.hessian(lambda x: jnp.sum(f(x) ** 2))(x)
    scale = np.ones(64)
    guarded = ado.jax_kernel(normalize, out_shapes=lambda x, scale: {"y": x.shape, "s": (1,)})
    _same(lambda g: jax.hessian(lambda x: jnp.sum(g(x, scale)[1] ** 2)), guarded, normalize_ref, x, rtol=1e-11)


# ----------------------------------------------------------------------------- vmap and control flow

@pytest.mark.parametrize("in_axes, out_axes", [((0, None), 0), ((None, 0), 0), ((1, 0), 1)])
def test_vmap_in_axes_and_out_axes(in_axes, out_axes):
    rng = np.random.default_rng(6)
    x = rng.standard_normal({0: (3, 64), 1: (64, 3), None: (64,)}[in_axes[0]])
    w = np.array([0.1, -0.2, 0.3]) if in_axes[1] == 0 else 0.3
    _same(lambda g: jax.vmap(g, in_axes, out_axes), ado.jax_kernel(blur), blur_ref, x, w, rtol=1e-14, atol=1e-15)


def test_vmap_of_grad_and_grad_of_vmap():
    rng = np.random.default_rng(7)
    xs, ws = rng.standard_normal((3, 64)), jnp.array([0.1, -0.2, 0.3])
    loss = lambda g: lambda x, w: jnp.sum(jnp.sin(g(x, w)) * x)      # noqa: E731
    total = lambda g: lambda xs, ws: jnp.sum(jax.vmap(loss(g))(xs, ws) ** 2)     # noqa: E731
    f = ado.jax_kernel(blur)
    _same(lambda g: jax.vmap(jax.grad(loss(g), (0, 1))), f, blur_ref, xs, ws)
    _same(lambda g: jax.grad(total(g), (0, 1)), f, blur_ref, xs, ws)


def test_scan_and_fori_loop_carry_the_kernels_output():
    x = 0.5 * np.random.default_rng(8).standard_normal(64)

    def smoothed(g):
        def run(x, w):
            carry, sums = jax.lax.scan(lambda c, _: (jnp.tanh(g(c, w)), jnp.sum(c)), x, None, length=4)
            carry = jax.lax.fori_loop(0, 3, lambda k, c: jnp.tanh(g(c, w)), carry)
            return jnp.sum(carry ** 2) + jnp.sum(sums)
        return run
    f = ado.jax_kernel(blur)
    _same(smoothed, f, blur_ref, x, 0.3)
    _same(lambda g: jax.grad(smoothed(g), (0, 1)), f, blur_ref, x, 0.3)


# ----------------------------------------------------------------------------- determinism

def test_deterministic_gradient_is_bitwise_reproducible_and_jax_refuses_its_kernel():
    """ado.vjp(..., deterministic=True) through the numpy launcher: the same bits every run, equal
    to jax.grad's. Under JAX it is refused (its log is reduced on the host; docs/determinism.md)."""
    rng = np.random.default_rng(9)
    x, seed = rng.standard_normal((2, 64))
    reverse = ado.vjp(blur, ["x", "w"], deterministic=True)
    runs = []
    for _ in range(2):
        d_x, d_w = np.zeros(64), np.zeros(1)
        reverse(x, 0.3, np.zeros(64), d_y=seed.copy(), d_x=d_x, d_w=d_w, grid=64)
        runs.append((d_x, d_w))
    np.testing.assert_array_equal(runs[0][0], runs[1][0])
    np.testing.assert_array_equal(runs[0][1], runs[1][1])
    pulled = jax.vjp(ado.jax_kernel(blur), x, 0.3)[1](seed)
    _close((runs[0][0], runs[0][1][0]), pulled)
    call = ado.jax_kernel(reverse, out_shapes={"y": (64,)})
    with pytest.raises(JaxIntegrationError, match="deterministic"):
        call(x, 0.3, np.zeros(64), np.zeros(1), seed)


# ----------------------------------------------------------------------------- single precision without x64

@pytest.fixture
def x64_off():
    previous = jax.config.jax_enable_x64
    jax.config.update("jax_enable_x64", False)
    yield
    jax.config.update("jax_enable_x64", previous)


@pytest.mark.filterwarnings("ignore:Explicitly requested dtype float64")     # the situation tested last
def test_f32_block_kernel_with_a_guarded_rounded_up_grid_without_x64(x64_off):
    rng = np.random.default_rng(10)
    call = ado.jax_kernel(padded_norm, grid=lambda x, n, g: (-(-x.shape[0] // 32) * 32,))
    f = lambda x, g: call(x, 100, g)        # noqa: E731
    x = rng.standard_normal(100).astype(np.float32)
    _close(f(x, 1.5), padded_norm_ref(x, 1.5), rtol=1e-6, atol=1e-6)
    weights = jnp.arange(100.0) / 100
    loss = lambda g: lambda x, s: jnp.sum(jnp.sin(g(x, s)) * weights)      # noqa: E731
    _same(lambda g: jax.grad(loss(g), (0, 1)), f, padded_norm_ref, x, 1.5, rtol=1e-5, atol=1e-6)
    _same(lambda g: jax.grad(loss(g), 1), f, padded_norm_ref, x, 1.5, rtol=1e-5, atol=1e-6)
    xs, gs = np.stack([x, -x]), jnp.array([1.0, 2.0], jnp.float32)
    _same(lambda g: jax.vmap(jax.grad(loss(g), (0, 1))), f, padded_norm_ref, xs, gs, rtol=1e-5, atol=1e-6)
    # without x64, jnp makes the caller's float64 array a float32 one: the error names the flag
    with pytest.raises(JaxIntegrationError, match=r"'x' of kernel 'blur' is float64; enable .*jax_enable_x64"):
        ado.jax_kernel(blur)(jnp.zeros(64, jnp.float64), jnp.float64(0.3))


# ----------------------------------------------------------------------------- bad calls

def test_a_default_grid_that_is_not_whole_blocks_says_where_it_came_from():
    """normalize's first output y takes x's shape: 40 elements are not whole blocks of 64. The
    error names the default (y's shape) and grid=, under jit, vmap and grad alike."""
    f = ado.jax_kernel(normalize, out_shapes=lambda x, scale: {"y": x.shape, "s": (1,)})
    x = np.zeros(40)
    for call in (f, jax.jit(f), lambda x, s: jax.vmap(f)(x[None], s[None]),
                 jax.grad(lambda x, s: jnp.sum(f(x, s)[0]))):
        with pytest.raises(GridError, match=r"grid \(40,\) is not a multiple.*default.*Out array 'y'.*grid="):
            call(x, x)
    with pytest.raises(GridError, match=r"grid \(40,\) is not a multiple of it on axis 0 \(pad") as info:
        ado.jax_kernel(blur, grid=40)(np.zeros(64), 0.3)
    assert "default" not in str(info.value)        # the caller's own grid is not called a default


@pytest.mark.parametrize("args, message", [
    ((np.zeros(64, np.float32), 0.3), r"parameter 'x' of kernel 'blur' expects dtype float64, got float32"),
    ((np.zeros((2, 32)), 0.3), r"parameter 'x' of kernel 'blur' expects ndim 1 .*got ndim 2"),
    ((np.zeros(64), np.float32(0.3)), r"parameter 'w' of kernel 'blur' expects dtype float64, got float32"),
    ((np.zeros(64), np.zeros(64)), r"scalar parameter 'w' of kernel 'blur' expects ndim 0"),
    ((np.zeros(64),), r"kernel 'blur' as a JAX function takes 2 arguments \(x, w\), got 1"),
])
def test_bad_arguments_name_the_parameter(args, message):
    with pytest.raises(JaxIntegrationError, match=message):
        ado.jax_kernel(blur)(*args)


def test_arguments_by_name():
    """Keywords raised Python's TypeError about "call()"; they bind by name, and a wrong one names
    the kernel and its arguments."""
    f = ado.jax_kernel(blur)
    x = np.random.default_rng(14).standard_normal(64)
    _close(f(x, w=0.3), blur_ref(x, 0.3), rtol=0, atol=0)
    _close(jax.grad(lambda w: jnp.sum(f(w=w, x=x)))(0.3), jax.grad(lambda w: jnp.sum(blur_ref(x, w)))(0.3))
    for kwargs, message in [({"y": x}, r"takes 2 arguments \(x, w\); the keyword 'y' is an Out array"),
                            ({"v": 0.3}, r"the keyword 'v' is not one of them"),
                            ({"x": x}, r"'x' was given by position and by keyword"),
                            ({}, r"takes 2 arguments \(x, w\), got 1")]:
        with pytest.raises(JaxIntegrationError, match=message):
            f(x, **kwargs)
    with pytest.raises(JaxIntegrationError, match=r"kernel 'blur' .*; missing 'x'"):
        f(w=0.3)


def test_a_grid_or_out_shape_from_a_traced_value_is_refused_clearly():
    """grid=/out_shapes= callables see the arguments; under jit a value is a tracer, and JAX's
    TracerArrayConversionError (about numpy arrays) came out instead of a word about the grid.
    A fractional grid was cut to an int, a negative Out extent reached XLA (an MLIRError)."""
    x = np.zeros(96, np.float32)
    f = ado.jax_kernel(padded_norm, grid=lambda x, n, g: (n,))
    _close(jax.jit(f, static_argnums=1)(x, 96, 1.0), f(x, 96, 1.0), rtol=0, atol=0)
    with pytest.raises(GridError, match=r"grid for kernel 'padded_norm' must be static ints.*static_argnums"):
        jax.jit(f)(x, 96, 1.0)
    with pytest.raises(GridError, match=r"must be static ints, got 'a'$"):
        ado.jax_kernel(padded_norm, grid=lambda *args: "a")(x, 96, 1.0)
    with pytest.raises(GridError, match=r"must be static ints, got \[32.5\]"):     # not cut to 32
        ado.jax_kernel(padded_norm, grid=[32.5])(x, 96, 1.0)
    for shape, message in [(-1, r"must be non-negative, got \(-1,\)"), (1.5, r"must be static ints, got 1.5")]:
        with pytest.raises(JaxIntegrationError, match=r"out_shapes\['s'\] of kernel 'normalize' " + message):
            ado.jax_kernel(normalize, out_shapes={"y": 64, "s": shape})(np.zeros(64), np.ones(64))
    g = ado.jax_kernel(normalize, out_shapes=lambda x, s: {"y": x.shape, "s": (jnp.sum(s).astype(int),)})
    with pytest.raises(JaxIntegrationError, match=r"out_shapes\['s'\] of kernel 'normalize' must be static ints"):
        jax.jit(g)(np.zeros(64), np.ones(64))


def test_an_integer_array_of_the_wrong_width_is_refused():
    f = ado.jax_kernel(gather_warp)
    with pytest.raises(JaxIntegrationError, match=r"'idx' of kernel 'gather_warp' expects dtype int32, got int64"):
        f(np.zeros(64, np.float32), np.zeros(64, np.int64))


def test_a_shared_or_private_array_out_of_bounds_is_named_under_jax():
    """The CPU handler reported a bounds failure of a shared or thread-private array as a raw
    status record ("parameter -1000000"); it names the array as the numpy launcher does. (On the
    host CPU, where the handler raises at the call: a GPU's record is read at a later sync.)"""
    with jax.default_device(jax.devices("cpu")[0]):
        f = ado.jax_kernel(off_by_one)
        x = np.arange(16.0)
        _close(f(x, 0), x, rtol=0, atol=0)
        shared = r"kernel 'off_by_one': index 8 out of bounds for axis 0 of shared array #0"
        calls = [lambda: f(x, 1), lambda: jax.vmap(f, (0, None))(np.stack([x, x]), 1),
                 lambda: jax.grad(lambda x: jnp.sum(f(x, 1)))(x)]
        for call in calls:
            with pytest.raises(Exception, match=shared):
                jax.block_until_ready(call())
        # thread 0 fails first, on history[2] (S[2] is in bounds)
        with pytest.raises(Exception, match=r"index 2 out of bounds for axis 0 of local array #0"):
            jax.block_until_ready(f(x, 2))


# ----------------------------------------------------------------------------- shard_map

def test_shard_map_over_a_one_device_mesh():
    from jax.sharding import Mesh, PartitionSpec as P
    rng = np.random.default_rng(11)
    mesh = Mesh(np.array(jax.devices()[:1]), ("d",))
    f = ado.jax_kernel(blur)
    g = jax.shard_map(f, mesh=mesh, in_specs=(P("d"), P()), out_specs=P("d"))
    x = rng.standard_normal(64)
    loss = lambda f: lambda x, w: jnp.sum(jnp.sin(f(x, w)))      # noqa: E731
    _close(jax.jit(g)(x, 0.3), blur_ref(x, 0.3), rtol=0, atol=0)
    _close(jax.jit(jax.grad(loss(g), (0, 1)))(x, 0.3), jax.grad(loss(blur_ref), (0, 1))(x, 0.3))
