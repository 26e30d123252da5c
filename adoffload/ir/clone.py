"""Copying a function's body into another function (the derived functions start as copies), and whole
modules (the import memo hands out copies: llvm_import.import_module)."""
from __future__ import annotations

import copy

from .cfg import reachable_blocks
from .core import Block, Function, Instruction, Module, SourceLocation, Type


def clone_function_body(src: Function, dst: Function, value_map: dict) -> tuple[dict[Block, Block], list[Instruction]]:
    """Copy ``src``'s reachable blocks into ``dst`` (``value_map`` seeded with args); returns
    the block map and the cloned ``ret`` instructions."""
    blocks = reachable_blocks(src)
    block_map = {b: dst.add_block(b.name) for b in blocks}
    clones = []
    for b in blocks:
        for inst in b.instructions:
            new = copy.copy(inst)
            new.flags = set(inst.flags)
            block_map[b].append(new)
            value_map[inst] = new
            clones.append((inst, new))
    returns = []
    for inst, new in clones:
        if inst.opcode == "phi":
            pairs = [(v, blk) for v, blk in zip(inst.operands, inst.blocks) if blk in block_map]
            new.operands = [value_map.get(v, v) for v, _ in pairs]
            new.blocks = [block_map[blk] for _, blk in pairs]
        else:
            new.operands = [value_map.get(v, v) for v in inst.operands]
            new.blocks = [block_map[blk] for blk in inst.blocks]
        if inst.callee is not None:          # an indirect call's callee is a value of this function too
            new.callee = value_map.get(inst.callee, inst.callee)
        if inst.opcode == "ret":
            returns.append(new)
    return block_map, returns


def clone_module(module: Module) -> Module:
    """A copy of ``module`` that shares no mutable object with it: globals, functions, arguments,
    blocks, instructions and constants are new objects (with every reference between them mapped to
    the copies); types and source locations, which are immutable, are shared. What ``copy.deepcopy``
    gives, some 8x faster and without recursing along def-use chains: every object the module holds
    in its containers gets its copy first, then each copy's fields are mapped (constants, the only
    values outside those containers, and any object of another kind, by ``copy.deepcopy`` with the
    same memo)."""
    memo: dict[int, object] = {}
    originals = []

    def shell(obj):
        new = object.__new__(type(obj))
        memo[id(obj)] = new
        originals.append(obj)
        return new

    shell(module)
    for g in module.globals.values():
        shell(g)
    for fn in module.functions.values():
        shell(fn)
        for a in fn.args:
            shell(a)
        for b in fn.blocks:
            shell(b)
            for inst in b.instructions:
                shell(inst)
    memo[id(memo)] = originals           # copy.deepcopy's keep-alive list: the originals stay alive
    for obj in originals[:]:
        memo[id(obj)].__dict__.update({k: _mapped(v, memo) for k, v in obj.__dict__.items()})
    return memo[id(module)]


_ATOMIC = (str, int, float, bool, type(None), Type, SourceLocation, frozenset)


def _mapped(value, memo: dict):
    if isinstance(value, _ATOMIC) and not (type(value) is frozenset and any(not isinstance(v, str) for v in value)):
        return value
    found = memo.get(id(value))
    if found is not None:
        return found
    kind = type(value)
    if kind is list:
        return [_mapped(v, memo) for v in value]
    if kind is tuple:
        return tuple(_mapped(v, memo) for v in value)
    if kind is set:
        return {_mapped(v, memo) for v in value}
    if kind is dict:
        return {_mapped(k, memo): _mapped(v, memo) for k, v in value.items()}
    return copy.deepcopy(value, memo)
