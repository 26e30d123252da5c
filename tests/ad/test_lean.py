"""Lean derivative kernels (``primal_outputs=False``, enzyme/lean.py): which params change intent,
and that their derivatives are those of the full kernels (finite differences, <Jv, w> = <v, Jᵀw>,
and equality with ``ado.jvp``/``ado.vjp``), including the cases the lean rules must refuse."""
from __future__ import annotations

import numpy as np
import pytest

import adoffload as ado
from adoffload.language.types import In, InOut, Out, f64

N = 16


@ado.kernel
def two_branches(a: In[f64], b: In[f64], x1: Out[f64], x2: Out[f64]):
    """basic_if_quad's shape: each output stored once per thread, in one of two exclusive branches."""
    i = ado.tid()
    s = b[i] * b[i] - a[i]
    if s >= 0.0:
        x1[i] = ado.sqrt(s) * a[i]
        x2[i] = s / a[i]
    else:
        x1[i] = 0.0
        x2[i] = a[i] * b[i]


@ado.kernel
def stored_twice(a: In[f64], x: Out[f64]):
    """The second store overwrites the first: the first one's adjoint must see a cleared seed."""
    i = ado.tid()
    x[i] = 3.0 * a[i]
    if a[i] > 0.0:
        x[i] = a[i] * a[i]


@ado.kernel
def reads_back(a: In[f64], x: Out[f64], y: Out[f64]):
    """``x`` is read after it may be stored (else it holds its initial zero): its stores must stay."""
    i = ado.tid()
    if a[i] > 0.8:
        x[i] = a[i] * a[i]
    y[i] = ado.sin(x[i]) + a[i]


@ado.kernel
def stored_in_loop(a: In[f64], x: Out[f64]):
    """One store instruction, run several times per thread: the clearing stays."""
    i = ado.tid()
    for k in range(3):
        x[i] = a[i] * float(k + 1)


@ado.kernel
def shared_slot(a: In[f64], x: Out[f64], y: InOut[f64]):
    """``x[(3 i) % 16]`` is a permutation, but the race analysis cannot prove it injective, so the
    clearing stays; ``y`` is a write-only InOut: its seed is its input's gradient, cleared."""
    i = ado.tid()
    x[(3 * i) % 16] = a[i] * 2.0
    y[i] = a[i] * a[i]


@ado.kernel
def reduced(a: In[f64], total: InOut[f64], x: Out[f64]):
    """``total`` is only updated by an atomic add: the tangent call skips it, and its seed is the
    gradient of its input unchanged, so the lean adjoint only reads ``d_total``."""
    i = ado.tid()
    ado.atomic_add(total, 0, a[i] * a[i])
    x[i] = ado.exp(a[i])


@ado.kernel
def accumulate(a: In[f64], y: InOut[f64]):
    """``y`` is read, then written, at the thread's own element: the store is never observed."""
    i = ado.tid()
    y[i] += a[i] * a[i]


@ado.kernel
def accumulate_twice(a: In[f64], y: InOut[f64]):
    """The second iteration reads what the first stored: the stores stay."""
    i = ado.tid()
    for k in range(2):
        y[i] = y[i] * a[i] + 1.0


@ado.kernel
def halves(a: In[f64], x: Out[f64]):
    """One load per thread, but threads 2j and 2j+1 read one element: ``d_a`` stays accumulated."""
    i = ado.tid()
    x[i] = ado.sin(a[i // 2])


@ado.kernel
def reloaded(a: In[f64], x: Out[f64], y: Out[f64]):
    """``a[i]`` is loaded again after the store to ``x`` (arrays might overlap, as far as the IR
    knows): two updates of ``d_a[i]`` in a row, the first (of the reverse sweep) written."""
    i = ado.tid()
    x[i] = a[i] * a[i]
    y[i] = ado.cos(a[i])


def _inputs(kernel, rng) -> dict:
    values = {}
    for p in kernel.signature.params:
        values[p.name] = rng.uniform(0.3, 1.3, N) * rng.choice([-1.0, 1.0], N) if p.name == "b" else \
            rng.uniform(0.3, 1.3, N) if p.type.intent != "out" else np.zeros(N)
    return values


def _outputs(kernel) -> list[str]:
    return [p.name for p in kernel.signature.params if p.is_array and p.type.writes]


def _run(kernel, values: dict) -> dict:
    values = {k: v.copy() for k, v in values.items()}
    kernel(**values, grid=N)
    return values


def _tangents(kernel, lean: bool, values: dict, v: dict) -> dict:
    fwd = ado.jvp(kernel, list(v), primal_outputs=not lean)
    args = {**values, **{f"d_{n}": t for n, t in v.items()},
            **{f"d_{n}": np.zeros(N) for n in _outputs(kernel) if n not in v}}
    return _run(fwd, args)


def _adjoints(kernel, lean: bool, values: dict, w: dict, wrt) -> dict:
    rev = ado.vjp(kernel, list(wrt), primal_outputs=not lean)
    args = {**values, **{f"d_{n}": w[n].copy() for n in _outputs(kernel)},
            **{f"d_{n}": np.zeros(N) for n in wrt if n not in w}}
    return _run(rev, args)


def _intents(kernel) -> dict:
    return {p.name: p.type.intent for p in kernel.signature.params if p.is_array}


EXPECTED = {   # kernel -> (lean jvp intents that change, lean vjp intents that change)
    "two_branches": ({"x1": "in", "x2": "in"}, {"x1": "in", "x2": "in", "d_x1": "in", "d_x2": "in", "d_a": "inout"}),
    "stored_twice": ({"x": "in"}, {"x": "in", "d_x": "inout"}),
    "reads_back": ({"x": "out", "y": "in"}, {"x": "out", "d_x": "inout", "y": "in", "d_y": "in"}),
    "stored_in_loop": ({"x": "in"}, {"x": "in", "d_x": "inout"}),
    "shared_slot": ({"x": "in", "y": "in"}, {"x": "in", "d_x": "inout", "y": "in", "d_y": "inout"}),
    "reduced": ({"total": "in", "x": "in", "d_total": "inout"},
                {"total": "in", "d_total": "in", "x": "in", "d_x": "in"}),
    "accumulate": ({"y": "in", "d_y": "inout"}, {"y": "in", "d_y": "inout", "d_a": "out"}),
    "accumulate_twice": ({"y": "inout", "d_y": "inout"}, {"y": "inout", "d_y": "inout", "d_a": "inout"}),
    "halves": ({"x": "in"}, {"x": "in", "d_x": "in", "d_a": "inout"}),
    "reloaded": ({"x": "in", "y": "in"}, {"x": "in", "y": "in", "d_x": "in", "d_y": "in", "d_a": "out"}),
}
KERNELS = [two_branches, stored_twice, reads_back, stored_in_loop, shared_slot, reduced, accumulate, accumulate_twice,
           halves, reloaded]


@pytest.mark.parametrize("kernel", KERNELS, ids=lambda k: k.name)
def test_lean_signatures(kernel):
    jvp_changes, vjp_changes = EXPECTED[kernel.name]
    assert {n: _intents(ado.jvp(kernel, ["a"], primal_outputs=False))[n] for n in jvp_changes} == jvp_changes
    lean_vjp = ado.vjp(kernel, ["a"], primal_outputs=False)
    assert {n: _intents(lean_vjp)[n] for n in vjp_changes} == vjp_changes
    assert lean_vjp.seed_params == {n for n, intent in vjp_changes.items() if n.startswith("d_") and intent == "inout"
                                    and _intents(kernel)[n[2:]] == "out"}
    jvp_names = {p.name for p in ado.jvp(kernel, ["a"], primal_outputs=False).signature.params}
    assert {n for n in jvp_changes} <= jvp_names


@pytest.mark.parametrize("kernel", KERNELS, ids=lambda k: k.name)
def test_lean_derivatives_are_the_full_ones(kernel):
    rng = np.random.default_rng(7)
    values = _inputs(kernel, rng)
    wrt = [p.name for p in kernel.signature.params if p.is_array and p.type.reads]
    outputs = _outputs(kernel)
    v = {n: rng.standard_normal(N) for n in wrt}
    w = {n: rng.standard_normal(N) for n in outputs}

    lean_t, full_t = _tangents(kernel, True, values, v), _tangents(kernel, False, values, v)
    h = 1e-6
    up = _run(kernel, {**values, **{n: values[n] + h * v[n] for n in wrt}})
    down = _run(kernel, {**values, **{n: values[n] - h * v[n] for n in wrt}})
    for n in outputs:
        np.testing.assert_array_equal(lean_t[f"d_{n}"], full_t[f"d_{n}"], err_msg=f"{kernel.name}: d_{n}")
        np.testing.assert_allclose(lean_t[f"d_{n}"], (up[n] - down[n]) / (2 * h), rtol=1e-6, atol=1e-7,
                                   err_msg=f"{kernel.name}: lean JVP of {n} vs finite differences")

    lean_a, full_a = _adjoints(kernel, True, values, w, wrt), _adjoints(kernel, False, values, w, wrt)
    lhs = sum(float(lean_t[f"d_{n}"] @ w[n]) for n in outputs)
    # an InOut's seed is its output's cotangent, and after the call its input's gradient
    rhs = sum(float(v[n] @ lean_a[f"d_{n}"]) for n in wrt)
    assert abs(lhs - rhs) <= 1e-10 * (abs(lhs) + 1.0), f"{kernel.name}: <Jv, w> = {lhs} but <v, J^T w> = {rhs}"
    for n in wrt:
        np.testing.assert_allclose(lean_a[f"d_{n}"], full_a[f"d_{n}"], rtol=1e-13, atol=1e-15,
                                   err_msg=f"{kernel.name}: lean adjoint d_{n}")


def test_lean_kernels_do_not_touch_dropped_outputs_and_keep_read_only_seeds():
    rng = np.random.default_rng(3)
    values = _inputs(two_branches, rng)
    marker = np.full(N, 123.0)
    fwd = ado.jvp(two_branches, ["a", "b"], primal_outputs=False)
    out = _run(fwd, {**values, "x1": marker, "x2": marker, "d_a": np.ones(N), "d_b": np.ones(N),
                     "d_x1": np.zeros(N), "d_x2": np.zeros(N)})
    np.testing.assert_array_equal(out["x1"], marker)
    rev = ado.vjp(two_branches, ["a", "b"], primal_outputs=False)
    seed = rng.standard_normal(N)
    out = _run(rev, {**values, "x1": marker, "x2": marker, "d_a": np.zeros(N), "d_b": np.zeros(N),
                     "d_x1": seed, "d_x2": seed})
    np.testing.assert_array_equal(out["d_x1"], seed)


def test_jax_rules_use_the_lean_kernels():
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp

    from adoffload.jax.rules import _derivative
    assert _derivative("jvp", two_branches, ["a"]) is ado.jvp(two_branches, ["a"], primal_outputs=False)
    f = ado.jax_kernel(two_branches, grid=N)
    rng = np.random.default_rng(5)
    a, b = rng.uniform(0.3, 1.3, N), rng.uniform(-1.3, 1.3, N)

    def loss(a, b):
        x1, x2 = f(a, b)
        return jnp.sum(x1 * jnp.cos(x2))

    ga, gb = jax.grad(loss, argnums=(0, 1))(a, b)
    eps = 1e-6
    e = np.zeros(N)
    e[3] = eps
    np.testing.assert_allclose(ga[3], (loss(a + e, b) - loss(a - e, b)) / (2 * eps), rtol=1e-6)
    np.testing.assert_allclose(gb[3], (loss(a, b + e) - loss(a, b - e)) / (2 * eps), rtol=1e-6)
    _, tangent = jax.jvp(loss, (a, b), (np.ones(N), np.zeros(N)))
    np.testing.assert_allclose(tangent, float(ga @ np.ones(N)), rtol=1e-10)


def test_a_vjp_whose_primal_output_is_unused_does_not_run_the_primal_kernel():
    """The lean tangent call gets zeros for the outputs it skips, not the primal call's outputs, so
    a jitted VJP with a given cotangent compiles to the reverse kernel alone (as XLA's own VJP of a
    linear map skips its forward product); returning the primal output keeps the primal call."""
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    import re

    f = ado.jax_kernel(two_branches, grid=N)
    rng = np.random.default_rng(6)
    a, b = rng.uniform(0.3, 1.3, N), rng.uniform(-1.3, 1.3, N)
    w1, w2 = rng.standard_normal(N), rng.standard_normal(N)

    def targets(fn, *args):
        return re.findall(r'custom_call_target="adoffload_([a-z0-9_$]+?)_\d+"', jax.jit(fn).lower(*args).compile().as_text())

    gradient_only = lambda a, b, w1, w2: jax.vjp(f, a, b)[1]((w1, w2))
    with_outputs = lambda a, b, w1, w2: (jax.vjp(f, a, b)[0], jax.vjp(f, a, b)[1]((w1, w2)))
    assert targets(gradient_only, a, b, w1, w2) == ["two_branches_vjp"]
    assert sorted(targets(with_outputs, a, b, w1, w2)) == ["two_branches", "two_branches_vjp"]
    ga, gb = jax.jit(gradient_only)(a, b, w1, w2)
    full = ado.vjp(two_branches, ["a", "b"])
    args = {"a": a, "b": b, "x1": np.zeros(N), "x2": np.zeros(N), "d_a": np.zeros(N), "d_b": np.zeros(N),
            "d_x1": w1.copy(), "d_x2": w2.copy()}
    full(**args, grid=N)
    np.testing.assert_allclose(ga, args["d_a"], rtol=1e-13, atol=1e-15)
    np.testing.assert_allclose(gb, args["d_b"], rtol=1e-13, atol=1e-15)


@ado.kernel
def pair_sum(x: In[f64], w: In[f64], e: Out[f64]):
    """Each thread loops over all others: the reverse kernel in ``x`` adds into ``d_x[j]`` at an
    address the same in every thread of an iteration (a thread-uniform add, uniform_fadd)."""
    i = ado.tid()
    acc = 0.0
    for j in range(x.shape[0]):
        if j != i:
            d = x[j] - x[i]
            acc = acc + w[0] * ado.exp(-d * d)
    e[i] = acc


def test_the_adjoint_of_a_reverse_kernel_does_not_redo_its_gradient():
    """A second derivative (the adjoint of the reverse kernel in ``x``, taken in ``w``: what a JAX
    loss on forces differentiates) leaves the first gradient ``d_x`` alone: its thread-uniform adds
    are dropped (``d_x`` becomes In), and ``d_w`` is the full kernel's and central differences'."""
    first = ado.vjp(pair_sum, ["x"], primal_outputs=False)
    assert "adoffload.uniform_fadd" in first.module_text()          # else this test tests nothing
    assert _intents(first)["d_x"] == "inout"
    lean, full = ado.vjp(first, ["w"], primal_outputs=False), ado.vjp(first, ["w"])
    assert _intents(lean)["d_x"] == "in" and _intents(full)["d_x"] == "inout"
    rng = np.random.default_rng(11)
    x, w = rng.uniform(-1.0, 1.0, N), np.array([0.7])
    seed, v = rng.standard_normal(N), rng.standard_normal(N)     # d_e, and the cotangent of d_x

    def gradient(w):
        out = _run(first, {"x": x, "w": w, "e": np.zeros(N), "d_x": np.zeros(N), "d_e": seed.copy()})
        return out["d_x"]

    marker = np.full(N, 5.0)
    got = {}
    for name, kernel in (("lean", lean), ("full", full)):
        out = _run(kernel, {"x": x, "w": w, "e": np.zeros(N), "d_x": marker, "d_e": seed.copy(),
                            "d_w": np.zeros(1), "d_d_x": v.copy()})
        got[name] = out
    np.testing.assert_array_equal(got["lean"]["d_x"], marker)        # not written
    np.testing.assert_allclose(got["full"]["d_x"], marker + gradient(w), rtol=1e-13)
    np.testing.assert_allclose(got["lean"]["d_w"], got["full"]["d_w"], rtol=1e-13, atol=1e-15)
    h = 1e-6
    expected = (gradient(w + h) @ v - gradient(w - h) @ v) / (2 * h)
    np.testing.assert_allclose(got["lean"]["d_w"][0], expected, rtol=1e-7)
