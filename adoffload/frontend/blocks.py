"""Block-level kernels in the front end: shared arrays, thread/block indices, barriers, warp ops.

A kernel made with ``@ado.kernel(block=B)`` keeps the body ABI of docs/ARCHITECTURE.md §1 with
one addition: after the flattened params come one ``ptr`` per ``ado.shared`` array (in order of
appearance), then the status pointer. Code generation gives every block its own copy of those
arrays (codegen/blocks.py). The thread's index inside its block is ``tid % B`` and its block's
index ``tid // B`` (the grid is a multiple of the block on every axis).

Cooperative operations are calls of declared functions that each target defines
(``COLLECTIVE_CALLS``); the AD engine differentiates them by rules (enzyme/blocks.py):

* ``void @adoffload.sync_threads()``
* ``T @adoffload.{warp_sum,warp_max,block_sum,block_max}.<f32|f64>(T v)``
* ``T @adoffload.shuffle.<t>(T v, i32 src_lane)`` (src modulo the warp size)
* ``i32 @adoffload.lane_id()``, ``i32 @adoffload.warp_size()``

Every cooperative operation must run under control flow that is uniform across the block
(``check_uniform_collectives``): a barrier some threads skip would deadlock a GPU and
desynchronize the CPU's block loop, so it is refused at compile time with its line.
"""
from __future__ import annotations

import ast
import builtins
from dataclasses import dataclass

from llvmlite import ir

from ..language import builtins as language
from ..language.status import SHARED_INDEX_BASE
from ..errors import KernelTypeError, UnsupportedConstructError
from ..language.types import ArrayType, ScalarType
from . import typing_rules as rules
from .context import I32, I64, llvm_type
from .values import ArrayRef, Literal, PyObject, Scalar, describe

PREFIX = "adoffload."
MAX_BLOCK_THREADS = 1024
COLLECTIVES = frozenset({"sync_threads", "warp_sum", "warp_max", "shuffle", "shuffle_down",
                         "block_sum", "block_max"})
# Builtins whose value is the same on every thread of a block (whatever their arguments).
_UNIFORM_RESULT = frozenset({"block_id", "block_dim", "warp_size", "block_sum", "block_max"})
# Builtins whose value may differ between the threads of a block.
_VARYING_RESULT = frozenset({"tid", "thread_id", "lane_id", "warp_sum", "warp_max", "shuffle",
                             "shuffle_down", "atomic_add", "atomic_min", "atomic_max", "shared", "zeros"})


@dataclass(frozen=True)
class SharedArray:
    """One ``ado.shared`` array: its variable name, element type and static shape."""
    name: str
    dtype: ScalarType
    shape: tuple[int, ...]
    zero: bool = False        # zero-filled when each block starts (derivative kernels' shadows)

    @property
    def nbytes(self) -> int:
        count = 1
        for extent in self.shape:
            count *= extent
        return count * max(self.dtype.bits // 8, 1)


def check_block(block, kernel_name: str) -> tuple[int, ...] | None:
    """``block`` as a tuple of positive ints (or None), or a KernelTypeError saying why not."""
    if block is None:
        return None
    shape = (block,) if isinstance(block, int) and not isinstance(block, bool) else block
    if not (isinstance(shape, tuple) and 1 <= len(shape) <= 3
            and all(isinstance(e, int) and not isinstance(e, bool) and e > 0 for e in shape)):
        raise KernelTypeError(f"kernel '{kernel_name}': block must be a positive int or a tuple of 1 to 3 "
                              f"positive ints, got {block!r}")
    threads = 1
    for e in shape:
        threads *= e
    if threads > MAX_BLOCK_THREADS:
        raise KernelTypeError(f"kernel '{kernel_name}': block {shape} has {threads} threads, more than "
                              f"{MAX_BLOCK_THREADS} (the most a GPU block may have)")
    return shape


def resolve(node: ast.expr, names: dict):
    """The Python object a name or attribute chain refers to (None if it is not one)."""
    path = []
    while isinstance(node, ast.Attribute):
        path.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name) or (node.id not in names and not hasattr(builtins, node.id)):
        return None
    obj = names[node.id] if node.id in names else getattr(builtins, node.id)
    for attr in reversed(path):
        obj = getattr(obj, attr, None)
    return obj


def builtin_name(call: ast.expr, names: dict) -> str | None:
    """The ``adoffload.language`` builtin a call node calls, if any."""
    if not isinstance(call, ast.Call):
        return None
    obj = resolve(call.func, names)
    return obj.name if isinstance(obj, language.KernelBuiltin) else None


# --- shared arrays -----------------------------------------------------------------------------

def shared_arrays(source, names: dict) -> tuple[list[SharedArray], dict[int, int]]:
    """The kernel's ``X = ado.shared(shape, dtype)`` statements, in order, and a map from each call
    node's id to its index. They must be top-level assignments to a name with constant arguments."""
    top_level = {}
    for statement in source.tree.body:
        if isinstance(statement, ast.Assign) and builtin_name(statement.value, names) == "shared":
            top_level[id(statement.value)] = statement
    arrays, index_of = [], {}
    for node in ast.walk(source.tree):
        if builtin_name(node, names) != "shared":
            continue
        statement = top_level.get(id(node))
        if statement is None or len(statement.targets) != 1 or not isinstance(statement.targets[0], ast.Name):
            raise source.error(UnsupportedConstructError, "ado.shared(...) must be assigned to one name in "
                               "a statement of its own at the kernel's top level (not in a loop, a "
                               "condition or an expression): one copy per block, allocated once", node)
        if len(node.args) != 2 or node.keywords:
            raise source.error(KernelTypeError, "ado.shared(shape, dtype) takes 2 positional arguments", node)
        shape, dtype = (_constant(source, a, names, "ado.shared") for a in node.args)
        shape = (shape,) if isinstance(shape, int) else shape
        if not (isinstance(shape, tuple) and 1 <= len(shape) <= 3
                and all(isinstance(e, int) and not isinstance(e, bool) and e > 0 for e in shape)):
            raise source.error(KernelTypeError, f"ado.shared() needs a compile-time shape: a positive int or "
                               f"a tuple of 1 to 3 positive ints, got {shape!r}", node)
        if not isinstance(dtype, ScalarType):
            raise source.error(KernelTypeError, f"ado.shared() dtype must be an ado scalar type, got {dtype!r}",
                               node)
        index_of[id(node)] = len(arrays)
        arrays.append(SharedArray(statement.targets[0].id, dtype, shape))
    return arrays, index_of


def _constant(source, node: ast.expr, names: dict, what: str):
    try:
        return eval(compile(ast.Expression(body=node), source.filename, "eval"), dict(names))  # noqa: S307
    except Exception as exc:
        raise source.error(KernelTypeError, f"{what}() needs compile-time arguments (numbers, tuples, "
                           f"global constants, ado types); evaluating this one failed: {exc}", node) from None


# --- uniform control flow ----------------------------------------------------------------------

class _Uniformity:
    """Which variables and conditions may differ between the threads of a block (a fixed point
    over the kernel's AST: a name is varying if any assignment to it is, or happens under
    varying control flow)."""

    def __init__(self, source, names: dict, array_names: set[str]):
        self.source, self.names, self.arrays = source, names, array_names
        self.varying: set[str] = set()
        self.checking = False

    def expr(self, node) -> bool:
        """Is ``node`` the same on every thread of a block?"""
        if node is None or isinstance(node, ast.Constant):
            return True
        if isinstance(node, ast.Name):
            return node.id not in self.varying and node.id not in self.arrays
        if isinstance(node, ast.Attribute):
            if node.attr == "shape" and isinstance(node.value, ast.Name):
                return True
            return resolve(node, self.names) is not None or self.expr(node.value)
        if isinstance(node, ast.Subscript):
            shape_of = isinstance(node.value, ast.Attribute) and node.value.attr == "shape"
            return shape_of and self.expr(node.slice)
        if isinstance(node, ast.Call):
            name = builtin_name(node, self.names)
            if name in _UNIFORM_RESULT:
                return True
            if name in _VARYING_RESULT:
                return False
            callee = resolve(node.func, self.names)
            if callee is None:
                return False
            if callee is builtins.len and len(node.args) == 1 and isinstance(node.args[0], ast.Name):
                return True             # len(x) is x.shape[0]: a parameter (or a constant) like any shape
            return all(self.expr(a) for a in node.args) and not node.keywords
        if isinstance(node, (ast.BinOp, ast.UnaryOp, ast.BoolOp, ast.Compare, ast.IfExp, ast.Tuple)):
            return all(self.expr(child) for child in ast.iter_child_nodes(node)
                       if isinstance(child, ast.expr))
        return False

    def mark(self, target, uniform: bool) -> bool:
        changed = False
        for node in ast.walk(target):
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store) and not uniform \
                    and node.id not in self.varying:
                self.varying.add(node.id)
                changed = True
        return changed

    def run(self) -> None:
        while self.walk(self.source.tree.body, None)[0]:
            pass
        self.checking = True
        self.walk(self.source.tree.body, None)

    def check_calls(self, node, divergent) -> None:
        """Refuse cooperative calls in ``node`` (an expression) evaluated under ``divergent``
        control; the arms of ``a if c else b`` and the later operands of ``and``/``or`` run only
        on some threads when the condition before them varies."""
        if not self.checking or node is None:
            return
        if isinstance(node, ast.IfExp):
            self.check_calls(node.test, divergent)
            inner = divergent or (None if self.expr(node.test) else node)
            self.check_calls(node.body, inner)
            self.check_calls(node.orelse, inner)
            return
        if isinstance(node, ast.BoolOp):
            inner = divergent
            for value in node.values:
                self.check_calls(value, inner)
                inner = inner or (None if self.expr(value) else node)
            return
        if isinstance(node, ast.Compare) and len(node.comparators) > 1:
            # ``a < b < c`` stops at the first false comparison (expressions.visit_Compare): c runs
            # only on the threads where a < b holds
            operands = [node.left, *node.comparators]
            self.check_calls(node.left, divergent)
            inner = divergent
            for k, comparator in enumerate(node.comparators):
                self.check_calls(comparator, inner)
                uniform = self.expr(operands[k]) and self.expr(comparator)
                inner = inner or (None if uniform else node)
            return
        name = builtin_name(node, self.names)
        if name in COLLECTIVES and divergent is not None:
            line = divergent.lineno + self.source.first_line - 1
            raise self.source.error(
                UnsupportedConstructError,
                f"ado.{name}() runs under control flow that is not uniform across the block (the "
                f"{_what(divergent)} at line {line} depends on the thread's index or on loaded data): "
                f"every thread of a block must reach the same barriers and warp/block operations. "
                f"Move it out of that branch or loop, or make the condition depend only on "
                f"block_id(), scalar parameters, shapes and block_sum/block_max results", node)
        for child in ast.iter_child_nodes(node):
            self.check_calls(child, divergent)

    def walk(self, statements, divergent):
        """Returns (changed, exits): whether a name became varying, and the first divergent
        return/break/continue met (its node), which makes what follows divergent."""
        changed, exits = False, None
        for statement in statements:
            here = divergent or exits
            c, e = self.statement(statement, here)
            changed |= c
            exits = exits or e
        return changed, exits

    def statement(self, node, divergent):
        changed = False
        if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
            self.check_calls(node.value, divergent)
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:              # the indices of ``y[...] = v`` are evaluated too
                self.check_calls(target, divergent)
            uniform = divergent is None and self.expr(node.value)
            if isinstance(node, ast.AugAssign):
                uniform = uniform and self.expr(ast.Name(node.target.id, ast.Load())) \
                    if isinstance(node.target, ast.Name) else uniform
            for target in targets:
                if isinstance(target, ast.Tuple) and isinstance(node.value, ast.Tuple) \
                        and len(target.elts) == len(node.value.elts) and divergent is None:
                    for t, v in zip(target.elts, node.value.elts):
                        changed |= self.mark(t, self.expr(v))
                else:
                    changed |= self.mark(target, uniform)
            return changed, None
        if isinstance(node, ast.If):
            self.check_calls(node.test, divergent)
            inner = divergent or (None if self.expr(node.test) else node)
            c1, e1 = self.walk(node.body, inner)
            c2, e2 = self.walk(node.orelse, inner)
            return changed | c1 | c2, e1 or e2
        if isinstance(node, (ast.For, ast.While)):
            head = node.iter if isinstance(node, ast.For) else node.test
            inner = divergent or (None if self.expr(head) else node)
            # a while test runs again on the threads still in the loop: under the loop's own divergence
            self.check_calls(head, divergent if isinstance(node, ast.For) else inner)
            if isinstance(node, ast.For):
                changed |= self.mark(node.target, inner is None)
            c, exits = self.walk(node.body, inner)
            if exits is not None and inner is None:       # some threads leave early: later trips diverge
                c2, _ = self.walk(node.body, exits)
                c |= c2
                if isinstance(node, ast.For):
                    c |= self.mark(node.target, False)
                elif _leaves_loop(exits):
                    # the test runs again on the threads still in the loop only
                    self.check_calls(node.test, exits)
            c3, e3 = self.walk(node.orelse, inner)
            returned = exits if _is_return(exits) else None
            return changed | c | c3, returned or e3
        if isinstance(node, (ast.Return, ast.Break, ast.Continue)):
            return False, divergent
        if isinstance(node, (ast.Expr, ast.Assert)):
            self.check_calls(node.value if isinstance(node, ast.Expr) else node.test, divergent)
        return changed, None


def _leaves_loop(node) -> bool:
    """Whether ``node`` holds a return, or a break of the loop it is in (not of a nested loop)."""
    todo = [node]
    while todo:
        n = todo.pop()
        if isinstance(n, (ast.Return, ast.Break)):
            return True
        for child in ast.iter_child_nodes(n):
            if isinstance(child, (ast.For, ast.While)):
                todo.extend(r for r in ast.walk(child) if isinstance(r, ast.Return))
            else:
                todo.append(child)
    return False


def _is_return(node) -> bool:
    return node is not None and any(isinstance(n, ast.Return) for n in ast.walk(node))


def _what(node) -> str:
    return {ast.If: "'if'", ast.For: "'for' loop", ast.While: "'while' loop", ast.Return: "'return'",
            ast.Break: "'break'", ast.Continue: "'continue'", ast.BoolOp: "'and'/'or'",
            ast.IfExp: "conditional expression", ast.Compare: "chained comparison"}.get(type(node), "statement")


def check_uniform_collectives(source, names: dict, array_names: set[str]) -> None:
    """Refuse barriers and warp/block operations under block-divergent control flow."""
    _Uniformity(source, names, array_names).run()


# --- lowering ----------------------------------------------------------------------------------

class BlockLowering:
    """Mixin of KernelLowering for the block builtins (``self.block`` is None for plain kernels)."""

    block: tuple[int, ...] | None = None

    def block_builtin(self, name: str, node: ast.Call):
        if self.block is None:
            raise KernelTypeError(f"ado.{name}() needs a block kernel: declare the block shape with "
                                  f"@ado.kernel(block=...)")
        if name == "shared":
            return self.shared_refs[self.shared_index[id(node)]]
        args = self.positional(node, f"ado.{name}")
        if name in ("thread_id", "block_id", "block_dim", "lane_id", "warp_size", "sync_threads") and args:
            raise KernelTypeError(f"ado.{name}() takes no arguments")
        if name == "block_dim":
            return Literal(self.block[0]) if len(self.block) == 1 else tuple(Literal(e) for e in self.block)
        if name in ("thread_id", "block_id"):
            op = self.builder.urem if name == "thread_id" else self.builder.udiv
            values = tuple(Scalar(op(t, ir.Constant(I64, e)), rules.i64) for t, e in zip(self.tids, self.block))
            return values[0] if len(values) == 1 else values
        if name in ("lane_id", "warp_size"):
            return Scalar(self.builder.sext(self.block_call(name, ir.IntType(32), []), I64), rules.i64)
        if name == "sync_threads":
            self.block_call("sync_threads", ir.VoidType(), [])
            return PyObject(None)
        arity = 2 if name in ("shuffle", "shuffle_down") else 1
        if len(args) != arity:
            raise KernelTypeError(f"ado.{name}() takes {arity} argument(s) ({len(args)} given)")
        value = self.scalar(args[0], f"argument of ado.{name}()")
        t = value.type if isinstance(value, Scalar) else self.default_float
        if not t.is_float:
            raise KernelTypeError(f"ado.{name}() works on f32/f64 values, got {describe(value)}; convert it "
                                  f"with ado.f32(...) or ado.f64(...)")
        v = self.materialize(value, t).value
        suffix = "f32" if t.bits == 32 else "f64"
        if arity == 1:
            return Scalar(self.block_call(f"{name}.{suffix}", llvm_type(t), [v]), t)
        lane = self.scalar(args[1], f"lane argument of ado.{name}()")
        lane_kind = rules.literal_kind(lane.value) if isinstance(lane, Literal) else rules.kind(lane.type)
        if lane_kind != "int":
            raise KernelTypeError(f"the lane argument of ado.{name}() must be an integer, got {describe(lane)}")
        lane = self.builder.trunc(self.materialize(lane, rules.i64).value, I32)
        if name == "shuffle_down":
            b = self.builder
            me = self.block_call("lane_id", I32, [])
            source_lane = b.add(me, lane)
            inside = b.icmp_unsigned("<", source_lane, self.block_call("warp_size", I32, []))
            lane = b.select(inside, source_lane, me)
        return Scalar(self.block_call(f"shuffle.{suffix}", llvm_type(t), [v, lane]), t)

    def block_call(self, name: str, return_type: ir.Type, args: list) -> ir.Value:
        fn = self.ctx.declare(PREFIX + name, return_type, [a.type for a in args])
        fn.attributes.add("convergent")
        fn.attributes.add("nounwind")
        return self.builder.call(fn, args)

    def bind_shared(self, shared: list[SharedArray], pointers: list) -> None:
        """ArrayRefs for the shared arrays (constant shapes; bounds errors name 'shared array #n')."""
        self.shared_refs = []
        for n, (array, pointer) in enumerate(zip(shared, pointers)):
            pointer.name = f"shared.{array.name}"
            self.shared_refs.append(ArrayRef(f"shared array '{array.name}'", ArrayType(array.dtype, len(array.shape),
                                                                                         "inout"),
                                             pointer, tuple(ir.Constant(I64, e) for e in array.shape),
                                             SHARED_INDEX_BASE - n))
