"""The memory model: which calls allocate, free or copy memory, and the shadow heap.

Allocation functions are data (``ALLOCATORS``): C's ``malloc``/``calloc``/``realloc``/``free``,
C++ ``new``/``delete`` (Itanium names) and Rust's ``__rust_alloc*``. A heap block that holds
active values gets a *shadow block* of the same size, allocated zeroed beside it in the
forward sweep (``@adoffload.shadow.alloc``). Shadow blocks carry their size in a 16-byte
header, so a shadow can follow a ``realloc`` without knowing the primal's old size.

Lifetimes: forward mode frees a shadow where the primal is freed. Reverse mode keeps every
shadow until the reverse sweep reaches the allocation (the adjoints of the block's values are
still accumulating until then) and frees it there; the primal is freed where the program
freed it, since the reverse sweep reads primal heap values only from the tape.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from ..errors import DifferentiationError
from ..ir.builder import Builder
from ..ir.core import (Argument, Constant, Function, FunctionType, Instruction, Module, Value, const, i1, i8,
                       i64, ptr, void)

HEADER_BYTES = 16


@dataclass(frozen=True)
class HeapFunction:
    """How one allocation function uses its arguments (indices into the call's operands)."""
    kind: str                      # "alloc" | "free" | "realloc"
    size: tuple[int, ...] = ()     # operands whose product is the size in bytes (alloc, realloc)
    pointer: int | None = None     # the block freed or reallocated


ALLOCATORS: dict[str, HeapFunction] = {
    "malloc": HeapFunction("alloc", size=(0,)),
    "calloc": HeapFunction("alloc", size=(0, 1)),
    "aligned_alloc": HeapFunction("alloc", size=(1,)),
    "_Znwm": HeapFunction("alloc", size=(0,)),                 # operator new(size_t)
    "_Znam": HeapFunction("alloc", size=(0,)),                 # operator new[](size_t)
    "_ZnwmSt11align_val_t": HeapFunction("alloc", size=(0,)),
    "_ZnamSt11align_val_t": HeapFunction("alloc", size=(0,)),
    "__rust_alloc": HeapFunction("alloc", size=(0,)),
    "__rust_alloc_zeroed": HeapFunction("alloc", size=(0,)),
    "free": HeapFunction("free", pointer=0),
    "_ZdlPv": HeapFunction("free", pointer=0),                 # operator delete(void*)
    "_ZdaPv": HeapFunction("free", pointer=0),
    "_ZdlPvm": HeapFunction("free", pointer=0),                # sized delete
    "_ZdaPvm": HeapFunction("free", pointer=0),
    "_ZdlPvSt11align_val_t": HeapFunction("free", pointer=0),
    "_ZdlPvmSt11align_val_t": HeapFunction("free", pointer=0),
    "__rust_dealloc": HeapFunction("free", pointer=0),
    "NRT_Allocate": HeapFunction("alloc", size=(0,)),           # numba's memory manager: malloc and free
    "NRT_Free": HeapFunction("free", pointer=0),
    "realloc": HeapFunction("realloc", size=(1,), pointer=0),
    "__rust_realloc": HeapFunction("realloc", size=(3,), pointer=0),
}


# rustc's v0 mangling of its allocator shims: ``_RNvCs<crate hash>_7___rustc12___rust_alloc``
_RUST_V0 = re.compile(r"^_RNv\w*___rustc(\d+)_(__rust_\w+)$")


def heap_function(inst: Instruction) -> HeapFunction | None:
    """The allocation-table entry of a call, or None (also for anything that is not a call)."""
    if inst.opcode != "call" or not isinstance(inst.callee, Function):
        return None
    name = inst.callee.name
    mangled = _RUST_V0.match(name)
    if mangled and int(mangled.group(1)) == len(mangled.group(2)):
        name = mangled.group(2)
    return ALLOCATORS.get(name)


def is_allocation(v: Value) -> bool:
    """Whether ``v`` is a call that returns a new heap block (an allocation or a realloc)."""
    entry = heap_function(v) if isinstance(v, Instruction) else None
    return entry is not None and entry.kind in ("alloc", "realloc")


def allocation_size(b: Builder, call: Instruction, value=lambda v: v) -> Value:
    """The size in bytes an allocation call asks for, as an i64 (``value`` maps each operand to
    where ``b`` can use it, e.g. the reverse sweep's copy)."""
    entry = heap_function(call)
    size: Value | None = None
    for k in entry.size:
        operand = value(call.operands[k])
        if operand.type != i64:
            operand = b.cast("zext", operand, i64)
        size = operand if size is None else b.mul(size, operand)
    return size


# ----------------------------------------------------------------------------- the shadow heap

def _define(module: Module, name: str, ret, params: list[tuple[str, object]], body) -> Function:
    fn = module.functions.get(name)
    if fn is not None:
        return fn
    fn = Function(name, FunctionType(ret, tuple(t for _, t in params)),
                  [Argument(t, n, k) for k, (n, t) in enumerate(params)], linkage="internal")
    module.add_function(fn)
    body(fn)
    return fn


def shadow_alloc(module: Module) -> Function:
    """``ptr @adoffload.shadow.alloc(i64 n)``: n zeroed bytes after a header holding n."""
    def body(fn: Function) -> None:
        b = Builder(fn.add_block("entry"))
        total = b.add(fn.args[0], const(i64, HEADER_BYTES))
        base = b.call_intrinsic(module, "calloc", ptr, [total, const(i64, 1)])
        _check_allocated(module, fn, b, base)
        b.store(fn.args[0], base)
        b.ret(b.gep(i8, base, [const(i64, HEADER_BYTES)], inbounds=False))
    return _define(module, "adoffload.shadow.alloc", ptr, [("n", i64)], body)


def shadow_free(module: Module) -> Function:
    """``void @adoffload.shadow.free(ptr s)``: frees a shadow block (null is allowed)."""
    def body(fn: Function) -> None:
        b = Builder(fn.add_block("entry"))
        done, release = fn.add_block("done"), fn.add_block("release")
        b.cbranch(b.icmp("eq", fn.args[0], Constant(ptr, None, kind="null")), done, release)
        b = Builder(release)
        b.call_intrinsic(module, "free", void, [b.gep(i8, fn.args[0], [const(i64, -HEADER_BYTES)], inbounds=False)])
        b.br(done)
        Builder(done).ret()
    return _define(module, "adoffload.shadow.free", void, [("s", ptr)], body)


def shadow_realloc(module: Module) -> Function:
    """``ptr @adoffload.shadow.realloc(ptr s, i64 n)``: resizes a shadow block; new bytes are zero."""
    def body(fn: Function) -> None:
        s, n = fn.args
        b = Builder(fn.add_block("entry"))
        fresh, resize = fn.add_block("fresh"), fn.add_block("resize")
        b.cbranch(b.icmp("eq", s, Constant(ptr, None, kind="null")), fresh, resize)
        b = Builder(fresh)
        b.ret(b.call(shadow_alloc(module), [n]))
        b = Builder(resize)
        old_base = b.gep(i8, s, [const(i64, -HEADER_BYTES)], inbounds=False)
        old = b.load(i64, old_base)
        base = b.call_intrinsic(module, "realloc", ptr, [old_base, b.add(n, const(i64, HEADER_BYTES))])
        _check_allocated(module, fn, b, base)
        grow, done = fn.add_block("grow"), fn.add_block("done")
        b.cbranch(b.icmp("ugt", n, old), grow, done)
        g = Builder(grow)
        tail = g.gep(i8, base, [g.add(old, const(i64, HEADER_BYTES))], inbounds=False)
        g.call_intrinsic(module, "llvm.memset.p0.i64", void, [tail, const(i8, 0), g.sub(n, old), const(i1, 0)])
        g.br(done)
        d = Builder(done)
        d.store(n, base)
        d.ret(d.gep(i8, base, [const(i64, HEADER_BYTES)], inbounds=False))
    return _define(module, "adoffload.shadow.realloc", ptr, [("s", ptr), ("n", i64)], body)


def shadow_size(module: Module) -> Function:
    """``i64 @adoffload.shadow.size(ptr s)``: the size of a shadow block (0 for null)."""
    def body(fn: Function) -> None:
        b = Builder(fn.add_block("entry"))
        null, block = fn.add_block("null"), fn.add_block("block")
        b.cbranch(b.icmp("eq", fn.args[0], Constant(ptr, None, kind="null")), null, block)
        Builder(null).ret(const(i64, 0))
        b = Builder(block)
        b.ret(b.load(i64, b.gep(i8, fn.args[0], [const(i64, -HEADER_BYTES)], inbounds=False)))
    return _define(module, "adoffload.shadow.size", i64, [("s", ptr)], body)


def _check_allocated(module: Module, fn: Function, b: Builder, base: Value) -> None:
    """Out of memory for a shadow block: trap (the primal program could not handle it either)."""
    failed, ok = fn.add_block(f"oom{len(fn.blocks)}"), fn.add_block(f"ok{len(fn.blocks)}")
    b.cbranch(b.icmp("eq", base, Constant(ptr, None, kind="null")), failed, ok)
    t = Builder(failed)
    t.call_intrinsic(module, "llvm.trap", void, [])
    t.emit("unreachable", void, [])
    b.position_at_end(ok)


# ----------------------------------------------------------------------------- copies

def float_element_type(fn: Function, pointers: list[Value]):
    """The one float scalar type stored in the memory reached from ``pointers`` (following GEPs,
    casts, phis and selects to every load and store, and the contents on through memcpy/memmove
    and realloc), None when no float is accessed there. Several float types (f32 and f64 in one
    block) raise: a copy's adjoint adds element by element."""
    from ..ir.core import VectorType
    users = fn.users()

    def base(p):
        while isinstance(p, Instruction) and p.opcode in ("getelementptr", "bitcast", "addrspacecast"):
            p = p.operands[0]
        return p
    seen, work, found = set(), [base(p) for p in pointers], set()
    while work:
        p = work.pop()
        if p in seen:
            continue
        seen.add(p)
        for user in users.get(p, []):
            t = None
            entry = heap_function(user)
            if user.opcode == "load" and user.operands[0] is p:
                t = user.type
            elif user.opcode == "store" and user.operands[1] is p:
                t = user.operands[0].type
            elif user.opcode in ("getelementptr", "bitcast", "addrspacecast", "phi", "select") and user.type.is_pointer:
                work.append(user)
            elif user.opcode == "call" and getattr(user.callee, "name", "").startswith(("llvm.memcpy", "llvm.memmove")):
                work += [base(user.operands[0]), base(user.operands[1])]       # the same contents, elsewhere
            elif entry is not None and entry.kind == "realloc" and user.operands[entry.pointer] is p:
                work.append(user)
            if isinstance(t, VectorType):
                t = t.element
            if t is not None and t.is_float:
                found.add(t)
    if len(found) > 1:
        raise DifferentiationError(f"a copy moves memory holding several float types ({', '.join(sorted(map(str, found)))}) "
                                   f"in @{fn.name}; its adjoint cannot be formed element by element")
    return found.pop() if found else None


def copy_adjoint(module: Module, element) -> Function:
    """``void @adoffload.copy_adjoint.<T>(ptr d_dst, ptr d_src, i64 nbytes)``: the transpose of a
    memcpy/memmove on shadows: ``g = d_dst; d_dst = 0; d_src += g``, element by element, walking
    in the direction that stays right when the two ranges overlap. The elements lie the type's
    allocation size apart (sizeof, from a GEP off null): an ``x86_fp80`` (C ``long double``) takes
    16 bytes, not its 10; counting 10-byte elements ran the 16-byte GEPs past the end of the block."""

    def body(fn: Function) -> None:
        d_dst, d_src, nbytes = fn.args
        b = Builder(fn.add_block("entry"))
        end = b.gep(element, Constant(ptr, None, kind="null"), [const(i64, 1)], inbounds=False)
        n = b.emit("udiv", i64, [nbytes, b.cast("ptrtoint", end, i64)])
        up = b.icmp("ult", d_src, d_dst)
        loop, done = fn.add_block("loop"), fn.add_block("done")
        b.cbranch(b.icmp("eq", n, const(i64, 0)), done, loop)
        entry = b.block
        lb = Builder(loop)
        k = lb.phi(i64, [(const(i64, 0), entry)], "k")
        index = lb.select(up, k, lb.sub(lb.sub(n, const(i64, 1)), k))
        dst_at = lb.gep(element, d_dst, [index], inbounds=False)
        src_at = lb.gep(element, d_src, [index], inbounds=False)
        g = lb.load(element, dst_at, align=1)
        lb.store(Constant(element, None, kind="zero"), dst_at, align=1)
        lb.store(lb.fadd(lb.load(element, src_at, align=1), g), src_at, align=1)
        nxt = lb.add(k, const(i64, 1))
        k.operands.append(nxt)
        k.blocks.append(loop)
        lb.cbranch(lb.icmp("eq", nxt, n), done, loop)
        Builder(done).ret()
    return _define(module, f"adoffload.copy_adjoint.{element}", void,
                   [("d_dst", ptr), ("d_src", ptr), ("nbytes", i64)], body)


# ----------------------------------------------------------------------------- stack arrays

def stack_array_count(alloca: Instruction) -> Value | None:
    """The element count of ``alloca T, N`` (a C99 variable-length array, or a constant N):
    its shadow needs as many elements. None for the one-element form."""
    return alloca.operands[0] if alloca.opcode == "alloca" and alloca.operands else None


def zeroed_stack_array(module: Module, b: Builder, element_type, count: Value, name: str = "",
                       align: int | None = None) -> Instruction:
    """``alloca element_type, count``, zero-filled at ``b``: the shadow of a stack array of
    ``count`` elements (its size in bytes from a GEP off null, as LLVM's sizeof idiom), aligned as
    the primal array (``align``): the primal's loads and stores, copied to the shadow, claim that."""
    array = b.emit("alloca", ptr, [count], name, element_type=element_type)
    array.align = align
    end = b.gep(element_type, Constant(ptr, None, kind="null"), [count], inbounds=False)
    b.call_intrinsic(module, "llvm.memset.p0.i64", void,
                     [array, const(i8, 0), b.cast("ptrtoint", end, i64), const(i1, 0)])
    return array


def refuse_unsafe_stack_array(alloca: Instruction, where: str) -> None:
    """A reverse sweep reads a stack array's values and shadow after the forward sweep: refused
    when the array may not outlive it -- inside a loop (each iteration's array replaces the
    last one's) or in a function that pops stack space (``llvm.stackrestore``, which ends a
    C99 variable-length array's scope)."""
    fn = alloca.parent.parent
    restores = any(getattr(i.callee, "name", "").startswith("llvm.stackrestore")
                   for i in fn.instructions() if i.opcode == "call")
    if restores or _in_cycle(alloca.parent):
        why = "frees stack space (llvm.stackrestore)" if restores else "is inside a loop"
        raise DifferentiationError(
            f"cannot differentiate {where} in reverse mode: the variable-length stack array {alloca.ref()} "
            f"(alloca with an element count, at {alloca.location or '?'}) {why}, so its values and "
            f"adjoints would not survive until the reverse sweep; allocate it with malloc, or outside the loop")


def _in_cycle(block) -> bool:
    seen, todo = set(), list(block.terminator.blocks) if block.terminator else []
    while todo:
        b = todo.pop()
        if b is block:
            return True
        if b not in seen:
            seen.add(b)
            todo.extend(b.terminator.blocks if b.terminator else [])
    return False
