"""``kernel_call_p``: one JAX primitive for every kernel variant (primal, derivative, batched).

Operands are the kernel's In, InOut and scalar params in parameter order (scalars as 0-d
arrays); results are its Out and InOut arrays in parameter order. InOut results alias
their operands. The static ``spec`` (a hashable ``CallSpec``) says which kernel, the grid,
the Out shapes and, for the tangent calls the JVP rule makes, which kernel this call is
the linearization of (so the transpose rule can bind that kernel's adjoint).
"""
from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

import jax
from jax.extend.core import Primitive
from jax.interpreters import mlir

from ..errors import JaxIntegrationError
from . import targets


@dataclass(frozen=True)
class CallSpec:
    """Static parameters of one kernel call (hashable: kernels compare by identity)."""
    kernel: object                                  # adoffload.kernel.Kernel
    grid: tuple[int, ...]
    out_shapes: tuple[tuple[int, ...], ...]         # one per Out param, in order
    tangent_of: tuple | None = None                 # (base kernel, wrt names): this call is jvp(base, wrt)

    def __post_init__(self):
        from ..analysis.races.block_stores import check_launch
        check_launch(self.kernel, self.grid)       # a derivative of stores that race between blocks

    @property
    def params(self):
        return self.kernel.signature.params

    @functools.cached_property
    def operand_params(self) -> tuple[int, ...]:
        """Indices of the params that are operands (everything but Out arrays)."""
        return tuple(k for k, p in enumerate(self.params) if not (p.is_array and p.type.intent == "out"))

    @functools.cached_property
    def result_params(self) -> tuple[int, ...]:
        """Indices of the params that are results (Out and InOut arrays)."""
        return tuple(k for k, p in enumerate(self.params) if p.is_array and p.type.writes)

    @functools.cached_property
    def out_params(self) -> tuple[int, ...]:
        """Indices of the Out array params (their shapes are ``out_shapes``, in order)."""
        return tuple(k for k, p in enumerate(self.params) if p.is_array and p.type.intent == "out")

    def operand_index(self, name: str) -> int | None:
        k = self.kernel.signature.index_of(name)
        return self.operand_params.index(k) if k in self.operand_params else None

    def result_index(self, name: str) -> int | None:
        k = self.kernel.signature.index_of(name)
        return self.result_params.index(k) if k in self.result_params else None

    def result_shapes(self, operand_shapes) -> list[tuple[int, ...]]:
        by_param = dict(zip(self.operand_params, operand_shapes))
        outs = iter(self.out_shapes)
        return [tuple(by_param[k]) if self.params[k].type.intent == "inout" else tuple(next(outs))
                for k in self.result_params]

    def aliases(self) -> dict[int, int]:
        """operand index -> result index for InOut params."""
        return {self.operand_params.index(k): r for r, k in enumerate(self.result_params)
                if self.params[k].type.intent == "inout"}

    def __repr__(self) -> str:  # shown in jaxprs
        extra = f", tangent_of={self.tangent_of[0].name}{list(self.tangent_of[1])}" if self.tangent_of else ""
        return f"{self.kernel.name}(grid={self.grid}{extra})"


kernel_call_p = Primitive("adoffload_kernel_call")
kernel_call_p.multiple_results = True


def bind(operands, spec: CallSpec) -> list:
    return kernel_call_p.bind(*_vary_alike(operands), spec=spec)


def _vary_alike(operands) -> list:
    """Inside shard_map, every operand cast to vary over the union of the operands' manual axes.

    A result depends on every operand, so it varies wherever any of them does; the abstract eval
    types results like one operand. With x varying over mesh axis 'a' and y over 'b', results were
    typed as varying over 'a' only, and ``out_specs=P('a')`` then returned one 'b' shard's values
    where plain JAX refuses. The cast (``jax.lax.pcast(..., to='varying')``) is the type system's
    identity; its transpose sums the cotangent over the axes it added, as an operand the devices
    share needs."""
    operands = list(operands)
    axes = [_varying_axes(jax.typeof(o)) for o in operands]
    union = frozenset().union(*axes)
    if not union:
        return operands
    return [o if a == union else _pvary(o, tuple(sorted(union - a))) for o, a in zip(operands, axes)]


def _pvary(value, axes: tuple):
    pcast = getattr(jax.lax, "pcast", None)
    if pcast is not None:
        return pcast(value, axes, to="varying")
    return jax.lax.pvary(value, axes)       # JAX versions before pcast


@kernel_call_p.def_abstract_eval
def _abstract_eval(*avals, spec: CallSpec):
    shapes = spec.result_shapes([a.shape for a in avals])
    template = max(avals, key=lambda a: len(_varying_axes(a))) if avals else None
    result = []
    for k, shape in zip(spec.result_params, shapes):
        dtype = spec.params[k].dtype.dtype
        result.append(_like(template, shape, dtype))
    return result


def _varying_axes(aval) -> frozenset:
    """The manual mesh axes a value varies over inside shard_map (empty outside, or if unknown).

    Results vary over every axis some operand varies over; the most-varying operand's aval is
    the template for the results' typing. JAX spells this ``aval.vma`` or ``aval.mat.varying``
    depending on the version, and has no public accessor for it.
    """
    vma = getattr(aval, "vma", None)
    if vma is None:
        vma = getattr(getattr(aval, "mat", None), "varying", None)
    return frozenset(vma or ())


def _like(template, shape, dtype):
    """A ShapedArray of ``shape``/``dtype`` (inheriting the operands' manual-axis typing under shard_map)."""
    if template is None:
        return jax.core.ShapedArray(shape, dtype)
    try:
        mesh = template.sharding.mesh
        sharding = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec(*[None] * len(shape)))
        return template.update(shape=tuple(shape), dtype=np.dtype(dtype), weak_type=False, sharding=sharding)
    except (AttributeError, TypeError):
        return jax.core.ShapedArray(shape, dtype)


@functools.lru_cache(maxsize=None)
def _jitted(spec: CallSpec):
    return jax.jit(lambda *operands: kernel_call_p.bind(*operands, spec=spec))


@kernel_call_p.def_impl
def _impl(*operands, spec: CallSpec):
    # the call runs only as a compiled custom call; under jax.disable_jit() the jit above would run
    # its body eagerly, binding the primitive here again (a RecursionError), so jit stays on for it
    with jax.disable_jit(False):
        return _jitted(spec)(*operands)


def call_variant(spec: CallSpec, operand_shapes, platform: str) -> targets.Variant:
    """What a call of ``spec`` with operands of ``operand_shapes`` (in operand order) fixes about its
    target on ``platform`` (the lowering's, and ``compile_ahead``'s, so both build the same variant)."""
    from ..codegen.gpu.vectorize import elements_per_thread
    from ..kernels.launch import facts_proven_by
    shapes = dict(zip(spec.operand_params, (tuple(shape) for shape in operand_shapes)))
    shapes.update(zip(spec.out_params, spec.out_shapes))
    k = 1 if platform == "cpu" else elements_per_thread(spec.kernel.signature, int(np.prod(spec.grid, dtype=np.int64)))
    proven = facts_proven_by(spec.kernel, shapes, spec.grid)
    private = targets.private_updates(spec.kernel, proven, spec.grid, shapes) if platform == "cpu" else ()
    serial = platform == "cpu" and not private and targets.serial_grid(spec.kernel, proven, spec.grid, shapes)
    return targets.Variant(_written_in_full(spec), proven, k, serial, private)


def _lowering(ctx, *operands, spec: CallSpec, platform: str):
    _refuse_export(ctx, spec)
    variant = call_variant(spec, [aval.shape for aval in ctx.avals_in], platform)
    name = targets.target_name(spec.kernel, platform, variant)
    rule = jax.ffi.ffi_lowering(name, operand_output_aliases=spec.aliases())
    return rule(ctx, *operands, grid=np.asarray(spec.grid, dtype=np.int64))


def _refuse_export(ctx, spec: CallSpec) -> None:
    """``jax.export`` serializes the module for another process, but a call's target is this
    process's: its name (``adoffload_<kernel>_<n>``, n counting targets in build order) and its
    handler's JIT-compiled code. Elsewhere the name is unregistered, or names another kernel or
    variant built n-th there. JAX's own refusal can be disabled per target, so refuse here too,
    naming the kernel. (The lowering context says it lowers for export; JAX has no public
    accessor for that, so where the attribute is missing JAX's check is the only one.)"""
    params = getattr(getattr(ctx, "module_context", None), "lowering_parameters", None)
    if getattr(params, "for_export", False) is True:
        kernel = spec.tangent_of[0] if spec.tangent_of else spec.kernel
        what = "" if kernel is spec.kernel else f" (its derivative kernel '{spec.kernel.name}')"
        raise JaxIntegrationError(
            f"kernel '{kernel.name}'{what}: jax.export of adoffload kernel calls is not supported: "
            "the call's XLA target is compiled and registered in this process only, so a serialized module "
            "could not run elsewhere (or would run whatever target got that name there); use "
            "jax.jit(f).lower(...).compile() in the process that runs it")


def _written_in_full(spec: CallSpec) -> frozenset:
    """The Out params this call's grid makes the kernel write in full (no zeroing needed)."""
    from ..frontend.coverage import written_in_full
    outs = [k for k, p in enumerate(spec.params) if p.is_array and p.type.intent == "out"]
    return frozenset(k for k, shape in zip(outs, spec.out_shapes)
                     if written_in_full(spec.kernel.full_writes, k, tuple(shape), spec.grid))


for _platform in targets.PLATFORMS:
    mlir.register_lowering(kernel_call_p, functools.partial(_lowering, platform=_platform), platform=_platform)
