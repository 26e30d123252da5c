"""Shadow arguments checked against their primals: a derivative kernel indexes ``d_x`` with ``x``'s shape.

A derived body (enzyme/kernels.py ``_wrap``) hands its derivative function the shadow's data pointer
only: every access of ``d_x`` is bounds-checked against ``x``'s shape. A shadow shorter than its
primal would be read or written past its end, so the launcher refuses it first. What a shadow's
shape must be (docs/ARCHITECTURE.md §3):

===========================  ===================  ==================
primal                       forward (width k)    reverse
===========================  ===================  ==================
array of shape S             S (k > 1: (k, *S))   S
scalar                       a scalar (k > 1:     a 1-element array
                             a (k,) array)        (1,)
===========================  ===================  ==================

A derivative of a derivative checks its own shadows against the parameters of the kernel it
differentiates, and that kernel's shadows against theirs (the parameters keep their indices).
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from ..errors import CompilationError, ShapeError


@dataclass(frozen=True)
class ShadowRule:
    """Param ``shadow`` must have the shape ``lead + shape of param primal`` (``lead`` is () or
    ``(k,)``); for a scalar primal the shape is ``lead`` alone."""
    shadow: int
    primal: int
    lead: tuple[int, ...]
    mode: str


def shadow_rules(kernel) -> tuple[ShadowRule, ...]:
    """The rules of ``kernel``'s shadow params, and of the kernels it was derived from."""
    rules = getattr(kernel, "_shadow_rules", None)
    if rules is None:
        rules = _rules(kernel)
        try:
            kernel._shadow_rules = rules
        except AttributeError:       # a kernel type that refuses attributes: recomputed per plan
            pass
    return rules


def own_shadows(kernel) -> list[tuple[int, int]]:
    """``(shadow param index, primal param index)`` of the shadows ``kernel`` itself adds (none unless it
    is a derivative kernel: ``mode`` and ``base``)."""
    mode, base = getattr(kernel, "mode", None), getattr(kernel, "base", None)
    if mode not in ("jvp", "vjp") or base is None:
        return []
    from ..enzyme.kernels import shadowed_params
    primal_params, params = base.signature.params, kernel.signature.params
    pairs = []
    for offset, primal in enumerate(shadowed_params(base.signature, list(kernel.wrt))):
        index = len(primal_params) + offset
        name, primal_name = params[index].name, primal_params[primal].name
        if not re.fullmatch(rf"d\d*_{re.escape(primal_name)}", name):
            raise CompilationError(f"internal: kernel '{kernel.name}' has '{name}' where the shadow of "
                                   f"'{primal_name}' belongs; its shadows cannot be checked")
        pairs.append((index, primal))
    return pairs


def _rules(kernel) -> tuple[ShadowRule, ...]:
    pairs = own_shadows(kernel)
    if not pairs:
        return ()
    mode, width = kernel.mode, getattr(kernel, "width", 1)
    primal_params = kernel.base.signature.params
    own = []
    for index, primal in pairs:
        scalar = not primal_params[primal].is_array
        if mode == "jvp" and width == 1 and scalar:
            continue                              # a float tangent, checked as a scalar
        lead = (1,) if mode == "vjp" and scalar else (width,) if mode == "jvp" and width > 1 else ()
        own.append(ShadowRule(index, primal, lead, mode))
    return shadow_rules(kernel.base) + tuple(own)     # the first derivative's shadows first: the root cause


def check_shadow_shapes(kernel, shapes: dict) -> None:
    """Raise ShapeError for the first shadow whose shape breaks its rule. ``shapes``: {param index:
    shape} of the array arguments (a scalar primal has none)."""
    params = kernel.signature.params
    for rule in shadow_rules(kernel):
        given = shapes.get(rule.shadow)
        if given is None:
            continue                               # a launcher-filled buffer, not given by the caller
        primal = params[rule.primal]
        base_shape = shapes.get(rule.primal, ()) if primal.is_array else ()
        if primal.is_array and rule.primal not in shapes:
            continue
        expected = rule.lead + tuple(base_shape)
        if tuple(given) != expected:
            raise ShapeError(_message(kernel.name, params[rule.shadow], primal, rule, expected, tuple(given)))


def _message(kernel_name: str, shadow, primal, rule: ShadowRule, expected: tuple, given: tuple) -> str:
    dtype = shadow.type.dtype.dtype
    if not primal.is_array:
        role = (f"it accumulates the gradient of the scalar '{primal.name}' in a 1-element array" if rule.mode == "vjp"
                else f"it holds the {rule.lead[0]} tangents of the scalar '{primal.name}'")
    elif rule.lead:
        role = f"it holds {rule.lead[0]} tangents of '{primal.name}' (shape {expected[1:]}) along a leading axis"
    else:
        role = f"it is the shadow of '{primal.name}' (shape {expected})"
    how = (f"indexes '{shadow.name}' with the shape of '{primal.name}'" if primal.is_array
           else f"accesses {expected[0]} element{'s' if expected[0] > 1 else ''} of '{shadow.name}'")
    return (f"kernel '{kernel_name}', parameter '{shadow.name}': {role}: expected a {dtype} array of shape "
            f"{expected}, got shape {given}. The kernel {how}, so any other shape would be read or written "
            f"out of place")
