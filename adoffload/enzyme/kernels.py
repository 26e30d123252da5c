"""The kernel-level layer: kernel parameters -> LLVM activity, and a derived body with the body ABI.

``derive_kernel`` maps a ``KernelSignature`` to per-argument activity (tids, shapes and
status Const; ``wrt`` arrays and every float Out/InOut array Dup; ``wrt`` float scalars Dup in
forward mode, Active in reverse mode), differentiates the body with ``forward``/``reverse``,
and wraps the result in a new body ``define void @<body>.jvp(tids, primal params, shadow
params, status)``: each shadow param ``d_<name>`` flattened like any param (an array shadow is
followed by its own shape args). The wrapper only reorders arguments (and computes the lane
stride in vector mode); the derivative function is internal and always inlined.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..errors import ArgumentError
from ..ir.builder import Builder
from ..ir.core import (Argument, Constant, Function, FunctionType, Module, Type, Value, f32, f64, i1, i32, i64, ptr,
                       void)
from ..language.signature import HIDDEN_PREFIX, KernelSignature, Param
from ..language.types import ArrayType
from ..language.types import i64 as I64
from .activity import ACTIVE, CONST, DUP, Activity
from .soundness import analyze
from .blocks import shared_activity
from .forward import forward
from .lean import LeanPlan, drop_primal_stores, lean_derivative, write_only_params
from ..analysis.address_classes import ParallelInfo
from .soundness import check_forward_atomics
from .soundness import check_kernel_stores

_LLVM_TYPES: dict[str, Type] = {"float": f32, "double": f64, "i32": i32, "i64": i64, "i1": i1, "ptr": ptr}


@dataclass
class DerivedKernel:
    signature: KernelSignature
    module: Module
    body_name: str
    tape: "TapeKernel | None" = None


# A reverse kernel with a dynamic tape takes two hidden parameters that the launcher fills
# (enzyme/tape.py): the tape itself and each thread's byte offset into it, shaped like the grid.
# The counting kernel writes each thread's tape size into an array shaped like the grid.
TAPE_PARAM, OFFSETS_PARAM, COUNTS_PARAM = (f"{HIDDEN_PREFIX}tape", f"{HIDDEN_PREFIX}tape_offsets",
                                           "tape_counts")
# Deterministic reverse kernels (enzyme/deterministic.py) log shared contributions: the log and
# per-thread byte offsets are hidden parameters after the tape's, sized by the same counting
# kernel (a second counts array). The log's shadow ids number the shadow params in order.
LOG_PARAM, LOG_OFFSETS_PARAM, LOG_COUNTS_PARAM = (f"{HIDDEN_PREFIX}log", f"{HIDDEN_PREFIX}log_offsets",
                                                  "log_counts")
# hidden buffer param -> (its offsets param, the counting kernel's counts param)
BUFFER_PARAMS = {TAPE_PARAM: (OFFSETS_PARAM, COUNTS_PARAM), LOG_PARAM: (LOG_OFFSETS_PARAM, LOG_COUNTS_PARAM)}
# A derivative of a reverse kernel with a dynamic tape (second order) keeps that kernel's tape
# params where they are and differentiates through the tape: it gets a hidden *shadow tape*, laid
# out like the tape (same size, same per-thread offsets, zeroed). Its own dynamic tape, if it needs
# one, is a second level with its own names, sized after the first (its counting runs the first
# adjoint, which reads the first tape). Third order through two levels of tapes is refused.
TAPE_SHADOW_PARAM = f"{HIDDEN_PREFIX}d_tape"
TAPE2_PARAM, OFFSETS2_PARAM = f"{HIDDEN_PREFIX}tape2", f"{HIDDEN_PREFIX}tape2_offsets"


@dataclass(frozen=True)
class TapeKernel:
    """How to size a dynamic tape and/or a contribution log: a counting body (primal params,
    then one counts array per buffer) in the same module."""
    signature: KernelSignature
    body_name: str

    @property
    def counters(self) -> tuple[str, ...]:
        """The counts params, in order (``tape_counts`` and/or ``log_counts``)."""
        return tuple(p.name for p in self.signature.params if p.name in (COUNTS_PARAM, LOG_COUNTS_PARAM))

    @property
    def buffers(self) -> tuple[str, ...]:
        """The derived kernel's hidden buffer params these counters size, in the same order (the
        second-level tape's names when the primal itself takes a tape)."""
        by_counts = {counts: buffer for buffer, (_, counts) in BUFFER_PARAMS.items()}
        second = TAPE_PARAM in {p.name for p in self.signature.params}
        return tuple(TAPE2_PARAM if second and c == COUNTS_PARAM else by_counts[c] for c in self.counters)

    @property
    def offsets(self) -> tuple[str, ...]:
        """The offsets params of ``buffers``, in the same order."""
        return tuple(OFFSETS2_PARAM if b == TAPE2_PARAM else BUFFER_PARAMS[b][0] for b in self.buffers)


def shadowed_params(signature: KernelSignature, wrt: list[str]) -> list[int]:
    """Indices of the params that get a shadow: ``wrt`` ones and every float Out/InOut array. The
    derived kernel's shadow params, one each, follow its primal params in this order (the launcher
    checks their shapes against these primals, kernels/shadows.py)."""
    floats = [p.name for p in signature.params if p.dtype.is_float]
    for name in wrt:
        if name not in floats:
            kind = "an integer parameter" if name in [p.name for p in signature.params] else "not a parameter"
            raise ArgumentError(f"cannot differentiate kernel {signature.name!r} with respect to {name!r}: it is "
                                f"{kind}; float parameters are: {', '.join(floats) or 'none'}")
    return [k for k, p in enumerate(signature.params)
            if p.dtype.is_float and (p.name in wrt or p.is_array and p.type.writes)]


def _unique_names(signature: KernelSignature, shadows: list[Param]) -> list[Param]:
    """``d_x``, or ``d2_x``, ``d3_x``... when a derivative of a derivative already has ``d_x``."""
    taken = {p.name for p in signature.params}
    unique = []
    for shadow in shadows:
        base = shadow.name[2:]
        name, order = shadow.name, 2
        while name in taken:
            name, order = f"d{order}_{base}", order + 1
        taken.add(name)
        unique.append(Param(name, shadow.type))
    return unique


def shadow_param(param: Param, mode: str, width: int) -> Param:
    """The ``d_<name>`` parameter of a derived kernel (see docs/ARCHITECTURE.md §3)."""
    t = param.type
    if mode == "jvp":
        if isinstance(t, ArrayType):
            shadow = t if width == 1 else ArrayType(t.dtype, t.ndim + 1, t.intent)
        else:
            shadow = t if width == 1 else ArrayType(t, 1, "in")
    else:
        shadow = ArrayType(t.dtype, t.ndim, "inout") if isinstance(t, ArrayType) else ArrayType(t, 1, "inout")
    return Param(f"d_{param.name}", shadow)


def llvm_activity(signature: KernelSignature, shadowed: list[int], mode: str, shared: tuple = ()) -> list[Activity]:
    """One Activity per body argument: tids, flattened params, a block kernel's shared arrays
    (float ones Dup: enzyme/blocks.py), status."""
    acts = [CONST] * signature.grid_rank
    for flat in signature.flat_params():
        if flat.param_index in shadowed and flat.role in ("array", "scalar"):
            acts.append(DUP if flat.role == "array" or mode == "jvp" else ACTIVE)
        else:
            acts.append(CONST)
    acts += [DUP if dup else CONST for dup in shared_activity(shared)]
    return acts + [CONST]


def derive_kernel(signature: KernelSignature, module: Module, body_name: str, mode: str, wrt: list[str],
                  width: int = 1, deterministic: bool = False, shared: tuple = (),
                  primal_outputs: bool = True) -> DerivedKernel:
    """Add the derived body (``mode`` "jvp" or "vjp") of ``body_name`` to ``module``. ``shared``: a
    block kernel's shared arrays (frontend/blocks.py), body arguments between params and status.
    ``primal_outputs=False``: the lean variant (enzyme/lean.py), whose write-only primal outputs
    and consumed seeds become In params."""
    if mode not in ("jvp", "vjp"):
        raise ArgumentError(f"mode must be 'jvp' or 'vjp', got {mode!r}")
    if mode == "vjp" and width != 1:
        raise ArgumentError("vector width applies to forward mode (jvp) only")
    body = module.functions[body_name]
    base_tape = _base_tape(signature, width, deterministic)
    shadowed = sorted(shadowed_params(signature, list(wrt)) + ([] if base_tape is None else [base_tape]))
    activity = llvm_activity(signature, shadowed, mode, shared)
    tape = log = None
    rank = signature.grid_rank
    parallel = _parallel(signature, body, shared)
    if mode == "jvp":
        check_forward_atomics(body, analyze(body, activity))      # threads run concurrently
        check_kernel_stores(body, activity, parallel, "forward")
        inner = forward(module, body, activity, width=width, name=f"{body_name}.adoffload.jvp{width}")
    else:
        from .reverse import reverse
        result = reverse(module, body, activity, name=f"{body_name}.adoffload.vjp", failure_arg=len(body.args) - 1,
                         deterministic=deterministic, parallel=parallel)
        inner, tape = result.function, result.tape
        log = result.log
    plan = LeanPlan() if primal_outputs else lean_derivative(signature, body, inner, mode, shadowed, parallel)
    inner.linkage = "internal"
    inner.attributes.add("alwaysinline")
    shadows = _shadow_params(signature, mode, width, shadowed, base_tape, plan)
    buffers = []                     # (buffer, offsets) of this kernel's own hidden params, in order
    hidden = ()
    if tape is not None:
        buffers.append((TAPE_PARAM, OFFSETS_PARAM) if base_tape is None else (TAPE2_PARAM, OFFSETS2_PARAM))
        hidden += (Param(buffers[-1][0], ArrayType(I64, 1, "inout")), Param(buffers[-1][1], ArrayType(I64, rank, "in")))
    if log is not None:
        _check_log_shadows(log, len(body.args), len(shadowed), sum(shared_activity(shared)))
        buffers.append((LOG_PARAM, LOG_OFFSETS_PARAM))
        hidden += (Param(LOG_PARAM, ArrayType(I64, 1, "out")), Param(LOG_OFFSETS_PARAM, ArrayType(I64, rank, "in")))
    primals = tuple(_read_only(p, k in plan.dropped) for k, p in enumerate(signature.params))
    derived_sig = KernelSignature(_derived_name(signature.name, mode, width), primals + tuple(shadows) + hidden, rank)
    name = _derived_name(body_name, mode, width, ".")
    _wrap(module, name, derived_sig, signature, inner, shadowed, mode, width, shared,
          _shared_lane_strides(body, signature, shared) if mode == "jvp" and width > 1 else (), buffers)
    counters = ([COUNTS_PARAM] if tape is not None else []) + ([LOG_COUNTS_PARAM] if log is not None else [])
    count_function = tape.count_function if tape is not None else log.count_function if log is not None else None
    if counters and plan.dropped:    # the counting kernel runs the primal too: same params, same skipped stores
        drop_primal_stores(module.functions[count_function], signature, plan.dropped)
    tape_kernel = None if not counters else _add_count_body(module, KernelSignature(signature.name, primals, rank),
                                                            count_function, counters, len(shared))
    return DerivedKernel(derived_sig, module, name, tape_kernel)


def jvp_signature(signature: KernelSignature, body_name: str, wrt: list[str], width: int = 1,
                  dropped: frozenset[int] = frozenset()) -> tuple[KernelSignature, str]:
    """The signature and body name of ``derive_kernel(..., "jvp", wrt, ...)`` without differentiating:
    a forward kernel's params follow from the base's (its shadows; in a lean one, ``dropped``, the
    base's ``lean_dropped``: enzyme/lean.py's plan, which in forward mode depends on the base body
    alone) and it has no hidden params of its own. Raises the ArgumentErrors derive_kernel raises
    before it differentiates; the DifferentiationErrors of the derivation come only with ``derive_kernel``."""
    base_tape = _base_tape(signature, width, False)
    shadowed = sorted(shadowed_params(signature, list(wrt)) + ([] if base_tape is None else [base_tape]))
    shadows = _shadow_params(signature, "jvp", width, shadowed, base_tape, LeanPlan(dropped))
    primals = tuple(_read_only(p, k in dropped) for k, p in enumerate(signature.params))
    derived_sig = KernelSignature(_derived_name(signature.name, "jvp", width), primals + tuple(shadows),
                                  signature.grid_rank)
    return derived_sig, _derived_name(body_name, "jvp", width, ".")


def lean_dropped(signature: KernelSignature, module: Module, body_name: str, shared: tuple = ()) -> frozenset[int]:
    """The primal outputs a lean forward derivative of this body does not store (``LeanPlan.dropped``)."""
    body = module.functions[body_name]
    return write_only_params(signature, body, _parallel(signature, body, shared))


def _parallel(signature: KernelSignature, body: Function, shared: tuple) -> ParallelInfo:
    rank = signature.grid_rank
    first_shared = rank + len(signature.flat_params())
    return ParallelInfo(thread_args=tuple(range(rank)), uniform_args=frozenset(range(rank, len(body.args))),
                        block_shared_args=frozenset(range(first_shared, first_shared + len(shared))))


def _derived_name(name: str, mode: str, width: int, sep: str = "_") -> str:
    return f"{name}{sep}{mode}" + (f"{width}" if width > 1 else "")


def _shadow_params(signature: KernelSignature, mode: str, width: int, shadowed: list[int], base_tape: int | None,
                   plan: LeanPlan) -> list[Param]:
    """The derived kernel's shadow params, in order."""
    shadows = _unique_names(signature, [_lean_shadow(shadow_param(signature.params[k], mode, width), k, plan)
                                        for k in shadowed if k != base_tape])
    if base_tape is not None:        # the shadow tape comes last among the shadows (the tape is the base's last array)
        shadows.append(Param(TAPE_SHADOW_PARAM, ArrayType(I64, 1, "inout")))
    return shadows


def _read_only(param: Param, read_only: bool) -> Param:
    """``param`` as an In array when ``read_only`` (a lean derivative neither writes it nor, for a
    dropped primal output, reads it)."""
    return Param(param.name, ArrayType(param.type.dtype, param.type.ndim, "in")) if read_only else param


def _lean_shadow(param: Param, k: int, plan: LeanPlan) -> Param:
    """A shadow's intent in a lean derivative: In when only read, Out when written, not accumulated."""
    if k in plan.written:
        return Param(param.name, ArrayType(param.type.dtype, param.type.ndim, "out"))
    return _read_only(param, k in plan.consumed)


def _base_tape(signature: KernelSignature, width: int, deterministic: bool) -> int | None:
    """The index of the base's dynamic tape param when the base is a reverse kernel with one
    (this derivative then differentiates through its tape: second order), else None."""
    hidden = [p.name for p in signature.params if p.name.startswith(HIDDEN_PREFIX)]
    if not hidden:
        return None
    if hidden != [TAPE_PARAM, OFFSETS_PARAM]:
        raise ArgumentError(
            f"cannot differentiate kernel {signature.name!r} again: it takes the launcher-filled buffers "
            f"{', '.join(hidden)}. A reverse kernel with a dynamic tape can be differentiated once more (second "
            f"order, through a shadow tape); third derivatives through two levels of dynamic tapes, and "
            f"derivatives of a deterministic kernel's contribution log, are not supported")
    if width != 1 or deterministic:
        raise ArgumentError(f"cannot differentiate kernel {signature.name!r} (a reverse kernel with a dynamic tape) "
                            f"{'in vector forward mode' if width != 1 else 'with deterministic=True'}: its tape's "
                            f"shadow supports width 1, non-deterministic derivatives only")
    return [p.name for p in signature.params].index(TAPE_PARAM)


def _check_log_shadows(log, body_args: int, shadow_count: int, shared_shadows: int = 0) -> None:
    """The log's shadow id k must be the k-th shadow param (the launcher relies on it): the
    inner function's argument ``body_args + k``. A block kernel's shared-array shadows come after
    them; they are never logged (reverse_accumulate.py), so their ids name no param."""
    expected = tuple(range(body_args, body_args + shadow_count + shared_shadows))
    if log.shadows != expected:
        raise ArgumentError(f"internal: the log numbers shadow arguments {log.shadows}, expected "
                            f"{body_args}..{body_args + shadow_count + shared_shadows - 1}")


def _grid_element(b: Builder, base: Value, shapes: list[Value], tids: list[Value]) -> Value:
    """Pointer to element ``tids`` of a row-major i64 array shaped like the grid."""
    index = tids[0]
    for tid, extent in zip(tids[1:], shapes[1:]):
        index = b.add(b.mul(index, extent), tid)
    return b.gep(i64, base, [index])


def _add_count_body(module: Module, primal_sig: KernelSignature, count_function: str,
                    counters: list[str] = (COUNTS_PARAM,), shared_count: int = 0) -> TapeKernel:
    """A body ``(tids, primal params, counts..., [shared arrays...], status)`` running the counting
    function per thread (one grid-shaped counts array per counter: tape bytes and/or log bytes)."""
    rank = primal_sig.grid_rank
    sig = KernelSignature(f"{primal_sig.name}_tape_count",
                          tuple(primal_sig.params) + tuple(Param(c, ArrayType(I64, rank, "out")) for c in counters),
                          rank)
    arg_specs = [(f"tid{d}", i64) for d in range(rank)]
    arg_specs += [(f.name, _LLVM_TYPES[f.llvm_type]) for f in sig.flat_params()]
    arg_specs += [(f"shared.{k}", ptr) for k in range(shared_count)] + [("status", ptr)]
    name = f"{count_function}.body"
    fn = Function(name, FunctionType(void, tuple(t for _, t in arg_specs)),
                  [Argument(t, n, i) for i, (n, t) in enumerate(arg_specs)], attributes={"nounwind"})
    module.add_function(fn)
    b = Builder(fn.add_block("entry"))
    by_name = {a.name: a for a in fn.args}
    tids = fn.args[:rank]
    counts = [_grid_element(b, by_name[c], [by_name[f"{c}.shape{d}"] for d in range(rank)], tids) for c in counters]
    primal_args = (fn.args[:rank + len(primal_sig.flat_params())] + [by_name[f"shared.{k}"] for k in range(shared_count)]
                   + [by_name["status"]])
    b.call(module.functions[count_function], primal_args + counts)
    b.ret()
    return TapeKernel(sig, name)


def _shared_lane_strides(body: Function, signature: KernelSignature, shared: tuple) -> list[int]:
    """Lane strides of the shadow shared arrays in vector forward mode, in the unit the forward
    engine steps a lane by: the element type it infers from the pointer's uses, which may be i8
    when instcombine turned row offsets into byte offsets (forward.pointer_element_type)."""
    from .forward import pointer_element_type
    first = signature.grid_rank + len(signature.flat_params())
    strides = []
    for k, array in enumerate(shared):
        if not array.dtype.is_float:
            continue
        unit = pointer_element_type(body, body.args[first + k])
        unit_bytes = max(1, getattr(unit, "bits", 8) // 8)
        strides.append(array.nbytes // unit_bytes)
    return strides


def _wrap(module: Module, name: str, derived_sig: KernelSignature, primal_sig: KernelSignature, inner: Function,
          shadowed: list[int], mode: str, width: int, shared: tuple = (), shared_strides=(),
          buffers: list = ()) -> Function:
    """The derived body with the body ABI, calling ``inner`` with the arguments it expects. A block
    kernel's derived body takes the primal shared arrays, then the shadows of the float ones
    (enzyme/blocks.py ``derived_shared``), before the status pointer."""
    rank = derived_sig.grid_rank
    arg_specs = [(f"tid{d}", i64) for d in range(rank)]
    arg_specs += [(f.name, _LLVM_TYPES[f.llvm_type]) for f in derived_sig.flat_params()]
    dup = [k for k, d in enumerate(shared_activity(shared)) if d]
    arg_specs += [(f"shared.{k}", ptr) for k in range(len(shared))] + [(f"d_shared.{k}", ptr) for k in dup]
    arg_specs.append(("status", ptr))
    fn = Function(name, FunctionType(void, tuple(t for _, t in arg_specs)),
                  [Argument(t, n, i) for i, (n, t) in enumerate(arg_specs)], attributes={"nounwind"})
    module.add_function(fn)
    b = Builder(fn.add_block("entry"))
    by_name = {a.name: a for a in fn.args}
    primal_count = rank + len(primal_sig.flat_params())
    call_args: list[Value] = (list(fn.args[:primal_count]) + [by_name[f"shared.{k}"] for k in range(len(shared))]
                              + [by_name["status"]])
    shadow_params = derived_sig.params[len(primal_sig.params):]
    for k, shadow_param_ in zip(shadowed, shadow_params):
        param = primal_sig.params[k]
        call_args.append(by_name[shadow_param_.name])
        if param.is_array and mode == "jvp" and width > 1:
            shapes = [by_name[f"{shadow_param_.name}.shape{d}"] for d in range(1, param.type.ndim + 1)]
            stride: Value | None = None      # elements per lane: the product of the primal shape
            for s in shapes:
                stride = s if stride is None else b.mul(stride, s)
            call_args.append(stride)
    for n, k in enumerate(dup):
        call_args.append(by_name[f"d_shared.{k}"])
        if mode == "jvp" and width > 1:
            call_args.append(Constant(i64, shared_strides[n]))
    # A dynamic tape and a contribution log (reverse.py) add trailing inner args (``ptr %tape,
    # i64 %tape_offset``, then ``ptr %log, i64 %log_offset``), taken from the hidden parameters:
    # this thread's offset is offsets[tids].
    for buffer, offsets in buffers:
        if buffer in by_name:
            shapes = [by_name[f"{offsets}.shape{d}"] for d in range(rank)]
            offset = b.load(i64, _grid_element(b, by_name[offsets], shapes, list(fn.args[:rank])))
            call_args += [by_name[buffer], offset]
    b.call(inner, call_args)
    b.ret()
    # The body only forwards its params: those that ``inner`` takes ``noalias`` (a kernel adjoint's
    # read-only arrays, reverse._mark_readonly_noalias) are noalias here too. On the body they outlive
    # the inlining of ``inner`` (alias scopes are metadata, which ir import/export does not keep), so
    # the final O3 after the target's entry inlines the body still knows them.
    for value, param in zip(call_args, inner.args):
        if "noalias" in param.attributes and any(value is a for a in fn.args) \
                and sum(v is value for v in call_args) == 1:
            value.attributes.add("noalias")
    return fn


__all__ = ["DerivedKernel", "derive_kernel", "jvp_signature", "lean_dropped", "shadow_param", "shadowed_params", "llvm_activity"]
