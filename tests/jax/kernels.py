"""Kernels used by the JAX tests, each with a jax.numpy reference implementation."""
import jax.numpy as jnp

import adoffload as ado


@ado.kernel
def saxpy(a: ado.f64, x: ado.In[ado.f64], y: ado.In[ado.f64], out: ado.Out[ado.f64]):
    i = ado.tid()
    out[i] = a * x[i] + y[i]


def saxpy_ref(a, x, y):
    return a * x + y


@ado.kernel
def wave(a: ado.f64, x: ado.In[ado.f64], y: ado.In[ado.f64], out: ado.Out[ado.f64], sq: ado.Out[ado.f64]):
    i = ado.tid()
    out[i] = ado.sin(x[i]) * y[i] + a * x[i] * x[i]
    sq[i] = ado.exp(a * y[i])


def wave_ref(a, x, y):
    return jnp.sin(x) * y + a * x * x, jnp.exp(a * y)


@ado.kernel
def scale_inplace(a: ado.f64, x: ado.In[ado.f64], y: ado.InOut[ado.f64]):
    i = ado.tid()
    y[i] = y[i] * a + x[i] * x[i]


def scale_inplace_ref(a, x, y):
    return y * a + x * x


@ado.kernel
def rowscale(x: ado.In[ado.f64, 2], w: ado.In[ado.f64], out: ado.Out[ado.f64, 2]):
    i, j = ado.tid()
    out[i, j] = x[i, j] * w[j] * w[j]


def rowscale_ref(x, w):
    return x * w[None, :] ** 2


@ado.kernel
def energy(x: ado.In[ado.f64], e: ado.Out[ado.f64]):
    i = ado.tid()
    ado.atomic_add(e, 0, x[i] * x[i] * x[i])


def energy_ref(x):
    return jnp.sum(x ** 3)[None]


@ado.kernel
def cube3(x: ado.In[ado.f64, 3], out: ado.Out[ado.f64, 3]):
    i, j, k = ado.tid()
    out[i, j, k] = x[i, j, k] * x[i, j, k] + ado.f64(i + 2 * j + 3 * k)


def cube3_ref(x):
    i, j, k = jnp.meshgrid(*(jnp.arange(n) for n in x.shape), indexing="ij")
    return x * x + (i + 2 * j + 3 * k)


@ado.kernel
def shifted(x: ado.In[ado.f64], out: ado.Out[ado.f64]):
    i = ado.tid()
    out[i] = x[i + 1]


@ado.kernel
def saxpy32(a: ado.f32, x: ado.In[ado.f32], y: ado.In[ado.f32], out: ado.Out[ado.f32]):
    i = ado.tid()
    out[i] = a * x[i] + y[i]


@ado.kernel
def outer(x: ado.In[ado.f64], y: ado.In[ado.f64], out: ado.Out[ado.f64, 2]):
    i, j = ado.tid()
    out[i, j] = x[i] * y[j]


@ado.kernel
def gate(x: ado.In[ado.f64], z: ado.InOut[ado.f64], out: ado.Out[ado.f64]):
    """z is only read (a branch condition): its output is its input, its gradient the seed."""
    i = ado.tid()
    out[i] = 2.0 * x[i] if z[i] > 0.0 else x[i]


def gate_ref(x, z):
    return z, jnp.where(z > 0.0, 2.0 * x, x)


@ado.kernel
def tally(x: ado.In[ado.f64], total: ado.InOut[ado.f64]):
    """An InOut updated by atomic adds only."""
    i = ado.tid()
    ado.atomic_add(total, 0, x[i] * x[i])


def tally_ref(x, total):
    return total + jnp.sum(x * x)


@ado.kernel
def clamp_count(n: ado.i32, x: ado.In[ado.f64], out: ado.Out[ado.f64]):
    i = ado.tid()
    out[i] = ado.min(x[i], ado.f64(n))
