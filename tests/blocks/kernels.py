"""Block kernels shared by the tests of tests/blocks (kernels must live in a file)."""
import adoffload as ado

TILE = 4


@ado.kernel(block=(TILE, TILE))
def tiled_matmul(A: ado.In[ado.f64, 2], B: ado.In[ado.f64, 2], C: ado.Out[ado.f64, 2]):
    i, j = ado.tid()
    ti, tj = ado.thread_id()
    As = ado.shared((TILE, TILE), ado.f64)
    Bs = ado.shared((TILE, TILE), ado.f64)
    acc = 0.0
    for t in range(A.shape[1] // TILE):
        As[ti, tj] = A[i, t * TILE + tj]
        Bs[ti, tj] = B[t * TILE + ti, j]
        ado.sync_threads()
        for k in range(TILE):
            acc += As[ti, k] * Bs[k, tj]
        ado.sync_threads()
    C[i, j] = acc


@ado.kernel(block=8)
def reverse_in_block(x: ado.In[ado.f64], y: ado.Out[ado.f64]):
    """y[i] = x of the mirror thread of the same block: wrong without a real barrier."""
    i = ado.tid()
    t = ado.thread_id()
    S = ado.shared(8, ado.f64)
    S[t] = x[i]
    ado.sync_threads()
    y[i] = S[7 - t]


@ado.kernel(block=16)
def smooth(x: ado.In[ado.f64], y: ado.Out[ado.f64], steps: ado.i64):
    """``steps`` rounds of a 3-point average inside each block (zero outside it), in shared memory;
    a thread-private array keeps this thread's history across the barriers."""
    i = ado.tid()
    t = ado.thread_id()
    S = ado.shared(16, ado.f64)
    history = ado.zeros(4, ado.f64)
    S[t] = x[i]
    ado.sync_threads()
    for s in range(steps):
        left = 0.0
        right = 0.0
        if t > 0:
            left = S[t - 1]
        if t < 15:
            right = S[t + 1]
        v = (left + S[t] + right) / 3.0
        history[s % 4] = v
        ado.sync_threads()
        S[t] = v
        ado.sync_threads()
    y[i] = S[t] + 0.0 * history[0]


@ado.kernel(block=(2, 4))
def indices(ids: ado.Out[ado.i64, 3]):
    i, j = ado.tid()
    ti, tj = ado.thread_id()
    bi, bj = ado.block_id()
    di, dj = ado.block_dim()
    ids[i, j, 0] = ti
    ids[i, j, 1] = tj
    ids[i, j, 2] = bi
    ids[i, j, 3] = bj
    ids[i, j, 4] = di * 10 + dj
    ids[i, j, 5] = ado.lane_id()
    ids[i, j, 6] = ado.warp_size()


@ado.kernel(block=4)
def shared_out_of_bounds(x: ado.In[ado.f64], y: ado.Out[ado.f64]):
    i = ado.tid()
    t = ado.thread_id()
    S = ado.shared(4, ado.f64)
    S[t + x.shape[0] - x.shape[0] + 1] = x[i]
    ado.sync_threads()
    y[i] = S[t]


@ado.kernel(block=8)
def broadcast_first(x: ado.In[ado.f64], y: ado.Out[ado.f64]):
    """Every thread reads the value thread 0 of its block wrote: the adjoint of S[0] gathers from all."""
    i = ado.tid()
    t = ado.thread_id()
    S = ado.shared(1, ado.f64)
    if t == 0:
        S[0] = ado.sin(x[i])
    ado.sync_threads()
    y[i] = S[0] * x[i]


RB, RK, RT = 4, 2, 2        # register-tiled matmul: RBxRB outputs per block, K step RK, RTxRT per thread


@ado.kernel(block=(2, 2))
def register_tiled_matmul(A: ado.In[ado.f64, 2], B: ado.In[ado.f64, 2], C: ado.Out[ado.f64, 2]):
    """benchmarks/kernels/blocks.py's SGEMM in miniature: shared tiles filled by all threads, private
    register tiles ``a``, ``b`` refilled every k step; grid (M / RT, N / RT)."""
    ti, tj = ado.thread_id()
    bi, bj = ado.block_id()
    As = ado.shared((RK, RB), ado.f64)
    Bs = ado.shared((RK, RB), ado.f64)
    acc = ado.zeros((RT, RT), ado.f64)
    a = ado.zeros(RT, ado.f64)
    b = ado.zeros(RT, ado.f64)
    r = ti * 2 + tj
    for t in range(A.shape[1] // RK):
        for q in range(2):
            e = r + q * 4
            As[e % RK, e // RK] = A[bi * RB + e // RK, t * RK + e % RK]
            Bs[e // RB, e % RB] = B[t * RK + e // RB, bj * RB + e % RB]
        ado.sync_threads()
        for k in range(RK):
            for m in range(RT):
                a[m] = As[k, ti * RT + m]
            for n in range(RT):
                b[n] = Bs[k, tj * RT + n]
            for m in range(RT):
                for n in range(RT):
                    acc[m, n] = ado.fma(a[m], b[n], acc[m, n])
        ado.sync_threads()
    for m in range(RT):
        for n in range(RT):
            C[bi * RB + ti * RT + m, bj * RB + tj * RT + n] = ado.sin(acc[m, n])


@ado.kernel(block=(TILE, TILE))
def tiled_matmul_rotated(A: ado.In[ado.f64, 2], B: ado.In[ado.f64, 2], C: ado.Out[ado.f64, 2]):
    """The A tile's columns rotate with the step t: the fill's addresses change per step, so
    the reverse sweep may not refill it (it keeps its loads on the tape)."""
    i, j = ado.tid()
    ti, tj = ado.thread_id()
    As = ado.shared((TILE, TILE), ado.f64)
    Bs = ado.shared((TILE, TILE), ado.f64)
    acc = 0.0
    for t in range(A.shape[1] // TILE):
        As[ti, (tj + t) % TILE] = A[i, t * TILE + tj]
        Bs[ti, tj] = B[t * TILE + ti, j]
        ado.sync_threads()
        for k in range(TILE):
            acc += ado.sin(As[ti, (k + t) % TILE]) * Bs[k, tj]
        ado.sync_threads()
    C[i, j] = acc


@ado.kernel(block=(TILE, TILE))
def tiled_matmul_reads_its_output(A: ado.In[ado.f64, 2], B: ado.In[ado.f64, 2], C: ado.InOut[ado.f64, 2]):
    """The fill reads C, which the kernel overwrites at the end: a refill would read the new C."""
    i, j = ado.tid()
    ti, tj = ado.thread_id()
    As = ado.shared((TILE, TILE), ado.f64)
    Bs = ado.shared((TILE, TILE), ado.f64)
    acc = 0.0
    for t in range(A.shape[1] // TILE):
        As[ti, tj] = A[i, t * TILE + tj] * C[i, j]
        Bs[ti, tj] = B[t * TILE + ti, j]
        ado.sync_threads()
        for k in range(TILE):
            acc += As[ti, k] * As[ti, k] * Bs[k, tj]
        ado.sync_threads()
    C[i, j] = acc


@ado.kernel(block=(TILE, TILE))
def tiled_matmul_clears_tile(A: ado.In[ado.f64, 2], B: ado.In[ado.f64, 2], C: ado.Out[ado.f64, 2]):
    """The A tile is cleared after its use in each step: a refill of the step would end with the
    cleared tile, so its loads stay on the tape."""
    i, j = ado.tid()
    ti, tj = ado.thread_id()
    As = ado.shared((TILE, TILE), ado.f64)
    Bs = ado.shared((TILE, TILE), ado.f64)
    acc = 0.0
    for t in range(A.shape[1] // TILE):
        As[ti, tj] = A[i, t * TILE + tj]
        Bs[ti, tj] = B[t * TILE + ti, j]
        ado.sync_threads()
        for k in range(TILE):
            acc += As[ti, k] * As[ti, k] * Bs[k, tj]
        ado.sync_threads()
        As[ti, tj] = 0.0
        ado.sync_threads()
    C[i, j] = acc


def make_tiled_matmul(tile: int, dtype):
    """The textbook tiled matmul with whole warps per block (``tile`` x ``tile`` threads): its
    adjoint adds every row's (column's) reads of a tile element into one shadow address."""
    @ado.kernel(block=(tile, tile))
    def tiled_matmul_wide(A: ado.In[dtype, 2], B: ado.In[dtype, 2], C: ado.Out[dtype, 2]):
        i, j = ado.tid()
        ti, tj = ado.thread_id()
        As = ado.shared((tile, tile), dtype)
        Bs = ado.shared((tile, tile), dtype)
        acc = dtype(0.0)
        for t in range(A.shape[1] // tile):
            As[ti, tj] = A[i, t * tile + tj]
            Bs[ti, tj] = B[t * tile + ti, j]
            ado.sync_threads()
            for k in range(tile):
                acc += As[ti, k] * Bs[k, tj]
            ado.sync_threads()
        C[i, j] = acc
    return tiled_matmul_wide


TILED_MATMUL_8 = {"f32": make_tiled_matmul(8, ado.f32), "f64": make_tiled_matmul(8, ado.f64)}


@ado.kernel(block=(8, 8))
def permuted_tiled_matmul(A: ado.In[ado.f64, 2], B: ado.In[ado.f64, 2], order: ado.In[ado.i64],
                          C: ado.Out[ado.f64, 2]):
    """``TILED_MATMUL_8["f64"]`` summing each tile in the order ``order`` gives (a permutation of
    0..7): the adjoint's shadow-tile addresses use a loaded index, which analysis/lane_groups.py
    cannot prove the same across a lane group, so the grouped adds keep their run-time check."""
    i, j = ado.tid()
    ti, tj = ado.thread_id()
    As = ado.shared((8, 8), ado.f64)
    Bs = ado.shared((8, 8), ado.f64)
    acc = 0.0
    for t in range(A.shape[1] // 8):
        As[ti, tj] = A[i, t * 8 + tj]
        Bs[ti, tj] = B[t * 8 + ti, j]
        ado.sync_threads()
        for k in range(8):
            kk = order[k]
            acc += As[ti, kk] * Bs[kk, tj]
        ado.sync_threads()
    C[i, j] = acc


SY, SX, SR = 2, 4, 20            # a small benchmarks/kernels/blocks.py stencil: (SY, SX) threads, SR rows each
TR = SY * SR


@ado.kernel(block=(SY, SX))
def stencil_rows(x: ado.In[ado.f64, 2], y: ado.Out[ado.f64, 2]):
    """y = 0.5 x + 0.125 (4 neighbours), zero outside; grid (n / SR, m). Each thread walks SR rows
    of its column keeping the values above and at the point in registers (loop-carried)."""
    ti, tj = ado.thread_id()
    bi, bj = ado.block_id()
    T = ado.shared((TR + 2, SX + 2), ado.f64)
    n, m = x.shape[0], x.shape[1]
    r0 = bi * TR + ti * SR
    c = bj * SX + tj
    for q in range(SR):
        T[1 + ti * SR + q, 1 + tj] = x[r0 + q, c]
    h = ti * SX + tj
    top = bi * TR
    if h < SX:
        T[0, 1 + h] = x[top - 1, bj * SX + h] if top > 0 else 0.0
        T[TR + 1, 1 + h] = x[top + TR, bj * SX + h] if top + TR < n else 0.0
    for r in range(TR):
        if h == r % (SY * SX):
            T[1 + r, 0] = x[top + r, bj * SX - 1] if bj > 0 else 0.0
            T[1 + r, SX + 1] = x[top + r, bj * SX + SX] if bj * SX + SX < m else 0.0
    ado.sync_threads()
    up = T[ti * SR, 1 + tj]
    mid = T[ti * SR + 1, 1 + tj]
    for q in range(SR):
        down = T[ti * SR + q + 2, 1 + tj]
        y[r0 + q, c] = 0.5 * mid + 0.125 * (up + down + T[ti * SR + q + 1, tj] + T[ti * SR + q + 1, tj + 2])
        up = mid
        mid = down


@ado.kernel(block=(TILE, TILE))
def tiled_matmul_two_phase_fill(A: ado.In[ado.f64, 2], B: ado.In[ado.f64, 2], C: ado.Out[ado.f64, 2]):
    """The A tile is cleared, then (after a barrier) filled: each element is written by two
    different threads in that order. Refilling both without the barrier between them would race,
    so the A tile's loads stay on the tape."""
    i, j = ado.tid()
    ti, tj = ado.thread_id()
    As = ado.shared((TILE, TILE), ado.f64)
    Bs = ado.shared((TILE, TILE), ado.f64)
    acc = 0.0
    for t in range(A.shape[1] // TILE):
        As[tj, ti] = 0.0
        Bs[ti, tj] = B[t * TILE + ti, j]
        ado.sync_threads()
        As[ti, tj] = A[i, t * TILE + tj]
        ado.sync_threads()
        for k in range(TILE):
            acc += As[ti, k] * As[ti, k] * Bs[k, tj]
        ado.sync_threads()
    C[i, j] = acc


@ado.kernel(block=(2, 2, 8))
def cube_mirror(x: ado.In[ado.f64, 3], y: ado.Out[ado.f64, 3]):
    """Grid rank 3 (a batch folds into axis 0): a mirrored shared tile, a warp sum over the
    block's 32 threads and the block's index, each wrong if a block mixed batch elements."""
    i, j, k = ado.tid()
    a, b, c = ado.thread_id()
    bi, bj, bk = ado.block_id()
    S = ado.shared((2, 2, 8), ado.f64)
    S[a, b, c] = ado.sin(x[i, j, k])
    ado.sync_threads()
    y[i, j, k] = S[1 - a, 1 - b, 7 - c] * x[i, j, k] + ado.warp_sum(x[i, j, k]) + (bi * 100 + bj * 10 + bk)


@ado.kernel(block=(TILE, TILE))
def prefetched_matmul(A: ado.In[ado.f64, 2], B: ado.In[ado.f64, 2], C: ado.Out[ado.f64, 2]):
    """The tiled matmul as a hand-written SGEMM prefetches: the next step's elements are loaded
    into a register array while this step's tile is used, and stored into the tiles at the next
    step. The fill's values are loads of memory the kernel writes, so a refill takes them from the
    tape: one value per filled element and step instead of every k step's read."""
    i, j = ado.tid()
    ti, tj = ado.thread_id()
    As = ado.shared((TILE, TILE), ado.f64)
    Bs = ado.shared((TILE, TILE), ado.f64)
    ahead = ado.zeros(2, ado.f64)
    for q in ado.static_range(2):
        ahead[q] = A[i, tj] if q == 0 else B[ti, j]
    steps = A.shape[1] // TILE
    acc = 0.0
    for t in range(steps):
        As[ti, tj] = ahead[0]
        Bs[ti, tj] = ahead[1]
        ado.sync_threads()
        if t + 1 < steps:
            ahead[0] = A[i, (t + 1) * TILE + tj]
            ahead[1] = B[(t + 1) * TILE + ti, j]
        for k in range(TILE):
            acc += ado.sin(As[ti, k]) * Bs[k, tj]
        ado.sync_threads()
    C[i, j] = acc


def make_register_sgemm(side: int, tm: int, bk: int, dtype):
    """A register-tiled matmul as benchmarks/kernels/blocks.py's ``sgemm_static`` writes it: blocks of
    ``side`` x ``side`` threads, ``tm`` x ``tm`` outputs per thread strided by ``side``, K steps of
    ``bk``; the register tiles unrolled (``ado.static_range``). Its adjoint adds ``tm`` values in a
    row into each shadow tile: the batched grouped adds of codegen/gpu/shared_batches.py. Grid
    (M / tm, N / tm); M, N multiples of side * tm, K of bk."""
    bm = side * tm
    per = bk * bm // (side * side)

    @ado.kernel(block=(side, side))
    def register_sgemm(A: ado.In[dtype, 2], B: ado.In[dtype, 2], C: ado.Out[dtype, 2]):
        ti, tj = ado.thread_id()
        bi, bj = ado.block_id()
        As = ado.shared((bk, bm), dtype)
        Bs = ado.shared((bk, bm), dtype)
        acc = ado.zeros((tm, tm), dtype)
        a = ado.zeros(tm, dtype)
        b = ado.zeros(tm, dtype)
        r = ti * side + tj
        for t in range(A.shape[1] // bk):
            for q in range(per):
                e = r + q * side * side
                As[e % bk, e // bk] = A[bi * bm + e // bk, t * bk + e % bk]
                Bs[e // bm, e % bm] = B[t * bk + e // bm, bj * bm + e % bm]
            ado.sync_threads()
            for k in range(bk):
                for m in ado.static_range(tm):
                    a[m] = As[k, ti + side * m]
                for n in ado.static_range(tm):
                    b[n] = Bs[k, tj + side * n]
                for m in ado.static_range(tm):
                    for n in ado.static_range(tm):
                        acc[m, n] = ado.fma(a[m], b[n], acc[m, n])
            ado.sync_threads()
        for m in ado.static_range(tm):
            for n in ado.static_range(tm):
                C[bi * bm + ti + side * m, bj * bm + tj + side * n] = acc[m, n]
    return register_sgemm


# (block side, outputs per thread per axis, K step): lane groups of 8 and 4 lanes for 4 values
# (8x8 blocks) and of 16 and 2 lanes for 8 values (16x16 blocks, the benchmark's shape)
REGISTER_SGEMM_SHAPES = {"8x8": (8, 4, 4), "16x16": (16, 8, 8)}


@ado.kernel(block=(TILE, TILE))
def prefetched_matmul_looped_fill(A: ado.In[ado.f64, 2], B: ado.In[ado.f64, 2], C: ado.Out[ado.f64, 2]):
    """``prefetched_matmul`` with K steps of 2 * TILE, each thread filling two elements of each tile
    in a loop (not unrolled) from its register arrays: the fill's values are loads inside a loop in
    the step, so one taped value per step would not do (refill.py keeps those tiles' reads taped)."""
    i, j = ado.tid()
    ti, tj = ado.thread_id()
    As = ado.shared((TILE, 2 * TILE), ado.f64)
    Bs = ado.shared((2 * TILE, TILE), ado.f64)
    a_ahead = ado.zeros(2, ado.f64)
    b_ahead = ado.zeros(2, ado.f64)
    for q in range(2):
        a_ahead[q] = A[i, 2 * tj + q]
        b_ahead[q] = B[2 * ti + q, j]
    steps = A.shape[1] // (2 * TILE)
    acc = 0.0
    for t in range(steps):
        for q in range(2):
            As[ti, 2 * tj + q] = a_ahead[q]
            Bs[2 * ti + q, tj] = b_ahead[q]
        ado.sync_threads()
        if t + 1 < steps:
            for q in range(2):
                a_ahead[q] = A[i, (t + 1) * 2 * TILE + 2 * tj + q]
                b_ahead[q] = B[(t + 1) * 2 * TILE + 2 * ti + q, j]
        for k in range(2 * TILE):
            acc += ado.sin(As[ti, k]) * Bs[k, tj]
        ado.sync_threads()
    C[i, j] = acc
