"""C++ as scientific code is written (tests/fixtures/foreign/cpp_hunt/hunt.cpp: Vec3/Mat3 class
templates with operators, std::array/std::vector/std::unique_ptr scratch, virtual interfaces, lambdas
passed to <algorithm>/<numeric>, std::complex, <cmath> overloads, recursive templates, Newton, RK4,
splines, LU/Cholesky, periodic boxes, exceptions), from the ziglang wheel's clang++ 22 (libc++) at
-O0..-O3 and -O3 -ffast-math, differentiated in both modes and checked against central differences and against each
other (<J v, w> = <v, J^T w>; rust_hunt_cases.check). A function may be refused with an error naming
the construct, never answered wrongly; the refusals expected are listed below with why. Each function
is cut from the .ll text with what it references before it is loaded, so a case costs its own size.

The whole matrix (every function at every level, about three minutes) runs with
``ADOFFLOAD_CPP_HUNT=all``; by default each function runs at one level, the levels taken in turn."""
from __future__ import annotations

import gzip
import os
import re
from functools import lru_cache
from pathlib import Path

import numpy as np
import pytest

import adoffload as ado
from adoffload import enzyme as ez
from adoffload.errors import CompilationError, DifferentiationError, Error, ForeignPanicError
from adoffload.testing.irtext import module_subset

from .cpp_hunt_cases import CASES, function_of
from .rust_hunt_cases import Mismatch, check, skew_reverse_adjoints

FIXTURES = Path(__file__).parents[1] / "fixtures" / "foreign" / "cpp_hunt"
ALL = ("O0", "O1", "O2", "O3", "Ofast")     # Ofast: -O3 -ffast-math

# name: (levels, pattern of the refusal, why it is refused)
REFUSED = {
    "cpp_std_function": (ALL, "receives a pointer to differentiated memory|escapes through 'invoke'",
                         "std::function keeps its lambda (which captured the active a) in its own buffer and calls "
                         "it through a table of function pointers, which receives that buffer (with its shadow) "
                         "and is not inlined"),
    "cpp_recursive_pow": (ALL[:4], "is recursive", "recursion is not differentiated (with fast-math, clang "
                          "turns the recursion into a loop)"),
    "cpp_fast_rsqrt": (ALL, "float bits carried as an integer", "the bit-level guess: its derivative is not "
                       "the derivative of the integer arithmetic"),
    "cpp_vec_of_vec": (ALL, "memory that has no shadow", "std::vector<std::vector<double>>: the rows' heap "
                       "blocks are pointers in heap memory, which shadows do not follow"),
    "cpp_heat_pingpong": (ALL, "memory that has no shadow|pointer of unknown origin", "the step's buffers are "
                          "reached through pointers to the two std::vector objects, whose data pointers live in "
                          "memory the engine cannot prove holds only pointers (enzyme/pointer_memory.py)"),
    "cpp_static_array": (ALL, "memory that has no shadow", "a function-local static array holds active values: "
                         "global memory has no shadow"),
    "cpp_sort_by_key": (ALL, "receives a pointer to differentiated memory|escapes through 'invoke'",
                        "the comparator lambda captures x, and std::sort, which gets the comparator, is recursive"),
    "cpp_product": (("Ofast",), "no derivative rule for @llvm.vector.reduce.fmul", "fast-math lets clang "
                    "multiply the product's lanes with a vector reduction, which has no derivative rule"),
}
# fast-math code may assume no NaN: the NaN the case passes makes -ffinite-math-only code undefined
NOT_RUN = {("cpp_nan_guard", "Ofast"): "-ffast-math assumes no NaN; the case passes one"}
# the host call itself is refused: libc++ declares std::sort<double*> an extern template of its
# shared library, so the .ll has no body for it (the system's C++ runtime is libstdc++)
HOST_REFUSED = {"cpp_median_sort": (ALL, r"__sort"),
                # a static std::vector registers its destructor with __cxa_atexit(..., &__dso_handle); the
                # JIT defines no __dso_handle (a destructor run at exit from freed JIT code would crash)
                "cpp_static_scratch": (ALL, r"__dso_handle")}


@lru_cache(maxsize=None)
def _text(level: str) -> str:
    with gzip.open(FIXTURES / f"hunt_{level}.ll.gz", "rt") as f:
        return f.read()


@lru_cache(maxsize=None)
def _module(level: str, function: str):
    return ado.from_llvm(module_subset(_text(level), [function]))


FULL = os.environ.get("ADOFFLOAD_CPP_HUNT") == "all"
# the costliest cases (three to ten seconds each: three host JITs of much inlined libc++) run in the
# full matrix only, to keep this file's CI time near half a minute
FULL_ONLY = {"cpp_conjugate_gradient", "cpp_push_into", "cpp_rk4"}


def _marks(name: str, level: str) -> list:
    if (function_of(name), level) in NOT_RUN:
        return [pytest.mark.skip(reason=NOT_RUN[function_of(name), level])]
    if name in FULL_ONLY and not FULL:
        return [pytest.mark.skip(reason=f"{name} costs seconds per level: ADOFFLOAD_CPP_HUNT=all runs it")]
    if ":" in name and not FULL:      # a second point of a function the default run covers already
        return [pytest.mark.skip(reason=f"{name} is a second point of {function_of(name)}: "
                                        f"ADOFFLOAD_CPP_HUNT=all runs it")]
    return []


MATRIX = [pytest.param(name, level, id=f"{name}-{level}", marks=_marks(name, level))
          for k, name in enumerate(CASES) for level in ALL if FULL or level == ALL[k % len(ALL)]]


@pytest.mark.parametrize("name,level", MATRIX)
def test_cpp_function(name, level):
    function = function_of(name)
    levels, pattern, _ = REFUSED.get(function, ((), "", ""))
    host_levels, host_pattern = HOST_REFUSED.get(function, ((), ""))
    try:
        check(_module(level, function)[function], CASES[name])
    except DifferentiationError as refusal:
        assert level in levels and re.search(pattern, str(refusal)), f"unexpected refusal: {refusal}"
    except Error as refusal:
        if isinstance(refusal, DifferentiationError) or level not in host_levels:
            raise
        assert re.search(host_pattern, str(refusal)), refusal
    else:
        assert level not in levels and level not in host_levels, f"{name} at {level} was expected to be refused"


def test_the_oracles_catch_a_wrong_gradient(monkeypatch):
    """check() fails when the reverse adjoints are off by 1%: the oracles are not vacuous."""
    name = "cpp_logsumexp"
    fn = _module("O2", name)[name]
    skew_reverse_adjoints(monkeypatch)
    with pytest.raises(Mismatch, match="<J v, w>"):
        check(fn, CASES[name])


def test_a_refusal_names_the_source_line():
    """The .ll carries line tables (-gline-tables-only): a refusal says where in hunt.cpp."""
    fn = _module("O2", "cpp_fast_rsqrt")["cpp_fast_rsqrt"]
    x = np.linspace(0.5, 2.0, 4, dtype=np.float32)
    with pytest.raises(DifferentiationError, match=r"hunt\.cpp:\d+"):
        ez.autodiff(ez.Reverse, fn, ez.Duplicated(x, np.zeros_like(x)), 4)


@pytest.mark.parametrize("level", ["O0", "O2"])
def test_an_uncaught_exception_is_an_error_not_a_dead_process(level):
    """cpp_checked_sqrt_sum throws std::domain_error on a negative entry: the call, and each
    derivative, raise ForeignPanicError naming the exception; before, the process terminated."""
    fn = _module(level, "cpp_checked_sqrt_sum")["cpp_checked_sqrt_sum"]
    good, bad = np.array([1.0, 4.0]), np.array([1.0, -4.0])
    assert fn(good, 2) == pytest.approx(3.0)
    with pytest.raises(ForeignPanicError, match=r"domain_error.*negative entry"):
        fn(bad, 2)
    for mode in (ez.Forward, ez.Reverse):
        with pytest.raises(ForeignPanicError, match="domain_error"):
            ez.autodiff(mode, fn, ez.Duplicated(bad.copy(), np.ones(2)), 2)
    vector_at = _module(level, "cpp_vector_at")["cpp_vector_at"]
    with pytest.raises(ForeignPanicError, match="out_of_range"):
        vector_at(np.ones(4), 4, 7)


def test_an_exception_caught_inside_gives_the_fallback_and_its_zero_derivative():
    """cpp_catch_fallback catches the singular matrix's std::domain_error and returns -1: a constant."""
    fn = _module("O2", "cpp_catch_fallback")["cpp_catch_fallback"]
    a, b = np.zeros(9), np.ones(3)
    assert fn(a, b) == -1.0
    da, db = np.full(9, 7.0), np.full(3, 7.0)
    ez.autodiff(ez.Reverse, fn, ez.Duplicated(a, da), ez.Duplicated(b, db))
    np.testing.assert_array_equal(np.r_[da, db], 7.0)       # nothing added
    assert ez.autodiff(ez.Forward, fn, ez.Duplicated(a, np.ones(9)), ez.Duplicated(b, np.ones(3))) == 0.0


def test_a_function_libcxx_throws_from_runs_with_libstdcxx():
    """std::vector's growth path calls std::bad_array_new_length's constructor, which libstdc++ keeps
    inline: defined for the host (codegen/host/libcxx_compat.py), so the function runs."""
    fn = _module("O1", "cpp_vector_resize")["cpp_vector_resize"]
    x = np.array([0.5, -1.0, 2.0])
    a = np.r_[x, x * x - 1.0]
    assert fn(x, 3) == pytest.approx(float(a @ a))
    with pytest.raises(CompilationError, match="__sort"):      # what libc++'s shared library holds stays missing
        _module("O1", "cpp_median_sort")["cpp_median_sort"](x, 3)
