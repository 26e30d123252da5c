"""One tiny test per derivative rule: a one-instruction function, its forward derivative, and
central finite differences in f64. The table must cover every key of RULES."""
from __future__ import annotations

import math

import numpy as np
import pytest

from adoffload.enzyme.activity import CONST, DUP
from adoffload.enzyme.forward import forward
from adoffload.enzyme.rules import RULES, Rule, callee_key, register, rule_for
from adoffload.errors import DifferentiationError
from adoffload.ir.core import (Constant, Instruction, Module, SourceLocation, StructType, VectorType, const, f32,
                                f64, i32, i64)

from .jit import compile_host, new_function


def _call(spelling):
    def emit(module, b, args):
        return b.call_intrinsic(module, spelling, args[0].type, args)
    return emit


def _op(opcode):
    def emit(module, b, args):
        if opcode == "fneg":
            return b.fneg(args[0])
        return b.binary(opcode, *args)
    return emit


def _powi(module, b, args):
    return b.call_intrinsic(module, "llvm.powi.f64.i32", f64, [args[0], const(i32, 3)])


def _ldexp(module, b, args):
    return b.call_intrinsic(module, "llvm.ldexp.f64.i32", f64, [args[0], const(i32, 3)])


def _frexp_mantissa(module, b, args):
    pair = b.call_intrinsic(module, "llvm.frexp.f64.i32", StructType((f64, i32)), [args[0]])
    return b.emit("extractvalue", f64, [pair], indices=(0,))


def _modf_parts(module, b, args):
    """fraction + 0.5 * integer part of llvm.modf: 1 where the integer part does not jump."""
    pair = b.call_intrinsic(module, "llvm.modf.f64", StructType((f64, f64)), [args[0]])
    fraction = b.emit("extractvalue", f64, [pair], indices=(0,))
    whole = b.emit("extractvalue", f64, [pair], indices=(1,))
    return b.fadd(fraction, b.fmul(whole, const(f64, 0.5)))


def _complex(name, divide=False, single=False):
    """Re q + 0.5·Im q of q = (a + ib) (op) (c + id), through compiler-rt's __mul?c3/__div?c3."""
    def emit(module, b, args):
        t = f32 if single else f64
        operands = [b.cast("fptrunc", x, f32) for x in args] if single else list(args)
        result_type = VectorType(f32, 2) if single else StructType((f64, f64))
        q = b.call_intrinsic(module, name, result_type, operands)
        if single:
            re_, im = (b.emit("extractelement", t, [q, const(i32, k)]) for k in (0, 1))
        else:
            re_, im = (b.emit("extractvalue", t, [q], indices=(k,)) for k in (0, 1))
        total = b.fadd(re_, b.fmul(im, const(t, 0.5)))
        return b.cast("fpext", total, f64) if single else total
    return emit


def _select(module, b, args):
    return b.select(b.fcmp("olt", args[0], args[1]), b.fmul(args[0], args[0]), b.fmul(args[1], const(f64, 3)))


def _int_to_float(opcode):
    def emit(module, b, args):
        return b.fmul(args[0], b.cast(opcode, const(i64, 7), f64))
    return emit


def _through_f32(opcode):
    def emit(module, b, args):      # f64 -> f32 -> f64 round trip exercises fptrunc and fpext
        narrow = b.cast("fptrunc", args[0], f32)
        wide = b.cast("fpext", b.fmul(narrow, narrow), f64)
        return wide
    return emit


def _reduce(name, lanes=4):
    """A vector built from the arguments (and their products), reduced by llvm.vector.reduce.*."""
    def emit(module, b, args):
        t = VectorType(f64, lanes)
        vector = b.emit("insertelement", t, [Constant(t, None, kind="zero"), args[0], const(i32, 0)])
        for k in range(1, lanes):
            item = b.fmul(args[k % len(args)], args[(k + 1) % len(args)]) if k >= len(args) else args[k]
            vector = b.emit("insertelement", t, [vector, item, const(i32, k)])
        if name == "fadd":
            return b.call_intrinsic(module, "llvm.vector.reduce.fadd.v4f64", f64, [const(f64, 0.5), vector])
        return b.call_intrinsic(module, f"llvm.vector.reduce.{name}.v4f64", f64, [vector])
    return emit


def _x86_minmax(name, element, lanes):
    """Lane k compares args[k % 2] * (1 + k/4) with args[(k + 1) % 2] through an x86 packed
    max/min (``llvm.x86.sse2.max.pd``, ...); the lanes are summed with weights k + 1."""
    def emit(module, b, args):
        t = VectorType(element, lanes)
        narrow = [b.cast("fptrunc", a, element) if element is f32 else a for a in args]
        first, second = Constant(t, None, kind="zero"), Constant(t, None, kind="zero")
        for k in range(lanes):
            scaled = b.fmul(narrow[k % 2], const(element, 1 + k / 4))
            first = b.emit("insertelement", t, [first, scaled, const(i32, k)])
            second = b.emit("insertelement", t, [second, narrow[(k + 1) % 2], const(i32, k)])
        picked = b.call_intrinsic(module, name, t, [first, second])
        total = None
        for k in range(lanes):
            lane = b.fmul(b.emit("extractelement", element, [picked, const(i32, k)]), const(element, k + 1))
            total = lane if total is None else b.fadd(total, lane)
        return b.cast("fpext", total, f64) if element is f32 else total
    return emit


def _complex_function(name, real=False):
    """Re f(z) + 0.5·Im f(z) of z = a + ib through libm's ``{double, double} f(double, double)``
    (cabs/carg: their real result)."""
    def emit(module, b, args):
        if real:
            return b.call_intrinsic(module, name, f64, list(args))
        q = b.call_intrinsic(module, name, StructType((f64, f64)), list(args))
        re_, im = (b.emit("extractvalue", f64, [q], indices=(k,)) for k in (0, 1))
        return b.fadd(re_, b.fmul(im, const(f64, 0.5)))
    return emit


def _integer_valued(name):
    """x · (double) name(x): the integer-valued call contributes nothing to the derivative."""
    def emit(module, b, args):
        rounded = b.call_intrinsic(module, name, i64 if name != "ilogb" else i32, [args[0]])
        return b.fmul(args[0], b.cast("sitofp", rounded, f64))
    return emit


def _bessel_n(name):
    def emit(module, b, args):
        return b.call_intrinsic(module, name, f64, [const(i32, 2), args[0]])
    return emit


# key -> (emit, arity, sample points[, relative tolerance; also the FD step])
CASES = {
    "fadd": (_op("fadd"), 2, [(1.3, -0.7)]),
    "fsub": (_op("fsub"), 2, [(1.3, -0.7)]),
    "fmul": (_op("fmul"), 2, [(1.3, -0.7)]),
    "fdiv": (_op("fdiv"), 2, [(1.3, -0.7)]),
    "frem": (_op("frem"), 2, [(5.3, 1.7), (-5.3, 1.7)]),
    "fneg": (_op("fneg"), 1, [(0.4,)]),
    "fpext": (_through_f32("fpext"), 1, [(0.75,)], 1e-3),      # FD through f32 rounding: looser
    "fptrunc": (_through_f32("fptrunc"), 1, [(1.5,)], 1e-3),
    "sitofp": (_int_to_float("sitofp"), 1, [(0.3,)]),
    "uitofp": (_int_to_float("uitofp"), 1, [(0.3,)]),
    "select": (_select, 2, [(0.5, 2.0), (3.0, 1.0)]),
    "call:sqrt": (_call("llvm.sqrt.f64"), 1, [(2.5,)]),
    "call:exp": (_call("llvm.exp.f64"), 1, [(0.7,)]),
    "call:exp2": (_call("llvm.exp2.f64"), 1, [(0.7,)]),
    "call:exp10": (_call("llvm.exp10.f64"), 1, [(0.3,)]),
    "call:expm1": (_call("expm1"), 1, [(0.3,)]),
    "call:log": (_call("llvm.log.f64"), 1, [(1.7,)]),
    "call:log2": (_call("llvm.log2.f64"), 1, [(1.7,)]),
    "call:log10": (_call("llvm.log10.f64"), 1, [(1.7,)]),
    "call:log1p": (_call("log1p"), 1, [(0.7,)]),
    "call:sin": (_call("llvm.sin.f64"), 1, [(0.9,)]),
    "call:cos": (_call("llvm.cos.f64"), 1, [(0.9,)]),
    "call:tan": (_call("llvm.tan.f64"), 1, [(0.9,)]),
    "call:asin": (_call("llvm.asin.f64"), 1, [(0.4,)]),
    "call:acos": (_call("llvm.acos.f64"), 1, [(0.4,)]),
    "call:atan": (_call("llvm.atan.f64"), 1, [(0.4,)]),
    "call:atan2": (_call("llvm.atan2.f64"), 2, [(0.4, -1.3), (-2.0, 0.5)]),
    "call:sinh": (_call("llvm.sinh.f64"), 1, [(0.6,)]),
    "call:cosh": (_call("llvm.cosh.f64"), 1, [(0.6,)]),
    "call:tanh": (_call("llvm.tanh.f64"), 1, [(0.6,)]),
    "call:erf": (_call("erf"), 1, [(0.6,)]),
    "call:erfc": (_call("erfc"), 1, [(0.6,)]),
    "call:pow": (_call("llvm.pow.f64"), 2, [(1.7, 2.3)]),
    "call:powi": (_powi, 1, [(1.7,), (-0.8,)]),
    "call:fabs": (_call("llvm.fabs.f64"), 1, [(-0.6,), (0.6,)]),
    "call:fma": (_call("llvm.fma.f64"), 3, [(1.1, -0.4, 2.0)]),
    "call:minnum": (_call("llvm.minnum.f64"), 2, [(1.1, -0.4), (-2.0, 0.3)]),
    "call:maxnum": (_call("llvm.maxnum.f64"), 2, [(1.1, -0.4), (-2.0, 0.3)]),
    "call:minimum": (_call("llvm.minimum.f64"), 2, [(1.1, -0.4), (-2.0, 0.3)]),
    "call:maximum": (_call("llvm.maximum.f64"), 2, [(1.1, -0.4), (-2.0, 0.3)]),
    "call:copysign": (_call("llvm.copysign.f64"), 2, [(1.1, -0.4), (-2.0, 0.3), (2.0, 0.3)]),
    "call:floor": (_call("llvm.floor.f64"), 1, [(1.3,)]),
    "call:ceil": (_call("llvm.ceil.f64"), 1, [(1.3,)]),
    "call:trunc": (_call("llvm.trunc.f64"), 1, [(-1.3,)]),
    "call:round": (_call("llvm.round.f64"), 1, [(1.3,)]),
    "call:cbrt": (_call("cbrt"), 1, [(2.2,), (-0.5,)]),
    "call:hypot": (_call("hypot"), 2, [(1.2, -0.5)]),
    "call:rsqrt": (_call("rsqrt"), 1, [(2.2,)]),
    "call:frem": (_call("fmod"), 2, [(5.3, 1.7)]),
    "call:ldexp": (_ldexp, 1, [(1.3,), (-0.2,)]),
    "call:frexp": (_frexp_mantissa, 1, [(5.3,), (-0.3,)]),
    "call:modf": (_modf_parts, 1, [(5.3,), (-0.3,)]),
    "call:__muldc3": (_complex("__muldc3"), 4, [(0.3, -1.2, 2.0, 0.5)]),
    "call:__divdc3": (_complex("__divdc3", divide=True), 4, [(0.3, -1.2, 2.0, 0.5)]),
    "call:__mulsc3": (_complex("__mulsc3", single=True), 4, [(0.3, -1.2, 2.0, 0.5)], 1e-3),
    "call:__divsc3": (_complex("__divsc3", divide=True, single=True), 4, [(0.3, -1.2, 2.0, 0.5)], 1e-3),
    "call:vector.reduce.fadd": (_reduce("fadd"), 3, [(0.3, -1.2, 2.0)]),
    "call:vector.reduce.fmax": (_reduce("fmax"), 3, [(0.3, -1.2, 2.0), (0.3, 1.9, -0.4)]),
    "call:vector.reduce.fmin": (_reduce("fmin"), 3, [(0.3, -1.2, 2.0), (0.3, 1.9, -0.4)]),
    "call:vector.reduce.fmaximum": (_reduce("fmaximum"), 3, [(0.3, -1.2, 2.0)]),
    "call:vector.reduce.fminimum": (_reduce("fminimum"), 3, [(0.3, -1.2, 2.0)]),
    "call:asinh": (_call("asinh"), 1, [(0.7,), (-1.3,)]),
    "call:acosh": (_call("acosh"), 1, [(1.7,)]),
    "call:atanh": (_call("atanh"), 1, [(0.4,)]),
    "call:lgamma": (_call("lgamma"), 1, [(2.7,), (0.3,), (-2.5,), (14.2,)]),
    "call:tgamma": (_call("tgamma"), 1, [(2.7,), (-1.5,)]),
    "call:numba_gamma": (_call("numba_gamma"), 1, [(2.7,), (-1.5,)]),     # numba's math.gamma (needs numba)
    "call:j0": (_call("j0"), 1, [(1.3,)]),
    "call:j1": (_call("j1"), 1, [(1.3,)]),
    "call:y0": (_call("y0"), 1, [(1.3,)]),
    "call:y1": (_call("y1"), 1, [(1.3,)]),
    "call:jn": (_bessel_n("jn"), 1, [(1.3,)]),
    "call:yn": (_bessel_n("yn"), 1, [(1.3,)]),
    "call:fdim": (_call("fdim"), 2, [(1.3, 0.2), (-1.0, 0.5)]),
    "call:remainder": (_call("remainder"), 2, [(5.3, 1.7), (-4.1, 1.3)]),
    "call:nextafter": (_call("nextafter"), 2, [(1.3, 0.0)]),
    "call:nexttoward": (_call("nextafter"), 2, [(1.3, 0.0)]),      # (libm's nexttoward takes a long double)
    "call:logb": (_call("logb"), 1, [(5.3,)]),
    "call:ilogb": (_integer_valued("ilogb"), 1, [(5.3,)]),
    "call:lrint": (_integer_valued("lrint"), 1, [(5.3,)]),
    "call:llrint": (_integer_valued("llrint"), 1, [(5.3,)]),
    "call:lround": (_integer_valued("lround"), 1, [(5.3,)]),
    "call:llround": (_integer_valued("llround"), 1, [(5.3,)]),
    "call:cexp": (_complex_function("cexp"), 2, [(0.3, -1.2)]),
    "call:clog": (_complex_function("clog"), 2, [(0.3, -1.2)]),
    "call:csqrt": (_complex_function("csqrt"), 2, [(0.3, -1.2)]),
    "call:csin": (_complex_function("csin"), 2, [(0.3, -1.2)]),
    "call:ccos": (_complex_function("ccos"), 2, [(0.3, -1.2)]),
    "call:csinh": (_complex_function("csinh"), 2, [(0.3, -1.2)]),
    "call:ccosh": (_complex_function("ccosh"), 2, [(0.3, -1.2)]),
    "call:cabs": (_complex_function("cabs", real=True), 2, [(0.3, -1.2)]),
    "call:carg": (_complex_function("carg", real=True), 2, [(0.3, -1.2)]),
}
for _op_name in ("max", "min"):
    for _form, _element, _lanes in (("sse.{}.ps", f32, 4), ("sse2.{}.pd", f64, 2), ("avx.{}.ps.256", f32, 8),
                                    ("avx.{}.pd.256", f64, 4)):
        _key = "x86." + _form.format(_op_name)
        CASES["call:" + _key] = (_x86_minmax("llvm." + _key, _element, _lanes), 2, [(0.7, -0.4), (-1.1, 0.9)],
                                 *((1e-3,) if _element is f32 else ()))


def _finite_difference(f, x, h=1e-6):
    grads = []
    for k in range(len(x)):
        up, down = list(x), list(x)
        up[k] += h
        down[k] -= h
        grads.append((f(*up) - f(*down)) / (2 * h))
    return np.array(grads)


def test_table_covers_every_rule():
    # block kernels' cooperative operations act across threads: tests/blocks checks their rules
    assert sorted(CASES) == sorted(k for k in RULES if not k.startswith("call:adoffload."))


@pytest.fixture(scope="module")
def compiled():
    """Every case in one module, JIT-compiled once: {key: (primal, derivative)}."""
    module = Module("rules")     # rsqrt (no libm has it) is defined by the host program itself
    names = {}
    for n, (key, (emit, arity, *_)) in enumerate(CASES.items()):
        if key in _NUMBA_HELPERS and not _numba_helpers_loaded():
            continue
        fn, b = new_function(module, f"case{n}", f64, [(f"x{k}", f64) for k in range(arity)])
        b.ret(emit(module, b, fn.args))
        names[key] = (fn.name, forward(module, fn, [DUP] * arity).name)
    funcs = compile_host(module)
    return {key: (funcs[p], funcs[d]) for key, (p, d) in names.items()}


_NUMBA_HELPERS = ("call:numba_gamma",)


def _numba_helpers_loaded() -> bool:
    """numba's helper functions (numba_gamma) in the JIT's symbol table: numba adds them when its
    CPU target starts, here by compiling one function."""
    try:
        import math

        import numba
    except ImportError:
        return False
    numba.njit(lambda v: math.gamma(v))(2.5)
    return True


@pytest.mark.parametrize("key", sorted(CASES))
def test_rule_matches_finite_differences(key, compiled):
    if key not in compiled:
        pytest.skip(f"{key}: numba's runtime (a test dependency) is not installed")
    primal, derivative = compiled[key]
    _, arity, points, *tolerance = CASES[key]
    rel = tolerance[0] if tolerance else 1e-6
    for x in points:
        fd = _finite_difference(primal, x, h=min(rel, 1e-6) if rel < 1e-4 else rel)
        for k in range(arity):
            seed = [0.0] * arity
            seed[k] = 1.0
            assert derivative(*x, *seed) == pytest.approx(fd[k], rel=rel, abs=rel / 10), (key, x, k)


def test_vector_width_gives_every_partial_at_once():
    module = Module("lanes")
    fn, b = new_function(module, "f", f64, [("x", f64), ("y", f64)])
    b.ret(b.call_intrinsic(module, "llvm.atan2.f64", f64, [fn.args[0], b.fmul(fn.args[1], fn.args[0])]))
    wide = forward(module, fn, [DUP, DUP], width=2)
    funcs = compile_host(module)
    dx, dy, out = np.array([1.0, 0.0]), np.array([0.0, 1.0]), np.zeros(2)
    funcs[wide.name](0.7, -1.1, dx, dy, out)
    np.testing.assert_allclose(out, _finite_difference(funcs["f"], (0.7, -1.1)), rtol=1e-6)


def test_strong_zero_keeps_nan_out_of_a_zero_tangent():
    """pow(x, y) at x = 0 with y active but its tangent 0: the log(0) partial must not give NaN."""
    module = Module("strong")
    fn, b = new_function(module, "f", f64, [("x", f64), ("y", f64)])
    b.ret(b.call_intrinsic(module, "llvm.pow.f64", f64, list(fn.args)))
    d = forward(module, fn, [DUP, DUP])
    funcs = compile_host(module)
    assert funcs[d.name](0.0, 3.0, 1.0, 0.0) == 0.0
    assert funcs[d.name](2.0, 3.0, 1.0, 0.0) == pytest.approx(12.0)


@pytest.mark.parametrize("name,key", [
    ("llvm.sin.f64", "call:sin"), ("sinf", "call:sin"), ("__nv_sinf", "call:sin"), ("__nv_sin", "call:sin"),
    ("__ocml_sin_f32", "call:sin"), ("erf", "call:erf"), ("erff", "call:erf"), ("__nv_erff", "call:erf"),
    ("atan2f", "call:atan2"), ("llvm.powi.f32.i32", "call:powi"), ("__ocml_pown_f64", "call:powi"),
    ("llvm.fmuladd.v4f32", "call:fma"), ("fminf", "call:minnum"), ("__nv_fmax", "call:maxnum"),
    ("fmodf", "call:frem"), ("llvm.rint.f64", "call:round"), ("__nv_rsqrtf", "call:rsqrt"),
    ("fabsf", "call:fabs"), ("expm1f", "call:expm1"), ("llvm.exp10.f32", "call:exp10"),
    ("llvm.frexp.f64.i32", "call:frexp"), ("frexpf", "call:frexp"), ("llvm.ldexp.v2f32.v2i32", "call:ldexp"),
    ("scalbn", "call:ldexp"), ("ldexpf", "call:ldexp"),
])
def test_callee_names_normalize(name, key):
    assert callee_key(name) == key and key in RULES


def test_missing_rule_names_the_op_and_the_line():
    module = Module("missing")
    fn, b = new_function(module, "f", f64, [("x", f64)])
    b.location = SourceLocation("kernel.py", 12)
    b.ret(b.call_intrinsic(module, "erfinv", f64, [fn.args[0]]))
    with pytest.raises(DifferentiationError, match=r"erfinv.*kernel.py:12"):
        forward(module, fn, [DUP])
    assert "f.adoffload.fwd.d" not in module.functions   # a failed derivation leaves nothing behind


def test_duplicate_registration_is_an_error():
    with pytest.raises(ValueError, match="twice"):
        register("fadd", Rule())


def test_inactive_use_of_an_unknown_op_is_fine():
    """erfinv of a Const argument is never differentiated, so no rule is needed."""
    module = Module("inactive")
    fn, b = new_function(module, "f", f64, [("x", f64), ("c", f64)])
    erfinv, eb = new_function(module, "erfinv", f64, [("y", f64)])        # (libm has none: a stand-in)
    eb.ret(eb.fmul(erfinv.args[0], const(f64, 2.0)))
    b.ret(b.fmul(fn.args[0], b.call(erfinv, [fn.args[1]])))
    d = forward(module, fn, [DUP, CONST])
    funcs = compile_host(module)
    assert funcs[d.name](2.0, 3.5, 1.0) == pytest.approx(7.0)
    with pytest.raises(DifferentiationError):
        rule_for(Instruction("call", f64, [fn.args[1]], callee=module.functions["erfinv"]))
