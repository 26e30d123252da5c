"""Lane combining of stencil atomics on NVPTX: a thread's adds to ``a[i+c]`` summed across warp lanes.

Why: a stencil's adjoint (``lcals_eos``: ``d_u[i] .. d_u[i+6]``) issues one global float atomic per
site per thread, and atomic throughput, not bandwidth, bounds it. Lane ``L`` adds site ``c`` at
``a + i_L + c``, which is where lane ``L + c - pivot`` adds its pivot site: the warp can add those
values in registers first and issue one atomic per lane for the group instead of one per site.

What this pass does, on the kernel body before the NVPTX entry is added (codegen/__init__.py):

* A **group** is >= 2 ``atomicrmw fadd`` (float or double; monotonic, not volatile, result unused) in
  one basic block whose pointers are ``root + X + c_k * size`` bytes: the same root value, the same
  variable index terms X (after peeling constants from ``gep``/``add``/``sub``/``or disjoint`` and
  from ``sext``/``zext`` of no-wrap adds), distinct constant lane distances ``d_k = c_k - pivot`` in
  1..31 from the pivot site (the smallest ``c``). Sites at the same address are summed first.
  Strictly uniform addresses are left to codegen/gpu/reductions.py, and so are (to the plain atomics)
  addresses whose terms are computed from an index loaded at a thread-dependent address (a gather's
  ``d_pos[nbr[i, k], c]``): neighbouring lanes are one element apart there only by chance (``gathered``).
* The rewritten group, placed at its last site: ``mask = activemask``; each lane shuffles its
  pivot *address* up by one lane and votes whether its predecessor (in ``mask``) adds its pivot
  exactly ``size`` bytes lower; the ballot ``b`` is the same in every lane of ``mask``. Lane ``L``
  takes site ``k`` of lane ``L - d_k`` (``shfl.sync.up`` of the value) iff ``L >= d_k`` and the
  ballot bits ``L-d_k+1 .. L`` are all set: then lanes ``L-d_k .. L`` are in ``mask`` with pivot
  addresses one element apart, so that lane's site-k address is exactly this lane's pivot
  address. The sender skips its own site-k atomic on the same bits of the same ballot, so a
  value is added exactly once. Each lane then adds its pivot value plus what it took in one
  atomic, and the sites it did not hand over as before. Geometry is checked at run time from the
  actual addresses, never assumed: lanes of another grid-stride iteration, of another row, or
  with any other index simply do not match and keep their atomics.
* Divergence (Volta's independent thread scheduling): the lanes of ``mask`` are exactly the
  lanes that ran ``activemask`` together, so they all got the same mask; what follows up to the
  ballot is straight-line code whose ``shfl.sync``/``vote.sync`` name that mask (CUDA's
  opportunistic ``coalesced_threads`` pattern). Lanes that arrive separately form their own
  masks. So any subset of lanes, any placement (loops, divergent branches) is correct; a partial
  warp only combines less. This needs each group's warp operations to stay on its own path: LLVM
  never merges convergent calls of two paths (SimplifyCFG's hoisting and sinking refuse them;
  tests/gpu has groups on both sides of a branch).
* Moving the adds: the group's atomics move to its last site. Only when nothing between its first
  and last site may touch their memory: loads, stores and atomics there must be rooted in another
  pointer argument and the launch must promise ``noalias`` (codegen option); calls other than pure
  math intrinsics, fences and volatile accesses refuse the group. Other unused-result monotonic
  float adds may be in between, to any address (a 2-D stencil's ``d_u[i +- 1, j]``): such adds
  commute, and they are already unordered against the other threads' adds to the same elements.
  A load in between of an array the kernel writes (a read-modify-write of another gradient) also
  refuses the group, for speed: the combined adds would wait behind that round trip.
  Measured on the H200 (2^26, grid-stride entries, registers 80 -> 105): ``lcals_eos``'s default
  adjoint, whose ``d_y``/``d_z`` read-modify-writes lie between its sites, ran 2.5x slower combined
  (6.37 ms against 2.56), while the lean adjoint (only stores in between) ran 1.6x faster.

Float sums are reassociated, the freedom the atomics already had. Block kernels (CUDA sources
included) get it for their global arrays; adds into their shared arrays are left to
codegen/gpu/shared_atomics.py. Not used with ``deterministic=True`` (Kernel.compiled turns it off; such
adjoints log contributions anyway; block kernels' ordered shared adds), nor for
``elements_per_thread > 1`` builds (lanes are k elements apart: nothing would
match), sm_70 (``activemask`` needs PTX 6.2) or AMDGPU (wavefronts of 64: not done yet).
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from ...ir import core
from ...ir.builder import Builder
from .reductions import uniform_slice
from .schedule import root as argument_root

_SIZES = {"i8": 1, "i16": 2, "i32": 4, "i64": 8, "half": 2, "float": 4, "double": 8}
_PURE_CALLS = ("llvm.fma.", "llvm.fmuladd.", "llvm.fabs.", "llvm.sqrt.", "llvm.minnum.", "llvm.maxnum.",
               "llvm.copysign.", "llvm.floor.", "llvm.ceil.", "llvm.trunc.", "llvm.exp.", "llvm.log.",
               "llvm.sin.", "llvm.cos.", "llvm.pow.", "llvm.smin.", "llvm.smax.", "llvm.umin.", "llvm.umax.")
_MEMORY_OPS = {"load": 0, "store": 1, "atomicrmw": 0, "cmpxchg": 0}
MAX_DISTANCE = 31


@dataclass
class Group:
    """Sites of one group: ``pivot`` (the pivot-address sites) and ``others[d]`` (sites d elements up)."""
    block: core.Block
    pivot: list[core.Instruction]
    others: dict[int, list[core.Instruction]]
    size: int

    @property
    def sites(self) -> list[core.Instruction]:
        return self.pivot + [s for d in sorted(self.others) for s in self.others[d]]


# ---- matching ---------------------------------------------------------------------------------

def _split_index(idx: core.Value, need_nsw: bool):
    """(variable key, constant) with ``idx == key + constant`` exactly in the index's own type
    widened as a GEP widens it (sign extension: an i32 add must then be nsw). Key None: constant."""
    if isinstance(idx, core.Constant) and idx.kind == "scalar" and isinstance(idx.value, int):
        return None, idx.value
    if isinstance(idx, core.Instruction):
        ops = idx.operands
        exact = not need_nsw or "nsw" in idx.flags
        if idx.opcode in ("add", "sub", "or") and exact and _is_int_const(ops[1]):
            if idx.opcode == "or" and "disjoint" not in idx.flags:
                return idx, 0
            c = ops[1].value if idx.opcode != "sub" else -ops[1].value
            key, c0 = _split_index(ops[0], need_nsw)
            return key, c0 + c
        if idx.opcode == "add" and exact and _is_int_const(ops[0]):
            key, c0 = _split_index(ops[1], need_nsw)
            return key, c0 + ops[0].value
        if idx.opcode == "sext" and str(idx.type) == "i64":
            key, c = _split_index(ops[0], True)
            return (("sext", key) if key is not None else None), c
        if idx.opcode == "zext" and str(idx.type) == "i64":
            inner = ops[0]
            if isinstance(inner, core.Instruction) and inner.opcode == "add" and "nuw" in inner.flags \
                    and _is_int_const(inner.operands[1]) and inner.operands[1].value >= 0:
                return ("zext", inner.operands[0]), inner.operands[1].value
            return ("zext", inner), 0
    return idx, 0


def _is_int_const(v) -> bool:
    return isinstance(v, core.Constant) and v.kind == "scalar" and isinstance(v.value, int)


def decompose(pointer: core.Value):
    """(root, variable terms, byte offset) with ``pointer == root + sum(terms) + offset`` bytes, or
    None. Only single-index GEPs over scalar element types are followed."""
    terms: list = []
    offset = 0
    p = pointer
    while isinstance(p, core.Instruction) and p.opcode == "getelementptr":
        size = _SIZES.get(str(p.element_type))
        if size is None or len(p.operands) != 2:
            return None
        idx = p.operands[1]
        key, c = _split_index(idx, str(idx.type) != "i64")
        if key is not None:
            terms.append((key, size))
        offset += c * size
        p = p.operands[0]
    return p, frozenset(Counter(terms).items()), offset


def _is_commuting_add(inst: core.Instruction, uses: dict) -> bool:
    return (inst.opcode == "atomicrmw" and inst.op == "fadd" and inst.ordering == "monotonic"
            and "volatile" not in inst.flags and not uses.get(inst))


def _is_site(inst: core.Instruction, uses: dict) -> bool:
    return _is_commuting_add(inst, uses) and str(inst.type) in ("float", "double")


def find_groups(body: core.Function, grid_rank: int, noalias: bool, exclude=frozenset(),
                skip_args: int = 0) -> list[Group]:
    """The groups of ``body`` (see the module docstring), at most one per (block, address key).
    ``skip_args``: adds rooted in the last ``skip_args`` params before the status (a block kernel's
    shared arrays) are not sites."""
    uses = body.users()
    written = written_roots(body)
    thread_args = set(body.args[:grid_rank])
    skipped = set(body.args[len(body.args) - 1 - skip_args:-1]) if skip_args else set()
    groups = []
    for block in body.blocks:
        keyed: dict = {}
        for inst in block.instructions:
            if inst in exclude or not _is_site(inst, uses):
                continue
            parts = decompose(inst.operands[0])
            if parts is None or uniform_slice(inst.operands[0], thread_args) is not None:
                continue
            root, terms, offset = parts
            if skip_args and (root in skipped or not isinstance(root, core.Argument)):
                continue        # (maybe) a shared array
            if any(gathered(key, thread_args) for (key, _size), _count in terms):
                continue        # a gather's index (d_pos[nbr[i, k]]): neighbouring lanes never match
            key = (root, terms, str(inst.type), str(inst.operands[0].type))
            keyed.setdefault(key, []).append((inst, offset))
        for (_, _, type_name, _), sites in keyed.items():
            group = _best_group(block, sites, 8 if type_name == "double" else 4)
            if group is not None and movable(group, noalias, uses, written):
                groups.append(group)
    return groups


def gathered(key, thread_args: set) -> bool:
    """Whether an address term is computed from a load whose address varies with the thread index
    (``j = neighbors[i, k]``, then ``d_pos[j, c]``): neighbouring lanes' addresses are then one element
    apart only by chance, so the group's shuffles and vote (about 40 instructions per group) would be
    paid for nothing. A performance rule: the combined code stays correct for any address."""
    while isinstance(key, tuple):        # ("sext", value) / ("zext", value) from _split_index
        key = key[1]
    seen, work = set(), [key]
    while work:
        v = work.pop()
        if not isinstance(v, core.Instruction) or v in seen:
            continue
        seen.add(v)
        if v.opcode == "load":
            if _varies(v.operands[0], thread_args):
                return True
            continue
        work.extend(v.operands)
    return False


def _varies(v, thread_args: set) -> bool:
    """Whether ``v`` depends on the thread index (through any instruction, loads included)."""
    seen, work = set(), [v]
    while work:
        v = work.pop()
        if v in thread_args:
            return True
        if not isinstance(v, core.Instruction) or v in seen:
            continue
        seen.add(v)
        work.extend(v.operands)
    return False


def _best_group(block, sites, size) -> Group | None:
    """The pivot that puts the most distinct offsets within 31 elements above it."""
    best = None
    for pivot in sorted({o for _, o in sites}):
        chosen = {o for _, o in sites if o >= pivot and (o - pivot) % size == 0
                  and (o - pivot) // size <= MAX_DISTANCE}
        if len(chosen) >= 2 and (best is None or len(chosen) > len(best[1])):
            best = (pivot, chosen)
    if best is None:
        return None
    pivot, chosen = best
    others: dict[int, list] = {}
    for inst, o in sites:
        if o in chosen and o != pivot:
            others.setdefault((o - pivot) // size, []).append(inst)
    return Group(block, [i for i, o in sites if o == pivot], others, size)


def written_roots(body: core.Function) -> set:
    """The pointer arguments ``body`` stores to or updates (None among them: some unknown pointer)."""
    return {argument_root(i.operands[_MEMORY_OPS[i.opcode]]) for i in body.instructions()
            if i.opcode in ("store", "atomicrmw", "cmpxchg")}


def movable(group: Group, noalias: bool, uses: dict, written: set) -> bool:
    """Whether the group's atomics may (and should) move to its last site: nothing in between may
    touch their memory, nor read an array the kernel writes."""
    sites = set(group.sites)
    positions = [k for k, i in enumerate(group.block.instructions) if i in sites]
    group_root = argument_root(group.pivot[0].operands[0])
    for inst in group.block.instructions[positions[0]:positions[-1]]:
        if inst in sites:
            continue
        if _is_commuting_add(inst, uses):
            continue    # another unused-result float add: the two adds commute, as across threads
        if inst.opcode == "load" and argument_root(inst.operands[0]) in written:
            return False    # the read of a read-modify-write: a performance rule (module docstring)
        if inst.opcode in _MEMORY_OPS:
            other = argument_root(inst.operands[_MEMORY_OPS[inst.opcode]])
            if not (noalias and group_root is not None and other is not None and other is not group_root) \
                    or "volatile" in inst.flags:
                return False
        elif inst.opcode == "call":
            callee = inst.callee
            if not (isinstance(callee, core.Function) and callee.name.startswith(_PURE_CALLS)):
                return False
        elif inst.opcode in ("fence", "va_arg", "invoke", "landingpad"):
            return False
    return True


# ---- rewriting --------------------------------------------------------------------------------

def combine_lane_atomics(text: str, body_name: str, grid_rank: int, noalias: bool,
                         skip_args: int = 0) -> tuple[str, int]:
    """``text`` with every group of ``body_name`` combined across lanes; and how many groups."""
    if "atomicrmw fadd" not in text:
        return text, 0
    from ...ir import export_module, import_module
    module = import_module(text)
    body = module.functions[body_name]
    done: set = set()
    count = 0
    while True:
        groups = find_groups(body, grid_rank, noalias, exclude=done, skip_args=skip_args)
        if not groups:
            break
        done |= rewrite(module, groups[0])
        count += 1
    if count == 0:
        return text, 0
    body.__dict__.pop("_names", None)
    return export_module(module), count


def rewrite(module: core.Module, group: Group) -> set:
    """Replace the group by the lane-combined code (module docstring); returns the new atomics."""
    block = group.block
    sites = set(group.sites)
    last = max(sites, key=block.instructions.index)
    b = Builder()
    b.position_before(last)
    b.location = last.location
    i32, i64 = core.IntType(32), core.IntType(64)
    value_type = group.pivot[0].type
    mask = b.call_intrinsic(module, "llvm.nvvm.activemask", i32, [], "lc.mask")
    lane = b.call_intrinsic(module, "llvm.nvvm.read.ptx.sreg.laneid", i32, [], "lc.lane")
    pivot_pointer = group.pivot[0].operands[0]
    address = b.cast("ptrtoint", pivot_pointer, i64, "lc.addr")
    below = _shuffle_up(module, b, mask, address, 1)
    # contiguous(L): lane L-1 is in the mask and adds its pivot exactly one element below lane L's
    has_prev = b.icmp("ne", lane, _c(i32, 0))
    prev_bit = b.binary("and", b.binary("lshr", mask, b.binary("and", b.sub(lane, _c(i32, 1)), _c(i32, 31))),
                        _c(i32, 1))
    prev_in = b.icmp("ne", prev_bit, _c(i32, 0))
    adjacent = b.icmp("eq", b.add(below, _c(i64, group.size)), address)
    contiguous = b.binary("and", b.binary("and", has_prev, prev_in), adjacent)
    ballot = b.call_intrinsic(module, "llvm.nvvm.vote.ballot.sync", i32, [mask, contiguous], "lc.ballot")
    own = _sum(b, [s.operands[1] for s in group.pivot])
    skips = {}
    for d in sorted(group.others):
        value = _sum(b, [s.operands[1] for s in group.others[d]])
        run = _c(i32, (1 << d) - 1)
        # receiver L: ballot bits L-d+1 .. L; sender S = L-d: the same bits, S+1 .. S+d
        takes = b.binary("and", b.icmp("uge", lane, _c(i32, d)),
                         _bits_set(b, ballot, b.binary("and", b.add(b.sub(lane, _c(i32, d)), _c(i32, 1)),
                                                       _c(i32, 31)), run))
        moved = _shuffle_up(module, b, mask, value, d)
        own = b.fadd(own, b.select(takes, moved, core.Constant(value_type, -0.0)))
        skips[d] = b.binary("and", b.icmp("ule", lane, _c(i32, MAX_DISTANCE - d)),
                            _bits_set(b, ballot, b.binary("and", b.add(lane, _c(i32, 1)), _c(i32, 31)), run))
    own_atomic = b.atomicrmw("fadd", pivot_pointer, own, name="lc.own")
    own_atomic.align = group.pivot[0].align
    new = {own_atomic}
    for s in sites:
        block.instructions.remove(s)
    b.position_before(own_atomic)
    b.index += 1
    for d in sorted(group.others):     # the sites this lane did not hand over, as before
        do_block, rest = _branch_around(b, skips[d])
        for s in group.others[d]:
            do_block.insert(len(do_block.instructions) - 1, s)
            new.add(s)
        b.position_before(rest.instructions[0])
    return new


def _c(t, v):
    return core.Constant(t, v)


def _sum(b: Builder, values: list):
    total = values[0]
    for v in values[1:]:
        total = b.fadd(total, v)
    return total


def _bits_set(b: Builder, word, shift, run):
    """``((word >> shift) & run) == run``."""
    return b.icmp("eq", b.binary("and", b.binary("lshr", word, shift), run), run)


def _shuffle_up(module, b: Builder, mask, value, delta: int):
    """``shfl.sync.up(mask, value, delta)`` for a 32- or 64-bit value (64-bit as two halves)."""
    i32, i64 = core.IntType(32), core.IntType(64)

    def move(word):
        return b.call_intrinsic(module, "llvm.nvvm.shfl.sync.up.i32", i32, [mask, word, _c(i32, delta), _c(i32, 0)],
                                "lc.shfl")
    type_name = str(value.type)
    if type_name in ("float", "i32"):
        word = value if type_name == "i32" else b.cast("bitcast", value, i32)
        moved = move(word)
        return moved if type_name == "i32" else b.cast("bitcast", moved, value.type)
    whole = value if type_name == "i64" else b.cast("bitcast", value, i64)
    lo = move(b.cast("trunc", whole, i32))
    hi = move(b.cast("trunc", b.binary("lshr", whole, _c(i64, 32)), i32))
    joined = b.binary("or", b.binary("shl", b.cast("zext", hi, i64), _c(i64, 32)), b.cast("zext", lo, i64))
    return joined if type_name == "i64" else b.cast("bitcast", joined, value.type)


def _branch_around(b: Builder, skip) -> tuple[core.Block, core.Block]:
    """Split the block at the builder's position: ``br skip, rest, do``; ``do: br rest``."""
    block, index = b.block, b.index
    fn = block.parent
    at = fn.blocks.index(block)
    do_block = core.Block(fn._unique_block_name(block.name + ".lc.add"), parent=fn)
    fn.blocks.insert(at + 1, do_block)
    rest = core.Block(fn._unique_block_name(block.name + ".lc.rest"), parent=fn)
    fn.blocks.insert(at + 2, rest)
    for inst in block.instructions[index:]:
        rest.append(inst)
    del block.instructions[index:]
    for succ in rest.successors:
        for phi in succ.phis:
            phi.blocks = [rest if blk is block else blk for blk in phi.blocks]
    b.position_at_end(block)
    b.cbranch(skip, rest, do_block)
    b.position_at_end(do_block)
    b.br(rest)
    return do_block, rest
