"""A double split into its two 32-bit halves, each moved as a float (CUDA code shuffles a double so,
as two float-sized shuffles) and joined back: the rebuilt double's derivative cannot be followed
through the bits, so both modes refuse. Before the fix, the halves' floats "reached no result" through
float operations alone, the check stopped there, and the derivative silently lost the term (both
modes gave 1.5 for f(x) = x |x| at x = 1.5, not 3)."""
import numpy as np
import pytest

import adoffload as ado
from adoffload import enzyme as ez
from adoffload.errors import DifferentiationError

# f(x) = x * |x|, |x| rebuilt from x's halves, the high half through fabs as a float (its sign bit)
HALVES = """
define double @f(double %x) {
entry:
  %bits = bitcast double %x to i64
  %hi.shift = lshr i64 %bits, 32
  %hi = trunc i64 %hi.shift to i32
  %lo = trunc i64 %bits to i32
  %hi.f = bitcast i32 %hi to float
  %lo.f = bitcast i32 %lo to float
  %hi.m = call float @llvm.fabs.f32(float %hi.f)
  %lo.m = call float @llvm.copysign.f32(float %lo.f, float 1.0)
  %hi.back = bitcast float %hi.m to i32
  %lo.back = bitcast float %lo.m to i32
  %hi.wide = zext i32 %hi.back to i64
  %lo.wide = zext i32 %lo.back to i64
  %hi.up = shl i64 %hi.wide, 32
  %joined = or i64 %hi.up, %lo.wide
  %y = bitcast i64 %joined to double
  %r = fmul double %x, %y
  ret double %r
}

declare float @llvm.fabs.f32(float)
declare float @llvm.copysign.f32(float, float)
"""


@pytest.mark.parametrize("mode", ["forward", "reverse"])
def test_a_double_rebuilt_from_halves_moved_as_floats_is_refused(mode):
    fn = ado.from_llvm(HALVES)["f"]
    with pytest.raises(DifferentiationError, match="float bits carried as an integer"):
        if mode == "forward":
            ez.autodiff(ez.Forward, fn, ez.Duplicated(np.float64(1.5), np.float64(1.0)))
        else:
            ez.autodiff(ez.Reverse, fn, ez.Active(np.float64(1.5)))
