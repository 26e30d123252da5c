"""The user kernels' energies in plain JAX (gathers over the padded neighbor list, masks for empty
slots and the cutoff), differentiated by ``jax.grad``: what a JAX user writes without a kernel."""
from __future__ import annotations


def _pairs(pos, neighbors, box):
    """Minimum-image vectors to every neighbor slot, and whether the slot holds an atom."""
    import jax.numpy as jnp
    valid = neighbors >= 0
    d = pos[jnp.where(valid, neighbors, 0)] - pos[:, None, :]
    return d - box * jnp.floor(d / box + 0.5), valid


def _safe_r2(d, inside_cutoff):
    """r^2 where the pair counts, 1 elsewhere (no inf/nan in the masked branch's gradient)."""
    import jax.numpy as jnp
    r2 = jnp.sum(d * d, axis=-1)
    return jnp.where(inside_cutoff(r2), r2, 1.0), r2


def lj_energy(pos, neighbors, box, sigma, epsilon, cutoff):
    import jax.numpy as jnp
    d, valid = _pairs(pos, neighbors, box)
    safe, r2 = _safe_r2(d, lambda r2: valid & (r2 < cutoff * cutoff))
    s6 = (sigma * sigma / safe) ** 3
    return jnp.sum(jnp.where(valid & (r2 < cutoff * cutoff), 2.0 * epsilon * (s6 * s6 - s6), 0.0))


def morse_energy(pos, neighbors, box, depth, alpha, r0, cutoff):
    import jax.numpy as jnp
    d, valid = _pairs(pos, neighbors, box)
    inside = lambda r2: valid & (r2 < cutoff * cutoff)     # noqa: E731
    safe, r2 = _safe_r2(d, inside)
    x = 1.0 - jnp.exp(-alpha * (jnp.sqrt(safe) - r0))
    return jnp.sum(jnp.where(inside(r2), 0.5 * depth * (x * x - 1.0), 0.0))


def angle_energy(pos, neighbors, box, strength, cos0, cutoff):
    import jax.numpy as jnp
    d, valid = _pairs(pos, neighbors, box)
    rc2 = cutoff * cutoff
    inside = lambda r2: valid & (r2 < rc2)                 # noqa: E731
    safe, r2 = _safe_r2(d, inside)
    ok = inside(r2)
    w = jnp.where(ok, (1.0 - safe / rc2) ** 2, 0.0)
    k = neighbors.shape[1]
    upper = jnp.triu(jnp.ones((k, k), bool), 1)            # each pair of slots once: a < b
    dots = jnp.einsum("nad,nbd->nab", d, d)
    norms = jnp.sqrt(safe[:, :, None] * safe[:, None, :])
    c = dots / norms
    terms = strength * w[:, :, None] * w[:, None, :] * (c - cos0) ** 2
    return jnp.sum(jnp.where(upper & ok[:, :, None] & ok[:, None, :], terms, 0.0))


ENERGIES = {"lj": lj_energy, "morse": morse_energy, "angle": angle_energy}
