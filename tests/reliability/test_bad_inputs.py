"""The bad-input corpus: each input gets a clear adoffload.Error subclass or a documented
correct result -- never a crash or a wrong answer (docs/reliability.md lists them)."""
import ctypes

import llvmlite.binding as llvm
import numpy as np
import pytest

import adoffload as ado
from adoffload.language import status as abi_status
from adoffload.codegen.slots import pack_slots
from adoffload.errors import (ArgumentError, BoundsError, CompilationError, GridError, IRError,
                              KernelFaultError, UnsupportedConstructError)

GOOD_IR = "define double @f(double %x) {\n  %y = fmul double %x, %x\n  ret double %y\n}\n"


# ---- foreign LLVM IR ------------------------------------------------------------------------

@pytest.mark.parametrize("source", [
    "this is not llvm",
    "define double @f(double %x) {\n  %y = fadd double %x,",             # truncated text
    "define double @f(double %x) {\n  ret i32 0\n}\n",                   # type error
    "define double @f(double %x) {\n  ret double %undefined\n}\n",       # undefined value
    b"BC\xc0\xde" + b"\x00" * 40,                                       # bitcode magic, no content
    bytes(range(256)),                                                  # random bytes
], ids=["garbage", "truncated", "type-error", "undefined-value", "bitcode-header-only", "random-bytes"])
def test_malformed_llvm_is_an_ir_error(source):
    with pytest.raises(IRError, match="could not parse or verify"):
        ado.from_llvm(source)


def test_truncated_bitcode_is_an_ir_error_and_whole_bitcode_works():
    bitcode = llvm.parse_assembly(GOOD_IR).as_bitcode()
    assert ado.from_llvm(bitcode)["f"](3.0) == 9.0
    for cut in (8, len(bitcode) // 2, len(bitcode) - 4):
        with pytest.raises(IRError):
            ado.from_llvm(bitcode[:cut])


def test_inline_asm_is_imported_and_refused_on_an_active_path():
    source = ('define double @f(double %x) {\n'
              '  %y = call double asm "sqrtsd $1, $0", "=x,x"(double %x)\n  ret double %y\n}\n')
    fn = ado.from_llvm(source)["f"]
    assert fn(4.0) == 2.0
    from adoffload import enzyme as ez
    with pytest.raises(ado.DifferentiationError, match="call asm"):
        ez.autodiff(ez.Reverse, fn, ez.Active(4.0))


INVOKE_IR = """
declare void @may_throw()
declare i32 @__gxx_personality_v0(...)
define double @f(double %x) personality ptr @__gxx_personality_v0 {
entry:
  invoke void @may_throw() to label %ok unwind label %bad
ok:
  %y = fmul double %x, %x
  ret double %y
bad:
  %lp = landingpad { ptr, i32 } cleanup
  resume { ptr, i32 } %lp
}
"""


def test_invoke_of_an_undefined_function_is_refused_before_running():
    """Canonicalization turns this invoke into a call of an external function nothing defines;
    running it used to jump to address 0 (a segfault). The host JIT now refuses it."""
    module = ado.from_llvm(INVOKE_IR)
    with pytest.raises(CompilationError, match="@may_throw.*no loaded library defines"):
        module["f"](2.0)
    from adoffload.enzyme import api
    with pytest.raises(CompilationError, match="may_throw"):
        api.autodiff(api.Reverse, module["f"], api.Active(2.0))


def test_unknown_function_name_in_a_foreign_module():
    with pytest.raises(IRError, match="no function @g; it defines: f"):
        ado.from_llvm(GOOD_IR)["g"]


# ---- unsupported Python in kernels ------------------------------------------------------------

def k_with(out: ado.Out[ado.f64]):
    i = ado.tid()
    with open("x"):
        out[i] = 1.0


def k_try(out: ado.Out[ado.f64]):
    i = ado.tid()
    try:
        out[i] = 1.0
    except Exception:
        pass


def k_lambda(out: ado.Out[ado.f64]):
    i = ado.tid()
    f = lambda v: v * 2.0  # noqa: E731
    out[i] = f(1.0)


def k_comprehension(out: ado.Out[ado.f64]):
    i = ado.tid()
    values = [v for v in range(3)]
    out[i] = values[0]


def k_string(out: ado.Out[ado.f64]):
    i = ado.tid()
    s = "hello"
    out[i] = 1.0


def k_generator(out: ado.Out[ado.f64]):
    i = ado.tid()
    yield i
    out[i] = 1.0


@ado.func
def factorial(n: ado.i64) -> ado.i64:
    return 1 if n <= 0 else n * factorial(n - 1)


def k_recursion(out: ado.Out[ado.i64]):
    i = ado.tid()
    out[i] = factorial(i)


@pytest.mark.parametrize("fn, words", [
    (k_with, "'with'"), (k_try, "'try'"), (k_lambda, "lambda"), (k_comprehension, "comprehension"),
    (k_string, "str constants"), (k_generator, "'yield'"), (k_recursion, "recursion"),
])
def test_unsupported_python_is_named_with_its_location(fn, words):
    with pytest.raises(UnsupportedConstructError) as info:
        ado.kernel(fn)
    message = str(info.value)
    assert words in message.lower() or words in message
    assert "test_bad_inputs.py:" in message and "^" in message     # file:line:col and a caret


# ---- calling kernels with bad arguments --------------------------------------------------------

@ado.kernel
def twice(x: ado.In[ado.f64], out: ado.Out[ado.f64]):
    i = ado.tid()
    out[i] = x[i] * 2.0


@ado.kernel
def sum_rows(x: ado.In[ado.f64, 2], out: ado.Out[ado.f64]):
    i = ado.tid()
    total = 0.0
    for j in range(x.shape[1]):
        total += x[i, j]
    out[i] = total


@pytest.mark.parametrize("args, kwargs, match", [
    ((np.zeros(4),), {}, "missing argument"),
    ((np.zeros(4), np.zeros(4), np.zeros(4)), {}, "takes 2 arguments"),
    ((np.zeros(4, np.float32), np.zeros(4)), {}, "expected dtype float64"),
    ((np.zeros((2, 2)), np.zeros(4)), {}, "expected a 1-D array"),
    ((3.0, np.zeros(4)), {}, "expected an array"),
    (([1.0, 2.0], np.zeros(4)), {}, "expected a numpy array"),
    ((np.zeros(8)[::2], np.zeros(4)), {}, "not C-contiguous"),
    ((np.zeros(4), np.zeros(4)), {"y": 1}, "no parameter 'y'"),
])
def test_wrong_arguments_are_argument_errors_before_anything_runs(args, kwargs, match):
    with pytest.raises(ArgumentError, match=match):
        twice(*args, **kwargs, grid=4)


def test_read_only_output_is_refused():
    out = np.zeros(4)
    out.setflags(write=False)
    with pytest.raises(ArgumentError, match="read-only"):
        twice(np.ones(4), out, grid=4)


def test_fortran_ordered_2d_array_is_refused():
    with pytest.raises(ArgumentError, match="not C-contiguous"):
        sum_rows(np.asfortranarray(np.ones((3, 2))), np.zeros(3), grid=3)


def test_misaligned_view_is_refused_with_the_fix_named():
    raw = bytearray(8 * 4 + 1)
    misaligned = np.frombuffer(raw, dtype=np.float64, count=4, offset=1)     # writable, C-contiguous
    assert misaligned.flags.c_contiguous and not misaligned.flags.aligned
    with pytest.raises(ArgumentError, match="not a multiple of its element size 8.*np.require"):
        twice(misaligned, np.zeros(4), grid=4)
    with pytest.raises(ArgumentError, match="parameter 'out'.*not a multiple"):
        twice(np.ones(4), misaligned, grid=4)
    out = np.zeros(4)
    twice(np.require(misaligned, requirements="CA"), out, grid=4)             # the named fix works
    np.testing.assert_array_equal(out, np.zeros(4))


@pytest.mark.parametrize("grid, match", [
    (-1, ">= 0"), ((2, 2), "1-D grid"), ("4", "grid must be an int"), ((4.0,), "grid must be an int"),
    (True, "grid must be an int"), (2**62 + 1, "more than"),
])
def test_bad_grids_are_grid_errors(grid, match):
    with pytest.raises(GridError, match=match):
        twice(np.ones(4), np.zeros(4), grid=grid)


# ---- IEEE values, empty arrays, empty grids -----------------------------------------------------

@pytest.mark.filterwarnings("ignore:overflow encountered")
def test_nan_and_inf_propagate_as_ieee_says():
    x = np.array([np.nan, np.inf, -np.inf, -0.0, 1e308])
    out = np.zeros(5)
    twice(x, out, grid=5)
    np.testing.assert_array_equal(out, x * 2.0)                 # nan, inf, -inf, -0.0, inf
    assert np.signbit(out[3])
    d_x = np.zeros(5)
    ado.vjp(twice, ["x"])(x, np.zeros(5), d_x=d_x, d_out=np.array([1.0, 1.0, 1.0, np.nan, np.inf]), grid=5)
    np.testing.assert_array_equal(d_x, [2.0, 2.0, 2.0, np.nan, np.inf])


def test_zero_grid_runs_nothing_and_zero_size_arrays_are_fine():
    out = np.full(3, 7.0)
    twice(np.ones(3), out, grid=0)
    assert (out == 7.0).all()
    twice(np.zeros(0), np.zeros(0), grid=0)
    sum_rows(np.zeros((3, 0)), out, grid=3)                     # empty rows sum to zero
    np.testing.assert_array_equal(out, np.zeros(3))


def test_a_grid_larger_than_an_empty_array_is_a_bounds_error():
    with pytest.raises(BoundsError, match="index 0 is out of bounds for axis 0 of array 'x' with shape \\(0,\\)"):
        twice(np.zeros(0), np.zeros(0), grid=1)


# ---- 64-bit index math in the entry ----------------------------------------------------------

@ado.kernel
def record_linear(base: ado.i64, out: ado.Out[ado.i64]):
    i = ado.tid()
    out[i - base] = i


@ado.kernel
def record_2d(base: ado.i64, out: ado.Out[ado.i64, 2]):
    i, j = ado.tid()
    out[i - base, j] = i * 10 + j


def _run_entry(kernel, values, grid, start, end):
    """Call the compiled host entry directly for linear threads [start, end) of ``grid``."""
    compiled = kernel.compiled("host")
    status = abi_status.new_record()
    pointers = [v.ctypes.data if isinstance(v, np.ndarray) else 0 for v in values]
    from adoffload.kernels.launch import flat_values
    slots = pack_slots(flat_values(kernel.signature, values, pointers), compiled.flat_types, grid,
                       status.ctypes.data)
    compiled.artifact.entry(compiled.entry_name)(slots.ctypes.data, start, end)
    abi_status.raise_for_status(status, kernel.signature, values)


@pytest.mark.parametrize("start", [2**31 - 2, 2**32 - 1, 2**40 + 7])
def test_entry_thread_ids_past_2_31_are_exact(start):
    out = np.zeros(3, np.int64)
    _run_entry(record_linear, [start, out], (2**41,), start, start + 3)
    assert out.tolist() == [start, start + 1, start + 2]


def test_entry_decomposes_a_2d_grid_with_64_bit_math():
    rows = 2**31 + 5
    out = np.zeros((2, 3), np.int64)
    base = 2**31 + 1                           # linear ids of rows base, base + 1
    _run_entry(record_2d, [base, out], (rows, 3), base * 3, (base + 2) * 3)
    assert out.tolist() == [[base * 10 + j for j in range(3)], [(base + 1) * 10 + j for j in range(3)]]


def test_host_launch_splits_huge_grids_exactly():
    """The host entry trusts [start, end) to lie inside the grid; the launcher's split of a
    grid past 2**32 threads covers it exactly, in order, without running it."""
    from adoffload.runtime import get_device
    total = 2**32 + 5
    chunks = get_device("cpu").chunks(total)
    assert chunks[0][0] == 0 and chunks[-1][1] == total
    assert all(a[1] == b[0] for a, b in zip(chunks, chunks[1:]))


# ---- integer index width ---------------------------------------------------------------------

@ado.kernel
def mixed_widths(n: ado.i32, out: ado.Out[ado.i64]):
    i = ado.tid()
    out[i] = n + i                  # i32 + i64 -> i64: no overflow


@ado.kernel
def i32_only(n: ado.i32, out: ado.Out[ado.i64]):
    i = ado.tid()
    out[i] = n + ado.i32(1)         # i32 + i32 wraps like numpy int32


@ado.kernel
def i32_index(n: ado.i32, x: ado.In[ado.f64], out: ado.Out[ado.f64]):
    i = ado.tid()
    k = n * ado.i32(2)
    out[i] = x[k]


def test_i32_arithmetic_promotes_with_i64_and_wraps_alone():
    out = np.zeros(2, np.int64)
    mixed_widths(2**31 - 1, out, grid=2)
    assert out.tolist() == [2**31 - 1, 2**31]
    i32_only(2**31 - 1, out, grid=2)
    assert out.tolist() == [int(np.int32(-2**31))] * 2


def test_an_overflowed_i32_index_is_a_bounds_error_not_a_wild_read():
    with pytest.raises(BoundsError, match="index -2147483646 is out of bounds"):
        i32_index(2**30 + 1, np.zeros(4), np.zeros(1), grid=1)
    out = np.zeros(1)
    i32_index(1, np.arange(4.0), out, grid=1)
    assert out[0] == 2.0


# ---- bounds in every rank, local arrays, assert -----------------------------------------------

@ado.kernel
def read1(x: ado.In[ado.f64], out: ado.Out[ado.f64]):
    i = ado.tid()
    out[i] = x[i + 1]


@ado.kernel
def read2(x: ado.In[ado.f64, 2], out: ado.Out[ado.f64]):
    i = ado.tid()
    out[i] = x[i, i + 1]


@ado.kernel
def read3(x: ado.In[ado.f64, 3], out: ado.Out[ado.f64]):
    i = ado.tid()
    out[i] = x[0, 0, i - 1]


@ado.kernel
def write_local(k: ado.In[ado.i64], out: ado.Out[ado.f64]):
    i = ado.tid()
    t = ado.zeros(3, ado.f64)
    t[k[i]] = 1.0
    out[i] = t[0]


@pytest.mark.parametrize("call, match", [
    (lambda: read1(np.zeros(3), np.zeros(3), grid=3), "index 3 is out of bounds for axis 0 of array 'x' with shape \\(3,\\)"),
    (lambda: read2(np.zeros((3, 3)), np.zeros(3), grid=3), "index 3 is out of bounds for axis 1 of array 'x' with shape \\(3, 3\\)"),
    (lambda: read3(np.zeros((2, 2, 3)), np.zeros(3), grid=3), "index -1 is out of bounds for axis 2 of array 'x'"),
    (lambda: write_local(np.array([0, 5]), np.zeros(2), grid=2), "index 5 is out of bounds for axis 0 of local array #0"),
])
def test_bounds_violations_in_every_rank_and_local_arrays(call, match):
    with pytest.raises(BoundsError, match=match):
        call()


def test_in_bounds_threads_still_ran_and_memory_was_not_touched():
    guard = np.full(5, 7.0)
    x = guard[1:4]                      # a view inside a bigger buffer
    x[:] = [1.0, 2.0, 3.0]
    out = np.zeros(3)
    with pytest.raises(BoundsError):
        read1(x, out, grid=3)
    assert out[:2].tolist() == [2.0, 3.0] and guard[0] == 7.0 and guard[4] == 7.0


@ado.kernel
def checked_sqrt(x: ado.In[ado.f64], out: ado.Out[ado.f64]):
    i = ado.tid()
    assert x[i] >= 0.0
    out[i] = ado.sqrt(x[i])


def test_assert_failure_names_the_line_and_later_launches_work():
    with pytest.raises(KernelFaultError, match="an assert failed at line \\d+"):
        checked_sqrt(np.array([4.0, -1.0]), np.zeros(2), grid=2)
    out = np.zeros(2)
    checked_sqrt(np.array([4.0, 9.0]), out, grid=2)
    assert out.tolist() == [2.0, 3.0]
