"""Static proofs that a shadow-tile add's address is the same in every lane of its lane group (NVPTX).

Why: a grouped add (shared_atomics.py, shared_batches.py) sums the values of the lanes that differ
only in the lane-id bits of its ``mask`` and lets one lane add the sum. That is right only if those
lanes add at one address; the batch checks it at run time (an exchange per address and a warp vote,
about 8 instructions a batch in the register-tiled SGEMM adjoint's k step). Where the address is
built from nothing that differs between the lanes of a group, the check is skipped.

The proof, for an add at a call site in block ``C``, under the whole-warp condition the batch keeps
(``activemask`` is all 32 lanes: every lane of the warp is at this call together):

* Seeds. Threads are numbered row-major, blocks hold a power-of-two number of threads (else there is
  no mask), so a lane's low bits are its thread's low bits: lanes that differ only in ``mask`` bits
  are in one block and have the same thread index on every axis whose lane bits (``lane_bits``) miss
  ``mask``; the body's thread-index argument of such an axis (``block * B + t``) is then the same in
  the group. Every other argument is one value for the whole launch. Constants are the same.
* Values. Integer and pointer arithmetic, casts, integer compares and selects of same values are the
  same. A phi is the same if its incoming values are and every lane of the group came along the same
  path. Anything else (a load, a call, an atomic, ``freeze``, float arithmetic) is not proven.
* Paths. Every conditional branch (``br``, ``switch``) from which the call can be reached along more
  than one successor must have a proven condition. A branch with only one successor that can reach
  ``C`` (a failed bounds check that stores the status and returns) needs nothing: a lane that took
  another side never reaches this call, and then the warp is not whole here.

Values are the greatest fixed point (loop-carried phis are assumed the same until an operand shows
otherwise): by induction over the execution, lanes of a group that took the same branches hold the
same proven values, and proven branch conditions keep them on the same path. (Lanes that take the
same branches run together: only a branch splits a warp, as the batches' exchanges already assume.)"""
from __future__ import annotations

from ..ir.core import Argument, Block, Constant, Function, Instruction, Value

# integer and pointer operations whose result is a function of their operands alone
_PURE = frozenset({"add", "sub", "mul", "shl", "lshr", "ashr", "and", "or", "xor", "udiv", "sdiv", "urem", "srem",
                   "getelementptr", "bitcast", "addrspacecast", "sext", "zext", "trunc", "ptrtoint", "inttoptr",
                   "icmp", "select", "phi"})


class GroupUniform:
    """Proofs for one body: ``uniform(pointer, site_block, mask)``. ``lane_bits``: {axis: the lane-id
    bits its thread index occupies}, shared_atomics._lane_bits of the block; the body's first
    arguments are the thread indices, one per axis of ``block``."""

    def __init__(self, fn: Function, block, lane_bits: dict[int, int]):
        self.fn, self.lane_bits = fn, lane_bits
        self.tids = {fn.args[k]: k for k in range(len(block))}
        self._preds = fn.predecessors()
        self._cache: dict[tuple, bool] = {}

    def uniform(self, pointer: Value, site: Block, mask: int) -> bool:
        """Whether ``pointer``, used in ``site``, is the same in every lane of each ``mask`` group whenever
        the whole warp is there (module docstring)."""
        key = (id(pointer), id(site), mask)
        if key not in self._cache:
            conditions = self._branch_conditions(site)
            self._cache[key] = conditions is not None and not (self._varying([pointer, *conditions], mask)
                                                               & {id(pointer), *map(id, conditions)})
        return self._cache[key]

    def _branch_conditions(self, site: Block) -> list[Value] | None:
        """The conditions of the branches with two successors that reach ``site``; None for a
        terminator the proof does not know."""
        reaching, todo = set(), [site]
        while todo:
            b = todo.pop()
            if b not in reaching:
                reaching.add(b)
                todo.extend(self._preds.get(b, ()))
        conditions = []
        for b in reaching:
            term = b.terminator
            if term is None:
                return None
            leading = {s for s in term.blocks if s in reaching}
            if len(leading) < 2:
                continue
            if term.opcode not in ("br", "switch") or not term.operands:
                return None
            conditions.append(term.operands[0])
        return conditions

    def _allowed_leaf(self, v: Value, mask: int) -> bool:
        if isinstance(v, Argument):
            axis = self.tids.get(v)
            return axis is None or not self.lane_bits.get(axis, 0) & mask
        return isinstance(v, Constant) or not isinstance(v, Instruction)     # globals, functions: fixed

    def _varying(self, roots: list[Value], mask: int) -> set[int]:
        """ids of the values reachable from ``roots`` through operands that are not proven the same
        (the greatest fixed point: start from the failing leaves and operations, spread to users)."""
        seen: dict[int, Value] = {}
        users: dict[int, list[Instruction]] = {}
        todo = list(roots)
        while todo:
            v = todo.pop()
            if id(v) in seen:
                continue
            seen[id(v)] = v
            if isinstance(v, Instruction) and v.opcode in _PURE:
                for o in v.operands:
                    users.setdefault(id(o), []).append(v)
                    todo.append(o)
        varying = {k for k, v in seen.items()
                   if (v.opcode not in _PURE if isinstance(v, Instruction) else not self._allowed_leaf(v, mask))}
        todo = [seen[k] for k in varying]
        while todo:
            for u in users.get(id(todo.pop()), ()):
                if id(u) not in varying:
                    varying.add(id(u))
                    todo.append(u)
        return varying
