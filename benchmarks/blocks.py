"""Block kernels on the GPU (issue 13): tiled f32 matmul and its gradient, block-reduction DOT,
shared-memory 2-D stencil and its adjoint, each against its baseline in the same run.

* matmul: a register-tiled SGEMM in our language (128x128 block tiles, 8x8 per thread, shared
  A/B tiles; ``sgemm_strided``: the same with each thread's outputs strided by 16; ``sgemm_static``:
  ``sgemm_strided`` with its tile loops ``ado.static_range``; ``sgemm_prefetch``: ``sgemm_static``
  loading the next tiles into registers during the multiply) under ``jax.jit`` against ``jnp.dot(precision="highest")`` (cuBLAS SGEMM, no TF32);
  its VJP (``jax.vjp`` of the custom call: our reverse-mode kernel) against XLA's VJP of the same
  product. Targets: primal within 3x, VJP within 2x.
* dot: a block-reduction DOT (grid-stride loop, ``ado.block_sum``, one atomic per block) against
  the tuned CUDA ``stream_dot`` (benchmarks/cuda/rajaperf.cu, nvcc -O3; launched with one resident
  wave of blocks, as benchmarks/rajaperf.py does) and
  ``jnp.vdot``, as a fraction of the measured copy bandwidth. Target: >= 0.95 of the CUDA DOT.
* stencil: a 5-point stencil reading a shared-memory tile with halo (``shared``: 32-wide rows, 4
  points per thread, vertical neighbours in registers; ``shared16``: the first 16x16 version) against the one-thread-per-point
  kernel, primal and VJP, each timed twice: through ``jax.jit`` and as the kernel alone launched
  through our runtime (``launch_*``: no JAX dispatch or output allocation, which are a visible share
  of these 0.1-2 ms kernels). Target: the shared-memory kernel faster.

Every side is timed with harness.py's one timer (batches of 10 calls, then one wait; medians of
``--reps`` batches, with their IQR).

Every number comes from this run; a case that fails is reported with its error, never hidden.
``--smoke`` runs tiny sizes on whatever JAX has (CPU included) to check the script itself.

    PYTHONPATH=. python benchmarks/blocks.py --out $OUT/blocks
"""
from __future__ import annotations

import argparse
import csv
import json
import math
import sys
from pathlib import Path

import numpy as np

import adoffload as ado

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))

# ----------------------------------------------------------------------------- kernels

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


# ----------------------------------------------------------------------------- timing

def time_jax(f, args, reps: int) -> dict:
    """The benchmarks' one timer (harness.time_calls: batches of calls, then one wait) on a jitted
    JAX function."""
    import harness
    return _timing(harness.time_jax(f, *args, reps=reps))


def _timing(t) -> dict:
    return {"median_ms": t.median_ms, "spread_ms": t.spread_ms, "iqr_ms": t.q3_ms - t.q1_ms, "reps": t.reps}


def time_launches(kernel, values: dict, grid: tuple, reps: int, gpu=None, edit_ptx=None) -> dict:
    """``kernel``'s GPU entry alone, launched through our runtime on one stream with the same timer:
    no JAX dispatch, no output allocation (sub-millisecond kernels are timed this way too). ``values``
    holds every parameter (numpy arrays are uploaded once; repeated launches reuse them).
    ``edit_ptx``: a function of the PTX text, for experiments (benchmarks/stencil_ablation.py)."""
    from adoffload.codegen.abi import pack_slots
    from adoffload.codegen.gpu.rows import row_blocks
    from adoffload.kernels.launch import flat_values, proven_facts
    from harness import Gpu
    gpu = gpu or Gpu()
    ordered = [values[p.name] for p in kernel.signature.params]
    from adoffload.jax.targets import Variant, gpu_options
    # the build a JAX call of this grid gets (its options: noalias only without InOut arrays)
    compiled = kernel.compiled("nvptx", arch="sm_90", **gpu_options(kernel, Variant(proven=proven_facts(kernel, ordered, grid))))
    if compiled.grid_stride or compiled.elements_per_thread != 1:
        raise ValueError(f"{kernel.name}: time_launches launches one thread per grid point")
    dev = gpu.upload({p.name: values[p.name] for p in kernel.signature.params})
    status = gpu.device.to_device(np.zeros(4, np.int64))
    try:
        ptx = edit_ptx(compiled.ptx) if edit_ptx else compiled.ptx
        function = gpu.device.load_module(ptx).function(compiled.entry_name)
        pointers = [dev[p.name].ptr if hasattr(dev[p.name], "ptr") else 0 for p in kernel.signature.params]
        slots = pack_slots(flat_values(kernel.signature, ordered, pointers), compiled.flat_types, grid, status.ptr)
        block = compiled.extra.get("block_threads") or function.auto_block_size()
        rows = row_blocks(grid, block) if compiled.row_launch else None
        threads = math.prod(grid)
        return _timing(gpu.time(lambda: gpu.device.launch(function, threads, slots, block_size=block,
                                                          stream=gpu.stream, blocks=rows), reps))
    finally:
        gpu.free(dev)
        gpu.device.free(status)


def time_variants(row: dict, kernel, values: dict, grid: tuple, reps: int, gpu, variants: dict) -> dict:
    """``row`` with the median ms of ``kernel`` launched alone for each of ``variants`` (name: PTX
    edit or None, as ``time_launches`` takes it); a variant that fails gets ``<name>_error``."""
    for name, edit in variants.items():
        try:
            row[name] = time_launches(kernel, values, grid, reps, gpu, edit)["median_ms"]
        except Exception as exc:       # reported, never hidden
            row[name + "_error"] = f"{type(exc).__name__}: {str(exc)[:200]}"
    return row


def _guard(row: dict, key: str, thunk):
    """Run ``thunk`` and store its result under ``key``; store the error instead if it fails."""
    try:
        row[key] = thunk()
    except Exception as exc:  # reported in the row, never hidden
        row[key + "_error"] = f"{type(exc).__name__}: {str(exc)[:300]}"
        return None
    return row[key]


PTX_OPS = ("atom.shared.add", "atom.global.add", "ld.shared", "st.shared", "ld.local", "st.local", "bar.sync", "fma.rn")


def ptx_profile(kernel) -> dict:
    """Static counts of telling instructions in a kernel's sm_90 PTX (not dynamic counts), and
    whether it needs a launcher-allocated tape: where a reverse kernel's atomics and local memory are."""
    ptx = kernel.compiled("nvptx", arch="sm_90", noalias=True).ptx
    return {"dynamic_tape": kernel.tape is not None, **{op: ptx.count(op) for op in PTX_OPS}}


def bench_matmul(sizes, reps, rows, vjp_sizes=()):
    import jax
    import jax.numpy as jnp
    for name, kernel, per_thread in (("sgemm_regtile", sgemm, TM), ("sgemm_strided", sgemm_strided, TM),
                                     ("sgemm_static", sgemm_static, TM), ("sgemm_prefetch", sgemm_prefetch, TM),
                                     ("matmul16", matmul16, 1)):
        ours = ado.jax_kernel(kernel, grid=lambda A, B, p=per_thread: (A.shape[0] // p, B.shape[1] // p),
                              out_shapes=lambda A, B: {"C": (A.shape[0], B.shape[1])})
        for n in sizes:
            row = {"case": f"matmul/{name}", "n": n}
            rng = np.random.default_rng(n)
            A = jnp.asarray(rng.standard_normal((n, n), np.float32))
            B = jnp.asarray(rng.standard_normal((n, n), np.float32))
            G = jnp.asarray(rng.standard_normal((n, n), np.float32))
            f = jax.jit(ours)
            ref = jax.jit(lambda A, B: jnp.dot(A, B, precision="highest"))
            if _guard(row, "correct", lambda: bool(np.allclose(f(A, B), ref(A, B), rtol=1e-3, atol=1e-3 * math.sqrt(n)))):
                t = _guard(row, "ours", lambda: time_jax(f, (A, B), reps))
                base = _guard(row, "jnp_dot_highest", lambda: time_jax(ref, (A, B), reps))
                if t and base:
                    row["ratio"] = t["median_ms"] / base["median_ms"]
                    row["tflops_ours"] = 2 * n ** 3 / (t["median_ms"] * 1e-3) / 1e12
            if n not in vjp_sizes:
                row["vjp_skipped"] = "not in --matmul-vjp-sizes"
                rows.append(row)
                print(json.dumps(row), flush=True)
                continue
            _guard(row, "vjp_kernel", lambda: ptx_profile(ado.vjp(kernel, ("A", "B"))))
            vjp = jax.jit(lambda A, B, G: jax.vjp(ours, A, B)[1](G))
            vjp_ref = jax.jit(lambda A, B, G: jax.vjp(lambda A, B: jnp.dot(A, B, precision="highest"), A, B)[1](G))

            def check_vjp():
                got, want = vjp(A, B, G), vjp_ref(A, B, G)
                return all(bool(np.allclose(g, w, rtol=1e-3, atol=1e-3 * math.sqrt(n))) for g, w in zip(got, want))
            if _guard(row, "vjp_correct", check_vjp):
                tv = _guard(row, "vjp_ours", lambda: time_jax(vjp, (A, B, G), reps))
                bv = _guard(row, "vjp_xla", lambda: time_jax(vjp_ref, (A, B, G), reps))
                if tv and bv:
                    row["vjp_ratio"] = tv["median_ms"] / bv["median_ms"]
            rows.append(row)
            print(json.dumps(row), flush=True)


def bench_dot(sizes, reps, rows, per_thread: int = 8):
    import jax
    import jax.numpy as jnp
    kernel = make_block_dot(per_thread)
    for n in sizes:
        row = {"case": "dot/block_sum", "n": n, "per_thread": per_thread}
        rng = np.random.default_rng(1)
        a, b = rng.standard_normal(n), rng.standard_normal(n)
        f = jax.jit(ado.jax_kernel(kernel, grid=lambda a, b, out: (a.shape[0] // per_thread,)))
        ref = jax.jit(lambda a, b: jnp.vdot(a, b))
        ja, jb, z = jnp.asarray(a), jnp.asarray(b), jnp.zeros(1)
        if _guard(row, "correct", lambda: bool(np.allclose(f(ja, jb, z)[0], np.dot(a, b), rtol=1e-9))):
            t = _guard(row, "ours_jax", lambda: time_jax(f, (ja, jb, z), reps))
            base = _guard(row, "jnp_vdot", lambda: time_jax(ref, (ja, jb), reps))
            if t and base:
                row["ratio_vs_jnp"] = t["median_ms"] / base["median_ms"]
        _guard(row, "events", lambda: _dot_events(kernel, a, b, per_thread, reps))
        rows.append(row)
        print(json.dumps(row), flush=True)


def _dot_events(kernel, a, b, per_thread, reps) -> dict:
    """Ours and RAJAPerf's CUDA stream_dot through the same runtime and stream, timed with CUDA events."""
    from adoffload.codegen.abi import pack_slots
    from adoffload.kernels.launch import flat_values, proven_facts
    from harness import Gpu
    from rajaperf import build_cuda_baselines, cuda_launch_grid
    gpu = Gpu()
    n = a.shape[0]
    host = {"a": a, "b": b, "out": np.zeros(1)}
    dev = gpu.upload(host)
    grid = (n // per_thread,)
    ordered = [host[p.name] for p in kernel.signature.params]
    compiled = kernel.compiled("nvptx", arch="sm_90", proven=proven_facts(kernel, ordered, grid), noalias=True)
    function = gpu.device.load_module(compiled.ptx).function(compiled.entry_name)
    status = gpu.device.to_device(np.zeros(4, np.int64))
    flat = flat_values(kernel.signature, ordered, [dev[p.name].ptr for p in kernel.signature.params])
    slots = pack_slots(flat, compiled.flat_types, grid, status.ptr)

    def ours():
        gpu.device.launch(function, grid[0], slots, block_size=compiled.extra["block_threads"], stream=gpu.stream)
    t_ours = gpu.time(ours, reps)
    baselines = gpu.device.load_module(build_cuda_baselines(Path("/tmp")).read_bytes())
    fn = baselines.function("stream_dot")
    # the tuned CUDA DOT is a grid-stride loop: launched as rajaperf.py launches it (one resident wave)
    blocks = cuda_launch_grid("stream_dot", n, {}, fn.resident_threads(256))
    t_cuda = gpu.time(lambda: gpu.launch_raw(fn, blocks, (256, 1, 1),
                                             [dev["a"].ptr, dev["b"].ptr, dev["out"].ptr, n]), reps)
    copy = gpu.copy_bandwidth()
    return {"ours_ms": t_ours.median_ms, "cuda_stream_dot_ms": t_cuda.median_ms,
            "fraction_of_cuda": t_cuda.median_ms / t_ours.median_ms,
            "ours_fraction_of_copy_bw": 16 * n / (t_ours.median_ms * 1e-3) / copy,
            "copy_gbps": copy / 1e9}


def bench_stencil(sizes, reps, rows):
    import jax
    import jax.numpy as jnp
    variants = {"shared": (stencil_shared, lambda x: (x.shape[0] // SR, x.shape[1])),
                "shared16": (stencil_shared16, None), "plain": (stencil_plain, None)}
    calls = {name: ado.jax_kernel(k, grid=grid, out_shapes=lambda x: {"y": x.shape})
             for name, (k, grid) in variants.items()}
    for n in sizes:
        row = {"case": "stencil", "n": n}
        x = jnp.asarray(np.random.default_rng(2).standard_normal((n, n), np.float32))
        g = jnp.asarray(np.random.default_rng(3).standard_normal((n, n), np.float32))
        primal = {name: jax.jit(f) for name, f in calls.items()}
        vjp = {name: jax.jit(lambda x, g, f=f: jax.vjp(f, x)[1](g)[0]) for name, f in calls.items()}

        def check():
            want, want_vjp = primal["plain"](x), vjp["plain"](x, g)
            return all(bool(np.allclose(primal[k](x), want, rtol=1e-5, atol=1e-5))
                       and bool(np.allclose(vjp[k](x, g), want_vjp, rtol=1e-5, atol=1e-5)) for k in ("shared", "shared16"))
        if _guard(row, "correct", check):
            for name in variants:
                _guard(row, name, lambda: time_jax(primal[name], (x,), reps))
                _guard(row, f"vjp_{name}", lambda: time_jax(vjp[name], (x, g), reps))
            if jax.default_backend() == "gpu":
                _stencil_launches(row, variants, np.asarray(x), np.asarray(g), reps)
            for name in ("shared", "shared16"):
                for kind in ("", "vjp_", "launch_", "launch_vjp_"):
                    if row.get(kind + name) and row.get(kind + "plain"):
                        row[f"{kind}speedup_{name}"] = row[kind + "plain"]["median_ms"] / row[kind + name]["median_ms"]
        if n == sizes[0]:
            _guard(row, "ptx", lambda: {name: {"primal": ptx_profile(k), "vjp": ptx_profile(ado.vjp(k, ("x",)))}
                                         for name, (k, _) in variants.items()})
        rows.append(row)
        print(json.dumps(row), flush=True)


def _stencil_launches(row: dict, variants: dict, x: np.ndarray, g: np.ndarray, reps: int) -> None:
    """The stencils' primal and reverse kernels launched alone (``time_launches``), next to their
    JAX timings: these kernels take 0.1-2 ms, where JAX's per-call costs are a visible share."""
    from harness import Gpu
    gpu = Gpu()
    for name, (kernel, grid) in variants.items():
        points = grid(x) if grid else x.shape
        reverse = ado.vjp(kernel, ("x",), primal_outputs=False)
        values = {"x": x, "y": np.zeros_like(x), "d_x": np.zeros_like(x), "d_y": g}
        _guard(row, f"launch_{name}", lambda: time_launches(kernel, values, points, reps, gpu))
        _guard(row, f"launch_vjp_{name}", lambda: time_launches(reverse, values, points, reps, gpu))
    # what a JAX call adds for an Out array it cannot prove written in full: zeroing it on its stream
    buf = gpu.device.allocate(x.nbytes)
    try:
        _guard(row, "memset_y", lambda: _timing(gpu.time(lambda: gpu.device.memset(buf, 0, gpu.stream), reps)))
    finally:
        gpu.device.free(buf)


def write(rows, out: Path, env: dict) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / "blocks.json").write_text(json.dumps({"environment": env, "rows": rows}, indent=1))
    flat = []
    for row in rows:
        entry = {}
        for key, value in row.items():
            if isinstance(value, dict):
                entry.update({f"{key}.{k}": v for k, v in value.items()})
            else:
                entry[key] = value
        flat.append(entry)
    keys = sorted({k for e in flat for k in e})
    with open(out / "blocks.csv", "w", newline="") as handle:
        writer = csv.DictWriter(handle, keys)
        writer.writeheader()
        writer.writerows(flat)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True, help="directory for blocks.json / blocks.csv")
    parser.add_argument("--reps", type=int, default=20)
    parser.add_argument("--only", choices=["matmul", "dot", "stencil"], action="append")
    parser.add_argument("--smoke", action="store_true", help="tiny sizes on any JAX backend (checks the script)")
    parser.add_argument("--matmul-sizes", type=int, nargs="+", default=[1024, 2048, 4096])
    parser.add_argument("--matmul-vjp-sizes", type=int, nargs="+", default=[1024, 2048, 4096],
                        help="sizes whose VJP runs (the reverse kernels refill their tiles: no tape)")
    parser.add_argument("--unroll-threshold", type=int, default=None,
                        help="an experiment, not a default: LLVM's -unroll-threshold for this process (the "
                             "sgemm reverse's 8x8 adjoint loop nest stays rolled at the default, so its "
                             "register tiles live in local memory)")
    args = parser.parse_args(argv)
    if args.unroll_threshold is not None:
        import llvmlite.binding as llvm
        llvm.set_option("", f"-unroll-threshold={args.unroll_threshold}")
    import jax
    if args.smoke:
        sizes = {"matmul": [128], "dot": [1 << 14], "stencil": [64]}
        args.reps, args.matmul_vjp_sizes = 2, [128]
    else:
        sizes = {"matmul": sorted(set(args.matmul_sizes) | set(args.matmul_vjp_sizes)), "dot": [1 << 20, 1 << 26],
                 "stencil": [1024, 4096, 8192]}
    jax.config.update("jax_enable_x64", True)       # the DOT is f64 (like RAJAPerf's); matmul and stencil f32
    try:
        from harness import environment
        env = environment()
    except Exception as exc:
        env = {"error": str(exc)}
    env["jax_backend"] = jax.default_backend()
    env["unroll_threshold"] = args.unroll_threshold
    rows: list = []
    chosen = args.only or ["matmul", "dot", "stencil"]
    if "matmul" in chosen:
        bench_matmul(sizes["matmul"], args.reps, rows, set(args.matmul_vjp_sizes))
        write(rows, args.out, env)              # after each section: a later time-out keeps these
    if "dot" in chosen:
        bench_dot(sizes["dot"], args.reps, rows)
        write(rows, args.out, env)
    if "stencil" in chosen:
        bench_stencil(sizes["stencil"], args.reps, rows)
    write(rows, args.out, env)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
