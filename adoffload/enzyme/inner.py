"""Derivatives of helpers called inside kernels: ``ado.grad(f)``, ``ado.value_and_grad(f)``, ``ado.jvp(f)``.

The front end (``frontend/derivative_calls.py``) leaves a call to a placeholder declaration
``@adoffload.inner.<kind>.<argnums>.<helper>`` next to the helper's own function. Here, after
canonicalization (the helper is in SSA form), each placeholder gets a body built from the AD
engine's derivative of the helper, exactly as Enzyme's ``__enzyme_autodiff`` is replaced by the
generated gradient:

* ``grad`` / ``value_and_grad``: reverse mode with the argnums arguments Active and the others
  Const, seeded with 1.0, plus (for ``value_and_grad``) a call of the primal;
* ``jvp``: forward mode with every argument Dup, plus a call of the primal.

Every function involved becomes internal ``alwaysinline``, so the next canonicalization inlines
it into the kernel body. The body is then ordinary straight-line code, which the kernel-level AD
differentiates again (second order: ``ado.vjp`` of a kernel that calls ``ado.grad(f)``). A
helper with a custom derivative is differentiated through a one-call wrapper so that the AD
engine uses the user's jvp / vjp; it stays ``noinline`` (the custom rule needs the call).
"""
from __future__ import annotations

from ..errors import DifferentiationError
from ..ir import canonicalize, export_module, import_module
from ..ir.builder import Builder
from ..ir.core import Argument, Constant, Function, Module, StructType, const
from .activity import ACTIVE, CONST, DUP
from .custom import find_custom
from .forward import forward
from .inner_arrays import ARRAY_PREFIX, call_site, define_array_placeholder, refuse_nested

PREFIX = "adoffload.inner."
KINDS = ("grad", "value_and_grad", "jvp")


def resolve_inner_derivatives(text: str) -> str:
    """Canonical module text with every placeholder defined and inlined (unchanged when none)."""
    if PREFIX not in text:
        return text
    module = import_module(text)
    placeholders = [f for f in module.functions.values() if f.name.startswith(PREFIX) and f.is_declaration]
    if not placeholders:
        return text
    for placeholder in placeholders:
        define_placeholder(module, placeholder)
    return canonicalize(export_module(module))


def parse_placeholder(name: str) -> tuple[str, tuple[int, ...], str]:
    kind, positions, helper = name[len(PREFIX):].split(".", 2)
    return kind, tuple(int(p) for p in positions.split("_")), helper


def define_placeholder(module: Module, placeholder: Function) -> None:
    if placeholder.name.startswith(ARRAY_PREFIX):
        define_array_placeholder(module, placeholder)
        return
    kind, positions, helper_name = parse_placeholder(placeholder.name)
    where = call_site(module, placeholder)
    helper = module.functions.get(helper_name)
    if kind not in KINDS or helper is None or helper.is_declaration:
        raise DifferentiationError(f"{where}internal error: no helper @{helper_name} for {placeholder.name}")
    refuse_nested(helper, where, kind)
    custom = find_custom(module, helper) is not None
    target = _call_wrapper(module, helper) if custom else helper
    try:
        if kind == "jvp":
            derivative = forward(module, target, [DUP if k in positions else CONST for k in range(len(target.args))],
                                 name=f"{helper.name}.adoffload.inner.fwd.{'_'.join(map(str, sorted(positions)))}")
        else:
            derivative = _reverse(module, target, positions, where)
    except DifferentiationError as exc:
        raise DifferentiationError(f"{where}ado.{kind}({helper_name}): {exc}") from None
    _emit_body(module, placeholder, kind, positions, helper, derivative)
    for fn in (placeholder, derivative, target) + (() if custom else (helper,)):
        fn.linkage = "internal"
        fn.attributes.discard("noinline")
        fn.attributes.discard("optnone")
        fn.attributes.add("alwaysinline")
    if custom:
        helper.linkage = "internal"


def _reverse(module: Module, target: Function, positions, where: str) -> Function:
    from .reverse import reverse
    activity = [ACTIVE if k in positions else CONST for k in range(len(target.args))]
    name = f"{target.name}.adoffload.inner.rev.{'_'.join(map(str, positions))}"
    existing = module.functions.get(name)
    if existing is not None:
        return existing
    result = reverse(module, target, activity, name=name)
    if result.tape is not None or result.log is not None:
        module.functions.pop(name, None)
        raise DifferentiationError(f"{where}the helper's adjoint needs a dynamic tape (a loop whose trip "
                                   f"count depends on the data); write the derivative with "
                                   f"@ado.func(vjp=...) or unroll the loop")
    return result.function


def _call_wrapper(module: Module, helper: Function) -> Function:
    """``define @<helper>.adoffload.inner.call(args) { ret call @helper(args) }``."""
    name = f"{helper.name}.adoffload.inner.call"
    if name in module.functions:
        return module.functions[name]
    args = [Argument(a.type, a.name or f"x{k}", k) for k, a in enumerate(helper.args)]
    wrapper = module.add_function(Function(name, helper.function_type, args))
    b = Builder(wrapper.add_block("entry"))
    b.ret(b.call(helper, list(args)))
    return wrapper


def _emit_body(module: Module, placeholder: Function, kind: str, positions, helper: Function,
               derivative: Function) -> None:
    t = helper.return_type
    n = len(helper.args)
    placeholder.args = [Argument(ty, f"x{k}", k) for k, ty in enumerate(placeholder.function_type.params)]
    b = Builder(placeholder.add_block("entry"))
    primal = placeholder.args[:n]
    if kind == "jvp":       # tangents come in argnums order, the derivative takes them in argument order
        tangents = dict(zip(positions, placeholder.args[n:]))
        fields = [b.call(helper, primal), b.call(derivative, list(primal) + [tangents[k] for k in sorted(positions)])]
    else:
        slots = []
        for k in positions:
            slot = b.alloca(helper.args[k].type)
            b.store(const(helper.args[k].type, -0.0), slot)   # -0.0 + x folds to x
            slots.append(slot)
        b.call(derivative, list(primal) + slots + [const(t, 1.0)])
        fields = [b.load(helper.args[k].type, slot) for k, slot in zip(positions, slots)]
        if kind == "value_and_grad":
            fields.insert(0, b.call(helper, primal))
    ret = placeholder.return_type
    if not isinstance(ret, StructType):
        b.ret(fields[0])
        return
    aggregate = Constant(ret, None, kind="undef")
    for k, value in enumerate(fields):
        aggregate = b.emit("insertvalue", ret, [aggregate, value], indices=(k,))
    b.ret(aggregate)
