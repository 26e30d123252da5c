"""Each language construct compiled, run on the host JIT, and compared with plain Python."""
import math

import numpy as np
import pytest

import adoffload.language.builtins as ado
from adoffload.frontend import compile_kernel
from adoffload.language.types import In, InOut, Out, bool_, f32, f64, i32, i64

from .jit import HostKernel, run

SCALE = 3          # a captured global constant
NP_OFFSET = np.float64(0.25)


def ints(values, dtype=np.int64):
    return np.asarray(values, dtype=dtype)


def test_integer_floor_division_and_modulo_follow_python():
    def k(a: In[i64], b: In[i64], q: Out[i64], r: Out[i64]):
        i = ado.tid()
        q[i] = a[i] // b[i]
        r[i] = a[i] % b[i]

    a = ints([7, -7, 7, -7, 6, -6, 0])
    b = ints([2, 2, -2, -2, 3, 3, 5])
    q, r = np.zeros(7, np.int64), np.zeros(7, np.int64)
    run(k, a, b, q, r, grid=7)
    assert list(q) == [x // y for x, y in zip(a, b)]
    assert list(r) == [x % y for x, y in zip(a, b)]


def test_float_floor_division_and_modulo_follow_python():
    def k(a: In[f64], b: In[f64], q: Out[f64], r: Out[f64]):
        i = ado.tid()
        q[i] = a[i] // b[i]
        r[i] = a[i] % b[i]

    a = np.array([7.5, -7.5, 7.5, -7.5])
    b = np.array([2.0, 2.0, -2.0, -2.0])
    q, r = np.zeros(4), np.zeros(4)
    run(k, a, b, q, r, grid=4)
    assert list(q) == [x // y for x, y in zip(a, b)]
    assert list(r) == [x % y for x, y in zip(a, b)]


def test_division_of_ints_is_true_division_and_casts():
    def k(a: In[i32], out: Out[f64], t: Out[i64], back: Out[i32]):
        i = ado.tid()
        out[i] = a[i] / 4
        t[i] = int(out[i] * 10.0)          # truncates toward zero like Python int()
        back[i] = i32(t[i]) + i32(True)

    a = ints([-9, -1, 0, 5, 9], np.int32)
    out, t, back = np.zeros(5), np.zeros(5, np.int64), np.zeros(5, np.int32)
    run(k, a, out, t, back, grid=5)
    np.testing.assert_array_equal(out, a / 4)
    assert list(t) == [int(v * 10.0) for v in a / 4]
    assert list(back) == [v + 1 for v in t]


def test_powers():
    def k(x: In[f64], out: Out[f64]):
        i = ado.tid()
        out[i] = x[i] ** 2 + x[i] ** 3 - x[i] ** -2 + x[i] ** 0.5 + (i + 1) ** 3 + x[i] ** 0

    x = np.array([0.5, 1.5, 2.0, 3.25])
    out = np.zeros(4)
    run(k, x, out, grid=4)
    expected = [v ** 2 + v ** 3 - v ** -2 + v ** 0.5 + (i + 1) ** 3 + 1 for i, v in enumerate(x)]
    np.testing.assert_allclose(out, expected, rtol=1e-14)


def test_chained_comparisons_and_short_circuit_logic():
    def k(x: In[f64], n: i64, out: Out[i32]):
        i = ado.tid()
        v = 0
        # x[i + 1] would be out of bounds for the last thread: short-circuit must skip it
        if i + 1 < n and x[i + 1] > x[i]:
            v += 1
        if 0.0 < x[i] <= 2.0:
            v += 10
        if not (x[i] == 1.0) or i == 0:
            v += 100
        out[i] = i32(v)

    x = np.array([0.5, 1.0, 3.0, 2.0, -1.0])
    out = np.zeros(5, np.int32)
    status = run(k, x, 5, out, grid=5)
    assert status[0] == 0
    expected = []
    for i, v in enumerate(x):
        e = (1 if i + 1 < 5 and x[i + 1] > v else 0) + (10 if 0.0 < v <= 2.0 else 0)
        e += 100 if not (v == 1.0) or i == 0 else 0
        expected.append(e)
    assert list(out) == expected


def test_conditional_expression_evaluates_one_side():
    def k(x: In[f64], out: Out[f64]):
        i = ado.tid()
        out[i] = x[i + 1] if i < 3 else -1.0

    x = np.arange(4.0)
    out = np.zeros(4)
    assert run(k, x, out, grid=4)[0] == 0
    assert list(out) == [1.0, 2.0, 3.0, -1.0]


def test_if_elif_else():
    def k(x: In[f64], out: Out[i64]):
        i = ado.tid()
        if x[i] < 0:
            out[i] = -1
        elif x[i] == 0:
            out[i] = 0
        elif x[i] < 10:
            out[i] = 1
        else:
            out[i] = 2

    x = np.array([-3.0, 0.0, 5.0, 50.0])
    out = np.zeros(4, np.int64)
    run(k, x, out, grid=4)
    assert list(out) == [-1, 0, 1, 2]


@pytest.mark.parametrize("start,stop,step", [(0, 10, 1), (2, 11, 3), (10, 0, -1), (9, -3, -4),
                                             (5, 5, 1), (5, 0, 2)])
def test_range_forms_with_constant_and_runtime_steps(start, stop, step):
    def constant_step(out: Out[i64]):
        i = ado.tid()
        total = 0
        for k in range(i, i + 1):
            total += k
        for k in range(10):
            total += k
        out[i] = total

    def runtime_step(a: i64, b: i64, s: i64, out: Out[i64]):
        i = ado.tid()
        total = 0
        count = 0
        for k in range(a, b, s):
            total += k * (i + 1)
            count += 1
        out[0] = total
        out[1] = count

    out = np.zeros(2, np.int64)
    run(runtime_step, start, stop, step, out, grid=1)
    assert list(out) == [sum(range(start, stop, step)), len(range(start, stop, step))]
    out = np.zeros(3, np.int64)
    run(constant_step, out, grid=3)
    assert list(out) == [45 + i for i in range(3)]


def test_negative_constant_step_loop():
    def k(out: Out[i64]):
        i = ado.tid()
        acc = 0
        for k in range(10, -1, -3):
            acc = acc * 10 + k
        out[i] = acc

    out = np.zeros(1, np.int64)
    run(k, out, grid=1)
    acc = 0
    for v in range(10, -1, -3):
        acc = acc * 10 + v
    assert out[0] == acc


def test_loop_variable_reassignment_does_not_change_iteration():
    def k(out: Out[i64]):
        i = ado.tid()
        n = 0
        for k in range(5):
            k = k * 100
            n += 1
        out[i] = n * 1000 + k

    out = np.zeros(1, np.int64)
    run(k, out, grid=1)
    assert out[0] == 5 * 1000 + 400


def test_while_break_continue():
    def k(x: In[i64], out: Out[i64]):
        i = ado.tid()
        n = x[i]
        steps = 0
        while n != 1:                       # Collatz
            n = n // 2 if n % 2 == 0 else 3 * n + 1
            steps += 1
            if steps > 1000:
                break
        odd_sum = 0
        for k in range(20):
            if k % 2 == 0:
                continue
            if k > 11:
                break
            odd_sum += k
        out[i] = steps * 1000 + odd_sum

    def collatz(n):
        s = 0
        while n != 1:
            n = n // 2 if n % 2 == 0 else 3 * n + 1
            s += 1
        return s

    x = ints([1, 6, 7, 27])
    out = np.zeros(4, np.int64)
    run(k, x, out, grid=4)
    assert list(out) == [collatz(v) * 1000 + 36 for v in x]


def test_early_return_from_kernel():
    def k(n: i64, out: Out[f64]):
        i = ado.tid()
        if i >= n:
            return
        out[i] = 1.0

    out = np.zeros(6)
    run(k, 4, out, grid=6)
    assert list(out) == [1, 1, 1, 1, 0, 0]


def test_augmented_assignment_on_elements_and_2d_arrays_with_shape_and_len():
    def k(a: InOut[f32, 2], rows: Out[i64]):
        i, j = ado.tid()
        a[i, j] += 1.0
        a[i, j] *= 2
        a[i, j] -= a.shape[1]
        rows[0] = len(a) * 100 + a.shape[1]

    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    expected = (a + 1) * 2 - 4
    rows = np.zeros(1, np.int64)
    kernel = HostKernel(k)
    assert kernel.signature.grid_rank == 2
    kernel(a, rows, grid=(3, 4))
    np.testing.assert_array_equal(a, expected)
    assert rows[0] == 304


def test_2d_bounds_failure_reports_the_dimension():
    def k(a: In[f64, 2], out: Out[f64, 2]):
        i, j = ado.tid()
        out[i, j] = a[i, j + 1]

    a, out = np.ones((2, 3)), np.zeros((2, 3))
    status = run(k, a, out, grid=(2, 3))
    assert list(status) == [1, 0, 3, 1]
    facts = compile_kernel(k).candidate_facts
    assert (0, 0, 0) in facts and (1, 1, 1) in facts and (0, 1, 1) not in facts


def test_captured_globals_closures_and_numpy_scalars_are_constants():
    factor = 0.5
    flag = True

    def k(x: In[f32], out: Out[f32]):
        i = ado.tid()
        v = x[i] * SCALE + factor + NP_OFFSET
        if flag:
            v = -v
        out[i] = v

    source = compile_kernel(k)
    assert "double" not in source.llvm_ir       # numpy f64 scalars are weak constants too
    x = np.arange(3, dtype=np.float32)
    out = np.zeros(3, np.float32)
    run(k, x, out, grid=3)
    np.testing.assert_allclose(out, -(x * 3 + 0.75))


@ado.func
def _square(v):
    return v * v


@ado.func
def _norm2(a, b):
    return ado.sqrt(_square(a) + _square(b))


@ado.func
def _polar(a, b):
    return _norm2(a, b), ado.atan2(b, a)


@ado.func
def _sum_window(x, i, width=3):
    total = 0.0
    for k in range(width):
        total += x[i + k]
    return total


@ado.func
def _sign(v):
    if v < 0:
        return -1.0
    elif v == 0:
        return 0
    return 1.0


def test_helpers_calling_helpers_tuples_arrays_defaults_and_multiple_returns():
    def k(x: In[f64], y: In[f64], r: Out[f64], phi: Out[f64], s: Out[f64], sg: Out[f64]):
        i = ado.tid()
        r[i], phi[i] = _polar(x[i], y[i])
        s[i] = _sum_window(x, i, width=2) if i + 1 < len(x) else 0.0
        sg[i] = _sign(y[i])

    x = np.array([1.0, -2.0, 3.0, 0.5])
    y = np.array([0.0, 1.5, -2.0, 0.25])
    r, phi, s, sg = (np.zeros(4) for _ in range(4))
    status = run(k, x, y, r, phi, s, sg, grid=4)
    assert status[0] == 0
    np.testing.assert_allclose(r, np.hypot(x, y), rtol=1e-15)
    np.testing.assert_allclose(phi, np.arctan2(y, x), rtol=1e-15)
    np.testing.assert_allclose(s, [x[0] + x[1], x[1] + x[2], x[2] + x[3], 0.0])
    np.testing.assert_array_equal(sg, np.sign(y))
    assert 'alwaysinline' in compile_kernel(k).llvm_ir


def test_bounds_failure_inside_a_helper_reports_the_kernel_parameter():
    def k(y: In[f64], x: In[f64], s: Out[f64]):
        i = ado.tid()
        s[i] = _sum_window(x, i) + y[i]

    x, y, s = np.arange(5.0), np.zeros(5), np.full(5, -1.0)
    status = run(k, y, x, s, grid=5)
    assert list(status[:2]) == [1, 1] and status[2] in (5, 6) and status[3] == 0
    np.testing.assert_array_equal(s, [3, 6, 9, -1, -1])


def test_helpers_work_from_plain_python():
    assert _polar(3.0, 4.0)[0] == 5.0
    assert _sum_window(np.arange(5.0), 1) == 6.0


def test_tuple_unpacking_and_swap():
    def k(out: Out[i64]):
        i = ado.tid()
        a, b = 1, 2
        a, b = b, a + b
        (c, d), e = (a, b), 7
        out[i] = a * 10000 + b * 1000 + c * 100 + d * 10 + e

    out = np.zeros(1, np.int64)
    run(k, out, grid=1)
    assert out[0] == 2 * 10000 + 3 * 1000 + 2 * 100 + 3 * 10 + 7


def test_local_arrays_are_zeroed_private_and_bounds_checked():
    def k(x: In[f64], n: i64, out: Out[f64]):
        i = ado.tid()
        t = ado.zeros(4, ado.f64)
        m = ado.zeros((2, 2), ado.i32)
        for k in range(4):
            t[k] += x[i] * k
        m[1, 1] = i32(i)
        out[i] = t[0] + t[1] + t[3] + float(m[1, 1]) + float(m[0, 1])
        t[n] = 1.0           # n = 4 is out of bounds

    x = np.array([1.0, 2.0])
    out = np.zeros(2)
    status = run(k, x, 3, out, grid=2)
    assert status[0] == 0
    np.testing.assert_allclose(out, [4.0 * 1 + 0, 4.0 * 2 + 1])
    status = run(k, x, 4, out, grid=2)
    assert list(status) == [1, -1, 4, 0]       # local array #0 -> param_index -1


def test_atomics_return_the_old_value_and_work_on_ints_and_floats():
    def k(counter: InOut[i32], acc: InOut[f32], tickets: Out[i32], lo: InOut[f64]):
        i = ado.tid()
        tickets[i] = ado.atomic_add(counter, 0, 1)
        ado.atomic_add(acc, 0, 0.5)
        ado.atomic_min(lo, 0, -float(i))

    counter, acc = np.zeros(1, np.int32), np.zeros(1, np.float32)
    tickets, lo = np.zeros(5, np.int32), np.zeros(1)
    run(k, counter, acc, tickets, lo, grid=5)
    assert counter[0] == 5 and acc[0] == 2.5 and lo[0] == -4.0
    assert sorted(tickets) == [0, 1, 2, 3, 4]


@pytest.mark.parametrize("name", ["sqrt", "exp", "exp2", "log", "log2", "log1p", "expm1", "sin",
                                  "cos", "tan", "sinh", "cosh", "tanh", "asin", "acos", "atan",
                                  "floor", "ceil", "erf", "abs", "rsqrt"])
@pytest.mark.parametrize("dtype", [f32, f64])
def test_unary_math_matches_python(name, dtype):
    function = getattr(ado, name)

    def k(x: In[dtype], out: Out[dtype]):
        i = ado.tid()
        out[i] = function(x[i])

    x = np.array([0.1, 0.45, 0.8], dtype=dtype.dtype)
    out = np.zeros(3, dtype.dtype)
    run(k, x, out, grid=3)
    reference = {"abs": math.fabs, "rsqrt": lambda v: 1.0 / math.sqrt(v)}.get(name) or getattr(math, name)
    expected = [reference(float(v)) for v in x]
    np.testing.assert_allclose(out, expected, rtol=1e-6 if dtype is f32 else 1e-14)
    if dtype is f32:
        assert "double" not in compile_kernel(k).llvm_ir


def test_binary_math_min_max_and_int_abs():
    def k(x: In[f64], y: In[f64], n: In[i64], out: Out[f64], m: Out[i64]):
        i = ado.tid()
        out[i] = ado.pow(x[i], y[i]) + ado.atan2(y[i], x[i]) + ado.min(x[i], y[i], 0.3) \
            + max(x[i], y[i]) + ado.copysign(1.0, y[i] - 0.5) + ado.fma(x[i], y[i], 1.0)
        m[i] = abs(n[i]) + ado.max(n[i], 2) + min(n[i], i)

    x, y, n = np.array([0.5, 2.0]), np.array([0.25, 0.75]), ints([-5, 7])
    out, m = np.zeros(2), np.zeros(2, np.int64)
    run(k, x, y, n, out, m, grid=2)
    expected = x ** y + np.arctan2(y, x) + np.minimum(np.minimum(x, y), 0.3) + np.maximum(x, y) \
        + np.copysign(1.0, y - 0.5) + x * y + 1
    np.testing.assert_allclose(out, expected, rtol=1e-14)
    assert list(m) == [abs(v) + max(v, 2) + min(v, i) for i, v in enumerate(n)]


def test_promotion_rules_in_the_ir():
    def k(a: f32, b: f64, n: i32, m: i64, out32: Out[f32], out64: Out[f64], outi: Out[i64]):
        i = ado.tid()
        out32[i] = a * 2.0 + n           # f32 (int op float -> that float)
        out64[i] = a * b                 # f32 op f64 -> f64
        outi[i] = n + m + 1              # i32 op i64 -> i64

    out32, out64, outi = np.zeros(1, np.float32), np.zeros(1), np.zeros(1, np.int64)
    run(k, 1.5, 2.0, 3, 4, out32, out64, outi, grid=1)
    assert out32[0] == 6.0 and out64[0] == 3.0 and outi[0] == 8
    ir_text = compile_kernel(k).llvm_ir
    assert "fmul float" in ir_text and "fpext float" in ir_text and "sext i32" in ir_text


def test_variables_widen_implicitly_within_a_kind():
    def k(a: f32, n: i32, out: Out[f64], outi: Out[i64]):
        i = ado.tid()
        acc = ado.f64(0.0)
        acc += a                      # f32 into an f64 variable: widening
        total = m_of(i)
        total = n                     # i32 into an i64 variable: widening
        out[i] = acc
        outi[i] = total

    out, outi = np.zeros(1), np.zeros(1, np.int64)
    run(k, 0.5, 7, out, outi, grid=1)
    assert out[0] == 0.5 and outi[0] == 7


def m_of(i):
    return i


m_of = ado.func(m_of)


def test_bool_values_and_docstring():
    def k(x: In[f64], out: Out[bool_]):
        """A docstring is allowed."""
        i = ado.tid()
        positive = x[i] > 0
        out[i] = positive and not (x[i] > 10)

    x = np.array([-1.0, 5.0, 20.0])
    out = np.zeros(3, np.bool_)
    run(k, x, out, grid=3)
    assert list(out) == [False, True, False]


def test_assert_records_trap_status():
    def k(x: In[f64]):
        i = ado.tid()
        assert x[i] >= 0

    status = run(k, np.array([1.0, -1.0]), grid=2)
    assert status[0] == 2


def _copy_kernel(x: In[f32], out: Out[f32]):
    i = ado.tid()
    out[i] = x[i]


def test_location_metadata_points_into_this_file():
    source = compile_kernel(_copy_kernel)
    line = _copy_kernel.__code__.co_firstlineno + 2
    assert source.first_line == _copy_kernel.__code__.co_firstlineno
    assert f'!{{ !"{__file__}", i32 {line}, i32 4 }}' in source.llvm_ir
    assert "!adoffload.loc" in source.llvm_ir
