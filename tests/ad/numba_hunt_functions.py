"""numba code as numba users write it: the functions of tests/ad/numba_hunt_cases.py's table.

Entries read their pointers through ``carray``/``farray`` views and call ``@njit`` helpers, inlined
by numba (``inline="always"``) or left as calls (the default, and ``inline="never"``). They are plain
Python functions: the table compiles each with its ``@cfunc`` signature when a test first asks.
Some are written the long way on purpose (a max by hand, ``int(math.floor(...))``, ``s == s``): users do.
"""
# ruff: noqa: PLR1730, RUF046, PLR0124
from __future__ import annotations

import math

import numpy as np
from numba import carray, farray, njit

# ----------------------------------------------------------------------------- helpers (@njit)

@njit
def _sq(x):
    return x * x


@njit(inline="always")
def _softplus(x):
    if x > 20.0:
        return x
    return math.log1p(math.exp(x))


@njit(inline="never")
def _sincos(t):
    return math.sin(t), math.cos(t)


@njit
def _dist3(x, i, j):
    return math.sqrt((x[i, 0] - x[j, 0]) ** 2 + (x[i, 1] - x[j, 1]) ** 2 + (x[i, 2] - x[j, 2]) ** 2)


@njit
def _horner(c, t):
    s = 0.0
    for k in range(c.shape[0] - 1, -1, -1):
        s = s * t + c[k]
    return s


@njit(boundscheck=True)
def _checked_sum(x, n):
    s = 0.0
    for i in range(n):
        s += x[i] * x[i]
    return s


# ----------------------------------------------------------------------------- entries

def nb_sum_sq(xp, n):
    x = carray(xp, (n,))
    s = 0.0
    for i in range(n):
        s += _sq(x[i])
    return s


def nb_axpy_inplace(a, xp, yp, n):
    x, y = carray(xp, (n,)), carray(yp, (n,))
    for i in range(n):
        y[i] += a * x[i]


def nb_axpy32(a, xp, yp, n):
    x, y = carray(xp, (n,)), carray(yp, (n,))
    for i in range(n):
        y[i] = a * x[i] + y[i]


def nb_logsumexp(xp, n):
    x = carray(xp, (n,))
    m = x[0]
    for i in range(1, n):
        m = max(m, x[i])
    s = 0.0
    for i in range(n):
        s += math.exp(x[i] - m)
    return m + math.log(s)


def nb_softplus_out(xp, yp, n):
    x, y = carray(xp, (n,)), carray(yp, (n,))
    for i in range(n):
        y[i] = _softplus(x[i])


def nb_math_mix(a, b):
    return (math.exp(a) * math.log(b) + math.sqrt(a * a + b) + math.pow(b, a) + math.sin(a) * math.cos(b)
            + math.tanh(a - b) + math.atan2(a, b) + math.hypot(a, b))


def nb_special(a, b):
    return math.erf(a) + math.lgamma(b) + math.gamma(b) * 0.1 + math.erfc(a * b)


def nb_kinks(a, b):
    return math.fabs(a) * math.floor(b) + math.copysign(a * b, b) + abs(a - b) + min(a, b) * max(a, 2.0 * b)


def nb_clip(xp, yp, n, lo, hi):
    x, y = carray(xp, (n,)), carray(yp, (n,))
    for i in range(n):
        y[i] = min(max(x[i], lo), hi)


def nb_np_sum(xp, n):
    x = carray(xp, (n,))
    return np.sum(x * x) + np.sum(x)


def nb_np_sum_view(xp, n):
    x = carray(xp, (n,))
    return np.sum(x) * x[0]


def nb_np_dot(xp, yp, n):
    x, y = carray(xp, (n,)), carray(yp, (n,))
    return np.dot(x, y)


def nb_np_zeros_scratch(xp, n):
    x = carray(xp, (n,))
    t = np.zeros(n)
    for i in range(n):
        t[i] = x[i] * x[i]
    s = 0.0
    for i in range(n):
        s += t[i] * x[(i + 1) % n]
    return s


def nb_np_empty_int_scratch(xp, n):
    x = carray(xp, (n,))
    order = np.empty(n, np.int64)
    for i in range(n):
        order[i] = n - 1 - i
    s = 0.0
    for i in range(n):
        s += x[order[i]] * (i + 1.0)
    return s


def nb_np_sqrt_array(xp, n):
    x = carray(xp, (n,))
    return np.sum(np.sqrt(x))


def nb_branches(xp, yp, n):
    x, y = carray(xp, (n,)), carray(yp, (n,))
    for i in range(n):
        if x[i] > 0.5:
            y[i] = x[i] * x[i]
        elif x[i] < -0.5:
            y[i] = math.exp(x[i])
        else:
            y[i] = 0.25 + x[i] * 0.5


def nb_early_return(xp, n, limit):
    x = carray(xp, (n,))
    s = 0.0
    for i in range(n):
        s += x[i] * x[i]
        if s > limit:
            return s * 2.0
    return s


def nb_while_newton(xp, yp, n):
    x, y = carray(xp, (n,)), carray(yp, (n,))
    for i in range(n):
        g = x[i]
        while abs(g * g - x[i]) > 1e-12 * x[i]:
            g = 0.5 * (g + x[i] / g)
        y[i] = g


def nb_gather(xp, idxp, yp, n):
    x, idx, y = carray(xp, (n,)), carray(idxp, (n,)), carray(yp, (n,))
    for i in range(n):
        y[i] = x[idx[i]] * x[i]


def nb_scatter_add(xp, idxp, yp, n, m):
    x, idx, y = carray(xp, (n,)), carray(idxp, (n,)), carray(yp, (m,))
    for i in range(n):
        y[idx[i]] += math.sin(x[i])


def nb_norm32(xp, n):
    x = carray(xp, (n,))
    s = np.float32(0.0)
    for i in range(n):
        s += x[i] * x[i]
    return math.sqrt(s)


def nb_softmax32(xp, yp, n):
    x, y = carray(xp, (n,)), carray(yp, (n,))
    m = x[0]
    for i in range(1, n):
        if x[i] > m:
            m = x[i]
    s = np.float32(0.0)
    for i in range(n):
        y[i] = math.exp(x[i] - m)
        s += y[i]
    for i in range(n):
        y[i] /= s


def nb_tuple_helper(tp, n):
    t = carray(tp, (n,))
    sx, sy = 0.0, 0.0
    for i in range(n):
        s, c = _sincos(t[i])
        sx += s * c
        sy += c * c
    return sx * sy


def nb_tuple_index(xp, n):
    coef = (0.5, -1.25, 2.0, 0.75)
    x = carray(xp, (n,))
    s = 0.0
    for i in range(n):
        s += coef[i % 4] * x[i] * x[i]
    return s


def nb_forward_subst(lp, bp, n):
    low, b = carray(lp, (n, n)), carray(bp, (n,))
    for i in range(n):
        for j in range(i):
            b[i] -= low[i, j] * b[j]
        b[i] /= low[i, i]


def nb_triangle_pairs(xp, n):
    x = carray(xp, (n, 3))
    e = 0.0
    for i in range(n):
        for j in range(i + 1, n):
            r = _dist3(x, i, j)
            e += 1.0 / r
    return e


def nb_iir_inplace(xp, n, a):
    x = carray(xp, (n,))
    for i in range(1, n):
        x[i] = x[i] + a * x[i - 1]


def nb_cumprod(xp, yp, n):
    x, y = carray(xp, (n,)), carray(yp, (n,))
    p = 1.0
    for i in range(n):
        p *= x[i]
        y[i] = p


def nb_horner(cp, n, t):
    c = carray(cp, (n,))
    return _horner(c, t)


def nb_matvec(ap, xp, yp, m, n):
    a, x, y = carray(ap, (m, n)), carray(xp, (n,)), carray(yp, (m,))
    for i in range(m):
        s = 0.0
        for j in range(n):
            s += a[i, j] * x[j]
        y[i] = s


def nb_stencil(xp, yp, n, k):
    x, y = carray(xp, (n,)), carray(yp, (n,))
    for i in range(n):
        y[i] = k * (x[i - 1] - 2.0 * x[i] + x[(i + 1) % n])        # x[-1] wraps around, as in numpy


def nb_normalize_inplace(xp, n):
    x = carray(xp, (n,))
    s = 0.0
    for i in range(n):
        s += x[i] * x[i]
    r = 1.0 / math.sqrt(s)
    for i in range(n):
        x[i] *= r


def nb_powers(xp, n, p):
    x = carray(xp, (n,))
    s = 0.0
    for i in range(n):
        s += x[i] ** 3 + x[i] ** p + x[i] ** 0.5 + 2.0 ** x[i]
    return s


def nb_int_power(xp, n, k):
    x = carray(xp, (n,))
    s = 0.0
    for i in range(n):
        s += x[i] ** k
    return s


def nb_sigmoid_stable(xp, yp, n):
    x, y = carray(xp, (n,)), carray(yp, (n,))
    for i in range(n):
        if x[i] >= 0:
            y[i] = 1.0 / (1.0 + math.exp(-x[i]))
        else:
            e = math.exp(x[i])
            y[i] = e / (1.0 + e)


def nb_bin_by_int(xp, yp, n, m):
    x, y = carray(xp, (n,)), carray(yp, (m,))
    for i in range(n):
        k = int(math.floor(x[i] * m)) % m
        y[k] += x[i] * x[i]


def nb_welford(xp, n):
    x = carray(xp, (n,))
    mean, m2 = 0.0, 0.0
    for i in range(n):
        d = x[i] - mean
        mean += d / (i + 1)
        m2 += d * (x[i] - mean)
    return m2 / (n - 1) + mean


def nb_complex(xp, yp, n):
    x, y = carray(xp, (n,)), carray(yp, (n,))
    s = 0.0
    for i in range(n):
        z = complex(x[i], y[i])
        w = z * z + 1j * z
        s += abs(w) + (w / (z + 2.0)).real
    return s


def nb_break(xp, n, stop):
    x = carray(xp, (n,))
    s = 0.0
    i = 0
    while i < n:
        if x[i] > stop:
            break
        s += math.sin(x[i]) * (i + 1)
        i += 1
    return s


def nb_checked_sum(xp, n):
    return _checked_sum(carray(xp, (n,)), n)


def nb_checked_stencil(xp, yp, n):
    x, y = carray(xp, (n,)), carray(yp, (n,))
    for i in range(1, n - 1):
        y[i] = x[i + 1] * x[i - 1] - x[i]


def nb_fast_dot(xp, yp, n):
    x, y = carray(xp, (n,)), carray(yp, (n,))
    s = 0.0
    for i in range(n):
        s += x[i] * y[i]
    return s


def nb_fast_math(xp, yp, n):
    x, y = carray(xp, (n,)), carray(yp, (n,))
    for i in range(n):
        y[i] = math.exp(-x[i] * x[i]) / math.sqrt(1.0 + x[i] * x[i])


def nb_divide(xp, yp, zp, n):
    x, y, z = carray(xp, (n,)), carray(yp, (n,)), carray(zp, (n,))
    for i in range(n):
        z[i] = x[i] / y[i] + x[i] % y[i]


def nb_f32_mixed(xp, n, a):
    x = carray(xp, (n,))
    s = np.float32(0.0)
    for i in range(n):
        s += math.exp(a * x[i]) * 0.5 + math.log(1.0 + x[i] * x[i])
    return s


def nb_2d_rows(ap, m, n):
    a = carray(ap, (m, n))
    tot = 0.0
    for i in range(m):
        r = 0.0
        for j in range(n):
            r += a[i, j] * a[i, j]
        tot += math.sqrt(r) * (i + 1)
    return tot


def nb_reverse_view(xp, yp, n):
    x, y = carray(xp, (n,)), carray(yp, (n,))
    xr = x[::-1]
    for i in range(n):
        y[i] = xr[i] * x[i] + x[n - 1 - i]


def nb_slice_sum(xp, n):
    x = carray(xp, (n,))
    return np.sum(x[1:n - 1] * x[0:n - 2]) + x[n - 1] ** 2


def nb_record_like(pp, n, g):
    p = carray(pp, (n, 4))             # rows (x, y, vx, m): the structs users lay out by hand
    e = 0.0
    for i in range(n):
        e += 0.5 * p[i, 3] * p[i, 2] * p[i, 2] + p[i, 3] * g * p[i, 1]
    return e



def nb_bits_abs(xp, n):
    x = carray(xp, (n,))
    b = x.view(np.uint64)
    for i in range(n):
        b[i] &= np.uint64(0x7FFFFFFFFFFFFFFF)          # |x| by clearing the sign bit, in place


def nb_bits_read(xp, n):
    x = carray(xp, (n,))
    b = x.view(np.int64)
    s = 0.0
    for i in range(n):
        s += x[i] if b[i] >= 0 else -x[i]              # the sign read from the bits
    return s


def nb_bubble_pass(xp, n):
    x = carray(xp, (n,))
    for k in range(n - 1):
        for i in range(n - 1 - k):
            if x[i] > x[i + 1]:
                x[i], x[i + 1] = x[i + 1], x[i]


def nb_iterate(xp, yp, n):
    x, y = carray(xp, (n,)), carray(yp, (n,))
    s = 0.0
    for k, (a, b) in enumerate(zip(x, y)):
        s += a * b * (k + 1)
    for a in x:
        s += math.cos(a)
    return s


def nb_fortran_view(ap, m, n):
    a = farray(ap, (m, n))
    s = 0.0
    for j in range(n):
        for i in range(m):
            s += a[i, j] * (i + 2 * j + 1) * a[i, j]
    return s + a[m - 1, 0] * a[0, n - 1]


def nb_math2(a, b):
    return (math.expm1(a) + math.log2(b) + math.log10(b) + math.asin(a * 0.5) + math.acos(a * 0.3)
            + math.atan(b) + math.sinh(a) + math.cosh(b) + math.asinh(a) + math.acosh(b + 1.0)
            + math.atanh(a * 0.5) + math.tan(a))


def nb_round_trunc(a, b):
    return math.trunc(a) * b + math.ceil(b) * a + round(a * 3.0) * b + a * int(b)


def nb_frexp_ldexp(a, b):
    m, e = math.frexp(a)
    return math.ldexp(m * b, e) + m


def nb_gauss_seidel(xp, n, iters):
    x = carray(xp, (n,))
    for _ in range(iters):
        for i in range(1, n - 1):
            x[i] = 0.5 * (math.sin(x[i - 1]) + x[i + 1] * x[i])


def nb_swap_ends(xp, n):
    x = carray(xp, (n,))
    for i in range(n // 2):
        x[i], x[n - 1 - i] = x[n - 1 - i] * 2.0, x[i]


def nb_argmax(xp, n):
    x = carray(xp, (n,))
    k = np.argmax(x)
    return x[k] * np.max(x) + np.min(x)


@njit
def _fib_like(a, b, k):
    for _ in range(k):
        a, b = b, a * 0.5 + b * math.sin(a)
    return a, b


def nb_tuple_recurrence(a, b, k):
    p, q = _fib_like(a, b, k)
    return p * q


@njit
def _rpow(x, k):
    if k == 0:
        return 1.0
    return x * _rpow(x, k - 1)


def nb_recursive(a, k):
    return _rpow(a, k)


@njit
def _gen(x):
    for v in x:
        yield v * v


def nb_generator(xp, n):
    x = carray(xp, (n,))
    s = 0.0
    for v in _gen(x):
        s += v
    return s


_TABLE = np.array([0.5, 1.5, -2.0, 0.25, 3.0])


def nb_global_array(xp, n):
    x = carray(xp, (n,))
    s = 0.0
    for i in range(n):
        s += _TABLE[i % 5] * math.exp(x[i])
    return s


def nb_isnan_guard(xp, n):
    x = carray(xp, (n,))
    s = 0.0
    for i in range(n):
        v = math.log(x[i])
        if not math.isnan(v) and not math.isinf(v):
            s += v * v
    return s


def nb_continue(xp, yp, n):
    x, y = carray(xp, (n,)), carray(yp, (n,))
    for i in range(n):
        if x[i] < 0.0:
            continue
        y[i] = math.sqrt(x[i]) * x[i]


def nb_f32_roundtrip(xp, n):
    x = carray(xp, (n,))
    s = 0.0
    for i in range(n):
        s += np.float32(x[i]) * x[i]
    return s


def nb_reversed_loop(xp, yp, n):
    x, y = carray(xp, (n,)), carray(yp, (n,))
    acc = 0.0
    for i in range(n - 1, -1, -1):
        acc = acc * 0.9 + x[i]
        y[i] = acc * acc


def nb_int_gather_neg(xp, idxp, n):
    x, idx = carray(xp, (n,)), carray(idxp, (n,))
    s = 0.0
    for i in range(n):
        s += x[idx[i]] * x[i]                          # negative indices wrap around
    return s


def nb_where_scalar(xp, yp, n):
    x, y = carray(xp, (n,)), carray(yp, (n,))
    for i in range(n):
        y[i] = np.where(x[i] > 0.0, x[i] * x[i], -x[i]) + np.exp(x[i]) * np.tanh(x[i])


def nb_checked_gather(xp, idxp, n):
    x, idx = carray(xp, (n,)), carray(idxp, (n,))
    s = 0.0
    for i in range(n):
        s += x[idx[i]] ** 2
    return s


def nb_cond_store(xp, yp, n, t):
    x, y = carray(xp, (n,)), carray(yp, (n,))
    for i in range(n):
        if x[i] * t > 0.2:
            y[i] = x[i] * t
        if y[i] > 0.5:                                  # reads back what it may have stored
            y[i] = y[i] * y[i]


def nb_raise(xp, n):
    x = carray(xp, (n,))
    s = 0.0
    for i in range(n):
        if x[i] < -5.0:
            raise ValueError("x out of range")
        s += x[i] * math.exp(x[i])
    assert s == s, "nan"
    return s


def nb_np_scalars(a, b):
    return (np.exp(a) * np.log1p(b) + np.arctan2(a, b) + np.hypot(a, b) + np.cbrt(b) + np.fmax(a, b) * np.fmin(a, b)
            + np.sinc(a) + np.deg2rad(b) + np.square(a) + np.reciprocal(b) + np.sign(a) * b)


def nb_floordiv(xp, n, m):
    x = carray(xp, (n,))
    s = 0.0
    for i in range(n):
        j = (i * 7) // m
        s += x[j % n] * (x[i] // 0.3 + x[i] % 0.3)
    return s


def nb_closure(xp, n, scale):
    x = carray(xp, (n,))

    def inner(v):
        return scale * v * v

    s = 0.0
    for i in range(n):
        s += inner(x[i])
    return s


def nb_records(rp, n, g):
    r = carray(rp, (n,))
    e = 0.0
    for i in range(n):
        e += r[i].m * (0.5 * r[i].v * r[i].v + g * r[i].h) * (r[i].k + 1)
    return e


def nb_record_write(rp, n, dt):
    r = carray(rp, (n,))
    for i in range(n):
        r[i].h += dt * r[i].v
        r[i].v -= dt * 9.8 * r[i].m


def nb_np_exprs(xp, yp, n):
    x, y = carray(xp, (n,)), carray(yp, (n,))
    return np.sum(np.exp(x) * y - x ** 2) + np.mean(x) * np.std(y) + np.var(x)


def nb_np_cumsum(xp, n):
    c = np.cumsum(carray(xp, (n,)))
    return np.sum(c * c)


def nb_np_2d_scratch(xp, n):
    x = carray(xp, (n,))
    t = np.zeros((n, 3))
    for i in range(n):
        for k in range(3):
            t[i, k] = x[i] * (k + 1) + x[(i + k) % n]
    return (t ** 2).sum() + t[n - 1, 2] * t[0, 0]


@njit(inline="never")
def _scaled(x, a):
    return a * x


def nb_np_helper_array(xp, n, a):
    x = carray(xp, (n,))
    r = _scaled(x, a)
    u = r                                   # a second reference: numba increments the count
    return np.sum(u * x) + r[0]


def nb_np_sort(xp, wp, n):
    s = np.sort(carray(xp, (n,)))
    return np.sum(s * carray(wp, (n,)))


def nb_np_copy_update(xp, yp, n):
    x, y = carray(xp, (n,)), carray(yp, (n,))
    t = x.copy()
    for i in range(1, n):
        t[i] = t[i - 1] * 0.5 + t[i] * t[i]
    y[:] = t


def nb_strided(xp, n):
    x = carray(xp, (n,))
    v = x[::2]
    s = 0.0
    for i in range(v.shape[0]):
        s += v[i] * x[i] + v[-1 - i] ** 2
    return s


def nb_transpose(ap, m, n):
    at = carray(ap, (m, n)).T
    s = 0.0
    for j in range(n):
        for i in range(m):
            s += at[j, i] * (j + 1) * math.sin(at[j, i])
    return s


def nb_scratch_reuse(xp, yp, n, rounds):
    x, y = carray(xp, (n,)), carray(yp, (n,))
    t = np.empty(n)
    acc = 0.0
    for r in range(rounds):
        for i in range(n):
            t[i] = math.sin(x[i] * (r + 1) + acc)
        for i in range(n):
            acc += t[i] * t[(i + 1) % n]
            y[i] += acc * 0.1
