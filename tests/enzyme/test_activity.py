"""Activity analysis: varied ∩ useful, shadowed pointers, allocas, argument checks."""
from __future__ import annotations

import pytest

from adoffload.enzyme.activity import ACTIVE, CONST, DUP
from adoffload.enzyme.soundness import analyze
from adoffload.errors import DifferentiationError
from adoffload.ir.core import Module, const, f64, i64, ptr

from .jit import new_function


def test_values_active_only_between_active_inputs_and_outputs():
    module = Module()
    fn, b = new_function(module, "f", f64, [("x", f64), ("c", f64)])
    x, c = fn.args
    dead = b.fmul(x, x)                 # depends on x but reaches no output
    only_c = b.fmul(c, c)               # reaches the output but depends on no active input
    mixed = b.fadd(b.fmul(x, c), only_c)
    b.ret(mixed)
    info = analyze(fn, [DUP, CONST])
    assert info.is_active(mixed) and info.is_active(x)
    assert not info.is_active(dead) and not info.is_active(only_c) and not info.is_active(c)


def test_pointers_from_dup_args_are_shadowed_and_float_loads_active():
    module = Module()
    fn, b = new_function(module, "g", f64, [("p", ptr), ("q", ptr), ("i", i64)])
    p, q, i = fn.args
    gp, gq = b.gep(f64, p, [i]), b.gep(f64, q, [i])
    lp, lq, li = b.load(f64, gp), b.load(f64, gq), b.load(i64, gp)
    b.ret(b.fadd(lp, b.fmul(lq, b.cast("sitofp", li, f64))))
    info = analyze(fn, [DUP, CONST, CONST])
    assert info.has_shadow(gp) and not info.has_shadow(gq)
    assert info.is_active(lp) and not info.is_active(lq) and not info.is_active(li)
    assert info.shadow_pointer_roots == [p]


def test_alloca_receiving_an_active_value_gets_a_shadow():
    module = Module()
    fn, b = new_function(module, "h", f64, [("x", f64)])
    slot = b.alloca(f64)
    b.store(b.fmul(fn.args[0], const(f64, 3.0)), slot)
    loaded = b.load(f64, slot)
    b.ret(loaded)
    info = analyze(fn, [DUP])
    assert info.has_shadow(slot) and info.is_active(loaded) and slot in info.shadow_pointer_roots


def test_store_into_shadowed_memory_makes_the_value_useful():
    module = Module()
    fn, b = new_function(module, "s", f64, [("x", f64), ("out", ptr)])
    y = b.fmul(fn.args[0], fn.args[0])
    store = b.store(y, fn.args[1])
    b.ret(const(f64, 0.0))
    info = analyze(fn, [DUP, DUP])
    assert info.is_active(y) and info.writes_shadow(store)
    assert not analyze(fn, [DUP, CONST]).is_active(y)


@pytest.mark.parametrize("acts,message", [
    ([ACTIVE, CONST], "pointer: mark it Dup"),
    ([CONST, DUP], "carries no derivative"),
    ([CONST], "takes 2 arguments"),
])
def test_bad_activity_is_reported(acts, message):
    module = Module()
    fn, b = new_function(module, "k", f64, [("p", ptr), ("n", i64)])
    b.ret(const(f64, 0.0))
    with pytest.raises(DifferentiationError, match=message):
        analyze(fn, acts)
