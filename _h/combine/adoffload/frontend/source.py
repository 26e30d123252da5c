"""Kernel source: the parsed function, where its lines are, and errors located on an AST node."""
from __future__ import annotations

import ast
import inspect
import textwrap
from dataclasses import dataclass

from ..errors import SourceError, UnsupportedConstructError


@dataclass(frozen=True)
class Source:
    """A Python function's AST with enough to map a node back to its file, line and column."""
    name: str
    filename: str
    first_line: int          # line number of the first line of `lines` in the file
    lines: tuple[str, ...]   # the original (not dedented) source lines
    indent: int              # columns removed by dedent
    tree: ast.FunctionDef

    def error(self, cls: type[SourceError], message: str, node: ast.AST | None) -> SourceError:
        line = getattr(node, "lineno", None)
        col = getattr(node, "col_offset", None)
        if line is None:
            return cls(message, filename=self.filename, kernel=self.name)
        source_line = self.lines[line - 1] if 0 < line <= len(self.lines) else None
        return cls(message, filename=self.filename, line=line + self.first_line - 1,
                   col=col + self.indent if col is not None else None,
                   source_line=source_line, kernel=self.name)

    def location(self, node: ast.AST) -> tuple[str, int, int]:
        return (self.filename, getattr(node, "lineno", 1) + self.first_line - 1,
                getattr(node, "col_offset", 0) + self.indent)


def parse_function(pyfunc) -> Source:
    """Parse a Python function's source into a ``Source`` (the FunctionDef is ``tree``)."""
    name = getattr(pyfunc, "__name__", "<kernel>")
    try:
        lines, first_line = inspect.getsourcelines(pyfunc)
        filename = inspect.getsourcefile(pyfunc) or "<unknown>"
    except (OSError, TypeError) as exc:
        raise UnsupportedConstructError(
            f"cannot read the source of {name!r} ({exc}); kernels must be defined in a file "
            f"(not typed at an interactive prompt or built with exec)", kernel=name) from exc
    text = "".join(lines)
    dedented = textwrap.dedent(text)
    indent = len(lines[0]) - len(dedented.splitlines(keepends=True)[0])
    module = ast.parse(dedented)
    tree = module.body[0]
    if not isinstance(tree, ast.FunctionDef):
        raise UnsupportedConstructError(f"{name!r} is not a plain 'def' function", kernel=name,
                                        filename=filename, line=first_line)
    return Source(name, filename, first_line, tuple(line.rstrip("\n") for line in lines), indent, tree)
