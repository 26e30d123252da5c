"""LLVM IR definitions of the cooperative operations (adoffload/language/collectives.py) per target.

* host: ``@adoffload.cpu.<op>(ptr scratch, i32 rank, i32 threads)`` combine the operands that the
  block's threads wrote to ``scratch`` (16 bytes each: float at 0, i32 at 8) before a barrier
  (codegen/host/block_split.py). Reductions run in lane order, so every lane gets the same bits. Warps
  of 32 lanes, or of 64 (``host_definitions(64)``: the AMDGPU definitions' semantics below, to test
  them on the CPU).
* NVPTX (32-lane warps): ``shfl.sync``, ``vote.ballot.sync`` and ``bar.sync`` (barrier.cta).
* AMDGPU (64-lane wavefronts, gfx9): ``ds_bpermute``, ``ballot`` and ``s_barrier`` between
  workgroup fences; ``warp_ballot`` gives the 32 bits of the caller's half of the wavefront.
Block reductions combine warp results through a small shared-memory array
(``@adoffload.block_scratch``) when the block is whole warps, and through one slot per thread
otherwise. Butterfly (xor) reductions give every lane bitwise the same value (fadd and maxnum are
commutative).
"""
from __future__ import annotations

from ..language.collectives import FLOAT_SUFFIXES

# max starts from NaN, which llvm.maxnum drops: NaN lanes are ignored and a warp or block of NaNs
# gives NaN on every target (-inf made the host and block reductions say -inf where a GPU's
# butterfly says NaN, and no lane held that maximum for the derivative to flow through).
_IDENTITY = {"sum": "-0.0", "max": "0x7FF8000000000000"}     # quiet NaN (hex double, valid for both types)


def _combine(kind: str, t: str, a: str, b: str, out: str) -> str:
    if kind == "sum":
        return f"  {out} = fadd {t} {a}, {b}\n"
    return f"  {out} = call {t} @llvm.maxnum.{'f32' if t == 'float' else 'f64'}({t} {a}, {t} {b})\n"


# --- host ----------------------------------------------------------------------------------------

def _host_loop(name: str, ret: str, lo: str, count: str, body: str, init: str, result: str,
               prologue: str = "", lanes: int = 32) -> str:
    """A helper looping ``%l`` over ``count`` slots from ``lo``; ``body`` sees ``%p`` (slot pointer)
    and the accumulator ``%acc``, defines ``%acc.next``; ``%lane``/``%base``: the caller's place in
    its group of ``lanes`` threads."""
    return f"""define {ret} @adoffload.cpu.{name}(ptr %s, i32 %rank, i32 %n) alwaysinline nounwind {{
entry:
  %lane = urem i32 %rank, {lanes}
  %base = sub i32 %rank, %lane
{prologue}  br label %loop
loop:
  %l = phi i32 [ 0, %entry ], [ %l.next, %loop ]
  %acc = phi {ret} [ {init}, %entry ], [ %acc.next, %loop ]
  %i = add i32 {lo}, %l
  %i64 = zext i32 %i to i64
  %off = mul i64 %i64, 16
  %p = getelementptr i8, ptr %s, i64 %off
  %q = getelementptr i8, ptr %p, i64 8
{body}  %l.next = add i32 %l, 1
  %done = icmp eq i32 %l.next, {count}
  br i1 %done, label %exit, label %loop
exit:
  ret {ret} {result}
}}
"""


def host_definitions(warp: int = 32) -> str:
    """The host's operations for warps of ``warp`` lanes (32, or 64 as AMD's wavefronts)."""
    out = []
    for suffix, t in FLOAT_SUFFIXES.items():
        for kind in ("sum", "max"):
            body = f"  %v = load {t}, ptr %p\n" + _combine(kind, t, "%acc", "%v", "%acc.next")
            out.append(_host_loop(f"warp_{kind}.{suffix}", t, "%base", str(warp), body, _IDENTITY[kind], "%acc.next",
                                  lanes=warp))
            out.append(_host_loop(f"block_{kind}.{suffix}", t, "0", "%n", body, _IDENTITY[kind], "%acc.next"))
        mine = """  %mine.off = mul i64 %rank64, 16
  %mine = getelementptr i8, ptr %s, i64 %mine.off
  %mine.q = getelementptr i8, ptr %mine, i64 8
  %src = load i32, ptr %mine.q
"""
        out.append(f"""define {t} @adoffload.cpu.shuffle.{suffix}(ptr %s, i32 %rank, i32 %n) alwaysinline nounwind {{
  %lane = urem i32 %rank, {warp}
  %base = sub i32 %rank, %lane
  %rank64 = zext i32 %rank to i64
{mine}  %src.lane = and i32 %src, {warp - 1}
  %i = add i32 %base, %src.lane
  %i64 = zext i32 %i to i64
  %off = mul i64 %i64, 16
  %p = getelementptr i8, ptr %s, i64 %off
  %v = load {t}, ptr %p
  ret {t} %v
}}
define {t} @adoffload.cpu.block_broadcast.{suffix}(ptr %s, i32 %rank, i32 %n) alwaysinline nounwind {{
  %rank64 = zext i32 %rank to i64
{mine}  %i64 = zext i32 %src to i64
  %off = mul i64 %i64, 16
  %p = getelementptr i8, ptr %s, i64 %off
  %v = load {t}, ptr %p
  ret {t} %v
}}
""")
        body = f"""  %v = load {t}, ptr %p
  %from = load i32, ptr %q
  %from.lane = and i32 %from, {warp - 1}
  %to.me = icmp eq i32 %from.lane, %lane
  %add = select i1 %to.me, {t} %v, {t} -0.0
  %acc.next = fadd {t} %acc, %add
"""
        out.append(_host_loop(f"shuffle_t.{suffix}", t, "%base", str(warp), body, "-0.0", "%acc.next", lanes=warp))
    first = """  %pred = load i32, ptr %q
  %set = icmp ne i32 %pred, 0
  %none = icmp eq i32 %acc, {none}
  %take = and i1 %set, %none
  %acc.next = select i1 %take, i32 %l, i32 %acc
"""
    out.append(_host_loop("warp_first_lane", "i32", "%base", str(warp), first.format(none=warp), str(warp), "%acc.next",
                          lanes=warp))
    out.append(_host_loop("block_first_thread", "i32", "0", "%n", first.format(none="%n"), "%n", "%acc.next"))
    ballot = """  %pred = load i32, ptr %q
  %set = icmp ne i32 %pred, 0
  %bit = shl i32 1, %l
  %add = select i1 %set, i32 %bit, i32 0
  %acc.next = or i32 %acc, %add
"""
    # 32 bits: the caller's 32-lane segment (its warp; on AMD its half of the wavefront, as ballot.i64
    # shifted by lane & 32 in the AMDGPU definition below)
    out.append(_host_loop("warp_ballot", "i32", "%base", "32", ballot, "0", "%acc.next"))
    out.append("declare float @llvm.maxnum.f32(float, float)\ndeclare double @llvm.maxnum.f64(double, double)\n")
    return "".join(out)


# --- GPUs ----------------------------------------------------------------------------------------

_NVPTX_BASE = """
declare i32 @llvm.nvvm.read.ptx.sreg.tid.x()
declare i32 @llvm.nvvm.shfl.sync.idx.i32(i32, i32, i32, i32)
declare i32 @llvm.nvvm.shfl.sync.bfly.i32(i32, i32, i32, i32)
declare i32 @llvm.nvvm.vote.ballot.sync(i32, i1)
declare void @llvm.nvvm.barrier.cta.sync.aligned.all(i32)
define void @adoffload.sync_threads() alwaysinline convergent nounwind {
  call void @llvm.nvvm.barrier.cta.sync.aligned.all(i32 0)
  ret void
}
define i32 @adoffload.thread_rank() alwaysinline nounwind {
  %t = call i32 @llvm.nvvm.read.ptx.sreg.tid.x()
  ret i32 %t
}
define i32 @adoffload.lane_id() alwaysinline nounwind {
  %t = call i32 @llvm.nvvm.read.ptx.sreg.tid.x()
  %l = and i32 %t, 31
  ret i32 %l
}
define i32 @adoffload.warp_size() alwaysinline nounwind {
  ret i32 32
}
define i32 @adoffload.exchange.idx(i32 %v, i32 %lane) alwaysinline convergent nounwind {
  %r = call i32 @llvm.nvvm.shfl.sync.idx.i32(i32 -1, i32 %v, i32 %lane, i32 31)
  ret i32 %r
}
define i32 @adoffload.exchange.xor(i32 %v, i32 %mask) alwaysinline convergent nounwind {
  %r = call i32 @llvm.nvvm.shfl.sync.bfly.i32(i32 -1, i32 %v, i32 %mask, i32 31)
  ret i32 %r
}
define i32 @adoffload.warp_first_lane(i1 %p) alwaysinline convergent nounwind {
  %b = call i32 @llvm.nvvm.vote.ballot.sync(i32 -1, i1 %p)
  %f = call i32 @llvm.cttz.i32(i32 %b, i1 false)
  ret i32 %f
}
declare i32 @llvm.cttz.i32(i32, i1)
define i32 @adoffload.warp_ballot(i1 %p) alwaysinline convergent nounwind {
  %b = call i32 @llvm.nvvm.vote.ballot.sync(i32 -1, i1 %p)
  ret i32 %b
}
"""

_AMDGPU_BASE = """
declare i32 @llvm.amdgcn.workitem.id.x()
declare i32 @llvm.amdgcn.mbcnt.lo(i32, i32)
declare i32 @llvm.amdgcn.mbcnt.hi(i32, i32)
declare i32 @llvm.amdgcn.ds.bpermute(i32, i32)
declare i64 @llvm.amdgcn.ballot.i64(i1)
declare void @llvm.amdgcn.s.barrier()
declare i64 @llvm.cttz.i64(i64, i1)
define void @adoffload.sync_threads() alwaysinline convergent nounwind {
  fence syncscope("workgroup") release
  call void @llvm.amdgcn.s.barrier()
  fence syncscope("workgroup") acquire
  ret void
}
define i32 @adoffload.thread_rank() alwaysinline nounwind {
  %t = call i32 @llvm.amdgcn.workitem.id.x()
  ret i32 %t
}
define i32 @adoffload.lane_id() alwaysinline nounwind {
  %lo = call i32 @llvm.amdgcn.mbcnt.lo(i32 -1, i32 0)
  %l = call i32 @llvm.amdgcn.mbcnt.hi(i32 -1, i32 %lo)
  ret i32 %l
}
define i32 @adoffload.warp_size() alwaysinline nounwind {
  ret i32 64
}
define i32 @adoffload.exchange.idx(i32 %v, i32 %lane) alwaysinline convergent nounwind {
  %m = and i32 %lane, 63
  %a = shl i32 %m, 2
  %r = call i32 @llvm.amdgcn.ds.bpermute(i32 %a, i32 %v)
  ret i32 %r
}
define i32 @adoffload.exchange.xor(i32 %v, i32 %mask) alwaysinline convergent nounwind {
  %me = call i32 @adoffload.lane_id()
  %src = xor i32 %me, %mask
  %r = call i32 @adoffload.exchange.idx(i32 %v, i32 %src)
  ret i32 %r
}
define i32 @adoffload.warp_first_lane(i1 %p) alwaysinline convergent nounwind {
  %b = call i64 @llvm.amdgcn.ballot.i64(i1 %p)
  %f = call i64 @llvm.cttz.i64(i64 %b, i1 false)
  %r = trunc i64 %f to i32
  ret i32 %r
}
define i32 @adoffload.warp_ballot(i1 %p) alwaysinline convergent nounwind {
  %b = call i64 @llvm.amdgcn.ballot.i64(i1 %p)
  %me = call i32 @adoffload.lane_id()
  %half = and i32 %me, 32
  %shift = zext i32 %half to i64
  %mine = lshr i64 %b, %shift
  %r = trunc i64 %mine to i32
  ret i32 %r
}
"""


def _exchange(t: str, how: str, v: str, lane: str, out: str) -> str:
    """``out`` = the ``t`` value ``v`` of another lane (idx or xor), through i32 exchanges."""
    if t == "float":
        return (f"  {out}.i = bitcast float {v} to i32\n"
                f"  {out}.x = call i32 @adoffload.exchange.{how}(i32 {out}.i, i32 {lane})\n"
                f"  {out} = bitcast i32 {out}.x to float\n")
    return (f"  {out}.i = bitcast double {v} to i64\n"
            f"  {out}.lo = trunc i64 {out}.i to i32\n"
            f"  {out}.sh = lshr i64 {out}.i, 32\n"
            f"  {out}.hi = trunc i64 {out}.sh to i32\n"
            f"  {out}.xlo = call i32 @adoffload.exchange.{how}(i32 {out}.lo, i32 {lane})\n"
            f"  {out}.xhi = call i32 @adoffload.exchange.{how}(i32 {out}.hi, i32 {lane})\n"
            f"  {out}.wlo = zext i32 {out}.xlo to i64\n"
            f"  {out}.whi = zext i32 {out}.xhi to i64\n"
            f"  {out}.shi = shl i64 {out}.whi, 32\n"
            f"  {out}.w = or i64 {out}.shi, {out}.wlo\n"
            f"  {out} = bitcast i64 {out}.w to double\n")


def gpu_definitions(target: str, block_threads: int) -> str:
    """The cooperative operations for ``target`` ("nvptx" | "amdgpu") in a block of ``block_threads``."""
    warp = 32 if target == "nvptx" else 64
    out = [_NVPTX_BASE if target == "nvptx" else _AMDGPU_BASE]
    whole_warps = block_threads % warp == 0
    warps = block_threads // warp if whole_warps else block_threads
    out.append(f"@adoffload.block_scratch = addrspace(3) global [{max(warps, 1)} x i64] undef, align 8\n")
    out.append("declare float @llvm.maxnum.f32(float, float)\ndeclare double @llvm.maxnum.f64(double, double)\n")
    for suffix, t in FLOAT_SUFFIXES.items():
        out.append(f"define {t} @adoffload.shuffle.{suffix}({t} %v, i32 %src) alwaysinline convergent "
                   f"nounwind {{\n" + _exchange(t, "idx", "%v", "%src", "%r") + f"  ret {t} %r\n}}\n")
        for kind in ("sum", "max"):
            steps, acc, mask = [], "%v", warp // 2
            while mask >= 1:
                steps.append(_exchange(t, "xor", acc, str(mask), f"%x{mask}"))
                steps.append(_combine(kind, t, acc, f"%x{mask}", f"%a{mask}"))
                acc, mask = f"%a{mask}", mask // 2
            out.append(f"define {t} @adoffload.warp_{kind}.{suffix}({t} %v) alwaysinline convergent "
                       f"nounwind {{\n" + "".join(steps) + f"  ret {t} {acc}\n}}\n")
            out.append(_block_reduce(kind, suffix, t, warp, warps, whole_warps))
        # shuffle_t: lane l adds the v of every lane whose src is l (a loop of `warp` exchanges)
        out.append(f"""define {t} @adoffload.shuffle_t.{suffix}({t} %v, i32 %src) alwaysinline convergent nounwind {{
entry:
  %me = call i32 @adoffload.lane_id()
  %src.m = and i32 %src, {warp - 1}
  br label %loop
loop:
  %l = phi i32 [ 0, %entry ], [ %l.next, %loop ]
  %acc = phi {t} [ -0.0, %entry ], [ %acc.next, %loop ]
{_exchange(t, "idx", "%v", "%l", "%vl")}  %sl = call i32 @adoffload.exchange.idx(i32 %src.m, i32 %l)
  %hit = icmp eq i32 %sl, %me
  %add = select i1 %hit, {t} %vl, {t} -0.0
  %acc.next = fadd {t} %acc, %add
  %l.next = add i32 %l, 1
  %done = icmp eq i32 %l.next, {warp}
  br i1 %done, label %exit, label %loop
exit:
  ret {t} %acc.next
}}
define {t} @adoffload.block_broadcast.{suffix}({t} %v, i32 %src) alwaysinline convergent nounwind {{
entry:
  %me = call i32 @adoffload.thread_rank()
  %mine = icmp eq i32 %me, %src
  br i1 %mine, label %write, label %wait
write:
  store {t} %v, ptr addrspace(3) @adoffload.block_scratch
  br label %wait
wait:
  call void @adoffload.sync_threads()
  %r = load {t}, ptr addrspace(3) @adoffload.block_scratch
  call void @adoffload.sync_threads()
  ret {t} %r
}}
""")
    out.append(f"""define i32 @adoffload.block_first_thread(i1 %p) alwaysinline convergent nounwind {{
entry:
  %me = call i32 @adoffload.thread_rank()
  %lead = icmp eq i32 %me, 0
  br i1 %lead, label %init, label %ready
init:
  store i32 {block_threads}, ptr addrspace(3) @adoffload.block_scratch
  br label %ready
ready:
  call void @adoffload.sync_threads()
  br i1 %p, label %mark, label %marked
mark:
  %old = atomicrmw umin ptr addrspace(3) @adoffload.block_scratch, i32 %me syncscope("workgroup") monotonic
  br label %marked
marked:
  call void @adoffload.sync_threads()
  %r = load i32, ptr addrspace(3) @adoffload.block_scratch
  call void @adoffload.sync_threads()
  ret i32 %r
}}
""")
    return "".join(out)


def _block_reduce(kind: str, suffix: str, t: str, warp: int, warps: int, whole_warps: bool) -> str:
    """block_<kind>: warp reductions, one slot per warp, a barrier, every thread combines the slots
    in order, a barrier (the slots may be reused). Without whole warps: one slot per thread."""
    partial = (f"  %w = call {t} @adoffload.warp_{kind}.{suffix}({t} %v)\n"
               f"  %lane = call i32 @adoffload.lane_id()\n  %lead = icmp eq i32 %lane, 0\n"
               f"  %slot.index = udiv i32 %me, {warp}\n") if whole_warps else \
        f"  %w = fadd {t} %v, -0.0\n  %lead = icmp eq i32 0, 0\n  %slot.index = add i32 %me, 0\n"
    return f"""define {t} @adoffload.block_{kind}.{suffix}({t} %v) alwaysinline convergent nounwind {{
entry:
  %me = call i32 @adoffload.thread_rank()
{partial}  %slot.i64 = zext i32 %slot.index to i64
  %slot = getelementptr i64, ptr addrspace(3) @adoffload.block_scratch, i64 %slot.i64
  br i1 %lead, label %write, label %wait
write:
  store {t} %w, ptr addrspace(3) %slot
  br label %wait
wait:
  call void @adoffload.sync_threads()
  br label %loop
loop:
  %k = phi i32 [ 0, %wait ], [ %k.next, %loop ]
  %acc = phi {t} [ {_IDENTITY[kind]}, %wait ], [ %acc.next, %loop ]
  %k64 = zext i32 %k to i64
  %kslot = getelementptr i64, ptr addrspace(3) @adoffload.block_scratch, i64 %k64
  %x = load {t}, ptr addrspace(3) %kslot
{_combine(kind, t, "%acc", "%x", "%acc.next")}  %k.next = add i32 %k, 1
  %done = icmp eq i32 %k.next, {warps}
  br i1 %done, label %exit, label %loop
exit:
  call void @adoffload.sync_threads()
  ret {t} %acc.next
}}
"""
