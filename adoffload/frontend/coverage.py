"""Which Out arrays a kernel writes in full, so that launches and JAX calls need not zero them.

Out arrays start at zero (kernels may accumulate into them), which costs a memset per call.
An Out array written by top-level statements (unconditional, before any ``return``) at indices
that together cover it once the grid is known needs none: every element is written (a thread that
stops on a bounds error raises anyway). Indices are affine in the thread's indices, evaluated
over the kernel's straight-line top-level assignments and its global integer constants:

* ``out[i, j]`` with ``i, j = ado.tid()`` covers ``grid[0] x grid[1]``;
* ``out[4 * i + q]`` for ``q`` = 0, 1, 2, 3 (four statements) covers ``4 * grid[0]``;
* a block kernel's ``y[bi * 32 + ti * 4 + q, bj * 32 + tj]`` (``ti, tj = ado.thread_id()``,
  ``bi, bj = ado.block_id()``, block (8, 32)) covers ``4 * grid[0] x grid[1]``: per axis, the
  constants and ``ti``'s multiples fill ``[0, 32)`` exactly, and ``bi`` steps by 32.

Each array axis must take one grid axis, none twice. An Out array the kernel also reads (``y[i]``
loaded, ``y[i] += v``, ``y`` passed to an atomic or a helper) is never claimed: such a kernel may
read an element before its covering store, and then relies on the zeros (a loop accumulating
into ``y[i]`` before a final ``y[i] = y[i] * s``). The analysis is syntactic and conservative:
what it cannot evaluate, it does not claim.
"""
from __future__ import annotations

import ast

from ..language.signature import KernelSignature

_LIMIT = 1 << 16          # the largest block tile whose coverage is checked by enumeration
_INDEX_CALLS = {"tid": "tid", "thread_id": "thread", "block_id": "block"}


def full_writes(tree: ast.FunctionDef, signature: KernelSignature, block=None, constants=None) -> frozenset:
    """{(param_index, ((grid_axis, scale), ...))}: Out param ``param_index`` is written in full
    when each of its axes d has extent ``scale * grid[grid_axis]``."""
    outs = {p.name: k for k, p in enumerate(signature.params) if p.is_array and p.type.intent == "out"}
    for name in _read_outs(tree, outs):
        del outs[name]
    params = {p.name for p in signature.params}
    known = {n: v for n, v in (constants or {}).items()
             if type(v) is int and n not in params}          # global integer constants (not bools)
    env: dict[str, dict | None] = {}
    writes: dict[tuple, set] = {}
    for statement in tree.body:
        if any(isinstance(node, (ast.Return, ast.Break, ast.Continue)) for node in ast.walk(statement)):
            break
        if isinstance(statement, ast.Assign) and len(statement.targets) == 1:
            target = statement.targets[0]
            if isinstance(target, ast.Subscript) and isinstance(target.value, ast.Name) and target.value.id in outs:
                form = _write_form(target, env, known, block)
                if form is not None:
                    axes, offsets = form
                    writes.setdefault((outs[target.value.id], axes), set()).add(offsets)
                continue
            if _bind(target, statement.value, env, known):
                continue
        for node in ast.walk(statement):        # anything else it assigns is no longer known
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                env[node.id] = None
    found = set()
    for (k, axes), offsets in writes.items():
        scales = _cover(axes, offsets, block)
        if scales is not None:
            found.add((k, tuple((axis[0], scale) for axis, scale in zip(axes, scales))))
    return frozenset(found)


def written_in_full(writes: frozenset, param_index: int, shape: tuple, grid: tuple) -> bool:
    """Whether the launch ``grid`` makes a recorded full write cover ``shape`` exactly."""
    if not all(g > 0 for g in grid):
        return False                  # nothing runs: the array is only zeroed
    for k, axes in writes:
        if (k == param_index and len(axes) == len(shape) == len({a for a, _ in axes})
                and all(a < len(grid) and scale * grid[a] == extent for (a, scale), extent in zip(axes, shape))):
            return True
    return False


def _read_outs(tree: ast.FunctionDef, outs: dict) -> set[str]:
    """The Out arrays ``tree`` uses other than as the target of a plain store (``y[...] = v``) or
    for their shape (``y.shape``): anything else may read what the zeros would have been."""
    parents = {id(child): node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    read = set()
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Name) and node.id in outs):
            continue
        parent = parents.get(id(node))
        if isinstance(parent, ast.Attribute) and parent.attr == "shape":
            continue
        if (isinstance(parent, ast.Subscript) and parent.value is node and isinstance(parent.ctx, ast.Store)
                and isinstance(parents.get(id(parent)), ast.Assign)):
            continue
        read.add(node.id)
    return read


# --- evaluation -----------------------------------------------------------------------------------

def _bind(target: ast.expr, value: ast.expr, env: dict, known: dict) -> bool:
    """Record a top-level assignment to names; False when ``target`` is not names."""
    call = _index_call(value)
    names = [target] if isinstance(target, ast.Name) else \
        list(target.elts) if isinstance(target, ast.Tuple) and all(isinstance(e, ast.Name) for e in target.elts) else None
    if names is None:
        return False
    if call is not None:
        kind = _INDEX_CALLS[call]
        for axis, name in enumerate(names):
            env[name.id] = {(kind, axis): 1}
        return True
    if len(names) == 1:
        env[names[0].id] = _affine(value, env, known)
        return True
    values = value.elts if isinstance(value, ast.Tuple) and len(value.elts) == len(names) else [None] * len(names)
    for name, v in zip(names, values):
        env[name.id] = _affine(v, env, known) if v is not None else None
    return True


def _index_call(node) -> str | None:
    if isinstance(node, ast.Call) and not node.args and not node.keywords:
        name = getattr(node.func, "attr", None) or getattr(node.func, "id", None)
        return name if name in _INDEX_CALLS else None
    return None


def _affine(node, env: dict, known: dict) -> dict | None:
    """``node`` as {atom: coefficient} (atom 1: the constant), atoms ``(kind, axis)``; or None."""
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return {1: node.value}
    if isinstance(node, ast.Name):
        if node.id in env:
            return env[node.id]
        return {1: known[node.id]} if node.id in known else None
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        inner = _affine(node.operand, env, known)
        return None if inner is None else {a: -c for a, c in inner.items()}
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Sub, ast.Mult)):
        left, right = _affine(node.left, env, known), _affine(node.right, env, known)
        if left is None or right is None:
            return None
        if isinstance(node.op, ast.Mult):
            if set(left) <= {1}:
                left, right = right, left
            if not set(right) <= {1}:
                return None
            factor = right.get(1, 0)
            return {a: c * factor for a, c in left.items()}
        sign = 1 if isinstance(node.op, ast.Add) else -1
        out = dict(left)
        for a, c in right.items():
            out[a] = out.get(a, 0) + sign * c
        return out
    return None


def _write_form(target: ast.Subscript, env: dict, known: dict, block):
    """``((axis, block coefficient, thread coefficient), ...)`` per array axis and the constants,
    for a store whose every index uses exactly one grid axis; None otherwise."""
    index = target.slice
    nodes = index.elts if isinstance(index, ast.Tuple) else [index]
    axes, offsets = [], []
    for node in nodes:
        terms = _affine(node, env, known)
        if terms is None:
            return None
        terms = {a: c for a, c in terms.items() if c != 0}
        offset = terms.pop(1, 0)
        grid_axes = {axis for _, axis in terms}
        if len(grid_axes) != 1:
            return None
        axis = grid_axes.pop()
        if block is None:
            if set(terms) != {("tid", axis)}:
                return None
            axes.append((axis, terms[("tid", axis)], 0))
        else:
            if axis >= len(block) or set(terms) - {("tid", axis), ("thread", axis), ("block", axis)}:
                return None
            tid = terms.get(("tid", axis), 0)         # tid = block * B + thread
            axes.append((axis, terms.get(("block", axis), 0) + tid * block[axis], terms.get(("thread", axis), 0) + tid))
        offsets.append(offset)
    return tuple(axes), tuple(offsets)


def _cover(axes: tuple, offsets: set, block) -> list[int] | None:
    """Per array axis, the scale s such that the writes cover exactly ``[0, s * grid[axis])``;
    None when they do not (or the offsets are not a product of per-axis sets)."""
    if len({a for a, _, _ in axes}) != len(axes):
        return None
    per_axis = [sorted({o[d] for o in offsets}) for d in range(len(axes))]
    count = 1
    for values in per_axis:
        count *= len(values)
    if count != len(offsets):
        return None
    scales = []
    for (axis, step, stride), values in zip(axes, per_axis):
        threads = 1 if block is None else block[axis]     # out[s * i + c]: the constants are 0 .. s-1
        if not 0 < step <= _LIMIT:
            return None
        covered = sorted(c + stride * t for c in values for t in range(threads))
        if covered != list(range(step)):
            return None
        scales.append(step // threads)
    return scales
