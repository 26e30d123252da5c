"""Warp exchanges under a thread-dependent ``if``, made block-uniform by running the ``if`` on every thread.

CUDA reductions end with ``if (warp == 0) { v = warp_sum(v); if (lane == 0) atomicAdd(out, v); }``:
shuffles that only warp 0 reaches. Block kernels need every thread of a block at every exchange
(uniformity.py). A shuffle only reads lanes of the caller's own warp, so letting the other warps
run the body too changes nothing, as long as they skip its effects. ``speculate`` rewrites

    X: br c, T, J      (T .. exits to J only, entered only from X)
    J: p = phi [a, X], [b, E] ...

into ``X: br T`` and ``p = phi [select(c, b, a), E] ...``, which gives each thread the value of the
side it took. Threads that did not take the body must still skip its effects (stores, loads,
atomics, other calls): when each sits under a branch of the body (``if (lane == 0)``, ``live ?
s[lane] : 0``), that branch's condition becomes ``c && cond``; otherwise (an effect under no such
branch, or a body holding ``__syncwarp``, a block barrier here (translate.py), as in the
warp-synchronous end of a reduction ``if (tid < 32) { s[tid] = v; __syncwarp(); v += s[tid ^ 16];
... }``) every effect gets a guard ``c`` of its own (the block is split around it; a loaded value
is zero on the threads outside, whose results are dropped at the join), so the exchanges and the
barrier, now outside any branch, are reached by every thread. Refused (the ``if`` stays, and
uniformity.py then reports the exchange): ``__syncthreads`` in the body, integer division by a
variable (it could trap on values the thread never computed), and loops in the body left by a
thread-dependent or loaded condition (they might not end on those values: loads give zero there)
unless counted (``for (c = lane; c < C; c += 32)``: ``_counted_exit``).
"""
from __future__ import annotations

from ...language import collectives
from ...errors import DivergentBarrierError
from ...ir.builder import Builder
from ...ir.cfg import dominator_sets
from ...ir.core import Block, Constant, Function, Instruction, i1
from ...analysis.uniformity import Divergence, describe, divergent_cooperation

_PURE_CALL_PREFIXES = ("llvm.fabs", "llvm.sqrt", "llvm.exp", "llvm.log", "llvm.sin", "llvm.cos", "llvm.pow",
                       "llvm.minnum", "llvm.maxnum", "llvm.fma", "llvm.fmuladd", "llvm.floor", "llvm.ceil",
                       "llvm.copysign", "llvm.smax", "llvm.smin", "llvm.umax", "llvm.umin", "llvm.abs",
                       "llvm.assume", "llvm.ctpop", "llvm.cttz", "llvm.ctlz", "llvm.bitreverse")
_PURE_LIBM = frozenset(f + suffix for f in ("sin", "cos", "tan", "exp", "log", "sqrt", "pow", "fabs", "fmin", "fmax",
                                            "tanh", "erf", "exp2", "log2", "log1p", "expm1", "atan2", "floor",
                                            "ceil", "fma", "copysign", "rsqrt") for suffix in ("", "f"))
_EXCHANGES = frozenset({"shuffle", "lane_id", "warp_size", "warp_sum", "warp_max", "thread_rank", "warp_ballot"})
_DIVISIONS = frozenset({"sdiv", "udiv", "srem", "urem"})
MAX_ROUNDS = 64


def make_exchanges_uniform(fn: Function, tids, block, kernel: str, syncwarps=frozenset(), shared=()) -> int:
    """Speculate the innermost speculatable branch around each divergent exchange until none is
    left; raise DivergentBarrierError for a barrier or an exchange that cannot be made uniform
    (``syncwarps``: ids of the barriers that were ``__syncwarp()``, named so in the message).
    Returns the number of branches speculated (``shared``: the body's shared-array arguments)."""
    for rounds in range(MAX_ROUNDS):
        found = divergent_cooperation(fn, tids, block, shared)
        if not found:
            return rounds
        inst, branches = found[0]
        info = Divergence(fn, tids, block, shared)
        barrier = collectives.parse(inst.callee.name)[0] == "sync_threads"
        if (barrier and id(inst) not in syncwarps) or \
                not any(speculate(fn, branch, info, syncwarps) for branch in branches):
            raise DivergentBarrierError(describe(inst, branches[0], kernel, id(inst) in syncwarps))
    raise DivergentBarrierError(f"kernel '{kernel}': more than {MAX_ROUNDS} divergent branches around warp exchanges")


def speculate(fn: Function, branch: Instruction, info: Divergence, syncwarps=frozenset()) -> bool:
    """Let every thread run the body of ``branch`` (see the module docstring); False when it cannot.
    A body holding ``__syncwarp`` barriers (ids in ``syncwarps``), or effects under no branch of
    their own, is run by every thread with each effect guarded by the branch's condition
    (``_guard_each_effect``)."""
    if branch.opcode != "br" or len(branch.blocks) != 2:
        return False
    x = branch.parent
    preds = fn.predecessors()
    for side, (body, join) in enumerate((branch.blocks, branch.blocks[::-1])):
        region = _body(body, join, x, preds)
        if region is None or _loops_left_by_thread(fn, region, info):
            continue
        instructions = [i for b in region for i in b.instructions]
        if any(_traps(i) or (_is_barrier(i) and id(i) not in syncwarps) for i in instructions):
            continue
        guards = None if any(_is_barrier(i) for i in instructions) else _guards(fn, region, body)
        if guards is None:           # barriers (__syncwarp) or effects under no branch of the body
            if not all(_guardable(i) for i in instructions):
                continue
            inside = _inside(x, branch.operands[0], side == 0)
            region = _guard_each_effect(fn, region, inside)
            _select_join_values(join, x, region, inside)
            branch.operands, branch.blocks = [], [body]
            return True
        inside = _inside(x, branch.operands[0], side == 0)
        for guard, effect_side in guards.items():
            _restrict(guard, inside, effect_side)
        _select_join_values(join, x, region, inside)
        branch.operands, branch.blocks = [], [body]
        return True
    return False


def _inside(x: Block, condition, when_true: bool):
    """An i1 that holds on the threads that took the body (``c``, or ``!c`` for an else-side body)."""
    if when_true:
        return condition
    b = Builder()
    b.position_before_terminator(x)
    return b.binary("xor", condition, Constant(i1, 1), "took.body")


def _restrict(guard: Block, inside, effect_side: int) -> None:
    """Make ``guard``'s branch reach its effectful side only on threads that took the body."""
    term = guard.terminator
    b = Builder()
    b.position_before_terminator(guard)
    if effect_side == 0:
        term.operands[0] = b.binary("and", inside, term.operands[0], "guarded")
    else:
        outside = b.binary("xor", inside, Constant(i1, 1), "skipped.body")
        term.operands[0] = b.binary("or", outside, term.operands[0], "guarded")


def _select_join_values(join: Block, x: Block, region: set[Block], inside) -> None:
    """``phi [a, X], [b, E]`` -> ``phi [select(inside, b, a), E]`` for each exit E of the body."""
    for phi in join.phis:
        incoming = dict(zip((id(b) for b in phi.blocks), phi.operands))
        if id(x) not in incoming:
            continue
        skipped = incoming[id(x)]
        keep = [(v, b) for v, b in zip(phi.operands, phi.blocks) if b is not x]
        phi.operands, phi.blocks = [], []
        for value, b in keep:
            if b in region:
                builder = Builder()
                builder.position_before_terminator(b)
                value = builder.select(inside, value, skipped)
            phi.operands.append(value)
            phi.blocks.append(b)


def _guardable(inst: Instruction) -> bool:
    """Can ``inst`` run under a guard of its own (its value, if used, a phi with zero elsewhere)?"""
    return inst.opcode not in ("alloca", "invoke", "landingpad", "unreachable", "ret")


def _guard_each_effect(fn: Function, region: set[Block], inside) -> set[Block]:
    """Put every effect of ``region`` (not its barriers) under ``br inside`` of its own: the block
    is split around it, and a value it gives becomes ``phi [value, guarded], [zero, skipped]``, a
    number for the threads outside the body to compute with (their results are dropped). Returns
    the region with the new blocks."""
    region = set(region)
    users = fn.users()
    for block in [b for b in fn.blocks if b in region]:
        k = 0
        while k < len(block.instructions):
            inst = block.instructions[k]
            if inst.opcode == "phi" or inst.is_terminator or _pure(inst) or _is_barrier(inst):
                k += 1
                continue
            guarded = Block(fn._unique_block_name(f"{block.name}.guarded"), parent=fn)
            after = Block(fn._unique_block_name(f"{block.name}.after.guard"), parent=fn)
            after.instructions = block.instructions[k + 1:]
            for moved in after.instructions:
                moved.parent = after
            for successor in after.successors:
                for phi in successor.phis:
                    phi.blocks = [after if p is block else p for p in phi.blocks]
            del block.instructions[k:]
            guarded.instructions, inst.parent = [inst], guarded
            Builder(guarded).br(after)
            Builder(block).cbranch(inside, guarded, after)
            at = fn.blocks.index(block) + 1
            fn.blocks[at:at] = [guarded, after]
            region |= {guarded, after}
            if users.get(inst):
                merged = Instruction("phi", inst.type, [inst, Constant(inst.type, None, "zero")],
                                     name=f"{inst.name or 'effect'}.guarded", blocks=[guarded, block], parent=after)
                for user in users[inst]:
                    user.operands = [merged if o is inst else o for o in user.operands]
                after.instructions.insert(0, merged)
            block, k = after, 0
    return region


def _body(entry: Block, join: Block, x: Block, preds) -> set[Block] | None:
    """The blocks from ``entry`` up to ``join`` when ``entry`` is only entered from ``x`` and every
    path out of them goes to ``join`` (else None)."""
    if entry is join or preds[entry] != [x]:
        return None
    region, todo = set(), [entry]
    while todo:
        b = todo.pop()
        if b in region:
            continue
        region.add(b)
        for s in b.successors:
            if s is not join:
                todo.append(s)
    for b in region:
        if b is not entry and any(p not in region for p in preds[b]):
            return None
        if not b.successors:             # a return inside: the thread would have left
            return None
    return region


def _guards(fn: Function, region: set[Block], entry: Block) -> dict[Block, int] | None:
    """For each block of ``region`` with an effect, the nearest dominating branch inside the region
    that reaches it from one side only: {branch block: that side}. None if some effect has none."""
    dominators = dominator_sets(fn)
    guards: dict[Block, int] = {}
    for b in region:
        if all(_pure(i) for i in b.instructions):
            continue
        found = None
        for g in sorted(dominators[b] - {b}, key=lambda d: -len(dominators[d])):   # nearest first
            if g not in region:
                break
            term = g.terminator
            if term is None or term.opcode != "br" or len(term.blocks) != 2:
                continue
            sides = [_reaches(s, b, region, g) for s in term.blocks]
            if sides.count(True) == 1 and (g not in guards or guards[g] == sides.index(True)):
                found = (g, sides.index(True))
                break
        if found is None:
            return None
        guards[found[0]] = found[1]
    return guards


def _reaches(start: Block, target: Block, region: set[Block], avoid: Block) -> bool:
    seen, todo = set(), [start]
    while todo:
        b = todo.pop()
        if b is target:
            return True
        if b in seen or b is avoid or b not in region:
            continue
        seen.add(b)
        todo.extend(b.successors)
    return False


def _loops_left_by_thread(fn: Function, region: set[Block], info: Divergence) -> bool:
    """Could a thread outside the ``if`` loop in the body for ever? A loop of the body whose exit
    depends on the thread or on memory (its loads give zero outside the ``if``) must be a counted
    loop (``_counted_exit``); a thread-dependent branch inside a loop that leaves no loop is fine."""
    loops = _natural_loops(fn, region)
    for b in region:
        term = b.terminator
        if term is None or term.opcode not in ("br", "switch") or not term.operands:
            continue
        around = [body for body in loops if b in body]
        left = [body for body in around if any(s not in body for s in b.successors)]
        if not left or not (info.is_varying(term.operands[0]) or _reads_memory(term.operands[0], region)):
            continue
        if not all(_counted_exit(b, body) for body in left):
            return True
    return False


def _natural_loops(fn: Function, region: set[Block]) -> list[set[Block]]:
    """The natural loop of each back edge ``t -> h`` of ``region`` (``h`` dominates ``t``): ``h`` and
    the blocks that reach ``t`` without passing ``h``."""
    dominators, preds, loops = dominator_sets(fn), fn.predecessors(), []
    for t in region:
        for h in t.successors:
            if h in region and h in dominators[t]:
                body, todo = {h}, [t]
                while todo:
                    x = todo.pop()
                    if x not in body:
                        body.add(x)
                        todo.extend(p for p in preds[x] if p in region)
                loops.append(body)
    return loops


def _reads_memory(value, region: set[Block]) -> bool:
    """Does ``value`` depend on a load, atomic or call of ``region`` (zero outside the ``if``)?"""
    seen, todo = set(), [value]
    while todo:
        v = todo.pop()
        if not isinstance(v, Instruction) or id(v) in seen or v.parent not in region:
            continue
        seen.add(id(v))
        if not _pure(v) or (v.opcode == "call" and collectives.parse(getattr(v.callee, "name", "")) is not None):
            return True
        todo.extend(v.operands)
    return False


_ORDERED = {"slt": True, "sle": True, "ult": True, "ule": True, "sgt": False, "sge": False, "ugt": False, "uge": False}


def _counted_exit(b: Block, loop: set[Block]) -> bool:
    """``br (icmp slt iv', n), loop, exit`` (or ``sgt``/``sge``... to the exit) with ``iv' = add nsw iv,
    C`` (C > 0), ``iv`` a phi of the loop stepped only by that add and ``n`` defined outside the loop:
    the strided loops of one warp per row (``for (c = lane; c < C; c += 32)``); or the same counting down
    (C < 0, a signed test: ``for (c = C - 1 - lane; c >= 0; c -= 32)``). Whatever numbers a thread
    outside the ``if`` computes, the counter only moves towards ``n`` (nsw: no wrap) and passes it
    within |n - start| / |C| trips."""
    term = b.terminator
    cond = term.operands[0] if term.opcode == "br" and len(term.blocks) == 2 else None
    if not (isinstance(cond, Instruction) and cond.opcode == "icmp" and cond.predicate in _ORDERED):
        return False
    defined_in_loop = [isinstance(v, Instruction) and v.parent in loop for v in cond.operands]
    if defined_in_loop.count(True) != 1:
        return False
    at = defined_in_loop.index(True)
    counter = cond.operands[at]
    phi = counter.operands[0] if _step(counter) else counter
    if not (isinstance(phi, Instruction) and phi.opcode == "phi" and phi.parent in loop):
        return False
    inside = [v for v, p in zip(phi.operands, phi.blocks) if p in loop]
    outside = [v for v, p in zip(phi.operands, phi.blocks) if p not in loop]
    steps = {_step(v) for v in inside}
    signed = cond.predicate.startswith("s")
    if not (outside and inside and (steps <= {1} or (steps <= {-1} and signed)) and (counter is phi or counter in inside)
            and all(v.operands[0] is phi and ("nsw" if signed else "nuw") in v.flags for v in inside)):
        return False
    below_when_true = _ORDERED[cond.predicate] == (at == 0)      # the counter below the bound when true
    stay_when_true = below_when_true if steps == {1} else not below_when_true
    return [s in loop for s in term.blocks] == ([True, False] if stay_when_true else [False, True])


def _step(v) -> int:
    """The sign of C for ``add v, C`` with a constant C != 0; 0 for anything else."""
    c = v.operands[1] if isinstance(v, Instruction) and v.opcode == "add" else None
    if not (isinstance(c, Constant) and isinstance(c.value, int) and c.value % (1 << c.type.bits)):
        return 0
    return -1 if c.value % (1 << c.type.bits) >= 1 << (c.type.bits - 1) else 1      # constants may be unsigned


def _traps(inst: Instruction) -> bool:
    return inst.opcode in _DIVISIONS and not (isinstance(inst.operands[1], Constant)
                                              and inst.operands[1].value not in (0, -1))


def _is_barrier(inst: Instruction) -> bool:
    parsed = collectives.parse(getattr(inst.callee, "name", "")) if inst.opcode == "call" else None
    return parsed is not None and parsed[0] not in _EXCHANGES


def _pure(inst: Instruction) -> bool:
    """No effect but its value (exchanges included: they read only the caller's warp)."""
    op = inst.opcode
    if op in ("store", "atomicrmw", "cmpxchg", "fence", "alloca", "load", "invoke", "unreachable", "ret"):
        return False
    if op == "call":
        name = getattr(inst.callee, "name", "")
        parsed = collectives.parse(name)
        if parsed is not None:
            return parsed[0] in _EXCHANGES
        return name.startswith(_PURE_CALL_PREFIXES) or name in _PURE_LIBM
    return True
