"""Kernels whose atomics form lane-combining groups (codegen/gpu/lane_combining.py): stencil adjoints,
odd offsets (negative, duplicated, farther than a warp), divergent and looped placements, and a
grid-stride entry. Shared by the CPU pattern tests and the GPU tests."""
from __future__ import annotations

import adoffload as ado

F32, F64 = ado.f32, ado.f64


@ado.kernel
def stencil_5pt(out: ado.Out[F64, 2], u: ado.In[F64, 2], a: F64, b: F64):
    """A 2-D 5-point stencil on the interior (grid (n-2, m-2)): its adjoint adds to d_u[i+1, j..j+2]."""
    i, j = ado.tid()
    out[i + 1, j + 1] = a * u[i + 1, j + 1] + b * (u[i, j + 1] + u[i + 2, j + 1] + u[i + 1, j] + u[i + 1, j + 2])


@ado.kernel
def stencil_f32(out: ado.Out[F32], u: ado.In[F32]):
    """A 1-D f32 stencil whose adjoint's offsets are 0, 1, 3, 3 (a duplicate) and 9."""
    i = ado.tid()
    out[i] = u[i + 3] * u[i + 3] + 2.0 * u[i] - u[i + 1] + 0.5 * u[i + 9]


@ado.kernel(bounds_check=False)
def odd_offsets(h: ado.InOut[F64], v: ado.In[F64]):
    """Primal atomics at i-2, i, i, i+5 and i+40 (past a warp: not in the group)."""
    i = ado.tid() + 2
    ado.atomic_add(h, i - 2, v[i])
    ado.atomic_add(h, i + 5, 2.0 * v[i])
    ado.atomic_add(h, i, 3.0 * v[i])
    ado.atomic_add(h, i + 40, 4.0 * v[i])
    ado.atomic_add(h, i, 5.0 * v[i])


@ado.kernel
def divergent(out: ado.Out[F64], u: ado.In[F64]):
    """The adjoint's group under a branch on loaded data: only some lanes of a warp reach it."""
    i = ado.tid()
    if u[i + 3] > 0.0:
        out[i] = u[i] + 2.0 * u[i + 1] + 3.0 * u[i + 2]


@ado.kernel
def looped(out: ado.Out[F64], u: ado.In[F64]):
    """The adjoint's group in a loop whose trip count differs between neighbouring lanes."""
    i = ado.tid()
    s = 0.0
    for k in range(i % 3 + 1):
        s += u[i + 2 * k] - 0.5 * u[i + 2 * k + 1]
    out[i] = s


@ado.kernel(bounds_check=False)
def with_total(h: ado.InOut[F64], total: ado.InOut[F64], v: ado.In[F64]):
    """A uniform atomic too: the NVPTX entry loops over the grid (codegen/gpu/grid_stride.py)."""
    i = ado.tid()
    ado.atomic_add(total, 0, v[i])
    ado.atomic_add(h, i, v[i])
    ado.atomic_add(h, i + 1, v[i] * v[i])


@ado.kernel(block=(64,))
def block_stencil(out: ado.Out[F64], u: ado.In[F64]):
    """A block kernel (codegen/blocks.py's entry): its adjoint adds to d_u[i .. i+2]."""
    i = ado.tid()
    out[i] = u[i] + 2.0 * u[i + 1] + 3.0 * u[i + 2]


@ado.kernel(bounds_check=False)
def two_arms(h: ado.InOut[F64], v: ado.In[F64], c: ado.In[F64]):
    """A group on each side of a branch on data (neighbouring lanes on different sides): LLVM must not
    merge the two groups' warp operations (it does not merge convergent calls)."""
    i = ado.tid()
    if c[i] > 0.0:
        ado.atomic_add(h, i, v[i])
        ado.atomic_add(h, i + 1, 2.0 * v[i])
    else:
        ado.atomic_add(h, i, v[i])
        ado.atomic_add(h, i + 2, 3.0 * v[i])
