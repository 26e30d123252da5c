"""Integer ``//`` and ``%`` by zero, and ``MIN // -1``, raise an adoffload.Error naming the kernel
and the source line on every path (numpy launcher, JAX on the CPU); they used to kill the
process with SIGFPE (issue 14, item 1). Values elsewhere follow Python's floor semantics."""
from __future__ import annotations

import inspect

import numpy as np
import pytest

import adoffload as ado

I64_MIN = np.iinfo(np.int64).min


@ado.func
def floor_div_helper(a, b):
    return a // b


@ado.kernel
def divide(a: ado.In[ado.i64], b: ado.In[ado.i64], q: ado.Out[ado.i64], r: ado.Out[ado.i64]):
    i = ado.tid()
    q[i] = a[i] // b[i]
    r[i] = a[i] % b[i]


@ado.kernel
def divide_in_helper(a: ado.In[ado.i32], b: ado.In[ado.i32], q: ado.Out[ado.i32]):
    i = ado.tid()
    q[i] = floor_div_helper(a[i], b[i])


@ado.kernel
def scaled_by_quotient(x: ado.In[ado.f64], k: ado.In[ado.i64], y: ado.Out[ado.f64]):
    i = ado.tid()
    y[i] = x[i] * float(7 // k[i])


def _line_of(kernel, text: str) -> int:
    lines, first = inspect.getsourcelines(kernel.pyfunc)
    return first + next(n for n, line in enumerate(lines) if text in line)


def test_values_follow_python_including_divisor_minus_one():
    a = np.array([7, -7, 7, -7, I64_MIN, 5, I64_MIN, 0, I64_MIN], np.int64)
    b = np.array([2, 2, -2, -2, 3, -1, 7, -1, -1], np.int64)
    q, r = np.empty_like(a), np.empty_like(a)
    ok = slice(0, 8)                               # I64_MIN // -1 is the overflow case below
    divide(a[ok].copy(), b[ok].copy(), q[ok], r[ok], grid=8)
    with np.errstate(over="ignore"):
        np.testing.assert_array_equal(q[ok], a[ok] // b[ok])
    np.testing.assert_array_equal(r[ok], a[ok] % b[ok])


@pytest.mark.parametrize("a, b, what", [(1, 0, "division or modulo by zero"), (0, 0, "division or modulo by zero"),
                                        (I64_MIN, -1, "integer overflow")])
def test_numpy_launcher_raises_with_kernel_and_line(a, b, what):
    x, y = np.full(64, a, np.int64), np.full(64, b, np.int64)
    with pytest.raises(ado.KernelFaultError, match=what) as info:
        divide(x, y, np.empty_like(x), np.empty_like(x), grid=64)
    message = str(info.value)
    assert "kernel 'divide'" in message
    assert f"line {_line_of(divide, 'a[i] // b[i]')} of {__file__}" in message
    # the process and the device stay usable
    q, r = np.empty(2, np.int64), np.empty(2, np.int64)
    divide(np.array([9, 9]), np.array([4, -4]), q, r, grid=2)
    assert q.tolist() == [2, -3] and r.tolist() == [1, -3]


def test_modulo_by_minus_one_of_min_is_zero_not_an_error():
    q, r = np.empty(1, np.int64), np.empty(1, np.int64)
    with pytest.raises(ado.KernelFaultError, match="overflow"):       # the // of the same line
        divide(np.array([I64_MIN]), np.array([-1]), q, r, grid=1)

    @ado.kernel
    def modulo(a: ado.In[ado.i64], b: ado.In[ado.i64], r: ado.Out[ado.i64]):
        i = ado.tid()
        r[i] = a[i] % b[i]
    modulo(np.array([I64_MIN, 5]), np.array([-1, -1]), r2 := np.empty(2, np.int64), grid=2)
    assert r2.tolist() == [0, 0]


def test_helper_division_by_zero_names_the_helper_line():
    line = _line_of(floor_div_helper, "a // b")
    with pytest.raises(ado.KernelFaultError, match="kernel 'divide_in_helper': integer division or modulo by zero"
                       ) as info:
        divide_in_helper(np.ones(3, np.int32), np.array([1, 0, 2], np.int32), np.empty(3, np.int32), grid=3)
    assert f"line {line}" in str(info.value)


def test_constant_zero_divisor_is_refused_at_compile_time():
    with pytest.raises(ado.KernelTypeError, match="by the constant zero") as info:
        @ado.kernel
        def by_zero(a: ado.In[ado.i64], q: ado.Out[ado.i64]):
            i = ado.tid()
            q[i] = a[i] // 0
    assert info.value.line is not None


def test_nonzero_constant_divisor_has_no_guard():
    @ado.kernel
    def by_three(a: ado.In[ado.i64], q: ado.Out[ado.i64]):
        i = ado.tid()
        q[i] = a[i] // 3 + a[i] % 3
    text = by_three.module_text()
    assert "div.rare" not in text and "xchg ptr %status, i64 3 " not in text
    assert "xchg ptr %status, i64 3 " in divide.module_text()    # the guard, where the divisor varies


def test_adjoint_through_a_guarded_integer_division():
    x, k = np.array([1.0, 2.0, 3.0]), np.array([1, 2, 3], np.int64)
    d_x, d_y = np.zeros(3), np.ones(3)
    ado.vjp(scaled_by_quotient, ["x"])(x, k, np.zeros(3), d_x=d_x, d_y=d_y, grid=3)
    np.testing.assert_array_equal(d_x, [7.0, 3.0, 2.0])
    with pytest.raises(ado.KernelFaultError, match="division or modulo by zero"):
        ado.vjp(scaled_by_quotient, ["x"])(x, np.array([1, 0, 3]), np.zeros(3), d_x=d_x, d_y=np.ones(3), grid=3)


def test_jax_cpu_raises_naming_kernel_and_line():
    jax = pytest.importorskip("jax")
    import jax.numpy as jnp
    f = ado.jax_kernel(divide_in_helper)
    with jax.default_device(jax.devices("cpu")[0]):          # the CPU handler, also on a machine with a GPU
        np.testing.assert_array_equal(f(jnp.array([7, 8], jnp.int32), jnp.array([2, -3], jnp.int32)), [3, -3])
        with pytest.raises(Exception, match="kernel 'divide_in_helper': integer division or modulo by zero"):
            jax.block_until_ready(jax.jit(f)(jnp.array([7, 8], jnp.int32), jnp.array([2, 0], jnp.int32)))
        with pytest.raises(Exception, match="kernel 'divide_in_helper': integer overflow"):
            jax.block_until_ready(f(jnp.array([-2**31, 8], jnp.int32), jnp.array([-1, 1], jnp.int32)))


def _has_cuda() -> bool:
    try:
        from adoffload.runtime import get_device
        get_device("cuda")
        return True
    except Exception:  # noqa: BLE001 - any failure means no usable GPU
        return False


@pytest.mark.gpu
def test_cuda_launcher_raises_and_the_device_stays_usable():
    if not _has_cuda():
        pytest.skip("no NVIDIA GPU / driver here")
    x, y = np.full(1000, 5, np.int64), np.full(1000, 0, np.int64)
    with pytest.raises(ado.KernelFaultError, match="kernel 'divide': integer division or modulo by zero"):
        divide(x, y, np.empty_like(x), np.empty_like(x), grid=1000, device="cuda")
    with pytest.raises(ado.KernelFaultError, match="integer overflow"):
        divide(np.full(4, I64_MIN), np.full(4, -1), np.empty(4, np.int64), np.empty(4, np.int64), grid=4, device="cuda")
    q, r = np.empty(2, np.int64), np.empty(2, np.int64)
    divide(np.array([9, -9]), np.array([4, 4]), q, r, grid=2, device="cuda")
    assert q.tolist() == [2, -3] and r.tolist() == [1, 3]
