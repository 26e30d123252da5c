"""Block kernels on the host CPU: the body split at its barriers, so a block runs as loops over its threads.

A CPU runs the threads of a block one after the other, so a barrier cannot wait; instead the body
becomes a *resume function* that runs one thread from a barrier to the next (the way OpenCL CPU
runtimes cut work-group functions into loops between barriers):

    i32 @<body>.resume(ptr %state, i32 %resume, i32 %rank, ptr %scratch, <body args>)

returns k >= 1 when the thread reached barrier k (call again with ``resume = k``) and 0 when it
finished. The host entry (codegen/blocks.py) calls it for every thread of the block, phase after
phase, until all threads finished, so every thread completes phase p before any thread starts
phase p + 1: exactly a barrier's guarantee.

What lives across a barrier moves to the thread's ``state`` (its own bytes of a per-block array):
every SSA value live into a block that starts after a barrier is stored there right after its
definition and reloaded at each use (LLVM forwards the stores to the loads inside a phase), and
every ``alloca`` becomes a fixed slice of the state. Exchanges between threads (warp and block
operations) become "write my operands to ``scratch[rank]``; barrier; combine the lanes'
slots (``@adoffload.cpu.*``); barrier".

The host emulates 32-lane warps (NVIDIA's), or, with ``warp_size=64`` (the ``cpu:wave64`` device),
AMD's 64-lane wavefronts exactly as codegen/block_ops.py's AMDGPU definitions behave: lane_id in
0..63, shuffles modulo 64, warp reductions over 64 lanes, warp_first_lane 64 when no lane holds,
ballots of the caller's 32-lane half, warp operations refused in blocks that are not whole
wavefronts. That mode is a testing aid for AMD semantics (we run no AMD GPU), not a faster path.
"""
from __future__ import annotations

from ...language import collectives
from ...errors import CompilationError
from ...ir.builder import Builder
from ...ir.core import (Argument, ArrayType, Block, FloatType, Function, FunctionType, Instruction, IntType, Module,
    PointerType, Value, const, i1, i8, i32, i64, ptr, void)

HOST_WARP_SIZE = 32         # the default; 64 emulates AMD's wavefronts
WARP_SIZES = (32, 64)
SCRATCH_SLOT = 16           # bytes of scratch per thread: the float operand at 0, an i32 operand at 8
STATE_ALIGN = 16
_BARRIER = collectives.callee("sync_threads")


def resume_name(body_name: str) -> str:
    return f"{body_name}.resume"


def _size_of(t) -> int:
    if isinstance(t, FloatType):
        return t.bits // 8
    if isinstance(t, IntType):
        return max(1, (t.bits + 7) // 8)
    if isinstance(t, PointerType):
        return 8
    if isinstance(t, ArrayType):
        return t.count * _size_of(t.element)
    raise CompilationError(f"a value of type {t} lives across a barrier of a block kernel; the host "
                           f"target cannot keep it in the thread state (floats, integers, pointers only)")


def split_at_barriers(module: Module, body_name: str, block_threads: int, warp_size: int = HOST_WARP_SIZE) -> int:
    """Turn ``@body_name`` into ``@<body>.resume`` in place (see the module docstring), with warps of
    ``warp_size`` lanes. Returns the number of state bytes each thread needs."""
    if warp_size not in WARP_SIZES:
        raise CompilationError(f"the host emulates warps of {' or '.join(map(str, WARP_SIZES))} lanes, not {warp_size}")
    fn = module.functions.pop(body_name)
    fn.name = resume_name(body_name)
    module.functions[fn.name] = fn
    extra = [Argument(ptr, "adoffload.state", 0, {"noalias"}), Argument(i32, "adoffload.resume", 1),
             Argument(i32, "adoffload.rank", 2), Argument(ptr, "adoffload.scratch", 3, {"noalias"})]
    for k, arg in enumerate(fn.args):
        arg.index = k + len(extra)
    fn.args = extra + fn.args
    fn.function_type = FunctionType(i32, tuple(a.type for a in fn.args))
    fn.__dict__.pop("_names", None)          # fresh_name's cache predates the new arguments
    fn.linkage = "external"               # made internal once the entry is linked (codegen/blocks.py)
    fn.attributes.discard("noinline")
    fn.attributes.add("alwaysinline")
    state, _, rank, scratch = extra
    _lower_exchanges(module, fn, rank, scratch, block_threads, warp_size)
    resumes = _split_blocks(fn)
    live = _liveness(fn)
    demoted = sorted({v for _, after in resumes for v in live[after] if v.opcode != "alloca"}, key=lambda v: v.name)
    offset = 0
    dispatch = Block("dispatch", parent=fn)
    fn.blocks.insert(0, dispatch)
    head = Builder(dispatch)
    for inst in [i for i in fn.instructions() if i.opcode == "call"
                 and getattr(i.callee, "name", "").startswith("llvm.lifetime.")]:
        inst.parent.instructions.remove(inst)       # the stack slots below become state memory
    for alloca in [i for i in fn.instructions() if i.opcode == "alloca"]:
        count = alloca.operands[0].value if alloca.operands else 1
        if not isinstance(count, int):
            raise CompilationError(f"a block kernel's stack array has a run-time size ({alloca!r}); the "
                                   f"host target needs a constant one")
        offset = -(-offset // STATE_ALIGN) * STATE_ALIGN
        slot = head.gep(i8, state, [const(i64, offset)], f"{alloca.name}.state")
        offset += count * _size_of(alloca.element_type)
        _replace_uses(fn, alloca, slot)
        alloca.parent.instructions.remove(alloca)
    for value in demoted:
        size = _size_of(value.type)
        offset = -(-offset // size) * size
        slot = head.gep(i8, state, [const(i64, offset)], f"{value.name}.state")
        offset += size
        _demote(fn, value, slot)
    targets = [after for _, after in resumes]
    cases = [const(i32, k + 1) for k in range(len(resumes))]
    head.emit("switch", void, [fn.args[1], *cases], blocks=[fn.blocks[1], *targets])
    for k, (barrier, after) in enumerate(resumes):
        block = barrier.parent
        index = block.instructions.index(barrier)
        del block.instructions[index:]          # the barrier and the branch to `after`
        Builder(block).ret(const(i32, k + 1))
    for inst in list(fn.instructions()):
        if inst.opcode == "ret" and not inst.operands:
            inst.operands = [const(i32, 0)]
            inst.type = void
    _keep_only_reachable(module, fn)
    return -(-offset // STATE_ALIGN) * STATE_ALIGN


def _keep_only_reachable(module: Module, root: Function) -> None:
    """Drop the functions ``root`` does not call (a derivative's primal body still has barriers)."""
    reached, work = {root.name}, [root]
    while work:
        for inst in work.pop().instructions():
            callee = inst.callee if inst.opcode == "call" else None
            for value in [callee] + list(inst.operands):
                if isinstance(value, Function) and value.name not in reached:
                    reached.add(value.name)
                    work.append(value)
    for name in [n for n in module.functions if n not in reached]:
        del module.functions[name]


# --- exchanges -----------------------------------------------------------------------------------

def _lower_exchanges(module: Module, fn: Function, rank: Value, scratch: Value, block_threads: int,
                     warp_size: int) -> None:
    """Calls of @adoffload.* other than the barrier: values (lane id, warp size) or exchanges
    through ``scratch`` between two barriers."""
    for inst in [i for i in fn.instructions() if i.opcode == "call"]:
        parsed = collectives.parse(getattr(inst.callee, "name", ""))
        if parsed is None or parsed[0] == "sync_threads":
            continue
        name, suffix = parsed
        b = Builder()
        b.position_before(inst)
        b.location = inst.location
        if name == "lane_id":
            result = b.binary("urem", rank, const(i32, warp_size))
        elif name == "warp_size":
            result = const(i32, warp_size)
        elif name == "thread_rank":
            result = rank
        else:
            if name in ("warp_sum", "warp_max", "shuffle", "shuffle_t", "warp_first_lane",
                        "warp_ballot") \
                    and block_threads % warp_size:
                mode = " (64-lane wavefronts: the cpu:wave64 host, as AMD GPUs)" if warp_size == 64 else ""
                raise CompilationError(f"ado.{name.split('_t')[0]}() needs whole warps: the block has "
                                       f"{block_threads} threads, not a multiple of the warp size "
                                       f"{warp_size}{mode} (at {inst.location or '?'})")
            slot = b.gep(i8, scratch, [b.binary("mul", b.cast("zext", rank, i64), const(i64, SCRATCH_SLOT))])
            for operand in inst.operands:
                if operand.type == i1:
                    b.store(b.cast("zext", operand, i32), b.gep(i8, slot, [const(i64, 8)]))
                elif operand.type == i32:
                    b.store(operand, b.gep(i8, slot, [const(i64, 8)]))
                else:
                    b.store(operand, slot)
            barrier = module.get_or_declare(_BARRIER, FunctionType(void, ()))
            b.call(barrier, [])
            helper = module.get_or_declare(f"adoffload.cpu.{name}" + (f".{suffix}" if suffix else ""),
                                           FunctionType(inst.type, (ptr, i32, i32)))
            result = b.call(helper, [scratch, rank, const(i32, block_threads)])
            b.call(barrier, [])
        _replace_uses(fn, inst, result)
        inst.parent.instructions.remove(inst)


# --- splitting and liveness ----------------------------------------------------------------------

def _is_barrier(inst: Instruction) -> bool:
    return inst.opcode == "call" and getattr(inst.callee, "name", "") == _BARRIER


def _split_blocks(fn: Function) -> list[tuple[Instruction, Block]]:
    """End a block after each barrier (``br`` to a new block holding the rest); returns the
    (barrier, block after it) pairs in order."""
    resumes = []
    work = list(fn.blocks)
    while work:
        block = work.pop(0)
        for index, inst in enumerate(block.instructions):
            if not _is_barrier(inst):
                continue
            after = Block(fn._unique_block_name(f"{block.name}.after.barrier"), parent=fn)
            after.instructions = block.instructions[index + 1:]
            for moved in after.instructions:
                moved.parent = after
            del block.instructions[index + 1:]
            Builder(block).br(after)
            for successor in after.successors:
                for phi in successor.phis:
                    phi.blocks = [after if p is block else p for p in phi.blocks]
            fn.blocks.insert(fn.blocks.index(block) + 1, after)
            resumes.append((inst, after))
            work.insert(0, after)
            break
    return resumes


def _liveness(fn: Function) -> dict[Block, set[Instruction]]:
    """SSA values (instructions) live on entry to each block."""
    uses, defs, phi_out = {}, {}, {b: set() for b in fn.blocks}
    for block in fn.blocks:
        used, defined = set(), set()
        for inst in block.instructions:
            if inst.opcode == "phi":
                for value, pred in zip(inst.operands, inst.blocks):
                    if isinstance(value, Instruction):
                        phi_out.setdefault(pred, set()).add(value)
            else:
                used |= {o for o in inst.operands if isinstance(o, Instruction) and o not in defined}
            defined.add(inst)
        uses[block], defs[block] = used, defined
    live_in = {b: set() for b in fn.blocks}
    changed = True
    while changed:
        changed = False
        for block in reversed(fn.blocks):
            out = set(phi_out.get(block, ()))
            for successor in block.successors:
                out |= live_in[successor] - set(successor.phis)
            new = uses[block] | (out - defs[block])
            if new != live_in[block]:
                live_in[block], changed = new, True
    return live_in


def _replace_uses(fn: Function, old: Value, new: Value) -> None:
    for inst in fn.instructions():
        if any(o is old for o in inst.operands):
            inst.operands = [new if o is old else o for o in inst.operands]


def _demote(fn: Function, value: Instruction, slot: Value) -> None:
    """Store ``value`` to ``slot`` after its definition and reload it at every use."""
    users = [i for i in fn.instructions() if any(o is value for o in i.operands)]
    home = value.parent
    position = home.instructions.index(value) + 1
    if value.opcode == "phi":
        position = len(home.phis)
    home.insert(position, Instruction("store", void, [value, slot]))
    for user in users:
        b = Builder()
        if user.opcode == "phi":
            for k, (operand, pred) in enumerate(zip(user.operands, user.blocks)):
                if operand is value:
                    b.position_before_terminator(pred)
                    user.operands[k] = b.load(value.type, slot, f"{value.name}.reload")
            continue
        b.position_before(user)
        reload = b.load(value.type, slot, f"{value.name}.reload")
        user.operands = [reload if o is value else o for o in user.operands]
