"""RAJAPerf subset on the GPU: ours (checked and unchecked) vs hand-written CUDA vs jax.numpy,
plus JVP/primal and VJP/primal ratios (of the lean derivative kernels the JAX rules run, and of
the default ``ado.jvp``/``ado.vjp`` kernels: see DERIVATIVES). Every number comes from this run on
this GPU, every side timed by ``harness.time_calls`` (same warm-up, repetitions and wall clock); each case's device
memory is freed before the next, and a case that fails is a row with its error.
"""
from __future__ import annotations

import math
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

import adoffload as ado
from adoffload.codegen.abi import pack_slots
from adoffload.codegen.gpu.rows import row_blocks
from adoffload.codegen.gpu.vectorize import choose_compiled, elements_per_thread, launch_threads, streamed_params
from adoffload.kernels.launch import flat_values, proven_facts

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))
from harness import REPS, Gpu, Timing, time_jax  # noqa: E402
from jax_derivatives import jax_derivative_times  # noqa: E402
from rajaperf_kernels import CASES  # noqa: E402


def build_cuda_baselines(out_dir: Path) -> Path:
    """nvcc -O3 -arch=sm_90 -cubin of cuda/rajaperf.cu (raises if nvcc is missing)."""
    cubin = out_dir / "rajaperf_sm90.cubin"
    subprocess.run(["nvcc", "-O3", "-arch=sm_90", "-cubin", "-o", str(cubin), str(HERE / "cuda" / "rajaperf.cu")],
                   check=True)
    return cubin


BLOCK = 256           # threads per block of our launches and the CUDA baselines


class OurLaunch:
    """One of our kernels, compiled for sm_90, bound to device buffers, ready to time."""

    def __init__(self, gpu: Gpu, kernel, values: dict, host_values: dict, grid: tuple, modules: dict):
        sig = kernel.signature
        ordered = [values[p.name] for p in sig.params]
        host_ordered = [host_values[p.name] for p in sig.params]
        proven = proven_facts(kernel, host_ordered, grid)
        self.total = math.prod(grid)
        # the launcher's policy: k elements per thread (128-bit accesses) on big rank-1 grids,
        # one resident wave of threads for grid-stride reduction entries (launch.py does the same);
        # every argument is its own upload (Gpu.upload): the buffers never overlap
        compiled = choose_compiled(kernel, "nvptx", elements_per_thread(sig, self.total, streamed_params(kernel)),
                                   arch="sm_90", proven=proven, noalias=True)
        self.k = compiled.elements_per_thread
        self.grid_stride = compiled.grid_stride
        self.ptx_bytes = len(compiled.ptx)
        if compiled.ptx not in modules:         # one driver JIT per distinct PTX for the whole run
            modules[compiled.ptx] = gpu.device.load_module(compiled.ptx)
        self.function = modules[compiled.ptx].function(compiled.entry_name)
        self.status = gpu.device.to_device(np.zeros(4, np.int64))
        pointers = [v.ptr if hasattr(v, "ptr") else 0 for v in ordered]
        scalars = [v if not hasattr(v, "ptr") else h for v, h in zip(ordered, host_ordered)]
        flat = flat_values(sig, scalars, pointers)
        self.slots = pack_slots(flat, compiled.flat_types, grid, self.status.ptr)
        self.threads = launch_threads(compiled, self.total, self.function.resident_threads(BLOCK))
        # rank 2/3 grids: the block indices are the tids where the entry takes it (launch.py does the same)
        self.blocks = row_blocks(grid, BLOCK) if compiled.row_launch else None
        self.gpu = gpu

    def __call__(self):
        self.gpu.device.launch(self.function, self.threads, self.slots, block_size=BLOCK, stream=self.gpu.stream,
                               blocks=self.blocks)

    def status_code(self) -> int:
        record = np.zeros(4, np.int64)
        self.gpu.device.synchronize()
        self.gpu.device.copy_to_host(self.status, record)
        return int(record[0])

    def close(self) -> None:
        self.gpu.device.free(self.status)


# The tuned CUDA reductions (cuda/rajaperf.cu) are grid-stride loops: one resident wave of 256-thread
# blocks (the occupancy calculator's count, as for ours; 132 SMs x 8 where it is unknown), each
# thread summing at least 8 elements.
REDUCTIONS = {"stream_dot", "basic_pi_reduce", "basic_trap_int", "basic_trap_int_rsqrt", "basic_reduce3_int"}
REDUCTION_BLOCKS = 132 * 8
# Arrays above this many elements are checked at sampled positions (plus their ends), not in full:
# a full numpy comparison of 2^26-element arrays costs about a second per array on the host.
FULL_CHECK_LIMIT = 1 << 22
SAMPLES = 1 << 20


def cuda_launch_grid(name: str, n: int, host: dict, resident_threads: int | None = None) -> tuple:
    if name == "basic_nested_init":
        return ((host["ni"] + 255) // 256, host["nj"], host["nk"])
    if name in REDUCTIONS:
        wave = resident_threads // BLOCK if resident_threads else REDUCTION_BLOCKS
        return (max(1, min((n + 2047) // 2048, wave)), 1, 1)
    return ((n + 255) // 256, 1, 1)


def ordered_cases() -> list:
    """The reductions first (issue 12's item 5), then the rest in RAJAPerf's order."""
    return sorted(CASES, key=lambda c: c.name not in REDUCTIONS)


def run(out_rows: list, sizes=(1_000_000, 1 << 26), reps: int = REPS, big_reps: int | None = None,
        deadline_s: float | None = None, on_row=None, kernels=None) -> None:
    """One row per (kernel, size). ``big_reps``: repetitions at sizes above 2^22 (default ``reps``).
    ``kernels``: names of the cases to run, in that order (default all, reductions first).
    ``deadline_s``: seconds from now after which the remaining cases are rows saying they were not
    run (so a stage limit never loses what was measured). ``on_row(row)`` after each row."""
    import jax
    jax.config.update("jax_enable_x64", True)      # the jnp baselines compute in f64, as ours and CUDA do
    start = time.perf_counter()
    gpu = Gpu()
    cubin = build_cuda_baselines(Path("/tmp"))
    baselines = gpu.device.load_module(cubin.read_bytes())
    rng = np.random.default_rng(0)
    modules: dict = {}
    by_name = {c.name: c for c in CASES}
    for case in [by_name[k] for k in kernels] if kernels else ordered_cases():
        unchecked = ado.kernel(bounds_check=False)(case.kernel.pyfunc)
        for n in sizes:
            row = {"kernel": case.name, "n": n, "reps": (big_reps or reps) if n > FULL_CHECK_LIMIT else reps}
            if deadline_s is not None and time.perf_counter() - start > deadline_s:
                row["error"] = f"not run: the benchmark's time budget ({deadline_s:.0f} s) was spent"
            else:
                t0 = time.perf_counter()
                _measure_case(row, gpu, case, unchecked, n, rng, baselines, modules)
                row["wall_s"] = time.perf_counter() - t0
            out_rows.append(row)
            print(_fmt(row), flush=True)
            if on_row is not None:
                on_row(row)


def _measure_case(row: dict, gpu: Gpu, case, unchecked, n: int, rng, baselines, modules: dict) -> None:
    import jax
    import jax.numpy as jnp
    reps = row["reps"]
    dev: dict = {}
    launches: list = []
    try:
        host = case.make(n, rng)
        grid = case.grid(n)
        expected = case.numpy(host)
        check = _Checker(expected, n)
        row["checked"] = check.how
        dev = gpu.upload(host)
        ours = OurLaunch(gpu, case.kernel, dev, host, grid, modules)
        launches.append(ours)
        # correctness: one launch from fresh inputs, compared with numpy
        ours()
        row["correct"] = ours.status_code() == 0 and check(gpu, dev, host)
        _restore(gpu, dev, host)
        t_ours = gpu.time(ours, reps)
        launches.append(OurLaunch(gpu, unchecked, dev, host, grid, modules))
        t_unchecked = gpu.time(launches[-1], reps)
        fn = baselines.function(case.name)
        args = [dev[p.name].ptr if isinstance(host[p.name], np.ndarray) else host[p.name]
                for p in case.kernel.signature.params]
        cuda_args = args if case.name == "basic_nested_init" else args + [n]
        cuda_grid = cuda_launch_grid(case.name, n, host, fn.resident_threads(BLOCK))
        row["cuda_blocks"] = cuda_grid[0]
        _restore(gpu, dev, host)                     # the baseline is checked too, from fresh inputs
        gpu.launch_raw(fn, cuda_grid, (256, 1, 1), cuda_args)
        row["cuda_correct"] = check(gpu, dev, host)
        t_cuda = gpu.time(lambda: gpu.launch_raw(fn, cuda_grid, (256, 1, 1), cuda_args), reps)
        row.update(**t_ours.columns("ours"), unchecked_ms=t_unchecked.median_ms, **t_cuda.columns("cuda"),
                   ptx_bytes=ours.ptx_bytes, k=ours.k, grid_stride=ours.grid_stride, threads=ours.threads)
        row["gbps_ours"] = case.bytes_moved(n) / (t_ours.median_ms * 1e-3) / 1e9
        row["gbps_cuda"] = case.bytes_moved(n) / (t_cuda.median_ms * 1e-3) / 1e9
        if case.jnp is not None:
            jd = {k: jnp.asarray(v) for k, v in host.items()}
            f = jax.jit(lambda d: case.jnp({**d, "n": n}, jnp))
            row.update(**time_jax(f, jd, reps=reps).columns("jnp"))
            del jd
            row.update(jax_derivative_times(case, host, reps, _time_jax, static={"n": n}))
        row.update(_derivative_times(gpu, case, host, grid, reps, t_ours, modules))
    except Exception as exc:  # a failing kernel is reported, not hidden
        row["error"] = f"{type(exc).__name__}: {str(exc)[:300]}"
    finally:
        for launch in launches:
            launch.close()
        gpu.free(dev)
        jax.clear_caches()


def _restore(gpu: Gpu, dev: dict, host: dict) -> None:
    """Copy every input array to the device again (InOut arrays were updated by the last launch)."""
    for k, v in host.items():
        if isinstance(v, np.ndarray):
            gpu.device.copy_to_device(dev[k], v)


class _Checker:
    """Compares device outputs with numpy's: in full up to FULL_CHECK_LIMIT elements, else at SAMPLES
    random positions plus the first and last 4096 (where grouping and tails go wrong)."""

    def __init__(self, expected: dict, n: int):
        self.expected = expected
        big = max(np.size(v) for v in expected.values()) > FULL_CHECK_LIMIT
        self.how = f"sampled {SAMPLES} + ends" if big else "full"
        self.positions = {}
        if big:
            pick = np.random.default_rng(n)
            for k, v in expected.items():
                size = np.size(v)
                if size > FULL_CHECK_LIMIT:
                    ends = np.r_[np.arange(4096), np.arange(size - 4096, size)]
                    self.positions[k] = np.unique(np.r_[pick.integers(0, size, SAMPLES), ends])

    def __call__(self, gpu: Gpu, dev: dict, host: dict) -> bool:
        ok = True
        for k, v in self.expected.items():
            got = gpu.download(dev[k], host[k])
            at = self.positions.get(k)
            got, want = (got, v) if at is None else (got[at], np.asarray(v)[at])
            ok = ok and bool(np.allclose(got, want, rtol=1e-9, atol=1e-12))
        return ok


# The derivative kernels timed, as (column prefix, derive, lean). ``jvp``/``vjp`` are the lean kernels
# the JAX rules run (enzyme/lean.py): the JVP rule's tangent call (next to the primal call) stores
# no primal output; the transpose rule's adjoint stores no primal output and reads once-stored
# seeds without clearing them. ``jvp_full``/``vjp_full`` are ``ado.jvp``/``ado.vjp`` as users get
# them by default (primal outputs stored, seeds cleared).
DERIVATIVES = (("jvp", ado.jvp, True), ("vjp", ado.vjp, True), ("jvp_full", ado.jvp, False),
               ("vjp_full", ado.vjp, False))


def array_bytes(kernel, values: dict) -> int:
    """Bytes of the arrays the kernel's code reads plus those it writes, each array once per
    direction: what the kernel must move at the least if every touched array is touched whole
    (an atomic counts as a read and a write; a stencil's neighbours are not counted again)."""
    from adoffload.enzyme.lean import param_accesses
    module, body = kernel.ir()
    accesses = param_accesses(kernel.signature, module.functions[body])
    return sum(np.asarray(values[name]).nbytes * (reads + writes) for name, (reads, writes) in accesses.items())


def _derivative_times(gpu, case, host, grid, reps, t_primal: Timing, modules: dict) -> dict:
    out = {}
    if not case.wrt:
        return out
    out["primal_bytes"] = array_bytes(case.kernel, host)
    for mode, derive, lean in DERIVATIVES:
        launch, dev = None, {}
        try:
            k = derive(case.kernel, case.wrt, primal_outputs=not lean)
            values = _derived_values(k, host, mode)
            dev = gpu.upload(values)
            launch = OurLaunch(gpu, k, dev, values, grid, modules)
            t = gpu.time(launch, reps)
            out.update(t.columns(mode))
            out[f"{mode}_ratio"] = t.median_ms / t_primal.median_ms
            out[f"{mode}_k"] = launch.k
            out[f"{mode}_bytes_ratio"] = array_bytes(k, values) / max(out["primal_bytes"], 1)
        except Exception as exc:
            out[f"{mode}_error"] = f"{type(exc).__name__}: {str(exc)[:200]}"
        finally:
            if launch is not None:
                launch.close()
            gpu.free(dev)
    return out


def _derived_values(kernel, host: dict, mode: str) -> dict:
    values = dict(host)
    for p in kernel.signature.params:
        if p.name in values:
            continue
        base = host[p.name[2:]]     # the primal outputs a lean kernel skips are in ``host`` (unread Ins)
        if isinstance(base, np.ndarray):
            values[p.name] = np.ones_like(base)
        elif p.is_array:          # reverse mode: a scalar's adjoint is a 1-element array
            values[p.name] = np.zeros(1, p.dtype.dtype)
        else:
            values[p.name] = 1.0
    return values


def _time_jax(f, args, reps) -> Timing:
    return time_jax(f, args, reps=reps)


def _fmt(row: dict) -> str:
    keys = ("kernel", "n", "k", "grid_stride", "correct", "cuda_correct", "ours_ms", "unchecked_ms", "cuda_ms", "jnp_ms",
            "jvp_ratio", "vjp_ratio", "jvp_full_ratio", "vjp_full_ratio", "jvp_bytes_ratio", "vjp_bytes_ratio", "wall_s",
            "error", "jvp_error", "vjp_error", "jvp_full_error", "vjp_full_error")
    return "  ".join(f"{k}={row[k]:.4g}" if isinstance(row.get(k), float) else f"{k}={row.get(k)}"
                     for k in keys if k in row)
