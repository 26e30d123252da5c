"""ado.from_llvm: functions from rustc and clang IR called on the host match numpy."""
from pathlib import Path

import numpy as np
import pytest

import adoffload as ado
import adoffload.ir as ir
from adoffload.errors import ArgumentError, IRError

from .snippets import WITH_ALLOCAS

FIXTURES = Path(__file__).parent.parent / "fixtures" / "foreign"
# (file, dtype of poly_exp, dtype of sum_until's array)
SOURCES = [("rust_kernels.ll", np.float32, np.float64), ("clang_kernels.ll", np.float64, np.float32)]


@pytest.fixture(scope="module", params=SOURCES, ids=[s[0] for s in SOURCES])
def foreign(request):
    name, poly_dtype, sum_dtype = request.param
    return ado.from_llvm((FIXTURES / name).read_text()), poly_dtype, sum_dtype


def lj_reference(r2, sigma, epsilon):
    s6 = (sigma * sigma / r2) ** 3
    return 4.0 * epsilon * (s6 * s6 - s6)


def test_lj(foreign):
    mod, _, _ = foreign
    for r2, sigma, epsilon in [(1.2, 1.0, 1.0), (0.9, 1.1, 0.3), (4.0, 0.8, 2.5)]:
        assert mod["lj"](r2, sigma, epsilon) == pytest.approx(lj_reference(r2, sigma, epsilon), rel=1e-13)


def test_axpy(foreign):
    mod, _, _ = foreign
    rng = np.random.default_rng(0)
    x = rng.standard_normal(37).astype(np.float32)
    y = rng.standard_normal(37).astype(np.float32)
    expected = y + np.float32(0.75) * x
    mod["axpy"](37, 0.75, x, y)
    np.testing.assert_allclose(y, expected, rtol=1e-6)


def test_poly_exp(foreign):
    mod, dtype, _ = foreign
    for x in (-1.3, 0.0, 0.4, 2.0):
        xd = dtype(x)
        expected = (1 + xd * (dtype(0.5) + xd * (dtype(0.25) - dtype(0.125) * xd))) * np.exp(-xd * xd)
        assert mod["poly_exp"](x) == pytest.approx(float(expected), rel=1e-6 if dtype == np.float32 else 1e-14)


def sum_until_reference(x, limit):
    total = 0.0
    for v in x:
        total += v
        if total > limit:
            break
    return total


@pytest.mark.parametrize("limit", [-1.0, 2.5, 1e9])
def test_sum_until_data_dependent_exit(foreign, limit):
    mod, _, dtype = foreign
    x = np.linspace(0.25, 2.0, 8).astype(dtype)
    got = mod["sum_until"](len(x), x, limit)
    assert got == pytest.approx(sum_until_reference(x.astype(np.float64), limit), rel=1e-6)


def test_handles(foreign):
    mod, _, _ = foreign
    lj = mod["lj"]
    assert isinstance(lj.ir, ir.Function) and lj.module is mod and lj.ir.parent is mod.ir
    assert set(mod) >= {"lj", "axpy", "poly_exp", "sum_until"} and "lj" in mod


@pytest.mark.parametrize("call, words", [
    (lambda m: m["lj"](1.0, 2.0), ["takes 3 arguments, got 2"]),
    (lambda m: m["lj"](1.0, "2", 1.0), ["argument 1", "str"]),
    (lambda m: m["axpy"](4.0, 1.0, np.zeros(4, np.float32), np.zeros(4, np.float32)),
     ["argument 0", "an integer is needed"]),
    (lambda m: m["axpy"](4, 1.0, np.zeros(4, np.float64), np.zeros(4, np.float32)),
     ["argument 2", "float32", "float64"]),
    (lambda m: m["axpy"](4, 1.0, np.zeros(8, np.float32)[::2], np.zeros(4, np.float32)),
     ["argument 2", "C-contiguous"]),
    (lambda m: m["axpy"](4, 1.0, [0.0] * 4, np.zeros(4, np.float32)), ["argument 2", "numpy array", "list"]),
])
def test_argument_errors(foreign, call, words):
    mod, _, _ = foreign
    with pytest.raises(ArgumentError) as info:
        call(mod)
    for word in words:
        assert word in str(info.value)


def test_unknown_function(foreign):
    mod, _, _ = foreign
    with pytest.raises(IRError, match="no function @nope; it defines: .*lj"):
        mod["nope"]


def test_jit_is_cached_and_rebuilt_when_functions_are_added():
    mod = ado.from_llvm((FIXTURES / "rust_kernels.ll").read_text())
    mod["lj"](1.0, 1.0, 1.0)
    program = mod.program()
    assert mod.program() is program
    fn = mod.ir.add_function(ir.Function("twice", ir.FunctionType(ir.f64, (ir.f64,)), [ir.Argument(ir.f64, "x", 0)]))
    b = ir.Builder(fn.add_block("entry"))
    b.ret(b.fadd(fn.args[0], fn.args[0]))
    assert mod["twice"](2.25) == 4.5
    assert mod.program() is not program


def test_canonical_false_keeps_the_input_as_is():
    mod = ado.from_llvm(WITH_ALLOCAS, canonical=False)
    assert any(i.opcode == "alloca" for i in mod["with_allocas"].ir.instructions())
    assert mod["with_allocas"](2.0, 3) == 6.0


@pytest.mark.parametrize("canonical", [True, False])
def test_bitcode_input(canonical):
    import llvmlite.binding as llvm
    bitcode = llvm.parse_assembly((FIXTURES / "clang_kernels.ll").read_text()).as_bitcode()
    mod = ado.from_llvm(bitcode, canonical=canonical)
    assert mod["lj"](1.2, 1.0, 1.0) == pytest.approx(lj_reference(1.2, 1.0, 1.0), rel=1e-13)
