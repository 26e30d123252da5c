"""CUDA kernels as adoffload kernels: typed parameters, CUDA-style launches, derivatives.

``mod.kernel("saxpy", a=ado.f32, x=ado.In[ado.f32], y=ado.InOut[ado.f32], n=ado.i32)`` names the
kernel's parameters (in its order) and gives them intents; pointer parameters are 1-D arrays
whose length is that of the array passed (a C-contiguous numpy array of any shape is passed
flattened). ``k(a, x, y, n, blocks=B, threads=T)`` runs ``B`` blocks of ``T`` threads (ints or
(x, y, z) tuples, as ``<<<B, T>>>``). The block shape is compiled into the body, so each
``threads`` gets its own block kernel (``specialize``), made once and cached.

``ado.jvp(k, wrt)`` / ``ado.vjp(k, wrt)`` give launchables of the same kind whose
specializations are the derivative kernels of ``k``'s (the ``__ado_derive__`` hook of
``kernel._derived``); their shadows are passed by keyword ``d_<name>`` as for any kernel.
"""
from __future__ import annotations

import numbers
import re
import threading

import numpy as np

from ... import ir
from ...errors import ArgumentError, GridError
from ...frontend.blocks import MAX_BLOCK_THREADS
from ...kernels.kernel import IRKernel, Kernel
from ...language.signature import KernelSignature, Param
from ...language.types import ArrayType, ScalarType
from ...language.types import i32 as ado_i32
from .structs import Struct
from .translate import (GRID_PARAMS, MAX_THREADS_PER_AXIS, check_parameters, host_neutral, is_dynamic, kernel_names,
    shared_variables, translate)


class CudaModule:
    """A compiled CUDA/HIP source: ``mod.kernel(name, **params)`` gives its kernels; ``mod.names()``
    their source names; ``mod.llvm`` is clang's IR, ``mod.text`` the host-neutral canonical IR."""

    def __init__(self, llvm_text: str, language: str, arch: str):
        self.llvm, self.language, self.arch = llvm_text, language, arch
        self.text = ir.canonicalize(ir.prepare_for_analysis(host_neutral(llvm_text)))
        self.ir = ir.import_module(self.text)
        self.symbols = kernel_names(self.ir)

    def names(self) -> list[str]:
        return sorted(self.symbols)

    def kernel(self, name: str, /, *, bounds_check: bool = True, **params) -> "CudaKernel":
        symbols = self.symbols.get(name) or [s for group in self.symbols.values() for s in group if s == name]
        if not symbols:
            raise ArgumentError(f"the {self.language} source has no __global__ function '{name}'; it has: "
                                f"{', '.join(self.names()) or 'none'}")
        if len(symbols) > 1:
            raise ArgumentError(f"'{name}' names {len(symbols)} kernels of the {self.language} source (overloads or "
                                f"template instances); pass one of their symbols: {', '.join(sorted(symbols))}")
        symbol = symbols[0]
        typed = []
        for pname, ptype in params.items():
            if isinstance(ptype, ArrayType) and ptype.ndim != 1:
                raise ArgumentError(f"kernel '{name}', parameter '{pname}': a raw pointer is a 1-D array "
                                    f"(ado.In[dtype]); got {ptype!r}")
            if not isinstance(ptype, (ScalarType, ArrayType, Struct)):
                raise ArgumentError(f"kernel '{name}', parameter '{pname}': expected an ado type (ado.f32, "
                                    f"ado.In[ado.f32], ado.struct(...), ...), got {ptype!r}")
            if pname in GRID_PARAMS:
                raise ArgumentError(f"kernel '{name}': the parameter name '{pname}' is reserved (gridDim)")
            typed.append(Param(pname, ptype))
        check_parameters(self.ir.functions[symbol], typed, name)
        names = [n for p in typed for n in ([n for n, _ in p.type.flat(p.name)] if isinstance(p.type, Struct)
                                            else [p.name])]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise ArgumentError(f"kernel '{name}': the struct fields' parameter names (<param>_<field>) collide "
                                f"with other parameters: {', '.join(twice)}; rename the parameter")
        return CudaKernel(self, symbol, name, tuple(typed), bounds_check)

    def __repr__(self) -> str:
        return f"<CudaModule {self.language} {self.arch}: {', '.join(self.names())}>"


class CudaLaunchable:
    """Something launched CUDA-style: one adoffload Kernel per block shape (``specialize``)."""

    name: str

    def specialize(self, threads: tuple[int, ...], shared_bytes: int = 0) -> Kernel:
        raise NotImplementedError(f"{type(self).__name__} must define specialize")

    def __call__(self, *args, blocks=None, threads=None, shared_bytes: int = 0, device="cpu", **kwargs):
        if blocks is None or threads is None or "grid" in kwargs:
            raise GridError(f"kernel '{self.name}' is launched CUDA-style: k(..., blocks=B, threads=T) for "
                            f"<<<B, T>>> (ints or (x, y, z) tuples), not grid=")
        blocks, threads = launch_shape(self.name, blocks, threads)
        k = self.specialize(threads, check_shared_bytes(self.name, shared_bytes))
        args, kwargs = self.struct_fields(args, kwargs)
        if any(name in kwargs for name in GRID_PARAMS):
            raise ArgumentError(f"kernel '{self.name}': gridDim_x/y/z are set from blocks=, not passed")
        grid_dims = dict(zip(GRID_PARAMS, (*blocks, 1, 1)))
        args, kwargs = _flattened(k.signature, args, kwargs)
        grid = tuple(b * t for b, t in zip(reversed(blocks), reversed(threads)))
        return k(*args, grid=grid, device=device, **kwargs, **grid_dims)

    def __ado_derive__(self, mode: str, wrt, **options) -> "CudaDerived":
        structs = {p.name: p.type for p in self.declared() if isinstance(p.type, Struct)}
        expanded = []
        for name in ([wrt] if isinstance(wrt, str) else wrt):
            expanded += [n for n, t in structs[name].flat(name) if t.is_float] if name in structs else [name]
        return CudaDerived(self, mode, tuple(expanded), options)

    def declared(self) -> tuple[Param, ...]:
        """The parameters as declared (struct parameters as one, of an ``ado.struct`` type)."""
        raise NotImplementedError(f"{type(self).__name__} must define declared")

    def struct_fields(self, args: tuple, kwargs: dict) -> tuple[tuple, dict]:
        """Struct parameters' values (dicts or sequences of fields, by position or keyword, and the
        shadows ``d_p``) as the scalar fields the kernel takes (``p_eps``, ``d_p_eps``, ...);
        positional arguments may also give a struct's fields one by one (from the first struct
        given so, all are flat)."""
        declared = self.declared()
        if not any(isinstance(p.type, Struct) for p in declared):
            return args, kwargs
        flat_args: list = []
        for k, value in enumerate(args):
            p = declared[k] if k < len(declared) else None
            if p is not None and isinstance(p.type, Struct) and not isinstance(value, (dict, tuple, list)):
                flat_args += args[k:]             # the fields one by one: the rest is flat already
                break
            flat_args += list(p.type.values(p.name, value, self.name).values()) if p and isinstance(p.type, Struct) \
                else [value]
        flat_kwargs = {}
        for name, value in kwargs.items():        # p=..., and a derivative's shadows d_p=...
            p = next((p for p in declared if name in (p.name, f"d_{p.name}") and isinstance(p.type, Struct)), None)
            flat_kwargs.update(p.type.values(name, value, self.name, floats_only=name != p.name) if p
                               else {name: value})
        return tuple(flat_args), flat_kwargs


class CudaKernel(CudaLaunchable):
    """A ``__global__`` function with typed parameters (see the module docstring)."""

    def __init__(self, module: CudaModule, symbol: str, name: str, params: tuple[Param, ...], bounds_check: bool):
        self.module, self.symbol, self.name, self.params = module, symbol, name, params
        self.bounds_check = bounds_check
        self.body_name = re.sub(r"\W", "_", name)
        self._lock = threading.Lock()
        self._kernels: dict[tuple, Kernel] = {}
        self.dynamic_shared = any(map(is_dynamic, shared_variables(module.ir.functions[symbol])))

    def declared(self) -> tuple[Param, ...]:
        return self.params

    def specialize(self, threads: tuple[int, ...], shared_bytes: int = 0) -> Kernel:
        """The block kernel for blocks of ``threads`` (and ``shared_bytes`` of extern __shared__ memory)."""
        key = (threads, shared_bytes if self.dynamic_shared else 0)
        with self._lock:
            hit = self._kernels.get(key)
            if hit is None:
                flat = tuple(Param(n, t) for p in self.params
                             for n, t in (p.type.flat(p.name) if isinstance(p.type, Struct) else [(p.name, p.type)]))
                params = flat + tuple(Param(g, ado_i32) for g in GRID_PARAMS)
                signature = KernelSignature(self.body_name, params, grid_rank=len(threads))
                body = translate(self.module.text, self.symbol, signature, threads, self.body_name,
                                 bounds_check=self.bounds_check, shared_bytes=key[1], declared=self.params)
                hit = CudaBlockKernel(signature, body.text, self.body_name, tuple(reversed(threads)), body.shared)
                hit.source_name = f"<{self.module.language} source>"
                self._kernels[key] = hit
            return hit

    def __repr__(self) -> str:
        params = ", ".join(f"{p.name}: {p.type!r}" for p in self.params)
        return f"<CudaKernel {self.name}({params})>"


class CudaDerived(CudaLaunchable):
    """``ado.jvp``/``ado.vjp`` of a CUDA launchable: per block shape, the derivative kernel."""

    def __init__(self, base: CudaLaunchable, mode: str, wrt: tuple[str, ...], options: dict):
        self.base, self.mode, self.wrt, self.options = base, mode, wrt, options
        self.name = f"{mode}({base.name})"

    def declared(self) -> tuple[Param, ...]:
        return self.base.declared()

    def specialize(self, threads: tuple[int, ...], shared_bytes: int = 0) -> Kernel:
        from ...kernels.kernel import _derived
        return _derived(self.base.specialize(threads, shared_bytes), self.mode, self.wrt, **self.options)


class CudaBlockKernel(IRKernel):
    """The block kernel of one CUDA kernel for one block shape (row-major, CUDA's x last)."""

    launched_cuda_style = True      # errors about the launch speak of blocks= and blockIdx (analysis/races/block_stores.py)
    source_name = "<cuda source>"   # faults name lines of it (kernels/launch_run.source_file)

    def __init__(self, signature: KernelSignature, text: str, body_name: str, block: tuple[int, ...], shared):
        super().__init__(signature, text, body_name)
        self.block, self.shared = block, tuple(shared)
        from ...analysis.races.kernel import check_block_kernel      # deferred: codegen imports this package
        check_block_kernel(self, [f"threadIdx.{'xyz'[len(block) - 1 - a]}" for a in range(len(block))],
                           style="cuda")


def launch_shape(name: str, blocks, threads) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """``blocks`` and ``threads`` as tuples of one rank (x first; the longer one's, trailing 1s kept)."""
    def as_tuple(value, what):
        value = (value,) if isinstance(value, numbers.Integral) and not isinstance(value, bool) else value
        if not (isinstance(value, tuple) and 1 <= len(value) <= 3
                and all(isinstance(v, numbers.Integral) and not isinstance(v, bool) and v > 0 for v in value)):
            raise GridError(f"kernel '{name}': {what} must be a positive int or a tuple of 1 to 3 positive ints "
                            f"(x, y, z), got {value!r}")
        return tuple(int(v) for v in value)
    blocks, threads = as_tuple(blocks, "blocks"), as_tuple(threads, "threads")
    rank = max(len(blocks), len(threads))
    blocks, threads = blocks + (1,) * (rank - len(blocks)), threads + (1,) * (rank - len(threads))
    total = int(np.prod(threads))
    if total > MAX_BLOCK_THREADS:
        raise GridError(f"kernel '{name}': threads={threads} is {total} threads per block, more than "
                        f"{MAX_BLOCK_THREADS}")
    if any(b * t >= MAX_THREADS_PER_AXIS for b, t in zip(blocks, threads)):
        raise GridError(f"kernel '{name}': blocks={blocks} of threads={threads} launch 2**31 threads or more on "
                        f"one axis; blockIdx.x * blockDim.x + threadIdx.x must fit a 32-bit int")
    return blocks, threads


def check_shared_bytes(name: str, shared_bytes) -> int:
    if not isinstance(shared_bytes, numbers.Integral) or isinstance(shared_bytes, bool) or shared_bytes < 0:
        raise GridError(f"kernel '{name}': shared_bytes must be a non-negative int, got {shared_bytes!r}")
    return int(shared_bytes)


def _flattened(signature: KernelSignature, args: tuple, kwargs: dict):
    """Multi-dimensional C-contiguous numpy arrays passed for 1-D (raw pointer) parameters, as 1-D views."""
    params = {p.name: p for p in signature.params}

    def flat(param, value):
        if (param is not None and param.is_array and param.type.ndim == 1 and isinstance(value, np.ndarray)
                and value.ndim > 1 and value.flags.c_contiguous):
            return value.reshape(-1)
        return value
    args = tuple(flat(p, v) for p, v in zip(signature.params, args)) + tuple(args[len(signature.params):])
    return args, {k: flat(params.get(k), v) for k, v in kwargs.items()}
