"""Block kernels whose results depend on the warp size, with numpy references for 64-lane warps
(AMD's wavefronts, the ``cpu:wave64`` host) and for 32-lane ones (the default host)."""
import numpy as np

import adoffload as ado

BLOCK = 128


@ado.kernel(block=BLOCK)
def lanes(x: ado.In[ado.f64], lane: ado.Out[ado.i64], size: ado.Out[ado.i64]):
    i = ado.tid()
    lane[i] = ado.lane_id()
    size[i] = ado.warp_size()


@ado.kernel(block=BLOCK)
def wsum(x: ado.In[ado.f64], y: ado.Out[ado.f64]):
    i = ado.tid()
    y[i] = ado.warp_sum(x[i] * x[i]) * x[i]


@ado.kernel(block=BLOCK)
def wmax(x: ado.In[ado.f64], y: ado.Out[ado.f64]):
    i = ado.tid()
    y[i] = ado.warp_max(ado.sin(x[i])) * x[i]


@ado.kernel(block=BLOCK)
def shfl(x: ado.In[ado.f64], y: ado.Out[ado.f64]):
    i = ado.tid()
    y[i] = ado.shuffle(x[i] * x[i], ado.lane_id() // 2 + 7) * x[i]


@ado.kernel(block=BLOCK)
def shfl_far(x: ado.In[ado.f64], y: ado.Out[ado.f64]):
    """Sources 40 lanes on: across the 32-lane boundary, wrapping modulo the warp size."""
    i = ado.tid()
    y[i] = ado.shuffle(ado.sin(x[i]), ado.lane_id() + 40) * x[i]


@ado.kernel(block=BLOCK)
def shfl_down(x: ado.In[ado.f64], y: ado.Out[ado.f64]):
    i = ado.tid()
    y[i] = ado.shuffle_down(x[i] * x[i], 3) * x[i]


@ado.kernel(block=BLOCK)
def warp_partials(x: ado.In[ado.f32], y: ado.Out[ado.f32]):
    """A block reduction written for 32-lane warps: warp sums, the first thread of each 32 threads
    stores its warp's sum, a barrier, every thread adds the four partials. With 64-lane warps each
    wavefront's sum is stored twice: the block sum doubles (the bug this mode exists to show)."""
    i = ado.tid()
    t = ado.thread_id()
    partial = ado.shared(4, ado.f32)
    v = ado.warp_sum(x[i] * x[i])
    if t % 32 == 0:
        partial[t // 32] = v
    ado.sync_threads()
    s = ado.f32(0.0)
    for k in range(4):
        s += partial[k]
    y[i] = s * x[i]


@ado.kernel(block=96)
def block_ops_96(x: ado.In[ado.f64], y: ado.Out[ado.f64]):
    """96 threads: one and a half wavefronts. Block operations, barriers and shared memory only."""
    i = ado.tid()
    t = ado.thread_id()
    tile = ado.shared(96, ado.f64)
    tile[95 - t] = ado.sin(x[i])
    ado.sync_threads()
    y[i] = ado.block_sum(tile[t] * x[i]) + ado.block_max(x[i] * x[i]) + ado.f64(ado.lane_id())


@ado.kernel(block=96)
def warp_sum_96(x: ado.In[ado.f64], y: ado.Out[ado.f64]):
    i = ado.tid()
    y[i] = ado.warp_sum(x[i])


# --- numpy references (W: the warp size) --------------------------------------------------------------

def _groups(v, size):
    return v.reshape(-1, size)


def ref_wsum(x, W):
    return np.repeat((_groups(x * x, W)).sum(axis=1), W) * x


def ref_wmax(x, W):
    return np.repeat(_groups(np.sin(x), W).max(axis=1), W) * x


def _shuffled(v, source_lane, W):
    """v of lane ``source_lane(lane) mod W`` of each thread's warp."""
    i = np.arange(len(v))
    return v[i - i % W + source_lane(i % W) % W]


def ref_shfl(x, W):
    return _shuffled(x * x, lambda lane: lane // 2 + 7, W) * x


def ref_shfl_far(x, W):
    return _shuffled(np.sin(x), lambda lane: lane + 40, W) * x


def ref_shfl_down(x, W):
    return _shuffled(x * x, lambda lane: np.where(lane + 3 < W, lane + 3, lane), W) * x


def ref_warp_partials(x, W):
    block = _groups(x.astype(np.float64) ** 2, BLOCK).sum(axis=1) * (W // 32)
    return (np.repeat(block, BLOCK) * x).astype(x.dtype)


def ref_block_ops_96(x, W):
    i = np.arange(len(x))
    t = i % 96
    tile = np.sin(x)[i - t + (95 - t)]
    return (np.repeat(_groups(tile * x, 96).sum(axis=1), 96) + np.repeat(_groups(x * x, 96).max(axis=1), 96)
            + (i % 96) % W)


@ado.kernel(block=BLOCK)
def scaled_tile(a: ado.f64, x: ado.In[ado.f64], y: ado.Out[ado.f64]):
    """A reverse sweep with adds into a shadow tile (d_tile) and into a uniform address (d_a)."""
    i = ado.tid()
    t = ado.thread_id()
    tile = ado.shared(BLOCK, ado.f64)
    tile[t] = x[i]
    ado.sync_threads()
    y[i] = a * tile[(t + 1) % BLOCK] * tile[t]


@ado.kernel(block=(4, 32))
def rows_wsum(x: ado.In[ado.f64, 2], y: ado.Out[ado.f64, 2]):
    """A 2-D block: warps are consecutive row-major threads, so a wavefront spans two rows."""
    i, j = ado.tid()
    y[i, j] = ado.warp_sum(ado.sin(x[i, j])) * x[i, j] + ado.shuffle(x[i, j], 63 - ado.lane_id())


@ado.kernel(block=64)
def warp_steps(x: ado.In[ado.f64], y: ado.Out[ado.f64]):
    """A trip count from a warp sum (64 lanes: more steps): a dynamic tape, which a counting kernel
    sizes; it must run with the adjoint's warp size."""
    i = ado.tid()
    steps = ado.i64(ado.warp_sum(x[i] * x[i]) * 0.25)
    v = x[i]
    for k in range(steps):
        v = ado.sin(v) + 0.1 * x[i]
    y[i] = v


def ref_warp_steps(x, W):
    steps = np.repeat(np.floor(_groups(x * x, W).sum(axis=1) * 0.25), W).astype(int)
    y = x.copy()
    for k in range(steps.max()):
        y = np.where(k < steps, np.sin(y) + 0.1 * x, y)
    return y


CASES = {"warp_sum": (wsum, ref_wsum), "warp_max": (wmax, ref_wmax), "shuffle": (shfl, ref_shfl),
         "shuffle_far": (shfl_far, ref_shfl_far), "shuffle_down": (shfl_down, ref_shfl_down),
         "block_ops_96": (block_ops_96, ref_block_ops_96),
         "warp_steps": (warp_steps, ref_warp_steps)}
