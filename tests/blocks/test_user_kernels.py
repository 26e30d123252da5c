"""A user's-eye hunt on block kernels (issue #13), on the host CPU: kernels shaped the way an
outside user writes them (user_kernels.py: row softmax and layernorm with block reductions, a padded
shared transpose, a double-buffered Hillis-Steele scan, a halving reduction tree, a tiled conv1d with
a halo, a matmul with a non-square block, warp_max mixed with shuffle_down, a two-level reduction,
shared memory read at a loaded index, barriers in nested loops, a 3-D block) checked against numpy,
then their derivatives against both oracles: central differences (forward mode) and
<J v, w> = <v, J^T w> between forward and reverse mode. The refusals found by the hunt are at the end."""

import numpy as np
import pytest

import adoffload as ado
from adoffload.errors import BoundsError, DifferentiationError, SharedMemoryRaceError, UnsupportedConstructError

from . import user_kernels as uk
from .kernel_files import load_module


_compile = load_module


def _copy(values: dict) -> dict:
    return {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in values.items()}


def _run(kernel, args: dict, grid, outs, **launch) -> dict:
    values = _copy(args)
    kernel(**values, grid=grid, **launch)
    return {o: values[o] for o in outs}


def check_derivatives(kernel, args: dict, active, outs, grid, seed=0, **launch):
    """Forward mode against central differences along a random direction, and
    <J v, w> = <v, J^T w> between forward and reverse mode; both derivative kernels' primal
    outputs equal the primal's. Returns (J v, J^T w). ``launch``: more launch options (device=...)."""
    rng = np.random.default_rng(seed)
    dtype = np.asarray(args[active[0]]).dtype
    single = dtype == np.float32
    h = 1e-2 if single else 1e-6
    v = {a: rng.standard_normal(np.shape(args[a])).astype(dtype) for a in active}
    w = {o: rng.standard_normal(np.shape(args[o])).astype(dtype) for o in outs}
    primal = _run(kernel, args, grid, outs, **launch)
    plus = _run(kernel, {**args, **{a: args[a] + dtype.type(h) * v[a] for a in active}}, grid, outs, **launch)
    minus = _run(kernel, {**args, **{a: args[a] - dtype.type(h) * v[a] for a in active}}, grid, outs, **launch)

    forward = _copy(args)
    forward.update({"d_" + a: v[a].copy() for a in active})
    forward.update({"d_" + o: np.zeros_like(args[o]) for o in outs})
    ado.jvp(kernel, tuple(active))(**forward, grid=grid, **launch)
    reverse = _copy(args)
    reverse.update({"d_" + a: np.zeros_like(args[a]) for a in active})
    reverse.update({"d_" + o: w[o].copy() for o in outs})
    ado.vjp(kernel, tuple(active))(**reverse, grid=grid, **launch)

    rtol = 1e-5 if single else 1e-12
    for o in outs:
        np.testing.assert_allclose(forward[o], primal[o], rtol=rtol, atol=rtol)
        np.testing.assert_allclose(reverse[o], primal[o], rtol=rtol, atol=rtol)
        fd = (plus[o].astype(np.float64) - minus[o]) / (2 * h)
        tol = (2e-2 if single else 1e-6) * max(1.0, float(np.max(np.abs(fd))))
        np.testing.assert_allclose(forward["d_" + o], fd, atol=tol, err_msg=f"J v of {o}")
    jv_w = sum(float(np.sum(forward["d_" + o].astype(np.float64) * w[o])) for o in outs)
    v_jtw = sum(float(np.sum(reverse["d_" + a].astype(np.float64) * v[a])) for a in active)
    scale = sum(float(np.sum(np.abs(forward["d_" + o].astype(np.float64) * w[o]))) for o in outs)
    assert abs(jv_w - v_jtw) <= (1e-5 if single else 1e-11) * scale, (jv_w, v_jtw)
    return {o: forward["d_" + o] for o in outs}, {a: reverse["d_" + a] for a in active}


# ----------------------------------------------------------------------------- numpy references

def _per_block(x, n):
    return x.reshape(-1, n)


def _softmax(x):
    e = np.exp(_per_block(x, 16) - _per_block(x, 16).max(1, keepdims=True))
    return (e / e.sum(1, keepdims=True)).reshape(x.shape)


def _layernorm(x, g):
    rows = x.reshape(x.shape[0], -1, 32)
    d = rows - rows.mean(-1, keepdims=True)
    return (d / np.sqrt((d * d).mean(-1, keepdims=True) + 1e-5) * g).reshape(x.shape)


def _damped_scan(x):
    s = np.sin(_per_block(x, 16))
    off = 1
    while off < 16:
        s = s.copy()
        s[:, off:] = s[:, off:] + s[:, :-off] * 0.9        # numpy reads the old s: double buffering
        off *= 2
    return s.reshape(-1)


def _halving_tree(x):
    S = _per_block(x, 32) ** 2
    s = 16
    while s:
        S = S.copy()
        S[:, :s] = S[:, :s] + S[:, s:2 * s] * np.cos(S[:, s:2 * s])
        s //= 2
    return S[:, 0]


def _conv1d(x, w):
    padded = np.concatenate([np.zeros(uk.HALO), np.tanh(x), np.zeros(uk.HALO)])
    return sum(w[k] * padded[k:k + x.size] for k in range(2 * uk.HALO + 1))


def _warp_logsumexp(x):
    rows = _per_block(x, 32)
    partner = rows[:, np.arange(32) ^ 1]
    return (np.log(np.exp(rows).sum(1, keepdims=True)) + 0.1 * rows * partner).reshape(-1)


def _gather(x, idx):
    s = np.sin(x)
    return s[np.arange(x.size) // 8 * 8 + idx] * x


def _permutation(x, p):
    S, P = _per_block(x * x, 8), _per_block(p % 8, 8)
    rows = np.arange(S.shape[0])[:, None]
    return (S[rows, P] + S[rows, P[:, ::-1]] * _per_block(x, 8)).reshape(-1)


def _nested(x, outer, inner):
    v = _per_block(x, 8)
    for _ in range(outer):
        S = v
        for _ in range(inner):
            u = np.roll(S, -1, axis=1)
            S = 0.5 * u + 0.5 * np.sin(u)
        v = S * v
    return v.reshape(-1)


def _per_block_steps(x):
    out = []
    for b, v in enumerate(_per_block(x, 8)):
        for s in range(min(b + 1, 4)):
            v = np.sin(np.roll(v, -(s + 1))) + v
        out.append(v)
    return np.concatenate(out)


def _newton(x):
    r = np.sqrt(_per_block(x * x + 1.0, 8)[:, ::-1])
    return (np.roll(r, -1, axis=1) * r).reshape(-1)


def _constant_overwrite(x):
    t = np.arange(8) * 0.5
    rows = _per_block(x, 8)
    return (np.roll(rows ** 2, -1, axis=1) * np.roll(t, -2) + t * rows).reshape(-1)


def _cube(x):
    out = np.empty_like(x)
    for bi in range(0, x.shape[0], 2):
        for bk in range(0, x.shape[2], 4):
            blk = x[bi:bi + 2, :, bk:bk + 4]
            S = np.exp(blk)
            out[bi:bi + 2, :, bk:bk + 4] = (S[::-1, :, ::-1] * blk).sum() * S[:, ::-1, :]
    return out


def _cases():
    """name: (kernel, args(rng), active inputs, outputs, grid, reference(args) -> {output: value})."""
    def vec(n):
        return lambda g: g.standard_normal(n)
    return {
        "softmax_rows": (uk.softmax_rows, lambda g: dict(x=vec(48)(g), y=np.zeros(48)), ["x"], ["y"], 48,
                         lambda a: {"y": _softmax(a["x"])}),
        "layernorm": (uk.layernorm, lambda g: dict(x=g.standard_normal((3, 64)), g=vec(32)(g), y=np.zeros((3, 64))),
                      ["x", "g"], ["y"], (3, 64), lambda a: {"y": _layernorm(a["x"], a["g"])}),
        "transpose_squares": (uk.transpose_squares, lambda g: dict(x=g.standard_normal((16, 24)), y=np.zeros((24, 16))),
                              ["x"], ["y"], (16, 24), lambda a: {"y": (a["x"] ** 2).T}),
        "damped_scan": (uk.damped_scan, lambda g: dict(x=vec(32)(g), y=np.zeros(32)), ["x"], ["y"], 32,
                        lambda a: {"y": _damped_scan(a["x"])}),
        "halving_tree": (uk.halving_tree, lambda g: dict(x=vec(64)(g), y=np.zeros(2)), ["x"], ["y"], 64,
                         lambda a: {"y": _halving_tree(a["x"])}),
        "conv1d_halo": (uk.conv1d_halo, lambda g: dict(x=vec(24)(g), w=vec(5)(g), y=np.zeros(24)), ["x", "w"], ["y"],
                        24, lambda a: {"y": _conv1d(a["x"], a["w"])}),
        "matmul_rect_squared": (uk.matmul_rect_squared,
                                lambda g: dict(A=g.standard_normal((4, 8)), B=g.standard_normal((8, 16)),
                                               C=np.zeros((4, 16))),
                                ["A", "B"], ["C"], (4, 16), lambda a: {"C": (a["A"] @ a["B"]) ** 2}),
        "warp_logsumexp": (uk.warp_logsumexp, lambda g: dict(x=vec(64)(g), y=np.zeros(64)), ["x"], ["y"], 64,
                           lambda a: {"y": _warp_logsumexp(a["x"])}),
        "two_level_logsumexp": (uk.two_level_logsumexp, lambda g: dict(x=vec(256)(g), out=np.zeros(2)), ["x"],
                                ["out"], 256,
                                lambda a: {"out": np.log(np.exp(0.5 * _per_block(a["x"], 128)).sum(1))}),
        "gather_through_shared": (uk.gather_through_shared,
                                  lambda g: dict(x=vec(16)(g), idx=g.integers(0, 8, 16), y=np.zeros(16)),
                                  ["x"], ["y"], 16, lambda a: {"y": _gather(a["x"], a["idx"])}),
        "shared_permutation": (uk.shared_permutation,
                               lambda g: dict(x=vec(16)(g), p=g.integers(0, 100, 16), y=np.zeros(16)),
                               ["x"], ["y"], 16, lambda a: {"y": _permutation(a["x"], a["p"])}),
        "nested_barrier_loops": (uk.nested_barrier_loops,
                                 lambda g: dict(x=vec(16)(g), y=np.zeros(16), outer=2, inner=3),
                                 ["x"], ["y"], 16, lambda a: {"y": _nested(a["x"], 2, 3)}),
        "per_block_steps": (uk.per_block_steps, lambda g: dict(x=vec(32)(g), y=np.zeros(32)), ["x"], ["y"], 32,
                            lambda a: {"y": _per_block_steps(a["x"])}),
        "newton_after_barrier": (uk.newton_after_barrier, lambda g: dict(x=vec(16)(g), y=np.zeros(16)), ["x"], ["y"],
                                 16, lambda a: {"y": _newton(a["x"])}),
        "constant_overwrite": (uk.constant_overwrite, lambda g: dict(x=vec(16)(g), y=np.zeros(16)), ["x"], ["y"], 16,
                               lambda a: {"y": _constant_overwrite(a["x"])}),
        "cube_mirror_sum": (uk.cube_mirror_sum, lambda g: dict(x=0.5 * g.standard_normal((4, 2, 8)),
                                                               y=np.zeros((4, 2, 8))),
                            ["x"], ["y"], (4, 2, 8), lambda a: {"y": _cube(a["x"])}),
        "softmax_rows_f32": (uk.softmax_rows_f32,
                             lambda g: dict(x=g.standard_normal(32).astype(np.float32), y=np.zeros(32, np.float32)),
                             ["x"], ["y"], 32, lambda a: {"y": _softmax(a["x"].astype(np.float64))}),
    }


CASES = _cases()


@pytest.mark.parametrize("name", sorted(CASES))
def test_user_kernel_matches_numpy_and_both_derivative_oracles(name):
    kernel, make, active, outs, grid, reference = CASES[name]
    args = make(np.random.default_rng(11))
    got = _run(kernel, args, grid, outs)
    single = np.asarray(args[active[0]]).dtype == np.float32
    for o, want in reference(args).items():
        np.testing.assert_allclose(got[o], want, rtol=1e-5 if single else 1e-12, atol=1e-6 if single else 1e-13)
    check_derivatives(kernel, args, active, outs, grid)


def _hessian_vector_product(kernel, args: dict, active, outs, grid, seed=3, h=1e-5):
    """(jvp of the vjp along v, central differences of the vjp along v) for a fixed cotangent."""
    rng = np.random.default_rng(seed)
    v = {a: rng.standard_normal(np.shape(args[a])) for a in active}
    w = {o: rng.standard_normal(np.shape(args[o])) for o in outs}
    reverse = ado.vjp(kernel, tuple(active))

    def gradient(point):
        values = _copy(point)
        values.update({"d_" + a: np.zeros_like(args[a]) for a in active})
        values.update({"d_" + o: w[o].copy() for o in outs})
        reverse(**values, grid=grid)
        return {a: values["d_" + a] for a in active}
    values = _copy(args)
    for a in active:
        values.update({"d_" + a: np.zeros_like(args[a]), "d2_" + a: v[a].copy(), "d_d_" + a: np.zeros_like(args[a])})
    for o in outs:
        values.update({"d_" + o: w[o].copy(), "d2_" + o: np.zeros_like(args[o]), "d_d_" + o: np.zeros_like(args[o])})
    hvp = ado.jvp(reverse, tuple(active))
    hvp(**{p.name: values[p.name] for p in hvp.signature.visible_params}, grid=grid)
    plus = gradient({**args, **{a: args[a] + h * v[a] for a in active}})
    minus = gradient({**args, **{a: args[a] - h * v[a] for a in active}})
    return {a: values["d_d_" + a] for a in active}, {a: (plus[a] - minus[a]) / (2 * h) for a in active}


@pytest.mark.parametrize("name", ["softmax_rows", "warp_logsumexp", "per_block_steps", "conv1d_halo"])
def test_forward_over_reverse_matches_differences_of_the_gradient(name):
    """Second order through block_max/block_sum, warp_max/shuffles, a block-uniform return in a
    loop with barriers, and shared tiles with a halo."""
    kernel, make, active, outs, grid, _ = CASES[name]
    got, want = _hessian_vector_product(kernel, make(np.random.default_rng(5)), active, outs, grid)
    for a in active:
        np.testing.assert_allclose(got[a], want[a], rtol=1e-5, atol=1e-5 * max(1.0, float(np.max(np.abs(want[a])))))


@pytest.mark.parametrize("name", ["damped_scan", "two_level_logsumexp"])
def test_vector_forward_mode_equals_one_tangent_at_a_time(name):
    kernel, make, active, outs, grid, _ = CASES[name]
    args = make(np.random.default_rng(6))
    rng = np.random.default_rng(7)
    tangents = {a: rng.standard_normal((3,) + np.shape(args[a])) for a in active}
    wide = _copy(args)
    wide.update({"d_" + a: tangents[a] for a in active})
    wide.update({"d_" + o: np.zeros((3,) + np.shape(args[o])) for o in outs})
    ado.jvp(kernel, tuple(active), width=3)(**wide, grid=grid)
    for lane in range(3):
        one = _copy(args)
        one.update({"d_" + a: tangents[a][lane].copy() for a in active})
        one.update({"d_" + o: np.zeros(np.shape(args[o])) for o in outs})
        ado.jvp(kernel, tuple(active))(**one, grid=grid)
        for o in outs:
            np.testing.assert_allclose(wide["d_" + o][lane], one["d_" + o], rtol=1e-13, atol=1e-14)


def test_softmax_rows_through_jax_grad_jvp_and_vmap():
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp
    f = ado.jax_kernel(uk.softmax_rows)

    def reference(x):
        return jax.nn.softmax(x.reshape(-1, 16), axis=1).reshape(-1)

    def loss(g):
        return lambda x: jnp.sum(jnp.cos(g(x)) * jnp.arange(x.shape[0]))
    rng = np.random.default_rng(8)
    x, v, X = rng.standard_normal(48), rng.standard_normal(48), rng.standard_normal((3, 32))
    np.testing.assert_allclose(jax.jit(jax.grad(loss(f)))(x), jax.grad(loss(reference))(x), rtol=1e-11, atol=1e-13)
    np.testing.assert_allclose(jax.jvp(f, (x,), (v,))[1], jax.jvp(reference, (x,), (v,))[1], rtol=1e-11, atol=1e-13)
    np.testing.assert_allclose(jax.vmap(f)(X), jax.vmap(reference)(X), rtol=1e-13, atol=1e-15)


# ----------------------------------------------------------------------------- refusals

# Cooperative calls the front end's uniformity check did not see (frontend/blocks.py): each ran on
# only some threads of a warp, and the host's exchange returned NaN (silently wrong values).
HIDDEN_DIVERGENT = {
    # ``a < b < c`` stops at the first false comparison (like Python): c runs on some threads only.
    # Was accepted; with x = +-1 every y stayed 0 (the divergent warp_sum gave NaN).
    "later operand of a chained comparison": """
@ado.kernel(block=32)
def k(x: ado.In[ado.f64], y: ado.InOut[ado.f64]):
    i = ado.tid()
    if 0.0 < x[i] < ado.warp_sum(x[i]):
        y[i] = 1.0
""",
    # the indices of an assignment's target are evaluated too: was accepted (a NaN index then)
    "index of an assignment target": """
@ado.kernel(block=32)
def k(x: ado.In[ado.f64], y: ado.InOut[ado.f64]):
    i = ado.tid()
    if x[i] > 0.0:
        y[ado.i64(ado.warp_sum(x[i])) + 32] = 1.0
""",
    # a while loop some threads leave by a divergent break or return: its test runs again on the
    # threads still in it. Was accepted: with break, the others looped 56 times instead of 4;
    # with return, the host launch never finished.
    "while test after a divergent break": """
@ado.kernel(block=8)
def k(x: ado.In[ado.f64], y: ado.Out[ado.f64]):
    i = ado.tid()
    v = x[i]
    n = 0
    while ado.block_sum(v) > 1.0:
        if ado.thread_id() == 0:
            break
        v = v * 0.5
        n += 1
    y[i] = v + 100.0 * n
""",
    "while test after a divergent return": """
@ado.kernel(block=8)
def k(x: ado.In[ado.f64], y: ado.Out[ado.f64]):
    i = ado.tid()
    v = x[i]
    y[i] = v
    while ado.block_sum(v) > 1.0:
        if x[i] > 3.0:
            return
        v = v * 0.5
        y[i] = v
""",
    "index of an augmented assignment target": """
@ado.kernel(block=32)
def k(x: ado.In[ado.f64], y: ado.InOut[ado.f64]):
    i = ado.tid()
    if x[i] > 0.0:
        y[ado.i64(ado.block_max(x[i]))] += 1.0
""",
}


@pytest.mark.parametrize("case", sorted(HIDDEN_DIVERGENT))
def test_cooperative_call_hidden_in_divergent_code_is_refused(case, tmp_path):
    with pytest.raises(UnsupportedConstructError, match=r"not uniform across the block") as info:
        _compile(HIDDEN_DIVERGENT[case], tmp_path)
    assert any(f"ado.{op}" in info.value.source_line for op in ("warp_sum", "block_max", "block_sum"))


def test_uniform_chained_comparison_and_target_index_are_accepted(tmp_path):
    """The fix refuses only what is divergent: a chain whose earlier operands are block-uniform,
    and a target index computed from a block reduction outside any divergent branch."""
    module = _compile("""
@ado.kernel(block=32)
def k(x: ado.In[ado.f64], y: ado.InOut[ado.f64], n: ado.f64):
    i = ado.tid()
    if 0.0 < n < ado.block_sum(x[i]):
        y[i] = 1.0
    y[i + 0 * ado.i64(ado.block_max(x[i]))] += 2.0
""", tmp_path)
    x = np.ones(64)
    y = np.zeros(64)
    module.k(x, y, 0.5, grid=64)
    np.testing.assert_array_equal(y, 3.0)
    y = np.zeros(64)
    module.k(x, y, 40.0, grid=64)
    np.testing.assert_array_equal(y, 2.0)


def test_while_test_with_a_divergent_continue_or_inner_break_is_accepted(tmp_path):
    """Threads that ``continue``, or break out of a nested loop, still reach the while test: only a
    break of the while loop itself or a return makes it divergent."""
    module = _compile("""
@ado.kernel(block=8)
def k(x: ado.In[ado.f64], y: ado.Out[ado.f64], nested: ado.i64):
    i = ado.tid()
    t = ado.thread_id()
    v = x[i]
    n = 0
    while ado.block_sum(v) > 1.0:
        n += 1
        if t == 0:
            for s in range(3):
                if s == nested:
                    break
                v = v * 0.5
            continue
        v = v * 0.5
    y[i] = v + 100.0 * n
""", tmp_path)
    x = np.ones(8)
    x[3] = 5.0
    for nested, first in ((2, 0.25 ** 4), (1, 0.5 ** 4)):
        y = np.zeros(8)
        module.k(x, y, nested, grid=8)
        want = 400.0 + x * 0.5 ** 4          # the block sum drops below 1 after 4 trips
        want[0] = 400.0 + first
        np.testing.assert_array_equal(y, want)


def test_lane_guard_is_checked_for_both_warp_sizes(tmp_path):
    """The race check evaluates ``lane_id()`` as the thread's rank modulo 32 and modulo 64 (a
    kernel may run with either): lane 40 exists only in 64-lane wavefronts, where threads 40 and
    104 both write P[0]. (``two_level_logsumexp``'s ``if ado.lane_id() == 0`` is race-free with
    both, and was refused before lane_id was evaluated at all.)"""
    with pytest.raises(SharedMemoryRaceError, match=r"thread 104's write and thread 40's write"):
        _compile("""
@ado.kernel(block=128)
def k(x: ado.In[ado.f64], out: ado.Out[ado.f64]):
    i = ado.tid()
    t = ado.thread_id()
    P = ado.shared(4, ado.f64)
    if t < 4:
        P[t] = 0.0
    ado.sync_threads()
    if ado.lane_id() == 40:
        P[0] = x[i]
    ado.sync_threads()
    out[i] = P[t % 4]
""", tmp_path)


def test_shared_bounds_error_names_the_array_and_its_axis(tmp_path):
    """S[0, t + 1] runs past axis 1 of a 2 x 8 array whose flat size it stays inside (checked per
    axis, not against the flat size); the error names the array as the kernel does."""
    module = _compile("""
@ado.kernel(block=8)
def k(x: ado.In[ado.f64], y: ado.Out[ado.f64]):
    i = ado.tid()
    t = ado.thread_id()
    Tile = ado.shared((2, 8), ado.f64)
    Tile[0, t] = x[i]
    Tile[1, t] = x[i]
    ado.sync_threads()
    y[i] = Tile[0, t + 1]
""", tmp_path)
    with pytest.raises(BoundsError, match=r"index 8 is out of bounds for axis 1 of shared array #0 \('Tile'\)"):
        module.k(np.zeros(8), np.zeros(8), grid=8)


BLOCK_RESULT = """
@ado.kernel(block=8)
def racy(x: ado.In[ado.f64], y: ado.Out[ado.f64]):
    i = ado.tid()
    y[ado.block_id()] = x[i] * 2.0

@ado.kernel(block=8)
def alike(x: ado.In[ado.f64], y: ado.Out[ado.f64]):
    i = ado.tid()
    y[ado.block_id()] = ado.block_sum(x[i] * x[i])
"""


def test_every_thread_storing_its_own_value_to_the_block_result_is_refused(tmp_path):
    """``y[block_id()] = x[i] * 2`` on every thread: a race whose last writer the host keeps
    (y[0] = 2 x[7]); the reverse sweep gave the seed to thread 0 instead (d_x[0] = 2, d_x[7] = 0),
    against forward mode's dy/dx[7] = 2: <J v, w> != <v, J^T w> without a word. Forward mode stores
    the value and its tangent separately, which a GPU block's warps may interleave: refused too. The
    same store of a value alike for the block (a block_sum) is every thread writing its block's
    result, and keeps its gradient."""
    module = _compile(BLOCK_RESULT, tmp_path)
    x = np.arange(16.0)
    with pytest.raises(DifferentiationError, match=r"\.py:6 in reverse mode.*data race") as info:
        ado.vjp(module.racy, "x")(x, np.zeros(2), np.zeros(16), np.ones(2), grid=16)
    assert "every thread of a block" in str(info.value)
    with pytest.raises(DifferentiationError, match=r"\.py:6 in forward mode.*data race"):
        ado.jvp(module.racy, "x")(x, np.zeros(2), np.ones(16), np.zeros(2), grid=16)
    dy = np.zeros(2)
    ado.jvp(module.alike, "x")(x, np.zeros(2), np.ones(16), dy, grid=16)
    np.testing.assert_allclose(dy, 2 * x.reshape(2, 8).sum(axis=1), rtol=1e-15)
    gx = np.zeros(16)
    ado.vjp(module.alike, "x")(x, np.zeros(2), gx, np.array([1.0, 3.0]), grid=16)
    np.testing.assert_allclose(gx, 2 * x * np.repeat([1.0, 3.0], 8), rtol=1e-15)


def test_a_plain_kernel_storing_different_values_to_a_divided_index_is_refused(tmp_path):
    """The same race in a kernel without blocks, ``y[i // 8] = x[i] * 2`` (``i // 8`` is an ``ashr``):
    was differentiated with the seed on x[0] while the host kept x[7]'s value; ``y[i // 8]`` of a value
    made from ``i // 8`` only is accepted, with its gradient."""
    module = _compile("""
@ado.kernel
def racy(x: ado.In[ado.f64], y: ado.Out[ado.f64]):
    i = ado.tid()
    y[i // 8] = x[i] * 2.0

@ado.kernel
def alike(x: ado.In[ado.f64], y: ado.Out[ado.f64]):
    i = ado.tid()
    y[i // 8] = ado.sin(x[i // 8]) * 2.0
""", tmp_path)
    x = np.arange(16.0)
    with pytest.raises(DifferentiationError, match=r"\.py:6 in reverse mode.*data race"):
        ado.vjp(module.racy, "x")(x, np.zeros(2), np.zeros(16), np.ones(2), grid=16)
    with pytest.raises(DifferentiationError, match=r"\.py:6 in forward mode.*data race"):
        ado.jvp(module.racy, "x")(x, np.zeros(2), np.ones(16), np.zeros(2), grid=16)
    gx = np.zeros(16)
    ado.vjp(module.alike, "x")(x, np.zeros(2), gx, np.array([1.0, 3.0]), grid=16)
    want = np.zeros(16)
    want[:2] = 2 * np.cos(x[:2]) * np.array([1.0, 3.0])
    np.testing.assert_allclose(gx, want, rtol=1e-15)
