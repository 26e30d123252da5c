"""Lowering a kernel: its signature, grid rank, thread indices and the body function."""
from __future__ import annotations

import ast
import inspect

from llvmlite import ir

from ..language import builtins as language
from ..errors import KernelTypeError, UnsupportedConstructError
from ..language.signature import KernelSignature, Param
from ..language.types import ArrayType, ScalarType, _Intent
from . import typing_rules as rules
from .blocks import BlockLowering, SharedArray
from .context import LLVM_TYPES, ModuleContext
from .helper_function import Lowering
from .lowering import captured_names
from .source import Source
from .values import ArrayRef, Scalar


def kernel_signature(pyfunc, source: Source, grid_rank: int) -> KernelSignature:
    """Parameters from the annotations: ado scalar types or In/Out/InOut arrays."""
    try:
        # Closure variables too: a kernel defined inside a function may see ``ado`` only there.
        closure = inspect.getclosurevars(pyfunc).nonlocals
        annotations = inspect.get_annotations(pyfunc, eval_str=True, locals=closure)
    except Exception as exc:
        raise source.error(KernelTypeError, f"cannot evaluate the parameter annotations: {exc}",
                           source.tree) from exc
    args = source.tree.args
    if args.vararg or args.kwarg or args.kwonlyargs or args.posonlyargs:
        raise source.error(UnsupportedConstructError, "kernels take plain positional parameters "
                           "only (no *args, **kwargs, keyword-only or positional-only)", source.tree)
    if args.defaults:
        raise source.error(UnsupportedConstructError, "kernel parameters cannot have default values "
                           "(every argument is passed at each launch); remove the '= ...' or make the value "
                           "a global constant", args.defaults[0])
    params = []
    for arg in args.args:
        annotation = annotations.get(arg.arg)
        if isinstance(annotation, _Intent):
            annotation = annotation[bare_intent_error(annotation)]
        if not isinstance(annotation, (ScalarType, ArrayType)):
            raise source.error(KernelTypeError, f"kernel parameter '{arg.arg}' needs a type "
                               f"annotation: an ado scalar type (ado.f32) or an array "
                               f"(ado.In[ado.f32], ado.Out[ado.f64, 2]); got {annotation!r}", arg)
        params.append(Param(arg.arg, annotation))
    if annotations.get("return", None) not in (None, type(None)):
        raise source.error(KernelTypeError, "kernels return nothing; write results into Out "
                           "arrays", source.tree)
    return KernelSignature(source.name, tuple(params), grid_rank)


def bare_intent_error(intent):
    raise KernelTypeError(f"give the element type of the array: ado.{intent.intent.capitalize()}"
                          f"[ado.f32] (a bare ado.{intent.intent.capitalize()} has none)")


def infer_grid_rank(source: Source, pyfunc) -> int:
    """1, 2 or 3 from ``i = tid()`` / ``i, j = tid()`` / ``i, j, k = tid()`` (1 if tid is unused)."""
    names = captured_names(pyfunc)
    ranks = set()
    for node in ast.walk(source.tree):
        if isinstance(node, ast.Assign) and is_tid_call(node.value, names):
            target = node.targets[0]
            ranks.add(len(target.elts) if isinstance(target, ast.Tuple) else 1)
    if len(ranks) > 1:
        raise source.error(KernelTypeError, f"ado.tid() is unpacked into different numbers of "
                           f"names ({sorted(ranks)}); the grid has one rank", source.tree)
    rank = ranks.pop() if ranks else 1
    if not 1 <= rank <= 3:
        raise source.error(KernelTypeError, f"grids have 1 to 3 axes, ado.tid() was unpacked "
                           f"into {rank} names", source.tree)
    return rank


def uses_tid(source: Source, pyfunc) -> bool:
    names = captured_names(pyfunc)
    return any(is_tid_call(node, names) for node in ast.walk(source.tree))


def is_tid_call(node: ast.expr, names: dict) -> bool:
    """Is `node` a call of ado.tid (through any name or attribute that resolves to it)?"""
    if not (isinstance(node, ast.Call) and not node.args):
        return False
    func = node.func
    path = []
    while isinstance(func, ast.Attribute):
        path.append(func.attr)
        func = func.value
    if not isinstance(func, ast.Name) or func.id not in names:
        return False
    obj = names[func.id]
    for attr in reversed(path):
        obj = getattr(obj, attr, None)
    return obj is language.tid


def tid_variables(source: Source, pyfunc) -> dict[str, int]:
    """Names bound exactly once, at the kernel's top level, to ``tid()`` (or one of its axes)."""
    names = captured_names(pyfunc)
    bound_count: dict[str, int] = {}
    for node in ast.walk(source.tree):
        targets = []
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign, ast.For)):
            targets = [node.target]
        for target in targets:
            for name in ast.walk(target):
                if isinstance(name, ast.Name) and isinstance(name.ctx, ast.Store):
                    bound_count[name.id] = bound_count.get(name.id, 0) + 1
    axes = {}
    for statement in source.tree.body:
        if isinstance(statement, ast.Assign) and len(statement.targets) == 1 \
                and is_tid_call(statement.value, names):
            target = statement.targets[0]
            elements = target.elts if isinstance(target, ast.Tuple) else [target]
            for axis, element in enumerate(elements):
                if isinstance(element, ast.Name) and bound_count.get(element.id) == 1:
                    axes[element.id] = axis
    return axes


class KernelLowering(BlockLowering, Lowering):
    """The kernel body: ``void @k(tids..., flattened params..., ptr %status)``; a block kernel has
    one ``ptr`` per shared array before the status pointer (frontend/blocks.py)."""

    def __init__(self, ctx: ModuleContext, source: Source, pyfunc, signature: KernelSignature,
                 block: tuple[int, ...] | None = None, shared: tuple[SharedArray, ...] = (),
                 shared_index: dict | None = None):
        arg_types = [LLVM_TYPES.get(t, ir.PointerType()) for t in signature.body_arg_types()]
        arg_types[-1:-1] = [ir.PointerType()] * len(shared)
        function = ir.Function(ctx.module, ir.FunctionType(ir.VoidType(), arg_types), signature.name)
        default_float = rules.kernel_default_float(p.dtype for p in signature.params)
        super().__init__(ctx, source, pyfunc, function, default_float)
        self.signature = signature
        self.tid_axes = tid_variables(source, pyfunc)
        args = list(function.args)
        self.tids = args[:signature.grid_rank]
        for axis, tid in enumerate(self.tids):
            tid.name = f"tid{axis}"
        self.status = args[-1]
        self.status.name = "status"
        self.block, self.shared_index = block, shared_index or {}
        self.bind_shared(list(shared), args[len(args) - 1 - len(shared):-1])
        self.bind_parameters(args[signature.grid_rank:len(args) - 1 - len(shared)])

    def bind_parameters(self, flat_args) -> None:
        flat = self.signature.flat_params()
        for arg, fp in zip(flat_args, flat):
            arg.name = fp.name
        position = 0
        for index, param in enumerate(self.signature.params):
            if param.is_array:
                ndim = param.type.ndim
                shape = tuple(flat_args[position + 1: position + 1 + ndim])
                self.bindings[param.name] = ArrayRef(param.name, param.type, flat_args[position],
                                                     shape, index)
                position += 1 + ndim
            else:
                variable = self.new_variable(param.name, param.type)
                self.builder.store(flat_args[position], variable.slot)
                position += 1

    def thread_index(self, node):
        if node.args or node.keywords:
            raise KernelTypeError("ado.tid() takes no arguments")
        values = tuple(Scalar(t, rules.i64, axis) for axis, t in enumerate(self.tids))
        return values[0] if len(values) == 1 else values

    def assign_name(self, name: str, value) -> None:
        axis = self.tid_axes.get(name)
        if axis is not None and name not in self.variables and isinstance(value, Scalar) \
                and value.tid_axis == axis:
            self.new_variable(name, rules.i64, tid_axis=axis)
        super().assign_name(name, value)

    def visit_Return(self, node: ast.Return):
        if node.value is not None and not (isinstance(node.value, ast.Constant)
                                           and node.value.value is None):
            raise KernelTypeError("kernels return nothing; write results into Out arrays")
        self.builder.ret_void()

    def abort(self) -> None:
        self.builder.ret_void()

    def lower(self) -> None:
        self.visit_body(self.source.tree.body)
        if not self.builder.block.is_terminated:
            self.builder.ret_void()
        self.finish_allocas()

