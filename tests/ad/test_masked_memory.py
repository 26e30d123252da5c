"""clang's masked vector loads and stores (AVX; ``if (c[i] > 0) y[i] = ...`` vectorized at -O2/-O3)
through ``ado.from_llvm`` and both AD modes (ir/masked_memory.py rewrites them lane by lane).

Each function is checked at -O0..-O3 against central differences of its primal and with the identity
<J v, w> = <v, J^T w> between forward and reverse mode, at a size (37) that runs the vector body
and the scalar tail, with conditions that differ between lanes."""
from __future__ import annotations

import numpy as np
import pytest

from adoffload import enzyme as ez
from adoffload.ir.masked_memory import scalarize_masked_memory
from adoffload.testing import clang as differential

pytestmark = pytest.mark.skipif(not differential.clang_available(),
                                reason="the ziglang wheel (the clang these tests compile C with) is not installed")

SOURCE = r"""
void relu_scale(int n, const double* x, double* y, double a) {
  for (int i = 0; i < n; i++) if (x[i] > 0) y[i] = a * x[i] * x[i];
}
void cond_update(int n, const double* x, const double* c, double* y) {
  for (int i = 0; i < n; i++) { double v = y[i]; if (c[i] > 0) v = x[i] * v; y[i] = v; }
}
void cond_select(int n, const double* x, const double* c, double* y) {
  for (int i = 0; i < n; i++) y[i] = c[i] > 0 ? x[i] * x[i] : 1.0;
}
double cond_sum(int n, const double* x, const double* c) {
  double s = 0; for (int i = 0; i < n; i++) if (c[i] > 0) s += x[i] * c[i]; return s;
}
float cond_sumf(int n, const float* x, const float* c) {
  float s = 0; for (int i = 0; i < n; i++) if (c[i] > 0) s += x[i] * x[i]; return s;
}
"""
N = 37
# name -> (argument kinds: "x" differentiated input, "c" constant array, "y" differentiated in/out,
#          "a" differentiated scalar), returns a float
CASES = {"relu_scale": ("x", "y", "a"), "cond_update": ("x", "c", "y"), "cond_select": ("x", "c", "y"),
         "cond_sum": ("x", "c"), "cond_sumf": ("x", "c")}


@pytest.fixture(scope="module")
def modules():
    import adoffload as ado
    return {opt: ado.from_llvm(differential.compile_c(SOURCE, opt)) for opt in (0, 1, 2, 3)}


def test_clang_o3_makes_masked_accesses_and_the_import_rewrites_them():
    text = differential.compile_c(SOURCE, 3)
    assert "@llvm.masked.store" in text and "@llvm.masked.load" in text
    import adoffload.ir as ir
    from adoffload.ir.canonicalize import canonicalize, prepare_for_analysis
    module = ir.import_module(canonicalize(prepare_for_analysis(text)))
    assert scalarize_masked_memory(module) >= 4
    names = {getattr(i.callee, "name", "") for f in module.functions.values() for i in f.instructions()
             if i.opcode == "call"}
    assert not any(n.startswith("llvm.masked.") for n in names), names


def _point(name, rng):
    dtype = np.float32 if name.endswith("f") else np.float64
    values = {"x": rng.uniform(-1.0, 1.0, N).astype(dtype), "c": rng.uniform(-1.0, 1.0, N).astype(dtype),
              "y": rng.uniform(0.5, 1.5, N).astype(dtype), "a": 0.7}
    return values, dtype


def _outputs(kinds, args, result) -> np.ndarray:
    """y after the call (if the function has one), then the return value (if any), as float64."""
    parts = [np.asarray(args[1 + kinds.index("y")], dtype=np.float64)] if "y" in kinds else []
    if result is not None:
        parts.append(np.atleast_1d(np.float64(result)))
    return np.concatenate(parts)


def _primal(fn, kinds, values) -> np.ndarray:
    args = [N] + [values[k].copy() if k != "a" else values[k] for k in kinds]
    return _outputs(kinds, args, fn(*args))


@pytest.mark.parametrize("opt", [0, 1, 2, 3])
@pytest.mark.parametrize("name", sorted(CASES))
def test_masked_loops_have_right_derivatives(modules, name, opt):
    fn, kinds = modules[opt][name], CASES[name]
    rng = np.random.default_rng(7)
    values, dtype = _point(name, rng)
    v = {k: (float(rng.standard_normal()) if k == "a" else rng.standard_normal(N).astype(dtype))
         for k in kinds if k != "c"}

    # forward mode: J v (the y shadow holds the output tangent, the result is the return's)
    forward = [N] + [ez.Const(values["c"].copy()) if k == "c" else
                     ez.Duplicated(values[k] if k == "a" else values[k].copy(), v[k] if k == "a" else v[k].copy())
                     for k in kinds]
    tangent = ez.autodiff(ez.Forward, fn, *forward)
    jv = _outputs(kinds, [N] + [a.shadow if isinstance(a, ez.Duplicated) else None for a in forward[1:]], tangent)

    # central differences of the primal along v
    h = 1e-3 if dtype == np.float32 else 1e-6
    shifted = [{k: values[k] if k not in v else np.asarray(values[k] + s * h * v[k], dtype=dtype) if k != "a"
                else values[k] + s * h * v[k] for k in values} for s in (1, -1)]
    fd = (_primal(fn, kinds, shifted[0]) - _primal(fn, kinds, shifted[1])) / (2 * h)
    tol = 5e-3 if dtype == np.float32 else 1e-6
    np.testing.assert_allclose(jv, fd, rtol=tol, atol=tol, err_msg="forward mode vs central differences")

    # reverse mode: J^T w, with w = (w_y, 1.0 for a returned value)
    w_y = rng.standard_normal(N).astype(dtype)
    reverse = [N]
    for k in kinds:
        if k == "c":
            reverse.append(ez.Const(values["c"].copy()))
        elif k == "a":
            reverse.append(ez.Active(values["a"]))
        else:
            reverse.append(ez.Duplicated(values[k].copy(), w_y.copy() if k == "y" else np.zeros(N, dtype)))
    adjoints = ez.autodiff(ez.Reverse, fn, *reverse)
    vjw = sum(v[k] * adjoints[1 + kinds.index(k)] if k == "a" else
              float(np.dot(v[k].astype(np.float64), reverse[1 + kinds.index(k)].shadow.astype(np.float64)))
              for k in v)
    w = np.concatenate(([w_y.astype(np.float64)] if "y" in kinds else []) +
                       ([np.ones(1)] if jv.size > (N if "y" in kinds else 0) else []))
    assert float(np.dot(jv, w)) == pytest.approx(vjw, rel=1e-9 if dtype == np.float64 else 1e-4, abs=1e-9)


GATHER_SCATTER = r"""
define void @gs(ptr %x, ptr %idx, ptr %c, ptr %y) {
entry:
  %iv = load <4 x i64>, ptr %idx, align 8
  %cv = load <4 x double>, ptr %c, align 8
  %mask = fcmp ogt <4 x double> %cv, zeroinitializer
  %ptrs = getelementptr double, ptr %x, <4 x i64> %iv
  %vals = call <4 x double> @llvm.masked.gather.v4f64.v4p0(<4 x ptr> align 8 %ptrs, <4 x i1> %mask,
                                                         <4 x double> <double 1.0, double 2.0, double 3.0, double 4.0>)
  %sq = fmul <4 x double> %vals, %vals
  %yp = getelementptr double, ptr %y, <4 x i64> <i64 3, i64 2, i64 1, i64 0>
  call void @llvm.masked.scatter.v4f64.v4p0(<4 x double> %sq, <4 x ptr> align 8 %yp, <4 x i1> %mask)
  ret void
}
declare <4 x double> @llvm.masked.gather.v4f64.v4p0(<4 x ptr>, <4 x i1>, <4 x double>)
declare void @llvm.masked.scatter.v4f64.v4p0(<4 x double>, <4 x ptr>, <4 x i1>)
"""


def test_gather_and_scatter_lanes_follow_their_pointers():
    """y[3 - k] = x[idx[k]]^2 where c[k] > 0: a lane's pointer is the GEP of the base at its index."""
    import adoffload as ado
    fn = ado.from_llvm(GATHER_SCATTER)["gs"]
    x, idx = np.array([0.5, -1.5, 2.0, 0.25, 3.0]), np.array([4, 0, 2, 1])
    c, y0, w = np.array([1.0, -1.0, 0.5, 2.0]), np.full(4, 9.0), np.array([1.0, 2.0, 3.0, 4.0])
    y = y0.copy()
    fn(x.copy(), idx, c, y)
    on = c > 0
    expected_y, expected_dx, expected_dy = y0.copy(), np.zeros(5), w.copy()
    for k in np.flatnonzero(on):
        expected_y[3 - k] = x[idx[k]] ** 2
        expected_dx[idx[k]] += w[3 - k] * 2 * x[idx[k]]
        expected_dy[3 - k] = 0.0                      # overwritten: y's input no longer matters there
    np.testing.assert_array_equal(y, expected_y)
    dx, dy = np.zeros(5), w.copy()
    ez.autodiff(ez.Reverse, fn, ez.Duplicated(x.copy(), dx), ez.Const(idx), ez.Const(c), ez.Duplicated(y0.copy(), dy))
    np.testing.assert_allclose(dx, expected_dx, rtol=1e-15)
    np.testing.assert_array_equal(dy, expected_dy)
    v, ty = np.arange(1.0, 6.0), np.array([0.5, 0.5, 0.5, 0.5])
    ez.autodiff(ez.Forward, fn, ez.Duplicated(x.copy(), v), ez.Const(idx), ez.Const(c), ez.Duplicated(y0.copy(), ty))
    expected_ty = np.full(4, 0.5)
    for k in np.flatnonzero(on):
        expected_ty[3 - k] = 2 * x[idx[k]] * v[idx[k]]
    np.testing.assert_allclose(ty, expected_ty, rtol=1e-15)


def test_a_write_through_a_lane_of_a_pointer_vector_is_refused():
    """The engine does not follow a pointer taken out of a vector of pointers it cannot rebuild as a
    scalar GEP (here two pointers put into a vector one by one): a write through one may overwrite
    differentiated memory (y[1] or y[0]) without its shadow, so it is refused (this store of a
    constant left y's tangent and adjoint untouched before, silently wrong)."""
    import adoffload as ado
    from adoffload.errors import DifferentiationError
    fn = ado.from_llvm(r"""
define void @f(ptr %y, i64 %k) {
entry:
  %y1 = getelementptr double, ptr %y, i64 1
  %v0 = insertelement <2 x ptr> poison, ptr %y1, i64 0
  %yp = insertelement <2 x ptr> %v0, ptr %y, i64 1
  %i = and i64 %k, 1
  %p = extractelement <2 x ptr> %yp, i64 %i
  store double 5.0, ptr %p, align 8
  ret void
}""")["f"]
    for mode in (ez.Forward, ez.Reverse):
        with pytest.raises(DifferentiationError, match="escapes through 'insertelement'|pointer of unknown origin"):
            ez.autodiff(mode, fn, ez.Duplicated(np.zeros(2), np.ones(2)), 0)


def test_a_lane_of_a_vector_gep_is_the_scalar_gep_of_that_lane():
    """``extractelement (gep %y, <1, 0>), %i`` is ``gep %y, <1, 0>[%i]`` (masked_memory's rebuild,
    which numba's strided record loads need): the store overwrites y[1] and its shadow with it."""
    import adoffload as ado
    fn = ado.from_llvm(r"""
define void @f(ptr %y, i64 %k) {
entry:
  %yp = getelementptr double, ptr %y, <2 x i64> <i64 1, i64 0>
  %i = and i64 %k, 1
  %p = extractelement <2 x ptr> %yp, i64 %i
  store double 5.0, ptr %p, align 8
  ret void
}""")["f"]
    y, ty = np.zeros(2), np.ones(2)
    ez.autodiff(ez.Forward, fn, ez.Duplicated(y, ty), 0)
    np.testing.assert_array_equal(y, [0.0, 5.0])
    np.testing.assert_array_equal(ty, [1.0, 0.0])
    y, dy = np.zeros(2), np.ones(2)
    ez.autodiff(ez.Reverse, fn, ez.Duplicated(y, dy), 1)
    np.testing.assert_array_equal(y, [5.0, 0.0])
    np.testing.assert_array_equal(dy, [0.0, 1.0])


def test_a_gather_of_struct_fields_differentiates():
    """``gep {double, double}, ptr %p, <2 x i64> <1, 0>, <2 x i32> <1, 1>``: each lane's pointer is
    the scalar GEP of its element's second field (the field index stays a constant)."""
    import adoffload as ado
    fn = ado.from_llvm(r"""
declare <2 x double> @llvm.masked.gather.v2f64.v2p0(<2 x ptr>, i32, <2 x i1>, <2 x double>)
define void @g(ptr %p, ptr %y) {
entry:
  %ps = getelementptr { double, double }, ptr %p, <2 x i64> <i64 1, i64 0>, <2 x i32> <i32 1, i32 1>
  %v = call <2 x double> @llvm.masked.gather.v2f64.v2p0(<2 x ptr> %ps, i32 8, <2 x i1> <i1 true, i1 true>, <2 x double> zeroinitializer)
  %sq = fmul <2 x double> %v, %v
  store <2 x double> %sq, ptr %y, align 8
  ret void
}""")["g"]
    p, y = np.array([1.0, 2.0, 3.0, 4.0]), np.zeros(2)
    fn(p, y)
    np.testing.assert_array_equal(y, [16.0, 4.0])
    dp = np.zeros(4)
    ez.autodiff(ez.Reverse, fn, ez.Duplicated(p.copy(), dp), ez.Duplicated(np.zeros(2), np.ones(2)))
    np.testing.assert_array_equal(dp, [0.0, 4.0, 0.0, 8.0])
