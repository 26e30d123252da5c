"""Launch plans: everything a launch's argument *signature* decides, worked out once per kernel.

A launch's signature is its grid and device, how the arguments were passed (how many by position,
which keywords in which order) and per argument: for a numpy array its dtype, shape and the flags
the checks read (C-contiguous, aligned, writeable); for a GPU array its type, device, dtype, shape
and layout; for a scalar its Python type. ``call_key`` reads that in a few attribute loads per
argument. The first launch with a signature binds and checks the arguments in full
(arguments.py), checks the shadows against their primals (shadows.py), the grid, and the races
between blocks, and builds a ``LaunchPlan``: the binding order, the proven bounds facts, the
compiled variant and its loaded function, GPU geometry (elements per thread, block, threads, row
launch), which Out arrays to zero, which seeds to copy, the slot layout (shapes and grid baked in)
and the pairs of arrays whose overlap must be refused. A later launch with the same signature
(``plan.bind``) only reorders the arguments, reads their data addresses, checks the overlap of
those pairs and packs the slots (launch_run.py runs it). Scalars are packed as given; a value the
slot cannot hold (an int out of its type's range, a float that overflows f32) falls back to the
full path, which converts or refuses it exactly as before.

What a signature does not fix is checked per launch: the overlap of arrays (their addresses), and
whether GPU arrays passed twice share memory (then the variant without ``noalias`` runs).
Signatures are cached only where every argument is an exact numpy array, a Python or numpy scalar,
or a GPU array; anything else (lists, 0-d arrays for scalars, host DLPack objects) takes the full
path on every launch, as do launches given hidden buffers (a counting kernel of a second-order tape).
"""
from __future__ import annotations

import os
import threading

import numpy as np

from ..errors import ArgumentError, GridError
from .arguments import Resident, bind_arguments, fast_reader, normalize_grid
from .environment import environment_key, environment_value
from .overlap import written

KEY_FLAGS = 0x1 | 0x100 | 0x400      # numpy's C_CONTIGUOUS | ALIGNED | WRITEABLE (ndarray.flags.num)
MAX_PLANS = 64                       # per kernel; the oldest goes when a new signature would exceed it
_SCALAR_TYPES = frozenset({bool, int, float, np.bool_, np.float16, np.float32, np.float64,
                           np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64})



class Uncacheable(Exception):
    """This launch's arguments are not keyed by type and shape alone: take the full path."""


def call_key(args: tuple, kwargs: dict, grid, device):
    """``(key, residents)`` of a launch: its signature (hashable), and the GPU arrays read on the
    way ({argument position: Resident}, positions counting ``args`` then ``kwargs`` values).
    Raises Uncacheable for arguments outside what plans cover."""
    if type(grid) is not int and not (type(grid) is tuple and all(type(g) is int for g in grid)):
        grid = _grid_key(grid)
    key = [grid, device, len(args), *kwargs]
    residents = None
    for position, value in enumerate((*args, *kwargs.values()) if kwargs else args):
        kind = type(value)
        if kind is np.ndarray:
            key.append((value.dtype, value.shape, value.flags.num & KEY_FLAGS))
        elif kind in _SCALAR_TYPES:
            key.append(kind)
        else:
            resident = gpu_array(value)
            if resident is None:
                raise Uncacheable
            key.append((Resident, kind, resident.device, resident.dtype, resident.shape))
            if residents is None:
                residents = {}
            residents[position] = resident
    return tuple(key), residents


def _grid_key(grid) -> tuple[int, ...]:
    """A grid of other integer types (numpy's) as a tuple of ints, or Uncacheable (the full path
    then says what is wrong with it)."""
    try:
        normalized = tuple(int(g) for g in ((grid,) if np.ndim(grid) == 0 else grid))
    except (TypeError, ValueError):
        raise Uncacheable from None
    if any(isinstance(g, (bool, np.bool_, float, np.floating)) or not isinstance(g, (int, np.integer))
           for g in ((grid,) if np.ndim(grid) == 0 else grid)):
        raise Uncacheable
    return normalized


def gpu_array(value) -> Resident | None:
    """``value`` as a Resident when it is a C-contiguous array in GPU memory (a DeviceArray, a CuPy
    array through its attributes, others through DLPack), else None (the full path then checks or
    refuses it)."""
    if isinstance(value, np.ndarray):    # a subclass (np.memmap, a masked array): host memory, never exported
        return None
    reader = fast_reader(type(value))
    if reader is not None:
        resident = reader(value)
        if resident is not None:
            return resident
    from ..runtime.dlpack import DeviceArray, read_gpu_capsule
    if isinstance(value, DeviceArray):
        if value.device.kind == "cpu":
            return None
        return Resident(value.device.spec, value.ptr, value.shape, value.dtype, value, True)
    dlpack = getattr(value, "__dlpack__", None)
    if dlpack is None or not hasattr(value, "__dlpack_device__"):
        return None
    # the capsule's DLTensor says where the data is (no __dlpack_device__ call: one call less per array)
    try:
        capsule = dlpack(stream=None)
    except (BufferError, TypeError, ValueError, RuntimeError):   # a producer that cannot export it so:
        return None                                                # the full path checks or refuses it
    external = read_gpu_capsule(capsule, value)
    if external is None or not external.c_contiguous:
        return None
    return Resident(external.device, external.ptr, tuple(external.shape), np.dtype(external.dtype), external)


def plans_of(kernel) -> dict:
    """The kernel's plans by call key (made on first use)."""
    plans = kernel.__dict__.get("_launch_plans")
    if plans is None:
        with _PLANS_LOCK:
            plans = kernel.__dict__.setdefault("_launch_plans", {})
    return plans


_PLANS_LOCK = threading.Lock()


def remember(plans: dict, key, plan) -> None:
    while len(plans) >= MAX_PLANS:
        try:
            del plans[next(iter(plans))]
        except (StopIteration, KeyError, RuntimeError):      # another thread changed it meanwhile
            break
    plans[key] = plan


class CallShape:
    """How the launch that cached a plan was called: the facts its native entry checks per launch
    (native_entry.py). Keeps no argument values: per visible param, an array's (dtype, key flags)
    or a scalar's type."""

    def __init__(self, positional: int, keywords: tuple[str, ...], grid, device, raw: list):
        self.positional, self.keywords, self.grid, self.device = positional, keywords, grid, device
        self.kinds = [(v.dtype, v.flags.num & KEY_FLAGS) if type(v) is np.ndarray else type(v) for v in raw]


class LaunchPlan:
    """One argument signature's launch of one kernel: build with ``LaunchPlan(kernel, values, grid,
    device)`` from fully checked values (arguments.bind_arguments); run with launch_run.run_plan."""

    def __init__(self, kernel, values: list, grid: tuple[int, ...], device, hidden: bool):
        from ..analysis.races.block_stores import check_launch
        from .shadows import check_shadow_shapes
        signature = kernel.signature
        self.kernel, self.signature, self.device, self.grid = kernel, signature, device, grid
        self.visible = signature.visible_params
        # param index of each visible value (a second derivative's base tape sits among the params)
        self.param_index = [k for k, p in enumerate(signature.params) if not p.name.startswith("adoffload_")]
        self.hidden = len(self.param_index) != len(signature.params)
        self.given_hidden = hidden
        self.shapes = shapes = {self.param_index[n]: tuple(v.shape) for n, v in enumerate(values)
                                if isinstance(v, (np.ndarray, Resident))}
        check_shadow_shapes(kernel, shapes)
        check_block_grid(kernel, grid)
        check_launch(kernel, grid)
        total = 1
        for g in grid:
            total *= g
        self.total = total
        self.on_host = device.kind == "cpu"
        self.arrays = [n for n, v in enumerate(values) if isinstance(v, (np.ndarray, Resident))]
        self.resident = frozenset(n for n in self.arrays if isinstance(values[n], Resident))
        self.nbytes = {n: values[n].nbytes for n in self.arrays}
        seeds = getattr(kernel, "seed_params", frozenset())
        # the launcher copies numpy seeds: the kernel never reads or clears the caller's array
        self.copied = frozenset(self.visible[n].name for n in self.arrays
                                if self.visible[n].name in seeds and n not in self.resident)
        self.seeds = [n for n in self.arrays if self.visible[n].name in self.copied]
        self.overlap_pairs = self._overlap_pairs()
        self.resident_pairs = [(a, b) for k, a in enumerate(self.arrays) for b in self.arrays[k + 1:]
                               if a in self.resident and b in self.resident and values[a].device == values[b].device
                               and self.nbytes[a] and self.nbytes[b]]
        if self.on_host and self.resident:
            n = min(self.resident)
            raise ArgumentError(f"kernel '{signature.name}', parameter '{self.visible[n].name}': the array lives on "
                                f"{values[n].device}; launch with device='{values[n].device}' or pass a host array")
        for n in self.resident:
            if values[n].device != device.spec:
                raise ArgumentError(f"kernel '{signature.name}', parameter '{self.visible[n].name}': the array "
                                    f"lives on {values[n].device}, the launch runs on {device.spec}")
        self.proven = facts_proven_by(kernel, shapes, grid)
        self.zeroed = [] if self.hidden else sorted(arrays_to_zero(kernel, values, grid))
        self.zeroed_bytes = [(n, self.nbytes[n]) for n in self.zeroed]
        self.needs_log = kernel.tape is not None and _log_param() in kernel.tape.buffers
        # every array already on the GPU, nothing sized or reduced per launch: a launch need not wait
        self.in_place = not self.on_host and not self.hidden and not self.needs_log and \
            len(self.resident) == len(self.arrays)
        self.variants: dict = {}
        self._lock = threading.Lock()

    def _overlap_pairs(self) -> list[tuple[int, int]]:
        """Visible array positions whose overlap is refused: non-empty, in one memory (both on the host,
        or both on the GPU), at least one written by the launch."""
        pairs = []
        for k, a in enumerate(self.arrays):
            for b in self.arrays[k + 1:]:
                same_memory = (a in self.resident) == (b in self.resident)
                if same_memory and self.nbytes[a] and self.nbytes[b] and \
                        (written(self.visible[a], self.copied) or written(self.visible[b], self.copied)):
                    pairs.append((a, b))
        return pairs

    def shape_of(self, param_index: int) -> tuple[int, ...]:
        return self.shapes[param_index]

    def zeroed_of(self, values: list) -> set[int]:
        """Out arrays to zero among all ``values`` (hidden buffers included, by param index)."""
        return arrays_to_zero(self.kernel, values, self.grid)

    # ---- per launch --------------------------------------------------------------------------
    def bind(self, args: tuple, kwargs: dict, residents: dict | None) -> list:
        """The arguments of a launch whose call key matched, in visible-parameter order (GPU arrays
        as the Residents read for the key)."""
        values = [*args, *kwargs.values()] if kwargs else list(args)
        if residents:
            for position, resident in residents.items():
                values[position] = resident
        order = self.order
        return values if order is None else [values[k] for k in order]

    def variant(self, noalias: bool):
        """The Variant (launch_run.py) for this launch, made once per ``noalias`` and, on a GPU, per
        setting of the environment variables that choose GPU code (A/B runs change them in-process)."""
        if self.on_host:
            key = noalias
        else:
            key = (noalias, *(environment_value(k) for k in (_GPU_CODE_KEYS or _gpu_code_keys())))
        hit = self.variants.get(key)
        if hit is None:
            with self._lock:
                hit = self.variants.get(key)
                if hit is None:
                    hit = self.variants[key] = self._make_variant(noalias)
        return hit

    def _make_variant(self, noalias: bool):
        from .launch_run import Variant
        from ..codegen.gpu.vectorize import choose_compiled, elements_per_thread, streamed_params
        kernel, device = self.kernel, self.device
        target = {"cpu": "host", "cuda": "nvptx", "hip": "amdgpu"}[device.kind]
        options = {"noalias": True} if noalias else {}
        if getattr(device, "warp_size", 32) != 32 and getattr(kernel, "block", None) is not None:
            options["warp_size"] = device.warp_size        # 'cpu:wave64': AMD's 64-lane warps on the host
        # On a GPU, k logical threads per GPU thread where that gives 128-bit accesses (codegen/gpu/vectorize.py)
        k = 1 if self.on_host else elements_per_thread(self.signature, self.total, streamed_params(kernel))
        if self.on_host and getattr(kernel, "block", None) is None and self._one_thread():
            options["serial"] = True        # plain read-modify-writes (codegen/host/serial.py)
        compiled = choose_compiled(kernel, target, k, arch=getattr(device, "arch", None), proven=self.proven,
                                   **options)
        return Variant(self, compiled)

    def _one_thread(self) -> bool:
        """The launch runs on one OS thread and the body has update atomics to make plain."""
        from ..codegen.host.serial import has_update_atomics
        one_thread = getattr(self.device, "one_thread", None)
        return one_thread is not None and one_thread(self.total) and \
            has_update_atomics(self.kernel.module_text(self.proven))

    def cache_as(self, plans: dict, key, args: tuple, kwargs: dict, residents: dict | None, grid, device) -> None:
        """Keep this plan for launches with call key ``key`` where the raw arguments (passed as
        ``args``, ``kwargs``) are what a hit takes as they are: exact numpy arrays or GPU arrays for
        arrays, Python or numpy scalars for scalars (a 0-d array for a scalar is not)."""
        if self.given_hidden:
            return
        names = [p.name for p in self.visible]
        given = list(range(len(args))) + [names.index(name) for name in kwargs]
        order = [given.index(k) for k in range(len(names))]
        self.order = None if order == list(range(len(names))) else order
        raw = self.bind(args, kwargs, residents)
        self.key = key
        if all(type(v) is np.ndarray or type(v) is Resident if p.is_array else type(v) in _SCALAR_TYPES
               for p, v in zip(self.visible, raw)):
            if not residents:
                self.call_shape = CallShape(len(args), tuple(kwargs), grid, device, raw)
            remember(plans, key, self)
            self._quick_checks(args, kwargs, grid, device, residents)
            self.kernel._last_plan = self

    order = None
    key = None               # its call key, once cached (a native entry of a re-made plan replaces its predecessor's)
    call_shape = None        # how the launch that cached it was called (CallShape), for a native entry
    native = None            # its native entry (native_entry.py), once made; native_tried: whether asked for
    native_tried = False
    native_why_not = None
    overlap_free = None      # the addresses of the last launch whose overlap check passed
    quick_sources = False    # matches() returns the slot sources (launch_run.run_in_place), not values

    def _quick_checks(self, args: tuple, kwargs: dict, grid, device, residents) -> None:
        """The kernel's check of launches with exactly this signature (signature_match.py); launches
        with GPU arrays have one where all are DeviceArrays or CuPy arrays and the device has a status
        ring (others read them per launch through the call key); non-int grids have none."""
        if type(grid) is not int:
            return
        from .signature_match import in_place_matcher, matcher
        names, raw = [p.name for p in self.visible], (*args, *kwargs.values())
        if not residents:
            self.matches = matcher(names, raw, len(args), tuple(kwargs), grid, device)
        elif self.in_place and getattr(self.device, "status_ring", None) and self.device.status_ring() is not None:
            quick = in_place_matcher(names, raw, len(args), tuple(kwargs), grid, device, _SCALAR_TYPES)
            if quick is not None:
                self.matches, self.quick_sources = quick, True

    @staticmethod
    def matches(args: tuple, kwargs: dict, grid, device) -> list | None:
        """The visible values of a launch with exactly this plan's signature, else None."""
        return None


def gpu_code_variables() -> tuple[str, ...]:
    """The environment variables read while choosing or compiling GPU code: elements per thread
    (codegen/gpu/vectorize.py), lane combining and peer adds (codegen/__init__.py)."""
    global _GPU_CODE_VARIABLES
    if _GPU_CODE_VARIABLES is None:
        from ..codegen import LANE_COMBINING_ENV, PEER_ADDS_ENV
        from ..codegen.gpu.vectorize import ENV_VAR
        _GPU_CODE_VARIABLES = (ENV_VAR, LANE_COMBINING_ENV, PEER_ADDS_ENV)
    return _GPU_CODE_VARIABLES


_GPU_CODE_VARIABLES = None
_GPU_CODE_KEYS = None


def _gpu_code_keys():
    global _GPU_CODE_KEYS
    _GPU_CODE_KEYS = tuple(environment_key(name) for name in gpu_code_variables())
    return _GPU_CODE_KEYS




def check_block_grid(kernel, grid: tuple[int, ...]) -> None:
    """A block kernel's grid must be a whole number of blocks on every axis (frontend/blocks.py)."""
    block = getattr(kernel, "block", None)
    if block is None:
        return
    bad = [a for a, (g, e) in enumerate(zip(grid, block)) if g % e]
    if bad:
        raise GridError(f"kernel '{kernel.name}' runs in blocks of {tuple(block)} threads; grid {tuple(grid)} is not "
                        f"a multiple of it on axis {', '.join(map(str, bad))} (pad the arrays, or round the grid up "
                        f"and guard the extra threads in the kernel)")


def proven_facts(kernel, values: list, grid: tuple[int, ...]) -> frozenset:
    """The candidate bounds facts that this launch's grid and shapes make true (``values``: all, by param index)."""
    return facts_proven_by(kernel, {k: tuple(v.shape) for k, v in enumerate(values)
                                    if isinstance(v, (np.ndarray, Resident))}, grid)


def facts_proven_by(kernel, shapes: dict[int, tuple[int, ...]], grid: tuple[int, ...]) -> frozenset:
    """The candidate bounds facts ``(param, dim, axis)`` (a check ``index < shape[dim]`` on an
    index that is the thread id of ``axis``) that ``grid`` and the array ``shapes`` (by param
    index) make true: the launcher and the JAX lowering compile those checks away."""
    return frozenset((param, dim, axis) for param, dim, axis in kernel.candidate_facts
                     if param in shapes and axis < len(grid) and dim < len(shapes[param])
                     and grid[axis] <= shapes[param][dim])


def arrays_to_zero(kernel, values: list, grid: tuple[int, ...]) -> set[int]:
    """Out arrays start at zero on every device and in JAX (kernels may accumulate into them),
    except those this grid makes the kernel write in full (frontend/coverage.py). ``values``: one
    per param of the kernel, in order."""
    from ..frontend.coverage import written_in_full
    return {k for k, (p, v) in enumerate(zip(kernel.signature.params, values))
            if p.is_array and p.type.intent == "out"
            and not written_in_full(kernel.full_writes, k, tuple(v.shape), grid)}


def _log_param() -> str:
    from ..enzyme.kernels import LOG_PARAM
    return LOG_PARAM


def full_bind(kernel, args: tuple, kwargs: dict, grid):
    """``(values, grid)`` checked in full, the first launch of a signature (and every uncached one)."""
    copied = getattr(kernel, "seed_params", frozenset())
    values = bind_arguments(kernel.signature, args, kwargs, copied)
    return values, normalize_grid(kernel.signature, grid)
