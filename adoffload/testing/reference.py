"""The reference interpreter: a kernel's own source run as plain Python, one call per thread.

The kernel's ``def`` is executed with ``ado`` bound to a shim whose ``tid()`` returns the
thread being run and whose other names are the kernel language's plain-Python versions
(``adoffload.language``: numpy math, in-place ``atomic_add``, numpy ``zeros``). Threads run
one after another in linear order, so this is exact for kernels whose threads do not race
(float atomics may be summed in another order by the compiled kernel).

The source is instrumented, not rewritten: every ``if``/``while``/conditional-expression
test and every kink (``abs``, ``min``, ``max``, ``copysign``) records which way it went in
``trace``. Two runs with equal traces took the same path through every thread, so finite
differences between them are derivatives (no branch or kink was crossed).
"""
from __future__ import annotations

import ast
import itertools

import numpy as np

from ..language import builtins as language, types


class _Shim:
    """What ``ado`` means inside the reference: language builtins with recording kinks."""

    def __init__(self, trace: list):
        self._trace = trace
        self._tid: tuple[int, ...] = (0,)
        for name in ("In", "Out", "InOut", "f32", "f64", "i32", "i64", "bool_"):
            setattr(self, name, getattr(types, name))
        for name, builtin in language.BUILTINS.items():
            if not hasattr(type(self), name):          # tid and the recording kinks stay ours
                setattr(self, name, builtin)
        self.func = language.func

    def tid(self):
        return self._tid[0] if len(self._tid) == 1 else self._tid

    def abs(self, v):
        self._trace.append(("abs", bool(v >= 0)))
        return language.abs(v)

    def min(self, a, b):
        self._trace.append(("min", bool(a <= b)))
        return language.min(a, b)

    def max(self, a, b):
        self._trace.append(("max", bool(a >= b)))
        return language.max(a, b)

    def copysign(self, a, b):
        self._trace.append(("copysign", bool(a >= 0), bool(b >= 0)))
        return language.copysign(a, b)



class _RecordTests(ast.NodeTransformer):
    """Wrap every branch test in ``__branch__(...)`` so the path taken is recorded."""

    def _wrap(self, test):
        return ast.Call(ast.Name("__branch__", ast.Load()), [test], [])

    def visit_If(self, node):
        self.generic_visit(node)
        node.test = self._wrap(node.test)
        return node

    visit_While = visit_If
    visit_IfExp = visit_If


class ReferenceKernel:
    """``run(args, grid)`` executes the kernel's source on numpy arrays, in place like a launch."""

    def __init__(self, source: str, name: str):
        tree = ast.parse(source)
        function = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == name)
        function.decorator_list = []
        tree = ast.fix_missing_locations(_RecordTests().visit(tree))
        self.trace: list = []
        self._shim = _Shim(self.trace)
        namespace = {"ado": self._shim, "__branch__": self._branch}
        exec(compile(tree, f"<reference {name}>", "exec"), namespace)
        self._function = namespace[name]

    def _branch(self, value):
        taken = bool(value)
        self.trace.append(("branch", taken))
        return taken

    def run(self, args: list, grid) -> list:
        """Run every thread of ``grid`` in row-major order; returns the path trace."""
        grid = (grid,) if isinstance(grid, int) else tuple(grid)
        self.trace.clear()
        with np.errstate(all="ignore"):
            for tid in itertools.product(*(range(g) for g in grid)):
                self._shim._tid = tid
                self._function(*args)
        return list(self.trace)

