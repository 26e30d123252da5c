"""Checks that do not depend on the thread: hoisted out of the GPU entries' fast paths.

A bounds check of ``atomic_add(total, 0, v)`` tests ``0 < total.shape0``: the same answer
for every thread of the launch. The body still branches to its failure block on it, once per
inlined call, and those branches keep the k calls of a fast path (abi.py) apart, so their
loads never merge into 128-bit ones and a reduction's loop never unrolls cleanly.

This pass adds ``i1 @<body>.checks_ok(<body params>)``: the conjunction of every such check
of the body passing. A check is a conditional branch whose condition is *strictly uniform*
(computed from non-thread arguments and constants only, as reductions.uniform_slice defines
it) and one of whose successors is a failure block (it starts by exchanging the status
record's code word). The entry takes its fast path only where ``checks_ok`` holds, and says
so to LLVM (``llvm.assume``), so the inlined copies of those checks fold away; where it does
not hold, the guarded path runs the body unchanged and reports the failure as before.

``add_thread_checks_function`` does the same for every check computed from the arguments alone,
tids included (``@<body>.thread_checks_ok``): a body that indexes one array at several affine
offsets of its thread id (RAJAPerf's ``lcals_diff_predict``: ten of them) otherwise branches
before every load, and since a load may not move above the check that guards it, each load waits
for the one before (25% of that kernel's time on the H200). One test per thread up front, then
``@<body>.unchecked``, a copy of the body whose branches on those checks go straight to their
passing side (sound: each condition is a pure function of the same arguments, so it holds there
exactly as the test said); where the test fails, the body as it was, which stops at the first
failing access exactly as before. (An ``llvm.assume`` of the conjunction, as the fast paths use,
does not fold ten checks: LLVM merges the two copies back.)
"""
from __future__ import annotations

import copy

from ...ir import core
from .reductions import uniform_slice

CHECKS_SUFFIX = ".checks_ok"
THREAD_CHECKS_SUFFIX = ".thread_checks_ok"
UNCHECKED_SUFFIX = ".unchecked"
# bodies above this size keep their checks in place: the unchecked copy doubles their O3 time (the
# RAJAPerf kernels' adjoints have 40-270 instructions)
MAX_COPIED_INSTRUCTIONS = 2000


def checks_function_name(body_name: str) -> str:
    return body_name + CHECKS_SUFFIX


def add_checks_function(text: str, body_name: str, grid_rank: int) -> tuple[str, str | None]:
    """``text`` with ``@<body>.checks_ok`` added, and its name; (text, None) when the body
    has no thread-independent check."""
    if "atomicrmw xchg" not in text:          # no failure block at all: nothing to hoist
        return text, None
    from ...ir import export_module, import_module
    module = import_module(text)
    body = module.functions[body_name]
    checks = uniform_checks(body, grid_rank)
    if not checks:
        return text, None
    module.add_function(_checks_function(checks_function_name(body_name), body, checks))
    return export_module(module), checks_function_name(body_name)


def thread_checks_function_name(body_name: str) -> str:
    return body_name + THREAD_CHECKS_SUFFIX


def unchecked_function_name(body_name: str) -> str:
    return body_name + UNCHECKED_SUFFIX


def add_thread_checks_function(text: str, body_name: str, minimum: int = 2) -> tuple[str, str | None]:
    """``text`` with ``@<body>.thread_checks_ok`` (every check whose condition the arguments
    alone decide, tids included, passes) and ``@<body>.unchecked`` (the body without those
    checks) added, and the first one's name; (text, None) when the body has fewer than
    ``minimum`` such checks (one check costs one branch either way)."""
    if "atomicrmw xchg" not in text:          # no failure block at all
        return text, None
    from ...ir import export_module, import_module
    module = import_module(text)
    body = module.functions[body_name]
    if sum(len(blk.instructions) for blk in body.blocks) > MAX_COPIED_INSTRUCTIONS:
        return text, None
    checks = argument_checks(body, set())
    if len(checks) < minimum:
        return text, None
    name = thread_checks_function_name(body_name)
    module.add_function(_checks_function(name, body, checks))
    module.add_function(_without_checks(unchecked_function_name(body_name), body, checks))
    return export_module(module), name


def uniform_checks(body: core.Function, grid_rank: int) -> list[tuple[core.Value, bool, list]]:
    """(condition, value it has when the check passes, its uniform slice) per check."""
    return argument_checks(body, set(body.args[:grid_rank]))


def argument_checks(body: core.Function, thread_args: set) -> list[tuple[core.Value, bool, list]]:
    """(condition, value it has when the check passes, its slice) per check whose condition is
    computed from constants and the arguments other than ``thread_args``."""
    status = body.args[-1]
    found = []
    for block in body.blocks:
        term = block.terminator
        if term is None or term.opcode != "br" or len(term.blocks) != 2:
            continue
        then, otherwise = term.blocks
        fails = (_is_failure(then, status), _is_failure(otherwise, status))
        if fails[0] == fails[1]:
            continue
        slice_ = uniform_slice(term.operands[0], thread_args)
        if slice_ is not None and not any(_may_be_poison(i) for i in slice_):
            found.append((term.operands[0], fails[1], slice_))
    return found


def _may_be_poison(inst: core.Instruction) -> bool:
    """A shift by an amount that is not a constant below the width may give poison, and the
    entry evaluates every check even where the body would not reach it: such checks stay put."""
    if inst.opcode not in ("shl", "lshr", "ashr"):
        return False
    amount = inst.operands[1]
    return not (isinstance(amount, core.Constant) and amount.kind == "scalar"
                and 0 <= int(amount.value) < inst.type.bits)


def _is_failure(block: core.Block, status: core.Argument) -> bool:
    """Whether ``block`` starts by claiming the status record (``atomicrmw xchg`` of its code)."""
    first = next((i for i in block.instructions if i.opcode != "phi"), None)
    return first is not None and first.opcode == "atomicrmw" and first.op == "xchg" \
        and first.operands[0] is status


def _checks_function(name: str, body: core.Function, checks: list) -> core.Function:
    """``i1 @name(<body params>)``: every check passes (external until abi._link internalizes it)."""
    args = [core.Argument(a.type, a.name, a.index) for a in body.args]
    fn = core.Function(name, core.FunctionType(core.i1, tuple(a.type for a in args)), args,
                       attributes={"alwaysinline"})
    block = fn.add_block("entry")
    mapping: dict = dict(zip(body.args, args))
    count = 0

    def emit(opcode, type_, operands, **fields) -> core.Instruction:
        nonlocal count
        count += 1
        return block.append(core.Instruction(opcode, type_, operands, name=f"c{count}", **fields))

    ok: core.Value = core.const(core.i1, 1)
    for condition, passing, slice_ in checks:
        for inst in slice_:
            if inst not in mapping:
                mapping[inst] = emit(inst.opcode, inst.type, [mapping.get(o, o) for o in inst.operands],
                                     predicate=inst.predicate, element_type=inst.element_type,
                                     flags=set())      # no poison flags: evaluated where the body may not run
        value = mapping.get(condition, condition)
        passes = value if passing else emit("xor", core.i1, [value, core.const(core.i1, 1)])
        ok = emit("and", core.i1, [ok, passes])
    block.append(core.Instruction("ret", core.void, [ok]))
    return fn


def _without_checks(name: str, body: core.Function, checks: list) -> core.Function:
    """A copy of ``body`` in which each of ``checks`` branches to its passing side only."""
    args = [core.Argument(a.type, a.name, a.index) for a in body.args]
    fn = core.Function(name, body.function_type, args, attributes=set(body.attributes))
    values: dict = dict(zip(body.args, args))
    blocks = {blk: fn.add_block(blk.name) for blk in body.blocks}
    copies = []
    for blk in body.blocks:
        for inst in blk.instructions:
            new = copy.copy(inst)
            new.flags = set(inst.flags)
            values[inst] = blocks[blk].append(new)
            copies.append((inst, new))
    for inst, new in copies:
        new.operands = [values.get(v, v) for v in inst.operands]
        new.blocks = [blocks[blk] for blk in inst.blocks]
    conditions = {id(condition): passing for condition, passing, _ in checks}
    for inst, new in copies:
        if inst.opcode == "br" and len(inst.blocks) == 2 and id(inst.operands[0]) in conditions:
            kept = inst.blocks[0] if conditions[id(inst.operands[0])] else inst.blocks[1]
            new.operands, new.blocks = [], [blocks[kept]]
    _drop_unreachable(fn)
    return fn


def _drop_unreachable(fn: core.Function) -> None:
    """Remove the blocks no path from the entry reaches (the failure blocks of dropped checks),
    and the phi entries of edges that no longer exist."""
    reached, stack = {fn.entry}, [fn.entry]
    while stack:
        for succ in stack.pop().successors:
            if succ not in reached:
                reached.add(succ)
                stack.append(succ)
    fn.blocks = [blk for blk in fn.blocks if blk in reached]
    edges = {(blk, succ) for blk in fn.blocks for succ in blk.successors}
    for blk in fn.blocks:
        for phi in blk.phis:              # entries of edges that are gone (a rewired check's)
            pairs = [(v, b) for v, b in zip(phi.operands, phi.blocks) if (b, blk) in edges]
            phi.operands, phi.blocks = [v for v, _ in pairs], [b for _, b in pairs]
