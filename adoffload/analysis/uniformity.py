"""Block-uniform control flow for the barriers and warp exchanges of translated CUDA kernels.

Block kernels require every thread of a block to reach the same barriers and exchanges
(frontend/blocks.py checks the Python source; this is the same rule on IR). A GPU would hang
or compute garbage otherwise, the host's block loop would lose threads, and the reverse sweep
mirrors barriers assuming all threads pass them. ``divergent_cooperation`` finds each barrier or
exchange in a block that only some threads of a block may reach, with the branches responsible;
speculate.py makes what it can uniform and refuses the rest.

A value is *varying* (may differ between the threads of a block) when it depends on
``threadIdx`` (``tid % B``; ``tid / B``, ``blockIdx``, is uniform, as is ``tid >> k`` for
``B = 2^k``), on a lane id, an exchange, an atomic, a load from a varying address or from
private memory, or is a phi joining paths of a varying branch. A block is *divergent* when a
varying branch reaches it before reaching one of the branch's post-dominators (a join every
thread reaches). Both grow together to a fixed point. It over-approximates, with one
assumption: the kernel has no data races, so a load from an address that is the same for the
whole block gives the whole block the same value (a broadcast through shared memory after a
barrier, a parameter array read at blockIdx). A ``volatile`` or atomic load of global memory is
the exception unless nothing in the kernel writes its array: such loads exist to see other
threads' writes as they happen (a flag that another block sets), so the block's threads may read
different values. Shared arrays stay under the rule: the race check (analysis/races/shared.py)
proves that no thread writes an element another one reads between the same two barriers.
"""
from __future__ import annotations

from ..language import collectives
from ..ir.core import Argument, Block, Constant, Function, Instruction, Value, void

_ALWAYS_VARYING = ("atomicrmw", "cmpxchg", "alloca")


def describe(inst: Instruction, branch: Instruction, kernel: str, syncwarp: bool = False) -> str:
    name = collectives.parse(inst.callee.name)[0]
    what = "__syncthreads()" if name == "sync_threads" else f"a warp {name}"
    if syncwarp:
        what = ("__syncwarp() (a barrier of the whole block here: adoffload runs a block's warps "
                "together, so every thread of the block must reach it)")
    if inst.location is not None:
        what += f" at {inst.location}"
    where = f"at {branch.location}" if branch.location is not None else f"ending block %{branch.parent.name}"
    return (f"kernel '{kernel}': {what} runs under control flow that is not uniform across the block "
            f"(the branch {where} depends on threadIdx, a lane, an atomic, a volatile load of "
            f"memory the kernel writes, or data the threads load differently); every thread of a block must reach the same "
            f"barriers and shuffles. Move it out of the branch or loop, or make the condition depend "
            f"only on blockIdx, blockDim, gridDim and kernel parameters")


def cooperative(inst: Instruction) -> str | None:
    """The name of the barrier or exchange ``inst`` calls, None for anything else."""
    parsed = collectives.parse(getattr(inst.callee, "name", "")) if inst.opcode == "call" else None
    if parsed is not None and (parsed[0] == "sync_threads" or parsed[0] in collectives.EXCHANGES):
        return parsed[0]
    return None


def divergent_cooperation(fn: Function, tids, block, shared=()) -> list[tuple[Instruction, list[Instruction]]]:
    """Each barrier/exchange in a divergent block, with the varying branches whose regions hold
    it, the innermost (smallest region) first (``shared``: the body's shared-array arguments)."""
    info = Divergence(fn, tids, block, shared)
    found = []
    for b in fn.blocks:
        branches = sorted((br for br, region in info.regions.items() if b in region),
                          key=lambda br: len(info.regions[br]))
        for inst in b.instructions:
            if branches and cooperative(inst):
                found.append((inst, branches))
    return found


class Divergence:
    """The fixed point of the module docstring: ``varying`` (ids of instructions) and, per varying
    branch (its terminator), the ``regions`` of blocks only some threads reach."""

    def __init__(self, fn: Function, tids, block, shared=(), between_blocks: bool = False):
        """``between_blocks``: whether a value may differ between threads at one position of blocks
        that differ along the axes of ``tids`` (analysis/races/block_stores.py), instead of between the
        threads of one block. Then ``tid % extent`` is uniform, ``tid / extent`` varies, and so do
        block reductions and loads of shared memory (each block has its own)."""
        self.extents = {tid: extent for tid, extent in zip(tids, block)}
        self.between_blocks = between_blocks
        self.written = _written_roots(fn)
        self.shared = set(shared)
        post = _post_dominators(fn)
        self.varying: set[int] = set()
        self.regions: dict[Instruction, set[Block]] = {}
        users = fn.users()
        self._preds = fn.predecessors()
        self._natural = _natural_loops(fn, self._preds)
        self._loops: dict[Block, list[set[Block]]] = {}    # exiting block -> the loops it leaves
        changed = True
        while changed:
            changed = False
            joins: set[Block] = set()
            for b in fn.blocks:
                term = b.terminator
                if term is not None and term.opcode in ("br", "switch") and term.operands \
                        and self.is_varying(term.operands[0]):
                    region, meet = _region(b, post)
                    joins |= meet
                    if self.regions.get(term) != region:
                        self.regions[term] = region
                        changed = True
                    changed |= self._leaving_loop(b, users)
            for inst in fn.instructions():
                if id(inst) in self.varying or inst.type == void:
                    continue
                if _varies(inst, self.varying, self.extents, joins, self.between_blocks) or self._watching(inst):
                    self.varying.add(id(inst))
                    changed = True

    def _leaving_loop(self, exiting: Block, users: dict) -> bool:
        """Threads leave a loop at ``exiting`` after different numbers of trips: a value of the loop
        used after it differs between them (even where it is the same on each trip). Only the
        natural loops that a successor of ``exiting`` lies outside of are left there; a branch
        that stays inside every loop around it leaves trip counts equal."""
        if exiting not in self._loops:
            self._loops[exiting] = [body for body in self._natural if exiting in body
                                    and any(s not in body for s in exiting.successors)]
        changed = False
        for loop in self._loops[exiting]:
            for b in loop:
                for inst in b.instructions:
                    if id(inst) not in self.varying and inst.type != void \
                            and any(u.parent not in loop for u in users.get(inst, [])):
                        self.varying.add(id(inst))
                        changed = True
        return changed

    def _watching(self, inst: Instruction) -> bool:
        """A volatile or atomic load of global memory the kernel writes (module docstring); between
        blocks, any load of shared memory."""
        if inst.opcode != "load":
            return False
        root = _root(inst.operands[0])
        if self.between_blocks and root in self.shared:
            return True
        if not ("volatile" in inst.flags or inst.ordering) or root in self.shared:
            return False
        return not isinstance(root, Argument) or root in self.written or None in self.written

    def is_varying(self, v: Value) -> bool:
        return _is_varying(v, self.varying, self.extents)


def _is_varying(v: Value, varying: set[int], extents: dict) -> bool:
    if isinstance(v, Argument):
        return v in extents
    return isinstance(v, Instruction) and id(v) in varying


def _varies(inst: Instruction, varying: set[int], extents: dict, joins: set[Block], between_blocks: bool = False) -> bool:
    op = inst.opcode
    if op in _ALWAYS_VARYING:
        return True
    if between_blocks:
        index = _untruncated(inst.operands[0]) if op in ("and", "urem") else None
        if index in extents and isinstance(inst.operands[1], Constant) \
                and _position_in_block(op, inst.operands[1].value, extents[index]):
            return False                                # threadIdx: the same position in every block
    elif op == "udiv" and inst.operands[0] in extents and isinstance(inst.operands[1], Constant) \
            and inst.operands[1].value == extents[inst.operands[0]]:
        return False                                    # blockIdx: the same for the whole block
    elif op in ("lshr", "ashr") and inst.operands[0] in extents and isinstance(inst.operands[1], Constant) \
            and inst.operands[1].value in range(64) and 1 << inst.operands[1].value == extents[inst.operands[0]]:
        return False       # blockIdx of a power-of-two extent (udiv canonicalized; thread indices are >= 0)
    if op == "call":
        parsed = collectives.parse(getattr(inst.callee, "name", ""))
        if parsed is not None and parsed[0] not in ("warp_size",):
            return between_blocks or parsed[0] not in ("block_sum", "block_max", "block_broadcast", "block_first_thread")
    if op == "load" and _private(inst.operands[0]):
        return True
    if op == "phi" and inst.parent in joins and len({_value_key(o) for o in inst.operands}) > 1:
        return True
    return any(_is_varying(o, varying, extents) for o in inst.operands)


def _untruncated(v: Value) -> Value:
    """``tid`` for ``trunc tid`` (CUDA's 32-bit ``threadIdx.x``), else ``v``: thread indices are below
    2**31 (the launch limits), so the truncation keeps their value."""
    return v.operands[0] if isinstance(v, Instruction) and v.opcode == "trunc" else v


def _position_in_block(op: str, constant: int, extent: int) -> bool:
    """Whether ``tid % extent`` is what ``op tid, constant`` computes."""
    if op == "urem":
        return constant == extent
    return extent > 0 and extent & (extent - 1) == 0 and constant == extent - 1


def _value_key(v: Value):
    """Equal keys for one value: the same instruction, or equal constants (after translation
    ``blockDim`` is a constant, read on both sides of a branch that clang duplicated)."""
    if isinstance(v, Constant):
        return ("constant", str(v.type), repr(v.value), v.kind)
    return id(v)


def _root(pointer: Value) -> Value:
    while isinstance(pointer, Instruction) and pointer.opcode in ("getelementptr", "bitcast", "addrspacecast"):
        pointer = pointer.operands[0]
    return pointer


def _written_roots(fn: Function) -> set:
    """The arguments whose memory a store, atomic or call may write; None in the set when a write
    goes through a pointer not rooted in an argument (it may reach any of them)."""
    written: set = set()
    for inst in fn.instructions():
        if inst.opcode == "store":
            pointers = [inst.operands[1]]
        elif inst.opcode in ("atomicrmw", "cmpxchg"):
            pointers = [inst.operands[0]]
        elif inst.opcode == "call":
            pointers = [o for o in inst.operands if o.type.is_pointer]
        else:
            continue
        for p in pointers:
            root = _root(p)
            if isinstance(root, Argument):
                written.add(root)
            elif not (isinstance(root, Instruction) and root.opcode == "alloca"):
                written.add(None)
    return written


def _private(pointer: Value, depth: int = 0) -> bool:
    """Does ``pointer`` point into a thread's own stack memory (its values differ per thread)?"""
    while isinstance(pointer, Instruction) and pointer.opcode == "getelementptr" and depth < 64:
        pointer, depth = pointer.operands[0], depth + 1
    return isinstance(pointer, Instruction) and pointer.opcode in ("alloca", "phi", "select")


def _natural_loops(fn: Function, preds) -> list[set[Block]]:
    """The blocks of each natural loop: per back edge ``tail -> head`` found by a depth-first walk
    (a head still on the walk's stack), the head and every block reaching the tail without it."""
    state, back = {fn.blocks[0]: "open"}, []
    stack = [(fn.blocks[0], iter(fn.blocks[0].successors))]
    while stack:
        block, successors = stack[-1]
        following = next(successors, None)
        if following is None:
            state[block] = "done"
            stack.pop()
        elif following not in state:
            state[following] = "open"
            stack.append((following, iter(following.successors)))
        elif state[following] == "open":
            back.append((block, following))
    loops = []
    for tail, head in back:
        body, todo = {head}, [tail]
        while todo:
            b = todo.pop()
            if b not in body:
                body.add(b)
                todo.extend(preds[b])
        loops.append(body)
    return loops


def _post_dominators(fn: Function) -> dict[Block, set[Block]]:
    """Post-dominator sets (a virtual exit joins every block without successors)."""
    blocks = fn.blocks
    everything = set(blocks)
    post = {b: ({b} if not b.successors else set(everything)) for b in blocks}
    changed = True
    while changed:
        changed = False
        for b in reversed(blocks):
            if not b.successors:
                continue
            meet = set.intersection(*(post[s] for s in b.successors)) | {b}
            if meet != post[b]:
                post[b], changed = meet, True
    return post


def _region(branch: Block, post: dict[Block, set[Block]]) -> tuple[set[Block], set[Block]]:
    """Blocks reached from ``branch``'s successors before any post-dominator of ``branch`` (the
    threads that took different sides are apart there), and the joins: blocks that paths from two
    different successors reach (the post-dominators where they meet included), whose phis then
    depend on the side a thread took. A loop on one side is no join: its phis follow the thread."""
    stop = post[branch] - {branch}
    region, frontier, reached_from = set(), set(), {}
    for k, successor in enumerate(dict.fromkeys(branch.successors)):
        seen, todo = set(), [successor]
        while todo:
            b = todo.pop()
            if b in seen:
                continue
            seen.add(b)
            reached_from.setdefault(b, set()).add(k)
            if b in stop:
                frontier.add(b)
                continue
            region.add(b)
            todo.extend(b.successors)
    joins = {b for b, sides in reached_from.items() if len(sides) > 1} | frontier
    return region, joins
