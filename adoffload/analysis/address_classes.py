"""Parallel semantics of adjoint accumulation: which shadow updates may race.

The derived body runs once per logical thread. A shadow update ``shadow[idx] += v`` is

* PRIVATE when the address lies in the thread's own stack arrays (allocas, however indexed), or
  when ``idx`` is injective in the thread-index vector (no two threads can hit the
  same element): a plain load/add/store;
* UNIFORM when ``idx`` is the same for every thread and every point of the run (``d_sigma[0]``,
  an active scalar's accumulator): summed per thread in a register and added once, through
  ``@adoffload.uniform_fadd.<f32|f64>(ptr, value)`` which targets lower (``lower_uniform_adds``);
* SHARED otherwise: ``atomicrmw fadd``. When in doubt, SHARED.

Injectivity is proven structurally on the element index (GEP chains over one element type):

* ``a*t + b`` with ``t`` the only thread argument, ``a`` a nonzero integer constant and ``b``
  strictly uniform (built from non-thread arguments and constants by pure integer arithmetic:
  no phi, no load -- so it is the same for every thread *and* every loop iteration);
* ``r*S + c`` with ``S`` strictly uniform and ``0 <= c < S`` proven by a dominating bounds check
  (``icmp ult c, S`` on the taken edge, or ``slt c, S`` together with ``sge/sgt`` against 0 or -1),
  where ``r`` is injective in some of the thread arguments and ``c`` in the rest (2-D grids:
  ``tid0*shape1 + tid1``; also rows ``x[tid, j]`` with any bounds-checked ``j``).
"""
from __future__ import annotations

import enum
from dataclasses import dataclass, field

from ..ir.core import Argument, Block, Constant, GlobalVariable, Instruction, Value

_STRIP = frozenset({"sext", "zext"})
_UNIFORM_OPS = frozenset({"add", "sub", "mul", "shl", "sext", "zext", "trunc", "and", "or", "xor",
                          "sdiv", "udiv", "lshr", "ashr", "select", "icmp"})


class AddressClass(enum.Enum):
    PRIVATE = "private"
    UNIFORM = "uniform"
    SHARED = "shared"


@dataclass(frozen=True)
class ParallelInfo:
    """Which arguments of the body are thread indices; every other argument is uniform.

    ``uniform_args`` is kept for documentation and checks: an argument listed in neither set
    is treated as uniform too (kernel parameters are the same for every thread).
    """
    thread_args: tuple[int, ...]
    uniform_args: frozenset[int] = field(default_factory=frozenset)
    # A block kernel's shared arrays (frontend/blocks.py): their shadows are read back later in the
    # same run, so an update there is never deferred as UNIFORM (it is SHARED: atomic) unless PRIVATE.
    block_shared_args: frozenset[int] = field(default_factory=frozenset)


class AddressClassifier:
    """Classifies shadow addresses of one function (primal pointers, in the forward sweep)."""

    def __init__(self, info: ParallelInfo, dominators, args: list[Argument], function=None):
        self.info = info
        self.dom = dominators
        self.thread_args = {args[k] for k in info.thread_args}
        self.block_shared = {args[k] for k in info.block_shared_args}
        self.patterns = _access_patterns(function) if function is not None else {}

    # ---- uniformity
    def strictly_uniform(self, v: Value, depth: int = 0) -> bool:
        if isinstance(v, Constant):
            return True
        if isinstance(v, Argument):
            return v not in self.thread_args
        if isinstance(v, Instruction) and v.opcode in _UNIFORM_OPS and depth < 16:
            return all(self.strictly_uniform(o, depth + 1) for o in v.operands)
        return False

    def warp_uniform(self, pointer: Value) -> bool:
        """Whether a SHARED address is likely the same across a warp: its indices use no thread
        argument and no loaded value, only uniform values and loop counters (``d_w[k]`` in
        ``for k``). Only a hint for cost: the uniform add checks at run time (match.any)."""
        root, indices = _decompose(pointer)
        return (isinstance(root, Argument) and root not in self.thread_args and root not in self.block_shared
                and all(self._loop_uniform(i, set()) for i in indices))

    def _loop_uniform(self, v: Value, seen: set) -> bool:
        if isinstance(v, Constant):
            return True
        if isinstance(v, Argument):
            return v not in self.thread_args
        if isinstance(v, _SumOf):
            return all(self._loop_uniform(p, seen) for p in v.parts)
        if not isinstance(v, Instruction) or v.opcode not in _UNIFORM_OPS | {"phi"} or len(seen) > 32:
            return False
        if v in seen:
            return True
        seen.add(v)
        return all(self._loop_uniform(o, seen) for o in v.operands)

    def threads_of(self, v: Value, depth: int = 0) -> set[Argument]:
        """Thread arguments ``v`` may depend on (over-approximated: any non-leaf is 'all')."""
        if isinstance(v, Argument):
            return {v} & self.thread_args
        if isinstance(v, Constant):
            return set()
        if isinstance(v, Instruction) and v.opcode in _UNIFORM_OPS and depth < 16:
            out: set[Argument] = set()
            for o in v.operands:
                out |= self.threads_of(o, depth + 1)
            return out
        return set(self.thread_args)

    # ---- pointers
    def classify(self, pointer: Value, at: Block) -> AddressClass:
        root, indices = _decompose(pointer)
        if root is None:
            # a GEP chain over mixed element types (``gep float, (gep i8, %local, off), k``: a row
            # of a local 2-D array) or a phi/select of pointers: private when it can only point
            # into the thread's own stack arrays
            roots = pointer_roots(pointer)
            return AddressClass.PRIVATE if roots and all(_is_alloca(r) for r in roots) else AddressClass.SHARED
        if _is_alloca(root):
            return AddressClass.PRIVATE
        if not isinstance(root, Argument) or root in self.thread_args:
            return AddressClass.SHARED
        if all(self.strictly_uniform(i) for i in indices):
            return AddressClass.SHARED if root in self.block_shared else AddressClass.UNIFORM
        # Private needs one access pattern per array: x[i] and x[i + 1] are each injective in
        # the thread index, but thread i's x[i + 1] is thread i+1's x[i]; and accesses of one
        # element each (a <2 x double> load at x[i] also reads x[i + 1]).
        accesses = self.patterns.get(root, ())
        if (len(indices) == 1 and len(accesses) <= 1 and ANY_ROOT not in self.patterns
                and all(e in (None, t) for _, e, t in accesses)
                and self.injective(indices[0], set(self.thread_args), at)):
            return AddressClass.PRIVATE
        return AddressClass.SHARED

    def injective(self, v: Value, threads: set[Argument], at: Block, depth: int = 0) -> bool:
        """Whether distinct values of ``threads`` (others fixed) give distinct ``v``."""
        if not threads:
            return True
        if depth > 8:
            return False
        terms = _linear(v)
        if terms is not None:
            tids = [t for t in terms if t in self.thread_args and terms[t] != 0]
            rest_uniform = all(self.strictly_uniform(t) for t in terms if t not in self.thread_args and t != 1)
            if len(tids) == 1 and {tids[0]} == threads and rest_uniform:
                return True
        return self._row_major(v, threads, at, depth)

    def _row_major(self, v: Value, threads: set[Argument], at: Block, depth: int) -> bool:
        for row, _stride, column in self._row_major_parts(v, at):
            row_threads = self.threads_of(row) & threads
            if (self.injective(row, row_threads, at, depth + 1)
                    and self.injective(column, threads - row_threads, at, depth + 1)):
                return True
        return False

    def disjoint_rows(self, accesses: list) -> bool:
        """Whether the (instruction, pointer) ``accesses`` -- each run at most once per thread (the
        caller's part) -- touch pairwise distinct elements across every thread and access. Each
        index is ``a * t + c`` for one thread index ``t`` (the only one: a 1-D index) or
        ``(a * t + c) * stride + column`` (one uniform stride, one column below it and injective
        in the other thread indices), with one root, ``t`` and ``a`` for all of them and constants
        ``c`` distinct and less than ``|a|`` apart: a thread storing rows 4t .. 4t+3 of its
        column, which no other thread or store reaches."""
        forms = set()
        offsets = []
        for inst, pointer in accesses:
            root, indices = _decompose(pointer)
            element = _gep_element(pointer)
            value = inst.operands[0] if inst.opcode == "store" else inst
            if root is None or len(indices) != 1 or element is None or value.type != element:
                return False
            parts = next(self._row_major_parts(indices[0], inst.parent), None)
            row, layout = (indices[0], "flat") if parts is None else (parts[0], parts[1:])
            terms = _linear(row)
            tids = [t for t in (terms or {}) if t != 1]
            if not terms or len(tids) != 1 or tids[0] not in self.thread_args or terms[tids[0]] == 0:
                return False
            t = tids[0]
            others = self.thread_args - {t}
            if layout == "flat":
                if others:
                    return False
            elif not self.injective(layout[1], others, inst.parent):
                return False
            shape = "flat" if layout == "flat" else (_structure(layout[0]), _structure(layout[1]))
            forms.add((id(root), element, shape, t, terms[t]))
            offsets.append(terms.get(1, 0))
        if len(forms) != 1:
            return False
        a = next(iter(forms))[4]
        return len(set(offsets)) == len(offsets) and max(offsets) - min(offsets) < abs(a)

    def _row_major_parts(self, index: Value, at: Block):
        """Each way of reading ``index`` as ``row * stride + column`` with a uniform stride and
        ``0 <= column < stride`` proven at ``at``: ``(row, stride, column)``."""
        v = _strip(index)
        if isinstance(v, _SumOf) and len(v.parts) == 2:       # gep(gep(x, row*S), c): a sum of two GEPs
            terms = v.parts
        elif isinstance(v, Instruction) and v.opcode == "add":
            terms = v.operands
        else:
            return
        for product, column in ((terms[0], terms[1]), (terms[1], terms[0])):
            product = _strip(product)
            if not (isinstance(product, Instruction) and product.opcode == "mul"):
                continue
            for row, stride in ((product.operands[0], product.operands[1]), (product.operands[1], product.operands[0])):
                if self.strictly_uniform(stride) and self.proven_below(column, stride, at):
                    yield row, stride, column

    def proven_below(self, c: Value, bound: Value, at: Block) -> bool:
        """``0 <= c < bound`` holds at block ``at`` by dominating bounds checks."""
        facts = self._dominating_facts(at)
        cs, bs = _aliases(c), _aliases(bound)

        def holds(pred, lhs_set, rhs_set):
            return any(p == pred and _strip(a) in lhs_set and _strip(b) in rhs_set for p, a, b in facts)

        if holds("ult", cs, bs) or holds("ugt", bs, cs):
            return True
        below = holds("slt", cs, bs) or holds("sgt", bs, cs)
        nonneg = any(p in ("sge", "sgt") and _strip(a) in cs and _const(b) == (0 if p == "sge" else -1)
                     for p, a, b in facts)
        return below and (nonneg or _nonnegative(c))

    def _dominating_facts(self, at: Block) -> list[tuple[str, Value, Value]]:
        """Comparisons known true at ``at`` (from conditional branches whose taken edge dominates it)."""
        facts = []
        for block, idom in self.dom.idom.items():
            term = block.terminator
            if term is None or term.opcode != "br" or len(term.blocks) != 2:
                continue
            cond = term.operands[0]
            if not (isinstance(cond, Instruction) and cond.opcode == "icmp"):
                continue
            for k, succ in enumerate(term.blocks):
                if term.blocks[0] is term.blocks[1] or not self._edge_dominates(block, succ, at):
                    continue
                pred = cond.predicate if k == 0 else _NEGATE[cond.predicate]
                facts.append((pred, cond.operands[0], cond.operands[1]))
        return facts

    def _edge_dominates(self, source: Block, succ: Block, at: Block) -> bool:
        preds = [b for b in self.dom.idom if succ in b.successors]
        return preds == [source] and succ in self.dom.idom and self.dom.dominates(succ, at)


_NEGATE = {"eq": "ne", "ne": "eq", "slt": "sge", "sge": "slt", "sgt": "sle", "sle": "sgt",
           "ult": "uge", "uge": "ult", "ugt": "ule", "ule": "ugt"}


def _const(v: Value) -> int | None:
    return int(v.value) if isinstance(v, Constant) and v.kind == "scalar" else None


def _nonnegative(v: Value) -> bool:
    return isinstance(v, Instruction) and v.opcode == "zext"


def _strip(v: Value) -> Value:
    while isinstance(v, Instruction) and v.opcode in _STRIP:
        v = v.operands[0]
    return v


def _aliases(v: Value) -> set[Value]:
    return {_strip(v)}


ANY_ROOT = "any root"      # _access_patterns' key for accesses through pointers of unknown origin


def _access_patterns(function) -> dict[Value, set]:
    """Per pointer root: the distinct accesses of its loads, stores and atomics, each as (index
    expressions (structurally), the GEPs' element type, the type accessed). An access wider than
    its element (``load <2 x double>`` at ``x[i]``) reaches the next thread's element too.

    An access whose address is no plain GEP chain over one element type (clang's byte offsets
    ``gep i8, (gep double, u, i), 8``, a phi or select of pointers) counts as a pattern of its own
    for every argument it may point into, so ``u[i]`` is not taken for thread i's alone while
    ``u[i + 1]`` is reached another way; one through a pointer of unknown origin (loaded,
    ``inttoptr``, returned by a call) counts against every root (key ``ANY_ROOT``)."""
    patterns: dict[Value, set] = {}
    for inst in function.instructions():
        if inst.opcode not in ("load", "store", "atomicrmw", "cmpxchg"):
            continue
        pointer = inst.operands[1] if inst.opcode == "store" else inst.operands[0]
        root, indices = _decompose(pointer)
        if isinstance(root, Argument | Constant | GlobalVariable) or \
                isinstance(root, Instruction) and root.opcode == "alloca":
            accessed = inst.type if inst.opcode == "load" else inst.operands[0 if inst.opcode == "store" else 1].type
            element = _gep_element(pointer)
            patterns.setdefault(root, set()).add((tuple(_structure(i) for i in indices),
                                                  None if element is None else str(element), str(accessed)))
            continue
        opaque = ("opaque", id(inst), None)
        roots = pointer_roots(pointer)
        for r in roots if roots is not None else (ANY_ROOT,):
            patterns.setdefault(r, set()).add(opaque)
    return patterns


def pointer_roots(pointer: Value, depth: int = 0, seen=None) -> set | None:
    """The arguments, allocas and globals ``pointer`` may point into (through GEPs, casts, phis and
    selects), or None when it may come from anywhere (a loaded pointer, ``inttoptr``, a call)."""
    seen = set() if seen is None else seen
    if pointer in seen:
        return set()
    seen.add(pointer)
    while isinstance(pointer, Instruction) and pointer.opcode in ("getelementptr", "bitcast", "addrspacecast"):
        pointer = pointer.operands[0]
    if isinstance(pointer, Argument | Constant | GlobalVariable) or \
            isinstance(pointer, Instruction) and pointer.opcode == "alloca":
        return {pointer}
    if isinstance(pointer, Instruction) and pointer.opcode in ("phi", "select") and depth < 32:
        found = set()
        for value in (pointer.operands if pointer.opcode == "phi" else pointer.operands[1:]):
            more = pointer_roots(value, depth + 1, seen)
            if more is None:
                return None
            found |= more
        return found
    return None


def _is_alloca(v: Value) -> bool:
    return isinstance(v, Instruction) and v.opcode == "alloca"


def _gep_element(pointer: Value):
    """The element type the GEP chain of ``pointer`` steps over (None without a GEP)."""
    while isinstance(pointer, Instruction) and pointer.opcode in ("bitcast", "addrspacecast"):
        pointer = pointer.operands[0]
    return pointer.element_type if isinstance(pointer, Instruction) and pointer.opcode == "getelementptr" else None


def _structure(v: Value, depth: int = 0):
    """A hashable structural key of an index expression (equal keys: equal values per thread)."""
    if isinstance(v, Constant):
        return ("const", v.value)
    if isinstance(v, Instruction) and v.opcode != "phi" and v.opcode != "load" and depth < 12:
        return (v.opcode, v.predicate, tuple(_structure(o, depth + 1) for o in v.operands))
    if isinstance(v, _SumOf):
        return ("sum", tuple(_structure(o, depth + 1) for o in v.parts))
    return ("value", id(v))


def _decompose(pointer: Value) -> tuple[Value | None, list[Value]]:
    """Root and element indices of a GEP chain whose GEPs have one index each."""
    indices: list[Value] = []
    element = None
    while isinstance(pointer, Instruction) and pointer.opcode in ("getelementptr", "bitcast", "addrspacecast"):
        if pointer.opcode == "getelementptr":
            if len(pointer.operands) != 2 or (element is not None and pointer.element_type != element):
                return None, []
            element = pointer.element_type
            indices.append(pointer.operands[1])
        pointer = pointer.operands[0]
    if not indices:
        return pointer, [Constant(_I64, 0)]
    if len(indices) == 1:
        return pointer, indices
    return pointer, [_SumOf(indices)]


class _SumOf(Value):
    """A virtual index: the sum of a GEP chain's indices (only looked at by ``_linear``)."""

    def __init__(self, parts: list[Value]):
        self.parts, self.name = parts, "sum"
        self.type = parts[0].type


def _linear(v: Value, depth: int = 0) -> dict | None:
    """``v`` as {atom: integer coefficient} (key 1 for the constant term), or None."""
    if depth > 16:
        return None
    if isinstance(v, _SumOf):
        return _combine([_linear(p, depth + 1) for p in v.parts], [1] * len(v.parts))
    c = _const(v)
    if c is not None:
        return {1: c}
    if isinstance(v, Instruction):
        op = v.opcode
        if op in _STRIP:
            return _linear(v.operands[0], depth + 1)
        if op in ("add", "sub"):
            return _combine([_linear(o, depth + 1) for o in v.operands], [1, 1 if op == "add" else -1])
        if op == "or":          # ``(t << 2) | 3``: an add where the constant fits in known-zero low bits
            for other, low in ((v.operands[0], v.operands[1]), (v.operands[1], v.operands[0])):
                c = _const(low)
                inner = _linear(other, depth + 1) if c is not None and c >= 0 else None
                if inner is not None and all(k % (1 << c.bit_length()) == 0 for k in inner.values()):
                    return _combine([inner, {1: c}], [1, 1])
        if op in ("mul", "shl"):
            k = _const(v.operands[1])
            other = v.operands[0]
            if k is None and op == "mul":
                k, other = _const(v.operands[0]), v.operands[1]
            if k is not None:
                inner = _linear(other, depth + 1)
                factor = k if op == "mul" else 1 << k
                return None if inner is None else {a: c * factor for a, c in inner.items()}
    return {v: 1}


def _combine(parts: list[dict | None], signs: list[int]) -> dict | None:
    out: dict = {}
    for part, sign in zip(parts, signs):
        if part is None:
            return None
        for atom, c in part.items():
            out[atom] = out.get(atom, 0) + sign * c
    return out


from ..ir.core import i64 as _I64  # noqa: E402  (after the helpers that name it)


# ----------------------------------------------------------------------------- uniform adds

UNIFORM_ADD_PREFIX = "adoffload.uniform_fadd."


def uniform_add_intrinsic(module, value_type):
    """``@adoffload.uniform_fadd.<f32|f64>(ptr, value)``: ``*ptr += value``, atomically, for an
    address expected to be the same across a warp (lowered per target; correct for any address)."""
    from ..ir.core import FunctionType, type_suffix, void
    return module.get_or_declare(f"{UNIFORM_ADD_PREFIX}{type_suffix(value_type)}",
                                 FunctionType(void, (_PTR, value_type)))


from ..ir.core import ptr as _PTR  # noqa: E402


# Definitions of the uniform add per target, as LLVM text ({T}: float/double, {S}: f32/f64).
# Host and AMDGPU: one atomic add per thread (on the host the per-thread register sum already
# removed the contention that matters; on AMDGPU LLVM's atomic optimizer reduces an address it
# proves uniform over the wavefront). NVPTX: when the whole warp is active and every lane passes
# the same pointer (match.any.sync), a shfl.down tree sums the 32 lanes and lane 0 adds once;
# otherwise (a partial active mask, whose tree would read inactive lanes, or lanes at different
# addresses) each active lane adds atomically -- correct, merely slower. The match makes the
# add correct for any pointer, so the AD engine also uses it for addresses that are uniform
# only in practice (``d_w[k]`` in a loop over k: ``AddressClassifier.warp_uniform``).
_ATOMIC_BODY = """
define internal void @"{NAME}"(ptr %p, {T} %v) alwaysinline {{
entry:
  %old = atomicrmw fadd ptr %p, {T} %v monotonic
  ret void
}}
"""

_NVPTX_BODY = """
declare i32 @llvm.nvvm.activemask()
declare i32 @llvm.nvvm.read.ptx.sreg.laneid()
declare i32 @llvm.nvvm.shfl.sync.down.i32(i32, i32, i32, i32)
declare i32 @llvm.nvvm.match.any.sync.i64(i32, i64)
define internal void @"{NAME}"(ptr %p, {T} %v) alwaysinline {{
entry:
  %mask = call i32 @llvm.nvvm.activemask()
  %full = icmp eq i32 %mask, -1
  br i1 %full, label %match, label %each
match:
  %address = ptrtoint ptr %p to i64
  %peers = call i32 @llvm.nvvm.match.any.sync.i64(i32 -1, i64 %address)
  %same = icmp eq i32 %peers, -1
  br i1 %same, label %tree, label %each
each:
  %old = atomicrmw fadd ptr %p, {T} %v monotonic
  ret void
tree:
{TREE}
  %lane = call i32 @llvm.nvvm.read.ptx.sreg.laneid()
  %leader = icmp eq i32 %lane, 0
  br i1 %leader, label %add, label %done
add:
  %old2 = atomicrmw fadd ptr %p, {T} %s5 monotonic
  br label %done
done:
  ret void
}}
"""


def _shuffle_step(k: int, offset: int, kind: str) -> str:
    """``%s{k} = %s{k-1} + shfl.down(%s{k-1}, offset)`` over the full warp, as 32-bit halves."""
    prev = "%v" if k == 1 else f"%s{k - 1}"
    if kind == "float":
        return (f"  %b{k} = bitcast float {prev} to i32\n"
                f"  %r{k} = call i32 @llvm.nvvm.shfl.sync.down.i32(i32 -1, i32 %b{k}, i32 {offset}, i32 31)\n"
                f"  %o{k} = bitcast i32 %r{k} to float\n"
                f"  %s{k} = fadd float {prev}, %o{k}\n")
    return (f"  %w{k} = bitcast double {prev} to i64\n"
            f"  %lo{k} = trunc i64 %w{k} to i32\n"
            f"  %hs{k} = lshr i64 %w{k}, 32\n"
            f"  %hi{k} = trunc i64 %hs{k} to i32\n"
            f"  %rlo{k} = call i32 @llvm.nvvm.shfl.sync.down.i32(i32 -1, i32 %lo{k}, i32 {offset}, i32 31)\n"
            f"  %rhi{k} = call i32 @llvm.nvvm.shfl.sync.down.i32(i32 -1, i32 %hi{k}, i32 {offset}, i32 31)\n"
            f"  %zlo{k} = zext i32 %rlo{k} to i64\n"
            f"  %zhi{k} = zext i32 %rhi{k} to i64\n"
            f"  %up{k} = shl i64 %zhi{k}, 32\n"
            f"  %j{k} = or i64 %up{k}, %zlo{k}\n"
            f"  %o{k} = bitcast i64 %j{k} to double\n"
            f"  %s{k} = fadd double {prev}, %o{k}\n")


def uniform_add_definition(name: str, target: str) -> str:
    """LLVM text defining the uniform-add function ``name`` for ``target`` (host|nvptx|amdgpu)."""
    kind = "float" if name.endswith("f32") else "double"
    if target == "nvptx":
        tree = "".join(_shuffle_step(k, off, kind) for k, off in enumerate((16, 8, 4, 2, 1), start=1))
        return _NVPTX_BODY.format(NAME=name, T=kind, TREE=tree.rstrip("\n"))
    return _ATOMIC_BODY.format(NAME=name, T=kind)


def lower_uniform_adds_text(text: str, target: str) -> str:
    """Replace the declarations of ``@adoffload.uniform_fadd.*`` in LLVM text by definitions."""
    import re
    out = text
    for m in list(re.finditer(r'^declare[^\n]*@"?(adoffload\.uniform_fadd\.f(?:32|64))"?\([^\n]*$', text, re.M)):
        lines = [line for line in uniform_add_definition(m.group(1), target).splitlines()
                 if not (line.startswith("declare ") and _mentions(out, line))]
        out = out.replace(m.group(0), "\n".join(lines))
    return out


def _mentions(text: str, declaration: str) -> bool:
    import re
    name = re.search(r"@([\w.]+)", declaration).group(1)
    return re.search(rf'^(declare|define)[^\n]*@"?{re.escape(name)}"?\(', text, re.M) is not None


def lower_uniform_adds(module, target: str) -> None:
    """In an ``ir.core`` Module: give every ``@adoffload.uniform_fadd.*`` declaration its
    target definition (in place; internal + alwaysinline, so O3 inlines it)."""
    from ..ir import import_module
    for fn in list(module.functions.values()):
        if not (fn.name.startswith(UNIFORM_ADD_PREFIX) and fn.is_declaration):
            continue
        template = import_module(uniform_add_definition(fn.name, target))
        source = template.functions[fn.name]
        for callee in template.functions.values():
            if callee is not source and callee.name not in module.functions:
                module.add_function(type(callee)(callee.name, callee.function_type, callee.args,
                                                 attributes=set(callee.attributes)))
        arg_map = dict(zip(source.args, fn.args))
        for block in source.blocks:
            block.parent = fn
            for inst in block.instructions:
                inst.operands = [arg_map.get(o, o) for o in inst.operands]
                if inst.opcode == "call" and inst.callee is not None and inst.callee.name in module.functions:
                    inst.callee = module.functions[inst.callee.name]
        fn.blocks = source.blocks
        fn.linkage = "internal"
        fn.attributes |= {"alwaysinline"}
