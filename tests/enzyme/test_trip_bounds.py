"""Static trip bounds of halving, shifting and doubling loops (analysis/trip_bounds.py): the bound
holds for every start value (checked exhaustively on 8-bit counters against an independent
interpreter), loops that can run forever get none, and derivatives through such loops match
central differences, with the tape static where the bound allows."""
from __future__ import annotations

import numpy as np
import pytest

from adoffload.analysis.control_flow import Dominators, natural_loops, reachable_blocks
from adoffload.analysis.trip_bounds import apply_step, header_visit_bound, settling
from adoffload.ir import import_module

from .test_reverse_support import ACTIVE, CONST, DUP, check_reverse

# v = v * sin(v) + x[h & 7] * v for as long as the test on the counter h stays in the loop
LOOP = """
declare double @llvm.sin.f64(double)
define double @f(ptr %x, iN %n, double %v0) {
entry:
  PRE
  br label %head
head:
  %h = phi iN [START, %entry], [%h1, %body]
  %v = phi double [%v0, %entry], [%v1, %body]
  %c = TEST
  br i1 %c, label %body, label %done
body:
  %s = call double @llvm.sin.f64(double %v)
  %k = and iN %h, 7
  %kk = zext iN %k to i64
  %p = getelementptr double, ptr %x, i64 %kk
  %a = load double, ptr %p
  %m = fmul double %v, %s
  %w = fmul double %a, %v
  %v1 = fadd double %m, %w
  %h1 = STEP
  br label %head
done:
  ret double %v
}
"""


def loop(bits: int, start: str, step: str, test: str) -> str:
    """The loop with counter width ``bits``; ``start``: a constant, ``%n``, or an instruction on %n."""
    pre = ""
    if not (start.lstrip("-").isdigit() or start == "%n"):
        pre, start = f"%start = {start}", "%start"
    widen = "zext iN %k to i64" if bits < 64 else "add i64 %k, 0"
    text = LOOP.replace("zext iN %k to i64", widen).replace("PRE", pre).replace("START", start)
    return text.replace("STEP", step).replace("TEST", test).replace("iN", f"i{bits}")


def bound_of(src: str) -> int | None:
    fn = import_module(src)["f"]
    blocks = reachable_blocks(fn)
    dom = Dominators(blocks)
    (only,) = natural_loops(blocks, dom)
    return header_visit_bound(only, dom)


def visits(start: int, step, stays, limit: int = 10_000) -> int | None:
    """Header visits of ``h = start; while stays(h): h = step(h)`` (None: still looping at ``limit``)."""
    h = start
    for n in range(1, limit):
        if not stays(h):
            return n
        h = step(h)
        if h is None:
            return n          # poison: the next test is undefined behaviour
    return None


def s8(x: int) -> int:
    x &= 0xFF
    return x - 256 if x >= 128 else x


# (step IR, test IR, Python step on the signed value (None: poison), Python test) on i8
EIGHT_BIT = {
    "lshr_gt": ("lshr i8 %h, 1", "icmp sgt i8 %h, 0", lambda h: s8((h & 0xFF) >> 1), lambda h: h > 0),
    "lshr_ne": ("lshr i8 %h, 1", "icmp ne i8 %h, 0", lambda h: s8((h & 0xFF) >> 1), lambda h: h != 0),
    "ashr_gt": ("ashr i8 %h, 1", "icmp sgt i8 %h, 0", lambda h: h >> 1, lambda h: h > 0),
    "ashr2_sge": ("ashr i8 %h, 2", "icmp sge i8 %h, 1", lambda h: h >> 2, lambda h: h >= 1),
    "sdiv_ne": ("sdiv i8 %h, 2", "icmp ne i8 %h, 0", lambda h: int(h / 2), lambda h: h != 0),
    "udiv3_uge": ("udiv i8 %h, 3", "icmp uge i8 %h, 1", lambda h: s8((h & 0xFF) // 3), lambda h: (h & 0xFF) >= 1),
    "shl_ne": ("shl i8 %h, 1", "icmp ne i8 %h, 0", lambda h: s8(h << 1), lambda h: h != 0),
    "mul6_ne": ("mul i8 %h, 6", "icmp ne i8 %h, 0", lambda h: s8(h * 6), lambda h: h != 0),
    # the test reads the next value (a rotated loop): leaves when h >> 1 is 0
    "lshr_next": ("lshr i8 %h, 1", "icmp ugt i8 %h1, 0", lambda h: s8((h & 0xFF) >> 1),
                  lambda h: ((h & 0xFF) >> 1) > 0),
}


@pytest.mark.parametrize("name", sorted(EIGHT_BIT))
def test_settling_bounds_hold_for_every_start(name):
    step_ir, test_ir, step, stays = EIGHT_BIT[name]
    if "%h1" in test_ir:     # the test reads the step: move it above the test
        src = loop(8, "%n", step_ir, test_ir).replace("  %h1 = " + step_ir + "\n", "")
        src = src.replace("  %c = ", f"  %h1 = {step_ir}\n  %c = ")
    else:
        src = loop(8, "%n", step_ir, test_ir)
    bound = bound_of(src)
    assert bound is not None and bound <= 8 + 2
    worst = max(visits(s8(n), step, stays) for n in range(256))
    assert worst <= bound
    # and from each constant start the bound is the exact count (the header's last visit included)
    for n in (0, 1, 5, 64, 127, -1, -128):
        const = loop(8, str(n), step_ir, test_ir) if "%h1" not in test_ir else None
        if const is not None:
            assert visits(n, step, stays) <= bound_of(const)


@pytest.mark.parametrize("step_ir, test_ir, why", [
    ("ashr i8 %h, 1", "icmp ne i8 %h, 0", "a negative start stops at -1"),
    ("ashr i8 %h, 2", "icmp ugt i8 %h, 0", "-1 is above 0 unsigned"),
    ("lshr i8 %h, 1", "icmp sge i8 %h, 0", "0 stays in the loop"),
    ("lshr i8 %h, 1", "icmp ne i8 %h, %n", "0 != n stays for an unknown n"),
    ("shl i8 %h, 1", "icmp slt i8 %h, %n", "wrapping doubling: 0 < n forever"),
    ("shl i8 %h, 1", "icmp slt i8 %h, 100", "a start of 0 never grows"),
    ("add i8 %h, 1", "icmp slt i8 %h, %n", "an additive counter against an unknown limit"),
    ("mul i8 %h, 3", "icmp ne i8 %h, 0", "an odd factor never reaches 0"),
])
def test_loops_that_may_not_end_get_no_bound(step_ir, test_ir, why):
    assert bound_of(loop(8, "%n", step_ir, test_ir)) is None, why


def test_no_wrap_doubling_from_a_nonzero_start_is_bounded_by_the_width():
    # for (int s = 1; s < n; s *= 2): past 2**62 the product overflows, which is poison
    for flags in ("nsw", "nuw"):
        assert bound_of(loop(64, "1", f"shl {flags} i64 %h, 1", "icmp slt i64 %h, %n")) == 66
        assert bound_of(loop(64, "1", f"mul {flags} i64 %h, 2", "icmp slt i64 %h, %n")) == 66
    assert bound_of(loop(64, "%n", "shl nsw i64 %h, 1", "icmp slt i64 %h, 100")) is None   # start 0
    assert bound_of(loop(64, "1", "shl i64 %h, 1", "icmp slt i64 %h, %n")) is None         # wraps


def test_constant_starts_simulate_exactly():
    assert bound_of(loop(64, "64", "lshr i64 %h, 1", "icmp ne i64 %h, 0")) == 9     # 64..1, 0: 8 tests
    assert bound_of(loop(32, "1", "shl i32 %h, 1", "icmp slt i32 %h, 32")) == 7     # 1..16, 32
    assert bound_of(loop(32, "1000", "udiv i32 %h, 10", "icmp ugt i32 %h, 0")) == 6


def test_settling_reaches_its_fixed_points_from_every_8_bit_value():
    for opcode, amounts in (("lshr", (1, 2, 3, 7)), ("ashr", (1, 2, 7)), ("shl", (1, 3)), ("udiv", (2, 3, 7, 200)),
                            ("sdiv", (2, -2, 3, -5, 127, -128)), ("mul", (2, 6, 4, -4, 128))):
        for c in amounts:
            steps, fixed = settling(opcode, c, 8)
            for x in range(256):
                for _ in range(steps):
                    x = apply_step(opcode, x, c, 8)
                assert x in fixed, (opcode, c)
            assert all(apply_step(opcode, p, c, 8) == p for p in fixed)
    assert settling("mul", 3, 8) is None and settling("add", 1, 8) is None and settling("udiv", 1, 8) is None


@pytest.mark.parametrize("bits, start, step_ir, test_ir, n, static", [
    (64, "64", "lshr i64 %h, 1", "icmp ne i64 %h, 0", 0, True),            # constant start
    (16, "ashr i16 %n, 1", "ashr i16 %h, 1", "icmp sgt i16 %h, 0", 32767, True),      # h = n // 2 ... h //= 2
    (16, "ashr i16 %n, 1", "ashr i16 %h, 1", "icmp sgt i16 %h, 0", -7, True),         # no trip at all
    (16, "%n", "lshr i16 %h, 1", "icmp ne i16 %h, 0", -1, True),           # the longest: 16 trips
    (64, "1", "shl nsw i64 %h, 1", "icmp slt i64 %h, %n", 1000, False),    # bound 66: too many bytes
    (64, "1", "shl i64 %h, 1", "icmp slt i64 %h, %n", 1000, False),        # no bound: dynamic
])
def test_derivatives_through_halving_and_doubling_loops(bits, start, step_ir, test_ir, n, static):
    x = np.linspace(0.1, 0.4, 8)
    module, result = check_reverse(loop(bits, start, step_ir, test_ir), "f", [DUP, CONST, ACTIVE], [x, n, 0.3],
                                   canonical=False)
    assert (result.tape is None) == static


def test_an_equality_exit_far_away_is_solved_not_simulated(monkeypatch):
    """rustc -O0 tests every range loop's counter for overflow (``i == -1`` leaves to a panic): that
    test first holds after 2^64 steps. It is solved (trip_bounds._equal_only_after_limit) instead of
    simulated for MAX_SIMULATED_TRIPS steps (seconds per loop), and the loop's own test gives the
    bound. Exhaustive on i8 with a small limit: the solved answer equals the simulation's."""
    import adoffload.analysis.trip_bounds as tb
    src = loop(64, "0", "add i64 %h, 1", "icmp ne i64 %h, 3")
    two_tests = src.replace("  %c = icmp ne i64 %h, 3\n  br i1 %c, label %body, label %done",
                            "  %ovf = icmp eq i64 %h, -1\n  br i1 %ovf, label %done, label %check\n"
                            "check:\n  %c = icmp ne i64 %h, 3\n  br i1 %c, label %body, label %done")
    assert two_tests != src
    assert bound_of(two_tests) == 5
    monkeypatch.setattr(tb, "MAX_SIMULATED_TRIPS", 40)
    fn = import_module(loop(8, "0", "add i8 %h, 1", "icmp ne i8 %h, 3"))["f"]
    phi = next(i for i in fn.instructions() if i.opcode == "phi" and i.type.is_int)
    step = next(i for i in fn.instructions() if i.opcode == "add" and i.operands[0] is phi)
    cond = next(i for i in fn.instructions() if i.opcode == "icmp")
    for amount in range(0, 256, 3):
        for start in range(0, 256, 29):
            counter = tb._Counter(phi, step, amount, start)
            for c in range(0, 256, 17):
                for reads in (phi, step):
                    cond.operands = [reads, tb.Constant(phi.type, c)]
                    for predicate, stays in (("eq", False), ("ne", True)):
                        cond.predicate = predicate
                        x, first = start, None
                        for k in range(tb.MAX_SIMULATED_TRIPS):
                            if (x if reads is phi else (x + amount) & 255) == c:
                                first = k
                                break
                            x = (x + amount) & 255
                        assert tb._equal_only_after_limit(counter, cond, stays) == (amount % 256 != 0 and first is None)


def test_a_start_from_an_enclosing_counter_is_bounded_by_the_values_that_counter_takes():
    """for i in range(6): for j in range(i + 1, 6): the inner start is i + 1 for i in 0..6 (the value
    that leaves included): the inner loop runs its header at most 6 times per entry."""
    import adoffload as ado
    from adoffload.analysis.control_flow import LoopInfo

    @ado.kernel
    def triangle(x: ado.In[ado.f64], y: ado.Out[ado.f64]):
        k = ado.tid()
        s = 0.0
        for i in range(6):
            for j in range(i + 1, 6):
                s = ado.sin(s) * x[i] + x[j]
        y[k] = s

    module = import_module(triangle.module_text())
    fn = module.functions[triangle.body_name]
    blocks = reachable_blocks(fn)
    dom = Dominators(blocks)
    info = LoopInfo(blocks, dom)
    inner = [loop for loop in info.loops if any(loop.header in other.blocks and other is not loop
                                               for other in info.loops)]
    assert len(inner) == 1
    assert info.visit_bound(inner[0].header) <= 8 * 8     # (6 + 2) outer visits, at most 7 inner
    assert ado.vjp(triangle, ["x"]).tape is None        # a static tape: no launcher-sized one


ONE_TRIP = """
define double @f(ptr %x) {
entry:
  br label %head
head:
  %first = phi i1 [true, %entry], [LATCH, %body]
  %s = phi double [0.0, %entry], [%s1, %body]
  br i1 %first, label %body, label %done
body:
  %a = load double, ptr %x
  %m = fmul double %a, %a
  %s1 = fadd double %s, %m
  br label %head
done:
  ret double %s
}
"""


def test_a_loop_of_one_trip_folded_to_an_i1_phi_is_bounded():
    """GVN folds ``for i in range(1)`` (``len(x) == 1``, ``range(len(x) - 1)`` at n = 2) into a branch
    on ``phi i1 [true, %entry], [false, %latch]``: two header visits, bounded (the reverse sweep's tape
    is static); with ``true`` from the latch too the loop never ends: no bound."""
    assert bound_of(ONE_TRIP.replace("LATCH", "false")) in (2, 3)
    assert bound_of(ONE_TRIP.replace("LATCH", "true")) is None


def test_value_and_grad_through_a_loop_of_one_trip():
    """``ado.value_and_grad`` of a helper looping over a local array of one element (its adjoint was
    refused as needing a dynamic tape)."""
    import adoffload as ado

    @ado.func
    def squares(x):
        s = 0.0
        for i in range(len(x)):
            s += (x[i] - 1.0) ** 2
        return s

    @ado.kernel
    def one(x0: ado.In[ado.f64], f_out: ado.Out[ado.f64], g_out: ado.Out[ado.f64]):
        i = ado.tid()
        xt = ado.zeros(1, ado.f64)
        gt = ado.zeros(1, ado.f64)
        xt[0] = x0[i]
        f_out[i] = ado.value_and_grad(squares)(xt, out=gt)
        g_out[i] = gt[0]

    x0 = np.array([0.0, 3.0])
    f, g = np.zeros(2), np.zeros(2)
    one(x0, f, g, grid=2)
    np.testing.assert_allclose(f, (x0 - 1.0) ** 2)
    np.testing.assert_allclose(g, 2.0 * (x0 - 1.0))
