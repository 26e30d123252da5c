"""Kernels of the transformation probe (test_transform_probe.py), each with a jax.numpy reference."""
import jax
import jax.numpy as jnp

import adoffload as ado


@ado.kernel
def blend(a: ado.f64, x: ado.In[ado.f64], y: ado.In[ado.f64], u: ado.Out[ado.f64], v: ado.Out[ado.f64]):
    """Two In arrays, a scalar, two Out arrays."""
    i = ado.tid()
    u[i] = ado.sin(a * x[i]) * y[i]
    v[i] = x[i] * y[i] * y[i] + a


def blend_ref(a, x, y):
    return jnp.sin(a * x) * y, x * y * y + a


@ado.kernel
def gather_scale(w: ado.f64, x: ado.In[ado.f64], idx: ado.In[ado.i32], out: ado.Out[ado.f64]):
    """A gather through an int index array."""
    i = ado.tid()
    out[i] = w * x[idx[i]] * x[idx[i]]


def gather_scale_ref(w, x, idx):
    return w * jnp.asarray(x)[idx] ** 2


@ado.kernel
def scatter_add(x: ado.In[ado.f64], idx: ado.In[ado.i32], acc: ado.Out[ado.f64]):
    """A scatter by atomics (a histogram-like reduction)."""
    i = ado.tid()
    ado.atomic_add(acc, idx[i], x[i] * x[i])


def scatter_add_ref(x, idx, m):
    return jnp.zeros(m, x.dtype).at[idx].add(x * x)


@ado.kernel
def total(x: ado.In[ado.f64], y: ado.In[ado.f64], e: ado.Out[ado.f64]):
    """A reduction to one element by atomics."""
    i = ado.tid()
    ado.atomic_add(e, 0, x[i] * ado.exp(y[i]))


def total_ref(x, y):
    return jnp.sum(x * jnp.exp(y))[None]


@ado.kernel
def matvec(a: ado.In[ado.f64, 2], x: ado.In[ado.f64], y: ado.Out[ado.f64]):
    """A 2-D input and a loop."""
    i = ado.tid()
    s = 0.0
    for j in range(x.shape[0]):
        s = s + a[i, j] * x[j]
    y[i] = s * s


def matvec_ref(a, x):
    return (a @ x) ** 2


@ado.kernel
def grid2(x: ado.In[ado.f64, 2], b: ado.In[ado.f64], out: ado.Out[ado.f64, 2]):
    i, j = ado.tid()
    out[i, j] = x[i, j] * x[i, j] * b[j] + ado.cos(b[j])


def grid2_ref(x, b):
    return x * x * b[None, :] + jnp.cos(b)[None, :]


@ado.kernel
def grid3(x: ado.In[ado.f64, 3], c: ado.f64, out: ado.Out[ado.f64, 3]):
    i, j, k = ado.tid()
    out[i, j, k] = ado.exp(c * x[i, j, k]) + ado.f64(i - j + k)


def grid3_ref(x, c):
    i, j, k = jnp.meshgrid(*(jnp.arange(n) for n in x.shape), indexing="ij")
    return jnp.exp(c * x) + (i - j + k)


@ado.kernel
def blend32(a: ado.f32, x: ado.In[ado.f32], y: ado.In[ado.f32], u: ado.Out[ado.f32]):
    i = ado.tid()
    u[i] = a * x[i] * x[i] + ado.sin(y[i])


def blend32_ref(a, x, y):
    return a * x * x + jnp.sin(y)


@ado.kernel
def accumulate(x: ado.In[ado.f64], s: ado.InOut[ado.f64]):
    """An InOut array updated in place."""
    i = ado.tid()
    s[i] = s[i] * x[i] + x[i] * x[i]


def accumulate_ref(x, s):
    return s * x + x * x


@ado.kernel
def reverse_add(x: ado.In[ado.f64], s: ado.InOut[ado.f64]):
    """Reads another thread's element of x: wrong if x and s shared one buffer."""
    i = ado.tid()
    s[i] = s[i] + 2.0 * x[x.shape[0] - 1 - i]


def reverse_add_ref(x, s):
    return s + 2.0 * x[::-1]


@ado.kernel
def reverse(x: ado.In[ado.f64], out: ado.Out[ado.f64]):
    i = ado.tid()
    out[i] = 3.0 * x[x.shape[0] - 1 - i]


@ado.kernel
def count_pos(x: ado.In[ado.f64], n: ado.i32, out: ado.Out[ado.f64], flags: ado.Out[ado.i32]):
    """A float and an int output, an int scalar."""
    i = ado.tid()
    out[i] = x[i] * x[i] * ado.f64(n)
    flags[i] = ado.i32(1) if x[i] > 0.0 else ado.i32(0)


def count_pos_ref(x, n):
    return x * x * n, (x > 0).astype(jnp.int32)


@ado.kernel
def index_mix(x: ado.In[ado.f64, 2], c: ado.f64, out: ado.Out[ado.f64, 2]):
    """Uses the thread ids' values (a batch axis folded into them would show)."""
    i, j = ado.tid()
    out[i, j] = c * x[i, j] * x[i, j] + ado.f64(10 * i + j)


def index_mix_ref(x, c):
    i, j = jnp.meshgrid(*(jnp.arange(n) for n in x.shape), indexing="ij")
    return c * x * x + (10 * i + j)


@ado.kernel
def ragged_power(x: ado.In[ado.f64], counts: ado.In[ado.i32], out: ado.Out[ado.f64]):
    """A data-dependent trip count with a carried product: its adjoint needs a dynamic tape."""
    i = ado.tid()
    p = 1.0
    for k in range(counts[i]):
        p = ado.sin(p * x[i]) + x[i]
    out[i] = p


def ragged_power_ref(x, counts, most=6):
    """``most``: a bound on the counts (reverse mode needs a static trip count)."""
    def one(xi, n):
        return jax.lax.fori_loop(0, most, lambda k, p: jnp.where(k < n, jnp.sin(p * xi) + xi, p), jnp.ones_like(xi))
    return jax.vmap(one)(x, counts)
