"""Block kernels of issue 13 (the blocks suite times them; tests/blocks reuses them): register-tiled
f32 SGEMMs, a tiled matmul, a block-reduction DOT and shared-memory 2-D stencils, with the plain
one-thread-per-point stencil they are compared against."""
from __future__ import annotations

import adoffload as ado

BM, BK, TM = 128, 8, 8          # block tile (BM x BM outputs), K step, outputs per thread per axis


@ado.kernel(block=(16, 16))
def sgemm(A: ado.In[ado.f32, 2], B: ado.In[ado.f32, 2], C: ado.Out[ado.f32, 2]):
    """C = A @ B; grid (M/8, N/8); M, N multiples of 128, K of 8."""
    ti, tj = ado.thread_id()
    bi, bj = ado.block_id()
    As = ado.shared((BK, BM), ado.f32)          # A tile, transposed: As[k, m]
    Bs = ado.shared((BK, BM), ado.f32)
    acc = ado.zeros((TM, TM), ado.f32)
    a = ado.zeros(TM, ado.f32)
    b = ado.zeros(TM, ado.f32)
    r = ti * 16 + tj
    for t in range(A.shape[1] // BK):
        for q in range(4):                      # 1024 elements of each tile, 4 per thread
            e = r + q * 256
            As[e % BK, e // BK] = A[bi * BM + e // BK, t * BK + e % BK]
            Bs[e // BM, e % BM] = B[t * BK + e // BM, bj * BM + e % BM]
        ado.sync_threads()
        for k in range(BK):
            for m in range(TM):
                a[m] = As[k, ti * TM + m]
            for n in range(TM):
                b[n] = Bs[k, tj * TM + n]
            for m in range(TM):
                for n in range(TM):
                    acc[m, n] = ado.fma(a[m], b[n], acc[m, n])
        ado.sync_threads()
    for m in range(TM):
        for n in range(TM):
            C[bi * BM + ti * TM + m, bj * BM + tj * TM + n] = acc[m, n]


@ado.kernel(block=(16, 16))
def sgemm_strided(A: ado.In[ado.f32, 2], B: ado.In[ado.f32, 2], C: ado.Out[ado.f32, 2]):
    """``sgemm`` with each thread's 8x8 outputs strided by 16 (rows ti + 16 m, columns tj + 16 n):
    register-tile reads of Bs without bank conflicts, coalesced C stores, and in the adjoint the
    adds into the shadow tiles from lanes that share an address land in distinct banks once
    combined (for ``sgemm`` the Bs shadow's 16 adding lanes per warp hit 4 banks)."""
    ti, tj = ado.thread_id()
    bi, bj = ado.block_id()
    As = ado.shared((BK, BM), ado.f32)
    Bs = ado.shared((BK, BM), ado.f32)
    acc = ado.zeros((TM, TM), ado.f32)
    a = ado.zeros(TM, ado.f32)
    b = ado.zeros(TM, ado.f32)
    r = ti * 16 + tj
    for t in range(A.shape[1] // BK):
        for q in range(4):
            e = r + q * 256
            As[e % BK, e // BK] = A[bi * BM + e // BK, t * BK + e % BK]
            Bs[e // BM, e % BM] = B[t * BK + e // BM, bj * BM + e % BM]
        ado.sync_threads()
        for k in range(BK):
            for m in range(TM):
                a[m] = As[k, ti + 16 * m]
            for n in range(TM):
                b[n] = Bs[k, tj + 16 * n]
            for m in range(TM):
                for n in range(TM):
                    acc[m, n] = ado.fma(a[m], b[n], acc[m, n])
        ado.sync_threads()
    for m in range(TM):
        for n in range(TM):
            C[bi * BM + ti + 16 * m, bj * BM + tj + 16 * n] = acc[m, n]


@ado.kernel(block=(16, 16))
def sgemm_static(A: ado.In[ado.f32, 2], B: ado.In[ado.f32, 2], C: ado.Out[ado.f32, 2]):
    """``sgemm_strided`` with its inner loops written ``ado.static_range`` (unrolled by the front end):
    the reverse sweep then has no loop over the register tile, whose adjoint stays in registers."""
    ti, tj = ado.thread_id()
    bi, bj = ado.block_id()
    As = ado.shared((BK, BM), ado.f32)
    Bs = ado.shared((BK, BM), ado.f32)
    acc = ado.zeros((TM, TM), ado.f32)
    a = ado.zeros(TM, ado.f32)
    b = ado.zeros(TM, ado.f32)
    r = ti * 16 + tj
    for t in range(A.shape[1] // BK):
        for q in range(4):
            e = r + q * 256
            As[e % BK, e // BK] = A[bi * BM + e // BK, t * BK + e % BK]
            Bs[e // BM, e % BM] = B[t * BK + e // BM, bj * BM + e % BM]
        ado.sync_threads()
        for k in range(BK):
            for m in ado.static_range(TM):
                a[m] = As[k, ti + 16 * m]
            for n in ado.static_range(TM):
                b[n] = Bs[k, tj + 16 * n]
            for m in ado.static_range(TM):
                for n in ado.static_range(TM):
                    acc[m, n] = ado.fma(a[m], b[n], acc[m, n])
        ado.sync_threads()
    for m in ado.static_range(TM):
        for n in ado.static_range(TM):
            C[bi * BM + ti + 16 * m, bj * BM + tj + 16 * n] = acc[m, n]



@ado.kernel(block=(16, 16))
def sgemm_prefetch(A: ado.In[ado.f32, 2], B: ado.In[ado.f32, 2], C: ado.Out[ado.f32, 2]):
    """``sgemm_static`` with the next A/B tiles loaded into registers while the current one is
    multiplied (the usual prefetch of a hand-written SGEMM), and the A tile's rows padded by 4
    floats so that its transposed stores do not collide in one bank."""
    ti, tj = ado.thread_id()
    bi, bj = ado.block_id()
    As = ado.shared((BK, BM + 4), ado.f32)
    Bs = ado.shared((BK, BM), ado.f32)
    acc = ado.zeros((TM, TM), ado.f32)
    a = ado.zeros(TM, ado.f32)
    b = ado.zeros(TM, ado.f32)
    pa = ado.zeros(4, ado.f32)
    pb = ado.zeros(4, ado.f32)
    r = ti * 16 + tj
    tiles = A.shape[1] // BK
    for q in ado.static_range(4):
        e = r + q * 256
        pa[q] = A[bi * BM + e // BK, e % BK]
        pb[q] = B[e // BM, bj * BM + e % BM]
    for t in range(tiles):
        for q in ado.static_range(4):
            e = r + q * 256
            As[e % BK, e // BK] = pa[q]
            Bs[e // BM, e % BM] = pb[q]
        ado.sync_threads()
        if t + 1 < tiles:
            for q in ado.static_range(4):
                e = r + q * 256
                pa[q] = A[bi * BM + e // BK, (t + 1) * BK + e % BK]
                pb[q] = B[(t + 1) * BK + e // BM, bj * BM + e % BM]
        for k in range(BK):
            for m in ado.static_range(TM):
                a[m] = As[k, ti + 16 * m]
            for n in ado.static_range(TM):
                b[n] = Bs[k, tj + 16 * n]
            for m in ado.static_range(TM):
                for n in ado.static_range(TM):
                    acc[m, n] = ado.fma(a[m], b[n], acc[m, n])
        ado.sync_threads()
    for m in ado.static_range(TM):
        for n in ado.static_range(TM):
            C[bi * BM + ti + 16 * m, bj * BM + tj + 16 * n] = acc[m, n]


TILE = 16


@ado.kernel(block=(TILE, TILE))
def matmul16(A: ado.In[ado.f32, 2], B: ado.In[ado.f32, 2], C: ado.Out[ado.f32, 2]):
    """C = A @ B with 16x16 shared tiles, one output per thread (the textbook version)."""
    i, j = ado.tid()
    ti, tj = ado.thread_id()
    As = ado.shared((TILE, TILE), ado.f32)
    Bs = ado.shared((TILE, TILE), ado.f32)
    acc = ado.f32(0.0)
    for t in range(A.shape[1] // TILE):
        As[ti, tj] = A[i, t * TILE + tj]
        Bs[ti, tj] = B[t * TILE + ti, j]
        ado.sync_threads()
        for k in range(TILE):
            acc += As[ti, k] * Bs[k, tj]
        ado.sync_threads()
    C[i, j] = acc


DOT_BLOCK = 256


def make_block_dot(per_thread: int):
    @ado.kernel(block=DOT_BLOCK)
    def block_dot(a: ado.In[ado.f64], b: ado.In[ado.f64], out: ado.InOut[ado.f64]):
        """out[0] += a . b; grid = n / per_thread threads, each summing per_thread strided products."""
        i = ado.tid()
        stride = a.shape[0] // per_thread
        s = 0.0
        for k in range(per_thread):
            s += a[i + k * stride] * b[i + k * stride]
        total = ado.block_sum(s)
        if ado.thread_id() == 0:
            ado.atomic_add(out, 0, total)
    return block_dot


S = 16


@ado.kernel(block=(S, S))
def stencil_shared16(x: ado.In[ado.f32, 2], y: ado.Out[ado.f32, 2]):
    """The first version (one point per thread, 16x16 blocks), kept as a row: each warp reads two
    64-byte half rows, a quarter of the threads load a halo point after their own, and every
    point makes 5 shared-memory reads (5 shared atomic adds in the adjoint)."""
    i, j = ado.tid()
    ti, tj = ado.thread_id()
    T = ado.shared((S + 2, S + 2), ado.f32)
    n, m = x.shape[0], x.shape[1]
    T[ti + 1, tj + 1] = x[i, j]
    if ti == 0:
        T[0, tj + 1] = x[i - 1, j] if i > 0 else 0.0
    if ti == S - 1:
        T[S + 1, tj + 1] = x[i + 1, j] if i + 1 < n else 0.0
    if tj == 0:
        T[ti + 1, 0] = x[i, j - 1] if j > 0 else 0.0
    if tj == S - 1:
        T[ti + 1, S + 1] = x[i, j + 1] if j + 1 < m else 0.0
    ado.sync_threads()
    y[i, j] = 0.5 * T[ti + 1, tj + 1] + 0.125 * (T[ti, tj + 1] + T[ti + 2, tj + 1] + T[ti + 1, tj] + T[ti + 1, tj + 2])


SY, SX, SR = 8, 32, 4           # block threads (SY, SX); each thread computes SR = 4 consecutive rows
TR = SY * SR                    # tile rows


@ado.kernel(block=(SY, SX))
def stencil_shared(x: ado.In[ado.f32, 2], y: ado.Out[ado.f32, 2]):
    """y = 0.5 x + 0.125 (4 neighbours), zero outside; grid (n / 4, m). Each thread computes 4
    rows of one column from registers (its column and the points above and below, loaded once),
    and takes the left and right neighbours from the block's shared tile: 2 shared reads per
    point, so 2 shared adds per point in the adjoint. Warps read and write whole 128-byte rows;
    64 threads of 256 load one point of the tile's halo columns. Written out for 4 rows (no
    loop): the adjoint's register tile then needs no local memory."""
    ti, tj = ado.thread_id()
    bi, bj = ado.block_id()
    T = ado.shared((TR, SX + 2), ado.f32)
    n, m = x.shape[0], x.shape[1]
    r = ti * SR                     # this thread's first row in the tile
    r0 = bi * TR + r
    c = bj * SX + tj
    above = x[r0 - 1, c] if r0 > 0 else 0.0
    v0 = x[r0, c]
    v1 = x[r0 + 1, c]
    v2 = x[r0 + 2, c]
    v3 = x[r0 + 3, c]
    below = x[r0 + 4, c] if r0 + 4 < n else 0.0
    T[r, 1 + tj] = v0
    T[r + 1, 1 + tj] = v1
    T[r + 2, 1 + tj] = v2
    T[r + 3, 1 + tj] = v3
    h = ti * SX + tj                # rank in the block: who loads which halo point
    top = bi * TR
    if h < TR:
        T[h, 0] = x[top + h, bj * SX - 1] if bj > 0 else 0.0
    elif h < 2 * TR:
        T[h - TR, SX + 1] = x[top + h - TR, bj * SX + SX] if bj * SX + SX < m else 0.0
    ado.sync_threads()
    y[r0, c] = 0.5 * v0 + 0.125 * (above + v1 + T[r, tj] + T[r, tj + 2])
    y[r0 + 1, c] = 0.5 * v1 + 0.125 * (v0 + v2 + T[r + 1, tj] + T[r + 1, tj + 2])
    y[r0 + 2, c] = 0.5 * v2 + 0.125 * (v1 + v3 + T[r + 2, tj] + T[r + 2, tj + 2])
    y[r0 + 3, c] = 0.5 * v3 + 0.125 * (v2 + below + T[r + 3, tj] + T[r + 3, tj + 2])


@ado.kernel
def stencil_plain(x: ado.In[ado.f32, 2], y: ado.Out[ado.f32, 2]):
    """The same stencil, one thread per point reading its neighbours from global memory."""
    i, j = ado.tid()
    n, m = x.shape[0], x.shape[1]
    up = x[i - 1, j] if i > 0 else 0.0
    down = x[i + 1, j] if i + 1 < n else 0.0
    left = x[i, j - 1] if j > 0 else 0.0
    right = x[i, j + 1] if j + 1 < m else 0.0
    y[i, j] = 0.5 * x[i, j] + 0.125 * (up + down + left + right)
