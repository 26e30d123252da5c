"""LLVM IR text surgery for tests: split a module into its definitions, keep a function and
what it references, compare two levels' code of one function, and load one function of a
large foreign module as a small module of its own.

Why: the host JIT behind ``ez.autodiff`` and ``ForeignFunction.__call__`` compiles the whole
module it is given, again for every new derivative. A test of one function of a large module
(rustc's -O0 output holds some 170 functions, about 1 MB of IR) then pays seconds per call.
``FunctionModules`` gives each function its own module, cut from the same canonical import: the
function, its callees and the globals are the same IR, so the derivatives are the same.
"""
from __future__ import annotations

import re

_DEFINE = re.compile(r'^define\b[^@]*@("[^"]+"|[\w.$-]+)\(')
_REFERENCE = re.compile(r'@("[^"]+"|[\w.$-]+)')
_METADATA = re.compile(r"^\s*#dbg_\w+\(.*$|,? ![\w.]+ !\d+| #\d+\b", re.M)


def references(text: str) -> list[str]:
    """The global names (``@name``, unquoted) that ``text`` mentions."""
    return [name.strip('"') for name in _REFERENCE.findall(text)]


def defined_name(line: str) -> str | None:
    """The function a ``define`` line defines (unquoted), else None."""
    match = _DEFINE.match(line)
    return match.group(1).strip('"') if match else None


def split_module(text: str) -> tuple[list[str], dict[str, tuple[int, str]]]:
    """(other top-level lines, {function name (unquoted): (position, definition text)}) of an IR module."""
    rest, functions = [], {}
    lines = iter(text.splitlines())
    for line in lines:
        name = defined_name(line)
        if name is None:
            rest.append(line)
            continue
        body = [line]
        if not line.rstrip().endswith("}"):
            for inner in lines:
                body.append(inner)
                if inner == "}":
                    break
        functions[name] = (len(rest), "\n".join(body))
        rest.append("")
    return rest, functions


def reachable(functions: dict[str, tuple[int, str]], roots: list[str]) -> set[str]:
    """The defined functions ``roots`` reference, directly or through other definitions."""
    keep, todo = set(), [r for r in roots if r in functions]
    while todo:
        name = todo.pop()
        if name in keep:
            continue
        keep.add(name)
        todo += [m for m in references(functions[name][1]) if m in functions and m not in keep]
    return keep


def module_subset(text: str, roots: list[str]) -> str:
    """The IR module keeping only the definitions of ``roots`` and what they reference. Every
    other top-level line stays, so the definitions a global initializer names stay too."""
    rest, functions = split_module(text)
    from_globals = [name for line in rest for name in references(line) if name in functions]
    lines = list(rest)
    for name in reachable(functions, list(roots) + from_globals):
        position, body = functions[name]
        lines[position] = body
    return "\n".join(lines) + "\n"


def code_of(text: str, root: str) -> str:
    """The definitions ``root`` needs, without debug records, metadata and attribute-group numbers:
    equal for two levels when clang made the same code (then one check covers both)."""
    functions = split_module(text)[1]
    return "\n".join(_METADATA.sub("", functions[name][1]) for name in sorted(reachable(functions, [root])))


class FunctionModules:
    """``mods[name]``: function ``name`` of a ForeignModule, in a module of its own that holds only
    it and what it references (cut from ``module``'s canonical IR, built on first use).
    ``prepare(ir_module)`` runs once on each small module when it is built (e.g. to give host
    stand-ins to the runtime symbols it declares); its result is ``self.prepared[name]``."""

    def __init__(self, module, prepare=None):
        from .. import ir
        self.module, self.prepare = module, prepare
        self.prepared: dict[str, object] = {}
        self._text = ir.export_module(module.ir)
        self._modules: dict[str, object] = {}

    def module_of(self, name: str):
        """The small ForeignModule holding ``name``."""
        if name not in self._modules:
            from .. import ir
            from ..sources.llvm import ForeignModule
            self.module[name]            # an IRError naming what the module defines, if it lacks name
            small = ForeignModule(ir.import_module(module_subset(self._text, [name])))
            self.prepared[name] = self.prepare(small.ir) if self.prepare is not None else None
            self._modules[name] = small
        return self._modules[name]

    def __getitem__(self, name: str):
        return self.module_of(name)[name]

    def __contains__(self, name: str) -> bool:
        return name in self.module

    def names(self) -> list[str]:
        return self.module.names()
