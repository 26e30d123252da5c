"""RAJAPerf subset on the GPU: ours (checked and unchecked) vs hand-written CUDA vs jax.numpy,
plus JVP/primal and VJP/primal ratios. Every number comes from this run on this GPU, every side
timed by ``harness.time_calls`` (same warm-up, repetitions and wall clock); each case's device
memory is freed before the next, and a case that fails is a row with its error.
"""
from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path

import numpy as np

import adoffload as ado
from adoffload.codegen.abi import pack_slots
from adoffload.codegen.vectorize import choose_compiled, elements_per_thread, threads
from adoffload.launch import flat_values, proven_facts

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


class OurLaunch:
    """One of our kernels, compiled for sm_90, bound to device buffers, ready to time."""

    def __init__(self, gpu: Gpu, kernel, values: dict, host_values: dict, grid: tuple):
        sig = kernel.signature
        ordered = [values[p.name] for p in sig.params]
        host_ordered = [host_values[p.name] for p in sig.params]
        proven = proven_facts(kernel, host_ordered, grid)
        self.total = math.prod(grid)
        # the launcher's policy: k elements per thread (128-bit accesses) on big rank-1 grids
        # every argument is its own upload (Gpu.upload): the buffers never overlap
        compiled = choose_compiled(kernel, "nvptx", elements_per_thread(sig, self.total), arch="sm_90",
                                   proven=proven, noalias=True)
        self.k = compiled.elements_per_thread
        self.ptx_bytes = len(compiled.ptx)
        module = gpu.device.load_module(compiled.ptx)
        self.function = module.function(compiled.entry_name)
        self.status = gpu.device.to_device(np.zeros(4, np.int64))
        pointers = [v.ptr if hasattr(v, "ptr") else 0 for v in ordered]
        scalars = [v if not hasattr(v, "ptr") else h for v, h in zip(ordered, host_ordered)]
        flat = flat_values(sig, scalars, pointers)
        self.slots = pack_slots(flat, compiled.flat_types, grid, self.status.ptr)
        self.threads = threads(self.total, compiled.elements_per_thread)
        self.gpu = gpu

    def __call__(self):
        self.gpu.device.launch(self.function, self.threads, self.slots, block_size=256, stream=self.gpu.stream)


# The tuned CUDA reductions (cuda/rajaperf.cu) are grid-stride loops: enough 256-thread blocks to
# fill the H200 (132 SMs x 8 resident blocks), each thread summing at least 8 elements.
REDUCTIONS = {"stream_dot", "basic_pi_reduce", "basic_trap_int", "basic_reduce3_int"}
REDUCTION_BLOCKS = 132 * 8


def cuda_launch_grid(name: str, n: int, host: dict) -> tuple:
    if name == "basic_nested_init":
        return ((host["ni"] + 255) // 256, host["nj"], host["nk"])
    if name in REDUCTIONS:
        return (max(1, min((n + 2047) // 2048, REDUCTION_BLOCKS)), 1, 1)
    return ((n + 255) // 256, 1, 1)


def run(out_rows: list, sizes=(1_000_000, 1 << 26), reps: int = REPS) -> None:
    import jax
    import jax.numpy as jnp
    gpu = Gpu()
    cubin = build_cuda_baselines(Path("/tmp"))
    baselines = gpu.device.load_module(cubin.read_bytes())
    rng = np.random.default_rng(0)
    for case in CASES:
        unchecked = ado.kernel(bounds_check=False)(case.kernel.pyfunc)
        for n in sizes:
            host = case.make(n, rng)
            grid = case.grid(n)
            row = {"kernel": case.name, "n": n, "reps": reps}
            dev: dict = {}
            try:
                dev = gpu.upload(host)
                ours = OurLaunch(gpu, case.kernel, dev, host, grid)
                # correctness: one launch from fresh inputs, compared with numpy
                ours()
                expected = case.numpy(host)
                row["correct"] = all(np.allclose(gpu.download(dev[k], host[k]), v, rtol=1e-9, atol=1e-12)
                                     for k, v in expected.items())
                for k, v in host.items():  # restore InOut inputs before timing
                    if isinstance(v, np.ndarray):
                        gpu.device.copy_to_device(dev[k], v)
                t_ours = gpu.time(ours, reps)
                t_unchecked = gpu.time(OurLaunch(gpu, unchecked, dev, host, grid), reps)
                fn = baselines.function(case.name)
                args = [dev[p.name].ptr if isinstance(host[p.name], np.ndarray) else host[p.name]
                        for p in case.kernel.signature.params]
                cuda_args = args if case.name == "basic_nested_init" else args + [n]
                cuda_grid = cuda_launch_grid(case.name, n, host)
                for k, v in host.items():  # the baseline is checked too, from fresh inputs
                    if isinstance(v, np.ndarray):
                        gpu.device.copy_to_device(dev[k], v)
                gpu.launch_raw(fn, cuda_grid, (256, 1, 1), cuda_args)
                row["cuda_correct"] = all(np.allclose(gpu.download(dev[k], host[k]), v, rtol=1e-9, atol=1e-12)
                                          for k, v in expected.items())
                t_cuda = gpu.time(lambda: gpu.launch_raw(fn, cuda_grid, (256, 1, 1), cuda_args), reps)
                row.update(**t_ours.columns("ours"), unchecked_ms=t_unchecked.median_ms, **t_cuda.columns("cuda"),
                           ptx_bytes=ours.ptx_bytes, k=ours.k)
                row["gbps_ours"] = case.bytes_moved(n) / (t_ours.median_ms * 1e-3) / 1e9
                row["gbps_cuda"] = case.bytes_moved(n) / (t_cuda.median_ms * 1e-3) / 1e9
                if case.jnp is not None:
                    jd = {k: jnp.asarray(v) for k, v in host.items()}
                    f = jax.jit(lambda d: case.jnp(d, jnp))
                    row.update(**time_jax(f, jd, reps=reps).columns("jnp"))
                    row.update(jax_derivative_times(case, host, reps, _time_jax))
                    del jd
                row.update(_derivative_times(gpu, case, host, grid, reps, t_ours))
            except Exception as exc:  # a failing kernel is reported, not hidden
                row["error"] = f"{type(exc).__name__}: {str(exc)[:300]}"
            finally:
                gpu.free(dev)
                jax.clear_caches()
            out_rows.append(row)
            print(_fmt(row), flush=True)


def _derivative_times(gpu, case, host, grid, reps, t_primal: Timing) -> dict:
    out = {}
    if not case.wrt:
        return out
    for mode, derive in (("jvp", ado.jvp), ("vjp", ado.vjp)):
        try:
            k = derive(case.kernel, case.wrt)
            values = _derived_values(k, host, mode)
            dev = gpu.upload(values)
            try:
                t = gpu.time(OurLaunch(gpu, k, dev, values, grid), reps)
            finally:
                gpu.free(dev)
            out.update(t.columns(mode))
            out[f"{mode}_ratio"] = t.median_ms / t_primal.median_ms
        except Exception as exc:
            out[f"{mode}_error"] = f"{type(exc).__name__}: {str(exc)[:200]}"
    return out


def _derived_values(kernel, host: dict, mode: str) -> dict:
    values = dict(host)
    for p in kernel.signature.params:
        if p.name in values:
            continue
        base = host[p.name[2:]]
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
    keys = ("kernel", "n", "k", "correct", "cuda_correct", "ours_ms", "unchecked_ms", "cuda_ms", "jnp_ms", "jvp_ratio", "vjp_ratio", "error")
    return "  ".join(f"{k}={row[k]:.4g}" if isinstance(row.get(k), float) else f"{k}={row.get(k)}"
                     for k in keys if k in row)
