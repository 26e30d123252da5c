"""jax-md as a peer in the chemistry benchmark: the same truncated-and-shifted LJ, in float64.

jax-md's own ``energy.lennard_jones_neighbor_list`` uses a smooth multiplicative cutoff, which is
different physics; here its pair machinery (``smap.pair_neighbor_list``, which masks empty
slots and halves full lists) runs our pair function, ``4 eps ((s/r)^12 - (s/r)^6)`` minus its
value at the cutoff, zero beyond it. Its neighbor lists use the same cutoff and skin as ours
(``r_cutoff`` + ``dr_threshold``). Formats: ``Dense`` (N x max_neighbors, full), ``Sparse``
(pairs, full) and ``OrderedSparse`` (pairs, each once).
"""
from __future__ import annotations

FORMATS = ("Dense", "Sparse", "OrderedSparse")


def available() -> tuple[bool, str]:
    try:
        import jax_md  # noqa: F401
    except Exception as error:          # noqa: BLE001 - any import failure means: not here
        return False, f"jax-md is not importable here ({type(error).__name__}: {error})"
    return True, ""


def shifted_lj(cutoff: float):
    import jax.numpy as jnp

    def pair(dr, sigma=1.0, epsilon=1.0, **unused):
        def lj(r):
            s6 = (sigma / r) ** 6
            return 4.0 * epsilon * (s6 * s6 - s6)
        inside = (dr < cutoff) & (dr > 0.0)             # dr = 0: jax-md's empty (masked) slots
        safe = jnp.where(inside, dr, cutoff)            # no inf/nan in the masked branch's gradient
        return jnp.where(inside, lj(safe) - lj(cutoff), 0.0)
    return pair


class JaxMdLJ:
    """Neighbor list, energy and forces, and the force-matching gradient, as jitted functions."""

    def __init__(self, pos, edge: float, cutoff: float, skin: float, fmt: str):
        import jax
        import jax.numpy as jnp
        from jax_md import partition, smap, space
        box = jnp.full(3, edge, dtype=jnp.float64)
        displacement, _ = space.periodic(box)
        self.neighbor_fn = partition.neighbor_list(displacement, box, cutoff, dr_threshold=skin,
                                                   capacity_multiplier=1.25,
                                                   format=getattr(partition.NeighborListFormat, fmt))
        self.energy_fn = smap.pair_neighbor_list(shifted_lj(cutoff), space.canonicalize_displacement_or_metric(displacement),
                                                 sigma=1.0, epsilon=1.0)
        self.neighbors = self.neighbor_fn.allocate(pos)
        if bool(self.neighbors.did_buffer_overflow):
            raise RuntimeError(f"jax-md {fmt} neighbor list overflowed")
        energy_fn = self.energy_fn

        def energy_and_forces(x, nbrs):
            e, g = jax.value_and_grad(energy_fn)(x, neighbor=nbrs)
            return e, -g

        def force_loss(params, x, nbrs):      # force matching: reverse over reverse in (sigma, epsilon)
            forces = -jax.grad(energy_fn)(x, neighbor=nbrs, sigma=params["sigma"], epsilon=params["epsilon"])
            return jnp.mean(forces ** 2)

        self.energy_and_forces = jax.jit(energy_and_forces)
        # jax-md rebuilds only when an atom moved more than dr_threshold / 2 since the last build;
        # a reference position one skin away in every axis forces the rebuild we time.
        self.rebuild = jax.jit(lambda x, nbrs: nbrs.set(reference_position=x + skin).update(x))
        self.force_loss_gradient = jax.jit(jax.grad(force_loss))
