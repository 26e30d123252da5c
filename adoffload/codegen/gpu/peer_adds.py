"""Warp-aggregated float atomics to global memory where lanes may share an address (NVPTX).

Why: a reverse sweep adds into arrays at addresses it loaded, ``d_params[kind[i] + kind[j], c]``
or ``d_pos[nbr[i, k], c]``. Nothing proves such lanes apart, and when they are not (a parameter
table of a few rows that every pair of a batch updates) the warp's 32 atomics queue on a few L2
addresses: the second-order kernel of examples/research spent 752 cycles per issued instruction
there on the H200 (ncu, 2026-12-04), 2x slower than the dense plain-JAX model.

What this pass does, on a grid kernel's body after lane combining and the -0.0 skip: each
``atomicrmw fadd`` (float or double; monotonic, not volatile, result unused) whose address does not
visibly keep a warp's lanes apart becomes a call of ``@adoffload.peer_fadd.<t>``, defined here:

* ``mask = activemask``; ``peers = match.any(mask, address)``: the lanes of ``mask`` adding to
  the same address (the lanes that ran ``activemask`` together run ``match.any`` together, the
  opportunistic ``coalesced_threads`` pattern lane_combining.py describes);
* a lane alone at its address adds as before (one compare more);
* the lanes of one address each sum the group's values in lane order, with ``shfl.sync.idx``
  over exactly ``peers`` (every member runs the same loop, so the exchanges match; other groups
  exchange over their own disjoint masks), and the group's first lane issues one atomic.

Only adds into an array of at most ``SMALL_ARRAY`` elements group (its extents are the body's
``%a.shape<k>`` parameters, the front end's flattening; foreign IR without them is left alone); into a
larger array the call adds plainly after one uniform branch, since lanes there rarely collide.

Every value is added exactly once, whatever the addresses, the active lanes or the divergence:
the run-time grouping decides the number of atomics, never the sum. Float sums are reassociated,
the freedom the atomics already had. Addresses that use the grid's innermost thread index through
operations keeping distinct values distinct (a thread's own ``d_x[i]``, a stencil's ``d_u[i + c]``
after lane combining) are left alone: ``match.any`` would find every lane alone and only cost time.
So are addresses the same for every thread (``total[0]``): the deferred reductions
(reductions.py) sum those over the whole block first.
On by default (codegen option ``peer_adds=False`` or ``ADOFFLOAD_PEER_ADDS=0`` turn it off): checked
on an emulated warp (tests/codegen/test_peer_adds.py) and on an H100 (tests/gpu/test_peer_adds_cuda.py).
There, on 2026-12-06 (benchmarks/results/2026-12-06-gpu), the research model's training step took
4.6 ms instead of 49.3 ms at 2048 x 64 atoms. The neighbour-list adjoints of benchmarks/user_kernels.py,
whose ``d_pos[j]`` adds take the one-branch path, timed the same within their spread. Not used for block
kernels (their shared arrays: shared_atomics.py), AMDGPU (wavefronts of 64: not done), before sm_75
(``activemask``), or with ``lane_combining=False`` (deterministic kernels).
"""
from __future__ import annotations

import re

from ... import ir as adoir
from ...ir.builder import Builder
from ...ir import core
from ...ir.core import FunctionType, void
from .reductions import uniform_slice
from .shared_atomics import _axes_used, _root

_TYPES = {"float": "f32", "double": "f64"}
PREFIX = "adoffload.peer_fadd."
# Arrays of at most this many elements get the grouping; larger ones keep plain atomics (one uniform
# branch): a neighbour list's d_pos[j] spreads over the whole array, few lanes collide, and match.any
# would be paid on every add, while a small table takes every thread's adds.
SMALL_ARRAY = 4096


def _lanes_apart(pointer, fn, grid_rank: int) -> bool:
    """A guess, for speed only: the address uses the innermost thread index (the one that varies
    inside a warp: row-major tids) through operations that keep distinct values distinct."""
    axis = grid_rank - 1
    return _axes_used(pointer, fn, {axis: 32}, keep_lanes=True) == {axis}


def _shapes(root, fn) -> list | None:
    """The extents of the array ``root`` (a body parameter ``%a`` followed by ``%a.shape0``, ...: the
    front end's flattening), or None for a pointer with no named extents (foreign IR, a local)."""
    if not isinstance(root, core.Argument) or not root.name:
        return None
    extents = {a.name: a for a in fn.args}
    found = []
    while f"{root.name}.shape{len(found)}" in extents:
        found.append(extents[f"{root.name}.shape{len(found)}"])
    return found or None


def _small(fn, root, extents, cache: dict):
    """``i1``: the array ``root`` has at most SMALL_ARRAY elements, computed once at the body's entry."""
    if root not in cache:
        b = Builder()
        b.position_before(fn.blocks[0].instructions[0])
        size = extents[0]
        for e in extents[1:]:
            size = b.mul(size, e)
        cache[root] = b.icmp("ule", size, core.Constant(core.i64, SMALL_ARRAY))
    return cache[root]


def aggregate_peer_adds(text: str, body_name: str, grid_rank: int) -> tuple[str, int]:
    """``text`` with the chosen adds of ``body_name`` made ``@adoffload.peer_fadd.<t>`` calls (the
    definitions appended); and how many."""
    if "atomicrmw fadd" not in text or grid_rank < 1:
        return text, 0
    module = adoir.import_module(text)
    fn = module.functions[body_name]
    used = fn.users()
    threads = set(fn.args[:grid_rank])   # an address from the other arguments only: reductions.py defers it
    found = [(inst, _root(inst.operands[0])) for inst in fn.instructions()
             if inst.opcode == "atomicrmw" and getattr(inst, "op", None) == "fadd"
             and str(inst.type) in _TYPES and inst.ordering == "monotonic" and "volatile" not in inst.flags
             and not used.get(inst) and not _lanes_apart(inst.operands[0], fn, grid_rank)
             and uniform_slice(inst.operands[0], threads) is None]
    found = [(inst, root, _shapes(root, fn)) for inst, root in found]
    found = [site for site in found if site[2] is not None]
    if not found:
        return text, 0
    kinds, small = set(), {}
    for inst, root, extents in found:
        pointer, value = inst.operands
        kinds.add(str(inst.type))
        gate = _small(fn, root, extents, small)
        callee = module.get_or_declare(PREFIX + _TYPES[str(inst.type)],
                                       FunctionType(void, (pointer.type, value.type, core.i1)))
        b = Builder()
        b.position_before(inst)
        b.location = inst.location
        b.call(callee, [pointer, value, gate])
        inst.parent.instructions.remove(inst)
    out = "\n".join(line for line in adoir.export_module(module).split("\n")
                    if not re.match(rf'declare void @"?{re.escape(PREFIX)}', line))     # defined below
    return out + "\n" + definitions(kinds, out), len(found)


_INTRINSICS = {
    "activemask": "declare i32 @llvm.nvvm.activemask()",
    "match": "declare i32 @llvm.nvvm.match.any.sync.i64(i32, i64)",
    "shfl": "declare i32 @llvm.nvvm.shfl.sync.idx.i32(i32, i32, i32, i32)",
    "laneid": "declare i32 @llvm.nvvm.read.ptx.sreg.laneid()",
    "cttz": "declare i32 @llvm.cttz.i32(i32, i1 immarg)",
}


def _words(t: str) -> tuple[str, str]:
    """(split ``%v`` into i32 words, rebuild ``%x`` from the exchanged words ``%x.w<k>``)."""
    if t == "float":
        return "  %w0 = bitcast float %v to i32\n", "  %x = bitcast i32 %x.w0 to float\n"
    return ("  %bits = bitcast double %v to i64\n  %w0 = trunc i64 %bits to i32\n"
            "  %high = lshr i64 %bits, 32\n  %w1 = trunc i64 %high to i32\n",
            "  %x.lo = zext i32 %x.w0 to i64\n  %x.hi0 = zext i32 %x.w1 to i64\n"
            "  %x.hi = shl i64 %x.hi0, 32\n  %x.bits = or i64 %x.hi, %x.lo\n  %x = bitcast i64 %x.bits to double\n")


def definitions(kinds, module_text: str = "") -> str:
    """``@adoffload.peer_fadd.<t>`` for each float type in ``kinds`` (module docstring), with the
    intrinsics' declarations ``module_text`` does not have yet."""
    out = [line + "\n" for line in _INTRINSICS.values()
           if not re.search(rf'@"?{re.escape(line.split("@")[1].split("(")[0])}"?\(', module_text)]
    for t in sorted(kinds):
        split, join = _words(t)
        words = 1 if t == "float" else 2
        exchanges = "".join(f"  %x.w{k} = call i32 @llvm.nvvm.shfl.sync.idx.i32(i32 %peers, i32 %w{k}, i32 %k, i32 31)\n"
                            for k in range(words))
        out.append(f"""define internal void @{PREFIX}{_TYPES[t]}(ptr %a, {t} %v, i1 %small) alwaysinline convergent nounwind {{
entry:
  br i1 %small, label %group, label %plain
group:
  %mask = call i32 @llvm.nvvm.activemask()
  %address = ptrtoint ptr %a to i64
  %peers = call i32 @llvm.nvvm.match.any.sync.i64(i32 %mask, i64 %address)
  %lane = call i32 @llvm.nvvm.read.ptx.sreg.laneid()
  %me = shl i32 1, %lane
  %alone = icmp eq i32 %peers, %me
  br i1 %alone, label %plain, label %split
plain:
  %old = atomicrmw fadd ptr %a, {t} %v monotonic
  ret void
split:
{split}  br label %loop
loop:
  %rest = phi i32 [ %peers, %split ], [ %rest.next, %loop ]
  %sum = phi {t} [ -0.0, %split ], [ %sum.next, %loop ]
  %k = call i32 @llvm.cttz.i32(i32 %rest, i1 true)
{exchanges}{join}  %sum.next = fadd {t} %sum, %x
  %rest.less = sub i32 %rest, 1
  %rest.next = and i32 %rest, %rest.less
  %more = icmp ne i32 %rest.next, 0
  br i1 %more, label %loop, label %lead
lead:
  %first = call i32 @llvm.cttz.i32(i32 %peers, i1 true)
  %leader = icmp eq i32 %lane, %first
  br i1 %leader, label %add, label %done
add:
  %old.sum = atomicrmw fadd ptr %a, {t} %sum.next monotonic
  br label %done
done:
  ret void
}}
""")
    return "".join(out)
