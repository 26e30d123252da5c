"""FFI targets: one XLA custom-call target per (kernel variant, platform), registered once.

The target's handler is generated in LLVM IR (``handler.py``) and JIT-compiled for the
host; it calls the kernel compiled for the platform (host entry, PTX loaded into JAX's
primary CUDA context, or a HIP code object). Everything it needs stays alive in
``_TARGETS`` for the life of the process, since XLA may call a target at any time.
"""
from __future__ import annotations

import ctypes
import itertools
import re
import threading
from dataclasses import dataclass, field

import numpy as np

from ..language import status as abi_status
from ..errors import CompilationError, JaxIntegrationError
from ..runtime.check import check
from ..language.signature import HIDDEN_PREFIX
from . import ffi_layout
from . import handler as handlers

PLATFORMS = {"cpu": "cpu", "cuda": "CUDA", "rocm": "ROCM"}
STATUS_BYTES = 8 * abi_status.WORDS


@dataclass
class Target:
    name: str
    kernel: object
    platform: str
    handler: handlers.CompiledHandler
    host_statuses: list[np.ndarray] = field(default_factory=list)   # GPU: host views of status records
    upgrades: list = field(default_factory=list)   # CUDA: tiered.Upgrade of each -O1 module loaded


_TARGETS: dict[tuple, Target] = {}
_LOCK = threading.RLock()
_COUNTER = itertools.count()
sync_gpu_errors = False     # debug mode: GPU handlers synchronize and return bounds errors themselves


@dataclass(frozen=True)
class Variant:
    """What a call site fixes about a target beyond kernel and platform (part of its key)."""
    written: frozenset = frozenset()     # Out params the call writes in full: no memset
    proven: frozenset = frozenset()      # bounds facts the call's static shapes prove: checks left out
    elements_per_thread: int = 1         # GPU only: k elements per thread (codegen/gpu/vectorize.py)
    serial: bool = False                 # CPU only: the grid is too small to split, so one thread runs it
                                         # all and the body's atomics are plain (codegen/host/serial.py)
    private: tuple = ()                  # CPU only: (flat index, ndim, element type) of small arrays the body
                                         # only adds into: each chunk adds into its own copy (abi.add_host_entry)


def target_name(kernel, platform: str, variant: Variant = Variant()) -> str:
    """The registered name of ``kernel``'s target on ``platform`` for ``variant`` (registering it if needed)."""
    return ensure_target(kernel, platform, variant).name


def gpu_options(kernel, variant: Variant = Variant()) -> dict:
    """``Kernel.compiled`` options of a kernel called from JAX on a GPU.

    ``noalias`` when the kernel has no InOut array: XLA gives Out results fresh buffers, and
    In operands that share a buffer are only read, so no written array can overlap another
    param. (An InOut result aliases its operand, which XLA could also pass elsewhere.)"""
    options = {"proven": variant.proven}
    if not any(p.is_array and p.type.intent == "inout" for p in kernel.signature.params):
        options["noalias"] = True
    return options


def _gpu_compiled(kernel, target: str, arch: str, variant: Variant):
    """The kernel built for a GPU call: k elements per thread only where that build vectorizes."""
    from ..codegen.gpu.vectorize import choose_compiled
    return choose_compiled(kernel, target, variant.elements_per_thread, arch=arch, scalars_by_reference=True,
                           **gpu_options(kernel, variant))


def ensure_target(kernel, platform: str, variant: Variant = Variant()) -> Target:
    _check_hidden(kernel)
    variant = _normalized(kernel, platform, variant)
    key = (id(kernel), platform, sync_gpu_errors if platform != "cpu" else False, variant)
    with _LOCK:
        target = _TARGETS.get(key)
        if target is not None and target.kernel is kernel:
            return target
        safe = re.sub(r"[^A-Za-z0-9_]", "_", kernel.name)
        name = f"adoffload_{safe}_{next(_COUNTER)}"
        build = {"cpu": _cpu_target, "cuda": _cuda_target, "rocm": _rocm_target}[platform]
        target = build(kernel, name, variant)
        import jax
        jax.ffi.register_ffi_target(name, target.handler.capsule(), platform=PLATFORMS[platform])
        _TARGETS[key] = target
        return target


def build_ahead(kernel, platform: str, variant: Variant = Variant(), archs=None) -> list:
    """Compile, without loading anything, what ``ensure_target`` will compile for ``kernel`` on
    ``platform`` (CUDA: for each of ``archs``, by default every device the driver sees, the PTX and,
    by ptxas, the cubin of the kernel and its tape kernels), so that the lowering finds it built.
    Returns the Compiled artifacts."""
    _check_hidden(kernel)
    variant = _normalized(kernel, platform, variant)              # as ensure_target
    counters = [counter for counter, _, _ in _levels(kernel)]
    if platform == "cpu":
        return [kernel.compiled("host", proven=variant.proven, **_serial_option(variant))] + \
            [counter.compiled("host", proven=variant.proven) for counter in counters]
    if platform != "cuda":
        raise JaxIntegrationError(f"compile_ahead builds for the 'cpu' and 'cuda' platforms, not {platform!r}")
    built = []
    for arch in archs if archs is not None else _driver_archs():
        here = [_gpu_compiled(kernel, "nvptx", arch, variant)]
        here += [c.compiled("nvptx", arch=arch, scalars_by_reference=True, proven=variant.proven) for c in counters]
        here += [scan.compiled("nvptx", arch=arch) for scan in (_scan_kernels() if counters else ())]
        for compiled in here:
            compiled.pending_cubin(arch)
        for compiled in here:
            compiled.pending_cubin(arch).result()
        built += here
    return built


def _normalized(kernel, platform: str, variant: Variant) -> Variant:
    """One element per thread on the host and with a dynamic tape; a serial build only on the host,
    without a tape (the tape handler sizes and runs its kernels itself)."""
    if platform == "cpu" or _levels(kernel):
        serial = variant.serial and platform == "cpu" and not _levels(kernel)
        private = variant.private if platform == "cpu" and not _levels(kernel) and not serial else ()
        return Variant(variant.written, variant.proven, serial=serial, private=tuple(private))
    return Variant(variant.written, variant.proven, variant.elements_per_thread)


def _serial_option(variant: Variant) -> dict:
    if variant.private:
        return {"private": variant.private}
    return {"serial": True} if variant.serial else {}


# An update atomic into an array of at most this many elements, and fewer elements than threads,
# makes a host call serial: every chunk's threads then add into the same few cache lines. On the
# 2-core development machine the parameter-gradient kernels of examples/research (d_params: 9
# doubles) ran faster on one thread with plain adds than split over XLA's pool
# (benchmarks/results/2026-12-04-research-host-serial).
SMALL_UPDATE_TARGET = 4096


def private_updates(kernel, proven: frozenset, grid, shapes: dict) -> tuple:
    """``Variant.private`` of a host call of ``kernel`` over ``grid`` that ``serial_grid`` would make
    serial only for its small update target: where every update atomic of the body adds into an
    array it never otherwise touches (codegen/host/serial.private_updates) and each such array has
    fewer elements than the call's threads (all of them together at most SMALL_UPDATE_TARGET: the copies
    live on a pool thread's stack), each chunk of XLA's pool adds
    into its own copy and adds that into the array once at its end, so the call keeps the pool
    without its chunks contending for the array's cache lines. Else ()."""
    from ..codegen.host.serial import private_updates as updates
    from .cpu_parallel import min_chunk_threads
    if _levels(kernel) or getattr(kernel, "block", None) is not None or not shapes:
        return ()
    text = kernel.module_text(proven)
    total = int(np.prod(grid, dtype=np.int64))
    if total < 2 * min_chunk_threads(text, kernel.body_name):
        return ()
    found = updates(text, kernel.body_name)
    if not found:
        return ()
    flat = kernel.signature.flat_params()
    position = {p.name: k for k, p in enumerate(kernel.signature.params)}
    rank = kernel.signature.grid_rank
    private, stacked = [], 0
    for k, element in sorted(found.items()):
        if not rank <= k < rank + len(flat) or flat[k - rank].role != "array":
            return ()
        shape = shapes.get(position.get(flat[k - rank].name))
        if shape is None:
            return ()
        size = int(np.prod(shape, dtype=np.int64))
        stacked += size
        if not stacked <= SMALL_UPDATE_TARGET or not size < total:   # all copies together: one chunk's stack
            return ()
        private.append((k - rank, kernel.signature.params[position[flat[k - rank].name]].type.ndim, element))
    return tuple(private)


def serial_grid(kernel, proven: frozenset, grid, shapes: dict | None = None) -> bool:
    """Whether a host call of ``kernel`` over ``grid`` (static in the call) is to run on one thread
    with the body's update atomics made plain: fewer than two of the handler's chunks
    (cpu_parallel.min_chunk_threads), or (``shapes``: the call's array shapes by parameter position)
    an update atomic into an array of at most SMALL_UPDATE_TARGET elements and fewer elements than
    threads; no dynamic tape, not a block kernel."""
    from ..codegen.host.serial import has_update_atomics, update_roots
    from .cpu_parallel import min_chunk_threads
    if _levels(kernel) or getattr(kernel, "block", None) is not None:    # block kernels: no serial build
        return False
    text = kernel.module_text(proven)
    if not has_update_atomics(text):
        return False
    total = int(np.prod(grid, dtype=np.int64))
    if total < 2 * min_chunk_threads(text, kernel.body_name):
        return True
    if not shapes:
        return False
    # body parameters: the grid's thread ids, then the flattened params (an array's pointer, its extents)
    flat = kernel.signature.flat_params()
    position = {p.name: k for k, p in enumerate(kernel.signature.params)}
    rank = kernel.signature.grid_rank
    for k in update_roots(text, kernel.body_name):
        if not rank <= k < rank + len(flat) or flat[k - rank].role != "array":
            continue
        shape = shapes.get(position.get(flat[k - rank].name))
        if shape is not None and int(np.prod(shape, dtype=np.int64)) <= SMALL_UPDATE_TARGET \
                and int(np.prod(shape, dtype=np.int64)) < total:
            return True
    return False


def _driver_archs() -> list[str]:
    """The architectures (``sm_90``) of the CUDA devices the driver sees, without initializing JAX."""
    driver = _cuda()
    _check("cuInit", driver.cuInit(0))
    archs = []
    for ordinal in range(int(_check("cuDeviceGetCount", driver.cuDeviceGetCount()))):
        dev = _check("cuDeviceGet", driver.cuDeviceGet(ordinal))
        major, minor = (_check("cuDeviceGetAttribute", driver.cuDeviceGetAttribute(
            getattr(driver.CUdevice_attribute, f"CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_{part}"), dev))
            for part in ("MAJOR", "MINOR"))
        archs.append(f"sm_{major}{minor}")
    return list(dict.fromkeys(archs))


def _check_hidden(kernel) -> None:
    """Launcher-filled params a handler can fill: a dynamic tape (sized by the counting kernel).
    A deterministic kernel's contribution log needs a host-side reduction after the launch."""
    from ..enzyme.kernels import LOG_PARAM
    names = [p.name for p in kernel.signature.params]
    if LOG_PARAM in names:
        raise JaxIntegrationError(f"kernel '{kernel.name}' is a deterministic reverse kernel (it logs its "
                                  "shared contributions and reduces the log on the host after the launch); "
                                  "JAX calls do not run it: use ado.vjp(k, wrt) without deterministic=True")
    hidden = {n for n in names if n.startswith(HIDDEN_PREFIX)}
    sized = {name for _, buffers, shadows in _levels(kernel) for pair in buffers for name in (*pair, *shadows)}
    if hidden - sized:
        raise JaxIntegrationError(f"kernel '{kernel.name}' has launcher-filled params {sorted(hidden - sized)} but "
                                  "no counting kernel to size them")


def _levels(kernel) -> list:
    """The kernel's dynamic tapes in sizing order: (counting kernel, [(tape, offsets)], shadows)."""
    from ..kernels.launch import tape_levels
    return tape_levels(kernel) if hasattr(kernel, "tape") else []


def _layout_levels(kernel) -> tuple:
    """``ffi_layout.layout_for``'s ``levels``: one dynamic tape per level."""
    return tuple((counter.signature, buffers[0][0], buffers[0][1], tuple(shadows))
                 for counter, buffers, shadows in _levels(kernel))


def _unresolved_symbols(program) -> list[str]:
    """External functions of a host program that nothing defines (MCJIT would jump to null)."""
    import llvmlite.binding as llvm
    text = getattr(program, "optimized_ir", "")
    names = re.findall(r'^declare [^@]*@"?([^"(]+)"?\(', text, flags=re.MULTILINE)
    return [n for n in names if not n.startswith("llvm.") and not llvm.address_of_symbol(n)]


def _cpu_target(kernel, name: str, variant: Variant) -> Target:
    compiled = kernel.compiled("host", proven=variant.proven, **_serial_option(variant))
    missing = _unresolved_symbols(compiled.program)
    if missing:
        raise CompilationError(f"kernel '{kernel.name}': the host code calls {missing}, which no library "
                               "defines (a code generation gap); refusing to run it")
    entry = compiled.program.address(compiled.entry_name)
    keep, count_entries = [compiled], []
    for counter, _, _ in _levels(kernel):
        counting = counter.compiled("host", proven=variant.proven)
        missing = _unresolved_symbols(counting.program)
        if missing:
            raise CompilationError(f"kernel '{counter.name}' (sizes the tape of '{kernel.name}'): the "
                                   f"host code calls {missing}, which no library defines; refusing to run it")
        count_entries.append(counting.program.address(counting.entry_name))
        keep.append(counting)
    count_entry = tuple(count_entries) if len(count_entries) > 1 else (count_entries or [0])[0]
    layout = ffi_layout.layout_for(kernel.signature, scalars_by_reference=False, written=variant.written,
                                 levels=_layout_levels(kernel))
    from .cpu_parallel import min_chunk_threads
    chunk = min_chunk_threads(kernel.module_text(variant.proven), kernel.body_name)
    text = handlers.cpu_handler_ir(layout, entry, count_entry, chunk, serial=variant.serial)
    handler = handlers.CompiledHandler(text, keep_alive=keep)
    return Target(name, kernel, "cpu", handler)


# ----------------------------------------------------------------------------- CUDA

def _cuda():
    try:
        from cuda.bindings import driver
    except ImportError:  # older cuda-python
        from cuda import cuda as driver  # type: ignore[no-redef]
    return driver


def _check(call: str, result):
    """Driver results go through the runtime's one checker (runtime/check.py), named by call."""
    return check(result, call)


def _gpu_devices(platform: str):
    import jax
    return sorted(jax.devices(platform), key=lambda d: d.local_hardware_id)


def _load_cuda(driver, compiled, arch: str, upgrades: list, table: str, ordinal: int, ctx, block: int):
    """``cuModuleLoadData`` of the kernel's cubin (ptxas; -O1's first where -O3's is not cached), or
    of its PTX where there is none. A pending -O3 upgrade goes to ``upgrades`` with where its
    function goes: entry ``ordinal`` of the handler's function table ``table`` (``_start_upgrades``)."""
    module, upgrade = compiled.load_cuda_tiered(arch, lambda image: _module_load(driver, image))
    if upgrade is not None:
        upgrades.append((upgrade, compiled.entry_name, table, ordinal, ctx, block))
    return module


def _module_load(driver, image):
    from ..runtime.cuda import image_bytes
    return _check("cuModuleLoadData", driver.cuModuleLoadData(image_bytes(image)))


def _start_upgrades(driver, handler, upgrades: list) -> None:
    """Start each -O3 upgrade (codegen/gpu/tiered.py): on its thread, in the device's primary
    context, load the cubin, check the function takes the handler's block, keep the module alive
    for the process (a launch or a captured CUDA graph may run the -O1 one, which stays loaded
    too) and store the function in the handler's table, which every later call reads."""
    attribute = driver.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK
    for upgrade, entry, table, ordinal, ctx, block in upgrades:
        def replace(image, entry=entry, table=table, ordinal=ordinal, ctx=ctx, block=block):
            _check("cuCtxPushCurrent", driver.cuCtxPushCurrent(ctx))
            try:
                module = _module_load(driver, image)
                function = _check("cuModuleGetFunction", driver.cuModuleGetFunction(module, entry.encode()))
                limit = int(_check("cuFuncGetAttribute", driver.cuFuncGetAttribute(attribute, function)))
                if limit < block:
                    raise CompilationError(f"kernel '{entry}': the -O3 cubin takes at most {limit} threads per "
                                           f"block, the handler launches {block}")
                _UPGRADED_MODULES.append(module)
                handler.write_cell(table, ordinal, int(function))
            finally:
                _check("cuCtxPopCurrent", driver.cuCtxPopCurrent())
        upgrade.start(replace)


_UPGRADED_MODULES: list = []     # CUmodules loaded by upgrades: never unloaded


def _cuda_target(kernel, name: str, variant: Variant) -> Target:
    driver = _cuda()
    _check("cuInit", driver.cuInit(0))
    libcuda = ctypes.CDLL("libcuda.so.1")
    devices = _gpu_devices("cuda")
    n = max(d.local_hardware_id for d in devices) + 1
    functions, statuses, host_statuses, views, keep = [0] * n, [0] * n, [0] * n, [], []
    counters = [counter for counter, _, _ in _levels(kernel)]
    count_functions = [0] * (n * len(counters))
    scan_functions = [0] * (n * len(_scan_kernels())) if counters else []
    max_threads = None
    upgrades: list = []           # -O3 cubins still being assembled: swapped in once the handler exists
    from ..kernels.tape_scan import SCAN_KERNELS as scan_names
    for d in devices:
        ordinal = d.local_hardware_id
        dev = _check("cuDeviceGet", driver.cuDeviceGet(ordinal))
        major = _check("cuDeviceGetAttribute", driver.cuDeviceGetAttribute(
            driver.CUdevice_attribute.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev))
        minor = _check("cuDeviceGetAttribute", driver.cuDeviceGetAttribute(
            driver.CUdevice_attribute.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev))
        arch = f"sm_{major}{minor}"
        compiled = _gpu_compiled(kernel, "nvptx", arch, variant)
        counted_all = [counting.compiled("nvptx", arch=arch, scalars_by_reference=True, proven=variant.proven)
                       for counting in counters]
        scanned_all = [scan.compiled("nvptx", arch=arch) for scan in (_scan_kernels() if counters else ())]
        for built in [compiled, *counted_all, *scanned_all]:
            built.pending_cubin(arch)         # every ptxas of this device at once (codegen/gpu/cubin.py)
        ctx = _check("cuDevicePrimaryCtxRetain", driver.cuDevicePrimaryCtxRetain(dev))       # JAX's context on this device
        _check("cuCtxPushCurrent", driver.cuCtxPushCurrent(ctx))
        try:
            block = compiled.extra.get("block_threads", ffi_layout.BLOCK_SIZE)
            module = _load_cuda(driver, compiled, arch, upgrades, "functions", ordinal, ctx, block)
            function = _check("cuModuleGetFunction", driver.cuModuleGetFunction(module, compiled.entry_name.encode()))
            if compiled.grid_stride:       # the entry loops over the grid: launch one resident wave
                wave = _resident_threads(driver, function, dev, compiled.extra.get("block_threads", ffi_layout.BLOCK_SIZE))
                max_threads = wave if max_threads is None else min(max_threads, wave)
            for level, counted in enumerate(counted_all):
                count_module = _load_cuda(driver, counted, arch, upgrades, f"count_functions{level}", ordinal, ctx, block)
                count_functions[level * n + ordinal] = int(_check("cuModuleGetFunction", driver.cuModuleGetFunction(
                    count_module, counted.entry_name.encode())))
                keep += [count_module, counted]
            for k, scanned in enumerate(scanned_all):
                scan_module = _load_cuda(driver, scanned, arch, upgrades, f"scan_{scan_names[k]}", ordinal, ctx,
                                         ffi_layout.BLOCK_SIZE)
                scan_functions[k * n + ordinal] = int(_check("cuModuleGetFunction", driver.cuModuleGetFunction(
                    scan_module, scanned.entry_name.encode())))
                keep += [scan_module, scanned]
            flags = driver.CU_MEMHOSTALLOC_DEVICEMAP | driver.CU_MEMHOSTALLOC_PORTABLE
            host = int(_check("cuMemHostAlloc", driver.cuMemHostAlloc(STATUS_BYTES, flags)))
            device_ptr = int(_check("cuMemHostGetDevicePointer", driver.cuMemHostGetDevicePointer(host, 0)))
        finally:
            _check("cuCtxPopCurrent", driver.cuCtxPopCurrent())
        view = np.ctypeslib.as_array((ctypes.c_int64 * abi_status.WORDS).from_address(host))
        view[:] = 0
        functions[ordinal], statuses[ordinal], host_statuses[ordinal] = int(function), device_ptr, host
        views.append((ordinal, ctx, view))
        keep += [module, compiled]
    tables = ffi_layout.GpuTables(tuple(functions), tuple(statuses), tuple(host_statuses),
                                launch=ctypes.cast(libcuda.cuLaunchKernel, ctypes.c_void_p).value,
                                synchronize=ctypes.cast(libcuda.cuStreamSynchronize, ctypes.c_void_p).value,
                                memset=ctypes.cast(libcuda.cuMemsetD8Async, ctypes.c_void_p).value,
                                **_tape_tables(libcuda, "cu", count_functions, scan_functions))
    layout = ffi_layout.layout_for(kernel.signature, scalars_by_reference=True, written=variant.written,
                                 levels=_layout_levels(kernel))
    text = handlers.gpu_handler_ir(layout, tables, sync=sync_gpu_errors, elements_per_thread=compiled.elements_per_thread,
                                   block_size=compiled.extra.get("block_threads", ffi_layout.BLOCK_SIZE),
                                   max_threads=max_threads or 0 if layout.tape is None else 0)
    target = Target(name, kernel, "cuda", handlers.CompiledHandler(text, keep_alive=keep))
    target.host_statuses = views
    target.upgrades = [u[0] for u in upgrades]
    _start_upgrades(driver, target.handler, upgrades)
    return target


def _resident_threads(driver, function, device, block: int) -> int:
    """Threads of ``function`` one GPU holds at once in blocks of ``block`` (0 where unknown)."""
    try:
        per_sm = _check("cuOccupancyMaxActiveBlocksPerMultiprocessor",
                        driver.cuOccupancyMaxActiveBlocksPerMultiprocessor(function, block, 0))
        sms = _check("cuDeviceGetAttribute", driver.cuDeviceGetAttribute(
            driver.CUdevice_attribute.CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, device))
        return int(per_sm) * int(block) * int(sms)
    except Exception:     # noqa: BLE001 - an old binding without the call: launch uncapped (still correct)
        return 0


def _scan_kernels() -> tuple:
    """tape_scan.py's kernels, in ``SCAN_KERNELS`` order: a dynamic tape's counts are scanned on the device."""
    from ..kernels import tape_scan
    from ..kernels.kernel import scan_kernels
    return tuple(scan_kernels()[name] for name in tape_scan.SCAN_KERNELS)


def _tape_tables(library, prefix: str, count_functions: list, scan_functions: list) -> dict:
    """The GpuTables fields a dynamic-tape handler needs (none without a counting kernel)."""
    if not count_functions:
        return {}
    # cuda.h maps cuMemcpy*Async to the _v2 entry points (64-bit sizes and device pointers);
    # the unversioned libcuda symbols are the legacy 32-bit ones.
    suffix = "_v2" if prefix == "cu" else ""
    address = lambda name: ctypes.cast(getattr(library, prefix + name + suffix), ctypes.c_void_p).value
    return {"count_functions": tuple(count_functions), "scan_functions": tuple(scan_functions),
            "copy_dtod": address("MemcpyDtoDAsync"), "copy_dtoh": address("MemcpyDtoHAsync"),
            "copy_htod": address("MemcpyHtoDAsync"), "driver": "cuda" if prefix == "cu" else "hip"}


# ----------------------------------------------------------------------------- ROCm

def rocm_handler_ir(kernel, tables: ffi_layout.GpuTables | None = None, *, sync: bool = False,
                    written: frozenset = frozenset(), elements_per_thread: int = 1,
                    block_size: int = ffi_layout.BLOCK_SIZE) -> str:
    """The ROCm handler text (hipModuleLaunchKernel has cuLaunchKernel's argument list).

    Without ``tables`` the addresses are placeholders: used to compile-check the handler on
    machines without an AMD GPU.
    """
    _check_hidden(kernel)
    layout = ffi_layout.layout_for(kernel.signature, scalars_by_reference=True, written=written,
                                 levels=_layout_levels(kernel))
    counts = (0,) * len(layout.tapes)
    tables = tables or ffi_layout.GpuTables((0,), (0,), (0,), launch=0, synchronize=0, count_functions=counts,
                                          driver="hip")
    return handlers.gpu_handler_ir(layout, tables, sync=sync, elements_per_thread=elements_per_thread,
                                   block_size=block_size)


def _rocm_target(kernel, name: str, variant: Variant) -> Target:
    from hip import hip  # hip-python
    libhip = ctypes.CDLL("libamdhip64.so")

    devices = _gpu_devices("rocm")
    n = max(d.local_hardware_id for d in devices) + 1
    functions, statuses, host_statuses, views, keep = [0] * n, [0] * n, [0] * n, [], []
    counters = [counter for counter, _, _ in _levels(kernel)]
    count_functions = [0] * (n * len(counters))
    scan_functions = [0] * (n * len(_scan_kernels())) if counters else []
    for d in devices:
        ordinal = d.local_hardware_id
        check(hip.hipSetDevice(ordinal))
        props = check(hip.hipGetDeviceProperties(ordinal))
        arch = props.gcnArchName.decode().split(":")[0]
        compiled = _gpu_compiled(kernel, "amdgpu", arch, variant)
        module = check(hip.hipModuleLoadData(compiled.hsaco))
        function = check(hip.hipModuleGetFunction(module, compiled.entry_name.encode()))
        for level, counting in enumerate(counters):
            counted = counting.compiled("amdgpu", arch=arch, scalars_by_reference=True, proven=variant.proven)
            count_module = check(hip.hipModuleLoadData(counted.hsaco))
            count_functions[level * n + ordinal] = int(check(hip.hipModuleGetFunction(
                count_module, counted.entry_name.encode())))
            keep += [count_module, counted]
        for k, scan in enumerate(_scan_kernels() if counters else ()):
            scanned = scan.compiled("amdgpu", arch=arch)
            scan_module = check(hip.hipModuleLoadData(scanned.hsaco))
            scan_functions[k * n + ordinal] = int(check(hip.hipModuleGetFunction(
                scan_module, scanned.entry_name.encode())))
            keep += [scan_module, scanned]
        host = int(check(hip.hipHostMalloc(STATUS_BYTES, hip.hipHostMallocMapped | hip.hipHostMallocPortable)))
        device_ptr = int(check(hip.hipHostGetDevicePointer(host, 0)))
        view = np.ctypeslib.as_array((ctypes.c_int64 * abi_status.WORDS).from_address(host))
        view[:] = 0
        functions[ordinal], statuses[ordinal], host_statuses[ordinal] = int(function), device_ptr, host
        views.append((ordinal, None, view))
        keep += [module, compiled]
    tables = ffi_layout.GpuTables(tuple(functions), tuple(statuses), tuple(host_statuses),
                                launch=ctypes.cast(libhip.hipModuleLaunchKernel, ctypes.c_void_p).value,
                                synchronize=ctypes.cast(libhip.hipStreamSynchronize, ctypes.c_void_p).value,
                                memset=ctypes.cast(libhip.hipMemsetD8Async, ctypes.c_void_p).value,
                                **_tape_tables(libhip, "hip", count_functions, scan_functions))
    text = rocm_handler_ir(kernel, tables, sync=sync_gpu_errors, written=variant.written,
                           elements_per_thread=compiled.elements_per_thread,
                           block_size=compiled.extra.get("block_threads", ffi_layout.BLOCK_SIZE))
    target = Target(name, kernel, "rocm", handlers.CompiledHandler(text, keep_alive=keep))
    target.host_statuses = views
    return target


# ----------------------------------------------------------------------------- errors

def check_errors() -> None:
    """Wait for the GPUs, then raise the first device-side kernel failure recorded since the last check.

    GPU handlers never wait for their kernels (so XLA can put them in CUDA graphs); a
    kernel that hits an out-of-bounds index writes a host-mapped status record instead.
    Call this after ``block_until_ready()`` (it synchronizes the devices itself too).
    Each record is cleared when read. CPU calls need no check: they raise directly.
    """
    with _LOCK:
        targets = [t for t in _TARGETS.values() if t.host_statuses]
    synced = set()
    for target in targets:
        for ordinal, ctx, view in target.host_statuses:
            if (target.platform, ordinal) not in synced:
                _synchronize(target.platform, ordinal, ctx)
                synced.add((target.platform, ordinal))
            record = view.copy()
            if record[0] != abi_status.OK:
                view[:] = 0
                from ..kernels.launch import shared_names
                abi_status.raise_for_status(record, target.kernel.signature, shared_names=shared_names(target.kernel))


def _synchronize(platform: str, ordinal: int, ctx) -> None:
    if platform == "cuda":
        driver = _cuda()
        _check("cuCtxPushCurrent", driver.cuCtxPushCurrent(ctx))
        try:
            _check("cuCtxSynchronize", driver.cuCtxSynchronize())
        finally:
            _check("cuCtxPopCurrent", driver.cuCtxPopCurrent())
    elif platform == "rocm":
        from hip import hip
        hip.hipSetDevice(ordinal)
        hip.hipDeviceSynchronize()
