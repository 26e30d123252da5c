"""BENCHMARKS.md item 2's second half: `jax.jvp` and `jax.vjp` of a RAJAPerf case's jax.numpy
version, timed like the primal jnp baseline, so a row can set our JVP / adjoint kernels
against what a JAX user would otherwise run.

Both differentiate with respect to the case's ``wrt`` inputs with all-ones tangents and
cotangents, as ``rajaperf._derived_values`` seeds our kernels.
"""
from __future__ import annotations


def jax_derivative_times(case, host: dict, reps: int, time_jax, static: dict | None = None) -> dict:
    """``jax_jvp_ms`` / ``jax_vjp_ms`` for ``case`` (nothing when it has no jnp version or no
    float inputs to differentiate); ``time_jax(f, args, reps)`` is the primal's timer; ``static``:
    Python values the jnp version reads as constants (the grid size ``n``)."""
    import jax
    import jax.numpy as jnp
    import numpy as np

    if case.jnp is None or not case.wrt:
        return {}
    fixed = {k: jnp.asarray(v) for k, v in host.items() if k not in case.wrt}
    wrt = {k: jnp.asarray(host[k], jnp.float64 if np.asarray(host[k]).dtype == np.float64 else None)
           for k in case.wrt}

    def outputs(inputs):
        return case.jnp({**fixed, **inputs, **(static or {})}, jnp)

    ones = jax.tree.map(jnp.ones_like, wrt)
    cotangents = jax.tree.map(jnp.ones_like, jax.eval_shape(outputs, wrt))
    jvp = jax.jit(lambda w: jax.jvp(outputs, (w,), (ones,)))
    vjp = jax.jit(lambda w: jax.vjp(outputs, w)[1](cotangents))
    out = {}
    for name, f in (("jax_jvp_ms", jvp), ("jax_vjp_ms", vjp)):
        try:
            out[name] = time_jax(f, wrt, reps).median_ms
        except Exception as exc:      # reported in the row, never hidden
            out[name.replace("_ms", "_error")] = f"{type(exc).__name__}: {str(exc)[:200]}"
    return out
