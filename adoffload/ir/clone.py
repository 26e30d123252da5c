"""Copying a function's body into another function (the derived functions start as copies)."""
from __future__ import annotations

import copy

from .cfg import reachable_blocks
from .core import Block, Function, Instruction


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
