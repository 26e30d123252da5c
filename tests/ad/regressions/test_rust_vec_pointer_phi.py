"""Found with the Rust corpus of tests/ad/test_foreign_rust_hunt.py: every ``vec![0.0; n]``,
``Vec::with_capacity`` and ``collect`` at rustc -O2/-O3 was refused.

rustc keeps the new block's address as an integer and joins it with the dangling address 8 of an
empty Vec in an integer phi; the pointer is rebuilt with ``inttoptr``, through which the engine
cannot follow memory ("stores the active value ... into memory that has no shadow ('inttoptr')").
Fixed: ``ir.pointer_phis`` (run by ``from_llvm``) turns such an ``inttoptr`` of a phi of
``ptrtoint``s and integer constants into a pointer phi, and ``activity.memory_roots`` lets a
placeholder pointer (``inttoptr (i64 8 to ptr)``) meet a heap block in a phi. An integer of any
other origin still leaves the ``inttoptr`` refused. (The same IR, below, with ``cap`` >= ``n``.)
"""
from __future__ import annotations

import numpy as np
import pytest

import adoffload as ado
from adoffload import enzyme as ez
from adoffload import ir
from adoffload.errors import DifferentiationError

SCRATCH = """
declare ptr @__rust_alloc(i64, i64)
declare void @__rust_dealloc(ptr, i64, i64)

define double @squares_scratch(ptr %x, i64 %n, i64 %cap) {
start:
  %empty = icmp eq i64 %cap, 0
  br i1 %empty, label %join, label %alloc
alloc:
  %bytes = shl i64 %cap, 3
  %block = call ptr @__rust_alloc(i64 %bytes, i64 8)
  %address = ptrtoint ptr %block to i64
  br label %join
join:
  %bits = phi i64 [ %address, %alloc ], [ 8, %start ]
  %t = inttoptr i64 %bits to ptr
  %none = icmp eq i64 %n, 0
  br i1 %none, label %done, label %fill
fill:
  %i = phi i64 [ 0, %join ], [ %i.next, %fill ]
  %xi.p = getelementptr double, ptr %x, i64 %i
  %xi = load double, ptr %xi.p
  %sq = fmul double %xi, %xi
  %ti.p = getelementptr double, ptr %t, i64 %i
  store double %sq, ptr %ti.p
  %i.next = add i64 %i, 1
  %more = icmp ult i64 %i.next, %n
  br i1 %more, label %fill, label %sum
sum:
  %j = phi i64 [ 0, %fill ], [ %j.next, %sum ]
  %s = phi double [ 0.0, %fill ], [ %s.next, %sum ]
  %tj.p = getelementptr double, ptr %t, i64 %j
  %tj = load double, ptr %tj.p
  %k = sub i64 %n, %j
  %k1 = sub i64 %k, 1
  %tk.p = getelementptr double, ptr %t, i64 %k1
  %tk = load double, ptr %tk.p
  %prod = fmul double %tj, %tk
  %s.next = fadd double %s, %prod
  %j.next = add i64 %j, 1
  %again = icmp ult i64 %j.next, %n
  br i1 %again, label %sum, label %free
free:
  %size = shl i64 %cap, 3
  call void @__rust_dealloc(ptr %t, i64 %size, i64 8)
  br label %done
done:
  %r = phi double [ 0.0, %join ], [ %s.next, %free ]
  ret double %r
}
"""


def _gradient_closed_form(x):
    return 4.0 * x * x[::-1] ** 2            # f = sum_j x_j^2 x_(n-1-j)^2


def test_the_scratch_pointer_becomes_a_pointer_phi():
    fn = ado.from_llvm(SCRATCH).ir.functions["squares_scratch"]
    assert not [i for i in fn.instructions() if i.opcode == "inttoptr"]
    phi = [i for i in fn.instructions() if i.opcode == "phi" and i.type.is_pointer]
    assert len(phi) == 1 and {getattr(o, "opcode", o.__class__.__name__) for o in phi[0].operands} == {"call", "inttoptr"}


@pytest.mark.parametrize("mode", ["forward", "reverse"])
def test_gradient_through_the_heap_scratch(mode):
    fn = ado.from_llvm(SCRATCH)["squares_scratch"]
    x = np.array([0.5, -1.0, 2.0, 0.3])
    assert fn(x.copy(), 4, 6) == pytest.approx(float(np.sum(x ** 2 * x[::-1] ** 2)))
    if mode == "reverse":
        grad = np.zeros(4)
        ez.autodiff(ez.Reverse, fn, ez.Duplicated(x.copy(), grad), 4, 6)
    else:
        grad = np.array([ez.autodiff(ez.Forward, fn, ez.Duplicated(x.copy(), np.eye(4)[k]), 4, 6) for k in range(4)])
    np.testing.assert_allclose(grad, _gradient_closed_form(x), rtol=1e-14)


def test_an_address_from_an_integer_argument_stays_refused():
    """The empty side is the integer argument ``n`` itself: an address of unknown origin."""
    text = SCRATCH.replace("[ 8, %start ]", "[ %n, %start ]")
    module = ado.from_llvm(text)
    assert any(i.opcode == "inttoptr" for i in module.ir.functions["squares_scratch"].instructions())
    with pytest.raises(DifferentiationError, match="inttoptr"):
        ez.autodiff(ez.Reverse, module["squares_scratch"], ez.Duplicated(np.ones(4), np.zeros(4)), 4, 6)
