"""Virtual calls on objects the function builds, and calls through a choice of functions, become
direct calls (before AD).

clang++ calls a virtual function through the object's vtable pointer::

    store ptr getelementptr (i8, ptr @_ZTV12LennardJones, i64 16), ptr %obj   ; the constructor
    ...
    %vptr = load ptr, ptr %obj
    %slot = getelementptr i8, ptr %vptr, i64 8
    %f = load ptr, ptr %slot
    %e = invoke double %f(ptr %obj, double %r) to label %ok unwind label %lp

LLVM keeps the loads (the call could, as far as it knows, change ``*%obj``), so the AD engine met an
indirect call and refused it. Where the object is one this function allocates (an ``alloca``, an
``operator new``/``malloc`` block, or a phi/select of such) and every pointer stored at its address
is a constant address inside a constant vtable, the function called is one of those vtables' entries
at the slot's offset. The call becomes a comparison of ``%f`` with each candidate and a direct call
(then inlined); no match (the object's type changed in a way this function does not show) calls
``adoffload.unknown_virtual_target``, a failure function: the host stops the call there with an
error instead of jumping anywhere, and the AD engine sees no indirect call.

A call through a phi or select whose every leaf is a function (a member function pointer chosen at
run time, ``which ? &Shape::perimeter : &Shape::area``) is dispatched the same way, over those
functions (the failure call is then never reached).
"""
from __future__ import annotations

from .builder import Builder
from .core import (Block, Constant, ConstantExpr, Function, FunctionType, GlobalVariable, Instruction, Module,
                   Value, void)

UNKNOWN_TARGET = "adoffload.unknown_virtual_target"
_ALLOCATORS = frozenset({"_Znwm", "_Znam", "_ZnwmSt11align_val_t", "_ZnamSt11align_val_t", "malloc", "calloc",
                         "aligned_alloc"})


def devirtualize_indirect_calls(module: Module) -> int:
    """Rewrite the virtual calls described above; returns how many."""
    rewritten = 0
    for fn in [f for f in module.functions.values() if not f.is_declaration]:
        users = None
        for inst in [i for i in fn.instructions() if i.opcode in ("call", "invoke")]:
            if isinstance(inst.callee, Function) or not isinstance(inst.callee, Instruction):
                continue
            users = users if users is not None else fn.users()
            targets = _targets(inst, users)
            if targets:
                _dispatch(module, fn, inst, targets)
                rewritten += 1
                users = None
    return rewritten


def _constant_offset(p: Value) -> tuple[Value, int] | None:
    """(base, byte offset) of ``p``: a chain of ``getelementptr i8`` with constant offsets."""
    offset = 0
    while isinstance(p, Instruction) and p.opcode == "getelementptr":
        if len(p.operands) != 2 or str(p.element_type) != "i8" or not _is_int(p.operands[1]):
            return None
        offset += int(p.operands[1].value)
        p = p.operands[0]
    return p, offset


def _is_int(c: Value) -> bool:
    return type(c) is Constant and c.kind == "scalar" and isinstance(c.value, int)


def _objects(p: Value, seen: set) -> list[Value] | None:
    """The objects the function allocates that ``p`` (through phis and selects) is one of, or None."""
    if p in seen:
        return []
    seen.add(p)
    if isinstance(p, Instruction) and p.opcode == "alloca":
        return [p]
    if (isinstance(p, Instruction) and p.opcode == "call" and isinstance(p.callee, Function)
            and p.callee.name in _ALLOCATORS):
        return [p]
    if isinstance(p, Instruction) and p.opcode in ("phi", "select"):
        found = []
        for q in (p.operands if p.opcode == "phi" else p.operands[1:]):
            inner = _objects(q, seen)
            if inner is None:
                return None
            found += inner
        return found
    return None


def _vtable_address(v: Value) -> tuple[GlobalVariable, int] | None:
    """(vtable, byte offset) of a stored ``getelementptr (i8, ptr @vtable, i64 c)`` of a constant global."""
    if not (isinstance(v, ConstantExpr) and v.opcode == "getelementptr" and len(v.operands) == 2
            and str(v.element_type) == "i8"):
        return None
    table, offset = v.operands
    if not (isinstance(table, GlobalVariable) and table.constant and table.initializer is not None and _is_int(offset)):
        return None
    return table, int(offset.value)


def _vtable_addresses(v: Value, seen: set) -> list[tuple[GlobalVariable, int]] | None:
    """The vtable addresses a stored value is (one, or a phi/select of them), or None."""
    if isinstance(v, Instruction) and v.opcode in ("phi", "select"):
        if v in seen:
            return []
        seen.add(v)
        found = []
        for q in (v.operands if v.opcode == "phi" else v.operands[1:]):
            inner = _vtable_addresses(q, seen)
            if inner is None:
                return None
            found += inner
        return found
    address = _vtable_address(v)
    return None if address is None else [address]


def _entries(c) -> list:
    """The pointer-sized items of a vtable's initializer, in order (nested aggregates flattened)."""
    if isinstance(c, Constant) and c.kind == "aggregate":
        return [item for inner in c.value for item in _entries(inner)]
    return [c]


def _chosen(p: Value, seen: set) -> list[Function] | None:
    """The functions a phi/select tree of functions chooses from, or None if a leaf is anything else."""
    if isinstance(p, Function):
        return [p]
    if p in seen:
        return []
    seen.add(p)
    if isinstance(p, Instruction) and p.opcode in ("phi", "select"):
        found = []
        for q in (p.operands if p.opcode == "phi" else p.operands[1:]):
            inner = _chosen(q, seen)
            if inner is None:
                return None
            found += inner
        return found
    return None


def _targets(call: Instruction, users: dict) -> list[Function]:
    slot_load = call.callee
    if slot_load.opcode in ("phi", "select"):
        chosen = _chosen(slot_load, set()) or []
        if any(call.element_type is not None and f.function_type != call.element_type for f in chosen):
            return []
        return list(dict.fromkeys(chosen))
    if slot_load.opcode != "load":
        return []
    based = _constant_offset(slot_load.operands[0])
    if based is None or not isinstance(based[0], Instruction) or based[0].opcode != "load":
        return []
    vptr, slot = based
    objects = _objects(vptr.operands[0], set())
    if not objects:
        return []
    tables = []
    for obj in objects:
        stored = [u for u in users.get(obj, []) if u.opcode == "store" and u.operands[1] is obj]
        if not stored:
            return []
        for store in stored:
            addresses = _vtable_addresses(store.operands[0], set())
            if addresses is None:
                return []               # something else lives there: not (only) a vtable pointer
            tables += addresses
    targets = []
    for table, offset in tables:
        entries, at = _entries(table.initializer), offset + slot
        entry = entries[at // 8] if at % 8 == 0 and 0 <= at // 8 < len(entries) else None
        if isinstance(entry, Function) and (call.element_type is None or entry.function_type == call.element_type):
            targets.append(entry)
    return list(dict.fromkeys(targets))


def _dispatch(module: Module, fn: Function, call: Instruction, targets: list[Function]) -> None:
    """Compare the loaded pointer with each target and call (invoke) it directly; join the results."""
    block = call.parent
    at = block.instructions.index(call)
    join = fn.add_block(f"{block.name}.virtual.join")
    if call.opcode == "invoke":
        normal, unwind = call.blocks
        block.instructions = block.instructions[:at]
        for phi in normal.phis:
            phi.blocks = [join if b is block else b for b in phi.blocks]
        Builder(join).br(normal)
    else:
        unwind = None
        join.instructions = block.instructions[at + 1:]
        for moved in join.instructions:
            moved.parent = join
        block.instructions = block.instructions[:at]
        for successor in join.successors:
            for phi in successor.phis:
                phi.blocks = [join if b is block else b for b in phi.blocks]
    incoming: list[tuple[Value, Block]] = []
    test = Builder(block)
    test.location = call.location
    for k, target in enumerate(targets):
        hit = fn.add_block(f"{block.name}.virtual.{k}")
        miss = fn.add_block(f"{block.name}.virtual.next{k}")
        test.cbranch(test.icmp("eq", call.callee, target), hit, miss)
        direct = Instruction(call.opcode, call.type, list(call.operands), callee=target,
                             element_type=target.function_type, location=call.location,
                             blocks=[join, unwind] if unwind is not None else [])
        if call.type != void:
            direct.name = fn.fresh_name("virtual")
        Builder(hit).insert(direct)
        if unwind is None:
            Builder(hit).br(join)
        incoming.append((direct, hit))
        test = Builder(miss)
        test.location = call.location
    failure = module.get_or_declare(UNKNOWN_TARGET, FunctionType(void, ()))
    failure.attributes.add("noreturn")
    test.call(failure, [])
    test.emit("unreachable", void, [])
    if unwind is not None:                     # each direct invoke unwinds from its own block
        for phi in unwind.phis:
            pairs = [(v, b) for v, b in zip(phi.operands, phi.blocks) if b is not block]
            value = next(v for v, b in zip(phi.operands, phi.blocks) if b is block)
            pairs += [(value, hit) for _, hit in incoming]
            phi.operands, phi.blocks = [v for v, _ in pairs], [b for _, b in pairs]
    if call.type != void:
        phi = Instruction("phi", call.type, [v for v, _ in incoming], blocks=[b for _, b in incoming])
        phi.name = call.name or fn.fresh_name("virtual")
        join.insert(0, phi)
        for inst in fn.instructions():
            if inst is not phi:
                inst.operands = [phi if o is call else o for o in inst.operands]
