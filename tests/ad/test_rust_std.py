"""Rust's std library under adoffload, compiled here by the machine's rustc (skipped without it):

* ``Vec`` growth at every opt level (tests/fixtures/foreign/rust_std/vec.rs: push, with_capacity,
  extend, reserve, clone, collect). At -O0/-O1 rustc calls liballoc's RawVecInner functions, which the
  .ll only declares; adoffload defines them (ir/rust_alloc.py) for the releases it knows, and refuses
  the others by name. Values against numpy, tangents against central differences, and forward
  against reverse through <J v, w> = <v, J^T w>.
* Tables of ``dyn Fn`` closures and a sort with a comparison closure, built with rustc's default
  panic=unwind (rust_std/closures.rs): their landing pads end in ``resume``, which the backend lowers
  to a call of ``_Unwind_Resume``; unresolved, MCJIT left the program's later relocations unapplied
  and the first allocation jumped to address 0. They run; a call through a vtable the engine cannot
  resolve is refused by name.
"""
from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

import adoffload as ado
from adoffload import enzyme as ez
from adoffload.errors import CompilationError, DifferentiationError
from adoffload.ir.rust_alloc import RUSTC_RELEASES, rustc_release

SOURCES = Path(__file__).parents[1] / "fixtures" / "foreign" / "rust_std"
RUSTC = shutil.which("rustc")
pytestmark = pytest.mark.skipif(RUSTC is None, reason="needs rustc on PATH (compiles rust_std/*.rs)")


def _nightly() -> bool:
    try:
        return RUSTC is not None and subprocess.run([RUSTC, "+nightly", "--version"], capture_output=True).returncode == 0
    except OSError:
        return False


# the machine's rustc at every level; a nightly toolchain where rustup has one, at the levels where
# liballoc's functions are called (its Result<(), TryReserveError> has another niche than 1.95's)
LEVELS = [("", 0), ("", 1), ("", 2), ("", 3)] + ([("+nightly", 0), ("+nightly", 1)] if _nightly() else [])


def _compile(tmp_path_factory, source: str, opt: int, panic: str = "abort", toolchain: str = "") -> str:
    out = tmp_path_factory.mktemp("rust") / f"{source}_O{opt}_{panic}.ll"
    subprocess.run([RUSTC, *([toolchain] if toolchain else []), "--crate-type=cdylib", f"-Copt-level={opt}", f"-Cpanic={panic}", "--emit=llvm-ir",
                    "-o", str(out), str(SOURCES / f"{source}.rs")], check=True, capture_output=True)
    return out.read_text()


@pytest.fixture(scope="module", params=LEVELS, ids=lambda p: f"{p[0][1:]}O{p[1]}")
def vec_module(request, tmp_path_factory):
    toolchain, opt = request.param
    text = _compile(tmp_path_factory, "vec", opt, toolchain=toolchain)
    if opt < 2 and rustc_release(text) not in RUSTC_RELEASES:
        pytest.skip(f"rustc {rustc_release(text)}: adoffload defines liballoc's RawVecInner for "
                    f"{sorted(RUSTC_RELEASES)}")
    return opt, text, ado.from_llvm(text)


def _push(x):
    v = [u for a in x for u in (a * a, np.sin(a))]
    return sum(b * (i + 1) for i, b in enumerate(v))


def _extend(x):
    p = 0.0
    for b in [1.0, *(2 * x), *x]:
        p = 0.5 * p + b * b
    return p


def _reserve(x):
    v = np.r_[2.0, x]
    return float(v @ v) + 9 * x[0] * x[-1]


REFERENCES = {"rv_push": _push, "rv_capacity": lambda x: float(np.exp(x) @ x), "rv_extend": _extend,
              "rv_reserve": _reserve,
              # try_reserve Ok, try_reserve_exact Ok (capacity 3 n), an overflowing try_reserve Err
              "rv_try_reserve": lambda x: 7000.0 + 3 * len(x) + float(np.sum(x))}


@pytest.mark.parametrize("name", sorted(REFERENCES))
def test_vec_growth_runs_and_differentiates(vec_module, name):
    level, text, module = vec_module
    if level < 2:
        assert "RawVecInner" in text          # what the test is about: -O0/-O1 call into liballoc
    fn = module[name]
    rng = np.random.default_rng(5)
    n = 7                                     # past the first capacities (4, then 8 after doubling)
    x, v = rng.uniform(0.2, 1.2, n), rng.standard_normal(n)
    assert fn(x.copy(), n) == pytest.approx(REFERENCES[name](x), rel=1e-13)
    h = 1e-6
    fd = (fn(x + h * v, n) - fn(x - h * v, n)) / (2 * h)
    jv = ez.autodiff(ez.Forward, fn, ez.Duplicated(x.copy(), v.copy()), n)
    grad = np.zeros(n)
    ez.autodiff(ez.Reverse, fn, ez.Duplicated(x.copy(), grad), n)
    assert jv == pytest.approx(fd, rel=1e-6, abs=1e-8)
    assert float(grad @ v) == pytest.approx(jv, rel=1e-12, abs=1e-12)


def test_an_unknown_rustc_release_is_refused_by_name(tmp_path_factory):
    """liballoc's private functions belong to one release: for another, the declarations stay, and the
    host refuses the call naming them (no guessed body, no jump to address 0)."""
    text = _compile(tmp_path_factory, "vec", 0)
    old = re.sub(r'!"rustc version \d+\.\d+\.', '!"rustc version 1.60.', text)
    assert rustc_release(old) == (1, 60)
    fn = ado.from_llvm(old)["rv_push"]
    with pytest.raises(CompilationError, match="RawVecInner"):
        fn(np.ones(3), 3)


@pytest.fixture(scope="module", params=[(2, "unwind"), (3, "unwind"), (2, "abort"), (0, "unwind")],
                ids=lambda p: f"O{p[0]}-{p[1]}")
def closures(request, tmp_path_factory):
    opt, panic = request.param
    text = _compile(tmp_path_factory, "closures", opt, panic)
    if opt < 2 and rustc_release(text) not in RUSTC_RELEASES:
        pytest.skip(f"rustc {rustc_release(text)}: no RawVecInner bodies for it")
    return opt, ado.from_llvm(text)


def _table(x, y):
    return (x * x + np.sin(x) + x * y + x) * y


def _boxed(x, y, n):
    return sum(x * (k + 1) if k % 2 == 0 else np.sin(x * (k + 1)) + y for k in range(n))


def test_dyn_fn_tables_run(closures):
    _, module = closures
    x, y = 0.7, 1.3
    assert module["rd_table"](x, y) == pytest.approx(_table(x, y), rel=1e-14)
    for n in (0, 1, 5, 9):                    # Vec<Box<dyn Fn>> grown past its capacity
        assert module["rd_boxed"](x, y, n) == pytest.approx(_boxed(x, y, n), rel=1e-14, abs=1e-15)
    xs = np.array([0.3, -0.2, 0.9, 0.1, 0.5, -0.7, 0.4])
    assert module["rd_sorted"](xs, 7) == pytest.approx(float(np.sort(xs) @ np.arange(1, 8)), rel=1e-14)


def test_dyn_fn_derivatives_are_right_or_refused_by_name(closures):
    opt, module = closures
    x, y = 0.7, 1.3
    try:
        d_x, d_y = ez.autodiff(ez.Reverse, module["rd_table"], ez.Active(x), ez.Active(y))
    except DifferentiationError as refusal:         # -O0 keeps the closures' environments in memory:
        # followed there (enzyme/pointer_memory.py), the call through the closure's vtable is refused
        assert opt == 0 and re.search(r"stores a pointer to differentiated memory|"
                                      r"to @<indirect: %[-\w.]+> through 'invoke'", str(refusal)), refusal
    else:
        assert d_x == pytest.approx((2 * x + np.cos(x) + y + 1) * y, rel=1e-13)
        assert d_y == pytest.approx(x * x + np.sin(x) + 2 * x * y + x, rel=1e-13)
    # the boxed closures are called through vtables chosen at run time: refused, naming the call
    with pytest.raises(DifferentiationError, match=r"no derivative rule for @<indirect: %[-\w.]+>|"
                                                   r"to @<indirect: %[-\w.]+> through 'invoke'"):
        ez.autodiff(ez.Reverse, module["rd_boxed"], ez.Active(x), ez.Active(y), 5)
