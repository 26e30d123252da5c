"""Reverse mode through loops: static tapes, dynamic tapes (count function protocol), data-
dependent ``while`` exits, nested loops, break/continue, and tape-free sums."""
from __future__ import annotations

import numpy as np
import pytest

from adoffload.ir import export_module

from .test_reverse_support import ACTIVE, CONST, DUP, check_reverse, compile_host, derive, run_adjoint

# acc = acc * x[i] + sin(acc) over i < n: the accumulator is not a plain sum, so it is taped.
RECURRENCE = """
declare double @llvm.sin.f64(double)
define double @f(ptr %x, i64 %n, double %a0) {
entry:
  br label %head
head:
  %i = phi i64 [0, %entry], [%i1, %body]
  %acc = phi double [%a0, %entry], [%acc1, %body]
  %c = icmp slt i64 %i, BOUND
  br i1 %c, label %body, label %done
body:
  %p = getelementptr double, ptr %x, i64 %i
  %v = load double, ptr %p
  %m = fmul double %acc, %v
  %s = call double @llvm.sin.f64(double %acc)
  %acc1 = fadd double %m, %s
  %i1 = add nsw i64 %i, 1
  br label %head
done:
  ret double %acc
}
"""


def test_static_trip_count_uses_a_local_tape():
    src = RECURRENCE.replace("BOUND", "6")
    module, result = check_reverse(src, "f", [DUP, CONST, ACTIVE], [np.linspace(0.2, 1.1, 6), 6, 0.7],
                                   canonical=False)
    assert result.tape is None
    assert "tape.local" in export_module(module)


def test_dynamic_trip_count_uses_the_launcher_tape():
    src = RECURRENCE.replace("BOUND", "%n")
    x = np.linspace(0.2, 1.1, 9)
    module, result = check_reverse(src, "f", [DUP, CONST, ACTIVE], [x, 9, 0.7], canonical=False)
    assert result.tape is not None
    names = [a.name for a in result.function.args]
    assert names[-2:] == ["tape", "tape_offset"]
    assert result.count_function.name == result.tape.count_function
    # one record per iteration: the accumulator (8 bytes) -- the IV is reversed, not taped
    fns = compile_host(module)
    sizes = []
    for n in (0, 3, 9):
        seen = []
        run_adjoint(fns, result, [x.copy(), n, 0.7], [DUP, CONST, ACTIVE], [np.zeros(9), None, None], 1.0, True,
                    tape_bytes=seen)
        sizes.append(seen[0])
    assert sizes == [0, 3 * 8, 9 * 8]


SUM = """
define double @f(ptr %x, i64 %n) {
entry:
  br label %head
head:
  %i = phi i64 [0, %entry], [%i1, %body]
  %acc = phi double [0.0, %entry], [%acc1, %body]
  %c = icmp slt i64 %i, %n
  br i1 %c, label %body, label %done
body:
  %p = getelementptr double, ptr %x, i64 %i
  %v = load double, ptr %p
  %sq = fmul double %v, %v
  %acc1 = fadd double %acc, %sq
  %i1 = add nsw i64 %i, 1
  br label %head
done:
  ret double %acc
}
"""


def test_sum_of_squares_needs_no_tape():
    module, result = check_reverse(SUM, "f", [DUP, CONST], [np.array([0.5, -1.0, 2.0, 3.0]), 4], canonical=False)
    assert result.tape is None and "tape" not in export_module(module).split("f.reverse")[1]


# Newton's iteration for sqrt(a): a while loop whose trip count depends on the data.
NEWTON = """
declare double @llvm.fabs.f64(double)
define double @f(double %a) {
entry:
  br label %head
head:
  %y = phi double [1.0, %entry], [%y1, %body]
  %sq = fmul double %y, %y
  %r = fsub double %sq, %a
  %e = call double @llvm.fabs.f64(double %r)
  %c = fcmp ogt double %e, 1.0e-12
  br i1 %c, label %body, label %done
body:
  %q = fdiv double %a, %y
  %s = fadd double %y, %q
  %y1 = fmul double %s, 0.5
  br label %head
done:
  ret double %y
}
"""


@pytest.mark.parametrize("a", [2.0, 9.0, 1e4])
def test_while_with_data_dependent_exit(a):
    module, result = check_reverse(NEWTON, "f", [ACTIVE], [a], canonical=False, rtol=1e-6, h=1e-7 * a)
    assert result.tape is not None
    # and it is the derivative of sqrt, which Newton converged to
    fns = compile_host(module)
    grad = run_adjoint(fns, result, [a], [ACTIVE], [None], 1.0, True)[0][0]
    assert abs(grad - 0.5 / np.sqrt(a)) < 1e-6 / np.sqrt(a)


# for i < n: for j < m: acc = acc * c + x[i*m + j]  (non-sum carried value in nested loops)
NESTED = """
define double @f(ptr %x, i64 %n, i64 %m, double %c) {
entry:
  br label %outer
outer:
  %i = phi i64 [0, %entry], [%i1, %outer.latch]
  %acc = phi double [0.0, %entry], [%acc.in.lcssa, %outer.latch]
  %ci = icmp slt i64 %i, %n
  br i1 %ci, label %inner.pre, label %done
inner.pre:
  %row = mul nsw i64 %i, %m
  br label %inner
inner:
  %j = phi i64 [0, %inner.pre], [%j1, %inner.body]
  %acc.in = phi double [%acc, %inner.pre], [%acc2, %inner.body]
  %cj = icmp slt i64 %j, %m
  br i1 %cj, label %inner.body, label %outer.latch
inner.body:
  %k = add nsw i64 %row, %j
  %p = getelementptr double, ptr %x, i64 %k
  %v = load double, ptr %p
  %t = fmul double %acc.in, %c
  %t2 = fmul double %t, %v
  %acc2 = fadd double %t2, %v
  %j1 = add nsw i64 %j, 1
  br label %inner
outer.latch:
  %acc.in.lcssa = phi double [%acc.in, %inner]
  %i1 = add nsw i64 %i, 1
  br label %outer
done:
  ret double %acc
}
"""


@pytest.mark.parametrize("n, m", [(3, 4), (2, 1), (0, 3)])
def test_nested_loops(n, m):
    x = np.linspace(-0.5, 0.9, max(1, n * m))
    check_reverse(NESTED, "f", [DUP, CONST, CONST, ACTIVE], [x, n, m, 0.8], canonical=False)


# for i < n: if x[i] < 0: continue; acc = acc*x[i] + 1; if acc > limit: break
BREAK_CONTINUE = """
define double @f(ptr %x, i64 %n, double %limit) {
entry:
  br label %head
head:
  %i = phi i64 [0, %entry], [%i1, %latch]
  %acc = phi double [1.0, %entry], [%acc.next, %latch]
  %c = icmp slt i64 %i, %n
  br i1 %c, label %body, label %done
body:
  %p = getelementptr double, ptr %x, i64 %i
  %v = load double, ptr %p
  %neg = fcmp olt double %v, 0.0
  br i1 %neg, label %latch, label %work
work:
  %m = fmul double %acc, %v
  %a1 = fadd double %m, 1.0
  %big = fcmp ogt double %a1, %limit
  br i1 %big, label %broke, label %latch
latch:
  %acc.next = phi double [%acc, %body], [%a1, %work]
  %i1 = add nsw i64 %i, 1
  br label %head
broke:
  %r = fmul double %a1, %limit
  br label %done
done:
  %out = phi double [%acc, %head], [%r, %broke]
  ret double %out
}
"""


@pytest.mark.parametrize("limit", [100.0, 3.0])
def test_break_and_continue(limit):
    x = np.array([1.5, -0.3, 1.2, 2.5, -1.0, 1.7, 0.9])
    check_reverse(BREAK_CONTINUE, "f", [DUP, CONST, ACTIVE], [x, 7, limit], canonical=False)


def test_loop_loading_memory_it_overwrites():
    # x[i+1] = x[i] * x[i+1] for i < n-1: every loaded value is overwritten later
    src = """
define void @f(ptr %x, i64 %n) {
entry:
  %last = sub i64 %n, 1
  br label %head
head:
  %i = phi i64 [0, %entry], [%i1, %body]
  %c = icmp slt i64 %i, %last
  br i1 %c, label %body, label %done
body:
  %p = getelementptr double, ptr %x, i64 %i
  %i1 = add nsw i64 %i, 1
  %q = getelementptr double, ptr %x, i64 %i1
  %a = load double, ptr %p
  %b = load double, ptr %q
  %m = fmul double %a, %b
  store double %m, ptr %q
  br label %head
done:
  ret void
}
"""
    check_reverse(src, "f", [DUP, CONST], [np.array([1.1, 0.9, -1.3, 0.7, 1.05]), 5], canonical=False)


def test_canonicalized_python_style_loop():
    # the same recurrence through LLVM canonicalization (rotated/simplified loop forms)
    src = RECURRENCE.replace("BOUND", "%n")
    check_reverse(src, "f", [DUP, CONST, ACTIVE], [np.linspace(0.2, 1.1, 5), 5, 0.3])


@pytest.mark.parametrize("n, m", [(3, 4), (2, 2)])
def test_inner_product_identity_with_forward_mode(n, m):
    """<J v, w> = <v, J^T w> exactly (to rounding) through nested loops."""
    from adoffload.enzyme.forward import forward
    module, result = derive(NESTED, "f", [DUP, CONST, CONST, ACTIVE], canonical=False)
    tangent = forward(module, module["f"], [DUP, CONST, CONST, DUP], name="f.jvp")
    fns = compile_host(module, ["f.jvp", result.function.name, result.tape.count_function])
    rng = np.random.default_rng(1)
    x, vx, vc, w = rng.standard_normal(n * m), rng.standard_normal(n * m), rng.standard_normal(), rng.standard_normal()
    jv = fns[tangent.name](x, n, m, 0.8, vx, vc)
    gx, gc = np.zeros(n * m), np.zeros(1)
    nbytes = np.zeros(1, dtype=np.int64)
    fns[result.tape.count_function](x, n, m, 0.8, nbytes)
    fns[result.function.name](x, n, m, 0.8, gx, gc, w, np.zeros(int(nbytes[0]) // 8 + 1), 0)
    assert abs(jv * w - (np.dot(vx, gx) + vc * gc[0])) <= 1e-12 * (1 + abs(jv * w))
