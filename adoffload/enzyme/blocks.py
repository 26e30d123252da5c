"""AD of block kernels: shadow shared arrays and the derivative rules of cooperative operations.

* Shadow shared memory: every float shared array of a block kernel is Dup; its shadow is one more
  shared array of the derived kernel (``derived_shared``), zero-filled when each block starts.
  Adjoint accumulation into it is atomic or private, never deferred to the end of the kernel
  (analysis/address_classes.py: ``block_shared_args``), since later parts of the reverse sweep read it back.
* A barrier has no derivative; the reverse sweep re-emits it where the primal had it
  (``REPLAYED_CALLS``), so the adjoint traffic through shadow shared memory is ordered as the
  primal traffic was, mirrored: the reverse sweep keeps the block's barrier structure.
* The exchanges are linear maps across the lanes; their tangents are the same map of the tangents
  and their adjoints the transposed map (rules below, registered in rules.RULES):

  ========================  ======================================  ====================================
  y                         tangent                                 adjoint of v
  ========================  ======================================  ====================================
  warp_sum(v)               warp_sum(v')                            warp_sum(y')  (sum transposed = broadcast of the sum)
  block_sum(v)              block_sum(v')                           block_sum(y')
  warp_max(v)               shuffle(v', first lane with v == y)     warp_sum(y') on that lane, 0 elsewhere
  block_max(v)              block_sum(v' on first such thread)      block_sum(y') on that thread, 0 elsewhere
  shuffle(v, src)           shuffle(v', src)                        shuffle_t(y', src)
  shuffle_t(v, src)         shuffle_t(v', src)                      shuffle(y', src)
  block_broadcast(v, src)   block_broadcast(v', src)                block_sum(y') on thread src, 0 elsewhere
  ========================  ======================================  ====================================

  The max picks one lane (the lowest) among ties, as a subgradient; NaN lanes are ignored (as
  ``llvm.maxnum``), and where every lane is NaN no lane holds the maximum: both tangent and
  adjoint are 0 there.

* ``deterministic=True``: adjoint contributions to global shadows go to the contribution log as
  for any kernel (deterministic.py); updates of shadow shared memory cannot (the reverse sweep
  reads them back before the launch ends) and stay atomic. On the host that order is fixed: a
  block runs on one worker, its threads one after the other in each phase between barriers
  (codegen/blocks.py), so the sums are the same for any worker count. On a GPU the order of
  atomics in shared memory depends on scheduling: the GPU entry of a deterministic kernel makes
  them adds in thread order, or refuses a site not every thread reaches (codegen/gpu/ordered_shared.py).
"""
from __future__ import annotations

from ..language import collectives
from ..ir.core import FunctionType, Instruction, Value, const, i32
from ..language.types import ArrayType
from .rules import Rule, RuleContext, register

# Calls the reverse sweep repeats at the mirrored point (reverse.py).
REPLAYED_CALLS = frozenset({collectives.callee("sync_threads")})


def derived_shared(shared: tuple, mode: str, width: int = 1) -> tuple:
    """A derivative kernel's shared arrays: the primal's, then one zero-filled shadow per float one
    (forward mode of width k: k lanes, a leading axis)."""
    from ..frontend.blocks import SharedArray
    shadows = tuple(SharedArray(f"d_{a.name}", a.dtype, a.shape if mode == "vjp" or width == 1 else (width,) + a.shape,
                                zero=True) for a in shared if a.dtype.is_float)
    return tuple(shared) + shadows


def shared_activity(shared: tuple) -> list[bool]:
    """Which shared arrays are Dup (float ones)."""
    return [a.dtype.is_float for a in shared]


def shadow_shape_type(array) -> ArrayType:
    return ArrayType(array.dtype, len(array.shape), "inout")


# ----------------------------------------------------------------------------- rules

def _op(ctx: RuleContext, name: str, suffix: str | None, args: list[Value]) -> Value:
    kind, operands = collectives.OPS[name]
    ret = args[0].type if kind == "T" else (i32 if kind == "i32" else None)
    fn = ctx.module.get_or_declare(collectives.callee(name, suffix), FunctionType(ret, tuple(a.type for a in args)))
    fn.attributes.update({"convergent", "nounwind"})
    return ctx.builder.call(fn, args)


def _suffix(inst: Instruction) -> str:
    return collectives.parse(inst.callee.name)[1]


def _zero(v: Value) -> Value:
    return const(v.type, 0.0)


def _same_map(name: str):
    """Tangent of a map linear in its first operand: the same map of the tangent."""
    def forward(ctx, inst, tangents):
        if tangents[0] is None:
            return None
        return _op(ctx, name, _suffix(inst), [tangents[0]] + [ctx.operand(inst, k) for k in range(1, len(inst.operands))])
    return forward


def _transposed(name: str):
    def reverse(ctx, inst, adjoint):
        rest = [ctx.operand(inst, k) for k in range(1, len(inst.operands))]
        return [_op(ctx, name, _suffix(inst), [adjoint] + rest)] + [None] * len(rest)
    return reverse


def _max_forward(scope: str):
    """The tangent of the lowest lane (thread) holding the maximum, 0 when none does (every lane NaN):
    the reverse rule's choice, so <J v, w> = <v, J^T w> holds there too. The tangent is masked to the
    lanes at the maximum before it moves: a warp with none picks lane 32 (read as lane 0), a block
    with none its thread count, past its threads, so the block adds the one chosen tangent instead."""
    def forward(ctx, inst, tangents):
        if tangents[0] is None:
            return None
        b = ctx.builder
        at_max = b.fcmp("oeq", ctx.operand(inst, 0), ctx.result(inst))
        if scope == "warp":
            masked = b.select(at_max, tangents[0], _zero(tangents[0]))
            return _op(ctx, "shuffle", _suffix(inst), [masked, _op(ctx, "warp_first_lane", None, [at_max])])
        chosen = b.icmp("eq", _op(ctx, "thread_rank", None, []), _op(ctx, "block_first_thread", None, [at_max]))
        return _op(ctx, "block_sum", _suffix(inst), [b.select(chosen, tangents[0], _zero(tangents[0]))])
    return forward


def _max_reverse(scope: str):
    pick, me, total = (("warp_first_lane", "lane_id", "warp_sum") if scope == "warp"
                       else ("block_first_thread", "thread_rank", "block_sum"))

    def reverse(ctx, inst, adjoint):
        b = ctx.builder
        at_max = b.fcmp("oeq", ctx.operand(inst, 0), ctx.result(inst))
        chosen = b.icmp("eq", _op(ctx, me, None, []), _op(ctx, pick, None, [at_max]))
        return [b.select(chosen, _op(ctx, total, _suffix(inst), [adjoint]), _zero(adjoint))]
    return reverse


def _broadcast_reverse(ctx, inst, adjoint):
    b = ctx.builder
    mine = b.icmp("eq", _op(ctx, "thread_rank", None, []), ctx.operand(inst, 1))
    return [b.select(mine, _op(ctx, "block_sum", _suffix(inst), [adjoint]), _zero(adjoint)), None]


def _no_derivative(ctx, inst, *_):
    return [None] * len(inst.operands)


def _register() -> None:
    for suffix in collectives.FLOAT_SUFFIXES:
        def key(name):
            return f"call:{collectives.callee(name, suffix)}"
        for name in ("warp_sum", "block_sum"):
            register(key(name), Rule(forward=_same_map(name), reverse=_transposed(name)))
        register(key("warp_max"), Rule(forward=_max_forward("warp"), reverse=_max_reverse("warp")))
        register(key("block_max"), Rule(forward=_max_forward("block"), reverse=_max_reverse("block")))
        register(key("shuffle"), Rule(forward=_same_map("shuffle"), reverse=_transposed("shuffle_t")))
        register(key("shuffle_t"), Rule(forward=_same_map("shuffle_t"), reverse=_transposed("shuffle")))
        register(key("block_broadcast"), Rule(forward=_same_map("block_broadcast"), reverse=_broadcast_reverse))
    # integer results: never active; a rule lets the reverse sweep recompute them instead of taping
    for name in ("lane_id", "warp_size", "thread_rank", "warp_first_lane", "block_first_thread",
                 "warp_ballot"):
        register(f"call:{collectives.callee(name)}", Rule(partials=lambda ctx, inst: [None] * len(inst.operands)))


_register()
