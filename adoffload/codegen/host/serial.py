"""Plain read-modify-writes for host launches that one OS thread runs from start to end.

A reverse kernel scatters its adjoints with atomics (``d_pos[j] += ...`` through ``atomicrmw
fadd``), which the host backend lowers to a ``lock cmpxchg`` loop: a serializing instruction of
some 20 cycles per add, where a plain load, add and store costs a few. When the launcher runs the
whole launch on the calling thread (one chunk, or a device of one worker: runtime/host.py), no
other thread of that launch exists, and every atomic of the body is an ordinary update: this pass
rewrites each ``atomicrmw`` of the body into ``old = load p; store op(old, v), p`` (``old`` replacing
the result), so the adjoint's updates cost what a hand-written serial loop's do.

Only the body function is rewritten (code the entry calls is the kernel's own, inlined into it), and
the host definitions of the thread-uniform adds it calls (``@adoffload.uniform_fadd.*``, one atomic
add each, which a reverse kernel's ``d_pos[j] += ...`` goes through);
volatile atomics, vector atomics and operations without a plain equivalent here (``fmax``,
``uinc_wrap``, ...) stay atomic, as do ``cmpxchg`` instructions. The atomics of a launch were never
a promise between launches: two launches writing one array at once race on its plain stores
anyway (docs/ARCHITECTURE.md §4, "serial host launches").
"""
from __future__ import annotations

import re

from ...analysis.address_classes import UNIFORM_ADD_PREFIX
from ..ir_text import NAME, function_text
from ...ir.core import FloatType, IntType

# atomicrmw op -> how the new value is formed from (old, v): a binary opcode, or an icmp predicate
# choosing between them (min/max), or None for xchg (the new value is v)
_BINARY = {"fadd": "fadd", "fsub": "fsub", "add": "add", "sub": "sub", "and": "and", "or": "or", "xor": "xor"}
_CHOOSE = {"max": "sgt", "min": "slt", "umax": "ugt", "umin": "ult"}
_ANY_ATOMIC = re.compile(r"\batomicrmw\b")
# atomics other than the status record's xchg: what makes a serial variant worth compiling
_UPDATE_ATOMIC = re.compile(r"\batomicrmw (?:volatile )?(?!xchg\b)\w+ ")


_UPDATE_SITE = re.compile(rf'\batomicrmw (?:volatile )?(?!xchg\b)\w+ ptr(?: addrspace\(\d+\))? ({NAME})')
_BASE = re.compile(rf'\bptr(?: addrspace\(\d+\))? ({NAME})')       # a GEP's base, a cast's operand
_POINTER_STEPS = frozenset({"getelementptr", "bitcast", "addrspacecast"})


def update_roots(text: str, body_name: str) -> set[int]:
    """The positions of ``body_name``'s parameters that its update atomics (``atomicrmw`` but the
    status record's ``xchg``; not the thread-uniform adds, which the entry sums per chunk) add into,
    followed through ``getelementptr`` and pointer casts in the text; an address the walk cannot trace
    to a parameter (a phi, a load) is left out. A speed heuristic's input (jax/targets.serial_grid)."""
    found = function_text(text, body_name)
    if found is None:
        return set()
    params, defs, lines = found
    position = {name: k for k, name in enumerate(params)}
    roots = set()
    for line in lines:
        site = _UPDATE_SITE.search(line)
        if site is None:
            continue
        name, seen = site[1], set()
        while name in defs and name not in seen and defs[name][0] in _POINTER_STEPS:
            seen.add(name)
            base = _BASE.search(defs[name][1])
            if base is None:
                break
            name = base[1]
        if name in position:
            roots.add(position[name])
    return roots


def has_update_atomics(text: str) -> bool:
    """Whether the module has an atomicrmw other than ``xchg`` (the status record's claim): only
    then does a serial variant differ in speed from the ordinary one."""
    return _UPDATE_ATOMIC.search(text) is not None


def _rewritable(inst) -> bool:
    if inst.opcode != "atomicrmw" or "volatile" in inst.flags:
        return False
    t = inst.operands[1].type
    if inst.op in ("fadd", "fsub"):
        return isinstance(t, FloatType)
    return isinstance(t, IntType) and (inst.op in _BINARY or inst.op in _CHOOSE or inst.op == "xchg")


def plain_atomics(text: str, body_name: str) -> tuple[str, int]:
    """``text`` with the body's atomicrmw instructions made plain (module docstring), and how many
    were rewritten (0: ``text`` unchanged)."""
    if not _ANY_ATOMIC.search(text):
        return text, 0
    from ... import ir
    from ...ir.builder import Builder
    module = ir.import_module(text)
    body = module.functions.get(body_name)
    if body is None or not body.blocks:
        return text, 0
    # the body's own, and those of the host definitions of a reverse kernel's thread-uniform adds
    # (``@adoffload.uniform_fadd.*``: one atomic add each, called only by the kernel's code)
    helpers = [f for name, f in module.functions.items() if name.startswith(UNIFORM_ADD_PREFIX) and f.blocks]
    sites = [inst for fn in [body, *helpers] for inst in fn.instructions() if _rewritable(inst)]
    if not sites:
        return text, 0
    replaced = {}
    for inst in sites:
        pointer, value = inst.operands
        b = Builder()
        b.position_before(inst)
        b.location = inst.location
        old = b.load(value.type, pointer, align=inst.align)
        if inst.op == "xchg":
            new = value
        elif inst.op in _BINARY:
            new = b.binary(_BINARY[inst.op], old, value)
        else:
            new = b.select(b.icmp(_CHOOSE[inst.op], old, value), old, value)
        b.store(new, pointer, align=inst.align)
        inst.parent.instructions.remove(inst)
        replaced[id(inst)] = old
    for fn in [body, *helpers]:
        for other in fn.instructions():
            other.operands = [replaced.get(id(o), o) for o in other.operands]
    return ir.export_module(module), len(sites)
