"""CUDA C kernels through ado.from_cuda (issue 16) against the same kernels in our language: primal, JVP and VJP in jax.jit.

Each case checks that the CUDA kernel and ours agree (values, JVP and VJP) before timing; the
rows give median times (the one timer: warm-up, repetitions of back-to-back calls) and the
ratios derivative / primal and CUDA-source / kernel-language. ``block_sum``'s halving loop
(``h = h // 2``) has a static trip bound, so its VJP needs no dynamic tape (``static_tape``).
from_cuda needs clang: a GPU machine without it needs the clang-IR cache filled where clang is
(``python -m tests.foreign_cuda.warm_clang_cache``) and carried (``ADOFFLOAD_CACHE_DIR``).
``--quick`` runs tiny sizes on any JAX backend (CPU included).
"""
from __future__ import annotations

import numpy as np

import adoffload as ado

from ..gpu import CUDA_SOURCES
from ..timing import time_jax

DEVICES = ("cpu", "cuda")

CUDA = r"""
__global__ void daxpy(double a, const double* x, double* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}
__global__ void stencil(const double* u, double* v, int nx, int ny) {
  int i = blockIdx.y * blockDim.y + threadIdx.y;
  int j = blockIdx.x * blockDim.x + threadIdx.x;
  if (i > 0 && i < ny - 1 && j > 0 && j < nx - 1)
    v[i * nx + j] = 0.25 * (u[(i - 1) * nx + j] + u[(i + 1) * nx + j] + u[i * nx + j - 1] + u[i * nx + j + 1])
                    - sin(u[i * nx + j]) * u[i * nx + j];
}
__global__ void block_sum(const double* x, double* out) {
  __shared__ double s[128];
  int t = threadIdx.x;
  s[t] = x[blockIdx.x * 128 + t] * x[blockIdx.x * 128 + t];
  __syncthreads();
  for (int h = 64; h > 0; h >>= 1) {
    if (t < h) s[t] += s[t + h];
    __syncthreads();
  }
  if (t == 0) out[blockIdx.x] = s[0];
}
__global__ void lj(const double* pos, double* force, double* energy, int n, double eps, double sigma) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  double e = 0.0, fx = 0.0, fy = 0.0, fz = 0.0;
  for (int j = 0; j < n; ++j) {
    if (j == i) continue;
    double dx = pos[3 * i] - pos[3 * j], dy = pos[3 * i + 1] - pos[3 * j + 1], dz = pos[3 * i + 2] - pos[3 * j + 2];
    double r2 = dx * dx + dy * dy + dz * dz;
    double s2 = sigma * sigma / r2, s6 = s2 * s2 * s2;
    e += 2.0 * eps * (s6 * s6 - s6);
    double f = 24.0 * eps * (2.0 * s6 * s6 - s6) / r2;
    fx += f * dx; fy += f * dy; fz += f * dz;
  }
  force[3 * i] = fx; force[3 * i + 1] = fy; force[3 * i + 2] = fz;
  atomicAdd(energy, e);
}
"""


@ado.kernel
def daxpy_ado(a: ado.f64, x: ado.In[ado.f64], y: ado.InOut[ado.f64]):
    i = ado.tid()
    y[i] = a * x[i] + y[i]


@ado.kernel
def stencil_ado(u: ado.In[ado.f64, 2], v: ado.Out[ado.f64, 2]):
    i, j = ado.tid()
    if i > 0 and i < u.shape[0] - 1 and j > 0 and j < u.shape[1] - 1:
        c = u[i, j]
        v[i, j] = 0.25 * (u[i - 1, j] + u[i + 1, j] + u[i, j - 1] + u[i, j + 1]) - ado.sin(c) * c


@ado.kernel(block=128)
def block_sum_ado(x: ado.In[ado.f64], out: ado.Out[ado.f64]):
    i = ado.tid()
    t = ado.thread_id()
    s = ado.shared(128, ado.f64)
    s[t] = x[i] * x[i]
    ado.sync_threads()
    h = 64
    while h > 0:
        if t < h:
            s[t] += s[t + h]
        ado.sync_threads()
        h = h // 2
    if t == 0:
        out[ado.block_id()] = s[0]


@ado.kernel
def lj_ado(pos: ado.In[ado.f64, 2], force: ado.Out[ado.f64, 2], energy: ado.Out[ado.f64], eps: ado.f64,
           sigma: ado.f64):
    i = ado.tid()
    e = 0.0
    fx = 0.0
    fy = 0.0
    fz = 0.0
    for j in range(pos.shape[0]):
        if j != i:
            dx = pos[i, 0] - pos[j, 0]
            dy = pos[i, 1] - pos[j, 1]
            dz = pos[i, 2] - pos[j, 2]
            r2 = dx * dx + dy * dy + dz * dz
            s2 = sigma * sigma / r2
            s6 = s2 * s2 * s2
            e += 2.0 * eps * (s6 * s6 - s6)
            f = 24.0 * eps * (2.0 * s6 * s6 - s6) / r2
            fx += f * dx
            fy += f * dy
            fz += f * dz
    force[i, 0] = fx
    force[i, 1] = fy
    force[i, 2] = fz
    ado.atomic_add(energy, 0, e)


def daxpy_case(mod, sizes, rng):
    import jax.numpy as jnp
    n = sizes["n"]
    k = mod.kernel("daxpy", a=ado.f64, x=ado.In[ado.f64], y=ado.InOut[ado.f64], n=ado.i32)
    cu = ado.jax_kernel(k, blocks=n // 256, threads=256)
    ours = ado.jax_kernel(daxpy_ado)
    x, y = jnp.asarray(rng.standard_normal(n)), jnp.asarray(rng.standard_normal(n))
    return (lambda x, y: cu(1.5, x, y, n)), (lambda x, y: ours(1.5, x, y)), (x, y)


def stencil_case(mod, sizes, rng):
    import jax.numpy as jnp
    m = sizes["stencil"]
    k = mod.kernel("stencil", u=ado.In[ado.f64], v=ado.Out[ado.f64], nx=ado.i32, ny=ado.i32)
    cu = ado.jax_kernel(k, blocks=(m // 32, m // 8), threads=(32, 8), out_shapes={"v": (m, m)})
    ours = ado.jax_kernel(stencil_ado)
    return (lambda u: cu(u, m, m)), (lambda u: ours(u)), (jnp.asarray(rng.random((m, m))),)


def block_sum_case(mod, sizes, rng):
    import jax.numpy as jnp
    n = sizes["n"]
    k = mod.kernel("block_sum", x=ado.In[ado.f64], out=ado.Out[ado.f64])
    cu = ado.jax_kernel(k, blocks=n // 128, threads=128, out_shapes={"out": n // 128})
    ours = ado.jax_kernel(block_sum_ado, grid=n, out_shapes={"out": n // 128})
    return (lambda x: cu(x)), (lambda x: ours(x)), (jnp.asarray(rng.standard_normal(n)),)


def lj_case(mod, sizes, rng):
    import jax.numpy as jnp
    a = sizes["atoms"]
    k = mod.kernel("lj", pos=ado.In[ado.f64], force=ado.Out[ado.f64], energy=ado.Out[ado.f64], n=ado.i32,
                   eps=ado.f64, sigma=ado.f64)
    cu = ado.jax_kernel(k, blocks=a // 128, threads=128, out_shapes={"force": (a, 3), "energy": 1})
    ours = ado.jax_kernel(lj_ado, grid=a, out_shapes={"force": (a, 3), "energy": 1})
    pos = jnp.asarray(rng.random((a, 3)) * a ** (1 / 3) * 1.2)
    return (lambda p: cu(p, a, 1.0, 0.9)), (lambda p: ours(p, 1.0, 0.9)), (pos,)


def stream_dot_case(mod, sizes, rng):
    """RAJAPerf's tuned CUDA DOT (benchmarks/cuda/rajaperf.cu: 128-bit loads, shuffles, the last warp's
    branch, one atomic per block); its twin here is jnp.vdot (cuBLAS), derivatives by JAX."""
    import jax.numpy as jnp
    n = sizes["n"]
    rajaperf = ado.from_cuda((CUDA_SOURCES / "rajaperf.cu").read_text())
    k = rajaperf.kernel("stream_dot", a=ado.In[ado.f64], b=ado.In[ado.f64], dot=ado.Out[ado.f64], n=ado.i64)
    cu = ado.jax_kernel(k, blocks=264, threads=256, out_shapes={"dot": 1})     # a grid-stride loop: 2 waves of 132 SMs
    a, b = jnp.asarray(rng.standard_normal(n)), jnp.asarray(rng.standard_normal(n))
    return (lambda a, b: cu(a, b, n)), (lambda a, b: jnp.vdot(a, b)[None]), (a, b)


# name -> builder(mod, sizes, rng) -> (CUDA-source fn, twin fn, example args, all differentiated); the twin is
# the same kernel in the kernel language, except for stream_dot (jnp.vdot)
CASES = {"daxpy": daxpy_case, "stencil": stencil_case, "block_sum": block_sum_case, "stream_dot": stream_dot_case,
         "lj": lj_case}


def measure(name, cu, ours, args, reps: int) -> dict:
    import jax
    import jax.numpy as jnp
    row = {"case": name, "size": [list(np.shape(a)) for a in args]}
    tangents = tuple(jnp.asarray(np.random.default_rng(1).standard_normal(np.shape(a))) for a in args)
    variants = {}
    for side, f in (("cuda", cu), ("ours", ours)):
        primal = jax.jit(f)
        jvp = jax.jit(lambda *a, f=f: jax.jvp(f, a[:len(args)], a[len(args):])[1])
        out = primal(*args)
        seeds = jax.tree_util.tree_map(lambda o: jnp.ones_like(o), out)
        vjp = jax.jit(lambda *a, f=f: jax.vjp(f, *a)[1](seeds))
        variants[side] = {"primal": (primal, args), "jvp": (jvp, args + tangents), "vjp": (vjp, args)}
    try:   # the CUDA source and our kernel compute the same thing, derivatives included
        for what in ("primal", "jvp", "vjp"):
            a, b = (variants[s][what][0](*variants[s][what][1]) for s in ("cuda", "ours"))
            for p, q in zip(jax.tree_util.tree_leaves(a), jax.tree_util.tree_leaves(b)):
                np.testing.assert_allclose(np.asarray(p), np.asarray(q), rtol=1e-9, atol=1e-9)
        row["agree"] = True
    except Exception as exc:       # reported, never hidden
        row["agree"] = False
        row["disagreement"] = f"{type(exc).__name__}: {str(exc)[:400]}"
    for side in ("cuda", "ours"):
        for what in ("primal", "jvp", "vjp"):
            fn, a = variants[side][what]
            try:
                row[f"{side}_{what}_ms"] = time_jax(fn, *a, reps=reps).median_ms
            except Exception as exc:
                row[f"{side}_{what}_error"] = f"{type(exc).__name__}: {str(exc)[:300]}"
    for side in ("cuda", "ours"):
        for what in ("jvp", "vjp"):
            if f"{side}_{what}_ms" in row and f"{side}_primal_ms" in row:
                row[f"{side}_{what}_over_primal"] = row[f"{side}_{what}_ms"] / row[f"{side}_primal_ms"]
    for what in ("primal", "jvp", "vjp"):
        if f"cuda_{what}_ms" in row and f"ours_{what}_ms" in row:
            row[f"{what}_cuda_over_ours"] = row[f"cuda_{what}_ms"] / row[f"ours_{what}_ms"]
    return row


def run(rows, device: str, quick: bool, options) -> None:
    import jax
    jax.config.update("jax_enable_x64", True)
    sizes = {"n": 1 << 12, "stencil": 64, "atoms": 256} if quick else {"n": 1 << 24, "stencil": 4096, "atoms": 8192}
    reps = options.reps or (2 if quick else 20)
    from adoffload.errors import ToolNotFoundError
    try:
        mod = ado.from_cuda(CUDA)
    except ToolNotFoundError as exc:         # no clang and no cached IR of these sources
        rows.append({"case": "all", "skipped": f"from_cuda needs clang here: {str(exc)[:300]}"})
        return
    except Exception as exc:  # noqa: BLE001 - reported in a row
        rows.append({"case": "all", "error": f"from_cuda failed: {type(exc).__name__}: {str(exc)[:300]}"})
        return
    rng = np.random.default_rng(0)
    with jax.default_device(jax.devices("gpu" if device == "cuda" else "cpu")[0]):
        for name, build in CASES.items():
            try:
                row = measure(name, *build(mod, sizes, rng), reps)
                if name == "block_sum":
                    row["static_tape"] = ado.vjp(block_sum_ado, ["x"]).tape is None
                rows.append(row)
            except Exception as exc:  # noqa: BLE001 - reported in the row
                rows.append({"case": name, "agree": False, "error": f"{type(exc).__name__}: {str(exc)[:400]}"})
