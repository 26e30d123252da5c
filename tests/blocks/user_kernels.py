"""Block kernels written the way an outside user writes them (tests/blocks/test_user_kernels.py):
each is checked against a numpy reference and both derivative oracles on the host CPU."""
import adoffload as ado


@ado.kernel(block=16)
def softmax_rows(x: ado.In[ado.f64], y: ado.Out[ado.f64]):
    """Softmax of each row of 16 (one block per row) with block_max and block_sum."""
    i = ado.tid()
    v = x[i]
    e = ado.exp(v - ado.block_max(v))
    y[i] = e / ado.block_sum(e)


@ado.kernel(block=(1, 32))
def layernorm(x: ado.In[ado.f64, 2], g: ado.In[ado.f64], y: ado.Out[ado.f64, 2]):
    """Layer norm over each run of 32 columns (two block sums), scaled by a gain per column."""
    r, c = ado.tid()
    tr, tc = ado.thread_id()
    v = x[r, c]
    d = v - ado.block_sum(v) / 32.0
    var = ado.block_sum(d * d) / 32.0
    y[r, c] = d / ado.sqrt(var + 1e-5) * g[tc]


@ado.kernel(block=(8, 8))
def transpose_squares(x: ado.In[ado.f64, 2], y: ado.Out[ado.f64, 2]):
    """y = (x * x).T through a padded 8 x 9 shared tile; grid = x.shape."""
    i, j = ado.tid()
    ti, tj = ado.thread_id()
    bi, bj = ado.block_id()
    T = ado.shared((8, 9), ado.f64)
    T[ti, tj] = x[i, j] * x[i, j]
    ado.sync_threads()
    y[bj * 8 + ti, bi * 8 + tj] = T[tj, ti]


@ado.kernel(block=16)
def damped_scan(x: ado.In[ado.f64], y: ado.Out[ado.f64]):
    """Hillis-Steele scan of sin(x) in each block of 16, double-buffered, each step adding 0.9 times
    the value ``off`` places back (a plain prefix sum would hide a wrong step)."""
    i = ado.tid()
    t = ado.thread_id()
    S = ado.shared((2, 16), ado.f64)
    S[0, t] = ado.sin(x[i])
    ado.sync_threads()
    src = 0
    off = 1
    while off < 16:
        v = S[src, t]
        if t >= off:
            v = v + S[src, t - off] * 0.9
        S[1 - src, t] = v
        ado.sync_threads()
        src = 1 - src
        off = off * 2
    y[i] = S[src, t]


@ado.kernel(block=32)
def halving_tree(x: ado.In[ado.f64], y: ado.Out[ado.f64]):
    """A reduction tree in shared memory with halving strides (a nonlinear combine); y[block]."""
    i = ado.tid()
    t = ado.thread_id()
    S = ado.shared(32, ado.f64)
    S[t] = x[i] * x[i]
    ado.sync_threads()
    s = 16
    while s > 0:
        if t < s:
            S[t] = S[t] + S[t + s] * ado.cos(S[t + s])
        ado.sync_threads()
        s = s // 2
    if t == 0:
        y[ado.block_id()] = S[0]


HALO = 2


@ado.kernel(block=8)
def conv1d_halo(x: ado.In[ado.f64], w: ado.In[ado.f64], y: ado.Out[ado.f64]):
    """y = sum_k w[k] tanh(x[i + k - HALO]) (zero outside x): a shared tile with a halo filled by the
    first HALO threads, the taps in shared memory too."""
    i = ado.tid()
    t = ado.thread_id()
    b = ado.block_id()
    T = ado.shared(8 + 2 * HALO, ado.f64)
    W = ado.shared(2 * HALO + 1, ado.f64)
    T[t + HALO] = x[i]
    if t < HALO:
        left = b * 8 - HALO + t
        T[t] = x[left] if left >= 0 else 0.0
        right = b * 8 + 8 + t
        T[8 + HALO + t] = x[right] if right < x.shape[0] else 0.0
    if t < 2 * HALO + 1:
        W[t] = w[t]
    ado.sync_threads()
    acc = 0.0
    for k in range(2 * HALO + 1):
        acc += W[k] * ado.tanh(T[t + k])
    y[i] = acc


@ado.kernel(block=(2, 8))
def matmul_rect_squared(A: ado.In[ado.f64, 2], B: ado.In[ado.f64, 2], C: ado.Out[ado.f64, 2]):
    """C = (A @ B)**2 with a 2 x 8 block: an A tile of 2 x 4 filled by half the threads, a B tile of
    4 x 8 filled two elements per thread; K a multiple of 4."""
    i, j = ado.tid()
    ti, tj = ado.thread_id()
    bi, bj = ado.block_id()
    As = ado.shared((2, 4), ado.f64)
    Bs = ado.shared((4, 8), ado.f64)
    acc = 0.0
    r = ti * 8 + tj
    for t in range(A.shape[1] // 4):
        if r < 8:
            As[r // 4, r % 4] = A[bi * 2 + r // 4, t * 4 + r % 4]
        for q in range(2):
            e = r + 16 * q
            Bs[e // 8, e % 8] = B[t * 4 + e // 8, bj * 8 + e % 8]
        ado.sync_threads()
        for k in range(4):
            acc += As[ti, k] * Bs[k, tj]
        ado.sync_threads()
    C[i, j] = acc * acc


@ado.kernel(block=64)
def warp_logsumexp(x: ado.In[ado.f64], y: ado.Out[ado.f64]):
    """The logsumexp of each warp: warp_max, then a shuffle_down tree and lane 0's value read back
    with shuffle; plus a term through the lane ^ 1 partner."""
    i = ado.tid()
    v = x[i]
    m = ado.warp_max(v)
    e = ado.exp(v - m)
    off = 16
    while off > 0:
        e = e + ado.shuffle_down(e, off)
        off = off // 2
    y[i] = m + ado.log(ado.shuffle(e, 0)) + 0.1 * v * ado.shuffle(v, ado.lane_id() ^ 1)


@ado.kernel(block=128)
def two_level_logsumexp(x: ado.In[ado.f64], out: ado.Out[ado.f64]):
    """out[block] = log(sum(exp(x / 2))): shuffle_down within warps, lane 0 of each warp writes its
    partial (``if ado.lane_id() == 0``: was refused as a race), the first warp finishes."""
    i = ado.tid()
    t = ado.thread_id()
    P = ado.shared(4, ado.f64)
    v = ado.exp(0.5 * x[i])
    off = 16
    while off > 0:
        v = v + ado.shuffle_down(v, off)
        off = off // 2
    if ado.lane_id() == 0:
        P[t // 32] = v
    ado.sync_threads()
    u = 0.0
    if t < 4:
        u = P[t]
    u = u + ado.shuffle_down(u, 2)
    u = u + ado.shuffle_down(u, 1)
    if t == 0:
        out[ado.block_id()] = ado.log(u)


@ado.kernel(block=8)
def gather_through_shared(x: ado.In[ado.f64], idx: ado.In[ado.i64], y: ado.Out[ado.f64]):
    """y[i] = sin(x[block start + idx[i]]) * x[i]: shared memory read at a loaded index."""
    i = ado.tid()
    t = ado.thread_id()
    S = ado.shared(8, ado.f64)
    S[t] = ado.sin(x[i])
    ado.sync_threads()
    y[i] = S[idx[i]] * x[i]


@ado.kernel(block=8)
def shared_permutation(x: ado.In[ado.f64], p: ado.In[ado.i64], y: ado.Out[ado.f64]):
    """An integer shared array (p mod 8) used as the indices of a float one."""
    i = ado.tid()
    t = ado.thread_id()
    P = ado.shared(8, ado.i64)
    S = ado.shared(8, ado.f64)
    P[t] = p[i] % 8
    S[t] = x[i] * x[i]
    ado.sync_threads()
    y[i] = S[P[t]] + S[P[7 - t]] * x[i]


@ado.kernel(block=8)
def nested_barrier_loops(x: ado.In[ado.f64], y: ado.Out[ado.f64], outer: ado.i64, inner: ado.i64):
    """Barriers in an outer and an inner loop (run-time trip counts); a read, a barrier, a write."""
    i = ado.tid()
    t = ado.thread_id()
    S = ado.shared(8, ado.f64)
    v = x[i]
    for a in range(outer):
        S[t] = v
        ado.sync_threads()
        for c in range(inner):
            u = S[(t + 1) % 8]
            ado.sync_threads()
            S[t] = 0.5 * u + 0.5 * ado.sin(u)
            ado.sync_threads()
        v = S[t] * v
        ado.sync_threads()
    y[i] = v


@ado.kernel(block=8)
def per_block_steps(x: ado.In[ado.f64], y: ado.Out[ado.f64]):
    """Block b takes b + 1 smoothing steps, leaving the loop by a block-uniform return."""
    i = ado.tid()
    t = ado.thread_id()
    b = ado.block_id()
    S = ado.shared(8, ado.f64)
    v = x[i]
    for s in range(4):
        y[i] = v
        if s > b:
            return
        S[t] = v
        ado.sync_threads()
        v = ado.sin(S[(t + s + 1) % 8]) + v
        ado.sync_threads()
    y[i] = v


@ado.kernel(block=8)
def newton_after_barrier(x: ado.In[ado.f64], y: ado.Out[ado.f64]):
    """A Newton square root with a data-dependent trip count on a value read from shared memory,
    between barriers."""
    i = ado.tid()
    t = ado.thread_id()
    S = ado.shared(8, ado.f64)
    S[t] = x[i] * x[i] + 1.0
    ado.sync_threads()
    a = S[7 - t]
    r = a
    while ado.abs(r * r - a) > 1e-12 * a:
        r = 0.5 * (r + a / r)
    ado.sync_threads()
    S[t] = r
    ado.sync_threads()
    y[i] = S[(t + 1) % 8] * r


@ado.kernel(block=8)
def constant_overwrite(x: ado.In[ado.f64], y: ado.Out[ado.f64]):
    """An active shared tile overwritten with constants between barriers: the reads after it must
    carry no adjoint back to x."""
    i = ado.tid()
    t = ado.thread_id()
    S = ado.shared(8, ado.f64)
    S[t] = x[i] * x[i]
    ado.sync_threads()
    a = S[(t + 1) % 8]
    ado.sync_threads()
    S[t] = ado.f64(t) * 0.5
    ado.sync_threads()
    y[i] = a * S[(t + 2) % 8] + S[t] * x[i]


@ado.kernel(block=(2, 2, 4))
def cube_mirror_sum(x: ado.In[ado.f64, 3], y: ado.Out[ado.f64, 3]):
    """A 3-D block: a mirrored shared tile and a block sum."""
    i, j, k = ado.tid()
    a, b, c = ado.thread_id()
    S = ado.shared((2, 2, 4), ado.f64)
    S[a, b, c] = ado.exp(x[i, j, k])
    ado.sync_threads()
    s = ado.block_sum(S[1 - a, b, 3 - c] * x[i, j, k])
    y[i, j, k] = s * S[a, 1 - b, c]


@ado.kernel(block=16)
def softmax_rows_f32(x: ado.In[ado.f32], y: ado.Out[ado.f32]):
    """``softmax_rows`` in single precision."""
    i = ado.tid()
    v = x[i]
    e = ado.exp(v - ado.block_max(v))
    y[i] = e / ado.block_sum(e)
