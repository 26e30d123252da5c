"""Reverse over reverse through a neighbor loop with bounds checks (a loop with several exits).

The adjoint of such a loop must stay a reducible CFG so that it can be differentiated again;
threads that record a bounds failure therefore return without a reverse sweep.
"""
import numpy as np
import pytest

from adoffload.errors import ArgumentError, DifferentiationError

import adoffload as ado
from adoffload.chemistry import kernels


def _system():
    rng = np.random.default_rng(4)
    grid = np.stack(np.meshgrid(*[np.arange(2.0)] * 3, indexing="ij"), -1).reshape(-1, 3)
    pos = grid * 1.15 + rng.normal(0.0, 0.03, grid.shape)
    n = len(pos)
    neighbors = np.array([[j for j in range(n) if j != i] for i in range(n)], dtype=np.int64)
    return pos, np.full(3, 20.0), neighbors


def _dE_dsigma(first, sigma, pos, box, neighbors):
    n = len(pos)
    d_sigma = np.zeros(1)
    first(pos, box, neighbors, sigma, 1.0, 2.5, np.zeros(n), d_sigma, np.ones(n), grid=n)
    return d_sigma[0]


def test_second_derivative_of_the_energy_in_sigma_matches_finite_differences():
    pos, box, neighbors = _system()
    n, sigma, h = len(pos), 1.0, 1e-5
    first = ado.vjp(kernels.lj_energy, ["sigma"])
    second = ado.vjp(first, ["sigma"])
    names = [p.name for p in second.signature.visible_params]
    values = dict(pos=pos, box=box, neighbors=neighbors, sigma=sigma, epsilon=1.0, cutoff=2.5, e=np.zeros(n),
                  d_sigma=np.zeros(1), d_e=np.ones(n))
    shadows = {name: np.zeros(1) if name.endswith("sigma") else np.zeros(n) for name in names[len(values):]}
    seed = next(name for name in shadows if name.startswith("d_d_sigma"))
    shadows[seed][:] = 1.0                     # d(output d_sigma) = 1: differentiate dE/dsigma
    second(*[values.get(name, shadows.get(name)) for name in names], grid=n)
    result = next(v for name, v in shadows.items() if name.startswith("d2_sigma"))[0]
    expected = (_dE_dsigma(first, sigma + h, pos, box, neighbors)
                - _dE_dsigma(first, sigma - h, pos, box, neighbors)) / (2 * h)
    assert abs(expected) > 1.0                  # a real curvature, not 0 == 0
    np.testing.assert_allclose(result, expected, rtol=1e-5)


def test_reverse_over_reverse_recomputes_read_only_loads_instead_of_taping_them():
    # The first adjoint adds d_sigma/d_epsilon through the uniform-address intrinsic (a call
    # with a pointer operand). Differentiating it again must treat that call as a write to
    # d_sigma/d_epsilon only, so positions and the box stay read-only and are reloaded in the
    # reverse sweep; the first adjoint's branch dispatch is re-decided, not recorded. Per
    # neighbor the tape then holds one adjoint (8 bytes), not the ~200 bytes of every loaded
    # coordinate and distance.
    pos, box, neighbors = _system()
    n = len(pos)
    first = ado.vjp(kernels.lj_energy, ["pos", "sigma", "epsilon"])
    second = ado.vjp(first, ["pos", "sigma", "epsilon"])
    counter = second.count_kernel
    assert counter is not None
    values = dict(pos=pos, box=box, neighbors=neighbors, sigma=1.0, epsilon=1.0, cutoff=2.5, e=np.zeros(n),
                  d_pos=np.zeros_like(pos), d_sigma=np.zeros(1), d_epsilon=np.zeros(1), d_e=np.ones(n))
    counts = np.zeros(n, np.int64)
    counter(*[values[p.name] for p in counter.signature.params[:-1]], counts, grid=n)
    per_neighbor = counts / neighbors.shape[1]
    assert per_neighbor.max() <= 8, per_neighbor


@ado.kernel
def _neighbors_until_padding(pos: ado.In[ado.f64], nbr: ado.In[ado.i64, 2], e: ado.Out[ado.f64]):
    i = ado.tid()
    acc = 0.0
    for k in range(nbr.shape[1]):
        j = nbr[i, k]
        if j < 0:
            break                        # padded neighbor slots end the loop on a data-dependent test
        d = pos[i] - pos[j]
        acc += d * d * d * d + ado.sin(pos[j]) * pos[i]
    e[i] = acc


def test_reverse_over_reverse_of_a_loop_left_by_break_matches_finite_differences():
    """The first adjoint's loop is entered in reverse from both exits (break and the end of the
    range); each reverse loop has one head, so the adjoint stays reducible and differentiable."""
    rng = np.random.default_rng(5)
    n = 6
    pos = rng.standard_normal(n)
    nbr = np.full((n, 4), -1, np.int64)
    for i in range(n):
        others = [j for j in range(n) if j != i][: 1 + i % 4]
        nbr[i, :len(others)] = others
    first = ado.vjp(_neighbors_until_padding, ["pos"])
    second = ado.vjp(first, ["pos"])

    def gradient(p):
        d_pos = np.zeros(n)
        first(p, nbr, np.zeros(n), d_pos, np.ones(n), grid=n)
        return d_pos

    v = rng.standard_normal(n)
    names = [p.name for p in second.signature.visible_params]
    values = dict(pos=pos, nbr=nbr, e=np.zeros(n), d_pos=np.zeros(n), d_e=np.ones(n))
    shadows = {name: np.zeros(n) for name in names[len(values):]}
    seed = next(name for name in shadows if name.startswith("d_d_pos"))
    shadows[seed][:] = v                     # H v = d/dpos <grad, v>
    second(*[values.get(name, shadows.get(name)) for name in names], grid=n)
    hv = next(s for name, s in shadows.items() if name.startswith("d2_pos"))
    h = 1e-6
    expected = (gradient(pos + h * v) - gradient(pos - h * v)) / (2 * h)
    assert np.abs(expected).max() > 1.0
    np.testing.assert_allclose(hv, expected, rtol=1e-6, atol=1e-7)


@ado.kernel
def _bounce(x: ado.In[ado.f64], count: ado.In[ado.i64], y: ado.Out[ado.f64]):
    i = ado.tid()
    z = x[i]
    k = 0
    while k < count[i]:             # a data-dependent loop: its iterates go on a dynamic tape
        if z > 1.0:
            z = z * 0.5
        else:
            z = z * 3.0
        k += 1
    y[i] = z * z * x[i]


def _bounce_gradient(first, x, count):
    n = len(x)
    d_x = np.zeros(n)
    first(x, count, np.zeros(n), d_x, np.ones(n), grid=n)
    return d_x


def _second_order_values(kernel, v, x, count):
    """Run a second derivative of ``_bounce``'s adjoint with direction ``v`` on x; return the
    shadow of d_x it computes (H v in both modes: the Hessian of sum(y) is symmetric)."""
    n = len(x)
    names = [p.name for p in kernel.signature.visible_params]
    values = dict(x=x, count=count, y=np.zeros(n), d_x=np.zeros(n), d_y=np.ones(n))
    shadows = {name: np.zeros(n) for name in names[len(values):]}
    if kernel.mode == "vjp":
        shadows["d_d_x"][:] = v                  # seed of the first adjoint's output d_x
        kernel(*[values.get(k, shadows.get(k)) for k in names], grid=n)
        return shadows["d2_x"]
    shadows["d2_x"][:] = v                       # tangent of x
    kernel(*[values.get(k, shadows.get(k)) for k in names], grid=n)
    return shadows["d_d_x"]


def test_second_derivatives_through_a_dynamic_tape_follow_its_shadow():
    """The first adjoint keeps z's iterates on its dynamic tape; a second derivative follows them
    through a shadow tape laid out like it. Reverse over reverse (with a second-level tape of its
    own) and forward over reverse agree with central differences of the first adjoint."""
    first = ado.vjp(_bounce, ["x"])
    assert first.tape is not None
    rng = np.random.default_rng(11)
    n = 9
    x, count = rng.uniform(0.2, 2.5, n), rng.integers(0, 7, n)
    v = rng.standard_normal(n)
    h = 1e-6
    expected = (_bounce_gradient(first, x + h * v, count) - _bounce_gradient(first, x - h * v, count)) / (2 * h)
    assert np.abs(expected).max() > 1.0
    reverse = ado.vjp(first, ["x"])
    assert reverse.tape is not None                  # its own (second-level) dynamic tape
    forward = ado.jvp(first, ["x"])
    for second in (reverse, forward):
        np.testing.assert_allclose(_second_order_values(second, v, x, count), expected, rtol=1e-6, atol=1e-8)


def test_a_third_derivative_through_two_levels_of_tapes_is_refused_with_the_reason():
    second = ado.vjp(ado.vjp(_bounce, ["x"]), ["x"])
    with pytest.raises(ArgumentError, match="two levels of dynamic tapes"):
        ado.vjp(second, ["x"])
    with pytest.raises(ArgumentError, match="vector forward mode"):
        ado.jvp(ado.vjp(_bounce, ["x"]), ["x"], width=2)


def test_jax_grad_of_grad_through_a_dynamic_tape_matches_the_numpy_second_adjoint():
    jax = pytest.importorskip("jax")
    previous = jax.config.jax_enable_x64
    jax.config.update("jax_enable_x64", True)
    try:
        f = ado.jax_kernel(_bounce)
        x, c = np.array([0.3, 0.7, 1.1, 2.2]), np.array([3, 5, 2, 4])
        loss = lambda x: f(x, c).sum()
        first = ado.vjp(_bounce, ["x"])
        np.testing.assert_allclose(jax.grad(loss)(x), _bounce_gradient(first, x, c), rtol=1e-12)
        v = np.array([1.0, -2.0, 0.5, 3.0])
        hv = jax.grad(lambda x: jax.grad(loss)(x) @ v)(x)
        np.testing.assert_allclose(hv, _second_order_values(ado.vjp(first, ["x"]), v, x, c), rtol=1e-12)
        np.testing.assert_allclose(jax.jvp(jax.grad(loss), (x,), (v,))[1], hv, rtol=1e-12)
    finally:
        jax.config.update("jax_enable_x64", previous)
