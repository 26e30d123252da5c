"""Found probing C written as outside users write it (``void smooth(const double *x, double *y, int n)``
called in place, ``f(y, y)``): forward mode "follows the memory as the primal does", so it allowed
any sharing, but its tangents follow the memory only where the *shadows* share memory as the arrays
do. Silently wrong tangents, all with ``ez.autodiff(ez.Forward, ...)``:

* the same array passed twice with two separate shadows (a wrapper that makes one ``zeros_like``
  tangent per argument): the writes went to one shadow, the reads came from the other;
* the same array passed once Const and once Duplicated: what the function wrote through the Const
  argument lost its tangent, and the Duplicated one read it back (tangent 0 for ``3 a^2``);
* two arrays that do not share memory given one shadow (``lag`` below gave [0.3, -0.275, -0.555,
  0.486] for the tangent [0, -0.275, -0.18, 0.61]), or a shadow that is an array (the reverse of
  ``dot(x)`` with ``Duplicated(x, x)`` added the gradient into ``x`` itself).

Fixed: ``autodiff`` refuses (ArgumentError) written-through sharing in forward mode unless both
arguments are Duplicated with shadows at the same distance as the arrays, and in both modes shadows
that share memory where their arrays do not (when the function may write through either) and a shadow
that shares memory with an array. Read-only sharing stays allowed.
"""
from __future__ import annotations

import numpy as np
import pytest

import adoffload as ado
from adoffload import enzyme as ez
from adoffload.errors import ArgumentError

SOURCE = """
define void @lag(ptr %x, ptr %y, i64 %n) {
entry:
  br label %loop
loop:
  %i = phi i64 [ 1, %entry ], [ %i1, %loop ]
  %im = sub i64 %i, 1
  %pp = getelementptr double, ptr %x, i64 %im
  %a = load double, ptr %pp
  %pc = getelementptr double, ptr %x, i64 %i
  %b = load double, ptr %pc
  %ab = fmul double %a, %b
  %py = getelementptr double, ptr %y, i64 %i
  store double %ab, ptr %py
  %i1 = add i64 %i, 1
  %more = icmp ult i64 %i1, %n
  br i1 %more, label %loop, label %done
done:
  ret void
}

define double @dot(ptr %x, ptr %y, i64 %n) {
entry:
  br label %loop
loop:
  %i = phi i64 [ 0, %entry ], [ %i1, %loop ]
  %s = phi double [ 0.0, %entry ], [ %s1, %loop ]
  %xp = getelementptr double, ptr %x, i64 %i
  %yp = getelementptr double, ptr %y, i64 %i
  %a = load double, ptr %xp
  %b = load double, ptr %yp
  %ab = fmul double %a, %b
  %s1 = fadd double %s, %ab
  %i1 = add i64 %i, 1
  %more = icmp ult i64 %i1, %n
  br i1 %more, label %loop, label %done
done:
  ret double %s1
}
"""

X = np.array([0.5, -1.2, 2.0, 0.7])
V = np.array([0.3, 0.1, -0.2, 0.4])


@pytest.fixture(scope="module")
def module():
    return ado.from_llvm(SOURCE)


def test_in_place_with_one_shadow_follows_the_memory(module):
    """lag(z, z) is a running product z_i <- z_{i-1} z_i: its tangent, with one shadow for both."""
    z, dz = X.copy(), V.copy()
    ez.autodiff(ez.Forward, module["lag"], ez.Duplicated(z, dz), ez.Duplicated(z, dz), 4)
    np.testing.assert_allclose(z, np.cumprod(X), rtol=1e-15)
    expected = np.cumprod(X) * np.cumsum(V / X)            # d(prod x) = prod x * sum(dx / x)
    np.testing.assert_allclose(dz, expected, rtol=1e-13)


def test_in_place_with_two_shadows_is_refused(module):
    z = X.copy()
    with pytest.raises(ArgumentError, match="%x and %y of @lag share memory .* forward mode follows the tangents"):
        ez.autodiff(ez.Forward, module["lag"], ez.Duplicated(z, V.copy()), ez.Duplicated(z, V.copy()), 4)


def test_in_place_with_one_const_argument_is_refused(module):
    z = X.copy()
    for args in ((ez.Const(z), ez.Duplicated(z, V.copy())), (ez.Duplicated(z, V.copy()), z)):
        with pytest.raises(ArgumentError, match="share memory"):
            ez.autodiff(ez.Forward, module["lag"], *args, 4)


def test_shadows_at_another_distance_are_refused(module):
    """Overlapping views z[1:], z[:3] whose shadows are views of one buffer at the other distance."""
    z, dz = X.copy(), V.copy()
    with pytest.raises(ArgumentError, match="forward mode follows the tangents"):
        ez.autodiff(ez.Forward, module["lag"], ez.Duplicated(z[1:], dz[:3]), ez.Duplicated(z[:3], dz[1:]), 3)
    z, dz = X.copy(), V.copy()                             # the same distance: allowed, and the same as lag(z, z)
    ez.autodiff(ez.Forward, module["lag"], ez.Duplicated(z[1:], dz[1:]), ez.Duplicated(z[:3], dz[:3]), 3)
    assert np.all(np.isfinite(dz))


@pytest.mark.parametrize("mode", [ez.Forward, ez.Reverse], ids=["forward", "reverse"])
def test_one_shadow_for_two_distinct_arrays_is_refused_where_written(module, mode):
    shared = V.copy()
    with pytest.raises(ArgumentError, match="shadows of arguments %x and %y of @lag share memory where their arrays"):
        ez.autodiff(mode, module["lag"], ez.Duplicated(X.copy(), shared), ez.Duplicated(np.zeros(4), shared), 4)


@pytest.mark.parametrize("mode", [ez.Forward, ez.Reverse], ids=["forward", "reverse"])
def test_a_shadow_that_is_an_array_is_refused(module, mode):
    x = X.copy()
    with pytest.raises(ArgumentError, match="argument %x of @dot: its shadow shares memory with an array"):
        ez.autodiff(mode, module["dot"], ez.Duplicated(x, x), ez.Duplicated(X.copy(), np.zeros(4)), 4)
    np.testing.assert_array_equal(x, X)


def test_read_only_sharing_stays_allowed(module):
    """dot(x, x) with two tangents: v1 . x + x . v2; with one shadow for two arrays: tied directions."""
    x, v1, v2 = X.copy(), V.copy(), V[::-1].copy()
    tangent = ez.autodiff(ez.Forward, module["dot"], ez.Duplicated(x, v1), ez.Duplicated(x, v2), 4)
    assert tangent == pytest.approx(v1 @ X + X @ v2, rel=1e-14)
    y, shared = X[::-1].copy(), V.copy()
    tangent = ez.autodiff(ez.Forward, module["dot"], ez.Duplicated(x, shared), ez.Duplicated(y, shared), 4)
    assert tangent == pytest.approx(V @ y + x @ V, rel=1e-14)
