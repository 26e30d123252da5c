"""Stores that the blocks of a launch race on, refused when a derivative is launched.

``if ado.thread_id() == 0: y[0] = ado.block_sum(v)`` run by several blocks stores one element
once per block, each time another value: the last block to store wins, and which one is last
changes from run to run. No derivative of that result exists, yet both derivative kernels used to
run: the reverse sweep gave the seed to whichever block took it first (another block than the one
whose value survived) and forward mode stored a tangent that need not belong to the stored value.

Whether a store races depends on the launch: with a single block along an axis there is no other
block to race with (a one-block reduction is the usual form). So the kernel is analysed once
(``racing_stores``) and each derivative launch checks its grid (``check_launch``; the launcher and
the JAX rules call it). A store races along grid axis ``a`` when, with evidence for each part:

* its address is the same in every block along ``a`` for a thread at one position of the block
  (it uses ``tid_a`` only as ``tid_a % block[a]``, or not at all);
* no equality on the block index guards it (``if block_id() == 0``, ``if i == 0``,
  ``if i < block``): every block that gets there stores;
* its value may differ between those blocks (a block reduction, a shared-memory load, anything from
  ``block_id()`` along ``a``), by analysis/uniformity.py's analysis between blocks.

Stores of one value for the whole grid (``y[0] = a * x[0]``) are no race; neither are the block's
own elements (``y[block_id()] = s``). Within one block, check_stores_by_the_block
(store_seeds.py) refuses the threads' own race. A plain kernel is a grid of one-thread blocks.
"""
from __future__ import annotations

from dataclasses import dataclass

from ...errors import DifferentiationError
from ...ir.core import Argument, Constant, Function, Instruction, Value
from ..address_classes import pointer_roots
from ..control_flow import Dominators, predecessor_map, reachable_blocks
from .store_seeds import dominating_tests, is_false


@dataclass(frozen=True)
class BlockRace:
    """A store that every block along grid ``axis`` makes to one element of ``array``."""
    axis: int
    array: str
    location: object


def racing_stores(fn: Function, rank: int, block, arrays: dict, shared=()) -> list[BlockRace]:
    """The races of the module docstring in body ``fn`` (thread indices: its first ``rank``
    arguments; ``block``: the block shape, None for a plain kernel; ``arrays``: body argument ->
    array name, for the global arrays; ``shared``: the shared arrays' arguments)."""
    from ..uniformity import Divergence
    block = tuple(block) if block is not None else (1,) * rank
    tids = fn.args[:rank]
    stores = [inst for b in fn.blocks for inst in b.instructions
              if inst.opcode == "store" and inst.operands[0].type.is_float
              and (pointer_roots(inst.operands[1]) or {None}) <= set(arrays)]
    if not stores:
        return []
    blocks = reachable_blocks(fn)
    dom, preds = Dominators(blocks), predecessor_map(blocks)
    races = []
    for axis, tid in enumerate(tids):
        between = Divergence(fn, [tid], [block[axis]], shared, between_blocks=True)
        for store in stores:
            value, pointer = store.operands
            if store.parent not in dom.order or between.is_varying(pointer) or not between.is_varying(value) \
                    or _one_block_guard(store.parent, tid, block[axis], between, dom, preds):
                continue
            roots = pointer_roots(pointer)
            races.append(BlockRace(axis, ", ".join(sorted({arrays[r] for r in roots})), store.location))
    return races


def _one_block_guard(at, tid: Argument, extent: int, between, dom, preds) -> bool:
    """Whether ``at`` runs only where a test held that one block along ``tid``'s axis passes: an
    equality of a value that differs between the blocks with one that does not, or ``tid <
    c`` / ``block index < 1`` for constants within the first block."""
    return any(_pins_the_block(cond, holds, tid, extent, between) for cond, holds in dominating_tests(at, dom, preds))


def _pins_the_block(cond: Value, holds: bool, tid, extent: int, between) -> bool:
    if not isinstance(cond, Instruction):
        return False
    if holds and (cond.opcode == "and" or cond.opcode == "select" and is_false(cond.operands[2])):
        return any(_pins_the_block(o, True, tid, extent, between) for o in cond.operands[:2])
    if cond.opcode != "icmp":
        return False
    lhs, rhs = cond.operands
    predicate = cond.predicate if holds else _NEGATED.get(cond.predicate)
    if predicate == "eq":
        return any(between.is_varying(x) and not between.is_varying(y) and _index_arithmetic(x)
                   for x, y in ((lhs, rhs), (rhs, lhs)))
    bound = {"ult": 0, "ule": 1, "slt": 0, "sle": 1}.get(predicate)
    if bound is None or not isinstance(rhs, Constant):
        return False
    limit = rhs.value + bound                        # lhs < limit
    if _strip_casts(lhs) is tid:
        return limit <= extent
    return _block_index(_strip_casts(lhs), tid, extent) and limit <= 1


_NEGATED = {"ne": "eq", "uge": "ult", "ugt": "ule", "sge": "slt", "sgt": "sle"}


_INDEX_ARITHMETIC = frozenset({"add", "sub", "mul", "shl", "lshr", "ashr", "udiv", "sdiv", "zext", "sext", "trunc"})


def _index_arithmetic(v: Value, depth: int = 0) -> bool:
    """Whether ``v`` is arithmetic on the thread index and kernel parameters (``i``, ``block_id()``,
    ``i - n``), which one block's threads may pass an equality with; not a remainder or a mask, which
    many blocks share (``block_id() % 2 == 0``), nor loaded data (``flag[block_id()] == 1``)."""
    if isinstance(v, Argument | Constant):
        return True
    if not isinstance(v, Instruction) or v.opcode not in _INDEX_ARITHMETIC or depth > 16:
        return False
    return all(_index_arithmetic(o, depth + 1) for o in v.operands)


def _block_index(v: Value, tid, extent: int) -> bool:
    if not isinstance(v, Instruction) or v.operands[:1] != [tid] or not isinstance(v.operands[-1], Constant):
        return False
    if v.opcode in ("udiv", "sdiv"):
        return v.operands[1].value == extent
    return v.opcode in ("lshr", "ashr") and 1 << v.operands[1].value == extent


def _strip_casts(v: Value) -> Value:
    while isinstance(v, Instruction) and v.opcode in ("zext", "sext", "trunc"):
        v = v.operands[0]
    return v


# ----------------------------------------------------------------------------- kernels and launches

def kernel_races(kernel) -> list[BlockRace]:
    """The races of a kernel of our language (or foreign IR wrapped as one), computed once."""
    cached = getattr(kernel, "_block_races", None)
    if cached is not None:
        return cached
    module, body_name = kernel.ir()
    fn = module.functions[body_name]
    signature = kernel.signature
    rank = signature.grid_rank
    arrays, shared = {}, []
    flat = signature.flat_params()
    for k, param in enumerate(flat):
        if param.role == "array":
            arrays[fn.args[rank + k]] = param.name
    first_shared = rank + len(flat)
    shared = fn.args[first_shared:first_shared + len(getattr(kernel, "shared", ()) or ())]
    races = racing_stores(fn, rank, getattr(kernel, "block", None), arrays, shared)
    kernel._block_races = races
    return races


def primal_of(kernel):
    """The kernel a derivative kernel (of any order) differentiates; None for a primal kernel."""
    if getattr(kernel, "mode", None) not in ("jvp", "vjp"):
        return None
    while getattr(kernel, "mode", None) in ("jvp", "vjp"):
        kernel = kernel.base
    return kernel


def check_launch(kernel, grid: tuple[int, ...]) -> None:
    """Refuse launching a derivative of a kernel whose stores race between the blocks of ``grid``."""
    primal = primal_of(kernel)
    if primal is None:
        return
    block = getattr(primal, "block", None) or (1,) * len(grid)
    for race in kernel_races(primal):
        count = grid[race.axis] // block[race.axis]
        if count > 1:
            raise DifferentiationError(_message(primal, race, count, len(grid)))


def _message(primal, race: BlockRace, count: int, rank: int) -> str:
    where = f" at {race.location}" if race.location is not None else ""
    if getattr(primal, "launched_cuda_style", False):
        index = f"blockIdx.{'xyz'[rank - 1 - race.axis]}"
        return (f"cannot differentiate CUDA kernel '{primal.name}' launched with {count} blocks along {index}: the "
                f"store to '{race.array}'{where} writes one element from every block (its index does not depend "
                f"on {index}), each time a value that may differ between the blocks. The last block to store "
                f"wins, and which is last changes from run to run, so the result has no derivative. Accumulate "
                f"with atomicAdd, store each block's value at its own index and combine afterwards, guard the "
                f"store with a test on {index}, or launch one block along that axis")
    unit = "blocks" if getattr(primal, "block", None) is not None else "threads"
    return (f"cannot differentiate kernel '{primal.name}' launched on a grid of {count} {unit} along axis "
            f"{race.axis}: the store to '{race.array}'{where} writes one element from each of them (its index "
            f"does not depend on the block), each time a value that may differ between them. The last one to "
            f"store wins, and which is last changes from run to run, so the result has no derivative. "
            f"Accumulate with ado.atomic_add, store each block's value at its own index (y[ado.block_id()]) "
            f"and combine afterwards, guard the store with a test on the block (if ado.block_id() == 0:), or "
            f"launch one block along that axis")
