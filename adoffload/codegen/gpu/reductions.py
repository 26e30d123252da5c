"""Deferred uniform-address atomics: ``atomic_add(total, 0, v)`` executed by every thread.

A kernel that accumulates into one address (DOT, PI_REDUCE, REDUCE3_INT, an adjoint's
``d_alpha``) issues one atomic per thread on the same word -- the hardware serializes them.
This pass finds such *sites* in a body and rewrites them so that the entry wrapper
(codegen/abi.py) can combine the contributions before touching memory:

* a site is an ``atomicrmw`` (fadd, add, min, max, umin, umax) whose result is unused, or a
  call of ``@adoffload.uniform_fadd.*`` (the AD engine's uniform adds), whose pointer is
  *strictly uniform*: computed from non-thread arguments and constants only, by GEPs and
  non-trapping integer arithmetic (no load, phi or call) -- the same word for every thread
  of the launch;
* the pointer's root argument must have no other use in the body (no load, store or call
  reaches that array), so no thread can observe the order in which contributions land;
* the body gets one extra ``ptr`` parameter per site, a thread-private accumulator: the
  site becomes ``acc = op(acc, v)`` (registers after inlining);
* for each site a function ``@<body>.uptr<k>`` with the body's parameters returns the
  site's pointer, so the entry can compute it in any thread (even one that never ran the
  body).

The entry initializes each accumulator with the operation's identity, runs the body, and
then performs one atomic per thread, per host chunk, per warp or per block (abi.py).
Combining reorders floating-point additions, exactly as concurrent atomics already do.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from ...ir import core
from ..ir_text import NAME, function_text

# atomicrmw operations that can be combined before the atomic, and how (rule table).
#   op -> (combine kind, identity for an N-bit integer or a float kind)
COMBINABLE = {"fadd": "fadd", "add": "add", "min": "smin", "max": "smax", "umin": "umin", "umax": "umax"}

_UNIFORM_OPS = frozenset({"getelementptr", "add", "sub", "mul", "shl", "and", "or", "xor", "sext", "zext",
                          "trunc", "lshr", "ashr", "select", "icmp", "bitcast", "addrspacecast"})
_SELECT_PREDICATE = {"smin": "slt", "smax": "sgt", "umin": "ult", "umax": "ugt"}
UNIFORM_FADD_PREFIX = "adoffload.uniform_fadd."
_MAYBE_SITE = re.compile(r"atomicrmw (?:volatile )?(?:fadd|add|min|max|umin|umax) |" + re.escape(UNIFORM_FADD_PREFIX))


@dataclass(frozen=True)
class Site:
    """One deferred atomic: the atomicrmw operation and the LLVM type it accumulates."""
    op: str            # fadd | add | min | max | umin | umax
    type_name: str     # float | double | i32 | i64 | ...
    pointer_function: str

    @property
    def combine(self) -> str:
        return COMBINABLE[self.op]


def identity(op: str, type_name: str):
    """The value that ``op`` leaves unchanged: -0.0 for fadd (x + -0.0 == x for every x,
    -0.0 included), 0 for add/umax, the extreme of the type for min/max, all ones for umin."""
    if op == "fadd":
        return -0.0
    bits = int(type_name[1:])
    return {"add": 0, "umax": 0, "umin": (1 << bits) - 1, "min": (1 << (bits - 1)) - 1,
            "max": -(1 << (bits - 1))}[op]


@dataclass
class Deferred:
    text: str
    sites: list[Site]


def defer_uniform_atomics(text: str, body_name: str, grid_rank: int) -> Deferred:
    """Rewrite the body in ``text`` (see the module docstring). No sites: text unchanged."""
    from ...ir import export_module
    if not might_defer(text) or not _may_have_uniform_site(text, body_name, grid_rank):
        return Deferred(text, [])
    module, body, candidates = _analyze(text, body_name, grid_rank)
    if not candidates:
        return Deferred(text, [])
    sites = []
    new_params = []
    for k, (inst, op, slice_) in enumerate(candidates):
        value = inst.operands[1]
        type_name = str(value.type)
        acc = core.Argument(core.ptr, f"uacc{k}", len(body.args) + k)
        new_params.append(acc)
        name = f"{body_name}.uptr{k}"
        module.add_function(_pointer_function(name, body, slice_, inst.operands[0]))
        _replace_with_accumulate(body, inst, acc, COMBINABLE[op])
        sites.append(Site(op, type_name, name))
    body.args = body.args + new_params
    body.function_type = core.FunctionType(body.function_type.return_type,
                                           body.function_type.params + (core.ptr,) * len(new_params))
    body.__dict__.pop("_names", None)
    return Deferred(export_module(module), sites)


def might_defer(text: str) -> bool:
    """A cheap textual test: False means the module has no site for certain (no combinable
    atomicrmw, no uniform-add call)."""
    return _MAYBE_SITE.search(text) is not None


_SITE_POINTERS = (re.compile(r"\batomicrmw\s+(?:volatile\s+)?(?:fadd|add|min|max|umin|umax)\s+ptr\s+(" + NAME + ")"),
                  re.compile(r"@" + re.escape(UNIFORM_FADD_PREFIX) + r"\w+\(ptr\s+(?:\w+\s+)*(" + NAME + ")"))


def _may_have_uniform_site(text: str, body_name: str, grid_rank: int) -> bool:
    """A textual test ahead of the analysis (which parses the whole module, ~50 ms on the host):
    False only when every site of the body takes its pointer from a value that ``uniform_slice``
    refuses for certain -- a thread argument, or an instruction outside ``_UNIFORM_OPS`` (a phi such
    as a loop counter, a load, a call) -- found by following the pointer's definitions in the text.
    Anything it cannot follow (a site it cannot read, a name it does not know) answers True. It only
    decides whether the analysis runs: a site it skipped would keep its per-thread atomic (correct,
    only slower), and tests/codegen/test_reductions.py checks it skips none the analysis finds."""
    found = function_text(text, body_name)
    if found is None:
        return True
    params, defs, lines = found
    thread, other = set(params[:grid_rank]), set(params[grid_rank:])
    sites = []
    for line in lines:
        if _MAYBE_SITE.search(line):        # a combinable atomicrmw or a uniform add (not the status's xchg)
            pointer = next((m.group(1) for m in (p.search(line) for p in _SITE_POINTERS) if m), None)
            if pointer is None:
                return True
            sites.append(pointer)

    def refused(name: str, seen: set) -> bool:
        """Whether ``uniform_slice`` certainly refuses the value ``name``."""
        if name in thread:
            return True
        if name in other or name in seen:
            return False
        seen.add(name)
        if name not in defs:
            return False
        opcode, rest = defs[name]
        return opcode not in _UNIFORM_OPS or any(refused(n, seen) for n in re.findall(NAME, rest))

    return not all(refused(pointer, set()) for pointer in sites)


# ---- analysis -------------------------------------------------------------------------------

def _analyze(text: str, body_name: str, grid_rank: int):
    """(module, body, candidate sites); no candidates when the body is also called from
    elsewhere in the module (its parameters would then not be the launch's)."""
    from ...ir import import_module
    module = import_module(text)
    body = module.functions[body_name]
    if any(i.opcode == "call" and i.callee is body for f in module.functions.values() for i in f.instructions()):
        return module, body, []
    return module, body, _candidates(body, set(body.args[:grid_rank]))


def _candidates(body: core.Function, thread_args: set) -> list[tuple]:
    uses = body.users()
    found = []
    for inst in body.instructions():
        op = _site_op(inst)
        if op is None or uses.get(inst):
            continue
        if str(inst.operands[1].type) not in ("float", "double", "i32", "i64"):
            continue
        slice_ = uniform_slice(inst.operands[0], thread_args)
        if slice_ is not None:
            found.append((inst, op, slice_))
    if not found:
        return []
    # Roots of every other pointer use: a site's array must not be reached by anything else.
    in_slices = {i for _, _, s in found for i in s}
    site_insts = {inst for inst, _, _ in found}
    other_roots: set = set()
    for inst in body.instructions():
        if inst in in_slices:
            continue
        operands = inst.operands[1:] if inst in site_insts else inst.operands
        for operand in operands:
            if operand.type.is_pointer or (inst.opcode == "call" and operand.type.is_pointer):
                other_roots |= _roots(operand)
    return [(inst, op, s) for inst, op, s in found
            if not (_roots(inst.operands[0]) & other_roots) and "ANY" not in _roots(inst.operands[0])]


def _site_op(inst: core.Instruction) -> str | None:
    if inst.opcode == "atomicrmw" and inst.op in COMBINABLE and "volatile" not in inst.flags \
            and inst.ordering in ("monotonic", "unordered", None):
        return inst.op
    if inst.opcode == "call" and isinstance(inst.callee, core.Function) \
            and inst.callee.name.startswith(UNIFORM_FADD_PREFIX) and len(inst.operands) == 2:
        return "fadd"
    return None


def uniform_slice(pointer: core.Value, thread_args: set) -> list[core.Instruction] | None:
    """Instructions computing ``pointer`` from non-thread arguments and constants, in
    definition order; None when it depends on anything else."""
    order: list[core.Instruction] = []
    seen: set = set()

    def visit(v, depth=0) -> bool:
        if isinstance(v, core.Constant):
            return v.kind in ("scalar", "null", "zero")
        if isinstance(v, core.Argument):
            return v not in thread_args
        if not isinstance(v, core.Instruction) or v.opcode not in _UNIFORM_OPS or depth > 32:
            return False
        if v in seen:
            return True
        if not all(visit(o, depth + 1) for o in v.operands):
            return False
        seen.add(v)
        order.append(v)
        return True

    return order if visit(pointer) else None


def _roots(pointer: core.Value) -> set:
    """Arguments a pointer may be derived from ({"ANY"} when not traceable)."""
    v = pointer
    while isinstance(v, core.Instruction) and v.opcode in ("getelementptr", "bitcast", "addrspacecast"):
        v = v.operands[0]
    if isinstance(v, core.Argument):
        return {v}
    if isinstance(v, core.Instruction) and v.opcode == "alloca":
        return {v}
    if isinstance(v, (core.Constant, core.GlobalVariable)):
        return {v}
    return {"ANY"}


# ---- rewriting ------------------------------------------------------------------------------

def _pointer_function(name: str, body: core.Function, slice_: list, pointer: core.Value) -> core.Function:
    """``ptr @name(<body params>)``: the site's pointer, recomputed from the parameters."""
    args = [core.Argument(a.type, a.name, a.index) for a in body.args]
    # external until the entry is linked in (abi._link then makes it internal)
    fn = core.Function(name, core.FunctionType(core.ptr, tuple(a.type for a in args)), args,
                       attributes={"alwaysinline"})
    block = fn.add_block("entry")
    mapping: dict = dict(zip(body.args, args))
    for inst in slice_:
        clone = core.Instruction(inst.opcode, inst.type, [mapping.get(o, o) for o in inst.operands],
                                 name=inst.name or f"s{len(mapping)}", predicate=inst.predicate,
                                 element_type=inst.element_type, flags=set())   # no poison flags
        block.append(clone)
        mapping[inst] = clone
    block.append(core.Instruction("ret", core.void, [mapping.get(pointer, pointer)]))
    return fn


def _replace_with_accumulate(body: core.Function, site: core.Instruction, acc: core.Argument,
                             combine: str) -> None:
    from ...ir.builder import Builder
    value = site.operands[1]
    b = Builder()
    b.position_before(site)
    b.location = site.location
    old = b.load(value.type, acc)
    if combine in ("fadd", "add"):
        new = b.binary(combine, old, value)
    else:
        keep_old = b.icmp(_SELECT_PREDICATE[combine], old, value)
        new = b.select(keep_old, old, value)
    b.store(new, acc)
    site.parent.instructions.remove(site)


# ---- entry side: accumulators and the final atomics (llvmlite.ir) ------------------------------

from llvmlite import ir as _ir  # noqa: E402

_I1, _I32, _I64 = _ir.IntType(1), _ir.IntType(32), _ir.IntType(64)
_LL_TYPES = {"float": _ir.FloatType(), "double": _ir.DoubleType()}
MODES = ("block", "warp", "thread", "off")


def _lltype(type_name: str) -> _ir.Type:
    return _LL_TYPES.get(type_name) or _ir.IntType(int(type_name[1:]))


class EntryAccumulators:
    """The entry's half of the protocol: private accumulators (allocas holding the identity)
    passed to the body, and the code that adds their contents once the body has run."""

    def __init__(self, m: _ir.Module, b: _ir.IRBuilder, sites: list[Site], body_param_types: list,
                 alloca_addrspace: int = 0):
        self.m, self.sites = m, sites
        self.types = [_lltype(s.type_name) for s in sites]
        self.pointers = []
        self.identities = [_ir.Constant(t, identity(s.op, s.type_name)) for s, t in zip(sites, self.types)]
        for t, ident in zip(self.types, self.identities):
            if alloca_addrspace:      # AMDGPU: private memory is addrspace(5); the body takes generic pointers
                slot = b.addrspacecast(_private_alloca(b, t, alloca_addrspace), _ir.PointerType())
            else:
                slot = b.alloca(t)
            b.store(ident, slot)
            self.pointers.append(slot)
        fn_type = _ir.FunctionType(_ir.PointerType(), body_param_types)
        self.pointer_functions = [_ir.Function(m, fn_type, name=s.pointer_function) for s in sites]

    def values(self, b: _ir.IRBuilder) -> list:
        return [b.load(p, typ=t) for p, t in zip(self.pointers, self.types)]

    def atomics(self, b: _ir.IRBuilder, values: list, body_args: list) -> None:
        """One atomic per site with ``values`` at the site's pointer -- skipped while the value is
        still the identity. Adding the identity changes nothing, and the pointer is only known to
        be in bounds when some thread passed the site's bounds check: a site no thread reached
        (or whose threads all failed the check) may point anywhere."""
        for site, fn, v, t, ident in zip(self.sites, self.pointer_functions, values, self.types,
                                         self.identities):
            with b.if_then(b.icmp_unsigned("!=", _bits(b, v, t), _bits(b, ident, t))):
                address = b.call(fn, body_args)
                b.atomic_rmw(site.op, address, v, "monotonic")

    # ---- NVPTX: warp shuffle trees, then shared memory across the block ---------------------
    def flush_nvptx(self, b: _ir.IRBuilder, in_range, body_args: list, mode: str) -> None:
        values = self.values(b)
        tid, ntid = _sreg(self.m, b, "tid.x"), _sreg(self.m, b, "ntid.x")
        whole_warps = b.icmp_unsigned("==", b.and_(ntid, _I32(31)), _I32(0))
        with b.if_else(whole_warps, likely=True) as (tree, each):
            with tree:
                lane = b.and_(tid, _I32(31))
                sums = [self._warp_tree(b, v, s) for v, s in zip(values, self.sites)]
                if mode == "warp":
                    # lane 0 past the grid means the whole warp is: nothing was added.
                    with b.if_then(b.and_(b.icmp_unsigned("==", lane, _I32(0)), in_range)):
                        self.atomics(b, sums, body_args)
                else:
                    self._across_block(b, tid, ntid, lane, sums, body_args)
            with each:   # blocks that are not whole warps: every thread adds its own
                with b.if_then(in_range):
                    self.atomics(b, values, body_args)

    def _across_block(self, b, tid, ntid, lane, sums, body_args) -> None:
        warp = b.lshr(tid, _I32(5))
        shared = []
        for k, (t, site) in enumerate(zip(self.types, self.sites)):
            array = _ir.ArrayType(t, 32)
            gv = _ir.GlobalVariable(self.m, array, f"{site.pointer_function}.partials", addrspace=3)
            gv.linkage = "internal"
            gv.initializer = _ir.Constant(array, _ir.Undefined)
            gv.align = 8
            shared.append(gv)
        with b.if_then(b.icmp_unsigned("==", lane, _I32(0))):
            for gv, t, s in zip(shared, self.types, sums):
                b.store(s, b.gep(gv, [_I32(0), warp], inbounds=True))
        _barrier(self.m, b)
        with b.if_then(b.icmp_unsigned("==", warp, _I32(0))):
            present = b.icmp_unsigned("<", lane, b.lshr(ntid, _I32(5)))
            totals = []
            for gv, t, ident, site in zip(shared, self.types, self.identities, self.sites):
                partial = b.load(b.gep(gv, [_I32(0), lane], inbounds=True), typ=t)
                totals.append(self._warp_tree(b, b.select(present, partial, ident), site))
            with b.if_then(b.icmp_unsigned("==", lane, _I32(0))):   # thread 0: always in the grid
                self.atomics(b, totals, body_args)

    def _warp_tree(self, b: _ir.IRBuilder, v, site: Site):
        for offset in (16, 8, 4, 2, 1):
            v = _combine(b, site.combine, v, _shfl_down(self.m, b, v, offset))
        return v


class _AddrspaceAlloca(_ir.instructions.AllocaInstr):
    """``alloca T, addrspace(N)`` (llvmlite.ir spells allocas in addrspace 0 only)."""

    def __init__(self, parent, typ, addrspace: int, name: str = ""):
        super().__init__(parent, typ, None, name)
        self.type = _ir.PointerType(addrspace=addrspace)
        self.addrspace = addrspace

    def descr(self, buf):
        buf.append(f"alloca {self.allocated_type}, addrspace({self.addrspace})\n")


_FLOAT_WIDTHS = {"half": 16, "float": 32, "double": 64}


def _bits(b: _ir.IRBuilder, v, t):
    """``v`` as an integer of its width: floats compare bitwise (-0.0 is not +0.0, NaN is itself)."""
    width = _FLOAT_WIDTHS.get(str(t))
    return b.bitcast(v, _ir.IntType(width)) if width else v


def _private_alloca(b: _ir.IRBuilder, typ, addrspace: int):
    inst = _AddrspaceAlloca(b.block, typ, addrspace, b.block.scope.deduplicate("uacc"))
    b._insert(inst)
    return inst


def _combine(b: _ir.IRBuilder, kind: str, x, y):
    if kind == "fadd":
        return b.fadd(x, y)
    if kind == "add":
        return b.add(x, y)
    pred = _SELECT_PREDICATE[kind]
    cmp = b.icmp_signed if pred[0] == "s" else b.icmp_unsigned
    return b.select(cmp({"lt": "<", "gt": ">"}[pred[1:]], x, y), x, y)


def _declare(m: _ir.Module, name: str, fn_type: _ir.FunctionType) -> _ir.Function:
    existing = m.globals.get(name)
    return existing if existing is not None else _ir.Function(m, fn_type, name=name)


def _sreg(m, b, name):
    return b.call(_declare(m, f"llvm.nvvm.read.ptx.sreg.{name}", _ir.FunctionType(_I32, [])), [])


def _barrier(m, b):
    b.call(_declare(m, "llvm.nvvm.barrier.cta.sync.aligned.all", _ir.FunctionType(_ir.VoidType(), [_I32])),
           [_I32(0)])


def _shfl_down(m, b, v, offset: int):
    """``shfl.sync.down`` over the full warp for 32- and 64-bit values (64-bit as two halves)."""
    shfl = _declare(m, "llvm.nvvm.shfl.sync.down.i32", _ir.FunctionType(_I32, [_I32] * 4))

    def move(word):
        return b.call(shfl, [_I32(-1), word, _I32(offset), _I32(31)])

    bits = v.type.width if isinstance(v.type, _ir.IntType) else (32 if isinstance(v.type, _ir.FloatType) else 64)
    if bits == 32:
        word = v if isinstance(v.type, _ir.IntType) else b.bitcast(v, _I32)
        moved = move(word)
        return moved if isinstance(v.type, _ir.IntType) else b.bitcast(moved, v.type)
    if bits != 64:
        raise ValueError(f"warp shuffle of a {bits}-bit value")
    whole = v if isinstance(v.type, _ir.IntType) else b.bitcast(v, _I64)
    lo, hi = b.trunc(whole, _I32), b.trunc(b.lshr(whole, _I64(32)), _I32)
    joined = b.or_(b.shl(b.zext(move(hi), _I64), _I64(32)), b.zext(move(lo), _I64))
    return joined if isinstance(v.type, _ir.IntType) else b.bitcast(joined, v.type)
