"""The part of a module that some functions need: themselves, every function they call or
reference (directly, through globals' initializers, constant expressions or personalities), and
every global they reach. The host JIT compiles only that (codegen/host/program.py): a large foreign module
(a Rust crate's ~170 functions) then costs only what the called function uses, and a function
that never calls a symbol nothing defines (a C++ library template elsewhere in the .ll) runs.
"""
from __future__ import annotations

from .core import Constant, ConstantExpr, Function, GlobalVariable, Module, Value


def reachable(module: Module, roots: list[str]) -> Module:
    """A module of the same name with ``roots`` and everything they reach, in the original order."""
    seen_functions: set[str] = set()
    seen_globals: set[str] = set()
    todo: list[Value] = [module.functions[name] for name in roots]
    while todo:
        value = todo.pop()
        if isinstance(value, Function):
            if value.name in seen_functions:
                continue
            seen_functions.add(value.name)
            if value.personality is not None:
                todo.append(value.personality)
            for inst in value.instructions():
                if inst.callee is not None:
                    todo.append(inst.callee)
                todo.extend(inst.operands)
        elif isinstance(value, GlobalVariable):
            if value.name in seen_globals:
                continue
            seen_globals.add(value.name)
            if value.initializer is not None:
                todo.append(value.initializer)
        elif isinstance(value, ConstantExpr):
            todo.extend(value.operands)
        elif isinstance(value, Constant) and value.kind == "aggregate":
            todo.extend(value.value)
    return Module(module.name,
                  functions={n: f for n, f in module.functions.items() if n in seen_functions},
                  globals={n: g for n, g in module.globals.items() if n in seen_globals},
                  triple=module.triple, data_layout=module.data_layout)


def recursive_functions(module: Module) -> set[Function]:
    """Defined functions that can reach themselves through calls (they cannot be inlined)."""
    calls = {fn: {i.callee for i in fn.instructions() if i.opcode == "call" and isinstance(i.callee, Function)
                  and not i.callee.is_declaration}
             for fn in module.functions.values() if not fn.is_declaration}
    recursive = set()
    for start in calls:
        seen, work = set(), list(calls[start])
        while work:
            f = work.pop()
            if f is start:
                recursive.add(start)
                break
            if f not in seen and f in calls:
                seen.add(f)
                work.extend(calls[f])
    return recursive
