"""Threads of a block storing different values to one element of a global array: a write-write race.

``out[0] = x[i]`` run by every thread (or ``out[blockIdx.x] = v`` with ``v`` the thread's own) leaves
one thread's value; which one, CUDA does not say. The host runs a block's threads in order and its
blocks on several workers, so the primal changes from run to run, and the derivatives cannot agree
with it or with each other: forward mode keeps the last tangent stored, reverse mode hands the seed to
the one thread that takes it (analysis/races/store_seeds.py). So such a store is refused when the kernel is
translated. It is found as the reverse sweep finds stores of the block's result
(``store_seeds.stored_by_the_block``: an address free of the thread index but through ``blockIdx``,
no ``threadIdx == c`` guard) at an address the same for the whole block, whose value may differ
between its threads (both by uniformity.Divergence). A value that is the same for the block (``out[blockIdx.x] = s[0]`` after
a reduction, ``out[0] = a * x[0]``) is no race and stays accepted. Stores of one thread per block to
an element every block stores (``if (threadIdx.x == 0) out[0] = total`` with several blocks) race
only when the launch has several blocks: analysis/races/block_stores.py refuses their derivatives at launch.
"""
from __future__ import annotations

from ..control_flow import Dominators, predecessor_map
from .store_seeds import stored_by_the_block
from ...errors import CudaTranslationError
from ...ir.cfg import reachable_blocks
from ...ir.core import Function
from ..pointers import leaves
from ..uniformity import Divergence


def check_stores_of_the_block(fn: Function, tids, block, arrays: dict, kernel: str) -> None:
    """``arrays``: root argument -> parameter name of the kernel's pointer parameters."""
    blocks = reachable_blocks(fn)               # in reverse post-order, as Dominators needs them
    stores = [inst for b in blocks for inst in b.instructions if inst.opcode == "store"
              and any(root in arrays for root in leaves(inst.operands[1]))]
    if not stores:
        return
    divergence, dom, preds = Divergence(fn, tids, block), Dominators(blocks), predecessor_map(blocks)
    threads = set(tids)
    for store in stores:
        value, pointer = store.operands
        if not divergence.is_varying(value) or divergence.is_varying(pointer) \
                or not stored_by_the_block(pointer, threads, store.parent, dom, preds):
            continue                  # (store_seeds counts a warp's index, tid / 32, as the block's: Divergence does not)
        names = sorted({arrays[r] for r in leaves(pointer) if r in arrays})
        where = f"at {store.location}" if store.location is not None else f"in block %{store.parent.name}"
        raise CudaTranslationError(
            f"kernel '{kernel}': every thread of a block that runs the store {where} writes one element of "
            f"'{', '.join(names)}' (its index does not depend on threadIdx), with a value that differs between "
            f"the threads: a race whose winner CUDA leaves undefined, so neither the result nor a derivative "
            f"is defined. Let one thread store (if (threadIdx.x == 0)), reduce the values first (atomicAdd, "
            f"a shared-memory reduction), or index the element by the thread")
