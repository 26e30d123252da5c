"""Test helpers: build tiny IR functions and run them (and their derivatives) on the host."""
from __future__ import annotations

from adoffload.enzyme.host import compile_host
from adoffload.ir.builder import Builder
from adoffload.ir.core import Argument, Function, FunctionType, Module, Type


def new_function(module: Module, name: str, return_type: Type, params: list[tuple[str, Type]]) -> tuple[Function, Builder]:
    """Add ``define <ret> @name(params)`` with an entry block; returns it and a builder at its end."""
    fn = Function(name, FunctionType(return_type, tuple(t for _, t in params)),
                  [Argument(t, n, i) for i, (n, t) in enumerate(params)])
    module.add_function(fn)
    return fn, Builder(fn.add_block("entry"))


__all__ = ["compile_host", "new_function"]
