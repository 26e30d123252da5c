"""Readable LLVM-like text for ir.core objects (for humans, errors and golden tests).

The output resembles LLVM IR closely but is not meant to be parsed back: use
``export_module`` for real LLVM IR. Source locations are printed as trailing comments.
"""
from __future__ import annotations

from .core import Block, Function, Instruction, Module, Value, void

_CASTS = frozenset({"trunc", "zext", "sext", "fptrunc", "fpext", "fptoui", "fptosi", "uitofp", "sitofp",
                    "ptrtoint", "inttoptr", "bitcast", "addrspacecast"})


_NOT_INLINE = frozenset({"atomic", "volatile", "weak", "tail", "musttail", "notail"})


def _ref(v: Value | None) -> str:
    if v is None:
        return "<none>"
    if isinstance(v, Block):
        return f"%{v.name}"
    return v.ref()


def _typed(v: Value) -> str:
    return f"{v.type} {_ref(v)}"


def _flags(inst: Instruction) -> str:
    shown = sorted(f for f in inst.flags if "=" not in f and f not in _NOT_INLINE)
    return "".join(f" {f}" for f in shown)


def _body(inst: Instruction) -> str:
    """The instruction after ``%name =``."""
    op, ops = inst.opcode, inst.operands
    flags = _flags(inst)
    if op in _CASTS:
        return f"{op} {_typed(ops[0])} to {inst.type}" if ops else f"{op} <no operand> to {inst.type}"
    if op in ("icmp", "fcmp"):
        return f"{op}{flags} {inst.predicate} {ops[0].type if ops else '?'} " + ", ".join(map(_ref, ops))
    if op == "phi":
        incoming = ", ".join(f"[ {_ref(v)}, %{b.name} ]" for v, b in zip(ops, inst.blocks))
        return f"phi{flags} {inst.type} {incoming}"
    if op == "br":
        labels = ", ".join(f"label %{b.name}" for b in inst.blocks)
        return f"br {_typed(ops[0])}, {labels}" if ops else f"br {labels}"
    if op == "switch":
        cases = " ".join(f"{_typed(v)}, label %{b.name}" for v, b in zip(ops[1:], inst.blocks[1:]))
        return f"switch {_typed(ops[0])}, label %{inst.blocks[0].name} [ {cases} ]"
    if op == "ret":
        return f"ret {_typed(ops[0])}" if ops else "ret void"
    if op == "call":
        callee = _ref(inst.callee)
        tail = next((f"{t} " for t in ("tail", "musttail", "notail") if t in inst.flags), "")
        return f"{tail}call{flags} {inst.type} {callee}(" + ", ".join(map(_typed, ops)) + ")"
    if op == "getelementptr":
        return f"getelementptr{flags} {inst.element_type}, " + ", ".join(map(_typed, ops))
    if op == "alloca":
        return f"alloca {inst.element_type}" + "".join(f", {_typed(o)}" for o in ops)
    if op == "load":
        return f"load{_memory_mods(inst)} {inst.type}, " + ", ".join(map(_typed, ops)) + _ordering(inst)
    if op == "store":
        return f"store{_memory_mods(inst)} " + ", ".join(map(_typed, ops)) + _ordering(inst)
    if op == "atomicrmw":
        return f"atomicrmw {inst.op} " + ", ".join(map(_typed, ops)) + _ordering(inst)
    if op == "cmpxchg":
        return "cmpxchg " + ", ".join(map(_typed, ops)) + _ordering(inst)
    if op == "fence":
        return "fence" + _ordering(inst)
    if op in ("extractvalue", "insertvalue"):
        return f"{op} " + ", ".join(map(_typed, ops)) + "".join(f", {k}" for k in inst.indices)
    if op in ("unreachable",):
        return op
    return f"{op}{flags} {inst.type} " + ", ".join(map(_ref, ops))


def _memory_mods(inst: Instruction) -> str:
    return "".join(f" {f}" for f in ("atomic", "volatile") if f in inst.flags)


def _ordering(inst: Instruction) -> str:
    scope = next((f.split("=", 1)[1] for f in inst.flags if f.startswith("syncscope=")), None)
    text = f' syncscope("{scope}")' if scope else ""
    text += f" {inst.ordering}" if inst.ordering else ""
    return text + (f", align {inst.align}" if inst.align else "")


def format_instruction(inst: Instruction) -> str:
    try:
        body = _body(inst)
    except (IndexError, AttributeError, TypeError) as exc:  # malformed IR must still print
        body = f"{inst.opcode} <malformed: {type(exc).__name__}> " + ", ".join(map(_ref, inst.operands))
    text = f"%{inst.name} = {body}" if inst.type != void and inst.name else body
    if inst.location is not None:
        text += f"    ; {inst.location}:{inst.location.col}" if inst.location.col else f"    ; {inst.location}"
    return text


def function_lines(fn: Function) -> list[tuple[object, str]]:
    """(object, text) per printed line: the Function header, each Block label, each Instruction."""
    params = ", ".join(f"{a.type}{''.join(' ' + x for x in sorted(a.attributes))} %{a.name}" for a in fn.args)
    if fn.function_type.vararg:
        params += ", ..." if params else "..."
    cc = f"{fn.calling_convention} " if fn.calling_convention else ""
    linkage = f"{fn.linkage} " if fn.linkage not in ("external", "") else ""
    keyword = "declare" if fn.is_declaration else "define"
    lines: list[tuple[object, str]] = [(fn, f"{keyword} {linkage}{cc}{fn.return_type} @{fn.name}({params})"
                                        + ("" if fn.is_declaration else " {"))]
    for block in fn.blocks:
        lines.append((block, f"{block.name}:"))
        lines.extend((inst, "  " + format_instruction(inst)) for inst in block.instructions)
    if not fn.is_declaration:
        lines.append((None, "}"))
    return lines


def format_function(fn: Function) -> str:
    return "\n".join(text for _, text in function_lines(fn))


def format_module(module: Module) -> str:
    parts = []
    if module.triple:
        parts.append(f'target triple = "{module.triple}"')
    for gv in module.globals.values():
        init = f" {gv.initializer.ref()}" if gv.initializer is not None else ""
        kind = "constant" if gv.constant else "global"
        parts.append(f"@{gv.name} = {gv.linkage} {kind} {gv.value_type}{init}")
    parts.extend(format_function(fn) for fn in module.functions.values())
    return "\n\n".join(parts) + "\n"
