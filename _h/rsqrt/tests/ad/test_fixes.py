"""Focused regression tests for engine bugs the kernel table found (one per fix)."""
import numpy as np

import adoffload as ado
from adoffload import In, InOut, Out, f64

from .check_grads import check_grads, run_jvp, run_vjp


@ado.kernel
def _energy(x: In[f64], e: InOut[f64]):
    i = ado.tid()
    ado.atomic_add(e, 0, x[i] * x[i])


def test_vector_mode_through_atomic_add_only_output():
    """forward.pointer_element_type looked at loads/stores/GEPs only: an array touched only by
    atomicrmw had no element type and vector mode refused it."""
    x = np.array([0.5, -1.0, 2.0])
    tangents = np.array([[1.0, 0, 0], [0, 1.0, 0], [1.0, 1.0, 1.0], [0, 0, 0]])
    _, shadows = run_jvp(_energy, dict(x=x, e=np.zeros(1)), {"x": tangents}, ["x"], 3, width=4)
    np.testing.assert_allclose(shadows["d_e"][:, 0], tangents @ (2 * x))


@ado.kernel
def _local_prefix(x: In[f64, 2], y: Out[f64]):
    i = ado.tid()
    t = ado.zeros(3, ado.f64)
    for k in range(3):
        t[k] = x[i, k] * x[i, k]
    for k in range(1, 3):
        t[k] += t[k - 1] * 0.5
    y[i] = t[2] * t[0]


def _fd_jvp(kernel, values, name, tangent, h=1e-6):
    up, down = dict(values), dict(values)
    up[name], down[name] = values[name] + h * tangent, values[name] - h * tangent
    outs = []
    for v in (up, down):
        v = {k: (a.copy() if isinstance(a, np.ndarray) else a) for k, a in v.items()}
        kernel(**v, grid=len(values["y"]))
        outs.append(v["y"])
    return (outs[0] - outs[1]) / (2 * h)


def test_forward_through_a_local_array_holding_active_values():
    """forward.visit_pointer refused the shadow of an alloca ('cannot derive a shadow pointer
    through alloca'); a local array of active values needs a private zeroed shadow array."""
    rng = np.random.default_rng(0)
    values = dict(x=rng.uniform(-1, 1, (4, 3)), y=np.zeros(4))
    v = rng.standard_normal((4, 3))
    _, shadows = run_jvp(_local_prefix, values, {"x": v}, ["x"], 4)
    np.testing.assert_allclose(shadows["d_y"], _fd_jvp(_local_prefix, values, "x", v), rtol=1e-6)


def test_reverse_through_a_local_array_holding_active_values():
    """reverse refused the memset that zero-fills ``ado.zeros`` once the array held active values
    ('memset on differentiated memory is not supported yet'); its reverse zeroes the shadow."""
    rng = np.random.default_rng(1)
    check_grads(_local_prefix, dict(x=rng.uniform(-1, 1, (4, 3)), y=np.zeros(4)), ["x"], 4)


def _scaled_vjp(x, dy):
    return 2.0 * dy


@ado.func(vjp=_scaled_vjp)
def _identity_with_doubled_gradient(x):
    return x


def _sincos_jvp(x, s, dx, ds):
    return s * ado.cos(x) * dx + ado.sin(x) * ds, -s * ado.sin(x) * dx + ado.cos(x) * ds


@ado.func(jvp=_sincos_jvp)
def _scaled_sincos(x, s):
    return s * ado.sin(x), s * ado.cos(x)


@ado.kernel
def _uses_custom(x: In[f64], s: f64, y: Out[f64], z: Out[f64]):
    i = ado.tid()
    a, b = _scaled_sincos(x[i], s)
    y[i] = a * b
    z[i] = _identity_with_doubled_gradient(x[i])


def test_reverse_mode_calls_custom_derivatives():
    """reverse ignored @ado.func(jvp=, vjp=) helpers ('no derivative rule for call @helper'); it
    now calls the vjp (tuple results through extractvalue adjoints), or the jvp once per argument."""
    x = np.array([0.3, -0.8, 1.1])
    _, shadows = run_vjp(_uses_custom, dict(x=x, s=1.5, y=np.zeros(3), z=np.zeros(3)),
                         {"y": np.zeros(3), "z": np.ones(3)}, ["x", "s"], 3)
    np.testing.assert_array_equal(shadows["d_x"], 2.0)          # the user's (deliberately doubled) vjp
    _, shadows = run_vjp(_uses_custom, dict(x=x, s=1.5, y=np.zeros(3), z=np.zeros(3)),
                         {"y": np.ones(3), "z": np.zeros(3)}, ["x", "s"], 3)
    # y = s^2 sin x cos x = s^2 sin(2x) / 2
    np.testing.assert_allclose(shadows["d_x"], 1.5 ** 2 * np.cos(2 * x), rtol=1e-12)
    np.testing.assert_allclose(shadows["d_s"], [np.sum(1.5 * np.sin(2 * x))], rtol=1e-12)


@ado.kernel
def _ignores_y(x: In[f64], y: In[f64], out: Out[f64]):
    i = ado.tid()
    out[i] = x[i] * x[i]


def test_vector_mode_with_an_unused_differentiated_array():
    """forward.pointer_element_type refused a wrt array the kernel never reads ('found none')."""
    x = np.array([0.5, -1.5])
    _, shadows = run_jvp(_ignores_y, dict(x=x, y=np.zeros(2), out=np.zeros(2)),
                         {"x": np.array([[1.0, 0.0], [0.0, 1.0]]), "y": np.ones((2, 2))}, ["x", "y"], 2, width=2)
    np.testing.assert_allclose(shadows["d_out"], np.diag(2 * x))
