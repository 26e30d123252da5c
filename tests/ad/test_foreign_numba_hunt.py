"""numba code as users write it (tests/ad/numba_hunt_cases.py: ``@cfunc`` entries over ``carray``
views, ``@njit`` helpers inlined or called, math-module functions, numpy calls, branches, early
returns, while loops, gathers and scatters, f32 and f64, tuples, triangular loops, complex numbers,
generators, ``boundscheck``, ``fastmath`` and both error models), loaded with ``ado.from_numba``,
differentiated in both modes and checked against central differences and against each other
(<J v, w> = <v, J^T w>; rust_hunt_cases.check). A function may be refused with an error naming the
construct, never answered wrongly; the refusals expected are listed below with why. The host call
of numba's IR is also compared with numba's own compiled cfunc.

``ADOFFLOAD_NUMBA_HUNT=all`` adds the cases of numba_hunt_cases.EXTRA (about 20 s more).
"""
from __future__ import annotations

import os
import re

import numpy as np
import pytest

import adoffload as ado
from adoffload import enzyme as ez
from adoffload.errors import ArgumentError, CompilationError, DifferentiationError

pytest.importorskip("numba", reason="numba is a test dependency (pip install -e '.[test]')")

from . import rust_hunt_cases
from .numba_hunt_cases import CASES, EXTRA, compiled
from .rust_hunt_cases import Mismatch, check

_NRT = "stores the active value .* into an array numba allocated itself"
# name: (pattern of the refusal, why it is refused)
REFUSED = {
    "nb_where_scalar": (_NRT, "np.where on scalars builds 0-d arrays whose MemInfo numba stores into a struct in "
                        "memory: an array that escapes is not separated from numba's memory manager "
                        "(ir/numba_arrays.py), so its data pointer is a pointer loaded from memory"),
    "nb_np_cumsum": (_NRT, "np.cumsum's result: its MemInfo is stored into memory (as nb_where_scalar)"),
    "nb_np_dot": ("numba_xxdot", "np.dot of 1-D arrays calls BLAS through numba's helper, whose body is not "
                  "in the IR"),
    "nb_argmax": ("numba_attempt_nocopy_reshape receives a pointer to differentiated memory",
                  "np.argmax/np.max pass the array as a struct in memory to numba's reshape helper, whose body "
                  "is not in the IR"),
    "nb_frexp_ldexp": ("numba_frexp", "math.frexp is numba's helper, which has no derivative rule"),
    "nb_bits_abs": ("float bits carried as an integer", "x.view(np.uint64) clears sign bits as integers"),
}
# the host call itself is refused (the derivatives too: see test_a_recursive_njit_function_is_refused)
HOST_REFUSED = {
    "nb_bits_read": (ArgumentError, "must have dtype int64",
                     "numba reads x only through its int64 view: the host call wants int64 data"),
    "nb_bits_abs": (ArgumentError, "must have dtype int64",
                    "numba reads and writes x only through its uint64 view (vectorized: <2 x i64> accesses, which "
                    "the dtype check once skipped): the host call wants int64 data"),
    "nb_recursive": (CompilationError, r"numba\.unresolved",
                     "a recursive @njit function is linked by numba later; its body is not in the IR"),
}


def _same_primal_as_numba(fn, name):
    """The host call of numba's IR computes what numba's own compiled cfunc computes."""
    import ctypes
    case, cf = CASES[name].case(), compiled(name)
    ours, theirs = rust_hunt_cases._fresh(case), rust_hunt_cases._fresh(case)
    converted = [ctypes.cast(a.ctypes.data, t) if isinstance(a, np.ndarray) else a
                 for a, t in zip(theirs, cf.ctypes.argtypes)]
    want = cf.ctypes(*converted)
    got = fn(*ours)
    np.testing.assert_allclose(rust_hunt_cases._outputs(case, got, ours),
                               rust_hunt_cases._outputs(case, want, theirs), rtol=1e-6 if case.dtype == np.float32
                               else 1e-13, atol=1e-300, err_msg=f"{name}: primal differs from numba's")


FULL = os.environ.get("ADOFFLOAD_NUMBA_HUNT") == "all"


@pytest.mark.parametrize("name", [n for n in CASES if FULL or n not in EXTRA])
def test_numba_function(name):
    fn = ado.from_numba(compiled(name))
    if name not in HOST_REFUSED:
        _same_primal_as_numba(fn, name)
    pattern = REFUSED.get(name, ("", ""))[0]
    host_error, host_pattern, _ = HOST_REFUSED.get(name, (None, "", ""))
    try:
        check(fn, CASES[name].case())
    except DifferentiationError as refusal:
        assert pattern and re.search(pattern, str(refusal)), f"unexpected refusal: {refusal}"
        return
    except (ArgumentError, CompilationError) as refusal:
        assert host_error is not None and isinstance(refusal, host_error) and re.search(host_pattern, str(refusal)), \
            f"unexpected host refusal: {refusal}"
        return
    assert not pattern and host_error is None, f"{name} was expected to be refused but was differentiated"


def test_a_recursive_njit_function_is_refused():
    """numba calls a recursive @njit function through a slot it fills when it links
    (``@.numba.unresolved$...``): the host call used to read address 0 and crash the process; now
    it is refused, and so is the derivative, naming the slot."""
    fn = ado.from_numba(compiled("nb_recursive"))
    with pytest.raises(CompilationError, match=r"reads @\.numba\.unresolved\$.*recursive @njit"):
        fn(0.9, 4)
    for mode, a in ((ez.Reverse, ez.Active(0.9)), (ez.Forward, ez.Duplicated(0.9, 1.0))):
        with pytest.raises(DifferentiationError, match=r"function pointer loaded from @\.numba\.unresolved"):
            ez.autodiff(mode, fn, a, 4)


def test_an_indirect_call_is_not_taken_for_the_function_its_pointer_is_named_after():
    """The allowlist of inactive calls (printf, llvm.*, ...) matched the callee's name, and an
    indirect call's callee is a value with a name of its own: ``%printf.p`` passed for printf."""
    fn = ado.from_llvm("""
        @table = global ptr null
        define double @f(double %x) {
          %printf.p = load ptr, ptr @table
          %r = call double %printf.p(double %x)
          ret double %r
        }""")["f"]
    with pytest.raises(DifferentiationError, match="indirect: a function pointer loaded from @table"):
        ez.autodiff(ez.Reverse, fn, ez.Active(1.0))


MASKED = """
declare <4 x double> @llvm.masked.load.v4f64.p0(ptr, <4 x i1>, <4 x double>)
declare void @llvm.masked.store.v4f64.p0(<4 x double>, ptr, <4 x i1>)
define void @relu_update(ptr %x, ptr %y) {
  %a = load <4 x double>, ptr %x, align 8
  %m = fcmp ogt <4 x double> %a, zeroinitializer
  %old = call <4 x double> @llvm.masked.load.v4f64.p0(ptr align 8 %y, <4 x i1> %m, <4 x double> zeroinitializer)
  %w = fmul <4 x double> %a, %old
  %s = fadd <4 x double> %w, %a
  call void @llvm.masked.store.v4f64.p0(<4 x double> %s, ptr align 8 %y, <4 x i1> %m)
  ret void
}"""


def test_masked_loads_and_stores_are_differentiated_lane_by_lane():
    """numba compiles for the CPU it runs on: with AVX a conditional store in a loop becomes
    llvm.masked.load/store (nb_cond_store on such a CPU). They are scalarized at import
    (ir/masked_memory.py): y[l] = x[l] * y[l] + x[l] where x[l] > 0, untouched elsewhere."""
    fn = ado.from_llvm(MASKED)["relu_update"]
    assert not any("masked" in getattr(i.callee, "name", "") for i in fn.ir.instructions() if i.opcode == "call")
    x, y = np.array([0.5, -0.3, 1.2, -2.0]), np.array([0.1, 0.7, -0.4, 0.9])
    got = y.copy()
    fn(x, got)
    np.testing.assert_allclose(got, np.where(x > 0, x * y + x, y), rtol=1e-15)
    check(fn, rust_hunt_cases.Case("relu_update", [(rust_hunt_cases.IN, x), (rust_hunt_cases.INOUT, y)]))


def test_records_with_an_integer_field():
    """A numpy record with an int64 field between float64 ones (numba reads it as a struct field):
    the adjoints of the float fields against central differences, the integer field's shadow
    bytes untouched; forward and reverse agree."""
    from numba import cfunc

    from .numba_hunt_cases import BODY_MIXED, F64, I32, PBODY_MIXED
    from .numba_hunt_functions import nb_records
    fn = ado.from_numba(cfunc(F64(PBODY_MIXED, I32, F64))(nb_records))
    rng = np.random.default_rng(5)
    r = np.zeros(4, BODY_MIXED)
    r["h"], r["v"], r["m"], r["k"] = rng.uniform(0, 1, 4), rng.uniform(-1, 1, 4), rng.uniform(0.5, 2, 4), [3, 0, 2, 1]
    want = float(np.sum(r["m"] * (0.5 * r["v"] ** 2 + 9.8 * r["h"]) * (r["k"] + 1)))
    assert fn(r.copy(), 4, 9.8) == pytest.approx(want, rel=1e-14)
    d = np.zeros_like(r)
    _, _, dg = ez.autodiff(ez.Reverse, fn, ez.Duplicated(r.copy(), d), 4, ez.Active(9.8))
    np.testing.assert_allclose(d["h"], 9.8 * r["m"] * (r["k"] + 1), rtol=1e-13)
    np.testing.assert_allclose(d["v"], r["m"] * r["v"] * (r["k"] + 1), rtol=1e-13)
    np.testing.assert_allclose(d["m"], (0.5 * r["v"] ** 2 + 9.8 * r["h"]) * (r["k"] + 1), rtol=1e-13)
    assert d["k"].tolist() == [0, 0, 0, 0]
    assert dg == pytest.approx(float(np.sum(r["m"] * r["h"] * (r["k"] + 1))), rel=1e-13)
    t = np.zeros_like(r)
    t["h"], t["v"], t["m"] = rng.standard_normal(4), rng.standard_normal(4), rng.standard_normal(4)
    jv = ez.autodiff(ez.Forward, fn, ez.Duplicated(r.copy(), t.copy()), 4, ez.Duplicated(9.8, 0.5))
    assert jv == pytest.approx(sum(float(np.dot(t[f], d[f])) for f in ("h", "v", "m")) + 0.5 * dg, rel=1e-12)


def test_the_oracles_catch_a_wrong_gradient(monkeypatch):
    """check() fails when the reverse adjoints are off by 1%: the oracles are not vacuous here."""
    fn = ado.from_numba(compiled("big_logsumexp"))
    rust_hunt_cases.skew_reverse_adjoints(monkeypatch)
    with pytest.raises(Mismatch, match="<J v, w>"):
        check(fn, CASES["big_logsumexp"].case())


def test_a_division_by_zero_stops_the_primal_and_its_derivatives_alike(monkeypatch):
    """error_model='python': y[1] == 0 raises ZeroDivisionError inside numba's function, which the
    cfunc reports as unraisable before it returns, z[1:] unwritten. The derivatives stop at the
    same element: z[0]'s derivatives are exact, and the seeds of the unwritten z[1:] pass through
    (z keeps their values from before the call)."""
    import sys
    fn = ado.from_numba(compiled("nb_divide_python"))
    seen = []
    monkeypatch.setattr(sys, "unraisablehook", lambda u: seen.append(u.exc_type))
    x, y = np.array([1.5, 2.0, 3.0]), np.array([1.0, 0.0, 2.0])
    z = np.zeros(3)
    fn(x, y, z, 3)
    assert seen == [ZeroDivisionError] and z.tolist() == [2.0, 0.0, 0.0]       # 1.5 / 1 + 1.5 % 1
    z, dz = np.zeros(3), np.zeros(3)
    ez.autodiff(ez.Forward, fn, ez.Duplicated(x.copy(), np.ones(3)), ez.Duplicated(y.copy(), np.zeros(3)),
                ez.Duplicated(z, dz), 3)
    assert z.tolist() == [2.0, 0.0, 0.0] and dz.tolist() == [2.0, 0.0, 0.0]
    dx, dy, seed = np.zeros(3), np.zeros(3), np.ones(3)
    ez.autodiff(ez.Reverse, fn, ez.Duplicated(x.copy(), dx), ez.Duplicated(y.copy(), dy), ez.Duplicated(np.zeros(3), seed),
                3)
    assert dx.tolist() == [2.0, 0.0, 0.0] and dy.tolist() == [-2.5, 0.0, 0.0] and seed.tolist() == [0.0, 1.0, 1.0]
    assert set(seen) == {ZeroDivisionError}
