"""Warp-aggregated float adds into block-shared memory (NVPTX).

Why: sm_90 has no native float atomic add on shared memory; ptxas turns ``atom.shared.add.f32``
into a compare-and-swap loop (``ATOMS.CAST.SPIN``) that retries once per lane hitting the same
address. Reverse-mode AD makes many such adds: the adjoint of a tile element that a whole row of
threads reads (``a[m] = As[k, ti * 8 + m]`` in a register-tiled matmul) is 16 lanes adding to one
address. Here a lane first sums its value with its butterfly partners (lane xor 1, 2, 4, 8, 16)
whenever *every* lane's partner at that distance adds to the same address (``match.any`` and a
warp vote, so the choice is uniform), and then one lane per group of equal addresses does the
atomic; a warp whose lanes all add to distinct addresses skips that. A warp that is
not whole and converged (``activemask`` not all 32 lanes) adds plainly, as before. Adds whose
address visibly keeps the lanes apart (``_lanes_apart``: a stencil's adjoint) are not rewritten
at all: there ``match.any`` finds every lane alone and only costs time (22% of the H200 stencil
adjoint, docs/performance.md). Where the block shape predicts which lanes share an address
(the lane-id bits of the thread indices the address does not use: ``_group_mask``), the add is a
call of ``@adoffload.shared_fadd_group.<t>.<mask>`` instead: one exchange and one vote check the
prediction, a butterfly over those bits sums each group and its first lane adds; a failed check
takes the general path. The prediction only decides speed, never the sum.

Only adds whose old value is unused and whose address is rooted in one of the body's shared-array
parameters are rewritten, so the low 32 bits of an address tell it apart (a block's shared window
is far smaller than 4 GiB). Host entries are untouched: their blocks run one thread at a time.
"""
from __future__ import annotations

from ... import ir as adoir
from ...ir.builder import Builder
from ...ir.core import FunctionType, Instruction, void
from ..block_ops import _exchange
from .shared_batches import batch_definition, batch_group_adds, shared_offset
from ...analysis.lane_groups import GroupUniform

_TYPES = {"float": "f32", "double": "f64"}
_OFFSETS = (1, 2, 4, 8, 16)


def _root(pointer):
    while isinstance(pointer, Instruction) and pointer.opcode in ("getelementptr", "bitcast", "addrspacecast"):
        pointer = pointer.operands[0]
    return pointer


# index operations after which lanes that differed in a thread index still differ (``and`` and
# ``urem`` by a large enough constant: checked in _lane_values_kept)
_KEEPS_LANES = frozenset({"getelementptr", "bitcast", "addrspacecast", "add", "sub", "mul", "shl", "or", "xor",
                          "sext", "zext", "trunc", "and", "urem"})


def _warp_strides(block, warp: int = 32):
    """(axis, stride) of the axes whose thread index varies inside a warp (threads are numbered
    row-major, the last axis fastest)."""
    stride = 1
    for k in reversed(range(len(block))):
        if block[k] > 1 and stride < warp:
            yield k, stride
        stride *= block[k]


def _warp_axes(block, warp: int = 32) -> dict[int, int]:
    """{axis: how many values its thread index takes within one warp} for the axes that vary
    inside a warp."""
    return {k: min(block[k], -(-warp // stride)) for k, stride in _warp_strides(block, warp)}


def _lane_bits(block, warp: int = 32) -> dict[int, int] | None:
    """{axis: the lane-id bits its thread index occupies within a warp} for the axes that vary
    inside a warp, or None when an extent is not a power of two (lanes then mix axes unevenly)."""
    if any(e & (e - 1) for e in block):
        return None
    return {k: (min(stride * block[k], warp) - 1) & ~(stride - 1) for k, stride in _warp_strides(block, warp)}


def _axes_used(pointer, fn, axes: dict[int, int], keep_lanes: bool) -> set[int] | None:
    """The axes of ``axes`` whose thread index the address uses. ``keep_lanes``: follow only
    operations that keep distinct values distinct (``_KEEPS_LANES``), and answer None where an
    ``and``/``urem`` of a thread index may merge its lanes."""
    used: set[int] = set()
    seen: set = set()
    work = [pointer]
    while work:
        v = work.pop()
        if v in seen:
            continue
        seen.add(v)
        used |= {k for k in axes if v is fn.args[k]}
        if not isinstance(v, Instruction) or keep_lanes and v.opcode not in _KEEPS_LANES:
            continue
        if keep_lanes and v.opcode in ("and", "urem"):
            tid = next((k for k in axes if v.operands[0] is fn.args[k]), None)
            if tid is not None and not _lane_values_kept(v, axes[tid]):
                return None
        work.extend(v.operands)
    return used


def _lanes_apart(pointer, fn, block) -> bool:
    """A guess, for speed only: whether the lanes of a warp add at different addresses -- the
    address uses every thread index that varies inside a warp, through operations that keep
    distinct values distinct. Then ``match.any`` would find every lane alone and only cost time;
    a wrong guess leaves a correct atomic that retries where lanes collide."""
    axes = _warp_axes(block)
    return _axes_used(pointer, fn, axes, keep_lanes=True) == set(axes)


def _lane_values_kept(inst, count: int) -> bool:
    """``and t, mask`` / ``urem t, m`` on a thread index that takes ``count`` consecutive values in
    a warp keeps them apart (mask covering their low bits, or m at least count)."""
    c = inst.operands[1]
    if not (isinstance(c, adoir.Constant) and isinstance(c.value, int)):
        return False
    if inst.opcode == "urem":
        return c.value >= count
    low = (1 << max(count - 1, 1).bit_length()) - 1
    return c.value & low == low


def _group_mask(pointer, fn, block) -> int:
    """The lane-id bits over which the address is expected not to change (those of the thread
    indices it does not use; 0 when it uses them all or the block is not a power of two). Only a
    prediction: ``shared_fadd_group`` checks it at run time."""
    bits = _lane_bits(block)
    if not bits:
        return 0
    used = _axes_used(pointer, fn, bits, keep_lanes=False)
    return sum(b for k, b in bits.items() if k not in used)


def aggregate_shared_adds(module_text: str, body_name: str, shared_args: range, block=None) -> tuple[str, frozenset]:
    """``module_text`` with the body's unused-result float ``atomicrmw fadd`` on shared arrays
    (parameters ``shared_args`` of the body) made calls of ``@adoffload.shared_fadd.<t>``, or of
    ``@adoffload.shared_fadd_group.<t>.<mask>`` where the ``block`` shape predicts which lanes add at
    one address (``_group_mask``), several such calls in a row batched (shared_batches.py; a batch
    skips the run-time check of addresses shared_uniform.py proves the same in each group); and the
    forms used (``nvptx_definitions``' argument: masks, -1 for the plain form, ``(type, mask, n,
    checks, common)`` for batches), empty when nothing was rewritten. With ``block`` given, adds whose lanes are apart
    (``_lanes_apart``) stay plain atomics."""
    if "atomicrmw fadd" not in module_text:
        return module_text, frozenset()
    module = adoir.import_module(module_text)
    fn = module.functions[body_name]
    shared = {fn.args[k] for k in shared_args}
    used = fn.users()
    found = [inst for inst in fn.instructions()
             if inst.opcode == "atomicrmw" and getattr(inst, "op", None) == "fadd"
             and str(inst.type) in _TYPES and _root(inst.operands[0]) in shared and not used.get(inst)
             and not (block is not None and _lanes_apart(inst.operands[0], fn, block))]
    masks, proven = set(), set()
    proofs = GroupUniform(fn, block, _lane_bits(block) or {}) if block is not None else None
    for inst in found:
        pointer, value = inst.operands
        mask = _group_mask(pointer, fn, block) if block is not None else 0
        name = (f"adoffload.shared_fadd_group.{_TYPES[str(inst.type)]}.{mask}" if mask
                else f"adoffload.shared_fadd.{_TYPES[str(inst.type)]}")
        masks.add(mask or -1)
        callee = module.get_or_declare(name, FunctionType(void, (pointer.type, value.type)))
        b = Builder()
        b.position_before(inst)
        b.location = inst.location
        call = b.call(callee, [pointer, value])
        if mask and proofs.uniform(pointer, inst.parent, mask):
            proven.add(call)
        inst.parent.instructions.remove(inst)
    batches = batch_group_adds(module, fn, proven) if found else frozenset()
    return (adoir.export_module(module) if found else module_text), frozenset(masks) | batches


def _group_definition(t: str, suffix: str, mask: int) -> str:
    """``@adoffload.shared_fadd_group.<suffix>.<mask>``: when the warp is whole and every lane's
    address equals that of the lane with its ``mask`` bits cleared (one exchange and one vote), a
    butterfly over the mask's bits sums each group and its first lane adds; otherwise the general
    ``shared_fadd``."""
    steps, value = [], "%v"
    for bit in (1 << k for k in range(5) if mask >> k & 1):
        steps.append(_exchange(t, "xor", value, str(bit), f"%p.{bit}") + f"  %s.{bit} = fadd {t} {value}, %p.{bit}\n")
        value = f"%s.{bit}"
    return f"""define void @adoffload.shared_fadd_group.{suffix}.{mask}(ptr %a, {t} %v) alwaysinline convergent nounwind {{
entry:
  %active = call i32 @llvm.nvvm.activemask()
  %whole = icmp eq i32 %active, -1
  br i1 %whole, label %check, label %general
check:
{shared_offset("%a", "%lo")}  %lane = call i32 @adoffload.lane_id()
  %leader = and i32 %lane, {~mask & 31}
  %leader.lo = call i32 @adoffload.exchange.idx(i32 %lo, i32 %leader)
  %same = icmp eq i32 %lo, %leader.lo
  %grouped = call i1 @llvm.nvvm.vote.all.sync(i32 -1, i1 %same)
  br i1 %grouped, label %group, label %general
group:
{"".join(steps)}  %first = icmp eq i32 %lane, %leader
  br i1 %first, label %add, label %done
add:
  %old = atomicrmw fadd ptr %a, {t} {value} monotonic
  br label %done
general:
  call void @adoffload.shared_fadd.{suffix}(ptr %a, {t} %v)
  br label %done
done:
  ret void
}}
"""


def nvptx_definitions(masks=frozenset()) -> str:
    """``@adoffload.shared_fadd.f32`` / ``.f64`` for NVPTX (needs block_ops' exchange helpers), and
    ``@adoffload.shared_fadd_group.<t>.<mask>`` for each of ``masks`` (aggregate_shared_adds').

    ``match.any`` gives each lane the set of lanes adding to its address: when every lane is
    alone (a stencil's adjoint) the add is plain at once; otherwise a lane sums with its partner
    at xor distance d whenever every lane's partner at d is in its set (a warp vote)."""
    out = ["declare i32 @llvm.nvvm.activemask()\ndeclare i1 @llvm.nvvm.vote.all.sync(i32, i1)\n"
           "declare i32 @llvm.nvvm.match.any.sync.i32(i32, i32)\n"]
    for t, suffix in _TYPES.items():
        steps, value, groups = [], "%v", "0"
        for off in _OFFSETS:
            steps.append(f"  %partner.{off} = xor i32 %lane, {off}\n"
                         f"  %shifted.{off} = lshr i32 %same, %partner.{off}\n"
                         f"  %eq.{off} = trunc i32 %shifted.{off} to i1\n"
                         f"  %all.{off} = call i1 @llvm.nvvm.vote.all.sync(i32 -1, i1 %eq.{off})\n"
                         + _exchange(t, "xor", value, str(off), f"%p.{off}")
                         + f"  %sum.{off} = fadd {t} {value}, %p.{off}\n"
                         f"  %v.{off} = select i1 %all.{off}, {t} %sum.{off}, {t} {value}\n"
                         f"  %bit.{off} = select i1 %all.{off}, i32 {off}, i32 0\n"
                         f"  %g.{off} = or i32 {groups}, %bit.{off}\n")
            value, groups = f"%v.{off}", f"%g.{off}"
        out.append(f"""define void @adoffload.shared_fadd.{suffix}(ptr %a, {t} %v) alwaysinline convergent nounwind {{
entry:
  %mask = call i32 @llvm.nvvm.activemask()
  %whole = icmp eq i32 %mask, -1
  br i1 %whole, label %match, label %plain
match:
{shared_offset("%a", "%lo")}  %same = call i32 @llvm.nvvm.match.any.sync.i32(i32 -1, i32 %lo)
  %lane = call i32 @adoffload.lane_id()
  %me = shl i32 1, %lane
  %alone = icmp eq i32 %same, %me
  %all.alone = call i1 @llvm.nvvm.vote.all.sync(i32 -1, i1 %alone)
  br i1 %all.alone, label %plain, label %combine
plain:
  %old = atomicrmw fadd ptr %a, {t} %v monotonic
  ret void
combine:
{"".join(steps)}  %mine = and i32 %lane, {groups}
  %leader = icmp eq i32 %mine, 0
  br i1 %leader, label %add, label %done
add:
  %old.sum = atomicrmw fadd ptr %a, {t} {value} monotonic
  br label %done
done:
  ret void
}}
""")
        out += [_group_definition(t, suffix, mask) for mask in sorted(m for m in masks if isinstance(m, int) and m > 0)]
        out += [batch_definition(t, suffix, mask, n, checks, common)
                for form, mask, n, checks, common in sorted(m for m in masks if isinstance(m, tuple)) if form == suffix]
    return "".join(out)
