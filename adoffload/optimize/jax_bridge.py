"""The optimizer kernels as JAX custom calls (``ado.jax_kernel``): ``jax.jit`` and ``jax.vmap`` compose.

The results are not differentiable: the kernel's own derivative would differentiate the iteration,
not the solution. ``jax.grad`` / ``jax.jvp`` through them raise ``JaxIntegrationError`` (implicit
differentiation of the optimality conditions is not built).
"""
from __future__ import annotations

from ..errors import JaxIntegrationError


_REGISTERED = []


def _register_result() -> None:
    """OptimizeResult is a pytree (a jitted function may return it); its keys are the children."""
    import jax
    from .result import OptimizeResult
    if not _REGISTERED:
        jax.tree_util.register_pytree_node(
            OptimizeResult, lambda r: (list(r.values()), list(r.keys())),
            lambda keys, values: OptimizeResult(zip(keys, values)))
        _REGISTERED.append(True)


def call(kernel, inputs: list, shapes: dict) -> dict:
    """Run ``kernel`` on ``inputs`` (its In and scalar params in order) with Out arrays of ``shapes``."""
    import jax
    import adoffload as ado
    _register_result()
    lanes = getattr(kernel, "problems_per_launch", 1)      # the warp layout: a block of lanes per problem
    function = ado.jax_kernel(kernel, grid=lambda *args: (shapes["x_out"][0] * lanes,), out_shapes=shapes)

    @jax.custom_jvp
    def run(*operands):
        return function(*operands)

    @run.defjvp
    def _no_derivative(primals, tangents):
        raise JaxIntegrationError(f"the results of adoffload.optimize ({kernel.name}) are not differentiable: "
                                  f"stop the gradient of the call's inputs (x0 and args: jax.tree_util.tree_map("
                                  f"jax.lax.stop_gradient, ...); a stop_gradient of its results is too late, the "
                                  f"inputs carry the derivative into the call), or differentiate the optimality "
                                  f"conditions yourself (implicit differentiation is not built in)")

    results = run(*inputs)
    outs = [p.name for p in kernel.signature.visible_params if p.is_array and p.type.intent == "out"]
    return dict(zip(outs, results))


__all__ = ["call"]
