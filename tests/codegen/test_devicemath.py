"""Device math accuracy: JIT the same IR for the host and compare with numpy / math over many points."""
import math

import numpy as np
import pytest

from adoffload.codegen.gpu import devicemath
from adoffload.codegen.host.program import HostProgram

N = 20_000


def _wrapper(op: str, kind: str, arity: int) -> str:
    ty = "double" if kind == "f64" else "float"
    fn = devicemath.function_name(op, kind)
    loads = "\n".join(f"  %p{k} = getelementptr {ty}, ptr %in{k}, i64 %i\n  %a{k} = load {ty}, ptr %p{k}"
                      for k in range(arity))
    args = ", ".join(f"{ty} %a{k}" for k in range(arity))
    params = ", ".join(f"ptr %in{k}" for k in range(arity))
    return f"""
declare {ty} @{fn}({", ".join([ty] * arity)})
define void @apply({params}, ptr %out, i64 %n) {{
entry:
  br label %loop
loop:
  %i = phi i64 [0, %entry], [%next, %loop]
{loads}
  %r = call {ty} @{fn}({args})
  %po = getelementptr {ty}, ptr %out, i64 %i
  store {ty} %r, ptr %po
  %next = add i64 %i, 1
  %more = icmp slt i64 %next, %n
  br i1 %more, label %loop, label %done
done:
  ret void
}}
"""


_programs = {}


def evaluate(op, kind, *args):
    arity = devicemath.FUNCTIONS[op][0]
    key = (op, kind)
    if key not in _programs:
        import llvmlite.binding as llvm
        text = devicemath.devicemath_module([devicemath.function_name(op, kind)])
        module = llvm.parse_assembly(text)
        module.link_in(llvm.parse_assembly(_wrapper(op, kind, arity)))
        _programs[key] = HostProgram(str(module))
    dtype = np.float64 if kind == "f64" else np.float32
    ins = [np.ascontiguousarray(a, dtype) for a in args]
    out = np.empty_like(ins[0])
    import ctypes
    f = _programs[key].function("apply", None, *([ctypes.c_void_p] * (arity + 1)), ctypes.c_int64)
    f(*[a.ctypes.data for a in ins], out.ctypes.data, out.size)
    return out


def ulp_error(got, want_f64, dtype):
    """|got - want| in units of the last place of want (want computed in f64 or better)."""
    want = np.asarray(want_f64, np.float64)
    got = np.asarray(got, np.float64)
    both_nan = np.isnan(got) & np.isnan(want)
    same = (got == want) | both_nan
    finfo = np.finfo(dtype)
    mag = np.maximum(np.abs(want), finfo.smallest_normal)
    ulp = np.exp2(np.floor(np.log2(mag)) - finfo.nmant)
    with np.errstate(invalid="ignore"):
        err = np.where(same, 0.0, np.abs(got - want) / ulp)
    return float(np.max(err))


rng = np.random.default_rng(1234)


def _mix(lo, hi, n=N):
    return np.concatenate([rng.uniform(lo, hi, n), np.linspace(lo, hi, 257)])


def _reference(op):
    return {
        "exp": np.exp, "log": np.log, "log2": np.log2, "log10": np.log10, "sin": np.sin, "cos": np.cos,
        "tan": np.tan, "tanh": np.tanh, "atan": np.arctan, "pow": np.power, "atan2": np.arctan2,
        "erf": np.vectorize(math.erf, otypes=[np.float64]), "rsqrt": lambda x: 1.0 / np.sqrt(x),
    }[op]


# op -> (argument generator, f64 ulp bound)
CASES = {
    "exp": (lambda: [_mix(-745, 709.7)], 2.0),
    "rsqrt": (lambda: [np.concatenate([np.exp(rng.uniform(-740, 709, N)), _mix(0.5, 2.0)])], 1.0),
    "log": (lambda: [np.concatenate([np.exp(rng.uniform(-740, 709, N)), _mix(0.5, 2.0)])], 2.0),
    "log2": (lambda: [np.exp(rng.uniform(-700, 700, N))], 3.0),
    "log10": (lambda: [np.exp(rng.uniform(-700, 700, N))], 3.0),
    "sin": (lambda: [np.concatenate([_mix(-10, 10), _mix(-1e5, 1e5), rng.uniform(-1e-3, 1e-3, 999)])], 2.0),
    "cos": (lambda: [np.concatenate([_mix(-10, 10), _mix(-1e5, 1e5)])], 2.0),
    "tan": (lambda: [np.concatenate([_mix(-10, 10), _mix(-1e4, 1e4)])], 4.0),
    "tanh": (lambda: [_mix(-25, 25)], 3.0),
    "atan": (lambda: [np.concatenate([_mix(-5, 5), _mix(-1e6, 1e6)])], 2.0),
    "erf": (lambda: [np.concatenate([_mix(-6.5, 6.5), rng.uniform(-1e-3, 1e-3, 999)])], 4.0),
    "pow": (lambda: [np.exp(rng.uniform(-20, 20, N)), rng.uniform(-30, 30, N)], 2.0),
    "atan2": (lambda: [rng.standard_normal(N) * np.exp(rng.uniform(-20, 20, N)),
                       rng.standard_normal(N) * np.exp(rng.uniform(-20, 20, N))], 3.0),
}


@pytest.mark.parametrize("kind", ["f64", "f32"])
@pytest.mark.parametrize("op", sorted(CASES))
def test_accuracy(op, kind):
    make, bound64 = CASES[op]
    args = make()
    dtype = np.float64 if kind == "f64" else np.float32
    if kind == "f32":
        with np.errstate(all="ignore"):
            args = [a.astype(np.float32) for a in args]
            args = [np.where(np.isfinite(a), a, 1.0).astype(np.float32) for a in args]
    with np.errstate(all="ignore"):
        want = _reference(op)(*[a.astype(np.float64) for a in args])
    if kind == "f32":
        with np.errstate(over="ignore"):
            want = want.astype(np.float32)      # the correctly rounded f32 result (up to the reference)
    got = evaluate(op, kind, *args)
    err = ulp_error(got, want, dtype)
    print(f"{op} {kind}: max ulp error {err:.3f}")
    assert err <= (bound64 if kind == "f64" else 1.0), f"{op} {kind}: max error {err:.2f} ulp"


SPECIALS = {
    "exp": [[0.0, -0.0, np.inf, -np.inf, np.nan, 710.0, -746.0, 1e-300]],
    "log": [[0.0, -0.0, -1.0, np.inf, np.nan, 1.0, 5e-324, 2.2250738585072014e-308]],
    "sin": [[0.0, -0.0, np.inf, -np.inf, np.nan]],
    "cos": [[0.0, -0.0, np.inf, np.nan]],
    "tan": [[0.0, -0.0, np.inf, np.nan]],
    "tanh": [[0.0, -0.0, np.inf, -np.inf, np.nan, 1e-300]],
    "erf": [[0.0, -0.0, np.inf, -np.inf, np.nan, 1e-310]],
    "rsqrt": [[0.0, -0.0, np.inf, -1.0, np.nan, 5e-324, 4.0]],
    "atan": [[0.0, -0.0, np.inf, -np.inf, np.nan]],
    "pow": [[0.0, -0.0, -0.0, 0.0, -0.0, np.inf, -np.inf, -np.inf, -1.0, -1.0, 1.0, np.nan, -2.0, -2.0, 0.5, 2.0, 10.0, -10.0, -8.0],
            [-1.0, -1.0, 3.0, 0.5, -0.5, -2.0, 3.0, 0.5, np.inf, 0.5, np.nan, 0.0, 3.0, 2.0, np.inf, -np.inf, 400.0, 401.0, 1.0 / 3.0]],
    "atan2": [[0.0, -0.0, 0.0, -0.0, 1.0, -1.0, np.inf, -np.inf, np.inf, 1.0, np.nan, 0.0],
              [0.0, 0.0, -0.0, -0.0, 0.0, -0.0, np.inf, np.inf, -np.inf, -np.inf, 1.0, np.nan]],
}


@pytest.mark.parametrize("op", sorted(SPECIALS))
def test_special_values_match_numpy(op):
    args = [np.array(a, np.float64) for a in SPECIALS[op]]
    got = evaluate(op, "f64", *args)
    with np.errstate(all="ignore"):
        want = _reference(op)(*args).astype(np.float64)
    np.testing.assert_array_equal(np.signbit(got) | np.isnan(got), np.signbit(want) | np.isnan(want))
    np.testing.assert_allclose(got, want, rtol=1e-15, atol=0, equal_nan=True)
