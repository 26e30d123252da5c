"""The IR verifier: structure, SSA dominance and operand types.

Run after every transformation in tests (and by the AD engine in debug mode). A failure
raises ``VerificationError`` showing the offending instruction among its neighbours,
the way JAX's ``check_jaxpr`` prints the failing equation.
"""
from __future__ import annotations

from typing import Callable

from .core import (Argument, Block, Constant, Function, FunctionType, GlobalVariable, Instruction,
                   IntType, MetadataValue, Module, PointerType, Type, VectorType, i1, void)
from .printer import function_lines
from ..errors import VerificationError

_CONTEXT = 3  # lines shown on each side of the offending instruction


def verify(target: Module | Function) -> None:
    """Raise VerificationError at the first problem in ``target`` (a Module or a Function)."""
    functions = target.functions.values() if isinstance(target, Module) else [target]
    for fn in functions:
        if not fn.is_declaration:
            _FunctionVerifier(fn).run()


def _fail(fn: Function, culprit, problem: str) -> VerificationError:
    lines = function_lines(fn)
    at = next((k for k, (obj, _) in enumerate(lines) if obj is culprit), None)
    if at is None:
        shown = [f"    {text}" for _, text in lines[:2 * _CONTEXT + 1]]
    else:
        lo, hi = max(0, at - _CONTEXT), min(len(lines), at + _CONTEXT + 1)
        shown = [(">>> " if k == at else "    ") + lines[k][1] for k in range(lo, hi)]
    return VerificationError(f"in function @{fn.name}: {problem}\n" + "\n".join(shown))


# ----------------------------------------------------------------------------- type rules

def _scalar(t: Type) -> Type:
    return t.element if isinstance(t, VectorType) else t


def _is_int(t: Type) -> bool:
    return isinstance(_scalar(t), IntType)


def _is_float(t: Type) -> bool:
    return bool(_scalar(t).is_float)


def _is_pointer(t: Type) -> bool:
    return isinstance(_scalar(t), PointerType)


def _same_operands_and_result(predicate: Callable[[Type], bool], kind: str):
    def check(inst: Instruction) -> str | None:
        if len(inst.operands) != 2:
            return f"'{inst.opcode}' needs 2 operands, has {len(inst.operands)}"
        a, b = (o.type for o in inst.operands)
        if a != b or a != inst.type:
            return f"'{inst.opcode}' operand types {a} and {b} and result type {inst.type} must all agree"
        if not predicate(a):
            return f"'{inst.opcode}' needs {kind} operands, got {a}"
        return None
    return check


def _cast(source: Callable[[Type], bool], target: Callable[[Type], bool], relation=None):
    def check(inst: Instruction) -> str | None:
        if len(inst.operands) != 1:
            return f"'{inst.opcode}' needs 1 operand"
        src, dst = inst.operands[0].type, inst.type
        if not (source(src) and target(dst)):
            return f"'{inst.opcode}' cannot convert {src} to {dst}"
        if relation and not relation(_scalar(src).bits, _scalar(dst).bits):
            return f"'{inst.opcode}' from {src} to {dst} has the wrong bit widths"
        return None
    return check


def _compare(operand_kind: Callable[[Type], bool], kind: str):
    def check(inst: Instruction) -> str | None:
        if len(inst.operands) != 2 or inst.operands[0].type != inst.operands[1].type:
            return f"'{inst.opcode}' needs two operands of one type"
        if not operand_kind(inst.operands[0].type):
            return f"'{inst.opcode}' needs {kind} operands, got {inst.operands[0].type}"
        if _scalar(inst.type) != i1:
            return f"'{inst.opcode}' must produce i1, not {inst.type}"
        if inst.predicate is None:
            return f"'{inst.opcode}' has no predicate"
        return None
    return check


def _check_select(inst: Instruction) -> str | None:
    if len(inst.operands) != 3:
        return "'select' needs 3 operands"
    cond, a, b = inst.operands
    if _scalar(cond.type) != i1:
        return f"'select' condition must be i1, got {cond.type}"
    if not (a.type == b.type == inst.type):
        return f"'select' arms {a.type} and {b.type} must match the result type {inst.type}"
    return None


def _check_load(inst: Instruction) -> str | None:
    if len(inst.operands) != 1 or not _is_pointer(inst.operands[0].type):
        return "'load' needs one pointer operand"
    return None


def _check_store(inst: Instruction) -> str | None:
    if len(inst.operands) != 2 or not _is_pointer(inst.operands[1].type):
        return "'store' needs a value and a pointer operand"
    return None if inst.type == void else "'store' produces no value"


def _check_gep(inst: Instruction) -> str | None:
    if not inst.operands or not _is_pointer(inst.operands[0].type):
        return "'getelementptr' needs a pointer base"
    if inst.element_type is None:
        return "'getelementptr' has no source element type"
    bad = [o for o in inst.operands[1:] if not _is_int(o.type)]
    return f"'getelementptr' index {bad[0].ref()} is {bad[0].type}, not an integer" if bad else None


def _check_atomicrmw(inst: Instruction) -> str | None:
    if len(inst.operands) != 2 or not _is_pointer(inst.operands[0].type):
        return "'atomicrmw' needs a pointer and a value"
    if inst.operands[1].type != inst.type:
        return f"'atomicrmw' value type {inst.operands[1].type} differs from its result type {inst.type}"
    return None


def _check_phi(inst: Instruction) -> str | None:
    if len(inst.operands) != len(inst.blocks):
        return f"phi has {len(inst.operands)} values but {len(inst.blocks)} incoming blocks"
    bad = [o for o in inst.operands if o.type != inst.type]
    return f"phi incoming {bad[0].ref()} has type {bad[0].type}, not {inst.type}" if bad else None


def _check_call(inst: Instruction) -> str | None:
    callee = inst.callee
    ftype: FunctionType | None = callee.function_type if isinstance(callee, Function) else inst.element_type
    if ftype is None:
        return None  # an indirect call built without its function type
    if inst.opcode == "invoke" and len(inst.blocks) != 2:
        return "'invoke' needs a normal and an unwind destination"
    n = len(ftype.params)
    if len(inst.operands) < n or (len(inst.operands) > n and not ftype.vararg):
        return f"call to {callee.ref()} passes {len(inst.operands)} arguments, expected {n}"
    for k, (arg, param) in enumerate(zip(inst.operands, ftype.params)):
        if arg.type != param:
            return f"argument {k} of call to {callee.ref()} is {arg.type}, expected {param}"
    if inst.type != ftype.return_type:
        return f"call to {callee.ref()} has type {inst.type}, but the function returns {ftype.return_type}"
    return None


def _check_branch(inst: Instruction) -> str | None:
    if len(inst.blocks) not in (1, 2) or len(inst.operands) != len(inst.blocks) - 1:
        return "'br' needs one target, or a condition and two targets"
    if inst.operands and inst.operands[0].type != i1:
        return f"'br' condition must be i1, got {inst.operands[0].type}"
    return None


def _check_ret(inst: Instruction) -> str | None:
    fn = inst.parent.parent
    expected = fn.return_type
    got = inst.operands[0].type if inst.operands else void
    return None if got == expected else f"'ret' returns {got}, but @{fn.name} returns {expected}"


def _bits_lt(a, b): return a < b
def _bits_gt(a, b): return a > b


_INT_BINARY = _same_operands_and_result(_is_int, "integer")
_FLOAT_BINARY = _same_operands_and_result(_is_float, "floating-point")

TYPE_RULES: dict[str, Callable[[Instruction], str | None]] = {
    **{op: _INT_BINARY for op in ("add", "sub", "mul", "sdiv", "udiv", "srem", "urem", "shl", "lshr",
                                   "ashr", "and", "or", "xor")},
    **{op: _FLOAT_BINARY for op in ("fadd", "fsub", "fmul", "fdiv", "frem")},
    "fneg": lambda i: None if len(i.operands) == 1 and i.operands[0].type == i.type and _is_float(i.type)
    else "'fneg' needs one floating-point operand of the result type",
    "icmp": _compare(lambda t: _is_int(t) or _is_pointer(t), "integer or pointer"),
    "fcmp": _compare(_is_float, "floating-point"),
    "select": _check_select,
    "trunc": _cast(_is_int, _is_int, _bits_gt), "zext": _cast(_is_int, _is_int, _bits_lt),
    "sext": _cast(_is_int, _is_int, _bits_lt),
    "fptrunc": _cast(_is_float, _is_float, _bits_gt), "fpext": _cast(_is_float, _is_float, _bits_lt),
    "fptosi": _cast(_is_float, _is_int), "fptoui": _cast(_is_float, _is_int),
    "sitofp": _cast(_is_int, _is_float), "uitofp": _cast(_is_int, _is_float),
    "ptrtoint": _cast(_is_pointer, _is_int), "inttoptr": _cast(_is_int, _is_pointer),
    "load": _check_load, "store": _check_store, "getelementptr": _check_gep,
    "atomicrmw": _check_atomicrmw, "phi": _check_phi, "call": _check_call, "invoke": _check_call,
    "br": _check_branch,
    "ret": _check_ret,
}


# ----------------------------------------------------------------------------- structure and SSA

class _FunctionVerifier:
    def __init__(self, fn: Function):
        self.fn = fn
        self.blocks = set(map(id, fn.blocks))

    def run(self) -> None:
        for block in self.fn.blocks:
            self.check_block(block)
        self.preds = self.fn.predecessors()
        self.dominators = _dominators(self.fn)
        self.position = {id(inst): (block, k) for block in self.fn.blocks
                         for k, inst in enumerate(block.instructions)}
        for block in self.fn.blocks:
            for inst in block.instructions:
                problem = TYPE_RULES.get(inst.opcode, lambda _: None)(inst)
                if problem:
                    raise _fail(self.fn, inst, problem)
                self.check_phi_edges(block, inst)
                self.check_operands(block, inst)

    def check_block(self, block: Block) -> None:
        if not block.instructions:
            raise _fail(self.fn, block, f"block %{block.name} is empty (it needs a terminator)")
        last = block.instructions[-1]
        if not last.is_terminator:
            raise _fail(self.fn, last, f"block %{block.name} does not end in a terminator")
        seen_other = False
        for inst in block.instructions:
            if inst.parent is not block:
                raise _fail(self.fn, inst, f"instruction's parent is not block %{block.name}")
            if inst.is_terminator and inst is not last:
                raise _fail(self.fn, inst, f"terminator in the middle of block %{block.name}")
            if inst.opcode == "phi" and seen_other:
                raise _fail(self.fn, inst, "phi after a non-phi instruction (phis must start the block)")
            seen_other |= inst.opcode != "phi"
            foreign = [b for b in inst.blocks if id(b) not in self.blocks]
            if foreign:
                raise _fail(self.fn, inst, f"refers to block %{foreign[0].name}, which is not in this function")

    def check_phi_edges(self, block: Block, inst: Instruction) -> None:
        if inst.opcode != "phi":
            return
        preds = self.preds[block]
        for b in inst.blocks:
            if b not in preds:
                raise _fail(self.fn, inst, f"phi has an incoming value from %{b.name}, which is not a "
                                           f"predecessor of %{block.name}")
        missing = [p for p in preds if p not in inst.blocks]
        if missing:
            raise _fail(self.fn, inst, f"phi has no incoming value for predecessor %{missing[0].name}")

    def check_operands(self, block: Block, inst: Instruction) -> None:
        for k, operand in enumerate(inst.operands):
            if operand is None:
                raise _fail(self.fn, inst, f"operand {k} is missing")
            if isinstance(operand, (Constant, GlobalVariable, Function, MetadataValue)):
                continue
            if isinstance(operand, Argument):
                if (operand.index >= len(self.fn.args) or self.fn.args[operand.index] is not operand):
                    raise _fail(self.fn, inst, f"uses argument %{operand.name} of another function")
                continue
            if not isinstance(operand, Instruction) or id(operand) not in self.position:
                raise _fail(self.fn, inst, f"uses {operand.ref()}, which is not defined in this function")
            use_block = inst.blocks[k] if inst.opcode == "phi" else block
            if not self.dominates(operand, use_block, None if inst.opcode == "phi" else inst):
                raise _fail(self.fn, inst, f"uses %{operand.name} before it is defined "
                                           f"(its definition does not dominate this use)")

    def dominates(self, definition: Instruction, use_block: Block, use: Instruction | None) -> bool:
        def_block, def_index = self.position[id(definition)]
        if use_block not in self.dominators:  # unreachable code: LLVM accepts any use there
            return True
        if def_block is use_block:
            if use is None:  # a phi use happens at the end of the incoming block
                return True
            return def_index < self.position[id(use)][1]
        return def_block in self.dominators[use_block]


def _dominators(fn: Function) -> dict[Block, set[Block]]:
    """Dominator sets of the blocks reachable from the entry (the simple iterative algorithm)."""
    reachable, stack = [fn.entry], [fn.entry]
    seen = {fn.entry}
    while stack:
        for succ in stack.pop().successors:
            if succ not in seen:
                seen.add(succ)
                reachable.append(succ)
                stack.append(succ)
    preds = fn.predecessors()
    dom = {b: set(reachable) for b in reachable}
    dom[fn.entry] = {fn.entry}
    changed = True
    while changed:
        changed = False
        for b in reachable[1:]:
            incoming = [dom[p] for p in preds[b] if p in dom]
            new = set.intersection(*incoming) | {b} if incoming else {b}
            if new != dom[b]:
                dom[b], changed = new, True
    return dom
