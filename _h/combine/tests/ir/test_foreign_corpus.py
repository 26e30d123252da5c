"""The foreign-IR corpus (tests/fixtures/foreign/corpus): C from clang 22 at -O0..-O3 (and -O0
with UBSan), Rust from rustc at opt-level 0..3. Every file imports, verifies and round-trips
through export, and every function runs on the host and matches a numpy reference."""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

import adoffload as ado
import adoffload.ir as ir

from .foreign_runtime import provide_runtime

CORPUS = Path(__file__).parent.parent / "fixtures" / "foreign" / "corpus"
C_FILES = ["c_O0.ll", "c_O0_ubsan.ll", "c_O1.ll", "c_O2.ll", "c_O3.ll"]
RUST_FILES = ["rs_O0.ll", "rs_O1.ll", "rs_O2.ll", "rs_O3.ll"]
RNG_SEED = 7


_LOADED: dict[str, tuple] = {}


def load(name: str):
    """The imported module with host stand-ins for its runtime, and the functions that cannot run."""
    if name not in _LOADED:
        mod = ado.from_llvm((CORPUS / name).read_text())
        _LOADED[name] = (mod, provide_runtime(mod.ir))
    return _LOADED[name]


def function(name: str, fn_name: str):
    mod, cannot_run = load(name)
    if fn_name in cannot_run:
        pytest.skip(f"@{fn_name} in {name}: {cannot_run[fn_name]}")
    return mod[fn_name]


@pytest.mark.parametrize("name", C_FILES + RUST_FILES)
def test_corpus_imports_verifies_and_round_trips(name):
    first = load(name)[0].ir      # (with its host stand-ins, which only add bodies)
    ir.verify(first)
    exported = ir.export_module(first)
    second = ir.import_module(exported)
    ir.verify(second)
    assert ir.export_module(second) == exported
    for fn in first.functions.values():   # export drops only the aliasing hints (see llvm_export)
        kept = [i.opcode for i in fn.instructions()
                if getattr(i.callee, "name", "") != "llvm.experimental.noalias.scope.decl"]
        assert kept == [i.opcode for i in second[fn.name].instructions()]


def _rng():
    return np.random.default_rng(RNG_SEED)


# ----------------------------------------------------------------------------- C references

def c_dot(f):
    x, y = _rng().standard_normal((2, 13))
    assert f(13, x, y) == pytest.approx(x @ y, rel=1e-13)


def c_scale_shift(f):
    x, y = _rng().standard_normal(37), np.zeros(37)
    f(37, 1.5, x, y)
    np.testing.assert_allclose(y, 1.5 * x + 1.0, rtol=1e-15)


def c_scale_shift_f32(f):
    x, y = _rng().standard_normal(37).astype(np.float32), np.zeros(37, np.float32)
    f(37, 0.25, x, y)
    np.testing.assert_allclose(y, np.float32(0.25) * x - np.float32(2.5), rtol=1e-6)


COEFFS = [1.0, -0.5, 0.25, -0.125, 0.0625, -0.03125]


def c_horner(f):
    assert f(0.7) == pytest.approx(sum(c * 0.7 ** k for k, c in enumerate(COEFFS)), rel=1e-14)


def c_apply_op(f):
    for k, expected in ((0, 1.3 ** 2), (1, 1.3 ** 3), (2, 0.65), (4, 1.3 ** 3)):
        assert f(k, 1.3) == pytest.approx(expected, rel=1e-15)


def c_projected_norm(f):
    p = np.array([1.0, -2.0, 0.5])
    for axis in range(3):
        r = p.copy()
        r[axis] = 0.0
        assert f(p, axis) == pytest.approx(np.linalg.norm(r), rel=1e-15)


def c_abs_bits(f):
    assert [f(x) for x in (-2.5, 0.0, 3.0)] == [2.5, 0.0, 3.0]


def c_piecewise(f):
    x = 0.4
    for kind, expected in ((0, x * x), (1, math.sin(x)), (2, math.exp(-x)), (7, math.log1p(x * x)), (3, -x)):
        assert f(kind, x) == pytest.approx(expected, rel=1e-15)


def c_heap_prefix(f):
    x = _rng().standard_normal(9)
    assert f(9, x) == pytest.approx(np.concatenate([[0.0], np.cumsum(x * x)]).sum(), rel=1e-13)


def c_memcpy_local(f):
    x = _rng().standard_normal(8)
    buf = x.copy()
    for i in range(1, 8):
        buf[i] += 0.5 * buf[i - 1]
    assert f(x) == pytest.approx(buf[7], rel=1e-14)


def c_forward_sub(f):
    n = 3
    L, b, out = np.arange(9.0), np.array([0.1, 0.2, 0.3]), np.zeros(3)
    f(n, L, b, out)
    expected = np.zeros(3)
    for i in range(n):
        expected[i] = b[i] - sum(L[i * n + j] * expected[j] for j in range(max(i - 1, 0)))
    np.testing.assert_allclose(out, expected, rtol=1e-15)


def c_matvec(f):
    A = _rng().standard_normal((4, 5)).astype(np.float32)
    x, y = _rng().standard_normal(5).astype(np.float32), np.zeros(4, np.float32)
    f(4, 5, A, x, y)
    np.testing.assert_allclose(y, A @ x, rtol=1e-5)


def c_complex_poly(f):
    z, w = complex(0.3, -1.2), complex(2.0, 0.5)
    r = z * z * w + complex(1.0, 2.0)
    assert f(z.real, z.imag, w.real, w.imag) == pytest.approx(r.real + 0.5 * r.imag, rel=1e-14)


def c_libm_mix(f):
    x, y = 1.7, 0.6
    m, e = math.frexp(x)
    expected = (abs(x) ** y + max(x, y) + math.ldexp(m, e - 1) + math.atan2(y, x) + math.tanh(x)
                + y ** (1 / 3) + (x * y + 1.0))
    assert f(x, y) == pytest.approx(expected, rel=1e-14)


def c_libm_f32(f):
    x, y = np.float32(0.8), np.float32(-1.3)
    expected = (np.sqrt(x * x + 1) + np.exp(-y) + np.sqrt(abs(y)) + min(x, y) + np.floor(x) + np.hypot(x, y))
    assert f(float(x), float(y)) == pytest.approx(float(expected), rel=1e-6)


def c_vector_ext(f):
    a, b = 0.3, -1.1
    w = [2 * a + 1, 2 * b + 1]
    assert f(a, b) == pytest.approx(w[1] * a + w[0] * b, rel=1e-15)


def c_int_mix(f):
    k = np.array([5, 12, 7, -1, 3], np.int32)
    x = np.array([0.5, 1.5, -2.0, 9.0, 9.0])
    expected = sum(x[i] * (bin(k[i]).count("1") + (k[i] >> 2) % 5) for i in range(3))
    assert f(5, k, x) == pytest.approx(expected, rel=1e-15)


def c_power_int(f):
    assert f(1.1, 13) == pytest.approx(1.1 ** 13, rel=1e-14)
    assert f(1.1, -3) == 1.0


def c_smooth(f):
    x, y = _rng().standard_normal(11), np.zeros(11)
    f(11, x, y)
    padded = np.concatenate([[x[0]], x, [x[-1]]])
    m = 0.25 * padded[:-2] + 0.5 * x + 0.25 * padded[2:]
    np.testing.assert_allclose(y, np.where(m > 0, m, 0.1 * m), rtol=1e-15)


def c_histogram_mean(f):
    x = _rng().random(50)
    bins = np.clip((x * 10).astype(int), 0, 9)
    assert f(50, x) == pytest.approx(((bins + 0.5) / 10).sum() / 50, rel=1e-14)


C_CASES = {name[2:]: check for name, check in dict(globals()).items() if name.startswith("c_")}


@pytest.mark.parametrize("fn_name", sorted(C_CASES))
@pytest.mark.parametrize("name", C_FILES)
def test_c_function_on_host_matches_reference(name, fn_name):
    C_CASES[fn_name](function(name, fn_name))


def test_c_corpus_cases_cover_every_exported_function():
    mod, _ = load("c_O0.ll")
    exported = {n for n, fn in mod.ir.functions.items() if not fn.is_declaration and fn.linkage == "external"}
    assert exported - {"ubsan_calls"} == set(C_CASES)


def test_ubsan_checks_never_fired():
    """The -O0 UBSan build ran every case above without reporting undefined behaviour (the
    handlers count their calls); this also checks that the handlers are reachable."""
    mod, _ = load("c_O0_ubsan.ll")
    for fn_name, check in C_CASES.items():
        check(mod[fn_name])
    assert mod["ubsan_calls"]() == 0
    assert any(n.startswith("__ubsan_handle_") for n in mod.ir.functions)


# ----------------------------------------------------------------------------- Rust references

def rs_dot(f):
    x, y = _rng().standard_normal((2, 10))
    assert f(x, y, 10) == pytest.approx(x @ y, rel=1e-13)
    assert f(None, None, 0) == 0.0


def rs_gather_sum(f):
    x, idx = _rng().standard_normal(6), np.array([5, 0, 3, 3], np.int64)
    assert f(x, 6, idx, 4) == pytest.approx(sum(x[j] * (i + 1) for i, j in enumerate(idx)), rel=1e-14)


def rs_prefix_mean(f):
    x = _rng().standard_normal(7)
    prefix = np.concatenate([[0.0], np.cumsum(x * x)])
    assert f(x, 7) == pytest.approx(prefix.mean(), rel=1e-14)


def rs_softplus_inplace(f):
    x = _rng().standard_normal(9).astype(np.float32)
    expected = np.log1p(np.exp(np.float32(2.0) * x)) / np.float32(2.0)
    f(x, 9, 2.0)
    np.testing.assert_allclose(x, expected, rtol=1e-5)


def rs_math64(f):
    x, y = 0.8, 1.3
    expected = (abs(x) ** y + x ** 3 + math.sqrt(x * x + 1) + math.sin(x) * math.cos(y) + math.atan2(y, x)
                + math.hypot(x, y) + (x * y + 0.5) + math.tanh(x) + max(x, y) - min(y, 0.0))
    assert f(x, y) == pytest.approx(expected, rel=1e-14)


def rs_math32(f):
    x, y = np.float32(-0.7), np.float32(2.5)
    expected = (np.exp(-x * x) + np.log1p(abs(y)) + np.cbrt(x) + np.clip(y, -1, 1) + np.floor(x) + np.sign(y))
    assert f(float(x), float(y)) == pytest.approx(float(expected), rel=1e-6)


def rs_max_or(f):
    x = np.array([0.5, 3.0, -1.0, 2.0])
    assert f(x, 4) == 3.0 and f(x, 0) == -1.0


def rs_matvec(f):
    a = _rng().standard_normal((3, 4)).astype(np.float32)
    x, y = _rng().standard_normal(4).astype(np.float32), np.zeros(3, np.float32)
    f(a, 3, 4, x, y)
    np.testing.assert_allclose(y, a @ x, rtol=1e-5)


def rs_fixed_point(f):
    assert f(2.0, 1e-12) == pytest.approx(math.sqrt(2.0), rel=1e-12)


def rs_weighted(f):
    codes, x = np.array([0, 1, 2, 3, 5], np.int8), np.array([0.5, -1.5, 0.2, 2.0, 3.0])
    weights = [0.5, 1.5, -2.0, 4.0]
    expected = 0.5 + 1.5 ** 2 + math.exp(0.2) + weights[3] * 2.0 + weights[1] * 3.0
    assert f(codes, x, 5) == pytest.approx(expected, rel=1e-15)


def rs_median(f):
    x = np.array([3.0, -1.0, 2.5, 7.0, 0.0])
    assert f(x, 5) == 2.5 and f(x, 0) == 0.0


RUST_CASES = {name: check for name, check in dict(globals()).items() if name.startswith("rs_")}


@pytest.mark.parametrize("fn_name", sorted(RUST_CASES))
@pytest.mark.parametrize("name", RUST_FILES)
def test_rust_function_on_host_matches_reference(name, fn_name):
    RUST_CASES[fn_name](function(name, fn_name))


def test_rust_corpus_cases_cover_every_exported_function():
    mod, _ = load("rs_O3.ll")
    assert {n for n in mod.ir.functions if n.startswith("rs_")} == set(RUST_CASES)
