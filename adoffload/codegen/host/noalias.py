"""``noalias`` on a host body's own pointer parameters.

The host entry (codegen/abi.py) calls the body from its loop over threads, and LLVM's inliner turns
only the callee's own ``noalias`` parameters into the scoped alias metadata (``!alias.scope`` /
``!noalias``) that lets a load of a read-only array move past a store to another array: a ``noalias``
on the call's arguments is dropped by inlining. The launcher compiles host entries ``noalias`` where
no array a launch writes shares memory with another (kernels/overlap.py).
"""
from __future__ import annotations


def noalias_parameters(module_text: str, body_name: str, positions: list[int]) -> str:
    """``module_text`` with the body's parameters at ``positions`` marked ``noalias``."""
    from ... import ir
    module = ir.import_module(module_text)
    body = module.functions.get(body_name)
    if body is None or not body.blocks:
        return module_text
    for k in positions:
        if k < len(body.args):
            body.args[k].attributes.add("noalias")
    return ir.export_module(module)
