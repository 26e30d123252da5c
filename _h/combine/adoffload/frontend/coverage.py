"""Which Out arrays a kernel writes in full: ``out[i] = ...`` with ``i = ado.tid()``, at top level.

Out arrays start at zero (kernels may accumulate into them), which costs a memset per call.
An Out array written unconditionally at the thread's own index, before any ``return``, needs
none when the grid equals its shape: every element is written (a thread that stops on a
bounds error raises anyway). The analysis is syntactic and conservative.
"""
from __future__ import annotations

import ast

from ..signature import KernelSignature


def full_writes(tree: ast.FunctionDef, signature: KernelSignature) -> frozenset:
    """{(param_index, axes)}: Out param written at ``[tid axes...]`` by every thread."""
    outs = {p.name: k for k, p in enumerate(signature.params) if p.is_array and p.type.intent == "out"}
    tids: dict[str, int] = {}
    found = set()
    for statement in tree.body:
        if any(isinstance(node, (ast.Return, ast.Break, ast.Continue)) for node in ast.walk(statement)):
            break
        if isinstance(statement, ast.Assign) and _is_tid_call(statement.value):
            tids.update(_tid_names(statement.targets))
            continue
        assigned = {n.id for n in ast.walk(statement) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
        if assigned & set(tids):
            break                     # a thread index was rebound: stop trusting the names
        if isinstance(statement, ast.Assign) and len(statement.targets) == 1:
            write = _tid_write(statement.targets[0], outs, tids)
            if write is not None:
                found.add(write)
    return frozenset(found)


def _is_tid_call(node: ast.AST) -> bool:
    return (isinstance(node, ast.Call) and not node.args
            and (getattr(node.func, "attr", None) == "tid" or getattr(node.func, "id", None) == "tid"))


def _tid_names(targets: list[ast.expr]) -> dict[str, int]:
    if len(targets) != 1:
        return {}
    target = targets[0]
    if isinstance(target, ast.Name):
        return {target.id: 0}
    if isinstance(target, ast.Tuple) and all(isinstance(e, ast.Name) for e in target.elts):
        return {e.id: axis for axis, e in enumerate(target.elts)}
    return {}


def _tid_write(target: ast.expr, outs: dict[str, int], tids: dict[str, int]):
    if not (isinstance(target, ast.Subscript) and isinstance(target.value, ast.Name) and target.value.id in outs):
        return None
    index = target.slice
    names = index.elts if isinstance(index, ast.Tuple) else [index]
    if not all(isinstance(n, ast.Name) and n.id in tids for n in names):
        return None
    return outs[target.value.id], tuple(tids[n.id] for n in names)


def written_in_full(writes: frozenset, param_index: int, shape: tuple, grid: tuple) -> bool:
    """Whether the launch ``grid`` makes a recorded full write cover ``shape`` exactly."""
    if not all(g > 0 for g in grid):
        return False                  # nothing runs: the array is only zeroed
    for k, axes in writes:
        if (k == param_index and len(axes) == len(shape) == len(set(axes))
                and all(a < len(grid) and grid[a] == extent for a, extent in zip(axes, shape))):
            return True
    return False
