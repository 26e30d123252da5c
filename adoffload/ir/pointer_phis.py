"""Pointers carried through integer phis and selects become pointer phis and selects again.

rustc's ``RawVec`` (``vec![0.0; n]``, ``Vec::with_capacity``, ``to_vec``, ``collect``) keeps a fresh
allocation as an integer where it is made and the dangling address ``8`` (the alignment) where
nothing is allocated; the join is an integer phi and the pointer is rebuilt with ``inttoptr``::

    %i = phi i64 [ %a, %alloc ], [ 8, %empty ]      ; %a = ptrtoint ptr %p to i64
    %q = inttoptr i64 %i to ptr

The AD engine cannot tell where an ``inttoptr`` points and refuses the float stores and loads
through it. ``%q`` is the same address as ``phi ptr [ %p, %alloc ], [ inttoptr (i64 8 to ptr),
%empty ]``, which the engine follows: ``%p`` is the heap block and ``inttoptr (i64 8)`` a pointer
nothing is accessed through. The rewrite is taken only when every integer reaching ``%q`` through
phis and selects (64-bit: the whole address) is a ``ptrtoint`` of a pointer of ``%q``'s type or an
integer constant; any arithmetic on the integer leaves the ``inttoptr`` as it is (and refused where
it matters).
"""
from __future__ import annotations

from .core import Constant, ConstantExpr, Function, Instruction, Module, Value

_NETWORK = ("phi", "select")


def pointer_phis(module: Module) -> int:
    """Rewrite every such ``inttoptr`` of ``module``'s defined functions; returns how many."""
    return sum(_rewrite_function(fn) for fn in module.functions.values() if not fn.is_declaration)


def _rewrite_function(fn: Function) -> int:
    rewritten = 0
    for cast in [i for i in fn.instructions() if i.opcode == "inttoptr"]:
        source = cast.operands[0]
        if not (isinstance(source, Instruction) and source.opcode in _NETWORK and source.type.bits == 64):
            continue                    # a narrower integer holds a truncated address: not the pointer
        nodes = _network(source, cast.type)
        if nodes is None:
            continue
        mirror = _mirror(fn, nodes, cast.type)
        _replace_uses(fn, cast, mirror[source])
        leaves = [v for n in nodes for v in _carried(n) if isinstance(v, Instruction) and v.opcode == "ptrtoint"]
        _drop_dead(fn, [cast] + nodes + leaves)
        rewritten += 1
    return rewritten


def _network(root: Instruction, pointer_type) -> list[Instruction] | None:
    """The phis and selects whose integer values reach ``root`` (root first), when each of their
    leaves is a ptrtoint of a ``pointer_type`` pointer or an integer constant; None otherwise."""
    nodes, seen, work = [], {id(root)}, [root]
    while work:
        node = work.pop()
        nodes.append(node)
        for value in _carried(node):
            if isinstance(value, Instruction) and value.opcode in _NETWORK and value.type == root.type:
                if id(value) not in seen:
                    seen.add(id(value))
                    work.append(value)
            elif _leaf(value, pointer_type) is None:
                return None
    return nodes


def _carried(node: Instruction) -> list[Value]:
    return list(node.operands) if node.opcode == "phi" else list(node.operands[1:])


def _leaf(value: Value, pointer_type) -> Value | None:
    """The pointer an integer leaf stands for, or None when it is not one the rewrite knows."""
    if isinstance(value, Instruction):
        if value.opcode == "ptrtoint" and value.operands[0].type == pointer_type:
            return value.operands[0]
        return None
    if isinstance(value, ConstantExpr):
        if value.opcode == "ptrtoint" and value.operands[0].type == pointer_type:
            return value.operands[0]
        return None
    if isinstance(value, Constant):
        if value.kind == "scalar" and isinstance(value.value, int):
            return ConstantExpr(pointer_type, None, opcode="inttoptr", operands=(value,))
        if value.kind in ("undef", "poison"):
            return Constant(pointer_type, None, value.kind)
    return None


def _mirror(fn: Function, nodes: list[Instruction], pointer_type) -> dict[Instruction, Instruction]:
    """A pointer phi/select next to each integer one, with the pointers its leaves stand for."""
    mirror = {}
    for node in nodes:
        copy = Instruction(node.opcode, pointer_type, name=fn.fresh_name(f"{node.name or 'p'}.ptr"),
                           blocks=list(node.blocks) if node.opcode == "phi" else [], location=node.location)
        block = node.parent
        block.insert(block.instructions.index(node), copy)
        mirror[node] = copy
    for node, copy in mirror.items():
        carried = [mirror[v] if v in mirror else _leaf(v, pointer_type) for v in _carried(node)]
        copy.operands = carried if node.opcode == "phi" else [node.operands[0]] + carried
    return mirror


def _replace_uses(fn: Function, old: Value, new: Value) -> None:
    for inst in fn.instructions():
        inst.operands = [new if o is old else o for o in inst.operands]
        if inst.callee is old:
            inst.callee = new


def _drop_dead(fn: Function, candidates: list[Instruction]) -> None:
    """Remove the candidates used only by candidates that are removed too (the cast, the integer
    phis and selects of its network, which may use each other around a loop, their ptrtoints)."""
    users = fn.users()
    dead = {id(c): c for c in candidates if c.parent is not None}
    changed = True
    while changed:
        changed = False
        for key, inst in list(dead.items()):
            if any(id(u) not in dead for u in users.get(inst, [])):
                del dead[key]
                changed = True
    for inst in dead.values():
        inst.parent.instructions.remove(inst)
        inst.parent = None
