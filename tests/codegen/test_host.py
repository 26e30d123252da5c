import math

import numpy as np
import pytest

from adoffload.language import status as abi_status
from adoffload.codegen import abi
from adoffload.codegen.host.program import HostProgram

from . import bodies


def host_entry(text, name, types, rank):
    program = HostProgram(abi.add_host_entry(text, name, types, rank))
    return program, program.entry(abi.host_entry_name(name))


def test_axpy_matches_numpy():
    n = 1000
    rng = np.random.default_rng(0)
    x, y = rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)
    out = np.zeros(n, np.float32)
    status = abi_status.new_record()
    program, run = host_entry(bodies.AXPY, "axpy", bodies.AXPY_TYPES, 1)
    slots = abi.pack_slots([2.5, x, n, y, n, out, n], bodies.AXPY_TYPES, [n], status)
    run(slots.ctypes.data, 0, 400)
    run(slots.ctypes.data, 400, n)
    np.testing.assert_allclose(out, np.float32(2.5) * x + y, rtol=1e-6)
    assert status[0] == abi_status.OK


def test_axpy_out_of_bounds_sets_status_and_skips_the_access():
    n = 10
    x, y = np.ones(n, np.float32), np.ones(n, np.float32)
    out = np.zeros(n - 3, np.float32)      # out is too short for the grid
    guard = np.full(4, 7.0, np.float32)
    status = abi_status.new_record()
    _, run = host_entry(bodies.AXPY, "axpy", bodies.AXPY_TYPES, 1)
    slots = abi.pack_slots([1.0, x, n, y, n, out, n - 3], bodies.AXPY_TYPES, [n], status)
    run(slots.ctypes.data, 0, n)
    assert list(status) == [abi_status.OUT_OF_BOUNDS, 3, n - 3, 0]
    np.testing.assert_array_equal(out, np.full(n - 3, 2.0, np.float32))
    np.testing.assert_array_equal(guard, 7.0)


@pytest.mark.parametrize("flag", [False, True])
def test_grid2_row_major_with_bool_and_i32(flag):
    shape = (7, 13)
    out = np.zeros(shape)
    status = abi_status.new_record()
    _, run = host_entry(bodies.GRID2, "grid2", bodies.GRID2_TYPES, 2)
    slots = abi.pack_slots([0.5, flag, -3, out, *shape], bodies.GRID2_TYPES, shape, status)
    total = shape[0] * shape[1]
    for start in range(0, total, 17):          # odd chunks start mid-row
        run(slots.ctypes.data, start, min(start + 17, total))
    i, j = np.indices(shape)
    np.testing.assert_array_equal(out, 0.5 * (i * 100 + j) - 3 + (0.5 if flag else 0.0))


def test_grid3_and_dotted_body_name():
    shape = (3, 5, 4)
    out = np.full(shape, -1, np.int64)
    status = abi_status.new_record()
    _, run = host_entry(bodies.GRID3, "grid3.fwd", bodies.GRID3_TYPES, 3)
    slots = abi.pack_slots([out, *shape], bodies.GRID3_TYPES, shape, status)
    run(slots.ctypes.data, 5, 41)
    i, j, l = np.indices(shape)
    expect = (i * 10000 + j * 100 + l).ravel()
    got = out.ravel()
    np.testing.assert_array_equal(got[5:41], expect[5:41])
    assert (got[:5] == -1).all() and (got[41:] == -1).all()


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_math_intrinsics_resolve_to_libm(dtype):
    ty = "float" if dtype == np.float32 else "double"
    n = 257
    x = np.linspace(-3, 3, n).astype(dtype)
    out = np.zeros((bodies.MATH_OPS, n), dtype)
    status = abi_status.new_record()
    _, run = host_entry(bodies.math_body(ty), "mathfn", bodies.MATH_TYPES, 1)
    run(abi.pack_slots([x, n, out, *out.shape], bodies.MATH_TYPES, [n], status).ctypes.data, 0, n)
    xd = x.astype(np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        expect = [np.sin(xd), np.exp(xd), np.power(xd, 1.5), [math.erf(v) for v in xd], np.tanh(xd),
                  np.arctan2(xd, 0.75), 1.0 / np.sqrt(xd)]
    tol = 1e-5 if dtype == np.float32 else 1e-13
    for row, e in enumerate(expect):
        np.testing.assert_allclose(out[row], np.asarray(e, dtype), rtol=tol, atol=tol, equal_nan=True)


def test_signature_mismatch_is_reported():
    from adoffload.errors import IRError
    with pytest.raises(IRError, match="takes"):
        abi.add_host_entry(bodies.AXPY, "axpy", bodies.AXPY_TYPES[:-1], 1)
    with pytest.raises(IRError, match="not in the module"):
        abi.add_host_entry(bodies.AXPY, "nope", bodies.AXPY_TYPES, 1)


def test_pack_slots_layout():
    status = abi_status.new_record()
    slots = abi.pack_slots([1.5, True, -2, 3, 2**40], ["float", "i1", "i32", "ptr", "i64"], [4, 5], status)
    raw = slots.view(np.uint8)
    assert np.frombuffer(raw[0:4].tobytes(), np.float32)[0] == 1.5
    assert raw[8] == 1 and not raw[9:16].any()
    assert np.frombuffer(raw[16:20].tobytes(), np.int32)[0] == -2
    assert slots[3] == 3 and slots[4] == 2**40
    assert list(slots[5:7]) == [4, 5] and slots[7] == status.ctypes.data


def _calls_rsqrt(declaration: str, definition: str = "") -> str:
    return f"""{declaration}
{definition}
define double @f(double %x) {{
  %r = call double @rsqrt(double %x)
  ret double %r
}}
"""


def test_rsqrt_is_defined_as_ieee_one_over_sqrt_and_inlined():
    import ctypes
    program = HostProgram(_calls_rsqrt("declare double @rsqrt(double)"))
    f = program.function("f", ctypes.c_double, ctypes.c_double)
    assert [f(v) for v in (0.25, 3.0)] == [2.0, 1.0 / math.sqrt(3.0)]
    assert "@rsqrt" not in program.optimized_ir.split("define double @f")[1].split("}")[0]    # inlined


def test_a_module_own_rsqrt_is_kept_and_another_signature_is_not_replaced():
    import ctypes
    from adoffload.errors import CompilationError
    own = "define double @rsqrt(double %x) {\n  ret double 7.0\n}"
    program = HostProgram(_calls_rsqrt("", own))
    assert program.function("f", ctypes.c_double, ctypes.c_double)(4.0) == 7.0
    with pytest.raises(CompilationError, match="@rsqrt"):
        HostProgram("declare float @rsqrt(float, float)\ndefine float @g(float %x) {\n"
                    "  %r = call float @rsqrt(float %x, float %x)\n  ret float %r\n}\n")


def test_an_external_global_nothing_defines_is_refused_not_read_at_address_zero():
    """numba calls a recursive @njit function through ``@.numba.unresolved$<fn>``, a slot it fills
    when it links; MCJIT placed such a global at address 0 and the first load crashed the process.
    An ``extern_weak`` global stays allowed (its address is null by design)."""
    from adoffload.codegen.host.program import HostProgram
    from adoffload.errors import CompilationError
    with pytest.raises(CompilationError, match=r"reads @missing_slot"):
        HostProgram("@missing_slot = external global ptr\n"
                    "define ptr @f() {\n  %p = load ptr, ptr @missing_slot\n  ret ptr %p\n}\n")
    HostProgram("@maybe = extern_weak global i32\n"
                "define i1 @g() {\n  %c = icmp eq ptr @maybe, null\n  ret i1 %c\n}\n")
