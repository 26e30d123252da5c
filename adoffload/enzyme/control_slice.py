"""The control slice of a counting function: only what decides which blocks run.

A counting function (counting.py) adds bytes per visit of a block, so its result depends on the path
through the CFG and on nothing else. ``slice_to_control`` keeps the CFG as it is (every terminator)
and deletes every instruction that no branch needs: the kept set is closed under

* SSA operands, starting from the conditions of ``br``/``switch``, the operands of ``invoke``,
  ``resume`` and ``landingpad``, and every call that may not return (no ``willreturn`` +
  ``nounwind``: it may end the run or unwind, which a deleted call would not);
* memory: a kept load (or kept atomic, or kept call that reads memory) keeps every write that may
  alias what it reads -- stores, atomics, writing calls -- and those keep their own operands.
  Barriers and fences stay when any memory read is kept (other threads' kept writes reach it
  through them); so does the ``free`` of a kept heap block (a counting loop must not leak it).

By induction over the run, every kept instruction computes what it computes in the whole primal
(its operands are kept; a kept read sees every write that may change it), so every branch goes the
same way and the counts are equal. Dropped instructions can only be less defined (a division, a
load out of bounds): deleting them removes behaviour, never adds it.

Aliasing, conservatively: pointers are traced to their roots through GEPs, casts, phis, selects and
``freeze``. Distinct pointer arguments are distinct memory -- the assumption the reverse engine
already makes and the launchers check (``api._check_overlaps``, ``kernels/overlap.py``);
the function's own allocas and heap blocks are distinct from everything while their address does
not escape (only loaded, stored through, compared, passed to lifetime markers, ``memcpy``-like
intrinsics or ``free``); a pointer from anywhere else (loaded from memory, returned by a call, made
from an integer) may alias every argument, global and escaped block. Calls are judged by their
``memory(...)`` attributes (argument memory through their pointer operands; ``errnomem`` only
aliases unknown pointers; inaccessible memory aliases nothing the function can read).

It refuses -- returns False, and the caller keeps the full clone -- where a kept call has unknown
memory effects (no ``memory`` attribute: ``printf``, a function defined without inferred
attributes, an indirect call), or for an opcode it does not know.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ..analysis.pointers import leaves
from ..ir.core import Argument, Constant, Function, GlobalVariable, Instruction, Value
from .memory import heap_function

_UNKNOWN = "unknown"        # a pointer from memory, a call, an integer: may alias every non-private root
_OTHER = "other"            # a call's memory outside its arguments (LLVM's ``other``): as unknown
_ERRNO = "errno"            # libm's errno: only unknown pointers may reach it

_PURE = frozenset({
    "add", "sub", "mul", "udiv", "sdiv", "urem", "srem", "shl", "lshr", "ashr", "and", "or", "xor",
    "fadd", "fsub", "fmul", "fdiv", "frem", "fneg", "icmp", "fcmp", "select", "phi", "getelementptr",
    "extractelement", "insertelement", "shufflevector", "extractvalue", "insertvalue", "freeze", "alloca",
    "trunc", "zext", "sext", "fptrunc", "fpext", "fptoui", "fptosi", "uitofp", "sitofp", "ptrtoint",
    "inttoptr", "bitcast", "addrspacecast"})
_CONTROL = frozenset({"br", "switch", "ret", "unreachable", "resume", "landingpad"})
_MEMORY = frozenset({"load", "store", "atomicrmw", "cmpxchg", "fence"})
_DERIVE = ("getelementptr", "bitcast", "addrspacecast", "phi", "select", "freeze")

# llvm.* intrinsics whose effects the attribute table may not spell (declarations the engine adds):
# pure math and bit operations, and markers that change no memory a branch could read
_PURE_INTRINSICS = (
    "llvm.fmuladd", "llvm.fma", "llvm.sqrt", "llvm.exp", "llvm.log", "llvm.sin", "llvm.cos", "llvm.tan",
    "llvm.pow", "llvm.fabs", "llvm.copysign", "llvm.floor", "llvm.ceil", "llvm.trunc", "llvm.rint",
    "llvm.nearbyint", "llvm.round", "llvm.minnum", "llvm.maxnum", "llvm.minimum", "llvm.maximum",
    "llvm.smax", "llvm.smin", "llvm.umax", "llvm.umin", "llvm.abs", "llvm.ctpop", "llvm.ctlz", "llvm.cttz",
    "llvm.bswap", "llvm.bitreverse", "llvm.fshl", "llvm.fshr", "llvm.vector.reduce", "llvm.is.fpclass",
    "llvm.ldexp", "llvm.frexp", "llvm.sadd.with", "llvm.uadd.with", "llvm.ssub.with", "llvm.usub.with",
    "llvm.smul.with", "llvm.umul.with", "llvm.sadd.sat", "llvm.uadd.sat", "llvm.ssub.sat", "llvm.usub.sat",
    "llvm.expect", "llvm.lifetime", "llvm.assume", "llvm.dbg", "llvm.experimental.noalias.scope.decl",
    "llvm.prefetch", "llvm.donothing", "llvm.nvvm.read.ptx.sreg", "llvm.amdgcn.workitem.id",
    "llvm.amdgcn.workgroup.id", "llvm.ptrmask", "llvm.invariant", "llvm.powi", "llvm.asin", "llvm.acos",
    "llvm.atan", "llvm.sinh", "llvm.cosh", "llvm.tanh", "llvm.roundeven", "llvm.lround", "llvm.llround",
    "llvm.lrint", "llvm.llrint", "llvm.canonicalize", "llvm.threadlocal.address")
_ARGMEM_INTRINSICS = ("llvm.memcpy", "llvm.memmove", "llvm.memset", "llvm.masked.load", "llvm.masked.store",
                      "llvm.masked.gather", "llvm.masked.scatter")
_NON_CAPTURING = _ARGMEM_INTRINSICS + ("llvm.lifetime", "llvm.prefetch", "llvm.invariant")
# C's math functions: they return, and write nothing but errno (-O0 declares them without attributes);
# not those that write through a pointer (frexp, modf, sincos, remquo) or a global (lgamma's signgam)
_LIBM = frozenset(name + suffix for name in (
    "sin", "cos", "tan", "asin", "acos", "atan", "atan2", "sinh", "cosh", "tanh", "asinh", "acosh", "atanh",
    "exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "pow", "sqrt", "cbrt", "hypot", "fabs", "floor",
    "ceil", "trunc", "round", "rint", "nearbyint", "fmod", "remainder", "fmin", "fmax", "fdim", "fma", "erf",
    "erfc", "tgamma", "copysign", "ldexp", "scalbn", "logb", "nextafter")
    for suffix in ("", "f"))
_BARRIERS = ("adoffload.sync_threads", "llvm.nvvm.barrier", "llvm.amdgcn.s.barrier")


@dataclass
class _Effects:
    """What a call may do: read/write these memory tokens; return normally."""
    reads: set = field(default_factory=set)
    writes: set = field(default_factory=set)
    returns: bool = True        # certainly returns normally (willreturn + nounwind, or a known intrinsic)
    known: bool = True          # False: no memory attribute says what it touches
    noreturn: bool = False      # never returns: what it reads decides no later branch


def control_slice(fn: Function, observed: tuple = ()) -> set[Instruction] | None:
    """The instructions of ``fn`` its control flow depends on (module docstring), terminators
    included, and the writes through the arguments in ``observed`` (a kernel's status record,
    which the launcher reads after counting); None where it refuses."""
    return _Slice(fn, observed).run()


def slice_to_control(fn: Function, observed: tuple = ()) -> bool:
    """Delete every instruction of ``fn`` that no terminator needs (module docstring), except the
    writes through ``observed`` arguments; ``ret`` operands are dropped (the caller makes ``fn``
    return void). False, ``fn`` unchanged, where it refuses."""
    keep = control_slice(fn, observed)
    if keep is None:
        return False
    for block in fn.blocks:
        block.instructions = [i for i in block.instructions if i in keep]
        if block.instructions and block.instructions[-1].opcode == "ret":
            block.instructions[-1].operands = []
    return True


def writes_caller_memory(fn: Function, own: frozenset = frozenset()) -> bool:
    """Whether ``fn`` may write memory its caller can see (through an argument other than those in
    ``own``, a global, or a pointer from elsewhere). A counting function that does not can run on
    the caller's arrays instead of scratch copies."""
    plan = _Slice(fn)
    insts = list(fn.instructions())
    if any(i.opcode not in _PURE | _CONTROL | _MEMORY and i.opcode not in ("call", "invoke") for i in insts):
        return True
    plan.effects = {i: plan._call_effects(i) for i in insts if i.opcode in ("call", "invoke")}
    for inst in insts:
        if inst.opcode in ("call", "invoke") and not plan.effects[inst].known:
            return True
        for token in plan._writes(inst):
            if token in own or token == _ERRNO or _private(token) and not plan._escapes(token):
                continue
            return True
    return False


class _Slice:
    def __init__(self, fn: Function, observed: tuple = ()):
        self.fn, self.observed = fn, frozenset(observed)
        self.users = fn.users()
        self.escaped: dict[Instruction, bool] = {}
        self.tokens: dict[int, frozenset] = {}

    # ---- the fixed point
    def run(self) -> set | None:
        insts = list(self.fn.instructions())
        if any(i.opcode not in _PURE | _CONTROL | _MEMORY and i.opcode not in ("call", "invoke") for i in insts):
            return None
        self.effects = {i: self._call_effects(i) for i in insts if i.opcode in ("call", "invoke")}
        writers = [(i, self._writes(i)) for i in insts]
        writers = [(i, w) for i, w in writers if w]
        syncs = [i for i in insts if i.opcode == "fence" or self._is_barrier(i)]
        keep: set = set()
        work: list[Instruction] = []

        def need(v: Value) -> None:
            if isinstance(v, Instruction) and v not in keep:
                keep.add(v)
                work.append(v)

        for inst in insts:
            if inst.opcode in _CONTROL or inst.opcode == "invoke":
                need(inst)
            elif inst.opcode == "call" and not self.effects[inst].returns:
                need(inst)
        for writer, written in writers:
            if written & self.observed or any(t in (_UNKNOWN, _OTHER) for t in written) and self.observed:
                need(writer)
        reads_any = False
        while work:
            inst = work.pop()
            if inst.opcode != "ret":
                for operand in inst.operands:
                    need(operand)
            if inst.opcode in ("call", "invoke") and isinstance(inst.callee, Instruction):
                need(inst.callee)
            read = self._reads(inst)
            if read is None:
                return None
            if not read:
                continue
            if not reads_any:
                reads_any = True
                for sync in syncs:
                    need(sync)
            for writer, written in writers:
                if writer not in keep and self._overlap(read, written):
                    need(writer)
        for inst in insts:          # a kept heap block is still freed (a counting loop would leak it)
            heap = heap_function(inst) if inst.opcode == "call" else None
            if heap is not None and heap.kind == "free" and inst.operands[heap.pointer] in keep and all(
                    o in keep or not isinstance(o, Instruction) for o in inst.operands):
                keep.add(inst)
        return keep

    # ---- memory tokens
    def _reads(self, inst: Instruction) -> set | None:
        """What a kept ``inst`` reads (tokens); None where that is unknown (refuse)."""
        op = inst.opcode
        if op == "load":
            return set(self._pointer_tokens(inst.operands[0]))
        if op in ("atomicrmw", "cmpxchg"):
            return set(self._pointer_tokens(inst.operands[0]))
        if op in ("call", "invoke"):
            effects = self.effects[inst]
            if effects.noreturn:
                return set()                 # the run ends there: what it reads decides no later branch
            return effects.reads if effects.known else None
        return set()

    def _writes(self, inst: Instruction) -> set:
        op = inst.opcode
        if op == "store":
            return set(self._pointer_tokens(inst.operands[1]))
        if op in ("atomicrmw", "cmpxchg"):
            return set(self._pointer_tokens(inst.operands[0]))
        if op in ("call", "invoke"):
            return self.effects[inst].writes
        return set()

    def _pointer_tokens(self, pointer: Value) -> frozenset:
        hit = self.tokens.get(id(pointer))
        if hit is None:
            hit = self.tokens[id(pointer)] = frozenset(self._token(v) for v in leaves(pointer)) - {None}
        return hit

    def _token(self, leaf: Value):
        if isinstance(leaf, (Argument, GlobalVariable)):
            return leaf
        if isinstance(leaf, Constant) and leaf.kind in ("null", "undef", "poison", "zero"):
            return None                      # points nowhere a valid access could reach
        if isinstance(leaf, Instruction) and (leaf.opcode == "alloca" or _is_allocation(leaf)):
            return leaf
        return _UNKNOWN

    def _overlap(self, read: set, written: set) -> bool:
        return any(self._may_alias(x, y) for x in read for y in written
                   if not (isinstance(x, GlobalVariable) and x.constant))    # a constant is never written

    def _may_alias(self, x, y) -> bool:
        if x is y:
            return True
        if _private(x) and not self._escapes(x) or _private(y) and not self._escapes(y):
            return False
        if x in (_UNKNOWN, _OTHER) or y in (_UNKNOWN, _OTHER):
            return True
        if _ERRNO in (x, y):
            return False                      # errno is no argument, global or block of this function
        if _private(x) or _private(y):
            return False                      # a fresh block is reached only through pointers based on it
        if isinstance(x, Argument) and isinstance(y, Argument):
            return False                      # distinct arrays (the engine's assumption, checked at launch)
        if isinstance(x, GlobalVariable) and isinstance(y, GlobalVariable):
            return False
        return True                           # an argument and a global: not assumed apart

    def _escapes(self, root: Instruction) -> bool:
        """Whether the address of an alloca or heap block may be reached other than through
        pointers derived from it here (stored to memory, passed to a call, made an integer)."""
        if root in self.escaped:
            return self.escaped[root]
        self.escaped[root] = True             # cycles through phis: assume the worst until shown
        seen, work, escapes = {id(root)}, [root], False
        while work and not escapes:
            value = work.pop()
            for user in self.users.get(value, []):
                op = user.opcode
                if op in _DERIVE and not (op == "select" and user.operands[0] is value):
                    if id(user) not in seen:
                        seen.add(id(user))
                        work.append(user)
                elif op == "load" or op == "icmp" or op in ("atomicrmw", "cmpxchg") and user.operands[0] is value:
                    continue
                elif op == "store" and user.operands[1] is value and user.operands[0] is not value:
                    continue
                elif op == "call" and _non_capturing(user, value):
                    continue
                else:
                    escapes = True
                    break
        self.escaped[root] = escapes
        return escapes

    # ---- calls
    def _call_effects(self, inst: Instruction) -> _Effects:
        callee = inst.callee
        name = getattr(callee, "name", "") if isinstance(callee, Function) else ""
        pointers = set().union(*[self._pointer_tokens(o) for o in inst.operands if o.type.is_pointer] or [set()])
        if any(getattr(o.type, "element", None) is not None and o.type.element.is_pointer for o in inst.operands):
            pointers.add(_UNKNOWN)           # a vector of pointers (a gather or scatter): not followed
        if not isinstance(callee, Function):
            return _Effects({_OTHER} | pointers, {_OTHER} | pointers, returns=False, known=False)
        attrs = callee.attributes
        if "noreturn" in attrs:
            return _Effects(returns=False, noreturn=True)
        returns = inst.opcode == "call" and (
            ("willreturn" in attrs and "nounwind" in attrs) or name.startswith(_PURE_INTRINSICS + _ARGMEM_INTRINSICS)
            or name.startswith(_BARRIERS) or _collective(name) or name.startswith("adoffload.uniform_fadd."))
        heap = heap_function(inst)
        if heap is not None and heap.kind == "free":
            return _Effects(set(), set(), returns=returns)   # ends a block's life: nothing reads it after
        if heap is not None and heap.kind == "alloc":
            return _Effects(set(), set(), returns=returns)   # a fresh block (its own root)
        if name in _LIBM and callee.is_declaration and inst.opcode == "call":
            return _Effects(set(), {_ERRNO})
        if name.startswith(_PURE_INTRINSICS) or _collective(name) or name.startswith(_BARRIERS):
            return _Effects(returns=returns)
        if name.startswith(_ARGMEM_INTRINSICS) or name.startswith("adoffload.uniform_fadd."):
            return _Effects(set(pointers), set(pointers), returns=returns)
        memory = _memory_attribute(attrs)
        if memory is None:
            return _Effects({_OTHER} | pointers, {_OTHER} | pointers, returns=returns, known=False)
        reads, writes = set(), set()
        for location, access in memory.items():
            tokens = {"argmem": pointers, "errnomem": {_ERRNO}, "inaccessiblemem": set()}.get(location, {_OTHER})
            if "read" in access:
                reads |= tokens
            if "write" in access:
                writes |= tokens
        return _Effects(reads, writes, returns=returns)

    def _is_barrier(self, inst: Instruction) -> bool:
        return inst.opcode == "call" and getattr(inst.callee, "name", "").startswith(_BARRIERS)


def _private(token) -> bool:
    return isinstance(token, Instruction)


def _is_allocation(inst: Instruction) -> bool:
    heap = heap_function(inst)
    return heap is not None and heap.kind == "alloc"


def _non_capturing(call: Instruction, value: Value) -> bool:
    name = getattr(call.callee, "name", "") if isinstance(call.callee, Function) else ""
    if call.callee is value:
        return False
    if name.startswith(_NON_CAPTURING):
        return True
    heap = heap_function(call)
    return heap is not None and heap.kind == "free"


def _collective(name: str) -> bool:
    from ..language.collectives import parse
    return parse(name) is not None


_LOCATIONS = ("argmem", "inaccessiblemem", "errnomem", "other")


def _memory_attribute(attrs) -> dict[str, str] | None:
    """LLVM's ``memory(...)`` as {location: none|read|write|readwrite}; None where no attribute says."""
    for attr in attrs:
        if attr.startswith("memory(") and attr.endswith(")"):
            parts = [p.strip() for p in attr[len("memory("):-1].split(",") if p.strip()]
            effects = {loc: "none" for loc in _LOCATIONS}
            for part in parts:                       # the default kind first, then per location
                if ":" not in part:
                    effects = {loc: part for loc in _LOCATIONS}
            for part in parts:
                if ":" in part:
                    loc, kind = (s.strip() for s in part.split(":", 1))
                    effects[loc if loc in _LOCATIONS else "other"] = kind
            if any(kind not in ("none", "read", "write", "readwrite") for kind in effects.values()):
                return None
            return effects
    if "readnone" in attrs:
        return {loc: "none" for loc in _LOCATIONS}
    if "readonly" in attrs and "argmemonly" in attrs:
        return {"argmem": "read", "inaccessiblemem": "none", "errnomem": "none", "other": "none"}
    if "readonly" in attrs:
        return {loc: "read" for loc in _LOCATIONS}
    return None
