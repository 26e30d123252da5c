"""Kernel source: the parsed function, where its lines are, and errors located on an AST node."""
from __future__ import annotations

import ast
import inspect
import linecache
import sys
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
        recovered = _command_line_source(pyfunc)
        if recovered is None:
            raise UnsupportedConstructError(_no_source_message(pyfunc, name, exc), kernel=name) from exc
        lines, first_line, filename = recovered
    text = "".join(lines)
    dedented = textwrap.dedent(text)
    indent = len(lines[0]) - len(dedented.splitlines(keepends=True)[0])
    module = ast.parse(dedented)
    tree = module.body[0]
    if not isinstance(tree, ast.FunctionDef):
        raise UnsupportedConstructError(f"{name!r} is not a plain 'def' function", kernel=name,
                                        filename=filename, line=first_line)
    return Source(name, filename, first_line, tuple(line.rstrip("\n") for line in lines), indent, tree)


def _command_line_source(pyfunc):
    """(lines, first line, filename) of a function defined in ``python -c "..."``, whose text Python keeps
    only in ``sys.orig_argv``; None elsewhere."""
    code = getattr(pyfunc, "__code__", None)
    argv = getattr(sys, "orig_argv", [])
    if code is None or code.co_filename != "<string>" or "-c" not in argv[1:-1]:
        return None
    text = argv[argv.index("-c", 1) + 1]
    lines = text.splitlines(keepends=True)
    start = code.co_firstlineno - 1
    if not 0 <= start < len(lines):
        return None
    block = inspect.getblock(lines[start:])
    linecache.cache["<string>"] = (len(text), None, lines, "<string>")   # tracebacks show the line too
    return block, code.co_firstlineno, "<command line>"


def _no_source_message(pyfunc, name: str, exc: Exception) -> str:
    """What to do when Python kept no source for ``pyfunc`` (the front end reads a kernel's source)."""
    filename = getattr(getattr(pyfunc, "__code__", None), "co_filename", "")
    if filename == "<stdin>":
        where = ("it was typed at Python's interactive prompt, which does not keep what is typed (before "
                 "Python 3.13) or read from standard input")
    elif filename.startswith("<"):
        where = f"it was built by exec or compile with the file name {filename!r}, which has no text behind it"
    else:
        where = f"its file {filename!r} cannot be read ({exc})"
    return (f"cannot read the source of {name!r}: {where}. Define kernels in a file, in IPython or Jupyter "
            f"(which keep every cell's source), or in 'python -c'; for code built at run time, register its "
            f"text first: linecache.cache[name] = (len(text), None, text.splitlines(True), name), then "
            f"exec(compile(text, name, 'exec'))")
