"""Host calls of functions that take a struct by value in memory (``ptr byval(T)``).

ctypes passes a pointer argument in a register. A parameter ``ptr byval(T)`` is, in the C ABI, a
copy of the struct on the caller's stack, so a direct ctypes call made the function read whatever
the stack held: silently wrong results (rustc's ``extern "C" fn f(p: V3)`` for a 24-byte struct,
and every derivative of it, which keeps the parameter). Each such function gets a wrapper
``<name>.byref`` taking plain pointers, whose call passes them ``byval`` again: LLVM makes the
copy the ABI wants, as a C caller would, and the function may change its copy freely.
Parameters passed in other stack forms (``inalloca``, ``preallocated``) are refused.
"""
from __future__ import annotations

import llvmlite.binding as llvm

from ...errors import CompilationError

_STACK_FORMS = ("inalloca(", "preallocated(")


def byval_wrappers(module: llvm.ModuleRef) -> dict[str, str]:
    """Link ``<name>.byref`` wrappers into ``module`` for its defined functions with ``byval``
    parameters; returns {name: wrapper name}."""
    lines, wrappers = [], {}
    for fn in module.functions:
        if fn.is_declaration or fn.linkage in (llvm.Linkage.internal, llvm.Linkage.private):
            continue                    # Python calls only exported functions; a local one cannot be linked to
        attributes = [[a.decode() for a in arg.attributes] for arg in fn.arguments]
        if not any(a.startswith("byval(") for attrs in attributes for a in attrs):
            continue
        stack = next((a for attrs in attributes for a in attrs if a.startswith(_STACK_FORMS)), None)
        if stack is not None:
            raise CompilationError(f"@{fn.name} takes a parameter {stack.split('(')[0]}: the host cannot "
                                   f"call it from Python")
        result, *params = [str(t) for t in fn.global_value_type.elements]
        passed = [" ".join([t] + [a for a in attrs if a.startswith(("byval(", "align "))])
                  for t, attrs in zip(params, attributes)]
        wrapper = f"{fn.name}.byref"
        value = "" if result == "void" else "%v = "
        lines.append(f'declare {result} @"{fn.name}"({", ".join(passed)})')
        lines.append(f'''define {result} @"{wrapper}"({", ".join(f"{t} %a{k}" for k, t in enumerate(params))}) {{
entry:
  {value}call {result} @"{fn.name}"({", ".join(f"{p} %a{k}" for k, p in enumerate(passed))})
  ret {result}{"" if result == "void" else " %v"}
}}''')
        wrappers[fn.name] = wrapper
    if lines:
        extra = llvm.parse_assembly("\n".join(lines))
        extra.triple, extra.data_layout = module.triple, module.data_layout
        module.link_in(extra)
    return wrappers
