"""One copy per warp of a shadow shared array that several warps add into (NVPTX).

Why: sm_90 has no float add on shared memory; each add is a compare-and-swap loop that retries
while other lanes change the element. Where lanes of many warps add into one element -- the reverse
of a register-tiled matmul adds ``d_Bs[k, tj + 16 n]`` from the 16 threads of a column, 2 lanes in
each of 8 warps -- the loops of different warps collide and retry. shared_atomics.py combines the
lanes of one warp; this removes the collisions between warps: each warp adds into its own copy.

The array's value is the sum of its ``W`` copies (``W`` warps in the block). An add goes into the
adding warp's copy; a load reads the ``W`` copies and sums them, in copy order; a store writes its
value into copy 0 and zero into the others. Every copy starts zeroed (only zero-filled arrays, the
derivative kernels' shadows, are chosen). The sum is what the array would hold for any order that
the single array allowed: adds commute, and in a block kernel that is race-free (shared_races.py)
no element is loaded or stored while another thread adds into it between the same two barriers
(the adds into a shadow element are the reverse of the primal's loads of it, its loads and stores
the reverse of the primal's stores), so a load never misses an add that the single array would
have had -- only the rounding of the sum changes, as with the atomics' run-time order.

Chosen, for speed only (every choice is correct): a zero-filled array that the body reaches only
through address arithmetic, by float loads and stores and unused-result float adds (atomics, or
shared_atomics' calls, which run first so that their lane groups are found on the plain address:
the copy offset is alike in a warp); an add whose address leaves out a thread index that differs
between warps (lanes of several warps then share elements); adds in a loop that runs no load or store
of the array (they run more often than the ``W``-fold loads and stores cost); and copies that fit in
the static shared-memory budget (48 KiB a block), first arrays first.
"""
from __future__ import annotations

import math

from .. import ir as adoir
from ..ir.builder import Builder, zero
from ..ir.cfg import dominator_sets
from ..ir.core import Constant, FunctionType, Instruction, VectorType, const, i8, i32, i64
from .shared_atomics import _axes_used

WARP = 32
STATIC_SHARED_BUDGET = 48 * 1024
COPY_ALIGN = 16
_ADDRESS = ("getelementptr", "bitcast", "addrspacecast")
_ADD_CALLS = "adoffload.shared_fadd"


def _float_type(t) -> bool:
    return t.is_float if not isinstance(t, VectorType) else t.element.is_float


def _is_add(inst: Instruction, used: dict) -> bool:
    if inst.opcode == "atomicrmw":
        return inst.op == "fadd" and not used.get(inst)
    return inst.opcode == "call" and getattr(inst.callee, "name", "").startswith(_ADD_CALLS)


def _accesses(fn, arg, used: dict) -> dict[str, list] | None:
    """{"load": [...], "store": [...], "add": [(inst, pointer), ...]} of the array ``arg``, or None
    when the body uses it any other way."""
    found = {"load": [], "store": [], "add": []}
    work, seen = [arg], set()
    while work:
        p = work.pop()
        if id(p) in seen:
            continue
        seen.add(id(p))
        for user in used.get(p, ()):
            ops = user.operands
            if user.opcode in _ADDRESS and ops[0] is p and all(o is not p for o in ops[1:]):
                work.append(user)
            elif user.opcode == "load" and ops[0] is p and _float_type(user.type):
                found["load"].append(user)
            elif user.opcode == "store" and ops[1] is p and ops[0] is not p and _float_type(ops[0].type):
                found["store"].append(user)
            elif _is_add(user, used) and (user.opcode == "call" or ops[0] is p):
                found["add"].append((user, p))
            else:
                return None
    return found


def _natural_loops(fn) -> list[set]:
    """The blocks of each natural loop (a back edge to a dominating header)."""
    dom = dominator_sets(fn)
    preds = fn.predecessors()
    loops = []
    for latch in fn.blocks:
        for header in latch.successors:
            if header not in dom.get(latch, ()):
                continue
            body, work = {header}, [latch]
            while work:
                b = work.pop()
                if b not in body:
                    body.add(b)
                    work.extend(preds.get(b, ()))
            loops.append(body)
    return loops


def _repeated_alone(found, loops) -> bool:
    """Whether every add lies in a loop that runs no load or store of the array: the adds then run
    more often than the loads and stores that the copies multiply."""
    others = {i.parent for i in found["load"] + found["store"]}
    return all(any(inst.parent in body and not body & others for body in loops) for inst, _ in found["add"])


def _cross_warp_axes(block) -> dict[int, int]:
    """{axis: extent} of the thread indices that take different values in different warps (threads
    numbered row-major, the last axis fastest)."""
    axes, stride = {}, 1
    for k in reversed(range(len(block))):
        if block[k] > 1 and stride * block[k] > WARP:
            axes[k] = block[k]
        stride *= block[k]
    return axes


def _copy_stride(nbytes: int) -> int:
    return -(-int(nbytes) // COPY_ALIGN) * COPY_ALIGN


def privatize_shadow_adds(module_text: str, body_name: str, shared_args: range, shared, block):
    """``(module_text, shared)``: the body with the chosen arrays (module docstring) reached per warp,
    and ``shared`` (``(nbytes, zero)`` per array) with their sizes made ``W`` copies."""
    warps = math.prod(block) // WARP
    shared = list(shared)
    if warps < 2 or "fadd" not in module_text:
        return module_text, shared
    module = adoir.import_module(module_text)
    fn = module.functions[body_name]
    used = fn.users()
    loops = _natural_loops(fn)
    cross = _cross_warp_axes(block)
    total = sum(_copy_stride(n) for n, _ in shared)
    chosen = []
    for k, (nbytes, zero_filled) in enumerate(shared):
        arg = fn.args[shared_args[k]]
        found = _accesses(fn, arg, used) if zero_filled else None
        if not found or not found["add"]:
            continue
        shared_by_warps = any(set(cross) - _axes_used(p, fn, cross, keep_lanes=False) for _, p in found["add"])
        extra = _copy_stride(nbytes) * (warps - 1)
        if shared_by_warps and _repeated_alone(found, loops) and total + extra <= STATIC_SHARED_BUDGET:
            total += extra
            chosen.append((k, arg, found))
    if not chosen:
        return module_text, shared
    b = Builder()
    b.position_before(fn.entry.instructions[0])
    rank = b.call(module.get_or_declare("adoffload.thread_rank", FunctionType(i32, ())), [])
    warp = b.cast("zext", b.binary("lshr", rank, const(i32, 5)), i64)
    for k, arg, found in chosen:
        stride = _copy_stride(shared[k][0])
        shared[k] = (stride * warps, True)
        _rewrite(fn, found, b.mul(warp, const(i64, stride)), stride, warps)
    return adoir.export_module(module), shared


def _offset(b: Builder, pointer, offset):
    return b.gep(i8, pointer, [offset])


def _rewrite(fn, found, warp_offset, stride: int, warps: int) -> None:
    b = Builder()
    for inst, pointer in found["add"]:
        b.position_before(inst)
        moved = _offset(b, pointer, warp_offset)
        inst.operands = [moved if o is pointer else o for o in inst.operands]
    for store in found["store"]:
        value, pointer = store.operands
        block = store.parent
        b.position_before(block.instructions[block.instructions.index(store) + 1])
        for c in range(1, warps):
            cleared = Constant(value.type, kind="zero") if isinstance(value.type, VectorType) else zero(value.type)
            b.store(cleared, _offset(b, pointer, const(i64, c * stride)), align=store.align)
    for load in found["load"]:
        pointer = load.operands[0]
        block = load.parent
        b.position_before(block.instructions[block.instructions.index(load) + 1])
        total = load
        for c in range(1, warps):
            copy = b.load(load.type, _offset(b, pointer, const(i64, c * stride)), align=load.align)
            total = b.fadd(total, copy)
        _replace_uses(fn, load, total)


def _replace_uses(fn, old, new) -> None:
    """Every use of ``old`` becomes ``new``, except in the sum chain that starts from ``old``."""
    chain = set()
    v = new
    while isinstance(v, Instruction) and v is not old and v.opcode == "fadd":
        chain.add(id(v))
        v = v.operands[0]
    for inst in fn.instructions():
        if id(inst) in chain:
            continue
        inst.operands = [new if o is old else o for o in inst.operands]
