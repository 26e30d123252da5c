"""A small IR builder: an insertion point plus one method per instruction family.

Used by the AD engine and the kernel wrappers to emit IR; every emitted instruction gets a
fresh name and the builder's current source location.
"""
from __future__ import annotations

from contextlib import contextmanager

from .core import (Block, Constant, Function, FunctionType, Instruction, SourceLocation, Type,
                   Value, const, i1, i64, ptr, void)

_BINARY = ("add", "sub", "mul", "sdiv", "udiv", "srem", "urem", "shl", "lshr", "ashr", "and", "or",
           "xor", "fadd", "fsub", "fmul", "fdiv", "frem")
_CASTS = ("trunc", "zext", "sext", "fptrunc", "fpext", "fptoui", "fptosi", "uitofp", "sitofp",
          "ptrtoint", "inttoptr", "bitcast", "addrspacecast")


class Builder:
    def __init__(self, block: Block | None = None, index: int | None = None):
        self.block = block
        self.index = index            # None: append at the end of the block
        self.location: SourceLocation | None = None

    # ---- insertion point
    @property
    def function(self) -> Function:
        assert self.block is not None and self.block.parent is not None
        return self.block.parent

    def position_at_end(self, block: Block) -> None:
        self.block, self.index = block, None

    def position_before(self, inst: Instruction) -> None:
        self.block = inst.parent
        self.index = self.block.instructions.index(inst)

    def position_before_terminator(self, block: Block) -> None:
        self.block = block
        self.index = len(block.instructions) - (1 if block.terminator is not None else 0)

    @contextmanager
    def at_end(self, block: Block):
        saved = (self.block, self.index)
        self.position_at_end(block)
        try:
            yield self
        finally:
            self.block, self.index = saved

    def insert(self, inst: Instruction, name: str = "") -> Instruction:
        if inst.type != void and not inst.name:
            inst.name = self.function.fresh_name(name or "t")
        if inst.location is None:
            inst.location = self.location
        if self.index is None:
            self.block.append(inst)
        else:
            self.block.insert(self.index, inst)
            self.index += 1
        return inst

    # ---- generic
    def emit(self, opcode: str, type_: Type, operands: list[Value], name: str = "", **fields) -> Instruction:
        return self.insert(Instruction(opcode, type_, list(operands), **fields), name)

    def binary(self, opcode: str, a: Value, b: Value, name: str = "", flags=()) -> Instruction:
        if opcode not in _BINARY:
            raise ValueError(f"not a binary opcode: {opcode}")
        return self.emit(opcode, a.type, [a, b], name, flags=set(flags))

    def cast(self, opcode: str, value: Value, to: Type, name: str = "") -> Instruction:
        if opcode not in _CASTS:
            raise ValueError(f"not a cast opcode: {opcode}")
        return self.emit(opcode, to, [value], name)

    def fadd(self, a, b, name=""): return self.binary("fadd", a, b, name)
    def fsub(self, a, b, name=""): return self.binary("fsub", a, b, name)
    def fmul(self, a, b, name=""): return self.binary("fmul", a, b, name)
    def fdiv(self, a, b, name=""): return self.binary("fdiv", a, b, name)
    def add(self, a, b, name=""): return self.binary("add", a, b, name)
    def sub(self, a, b, name=""): return self.binary("sub", a, b, name)
    def mul(self, a, b, name=""): return self.binary("mul", a, b, name)

    def fneg(self, a: Value, name: str = "") -> Instruction:
        return self.emit("fneg", a.type, [a], name)

    def icmp(self, predicate: str, a: Value, b: Value, name: str = "") -> Instruction:
        return self.emit("icmp", i1, [a, b], name, predicate=predicate)

    def fcmp(self, predicate: str, a: Value, b: Value, name: str = "") -> Instruction:
        return self.emit("fcmp", i1, [a, b], name, predicate=predicate)

    def select(self, cond: Value, a: Value, b: Value, name: str = "") -> Instruction:
        return self.emit("select", a.type, [cond, a, b], name)

    def phi(self, type_: Type, incoming: list[tuple[Value, Block]] = (), name: str = "") -> Instruction:
        return self.emit("phi", type_, [v for v, _ in incoming], name, blocks=[b for _, b in incoming])

    def gep(self, element_type: Type, base: Value, indices: list[Value], name: str = "",
            inbounds: bool = True) -> Instruction:
        flags = {"inbounds"} if inbounds else set()
        return self.emit("getelementptr", base.type, [base, *indices], name,
                         element_type=element_type, flags=flags)

    def load(self, type_: Type, pointer: Value, name: str = "", align: int | None = None) -> Instruction:
        return self.emit("load", type_, [pointer], name, align=align)

    def store(self, value: Value, pointer: Value, align: int | None = None) -> Instruction:
        return self.emit("store", void, [value, pointer], align=align)

    def alloca(self, type_: Type, name: str = "") -> Instruction:
        return self.emit("alloca", ptr, [], name, element_type=type_)

    def atomicrmw(self, op: str, pointer: Value, value: Value, ordering: str = "monotonic",
                  name: str = "") -> Instruction:
        return self.emit("atomicrmw", value.type, [pointer, value], name, op=op, ordering=ordering)

    def call(self, callee: Function, args: list[Value], name: str = "") -> Instruction:
        return self.emit("call", callee.function_type.return_type, list(args), name, callee=callee)

    def br(self, dest: Block) -> Instruction:
        return self.emit("br", void, [], blocks=[dest])

    def cbranch(self, cond: Value, then: Block, otherwise: Block) -> Instruction:
        return self.emit("br", void, [cond], blocks=[then, otherwise])

    def ret(self, value: Value | None = None) -> Instruction:
        return self.emit("ret", void, [] if value is None else [value])

    def call_intrinsic(self, module, name: str, return_type: Type, args: list[Value], tag: str = "") -> Instruction:
        """Call ``name`` (an LLVM intrinsic or libm function), declaring it in ``module`` if needed."""
        fn = module.get_or_declare(name, FunctionType(return_type, tuple(a.type for a in args)))
        return self.call(fn, args, tag)


def zero(type_: Type) -> Constant:
    return const(type_, 0)


def one(type_: Type) -> Constant:
    return const(type_, 1)


def index(value: int) -> Constant:
    return const(i64, value)
