"""Block kernels (issue 13): tiled f32 matmul and its gradient, block-reduction DOT, shared-memory stencil and its adjoint.

Each against its baseline in the same run.

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

Every side is timed with the one timer (timing.py) (batches of 10 calls, then one wait; medians of
``--reps`` batches, with their IQR).

Every number comes from this run; a case that fails is reported with its error, never hidden.
``--quick`` runs tiny sizes on whatever JAX has (CPU included) to check the suite itself.
"""
from __future__ import annotations

import math

import numpy as np

import adoffload as ado

from ..kernels.blocks import (SR, TM, make_block_dot, matmul16, sgemm, sgemm_prefetch, sgemm_static, sgemm_strided,
                              stencil_plain, stencil_shared, stencil_shared16)

DEVICES = ("cpu", "cuda")
SIZE_KEY = "n"


def time_jax(f, args, reps: int) -> dict:
    """The benchmarks' one timer (harness.time_calls: batches of calls, then one wait) on a jitted
    JAX function."""
    from ..timing import time_jax as timer
    return _timing(timer(f, *args, reps=reps))


def _timing(t) -> dict:
    return {"median_ms": t.median_ms, "spread_ms": t.spread_ms, "iqr_ms": t.q3_ms - t.q1_ms, "reps": t.reps}


def time_launches(kernel, values: dict, grid: tuple, reps: int, gpu=None, edit_ptx=None) -> dict:
    """``kernel``'s GPU entry alone, launched through our runtime on one stream with the same timer:
    no JAX dispatch, no output allocation (sub-millisecond kernels are timed this way too). ``values``
    holds every parameter (numpy arrays are uploaded once; repeated launches reuse them).
    ``edit_ptx``: a function of the PTX text, for experiments (the PTX ablations of docs/performance.md)."""
    from adoffload.codegen.abi import pack_slots
    from adoffload.codegen.gpu.rows import row_blocks
    from adoffload.kernels.launch import flat_values, proven_facts
    from ..gpu import Gpu
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


def bench_dot(sizes, reps, rows, per_thread: int = 8, events: bool = True):
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
        if events:
            _guard(row, "events", lambda: _dot_events(kernel, a, b, per_thread, reps))
        rows.append(row)


def _dot_events(kernel, a, b, per_thread, reps) -> dict:
    """Ours and RAJAPerf's CUDA stream_dot through the same runtime and stream, timed with CUDA events."""
    from adoffload.codegen.abi import pack_slots
    from adoffload.kernels.launch import flat_values, proven_facts
    from ..gpu import Gpu
    from ..launching import cuda_launch_grid, load_cuda_baselines
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
    baselines = load_cuda_baselines(gpu)
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


def bench_stencil(sizes, reps, rows, launches: bool = True):
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
            if launches:
                _stencil_launches(row, variants, np.asarray(x), np.asarray(g), reps)
            for name in ("shared", "shared16"):
                for kind in ("", "vjp_", "launch_", "launch_vjp_"):
                    if row.get(kind + name) and row.get(kind + "plain"):
                        row[f"{kind}speedup_{name}"] = row[kind + "plain"]["median_ms"] / row[kind + name]["median_ms"]
        if n == sizes[0]:
            _guard(row, "ptx", lambda: {name: {"primal": ptx_profile(k), "vjp": ptx_profile(ado.vjp(k, ("x",)))}
                                         for name, (k, _) in variants.items()})
        rows.append(row)


def _stencil_launches(row: dict, variants: dict, x: np.ndarray, g: np.ndarray, reps: int) -> None:
    """The stencils' primal and reverse kernels launched alone (``time_launches``), next to their
    JAX timings: these kernels take 0.1-2 ms, where JAX's per-call costs are a visible share."""
    from ..gpu import Gpu
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


def add_arguments(parser) -> None:
    parser.add_argument("--only", choices=["matmul", "dot", "stencil"], action="append")
    parser.add_argument("--matmul-sizes", type=int, nargs="+", default=[1024, 2048, 4096])
    parser.add_argument("--matmul-vjp-sizes", type=int, nargs="+", default=[1024, 2048, 4096],
                        help="sizes whose VJP runs (the reverse kernels refill their tiles: no tape)")


def run(rows, device: str, quick: bool, options) -> None:
    import jax
    if quick:
        sizes = {"matmul": [128], "dot": [1 << 14], "stencil": [64]}
        vjp_sizes = {128}
    else:
        sizes = {"matmul": sorted(set(options.matmul_sizes) | set(options.matmul_vjp_sizes)),
                 "dot": [1 << 20, 1 << 26], "stencil": [1024, 4096, 8192]}
        vjp_sizes = set(options.matmul_vjp_sizes)
    reps = options.reps or (2 if quick else 20)
    jax.config.update("jax_enable_x64", True)       # the DOT is f64 (like RAJAPerf's); matmul and stencil f32
    platform = "gpu" if device == "cuda" else "cpu"
    with jax.default_device(jax.devices(platform)[0]):
        chosen = options.only or ["matmul", "dot", "stencil"]
        if "matmul" in chosen:
            bench_matmul(sizes["matmul"], reps, rows, vjp_sizes)
        if "dot" in chosen:
            bench_dot(sizes["dot"], reps, rows, events=device == "cuda")
        if "stencil" in chosen:
            bench_stencil(sizes["stencil"], reps, rows, launches=device == "cuda")
