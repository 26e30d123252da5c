"""Indirect calls through tables of function pointers become direct calls (before AD).

``double (*table[2])(double) = {square, cube}; ... table[k](x)`` calls through a pointer
loaded from a global the module initializes with functions and never writes. Such a call is
rewritten into a test of the loaded pointer against each function the table holds and a
direct call of the match; canonicalization then inlines them, so the AD engine sees no
indirect call. The pointer can hold nothing else: the table is only ever read, and its address
never escapes (a closed-world assumption about the module, as for any global it defines), so
the path where no function matches is unreachable.
"""
from __future__ import annotations

from .builder import Builder
from .core import Block, Constant, Function, GlobalVariable, Instruction, Module, Value, void

_POINTER_STEPS = ("getelementptr", "bitcast", "addrspacecast")


def devirtualize(module: Module) -> bool:
    """Rewrite every indirect call through a read-only function table; returns whether any was."""
    tables = _read_only_tables(module)
    changed = False
    for fn in list(module.functions.values()):
        for inst in [i for i in fn.instructions() if i.opcode == "call"]:
            targets = _targets(inst, tables)
            if targets:
                _dispatch(fn, inst, targets)
                changed = True
    return changed


def _root(p: Value) -> Value:
    while isinstance(p, Instruction) and p.opcode in _POINTER_STEPS:
        p = p.operands[0]
    return p


def _functions_in(c) -> list[Function] | None:
    """The functions an initializer holds (null entries allowed), or None if it holds anything else."""
    if isinstance(c, Function):
        return [c]
    if isinstance(c, Constant) and c.kind in ("null", "zero"):
        return []
    if isinstance(c, Constant) and c.kind == "aggregate":
        found = []
        for item in c.value:
            inner = _functions_in(item)
            if inner is None:
                return None
            found += inner
        return found
    return None


def _read_only_tables(module: Module) -> dict[GlobalVariable, list[Function]]:
    """Globals initialized with functions whose address is only loaded from (through GEPs)."""
    tables = {g: _functions_in(g.initializer) for g in module.globals.values() if g.initializer is not None}
    tables = {g: fs for g, fs in tables.items() if fs}
    for other in module.globals.values():                 # a table named by another global escapes
        for g in [g for g in tables if g is not other and _mentions(other.initializer, g)]:
            del tables[g]
    for fn in module.functions.values():
        users = fn.users()
        for g in list(tables):
            work, seen = [g], set()
            while work and g in tables:
                p = work.pop()
                for user in users.get(p, []):
                    if user.opcode in _POINTER_STEPS and user.operands[0] is p and user not in seen:
                        seen.add(user)
                        work.append(user)
                    elif not (user.opcode == "load" and user.operands[0] is p):
                        del tables[g]              # written, copied or escaping: its entries may change
                        break
    return tables


def _mentions(c, g: GlobalVariable) -> bool:
    if c is g:
        return True
    items = getattr(c, "value", None) if getattr(c, "kind", "") == "aggregate" else getattr(c, "operands", ())
    return any(_mentions(item, g) for item in items or ())


def _targets(call: Instruction, tables: dict) -> list[Function]:
    callee = call.callee
    if isinstance(callee, Function) or not isinstance(callee, Instruction) or callee.opcode != "load":
        return []
    functions = tables.get(_root(callee.operands[0]), [])
    wanted = call.element_type
    unique = list(dict.fromkeys(functions))
    return [f for f in unique if wanted is None or f.function_type == wanted]


def _dispatch(fn: Function, call: Instruction, targets: list[Function]) -> None:
    """Split ``call``'s block: compare the pointer with each target, call it directly, join."""
    block = call.parent
    at = block.instructions.index(call)
    join = fn.add_block(f"{block.name}.devirt.join")
    join.instructions = block.instructions[at + 1:]
    for moved in join.instructions:
        moved.parent = join
    block.instructions = block.instructions[:at]
    for successor in join.successors:                    # phis now come from the join block
        for phi in successor.phis:
            phi.blocks = [join if b is block else b for b in phi.blocks]
    pointer, returns = call.callee, call.type != void
    incoming: list[tuple[Value, Block]] = []
    test = Builder(block)
    for k, target in enumerate(targets):
        hit = fn.add_block(f"{block.name}.devirt.{k}")
        miss = fn.add_block(f"{block.name}.devirt.next{k}")
        test.cbranch(test.icmp("eq", pointer, target), hit, miss)
        direct = Builder(hit)
        result = direct.call(target, list(call.operands))
        result.location = call.location
        direct.br(join)
        incoming.append((result, hit))
        test = Builder(miss)
    test.emit("unreachable", void, [])                   # the table holds nothing else
    if returns:
        phi = Instruction("phi", call.type, [v for v, _ in incoming], blocks=[b for _, b in incoming])
        phi.name = call.name or fn.fresh_name("devirt")
        join.insert(0, phi)
        for inst in fn.instructions():
            inst.operands = [phi if o is call else o for o in inst.operands]
