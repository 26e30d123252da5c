"""More block kernels written the way an outside user writes them (tests/blocks/test_user_kernels2.py):
ties and NaN in warp/block maxima, blocks that are not whole warps or powers of two, shuffles past
the warp, atomics into shared and global arrays, shared arrays reused across barriers, barriers in
loops and branches chosen by parameters and block indices, InOut arrays updated by a block, helpers
that take a shared array, and threads exchanging values through a global array across a barrier."""
import adoffload as ado


@ado.kernel(block=64)
def warp_max_scaled(x: ado.In[ado.f64], c: ado.In[ado.f64], y: ado.Out[ado.f64]):
    """y = warp_max(x) * c: the derivative of a tie goes to the lowest lane holding the maximum."""
    i = ado.tid()
    y[i] = ado.warp_max(x[i]) * c[i]


@ado.kernel(block=64)
def block_max_scaled(x: ado.In[ado.f64], c: ado.In[ado.f64], y: ado.Out[ado.f64]):
    i = ado.tid()
    y[i] = ado.block_max(x[i]) * c[i]


@ado.kernel(block=64)
def warp_max_scaled_f32(x: ado.In[ado.f32], c: ado.In[ado.f32], y: ado.Out[ado.f32]):
    i = ado.tid()
    y[i] = ado.warp_max(x[i]) * c[i]


@ado.kernel(block=(2, 32))
def block_max_2d(x: ado.In[ado.f64, 2], c: ado.In[ado.f64, 2], y: ado.Out[ado.f64, 2]):
    """A 2-D block: "lowest" is the row-major rank, (1, 7) before (0, 40)."""
    i, j = ado.tid()
    y[i, j] = ado.block_max(x[i, j]) * c[i, j]


@ado.kernel(block=48)
def block48(x: ado.In[ado.f64], y: ado.Out[ado.f64]):
    """48 threads: one and a half warps; block reductions and lane_id (no warp operations: refused)."""
    i = ado.tid()
    v = x[i]
    y[i] = ado.block_sum(v * v) * v + ado.block_max(ado.sin(v)) * ado.f64(ado.lane_id())


@ado.kernel(block=(3, 5))
def block3x5(x: ado.In[ado.f64, 2], y: ado.Out[ado.f64, 2]):
    """A 3 x 5 block with a shared tile read at ``(b + 1) % 5`` (was refused as a race: O3 froze the
    thread index) and a block maximum weighted by the lane."""
    i, j = ado.tid()
    a, b = ado.thread_id()
    S = ado.shared((3, 5), ado.f64)
    S[a, b] = ado.exp(x[i, j])
    ado.sync_threads()
    y[i, j] = S[2 - a, (b + 1) % 5] * x[i, j] + ado.block_max(x[i, j]) * ado.f64(ado.lane_id() + 1)


@ado.kernel(block=48)
def rotate48(x: ado.In[ado.f64], y: ado.Out[ado.f64]):
    """``S[(t + 1) % 48]``: also refused before (the frozen thread index)."""
    i = ado.tid()
    t = ado.thread_id()
    S = ado.shared(48, ado.f64)
    S[t] = x[i] * x[i]
    ado.sync_threads()
    y[i] = S[(t + 1) % 48] * x[i]


@ado.kernel(block=96)
def shuffles96(x: ado.In[ado.f64], y: ado.Out[ado.f64]):
    """Three warps: shuffle_down past the warp's end (own value), lanes past 32 and negative (modulo)."""
    i = ado.tid()
    v = x[i]
    u = ado.shuffle_down(v * v, 20) + ado.shuffle(v, ado.lane_id() + 40) + ado.shuffle(v, -3)
    y[i] = u * v + ado.warp_max(v * 0.5)


@ado.kernel(block=(2, 3, 4))
def cube234(x: ado.In[ado.f64, 3], y: ado.Out[ado.f64, 3]):
    """A 3-D block of 24 threads: a reversed shared tile, a block sum and lane_id."""
    i, j, k = ado.tid()
    a, b, c = ado.thread_id()
    S = ado.shared((2, 3, 4), ado.f64)
    S[a, b, c] = x[i, j, k] * x[i, j, k]
    ado.sync_threads()
    y[i, j, k] = S[1 - a, 2 - b, 3 - c] * ado.block_sum(x[i, j, k]) + ado.f64(ado.lane_id())


@ado.kernel(block=64)
def data_lane_shuffles(x: ado.In[ado.f64], d: ado.In[ado.i64], y: ado.Out[ado.f64]):
    """Shuffle lanes read from an array: negative deltas, lanes far past the warp."""
    i = ado.tid()
    v = x[i]
    a = ado.shuffle_down(v * v, d[i])
    b = ado.shuffle(ado.sin(v), d[i] * 7 + 3)
    y[i] = a * b + ado.shuffle_down(v, -2)


@ado.kernel(block=16)
def shared_histogram(x: ado.In[ado.f64], idx: ado.In[ado.i64], y: ado.Out[ado.f64]):
    """Scatter-add x^2 into a shared histogram of 4 bins, then flush sin(bin) per block."""
    i = ado.tid()
    t = ado.thread_id()
    H = ado.shared(4, ado.f64)
    if t < 4:
        H[t] = 0.0
    ado.sync_threads()
    ado.atomic_add(H, idx[i] % 4, x[i] * x[i])
    ado.sync_threads()
    if t < 4:
        y[ado.block_id() * 4 + t] = ado.sin(H[t])


@ado.kernel(block=16)
def global_scatter(x: ado.In[ado.f64], idx: ado.In[ado.i64], y: ado.InOut[ado.f64]):
    """atomic_add into a global array of a value made with a block sum."""
    i = ado.tid()
    s = ado.block_sum(x[i])
    ado.atomic_add(y, idx[i] % 4, x[i] * s)


@ado.kernel(block=16)
def counted_gather(x: ado.In[ado.f64], idx: ado.In[ado.i64], y: ado.Out[ado.f64]):
    """An integer shared histogram (atomic counts) used as indices into a float shared array."""
    i = ado.tid()
    t = ado.thread_id()
    C = ado.shared(4, ado.i64)
    V = ado.shared(16, ado.f64)
    if t < 4:
        C[t] = 0
    V[t] = x[i] * 2.0
    ado.sync_threads()
    ado.atomic_add(C, idx[i] % 4, 1)
    ado.sync_threads()
    y[i] = V[C[t % 4] % 16] * x[i]


@ado.kernel(block=32)
def histogram_warp_mix(x: ado.In[ado.f64], idx: ado.In[ado.i64], y: ado.Out[ado.f64]):
    """A shared histogram, a warp maximum and an xor shuffle together (deterministic=True, width=3)."""
    i = ado.tid()
    t = ado.thread_id()
    H = ado.shared(4, ado.f64)
    if t < 4:
        H[t] = 0.0
    ado.sync_threads()
    ado.atomic_add(H, idx[i] % 4, x[i] * x[i])
    ado.sync_threads()
    m = ado.warp_max(x[i])
    y[i] = ado.sin(H[t % 4]) * m + ado.shuffle(x[i], ado.lane_id() ^ 3)


@ado.kernel(block=16)
def reuse_two_purposes(x: ado.In[ado.f64], y: ado.Out[ado.f64]):
    """One shared array: squares read mirrored, then sines written at a permuted index and read two ways."""
    i = ado.tid()
    t = ado.thread_id()
    S = ado.shared(16, ado.f64)
    S[t] = x[i] * x[i]
    ado.sync_threads()
    a = S[15 - t]
    ado.sync_threads()
    S[(t * 5) % 16] = ado.sin(x[i])
    ado.sync_threads()
    y[i] = a * S[t] + S[(t + 3) % 16]


@ado.kernel(block=8)
def loop_scalar_trip(x: ado.In[ado.f64], y: ado.Out[ado.f64], n: ado.i64):
    """Barriers in a loop whose trip count is a kernel argument; the neighbour read moves with it."""
    i = ado.tid()
    t = ado.thread_id()
    S = ado.shared(8, ado.f64)
    v = x[i]
    for s in range(n):
        S[t] = v
        ado.sync_threads()
        v = 0.5 * v + ado.cos(S[(t + s + 1) % 8])
        ado.sync_threads()
    y[i] = v


@ado.kernel(block=8)
def loop_shape_trip(x: ado.In[ado.f64], w: ado.In[ado.f64], y: ado.Out[ado.f64]):
    """Barriers in a loop over an array's shape; the array is differentiated too."""
    i = ado.tid()
    t = ado.thread_id()
    S = ado.shared(8, ado.f64)
    v = x[i]
    for s in range(w.shape[0]):
        S[t] = v * w[s]
        ado.sync_threads()
        v = v + S[7 - t] * 0.3
        ado.sync_threads()
    y[i] = v


@ado.kernel(block=8)
def early_return_after_barrier(x: ado.In[ado.f64], y: ado.Out[ado.f64], n: ado.i64):
    """Blocks from n on return (uniformly) between two barrier phases."""
    i = ado.tid()
    t = ado.thread_id()
    S = ado.shared(8, ado.f64)
    S[t] = x[i] * x[i]
    ado.sync_threads()
    y[i] = S[(t + 1) % 8]
    if ado.block_id() >= n:
        return
    ado.sync_threads()
    S[t] = ado.exp(y[i])
    ado.sync_threads()
    y[i] = S[(t + 2) % 8] * x[i]


@ado.kernel(block=8)
def return_before_barrier(x: ado.In[ado.f64], y: ado.Out[ado.f64], n: ado.i64):
    """Block n returns before any barrier."""
    i = ado.tid()
    t = ado.thread_id()
    S = ado.shared(8, ado.f64)
    if ado.block_id() == n:
        y[i] = x[i]
        return
    S[t] = x[i] * x[i]
    ado.sync_threads()
    y[i] = S[(t + 1) % 8] * x[i]


@ado.kernel(block=8)
def block_parity_branches(x: ado.In[ado.f64], y: ado.Out[ado.f64]):
    """Even and odd blocks take branches with different barriers and block operations."""
    i = ado.tid()
    t = ado.thread_id()
    S = ado.shared(8, ado.f64)
    S[t] = x[i]
    ado.sync_threads()
    if ado.block_id() % 2 == 0:
        v = S[7 - t]
        ado.sync_threads()
        S[t] = v * v
        ado.sync_threads()
    else:
        v = ado.block_max(S[t])
        S[t] = S[t] * v
        ado.sync_threads()
    y[i] = S[(t + 1) % 8] + ado.block_sum(x[i] * x[i])


@ado.kernel(block=8)
def inout_block_sum(x: ado.In[ado.f64], y: ado.InOut[ado.f64]):
    i = ado.tid()
    y[i] += ado.block_sum(x[i] * y[i]) * y[i]


@ado.kernel(block=8)
def inout_block_result(x: ado.In[ado.f64], y: ado.InOut[ado.f64]):
    """Thread 0 of each block updates its block's element of an InOut array."""
    i = ado.tid()
    s = ado.block_sum(ado.sin(x[i]))
    if ado.thread_id() == 0:
        y[ado.block_id()] += s * y[ado.block_id()]


@ado.kernel(block=8)
def out_every_other(x: ado.In[ado.f64], y: ado.Out[ado.f64]):
    """An Out array written by every other thread only (the rest stays zero)."""
    i = ado.tid()
    t = ado.thread_id()
    s = ado.block_sum(x[i] * x[i])
    if t % 2 == 0:
        y[i] = s * x[i]


@ado.func
def put_square(A, t, v):
    A[t] = v * v


@ado.func
def sin_at(A, t):
    return ado.sin(A[t])


@ado.kernel(block=8)
def helpers_on_shared(x: ado.In[ado.f64], y: ado.Out[ado.f64]):
    """Helpers that write and read a shared array passed to them."""
    i = ado.tid()
    t = ado.thread_id()
    S = ado.shared(8, ado.f64)
    put_square(S, t, x[i])
    ado.sync_threads()
    y[i] = sin_at(S, (t + 3) % 8) * x[i]


@ado.kernel(block=32)
def static_shuffles(x: ado.In[ado.f64], y: ado.Out[ado.f64]):
    """A register tile filled by shuffles in an unrolled loop."""
    i = ado.tid()
    v = x[i]
    acc = ado.zeros(4, ado.f64)
    for m in ado.static_range(4):
        acc[m] = ado.shuffle(v * ado.f64(m + 1), ado.lane_id() + m)
    s = 0.0
    for m in ado.static_range(4):
        s += acc[m] * acc[(m + 1) % 4]
    y[i] = s


@ado.kernel(block=8)
def global_exchange(x: ado.In[ado.f64], y: ado.Out[ado.f64], z: ado.Out[ado.f64]):
    """Threads exchange values through a global Out array across a barrier (legal on a GPU)."""
    i = ado.tid()
    t = ado.thread_id()
    b = ado.block_id()
    y[i] = x[i] * x[i]
    ado.sync_threads()
    z[i] = ado.sin(y[b * 8 + (t + 1) % 8]) * x[i]


@ado.kernel(block=8)
def global_exchange_overwrite(x: ado.In[ado.f64], y: ado.Out[ado.f64]):
    """The same, then each thread overwrites its element after a second barrier."""
    i = ado.tid()
    t = ado.thread_id()
    b = ado.block_id()
    y[i] = x[i] * x[i]
    ado.sync_threads()
    v = y[b * 8 + (t + 1) % 8]
    ado.sync_threads()
    y[i] = v * x[i]


@ado.kernel(block=8)
def mirror_product(x: ado.In[ado.f64], z: ado.In[ado.f64], y: ado.Out[ado.f64]):
    """Two inputs (the tests pass one array as both)."""
    i = ado.tid()
    t = ado.thread_id()
    S = ado.shared(8, ado.f64)
    S[t] = x[i] * z[i]
    ado.sync_threads()
    y[i] = S[7 - t] + ado.block_sum(z[i])


@ado.kernel(block=8)
def global_scratch(x: ado.In[ado.f64], w: ado.InOut[ado.f64], z: ado.Out[ado.f64]):
    """An InOut array as the block's scratch: written, read mirrored, overwritten, read rotated."""
    i = ado.tid()
    t = ado.thread_id()
    b = ado.block_id()
    w[i] = ado.exp(x[i])
    ado.sync_threads()
    v = w[b * 8 + 7 - t]
    ado.sync_threads()
    w[i] = v * x[i]
    ado.sync_threads()
    z[i] = w[b * 8 + (t + 3) % 8] + v


@ado.kernel(block=(2, 4))
def inout_rows(x: ado.In[ado.f64, 2], y: ado.InOut[ado.f64, 2]):
    """y[i, j] read and written by its own thread (a row stride that is a parameter), times a block sum."""
    i, j = ado.tid()
    y[i, j] = y[i, j] * ado.block_sum(x[i, j] * x[i, j])


@ado.kernel(block=32)
def chosen_source(x: ado.In[ado.f64], z: ado.InOut[ado.f64], y: ado.Out[ado.f64]):
    """z[i] read (or x[i], chosen by the lane: O3 loads through a select of the two pointers) and
    written by its own thread: accepted by the race check of global arrays."""
    i = ado.tid()
    v = z[i] if ado.lane_id() < 28 else x[i]
    z[i] = v * x[i]
    y[i] = ado.warp_sum(v * v)


@ado.kernel(block=16)
def max_of_overwritten_tile(x: ado.In[ado.f64], y: ado.Out[ado.f64]):
    """block_max of a shared tile that is overwritten afterwards: the reverse sweep's tie test must
    compare the maximum with the values the primal saw, not with the tile's later contents."""
    i = ado.tid()
    t = ado.thread_id()
    S = ado.shared(16, ado.f64)
    S[t] = x[i] * 2.0
    ado.sync_threads()
    m = ado.block_max(S[15 - t])
    S[15 - t] = 0.0
    ado.sync_threads()
    S[t] = S[t] + 1.0
    ado.sync_threads()
    y[i] = m * S[(t + 1) % 16] + m * m


@ado.kernel(block=8)
def inout_neighbours(x: ado.In[ado.f64], w: ado.InOut[ado.f64]):
    """An InOut array whose input elements other threads read before their owners overwrite them
    (after a barrier), then read again after another barrier."""
    i = ado.tid()
    t = ado.thread_id()
    b = ado.block_id()
    v = w[b * 8 + 7 - t]
    ado.sync_threads()
    w[i] = v * x[i] + ado.sin(v)
    ado.sync_threads()
    u = w[b * 8 + (t + 1) % 8]
    ado.sync_threads()
    w[i] = u * w[i]


@ado.kernel(block=128)
def guarded_reversed_tile(x: ado.In[ado.f64], y: ado.Out[ado.f64]):
    """Even threads write a 16 x 8 tile mirrored: O3 computes the flat index as
    ``(t & 120) ^ 120 - (t | -7)``, whose high bits cancel (was refused as a race)."""
    i = ado.tid()
    t = ado.thread_id()
    S = ado.shared((16, 8), ado.f64)
    S[t // 8, t % 8] = 0.0
    ado.sync_threads()
    if t % 2 == 0:
        S[(127 - t) // 8, (127 - t) % 8] = ado.sin(x[i])
    ado.sync_threads()
    y[i] = S[t // 8, t % 8] * x[i]
