"""Rust as users write it (tests/fixtures/foreign/rust_hunt/hunt.rs: iterator chains, SIMD-vectorized
loops, libm math, closures, generics, structs by value and by reference, Vec/Box scratch, recurrences
through memory, early returns, bounds checks, raw pointers, #[inline(never)] helpers), from rustc
1.95 at opt-level 0..3, differentiated in both modes and checked against central differences and
against each other (<J v, w> = <v, J^T w>; rust_hunt_cases.py). A function may be refused with an
error naming the construct, never answered wrongly; the refusals expected are listed below with
why. Each function is cut from the .ll text with what it references before it is loaded, so a case
costs its own size (about half a second: three host JITs), not the crate's.

The whole matrix (every function at every level, about two minutes) runs with
``ADOFFLOAD_RUST_HUNT=all``; by default each function runs at one level, the levels taken in turn,
so every function and every level is covered in CI's budget."""
from __future__ import annotations

import gzip
import os
import re
import sys
from functools import lru_cache
from pathlib import Path

import pytest

import adoffload as ado
from adoffload.errors import DifferentiationError, Error
from adoffload.testing.irtext import module_subset

sys.path.insert(0, str(Path(__file__).parents[1] / "ir"))
from foreign_runtime import provide_runtime  # noqa: E402  (the corpus's runtime stand-ins)

from .rust_hunt_cases import CASES, check  # noqa: E402

FIXTURES = Path(__file__).parents[1] / "fixtures" / "foreign" / "rust_hunt"
ALL = (0, 1, 2, 3)

# name: (levels, pattern of the refusal, why it is refused)
REFUSED = {
    "hr_lj_energy": (ALL, "pointer of unknown origin",
                     "Vec<&[f64]> keeps slices of the input in heap memory next to their lengths, so the engine "
                     "cannot prove the block holds only pointers with shadows (enzyme/pointer_memory.py)"),
    "hr_vec_of_vecs": (ALL, r"pointer of unknown origin|memory that has no shadow \('inttoptr'",
                       "Vec<Vec<f64>>: the rows' heap blocks are pointers in heap memory next to lengths and "
                       "capacities (as hr_lj_energy; at -O1 stored as integers)"),
    "hr_sorted_weights": (ALL, "escapes through 'invoke'", "core's sort is not inlined (recursive)"),
    "hr_rotate": (ALL, "float bits carried as an integer", "rotate_left moves the f64s as i64 next to "
                  "memcpy calls on the same memory, so which float it holds is not known (ir/float_moves.py)"),
    "hr_fn_table": (ALL, "no derivative rule for 'invoke'", "a call through a table of std's f64::sin/exp, "
                    "whose bodies are not in the .ll"),
    "hr_pairwise": (ALL, r"recursive|escapes through 'invoke'", "recursion is not differentiated"),
    "hr_black_box": (ALL, "asm", "std::hint::black_box is inline assembly"),
}
# the host call itself is refused: at -O0 the function reads the f64 array as i64 (to_bits)
HOST_REFUSED = {"hr_bits_abs": ((0,), "must have dtype int64")}


@lru_cache(maxsize=None)
def _text(level: int) -> str:
    with gzip.open(FIXTURES / f"hunt_O{level}.ll.gz", "rt") as f:
        return f.read()


FULL = os.environ.get("ADOFFLOAD_RUST_HUNT") == "all"


def _in_turn(k: int, name: str) -> int:
    return ALL[k % len(ALL)]


MATRIX = [(name, level) for k, name in enumerate(CASES) for level in ALL if FULL or level == _in_turn(k, name)]


@pytest.mark.parametrize("name,level", MATRIX, ids=[f"{n}-O{o}" for n, o in MATRIX])
def test_rust_function(name, level):
    module = ado.from_llvm(module_subset(_text(level), [name]))
    unavailable = provide_runtime(module.ir)
    if name in unavailable:
        pytest.skip(f"{name} is not runnable on the host at -O{level}: {unavailable[name]}")
    levels, pattern, _ = REFUSED.get(name, ((), "", ""))
    host_levels, host_pattern = HOST_REFUSED.get(name, ((), ""))
    try:
        check(module[name], CASES[name])
    except DifferentiationError as refusal:
        assert level in levels and re.search(pattern, str(refusal)), f"unexpected refusal: {refusal}"
    except Error as refusal:
        if isinstance(refusal, DifferentiationError) or level not in host_levels:
            raise
        assert re.search(host_pattern, str(refusal)), refusal


def test_the_oracles_catch_a_wrong_gradient(monkeypatch):
    """check() fails when the reverse adjoints are off by 1%: the oracles are not vacuous."""
    from . import rust_hunt_cases
    name = "hr_logsumexp"
    fn = ado.from_llvm(module_subset(_text(3), [name]))[name]
    rust_hunt_cases.skew_reverse_adjoints(monkeypatch)
    with pytest.raises(rust_hunt_cases.Mismatch, match="<J v, w>"):
        check(fn, CASES[name])


def test_a_struct_in_registers_is_refused_by_host_calls():
    """hr_byval(p: V3, q: V2, k): V2 travels as ``{ double, double }`` in two registers, which
    ctypes cannot pass; the call and the derivative say so instead of running."""
    import numpy as np

    from adoffload import enzyme as ez
    from adoffload.errors import ArgumentError
    fn = ado.from_llvm(module_subset(_text(2), ["hr_byval"]))["hr_byval"]
    with pytest.raises(ArgumentError, match=r"\{ double, double \}"):
        fn(np.ones(3), (1.0, 2.0), 1.5)
    with pytest.raises(ArgumentError, match=r"\{ double, double \}"):
        ez.autodiff(ez.Reverse, fn, ez.Duplicated(np.ones(3), np.zeros(3)), (1.0, 2.0), ez.Active(1.5))
