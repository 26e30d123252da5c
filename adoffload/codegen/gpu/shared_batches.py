"""Batches of grouped shadow-tile adds (NVPTX): several ``@adoffload.shared_fadd_group.<t>.<mask>``
calls in a row become one ``@adoffload.shared_fadd_batch.<t>.<mask>.<n>``.

Why: the reverse of a register-tiled matmul's k step adds 8 values into ``d_As`` (one per row of the
thread's register tile) and 8 into ``d_Bs``, each summed over the lanes that share its address
(shared_atomics.py). Done one by one, every value pays a check, a butterfly of 4 exchanges and a
compare-and-swap loop run by one lane of each group (sm_90 has no float add on shared memory):
about 800 instructions per warp and k step where the primal has 64 multiply-adds. Together, the
group's lanes share the work: at each lane bit of the group, a lane keeps half of the values and
sends the other half to its partner (the *transposed* reduction: ``n/2`` exchanges, then ``n/4``,
...), so each lane ends with the group's sums for ``n / group`` addresses (or, with fewer values
than lanes, lanes pairwise finish with a plain butterfly), and all lanes do their
compare-and-swap loops at once. The halves are interleaved (the lane with the bit keeps the odd
values): ``d_Bs[k, tj + 16 n]`` summed over lane pairs ``tj``, ``tj + 16`` then puts the pair's adds
in different banks (the low and high halves would put both lanes' addresses in one bank).

Batched are calls of one form in one basic block with nothing between them that touches memory
or calls anything but pure math: the adds only move later past arithmetic. One exchange per
address and one vote check the prediction that a group's lanes add at the same addresses;
otherwise each value takes the general ``shared_fadd`` path. An address that is a constant number
of bytes from one already checked (``d_As[k, ti + 16 m]`` for every ``m``: the same root and
variable terms, lane_combining.decompose) needs no exchange of its own: it is equal across the
group's lanes exactly when that one is (the same difference, modulo 2^32 too). The exchanged
value is the address in the shared window (``addrspacecast`` to ``addrspace(3)``: the calls
get only pointers rooted in shared arrays), so no generic address is formed. An address that
shared_uniform.py proves the same in each group is not exchanged at all (the SGEMM's are all
proven: its batches keep only the whole-warp test). When every address of a batch is one pointer plus a
constant (the register tile's row), the batch takes that pointer and the offsets: its lanes pick
offsets, which depend on the lane alone and leave the loop, instead of pointers. The result is the same set of float adds, summed in
another order (as the one-by-one group adds already do; deterministic kernels use ordered adds
instead, ordered_shared.py)."""
from __future__ import annotations

from ...ir.builder import Builder
from ...ir.core import FunctionType, Instruction, const, i64, void
from ..block_ops import _exchange
from .lane_combining import decompose

GROUP_PREFIX = "adoffload.shared_fadd_group."
BATCH_PREFIX = "adoffload.shared_fadd_batch."
MAX_BATCH = 8

# calls that neither touch memory nor synchronize: a batch may move adds past them
_PURE_CALLS = ("llvm.fma.", "llvm.fmuladd.", "llvm.sqrt.", "llvm.fabs.", "llvm.minnum.", "llvm.maxnum.",
               "llvm.copysign.", "llvm.floor.", "llvm.ceil.", "llvm.trunc.", "llvm.round.", "llvm.sin.",
               "llvm.cos.", "llvm.exp.", "llvm.exp2.", "llvm.log.", "llvm.log2.", "llvm.pow.")
_MEMORY = frozenset({"load", "store", "atomicrmw", "cmpxchg", "fence", "call", "invoke", "alloca", "va_arg"})


def _callee(inst: Instruction) -> str:
    return getattr(inst.callee, "name", "") if inst.opcode == "call" else ""


def batch_group_adds(module, fn, proven=frozenset()) -> frozenset:
    """Replace runs of grouped adds of one form in ``fn`` (see the module docstring) by batch calls,
    in chunks of 8, 4 and 2 (and of 1 for a lone add that needs no check); returns the ``(type
    suffix, mask, n, checks, common)`` forms used (``checks``: bit i set when the i-th address is
    exchanged, ``checked_addresses``; ``common``: one pointer and constant offsets,
    ``common_offsets``; ``proven``: the group calls whose address shared_uniform.py proved the same
    in each lane group)."""
    forms = set()
    for block in fn.blocks:
        runs, current = [], []
        for inst in list(block.instructions):
            name = _callee(inst)
            if name.startswith(GROUP_PREFIX):
                if current and _callee(current[-1]) != name:
                    runs.append(current)
                    current = []
                current.append(inst)
            elif inst.opcode in _MEMORY and not name.startswith(_PURE_CALLS):
                runs.append(current)
                current = []
        runs.append(current)
        for run in runs:
            while len(run) >= 2:
                n = min(MAX_BATCH, 1 << (len(run).bit_length() - 1))
                chunk, run = run[:n], run[n:]
                forms.add(_batch(module, chunk, proven))
            if run and run[0] in proven:        # a lone add needing no check: a batch of one skips it
                forms.add(_batch(module, run, proven))
    return frozenset(forms)


def checked_addresses(pointers, proven=()) -> int:
    """A bit per pointer that the batch must exchange to check: all but those proven the same in each
    lane group (``proven``, a flag per pointer) and those a constant number of bytes from an earlier
    one (the same root and variable terms: equal across lanes iff it is)."""
    proven = list(proven) or [False] * len(pointers)
    order = sorted(range(len(pointers)), key=lambda i: not proven[i])     # proven ones vouch for the rest
    checks, seen = 0, set()
    for i in order:
        parts = decompose(pointers[i])
        key = parts[:2] if parts is not None else None
        if not proven[i] and (key is None or key not in seen):
            checks |= 1 << i
        if key is not None:
            seen.add(key)
    return checks


def common_offsets(pointers) -> list[int] | None:
    """Each pointer's byte offset from the first when all have one root and the same variable
    terms (lane_combining.decompose), else None."""
    parts = [decompose(p) for p in pointers]
    if any(q is None or q[:2] != parts[0][:2] for q in parts):
        return None
    return [q[2] - parts[0][2] for q in parts]


def _batch(module, calls: list[Instruction], proven=frozenset()) -> tuple[str, int, int, int, bool]:
    suffix, mask = _callee(calls[0])[len(GROUP_PREFIX):].split(".")
    pointers = [c.operands[0] for c in calls]
    values = [c.operands[1] for c in calls]
    n = len(calls)
    checks = checked_addresses(pointers, [c in proven for c in calls])
    offsets = common_offsets(pointers) if n > 1 else None
    if offsets is not None:         # one pointer and constant offsets: the lanes pick offsets, not pointers
        args = [pointers[0]] + [const(i64, o) for o in offsets] + values
    else:
        args = pointers + values
    callee = module.get_or_declare(f"{BATCH_PREFIX}{suffix}.{mask}.{n}.{checks}{'.c' if offsets else ''}",
                                   FunctionType(void, tuple(a.type for a in args)))
    b = Builder()
    b.position_before(calls[-1])
    b.location = calls[-1].location
    b.call(callee, args)
    for c in calls:
        c.parent.instructions.remove(c)
    return suffix, int(mask), n, checks, offsets is not None


def shared_offset(pointer: str, out: str, width: int = 32) -> str:
    """``out`` = the low ``width`` bits of ``pointer``'s address in the shared window (the pointer
    is rooted in a shared array): no generic address is formed for it."""
    return (f"  {out}.s = addrspacecast ptr {pointer} to ptr addrspace(3)\n"
            f"  {out} = ptrtoint ptr addrspace(3) {out}.s to i{width}\n")


def batch_definition(t: str, suffix: str, mask: int, n: int, checks: int, common: bool = False) -> str:
    """``@adoffload.shared_fadd_batch.<suffix>.<mask>.<n>.<checks>(ptr %p0.., t %v0..)``: the check
    (an exchange of each address whose bit is in ``checks``), the transposed reduction over the
    mask's lane bits, and each lane's adds of the sums it holds. ``common`` (name suffix ``.c``):
    the parameters are one pointer and each address's byte offset from it (``ptr %base, i64 %o0..``),
    constants at the call; the reduction then picks offsets, which depend on the lane only (hoisted
    out of loops), and each add is one address computation."""
    bits = [1 << k for k in range(5) if mask >> k & 1]
    ps = [f"%p{i}" for i in range(n)]
    vs = [f"%v{i}" for i in range(n)]
    if common:
        params = ", ".join(["ptr %base"] + [f"i64 %o{i}" for i in range(n)] + [f"{t} {v}" for v in vs])
        addresses = "".join(f"  %p{i} = getelementptr i8, ptr %base, i64 %o{i}\n" for i in range(n))
        where, kind = [f"%o{i}" for i in range(n)], "i64"      # what the reduction moves along with the sums
    else:
        params = ", ".join([f"ptr {p}" for p in ps] + [f"{t} {v}" for v in vs])
        addresses, where, kind = "", list(ps), "ptr"
    check, same = [], "true"
    for i in (i for i, p in enumerate(ps) if checks >> i & 1):
        check.append(shared_offset(ps[i], f"%lo{i}")
                     + f"  %l{i} = call i32 @adoffload.exchange.idx(i32 %lo{i}, i32 %leader)\n"
                     f"  %s{i} = icmp eq i32 %lo{i}, %l{i}\n")
        if same == "true":
            same = f"%s{i}"
        else:
            check.append(f"  %and{i} = and i1 {same}, %s{i}\n")
            same = f"%and{i}"
    group, values, pointers, spread = [], list(vs), where, []
    for bit in bits:
        if len(values) > 1:                     # keep half, send half: lanes of this bit split the values
            half = len(values) // 2
            group.append(f"  %b{bit} = and i32 %lane, {bit}\n  %up{bit} = icmp ne i32 %b{bit}, 0\n")
            kept, kept_ptrs = [], []
            for j in range(half):
                even, odd = values[2 * j], values[2 * j + 1]
                name = f"%r{bit}.{j}"
                group.append(f"  %send{bit}.{j} = select i1 %up{bit}, {t} {even}, {t} {odd}\n"
                             f"  %keep{bit}.{j} = select i1 %up{bit}, {t} {odd}, {t} {even}\n"
                             + _exchange(t, "xor", f"%send{bit}.{j}", str(bit), f"%x{bit}.{j}")
                             + f"  {name} = fadd {t} %keep{bit}.{j}, %x{bit}.{j}\n"
                             f"  %q{bit}.{j} = select i1 %up{bit}, {kind} {pointers[2 * j + 1]}, {kind} {pointers[2 * j]}\n")
                kept.append(name)
                kept_ptrs.append(f"%q{bit}.{j}")
            values, pointers = kept, kept_ptrs
        else:                                   # one value left: partners finish the sum together
            group.append(_exchange(t, "xor", values[0], str(bit), f"%y{bit}")
                         + f"  %z{bit} = fadd {t} {values[0]}, %y{bit}\n")
            values = [f"%z{bit}"]
            spread.append(bit)
    vote = (f"{''.join(check)}  %grouped = call i1 @llvm.nvvm.vote.all.sync(i32 -1, i1 {same})\n"
            f"  br i1 %grouped, label %group, label %general\n" if checks else "  br label %group\n")
    first = "true"
    if spread:
        group.append(f"  %spread = and i32 %lane, {sum(spread)}\n  %first = icmp eq i32 %spread, 0\n")
        first = "%first"
    if common:
        adds = "".join(f"  %at{j} = getelementptr i8, ptr %base, i64 {o}\n"
                       f"  %old{j} = atomicrmw fadd ptr %at{j}, {t} {v} monotonic\n" for j, (o, v) in enumerate(zip(pointers, values)))
    else:
        adds = "".join(f"  %old{j} = atomicrmw fadd ptr {p}, {t} {v} monotonic\n" for j, (p, v) in enumerate(zip(pointers, values)))
    general = "".join(f"  call void @adoffload.shared_fadd.{suffix}(ptr {p}, {t} {v})\n" for p, v in zip(ps, vs))
    return f"""define void @{BATCH_PREFIX}{suffix}.{mask}.{n}.{checks}{'.c' if common else ''}({params}) alwaysinline convergent nounwind {{
entry:
{addresses}  %active = call i32 @llvm.nvvm.activemask()
  %whole = icmp eq i32 %active, -1
  br i1 %whole, label %check, label %general
check:
  %lane = call i32 @adoffload.lane_id()
  %leader = and i32 %lane, {~mask & 31}
{vote}
group:
{"".join(group)}  br i1 {first}, label %add, label %done
add:
{adds}  br label %done
general:
{general}  br label %done
done:
  ret void
}}
"""
