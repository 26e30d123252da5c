"""Launching our RAJAPerf kernels and the hand-written CUDA baselines on one stream, as the
JAX handler would (the launcher's policy: k elements per thread, grid-stride reductions, row
launches), and checking their outputs against numpy's. Shared by the rajaperf and derivatives
suites."""
from __future__ import annotations

import math

import numpy as np

from adoffload.codegen.abi import pack_slots
from adoffload.codegen.gpu.rows import row_blocks
from adoffload.codegen.gpu.vectorize import choose_compiled, elements_per_thread, launch_threads, streamed_params
from adoffload.kernels.launch import flat_values, proven_facts

from .gpu import Gpu, nvcc_cubin
from .kernels.rajaperf import CASES


def load_cuda_baselines(gpu: Gpu):
    """cuda/rajaperf.cu built with nvcc -O3 -arch=sm_90 and loaded (raises without nvcc)."""
    return gpu.device.load_module(nvcc_cubin("rajaperf.cu"))


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


def restore(gpu: Gpu, dev: dict, host: dict) -> None:
    """Copy every input array to the device again (InOut arrays were updated by the last launch)."""
    for k, v in host.items():
        if isinstance(v, np.ndarray):
            gpu.device.copy_to_device(dev[k], v)


class Checker:
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


def cuda_arguments(case, dev: dict, host: dict, n: int) -> list:
    """The CUDA baseline's arguments: the kernel's parameters in order (device pointers for arrays),
    then the element count (nested_init takes its extents as parameters already)."""
    args = [dev[p.name].ptr if isinstance(host[p.name], np.ndarray) else host[p.name]
            for p in case.kernel.signature.params]
    return args if case.name == "basic_nested_init" else args + [n]


def select_cases(names=None) -> list:
    """The named cases in that order (default all, reductions first); an unknown name is a BenchmarkError."""
    from .results import BenchmarkError
    if not names:
        return ordered_cases()
    by_name = {c.name: c for c in CASES}
    unknown = [k for k in names if k not in by_name]
    if unknown:
        raise BenchmarkError(f"unknown RAJAPerf kernel(s) {', '.join(unknown)}; known: {', '.join(by_name)}")
    return [by_name[k] for k in names]
