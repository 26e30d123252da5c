"""Warp and block operations, each with the same computation written without blocks (``*_plain``)."""
import adoffload as ado

W = 32          # the host's warp size
BLOCK = 64


@ado.kernel(block=BLOCK)
def wsum(x: ado.In[ado.f64], y: ado.Out[ado.f64]):
    i = ado.tid()
    y[i] = ado.warp_sum(x[i] * x[i]) * x[i]


@ado.kernel
def wsum_plain(x: ado.In[ado.f64], y: ado.Out[ado.f64]):
    i = ado.tid()
    s = 0.0
    for l in range(W):
        v = x[(i // W) * W + l]
        s += v * v
    y[i] = s * x[i]


@ado.kernel(block=BLOCK)
def wmax(x: ado.In[ado.f64], y: ado.Out[ado.f64]):
    i = ado.tid()
    y[i] = ado.warp_max(ado.sin(x[i])) * x[i]


@ado.kernel
def wmax_plain(x: ado.In[ado.f64], y: ado.Out[ado.f64]):
    i = ado.tid()
    m = ado.sin(x[(i // W) * W])
    for l in range(1, W):
        m = ado.max(m, ado.sin(x[(i // W) * W + l]))
    y[i] = m * x[i]


@ado.kernel(block=BLOCK)
def shfl(x: ado.In[ado.f64], y: ado.Out[ado.f64]):
    i = ado.tid()
    y[i] = ado.shuffle(x[i] * x[i], ado.lane_id() // 2 + 7) * x[i]


@ado.kernel
def shfl_plain(x: ado.In[ado.f64], y: ado.Out[ado.f64]):
    i = ado.tid()
    v = x[(i // W) * W + (i % W // 2 + 7) % W]
    y[i] = v * v * x[i]


@ado.kernel(block=BLOCK)
def shfl_down(x: ado.In[ado.f64], y: ado.Out[ado.f64]):
    i = ado.tid()
    y[i] = ado.shuffle_down(x[i] * x[i], 3) * x[i]


@ado.kernel
def shfl_down_plain(x: ado.In[ado.f64], y: ado.Out[ado.f64]):
    i = ado.tid()
    j = i
    if i % W + 3 < W:
        j = i + 3
    y[i] = x[j] * x[j] * x[i]


@ado.kernel(block=BLOCK)
def bsum(x: ado.In[ado.f64], y: ado.Out[ado.f64]):
    i = ado.tid()
    y[i] = ado.block_sum(x[i] * x[i]) * x[i]


@ado.kernel
def bsum_plain(x: ado.In[ado.f64], y: ado.Out[ado.f64]):
    i = ado.tid()
    s = 0.0
    for l in range(BLOCK):
        v = x[(i // BLOCK) * BLOCK + l]
        s += v * v
    y[i] = s * x[i]


@ado.kernel(block=BLOCK)
def bmax(x: ado.In[ado.f64], y: ado.Out[ado.f64]):
    i = ado.tid()
    y[i] = ado.block_max(ado.sin(x[i])) * x[i]


@ado.kernel
def bmax_plain(x: ado.In[ado.f64], y: ado.Out[ado.f64]):
    i = ado.tid()
    m = ado.sin(x[(i // BLOCK) * BLOCK])
    for l in range(1, BLOCK):
        m = ado.max(m, ado.sin(x[(i // BLOCK) * BLOCK + l]))
    y[i] = m * x[i]


@ado.kernel(block=BLOCK)
def wsum32(x: ado.In[ado.f32], y: ado.Out[ado.f32]):
    i = ado.tid()
    y[i] = ado.warp_sum(x[i] * x[i]) * x[i] + ado.block_max(x[i])


@ado.kernel
def wsum32_plain(x: ado.In[ado.f32], y: ado.Out[ado.f32]):
    i = ado.tid()
    s = ado.f32(0.0)
    for l in range(W):
        v = x[(i // W) * W + l]
        s += v * v
    m = x[(i // BLOCK) * BLOCK]
    for l in range(1, BLOCK):
        m = ado.max(m, x[(i // BLOCK) * BLOCK + l])
    y[i] = s * x[i] + m


PAIRS = {"warp_sum": (wsum, wsum_plain), "warp_max": (wmax, wmax_plain), "shuffle": (shfl, shfl_plain),
         "shuffle_down": (shfl_down, shfl_down_plain), "block_sum": (bsum, bsum_plain),
         "block_max": (bmax, bmax_plain), "f32": (wsum32, wsum32_plain)}
