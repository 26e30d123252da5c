"""Code generation: a kernel body -> target entry (abi) -> O3 -> host code | PTX | HSACO.

``compile_for_target`` is the one call the launcher and the JAX layer need; the target
modules (``host``, ``nvptx``, ``amdgpu``) can be used directly for inspection and tests.
"""
from __future__ import annotations

import math
import os
from collections.abc import Sequence

from . import abi
from .gpu.rows import PTX_ROW_LAUNCH_LINE, ROW_LAUNCH_MARK, launches_rows  # noqa: F401 (re-exported)

TARGETS = {"host": "host", "cpu": "host", "nvptx": "nvptx", "cuda": "nvptx", "amdgpu": "amdgpu", "hip": "amdgpu"}
DEFAULT_ARCH = {"nvptx": "sm_90", "amdgpu": "gfx942"}
LANE_COMBINING_ENV = "ADOFFLOAD_LANE_COMBINING"     # "0": no lane combining (codegen/gpu/lane_combining.py)
PEER_ADDS_ENV = "ADOFFLOAD_PEER_ADDS"               # "0": no warp-aggregated gathered adds (codegen/gpu/peer_adds.py)
# Bumped whenever the generated code changes for the same inputs (part of the cache key).
CODEGEN_REVISION = 11


def _canonical_target(target: str) -> str:
    from ..errors import CompilationError
    try:
        return TARGETS[target]
    except KeyError:
        raise CompilationError(f"unknown target {target!r}; expected one of {sorted(TARGETS)}") from None


def kernel_symbol(body_name: str, target: str) -> str:
    """The entry's symbol in the compiled artifact (what the runtime looks up)."""
    target = _canonical_target(target)
    if target == "host":
        return abi.host_entry_name(body_name)
    if target == "nvptx":
        from .gpu.nvptx import ptx_symbol
        return ptx_symbol(abi.kernel_entry_name(body_name))
    return abi.kernel_entry_name(body_name)


def _host_cpu_key() -> str:
    import llvmlite.binding as llvm
    from .targets import initialize
    initialize()
    return f"{llvm.get_process_triple()}|{llvm.get_host_cpu_name()}|{llvm.get_host_cpu_features().flatten()}"


def normalize_options(opts: dict, target: str, grid_rank: int) -> dict:
    """``opts`` with defaults that change nothing removed, so equal requests share one cache
    key: ``elements_per_thread`` is dropped when 1 and on the host (whose entry loops over
    its chunk anyway), and checked otherwise (abi.check_elements_per_thread)."""
    opts = dict(opts)
    _check_warp_size(opts, target)
    if not opts.get("serial") or _canonical_target(target) != "host" or opts.get("block") is not None:
        opts.pop("serial", None)    # host launches on one OS thread only (codegen/host/serial.py)
    if not opts.get("private") or _canonical_target(target) != "host" or opts.get("block") is not None \
            or opts.get("serial"):
        opts.pop("private", None)   # host: per-chunk copies of arrays only added into (abi.add_host_entry)
    else:
        opts["private"] = tuple((int(k), int(ndim), str(t)) for k, ndim, t in opts["private"])
    if opts.get("block") is not None:
        # block kernels: one GPU thread per logical thread, no deferred reductions (codegen/blocks.py)
        opts.pop("elements_per_thread", None)
        opts.pop("reductions", None)
        opts["block"] = tuple(int(e) for e in opts["block"])
        opts["shared"] = tuple((int(n), bool(z)) for n, z in opts.get("shared", ()))
        if not opts.get("ordered_shared_adds") or _canonical_target(target) == "host":
            opts.pop("ordered_shared_adds", None)       # the host's block loop orders them already
    if os.environ.get(LANE_COMBINING_ENV) == "0":
        opts["lane_combining"] = False      # A/B measurements (part of every cache key)
    if opts.get("lane_combining", True) or _canonical_target(target) != "nvptx":
        opts.pop("lane_combining", None)    # on by default; NVPTX only (codegen/gpu/lane_combining.py)
    if os.environ.get(PEER_ADDS_ENV) == "0":
        opts["peer_adds"] = False           # A/B measurements (part of every cache key)
    if opts.get("peer_adds", True) or _canonical_target(target) != "nvptx" or "lane_combining" in opts \
            or opts.get("block") is not None:
        opts.pop("peer_adds", None)         # on by default; NVPTX grid kernels only (codegen/gpu/peer_adds.py)
    if "elements_per_thread" in opts:
        k = abi.check_elements_per_thread(opts["elements_per_thread"], grid_rank)
        if k == 1 or _canonical_target(target) == "host":
            del opts["elements_per_thread"]
        else:
            opts["elements_per_thread"] = k
    return opts


def _check_warp_size(opts: dict, target: str) -> None:
    """``warp_size`` (host block kernels only): 32, the default (dropped, so the cache key is the
    default's), or 64, AMD's wavefronts emulated on the host (codegen/host/block_split.py). A GPU's warp
    size is its hardware's."""
    from ..errors import CompilationError
    if "warp_size" not in opts:
        return
    size = opts.pop("warp_size")
    if size not in (32, 64):
        raise CompilationError(f"warp_size={size!r}: the host emulates warps of 32 (NVIDIA's) or 64 (AMD's "
                               f"wavefronts) lanes")
    if _canonical_target(target) != "host":
        raise CompilationError(f"warp_size={size} is a host option (AMD's wavefronts emulated on the CPU); "
                               f"target {target!r} has its hardware's warp size")
    if size != 32 and opts.get("block") is not None:
        opts["warp_size"] = size


def _combine_lanes(text: str, body_name: str, grid_rank: int, target: str, arch: str, opts: dict) -> str:
    """A thread's stencil atomics summed across warp lanes (codegen/gpu/lane_combining.py): NVPTX from
    sm_75 (``activemask`` needs PTX 6.2), one element per thread, not for deterministic kernels
    (option ``lane_combining=False``; ordered shared adds). A block kernel's adds into its shared
    arrays (the body's last params before the status) are left to codegen/gpu/shared_atomics.py."""
    from .gpu.nvptx import PTX_VERSION
    if target != "nvptx" or not opts.get("lane_combining", True) or opts.get("elements_per_thread", 1) != 1 \
            or opts.get("ordered_shared_adds") or PTX_VERSION.get(arch, 0) < 62:
        return text
    from .gpu.lane_combining import combine_lane_atomics
    skip = len(opts.get("shared", ())) if opts.get("block") is not None else 0
    return combine_lane_atomics(text, body_name, grid_rank, opts.get("noalias", False), skip_args=skip)[0]


def _aggregate_peers(text: str, body_name: str, grid_rank: int, target: str, arch: str, opts: dict) -> str:
    """Gathered atomics summed per address across warp lanes (codegen/gpu/peer_adds.py): NVPTX from
    sm_75, grid kernels, on unless ``peer_adds=False`` (or ``ADOFFLOAD_PEER_ADDS=0``), off with
    ``lane_combining=False`` (deterministic kernels). On since its first GPU run (H100, 2026-12-06:
    benchmarks/results/2026-12-06-gpu): the research model's step 10x faster, neighbour-list adjoints
    unchanged."""
    from .gpu.nvptx import PTX_VERSION
    if target != "nvptx" or not opts.get("peer_adds", True) or not opts.get("lane_combining", True) \
            or PTX_VERSION.get(arch, 0) < 62:
        return text
    from .gpu.peer_adds import aggregate_peer_adds
    return aggregate_peer_adds(text, body_name, grid_rank)[0]


PTX_GRID_STRIDE_LINE = "// adoffload: grid-stride entry (any thread count is correct; launch one resident wave)\n"


def loops_over_grid(artifact) -> bool:
    """Whether a compiled GPU artifact's entry loops over the grid (codegen/gpu/grid_stride.py): the
    PTX says so in its first line. Such an entry is correct for any thread count; launchers launch
    one resident wave (vectorize.launch_threads), so each block's one atomic covers many elements."""
    return isinstance(artifact, str) and artifact.startswith(PTX_GRID_STRIDE_LINE)


def compile_for_target(text: str, body_name: str, flat_types: Sequence, grid_rank: int, target: str,
                       arch: str | None = None, *, cache=True, **opts):
    """Compile the body in ``text`` for ``target`` ("host" | "nvptx" | "amdgpu", or cpu/cuda/hip).

    Returns a ``HostProgram`` (``.entry_name``, ``.entry_address``) for the host, PTX text for
    NVPTX, HSACO bytes for AMDGPU. ``opts``: ``noalias`` (all targets), ``scalars_by_reference``
    (GPU), ``math`` (AMDGPU: "auto" | "ocml" | "devicemath"), ``reductions`` (how
    uniform-address atomics are combined: "block" (default) | "warp" | "thread" | "off";
    see codegen/gpu/reductions.py), ``elements_per_thread`` (GPU, rank-1 grids: k linear ids per
    thread, launched with ``ceil(total / k)`` threads; see abi.add_gpu_entry and
    codegen/gpu/vectorize.py; ignored on the host), ``lane_combining`` (NVPTX, default True: a
    thread's stencil atomics summed across warp lanes, codegen/gpu/lane_combining.py), ``warp_size``
    (host block kernels: 32, or 64 to emulate AMD's wavefronts; the 'cpu:wave64' device), ``serial`` (host,
not block kernels: every thread of a launch runs on one OS thread, so the body's atomics are made
plain, codegen/host/serial.py), ``private`` (host, not block kernels: arrays the body only adds into, summed
per chunk in stack copies, abi.add_host_entry). ``cache``:
    True for the default on-disk cache, a ``CompileCache``, or False/None for none.
    """
    from .cache import CompileCache
    from ..analysis.address_classes import lower_uniform_adds_text
    target = _canonical_target(target)
    opts = normalize_options(opts, target, grid_rank)
    text = lower_uniform_adds_text(text, target)   # adjoint reductions: warp pre-reduction on GPUs
    arch = arch or DEFAULT_ARCH.get(target) or _host_cpu_key()
    store = CompileCache() if cache is True else (cache or None)
    types = abi.flat_type_names(flat_types)
    by_ref = abi._by_reference_mask(flat_types, opts.get("scalars_by_reference", False))
    key = [CODEGEN_REVISION, text, body_name, ",".join(types), grid_rank, target, arch, sorted(opts.items()), by_ref]
    reductions = opts.get("reductions", "block")
    cached = store.get(key) if store is not None else None
    block = opts.get("block")
    if target == "host":
        from .host.program import HostProgram
        if cached is not None:
            program = HostProgram(cached.decode(), optimized=True)
        elif block is not None:
            from .blocks import add_block_host_entry
            program = HostProgram(add_block_host_entry(text, body_name, flat_types, grid_rank, block,
                                                       opts.get("shared", ()), noalias=opts.get("noalias", False),
                                                       warp_size=opts.get("warp_size", 32)))
            if store is not None:
                store.put(key, program.optimized_ir.encode())
        else:
            program = HostProgram(abi.add_host_entry(text, body_name, flat_types, grid_rank,
                                                     noalias=opts.get("noalias", False), reductions=reductions,
                                                     serial=opts.get("serial", False),
                                                     private=opts.get("private", ())))
            if store is not None:
                store.put(key, program.optimized_ir.encode())
        program.entry_name = abi.host_entry_name(body_name)
        program.entry_address = program.address(program.entry_name)
        return program
    if cached is not None:
        return cached.decode() if target == "nvptx" else cached
    if block is not None:
        from .blocks import add_block_gpu_entry
        text = _combine_lanes(text, body_name, grid_rank, target, arch, opts)
        module = add_block_gpu_entry(text, body_name, flat_types, grid_rank, target, block, opts.get("shared", ()),
                                     arch=arch, scalars_by_reference=opts.get("scalars_by_reference", False),
                                     noalias=opts.get("noalias", False),
                                     ordered=opts.get("ordered_shared_adds", False))
    else:
        module = None
    if module is None and opts.get("noalias", False):
        from .gpu.schedule import hoist_loads
        text = hoist_loads(text, body_name)     # several loads in flight per thread (adjoints)
    if module is None:
        text = _combine_lanes(text, body_name, grid_rank, target, arch, opts)
        from .gpu.zero_adds import skip_zero_adds
        text = skip_zero_adds(text, body_name)[0]     # adds of a missing contribution (-0.0) skip their atomic
        text = _aggregate_peers(text, body_name, grid_rank, target, arch, opts)
    module = module or abi.add_gpu_entry(text, body_name, flat_types, grid_rank, target,
                               scalars_by_reference=opts.get("scalars_by_reference", False),
                               noalias=opts.get("noalias", False), reductions=reductions,
                               elements_per_thread=opts.get("elements_per_thread", 1))
    if target == "nvptx":
        from .gpu.nvptx import compile_ptx
        artifact = compile_ptx(module, arch)
        if block is not None:
            from .gpu.nvptx import resident_threads
            artifact = resident_threads(artifact, math.prod(block))
        if f"!{abi.GRID_STRIDE_MARK} =" in module:       # the entry loops: the artifact says so (loops_over_grid)
            artifact = PTX_GRID_STRIDE_LINE + artifact
        elif f"!{ROW_LAUNCH_MARK} =" in module:           # it takes row launches (rows.launches_rows)
            artifact = PTX_ROW_LAUNCH_LINE + artifact
        data = artifact.encode()
    else:
        from .gpu.amdgpu import compile_hsaco
        artifact = data = compile_hsaco(module, arch, math=opts.get("math", "auto"))
    if store is not None:
        store.put(key, data)
    return artifact
