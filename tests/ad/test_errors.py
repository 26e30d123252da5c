"""What users get when something cannot be differentiated: a precise error, never wrong numbers."""
from __future__ import annotations

import inspect
import math

import numpy as np
import pytest

import adoffload as ado
from adoffload import In, InOut, Out, f64, i64
from adoffload import enzyme as ez
from adoffload.errors import ArgumentError, DifferentiationError


def _line_of(kernel, text: str) -> int:
    """The file line of the first source line of ``kernel`` containing ``text``."""
    lines, first = inspect.getsourcelines(kernel.pyfunc)
    return first + next(k for k, line in enumerate(lines) if text in line)


@ado.kernel
def running_max(x: In[f64], top: InOut[f64]):
    i = ado.tid()
    ado.atomic_max(top, 0, x[i] * 2.0)


@pytest.mark.parametrize("derive", [lambda k: ado.jvp(k, wrt=["x"]), lambda k: ado.vjp(k, wrt=["x"])],
                         ids=["jvp", "vjp"])
def test_atomic_max_on_an_active_path_names_the_op_and_its_line(derive):
    with pytest.raises(DifferentiationError) as info:
        derive(running_max)
    message = str(info.value)
    assert "atomicrmw fmax" in message
    assert f"{__file__}:{_line_of(running_max, 'atomic_max')}" in message


@ado.kernel
def uses_old_value(x: In[f64], acc: InOut[f64], y: Out[f64]):
    i = ado.tid()
    old = ado.atomic_add(acc, 0, x[i])
    y[i] = old * x[i]


def test_reverse_refuses_an_atomic_add_whose_old_value_is_used():
    with pytest.raises(DifferentiationError) as info:
        ado.vjp(uses_old_value, wrt=["x"])
    message = str(info.value)
    assert "atomicrmw fadd" in message and "old value" in message
    assert f"{__file__}:{_line_of(uses_old_value, 'atomic_add')}" in message


def test_forward_refuses_an_atomic_add_whose_old_value_is_used():
    """Its tangent would be the old value of the shadow's own atomic, which the threads may reach in
    another order than the primal atomic (found by the CUDA hunt, tests/foreign_cuda/test_cuda_hunt.py)."""
    with pytest.raises(DifferentiationError) as info:
        ado.jvp(uses_old_value, wrt=["x"])
    message = str(info.value)
    assert "atomicrmw fadd" in message and "forward mode" in message and "old value" in message
    assert f"{__file__}:{_line_of(uses_old_value, 'atomic_add')}" in message


def test_atomic_max_on_integer_data_is_fine():
    """Integer atomics carry no derivative: only float output arrays get shadows."""
    @ado.kernel
    def k(x: In[f64], n: In[i64], top: InOut[i64], y: Out[f64]):
        i = ado.tid()
        ado.atomic_max(top, 0, n[i])
        y[i] = x[i] * x[i]

    fwd = ado.jvp(k, wrt=["x"])
    x, dy, top = np.array([1.0, 3.0]), np.zeros(2), np.zeros(1, np.int64)
    fwd(x, np.array([4, 9]), top, np.zeros(2), np.ones(2), dy, grid=2)
    np.testing.assert_allclose(dy, 2 * x)
    assert top[0] == 9


# ---------------------------------------------------------------- foreign IR

_UNKNOWN_CALL = """
declare double @gamma(double)

define double @log_gamma(double %x) {
entry:
  %sq = fmul double %x, %x
  %g = call double @gamma(double %sq), !adoffload.loc !0
  ret double %g
}

define double @only_y(double %x, double %y) {
entry:
  %g = call double @gamma(double %x)
  %r = fmul double %g, %y
  ret double %r
}

!0 = !{!"model.c", i32 12, i32 5}
"""

_MYSTERY = """
declare double @mystery_model(double, double)

define double @model_energy(double %x, double %y) {
entry:
  %sq = fmul double %x, %x
  %m = call double @mystery_model(double %sq, double %y), !adoffload.loc !0
  ret double %m
}

!0 = !{!"model.c", i32 13, i32 5}
"""


@pytest.fixture(scope="module")
def unknown_calls():
    return ado.from_llvm(_UNKNOWN_CALL)


@pytest.mark.parametrize("mode", ["Forward", "Reverse"])
def test_a_call_without_derivative_rule_names_the_callee_and_line(unknown_calls, mode):
    fn = unknown_calls["log_gamma"]
    args = (ez.Duplicated(1.5, 1.0),) if mode == "Forward" else (ez.Active(1.5),)
    with pytest.raises(DifferentiationError) as info:
        ez.autodiff(getattr(ez, mode), fn, *args)
    message = str(info.value)
    assert "@gamma" in message and "model.c:12" in message and "no derivative rule" in message


def test_an_unknown_external_function_on_an_active_path_is_named():
    fn = ado.from_llvm(_MYSTERY)["model_energy"]
    with pytest.raises(DifferentiationError, match=r"@mystery_model.*model\.c:13"):
        ez.autodiff(ez.Reverse, fn, ez.Const(1.5), ez.Active(2.0))
    with pytest.raises(DifferentiationError, match=r"@mystery_model.*model\.c:13"):
        ez.autodiff(ez.Forward, fn, ez.Duplicated(1.5, 1.0), ez.Const(2.0))


def test_an_unknown_function_of_const_inputs_is_fine(unknown_calls):
    """Also: a failed derivation (log_gamma above, same module) leaves nothing half-built behind
    that would break compiling the module for the next one."""
    with pytest.raises(DifferentiationError):
        ez.autodiff(ez.Reverse, unknown_calls["log_gamma"], ez.Active(1.5))
    fn = unknown_calls["only_y"]
    _, dy = ez.autodiff(ez.Reverse, fn, ez.Const(2.5), ez.Active(3.0))
    assert dy == pytest.approx(math.lgamma(2.5), rel=1e-12)


_MEMCPY = """
declare void @llvm.memcpy.p0.p0.i64(ptr, ptr, i64, i1)

define void @copy_scale(ptr %dst, ptr %src, double %a) {
entry:
  call void @llvm.memcpy.p0.p0.i64(ptr %dst, ptr %src, i64 16, i1 false)
  %v = load double, ptr %dst
  %w = fmul double %v, %a
  store double %w, ptr %dst
  ret void
}
"""


def test_memcpy_of_differentiated_memory_in_both_modes():
    """dst = src (16 bytes), then dst[0] *= a: reverse mode moves dst's adjoints back to src."""
    fn = ado.from_llvm(_MEMCPY)["copy_scale"]
    src, dsrc = np.array([2.0, 3.0]), np.array([1.0, 10.0])
    dst, ddst = np.zeros(2), np.zeros(2)
    ez.autodiff(ez.Forward, fn, ez.Duplicated(dst, ddst), ez.Duplicated(src, dsrc), ez.Duplicated(0.5, 1.0))
    np.testing.assert_allclose(ddst, [1.0 * 0.5 + 2.0 * 1.0, 10.0])
    dsrc, ddst = np.zeros(2), np.array([1.0, 1.0])
    (_, _, d_a) = ez.autodiff(ez.Reverse, fn, ez.Duplicated(np.zeros(2), ddst), ez.Duplicated(src, dsrc),
                              ez.Active(0.5))
    np.testing.assert_allclose(dsrc, [0.5, 1.0])
    np.testing.assert_allclose(ddst, [0.0, 0.0])
    assert d_a == pytest.approx(2.0)


# ---------------------------------------------------------------- wrt

@ado.kernel
def scaled(n: i64, a: f64, x: In[f64], idx: In[i64], y: Out[f64]):
    i = ado.tid()
    y[i] = a * x[idx[i]] + float(n)


@pytest.mark.parametrize("derive", [ado.jvp, ado.vjp], ids=["jvp", "vjp"])
@pytest.mark.parametrize("name,kind", [("n", "an integer parameter"), ("idx", "an integer parameter"),
                                       ("z", "not a parameter")])
def test_wrt_must_name_float_parameters(derive, name, kind):
    with pytest.raises(ArgumentError) as info:
        derive(scaled, wrt=["a", name])
    message = str(info.value)
    assert f"{name!r}" in message and kind in message
    assert "float parameters are: a, x, y" in message


_OPAQUE_CALL = """
define void @scale_in_place(ptr %y, double %a) noinline {
entry:
  %v = load double, ptr %y
  %w = fmul double %v, %a
  store double %w, ptr %y
  ret void
}

define void @outer(ptr %y, double %a) {
entry:
  call void @scale_in_place(ptr %y, double %a)
  ret void
}
"""


@pytest.mark.parametrize("mode", ["Forward", "Reverse"])
def test_a_noinline_call_writing_differentiated_memory_is_differentiated(mode):
    """Such a call was once skipped silently (zero gradients), then refused; foreign IR is now
    differentiated in its inlined form (``ir.prepare_for_analysis``): y' = a*y, so dy'/da = y."""
    fn = ado.from_llvm(_OPAQUE_CALL)["outer"]
    y, dy = np.array([2.0]), np.array([1.0])
    if mode == "Forward":
        ez.autodiff(ez.Forward, fn, ez.Duplicated(y, dy), ez.Duplicated(3.0, 1.0))
        assert dy[0] == pytest.approx(3.0 * 1.0 + 2.0)          # a*dy + y*da
    else:
        (_, d_a) = ez.autodiff(ez.Reverse, fn, ez.Duplicated(y, dy), ez.Active(3.0))
        assert d_a == pytest.approx(2.0) and dy[0] == pytest.approx(3.0)


_RECURSIVE_CALL = """
define void @halve(ptr %y, i32 %n) {
entry:
  %done = icmp sle i32 %n, 0
  br i1 %done, label %out, label %more
more:
  %v = load double, ptr %y
  %w = fmul double %v, 0.5
  store double %w, ptr %y
  %m = sub i32 %n, 1
  call void @halve(ptr %y, i32 %m)
  br label %out
out:
  ret void
}
"""


@pytest.mark.parametrize("mode", ["Forward", "Reverse"])
def test_a_recursive_call_on_differentiated_memory_is_refused(mode):
    fn = ado.from_llvm(_RECURSIVE_CALL)["halve"]
    with pytest.raises(DifferentiationError, match="@halve.*recursive"):
        ez.autodiff(getattr(ez, mode), fn, ez.Duplicated(np.array([2.0]), np.array([1.0])), 3)


def test_tuple_helper_with_only_a_vjp_has_no_forward_mode():
    def polar_vjp(a, b, dr, dphi):
        return dr, dphi

    @ado.func(vjp=polar_vjp)
    def polar(a, b):
        return ado.sqrt(a * a + b * b), ado.atan2(b, a)

    @ado.kernel
    def k(x: In[f64], r: Out[f64], phi: Out[f64]):
        i = ado.tid()
        r[i], phi[i] = polar(x[i], 1.0)

    with pytest.raises(DifferentiationError, match="helper @polar returns a tuple and has only a custom vjp"):
        ado.jvp(k, wrt=["x"])


def test_docs_list_every_rule():
    """docs/ad.md names every op of the rule table (and so stays in step with rules.py)."""
    from pathlib import Path

    from adoffload.enzyme.rules import supported_keys
    text = (Path(__file__).parents[2] / "docs" / "ad.md").read_text()
    missing = [key for key in supported_keys() if f"`{key.removeprefix('call:')}" not in text]
    assert not missing, f"docs/ad.md does not mention {missing}"


@ado.kernel
def _compact(x: In[f64], count: ado.InOut[i64], out: Out[f64]):
    i = ado.tid()
    if x[i] > 0.0:
        slot = ado.atomic_add(count, 0, 1)
        out[slot] = x[i] * x[i]


def test_an_atomic_that_decides_addresses_is_refused_in_reverse_mode():
    """The adjoint re-runs the forward pass in its own launch, where the counter hands out other
    slots: its gradient would silently pair other threads with the output seeds."""
    with pytest.raises(DifferentiationError, match="atomicrmw add.*forward pass again"):
        ado.vjp(_compact, wrt=["x"]).compile("cpu")
    x = np.linspace(-1.0, 1.0, 8)
    tangent = np.zeros(8)
    ado.jvp(_compact, wrt=["x"])(x, np.zeros(1, np.int64), np.zeros(8), d_x=np.ones(8), d_out=tangent, grid=8)
    assert sorted(tangent[:4]) == pytest.approx(sorted(2 * x[4:]))     # one launch: slots and tangents agree


def test_an_atomic_that_decides_addresses_is_refused_under_jax_grad():
    jax = pytest.importorskip("jax")
    previous = jax.config.jax_enable_x64
    jax.config.update("jax_enable_x64", True)
    try:
        call = ado.jax_kernel(_compact, out_shapes={"out": (8,)})
        x = np.linspace(-1.0, 1.0, 8)
        with pytest.raises(DifferentiationError, match="forward pass again"):
            jax.grad(lambda x: call(x, np.zeros(1, np.int64))[1].sum())(x)
    finally:
        jax.config.update("jax_enable_x64", previous)


# ---------------------------------------------------------------- control flow

_TWO_ENTRY_LOOP = """
define double @two_entry_loop(double %x, i64 %start_in_b, i64 %n) {
entry:
  %c = icmp ne i64 %start_in_b, 0
  br i1 %c, label %b, label %a
a:
  %va = phi double [ %x, %entry ], [ %vb2, %b ]
  %ia = phi i64 [ 0, %entry ], [ %ib2, %b ]
  %va2 = fmul double %va, %x
  %ia2 = add i64 %ia, 1
  %done = icmp sge i64 %ia2, %n
  br i1 %done, label %exit, label %b
b:
  %vb = phi double [ %x, %entry ], [ %va2, %a ]
  %ib = phi i64 [ 0, %entry ], [ %ia2, %a ]
  %vb2 = fadd double %vb, %x
  %ib2 = add i64 %ib, 1
  br label %a
exit:
  ret double %va2
}
"""


def test_irreducible_control_flow_forward_works_reverse_refuses():
    """A cycle entered at two blocks (docs/ad.md: irreducible control flow, F ✓ R ✗)."""
    fn = ado.from_llvm(_TWO_ENTRY_LOOP)["two_entry_loop"]
    # starting in b with n = 3 the function computes 2x^3 + x^2
    x = 1.5
    assert ez.autodiff(ez.Forward, fn, ez.Duplicated(x, 1.0), ez.Const(1), ez.Const(3)) == \
        pytest.approx(6 * x * x + 2 * x, rel=1e-12)
    with pytest.raises(DifferentiationError, match=r"irreducible control flow in @two_entry_loop.*several entries"):
        ez.autodiff(ez.Reverse, fn, ez.Active(x), ez.Const(1), ez.Const(3))
