"""Kernels written as a Python user would, launched on the host, with Python itself as the oracle.

Each case found a silent difference from Python (a wrong value, no error) in the kernel language;
the kernels now give Python's value or stop the thread with a KernelFaultError naming the line.
"""
import math
import random

import numpy as np
import pytest

import adoffload as ado
from adoffload.errors import KernelFaultError, KernelTypeError, UnsupportedConstructError

INF, NAN = math.inf, math.nan
SPECIAL = [0.0, -0.0, 1.0, -1.0, 0.1, -0.1, 2.5, -2.5, 3.0, 7.0, 1e300, -1e300, INF, -INF, NAN, 5e-324]


def same(got, expected) -> bool:
    """Equal as Python floats, NaN equal to NaN, and the sign of zero counted."""
    got, expected = float(got), float(expected)
    if math.isnan(expected):
        return math.isnan(got)
    return got == expected and math.copysign(1, got) == math.copysign(1, expected)


def assert_same(got, expected, args):
    bad = [(a, float(g), e) for a, g, e in zip(args, got, expected) if not same(g, e)]
    assert not bad, f"{len(bad)} of {len(args)} differ from Python, e.g. (args, kernel, Python): {bad[:5]}"


@ado.kernel
def float_divmod_kernel(a: ado.In[ado.f64], b: ado.In[ado.f64], q: ado.Out[ado.f64], r: ado.Out[ado.f64],
                        dq: ado.Out[ado.f64], dr: ado.Out[ado.f64]):
    i = ado.tid()
    q[i] = a[i] // b[i]
    r[i] = a[i] % b[i]
    dq[i], dr[i] = divmod(a[i], b[i])


def test_float_floor_division_and_modulo_are_pythons():
    """``1.0 // 0.1`` is 9.0 in Python (floor(1.0 / 0.1) is 10.0), ``1.0 // -inf`` is -1.0 and
    ``-0.0 % 5.0`` is 0.0: CPython's float divmod, not floor of the quotient."""
    rng = random.Random(5)
    pairs = [(x, y) for x in SPECIAL for y in SPECIAL if y != 0]
    pairs += [(rng.uniform(-10, 10), rng.choice([0.1, 0.3, -0.7, 1.1, 3.0, -2.0])) for _ in range(300)]
    a, b = (np.array(v) for v in zip(*pairs))
    q, r, dq, dr = (np.zeros(len(a)) for _ in range(4))
    float_divmod_kernel(a, b, q, r, dq, dr, grid=len(a))
    assert_same(q, [x // y for x, y in pairs], pairs)
    assert_same(r, [x % y for x, y in pairs], pairs)
    assert_same(dq, [divmod(x, y)[0] for x, y in pairs], pairs)
    assert_same(dr, [divmod(x, y)[1] for x, y in pairs], pairs)


@ado.kernel
def builtin_min_max_kernel(a: ado.In[ado.f64], b: ado.In[ado.f64], lo: ado.Out[ado.f64], hi: ado.Out[ado.f64],
                           lo3: ado.Out[ado.f64], hi3: ado.Out[ado.f64], flo: ado.Out[ado.f64]):
    i = ado.tid()
    lo[i] = min(a[i], b[i])
    hi[i] = max(a[i], b[i])
    lo3[i] = min(b[i], a[i], 1.0)
    hi3[i] = max(b[i], 0.0, a[i])
    flo[i] = ado.min(a[i], b[i])


def test_builtin_min_max_keep_pythons_order_with_nan_and_signed_zero():
    """Python's ``min(nan, 1.0)`` is nan and ``min(1.0, nan)`` 1.0; ``min(0.0, -0.0)`` is 0.0.
    ``ado.min`` stays llvm.minnum (NaN ignored, as numpy's fmin)."""
    pairs = [(x, y) for x in SPECIAL for y in SPECIAL]
    a, b = (np.array(v) for v in zip(*pairs))
    outs = [np.zeros(len(a)) for _ in range(5)]
    builtin_min_max_kernel(a, b, *outs, grid=len(a))
    assert_same(outs[0], [min(x, y) for x, y in pairs], pairs)
    assert_same(outs[1], [max(x, y) for x, y in pairs], pairs)
    assert_same(outs[2], [min(y, x, 1.0) for x, y in pairs], pairs)
    assert_same(outs[3], [max(y, 0.0, x) for x, y in pairs], pairs)
    fmin = [float(np.fmin(x, y)) for x, y in pairs]
    assert all(same(g, e) or (g == e == 0.0) for g, e in zip(outs[4], fmin))   # minnum: either zero


@ado.kernel
def bool_literal_compare_kernel(x: ado.In[ado.i64], out: ado.Out[ado.i64]):
    i = ado.tid()
    flag = x[i] > 0
    out[i] = int(flag == 2) + 2 * int(flag == 1) + 4 * int(flag != 2) + 8 * int(0 == flag) + 16 * int(flag == 1.0)


def test_bool_compared_with_a_number_literal_is_pythons():
    """``flag == 2`` is always False in Python (True == 1); the literal was made an i1 (2 -> 0)."""
    x = np.array([-3, 0, 4], np.int64)
    out = np.zeros(3, np.int64)
    bool_literal_compare_kernel(x, out, grid=3)
    expected = []
    for v in x:
        flag = bool(v > 0)
        expected.append(int(flag == 2) + 2 * int(flag == 1) + 4 * int(flag != 2) + 8 * int(0 == flag)
                        + 16 * int(flag == 1.0))
    assert list(out) == expected


@ado.kernel
def shift_kernel(a: ado.In[ado.i64], s: ado.In[ado.i64], left: ado.Out[ado.i64], right: ado.Out[ado.i64],
                 left32: ado.Out[ado.i32]):
    i = ado.tid()
    left[i] = a[i] << s[i]
    right[i] = a[i] >> s[i]
    left32[i] = ado.i32(a[i] & 255) << ado.i32(s[i])


def wrap(value: int, bits: int = 64) -> int:
    return (value + 2 ** (bits - 1)) % 2 ** bits - 2 ** (bits - 1)


@pytest.mark.parametrize("grid", [1, 13])    # one thread: scalar code (x86 masks the count to 6 bits)
def test_shifts_by_the_width_or_more_are_pythons_modulo_2_to_the_bits(grid):
    counts = [0, 1, 5, 31, 32, 33, 62, 63, 64, 65, 100, 2 ** 40, 7]
    values = [1, -1, 5, -5, 3, -3, 1, 1, -1, 7, -2 ** 63, 2 ** 62, -9]
    for start in range(0, len(values), grid):
        a = np.array(values[start:start + grid], np.int64)
        s = np.array(counts[start:start + grid], np.int64)
        left, right, left32 = np.zeros(len(a), np.int64), np.zeros(len(a), np.int64), np.zeros(len(a), np.int32)
        shift_kernel(a, s, left, right, left32, grid=len(a))
        pairs = list(zip(a.tolist(), s.tolist()))
        assert list(left) == [wrap(x << min(n, 200)) for x, n in pairs], pairs
        assert list(right) == [x >> min(n, 200) for x, n in pairs], pairs
        assert list(left32) == [wrap((x & 255) << wrap(n, 32), 32) for x, n in pairs], pairs


def test_a_negative_shift_count_stops_the_thread_as_python_raises():
    a, s = np.array([1, 2], np.int64), np.array([1, -1], np.int64)
    out = [np.zeros(2, np.int64), np.zeros(2, np.int64), np.zeros(2, np.int32)]
    with pytest.raises(ValueError):
        1 << -1
    with pytest.raises(KernelFaultError, match=r"negative shift count.*left\[i\] = a\[i\] << s\[i\]"):
        shift_kernel(a, s, *out, grid=2)


def test_a_constant_negative_shift_count_is_refused_at_compile_time():
    def k(a: ado.In[ado.i64], out: ado.Out[ado.i64]):
        i = ado.tid()
        out[i] = a[i] >> -1

    with pytest.raises(KernelTypeError, match=r"negative shift count -1(.|\n)*out\[i\] = a\[i\] >> -1"):
        ado.kernel(k)(np.ones(1, np.int64), np.zeros(1, np.int64), grid=1)


@ado.kernel
def range_step_kernel(step: ado.In[ado.i64], out: ado.Out[ado.i64]):
    i = ado.tid()
    count = 0
    for j in range(0, 10, step[i]):
        count += 1
    out[i] = count


def test_a_range_step_of_zero_at_run_time_stops_the_thread():
    """``range(0, 10, 0)`` raises ValueError; the loop ran no iterations instead."""
    out = np.zeros(3, np.int64)
    range_step_kernel(np.array([3, -1, 2], np.int64), out, grid=3)
    assert list(out) == [len(range(0, 10, s)) for s in (3, -1, 2)]
    with pytest.raises(KernelFaultError, match=r"range\(\) step of zero.*for j in range\(0, 10, step\[i\]\)"):
        range_step_kernel(np.array([3, 0, 2], np.int64), out, grid=3)


@ado.kernel
def int_kernel(x: ado.In[ado.f64], out: ado.Out[ado.i64]):
    i = ado.tid()
    out[i] = int(x[i])


@ado.kernel
def i32_kernel(x: ado.In[ado.f64], out: ado.Out[ado.i32]):
    i = ado.tid()
    out[i] = ado.i32(x[i])


@ado.kernel
def i32_of_f32_kernel(x: ado.In[ado.f32], out: ado.Out[ado.i32]):
    i = ado.tid()
    out[i] = ado.i32(x[i])


@ado.kernel
def round_kernel(x: ado.In[ado.f64], out: ado.Out[ado.i64]):
    i = ado.tid()
    out[i] = round(x[i])


CONVERSIONS = {"int": (int_kernel, np.float64, np.int64), "i32": (i32_kernel, np.float64, np.int32),
               "i32 of f32": (i32_of_f32_kernel, np.float32, np.int32), "round": (round_kernel, np.float64, np.int64)}


def convert(kind, values):
    kernel, source, target = CONVERSIONS[kind]
    out = np.zeros(len(values), target)
    kernel(np.array(values, source), out, grid=len(values))
    return [int(v) for v in out]


def test_int_of_floats_truncates_and_round_ties_to_even_as_python():
    values = [-2.5, -0.5, -0.0, 0.7, 0.5, 1.5, 2.5, -3.5, 3.9999, -3.9999, 1e18, -2.0 ** 63 + 2048,
              4503599627370497.0, 4503599627370496.5, 0.49999999999999994]
    assert convert("int", values) == [int(v) for v in values]
    assert convert("round", values) == [round(v) for v in values]
    small = [v for v in values if abs(v) < 2 ** 31]
    assert convert("i32", small) == [int(v) for v in small]


@pytest.mark.parametrize("kind, value", [
    ("int", NAN), ("int", INF), ("int", -INF), ("int", 2.0 ** 63), ("int", 1e19), ("round", NAN), ("round", INF),
    ("i32", 2147483648.0), ("i32", -2147483649.0), ("i32", NAN),
    ("i32 of f32", 2.0 ** 31), ("i32 of f32", -2.0 ** 31 - 256.0), ("i32 of f32", NAN)])
def test_int_of_nan_inf_or_out_of_range_stops_the_thread(kind, value):
    with pytest.raises(KernelFaultError, match=r"NaN, infinite or outside the integer type's range"):
        convert(kind, [1.0, value])


def test_int_at_the_edges_of_the_range_still_converts():
    edges = [-2.0 ** 63, math.nextafter(2.0 ** 63, 0)]
    assert convert("int", edges) == [int(v) for v in edges]
    assert convert("i32", [-2147483648.9, 2147483647.9]) == [-2147483648, 2147483647]
    assert convert("i32 of f32", [-2.0 ** 31, 2147483520.0]) == [-2 ** 31, 2147483520]


@ado.kernel
def integer_divmod_pow_kernel(a: ado.In[ado.i64], b: ado.In[ado.i64], q: ado.Out[ado.i64], r: ado.Out[ado.i64],
                              p: ado.Out[ado.i64], f: ado.Out[ado.f64]):
    i = ado.tid()
    q[i], r[i] = divmod(a[i], b[i])
    p[i] = pow(a[i], 3)
    f[i] = pow(float(a[i]), 0.5) if a[i] >= 0 else 0.0


def test_divmod_and_pow_builtins_on_integers():
    rng = random.Random(7)
    pairs = [(rng.randint(-50, 50), rng.choice([-7, -3, -1, 1, 2, 5])) for _ in range(100)]
    a, b = (np.array(v, np.int64) for v in zip(*pairs))
    q, r, p, f = np.zeros(100, np.int64), np.zeros(100, np.int64), np.zeros(100, np.int64), np.zeros(100)
    integer_divmod_pow_kernel(a, b, q, r, p, f, grid=100)
    assert list(zip(q, r)) == [divmod(x, y) for x, y in pairs]
    assert list(p) == [pow(x, 3) for x, _ in pairs]
    np.testing.assert_allclose(f, [pow(float(x), 0.5) if x >= 0 else 0.0 for x, _ in pairs], rtol=1e-15)


def test_round_with_ndigits_and_math_functions_without_a_kernel_version_are_refused():
    def rounds(x: ado.In[ado.f64], out: ado.Out[ado.f64]):
        i = ado.tid()
        out[i] = round(x[i], 2)

    def fmods(x: ado.In[ado.f64], out: ado.Out[ado.f64]):
        i = ado.tid()
        out[i] = math.fmod(x[i], 2.0)

    x, out = np.ones(1), np.zeros(1)
    with pytest.raises(UnsupportedConstructError, match=r"round\(\) with ndigits(.|\n)*round\(x\[i\], 2\)"):
        ado.kernel(rounds)(x, out, grid=1)
    with pytest.raises(UnsupportedConstructError, match=r"math.fmod cannot run inside a kernel and the kernel "
                                                         r"language has no version(.|\n)*math.fmod\(x\[i\], 2.0\)"):
        ado.kernel(fmods)(x, out, grid=1)


@ado.kernel
def running_minimum_kernel(x: ado.In[ado.f64], out: ado.Out[ado.f64]):
    i = ado.tid()
    best = float("inf")
    worst = float("-inf")
    for j in range(i + 1):
        best = min(best, x[j])
        worst = max(worst, x[j])
    out[i] = best - worst + (0.0 if float("nan") != float("nan") else 1.0)


def test_float_of_an_infinity_or_nan_string_is_a_constant():
    x = np.array([3.0, 1.0, 2.0, -4.0])
    out = np.zeros(4)
    running_minimum_kernel(x, out, grid=4)
    assert list(out) == [min(x[:i + 1]) - max(x[:i + 1]) for i in range(4)]


def test_a_constant_power_with_a_complex_value_is_refused_with_its_line():
    """``(-8.0) ** 0.5`` folds to a complex number in Python; it crashed the compiler (TypeError in a
    comparison of the folded value)."""
    def k(x: ado.In[ado.f64], out: ado.Out[ado.f64]):
        i = ado.tid()
        out[i] = max(x[i], (-8.0) ** 0.5)

    with pytest.raises(KernelTypeError, match=r"complex number(.|\n)*max\(x\[i\], \(-8.0\) \*\* 0.5\)"):
        ado.kernel(k)(np.ones(1), np.zeros(1), grid=1)


def test_under_jax_the_handler_names_the_rejected_value():
    import jax.numpy as jnp

    @ado.kernel
    def to_int_f32(x: ado.In[ado.f32], y: ado.Out[ado.i32]):
        i = ado.tid()
        y[i] = ado.i32(x[i])

    f = ado.jax_kernel(to_int_f32)
    assert list(np.asarray(f(jnp.asarray([1.5, -2.5], jnp.float32)))) == [1, -2]
    with pytest.raises(Exception, match=r"kernel .to_int_f32.: a value Python would reject .* at line \d+"):
        np.asarray(f(jnp.asarray([1.5, float("nan")], jnp.float32)))


@pytest.mark.skipif(not __import__("adoffload.runtime", fromlist=["device_count"]).device_count("cuda"),
                    reason="no CUDA GPU/driver found")
def test_on_an_nvidia_gpu_the_same_values_and_faults():
    pairs = [(x, y) for x in SPECIAL for y in SPECIAL if y != 0]
    a, b = (np.array(v) for v in zip(*pairs))
    q, r, dq, dr = (np.zeros(len(a)) for _ in range(4))
    float_divmod_kernel(a, b, q, r, dq, dr, grid=len(a), device="cuda")
    assert_same(q, [x // y for x, y in pairs], pairs)
    assert_same(r, [x % y for x, y in pairs], pairs)
    outs = [np.zeros(len(a)) for _ in range(5)]
    builtin_min_max_kernel(a, b, *outs, grid=len(a), device="cuda")
    assert_same(outs[0], [min(x, y) for x, y in pairs], pairs)
    assert_same(outs[3], [max(y, 0.0, x) for x, y in pairs], pairs)
    counts = np.array([0, 1, 63, 64, 65, 100], np.int64)
    values = np.array([-5, 3, -1, 1, -7, 9], np.int64)
    left, right, left32 = np.zeros(6, np.int64), np.zeros(6, np.int64), np.zeros(6, np.int32)
    shift_kernel(values, counts, left, right, left32, grid=6, device="cuda")
    assert list(left) == [wrap(int(x) << int(n)) for x, n in zip(values, counts)]
    assert list(right) == [int(x) >> int(n) for x, n in zip(values, counts)]
    out = np.zeros(2, np.int64)
    with pytest.raises(KernelFaultError, match=r"NaN, infinite or outside the integer type's range"):
        int_kernel(np.array([1.0, NAN]), out, grid=2, device="cuda")
    with pytest.raises(KernelFaultError, match=r"range\(\) step of zero"):
        range_step_kernel(np.array([1, 0], np.int64), np.zeros(2, np.int64), grid=2, device="cuda")
    with pytest.raises(KernelFaultError, match=r"negative shift count"):
        shift_kernel(values[:2], np.array([1, -1], np.int64), left[:2].copy(), right[:2].copy(), left32[:2].copy(),
                     grid=2, device="cuda")
    int_kernel(np.array([1.0, -2.5]), out, grid=2, device="cuda")
    assert list(out) == [1, -2]


@ado.kernel
def and_or_value_kernel(a: ado.In[ado.i64], x: ado.In[ado.f64], ints: ado.Out[ado.i64, 2],
                        floats: ado.Out[ado.f64, 2], flags: ado.Out[ado.i64]):
    i = ado.tid()
    n = a[i]
    ints[i, 0] = n or 7
    ints[i, 1] = n and 5
    floats[i, 0] = x[i] or n or 0.5
    floats[i, 1] = (n and x[i]) or -1.0
    flags[i] = 1 if n and x[i] > 0.0 else 0            # a condition may mix bools and numbers


def test_and_or_give_pythons_operand_not_a_bool():
    """``n or 7`` is n when n is truthy, else 7; it gave int(True) = 1."""
    a = np.array([0, 3, -2, 0, 5], np.int64)
    x = np.array([0.0, 1.5, 0.0, NAN, -2.0])
    ints, floats, flags = np.zeros((5, 2), np.int64), np.zeros((5, 2)), np.zeros(5, np.int64)
    and_or_value_kernel(a, x, ints, floats, flags, grid=5)
    pairs = list(zip(a.tolist(), x.tolist()))
    assert [list(r) for r in ints] == [[n or 7, n and 5] for n, _ in pairs]
    assert_same(floats[:, 0], [v or n or 0.5 for n, v in pairs], pairs)
    assert_same(floats[:, 1], [(n and v) or -1.0 for n, v in pairs], pairs)
    assert list(flags) == [1 if n and v > 0.0 else 0 for n, v in pairs]


def test_a_bool_mixed_with_a_number_is_refused_where_python_keeps_the_number():
    """``True if c else 2`` and ``flag | 2`` made the 2 an i1 (0); ``n and flag`` as a value is n or flag."""
    def ternary(x: ado.In[ado.i64], out: ado.Out[ado.i64]):
        i = ado.tid()
        v = True if x[i] > 0 else 2
        out[i] = int(v)

    def bitwise(x: ado.In[ado.i64], out: ado.Out[ado.i64]):
        i = ado.tid()
        flag = x[i] > 0
        out[i] = int(flag | 2)

    def mixed_and(x: ado.In[ado.i64], out: ado.Out[ado.i64]):
        i = ado.tid()
        flag = x[i] > 0
        out[i] = int(x[i] and flag)

    x, out = np.array([-1, 1], np.int64), np.zeros(2, np.int64)
    for kernel, line in ((ternary, r"v = True if x\[i\] > 0 else 2"), (bitwise, r"int\(flag \| 2\)")):
        with pytest.raises(KernelTypeError, match=r"constant 2 used as a bool(.|\n)*" + line):
            ado.kernel(kernel)(x, out, grid=2)
    with pytest.raises(KernelTypeError, match=r"'and' between a bool and a number(.|\n)*int\(x\[i\] and flag\)"):
        ado.kernel(mixed_and)(x, out, grid=2)


def test_negative_indices_do_not_count_from_the_end():
    """``x[-1]`` is the last element in Python: a constant one is refused at compile time (it was a
    BoundsError at run time, or with bounds_check=False a read before the array); a computed one is a
    BoundsError."""
    def last(x: ado.In[ado.f64], out: ado.Out[ado.f64]):
        i = ado.tid()
        out[i] = x[-1]

    def previous(x: ado.In[ado.f64], out: ado.Out[ado.f64]):
        i = ado.tid()
        out[i] = x[i - 1]

    x, out = np.array([1.0, 2.0, 3.0]), np.zeros(3)
    for options in ({}, {"bounds_check": False}):
        with pytest.raises(KernelTypeError, match=r"negative index -1 into array 'x'(.|\n)*out\[i\] = x\[-1\]"):
            ado.kernel(**options)(last)(x, out, grid=3)
    with pytest.raises(ado.BoundsError, match=r"index -1 is out of bounds for axis 0 of array 'x'"):
        ado.kernel(previous)(x, out, grid=3)


@ado.kernel
def range_count_kernel(a: ado.In[ado.i64], b: ado.In[ado.i64], s: ado.In[ado.i64], out: ado.Out[ado.i64]):
    i = ado.tid()
    count = 0
    for j in range(a[i], b[i], s[i]):
        count += 1
        if count > 100:
            break
    out[i] = count


@ado.kernel
def range_count_i32_kernel(a: ado.In[ado.i32], b: ado.In[ado.i32], out: ado.Out[ado.i64]):
    i = ado.tid()
    count = 0
    for j in range(a[i], b[i], 3):
        count += 1
        if count > 100:
            break
    out[i] = count


TOP, BOTTOM = 2 ** 63 - 1, -2 ** 63


def test_a_range_near_the_integer_limit_runs_pythons_iterations_or_stops():
    """``range(2**63 - 3, 2**63 - 1, 5)`` is one iteration; the counter wrapped past the limit and the
    loop ran on (here until its break)."""
    fits = [(TOP - 10, TOP, 5), (TOP - 3, TOP, 3), (BOTTOM + 10, BOTTOM, -5), (0, 2 ** 62, 2 ** 61), (5, 3, 2),
            (TOP - 1, TOP - 5, 7), (BOTTOM + 1, BOTTOM + 9, -3)]
    a, b, s = (np.array(v, np.int64) for v in zip(*fits))
    out = np.zeros(len(fits), np.int64)
    range_count_kernel(a, b, s, out, grid=len(fits))
    assert list(out) == [len(range(*r)) for r in fits]
    for wraps in [(TOP - 3, TOP, 5), (BOTTOM + 2, BOTTOM, -7), (0, TOP, 2 ** 62), (TOP - 10, TOP, 4)]:
        with pytest.raises(KernelFaultError, match=r"range\(\) whose value after the last would pass the limit"):
            start, stop, step = (np.array([0, v], np.int64) for v in wraps)
            stop[0], step[0] = 3, 1
            range_count_kernel(start, stop, step, np.zeros(2, np.int64), grid=2)
    out = np.zeros(2, np.int64)
    range_count_i32_kernel(np.array([2 ** 31 - 7, 0], np.int32), np.array([2 ** 31 - 1, 7], np.int32), out, grid=2)
    assert list(out) == [len(range(2 ** 31 - 7, 2 ** 31 - 1, 3)), len(range(0, 7, 3))]
    with pytest.raises(KernelFaultError, match=r"would pass the limit"):
        range_count_i32_kernel(np.array([2 ** 31 - 5], np.int32), np.array([2 ** 31 - 1], np.int32),
                               np.zeros(1, np.int64), grid=1)


def test_a_constant_range_that_would_pass_the_limit_is_refused():
    def k(out: ado.Out[ado.i64]):
        for j in range(2 ** 63 - 3, 2 ** 63 - 1, 5):
            out[0] = j

    with pytest.raises(KernelTypeError, match=r"passes the limit of ado.i64(.|\n)*for j in range\(2 \*\* 63 - 3"):
        ado.kernel(k)(np.zeros(1, np.int64), grid=1)


@pytest.mark.parametrize("seed", range(8))
def test_random_expressions_against_python(seed, tmp_path):
    """adoffload/testing/python_oracle.py: random int and float expressions (special values half the
    time) against Python's own operators; with builtin min/max back on minnum or float ``//`` as
    floor(a / b), 3 and 6 of these 8 seeds fail."""
    from adoffload.testing.python_oracle import check_case
    outcome, details = check_case(seed, tmp_path)
    assert outcome in ("passed", "refused"), details[:3]
    if outcome == "refused":
        assert "oracle_case" in details[0] and ":" in details[0]     # located, like every refusal
