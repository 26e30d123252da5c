"""Fixed-capacity Verlet neighbor lists built on device from a cell list.

A ``NeighborListSpec`` holds the static choices (box, cutoff, skin, capacity, backend);
its ``build``, ``update`` and ``needs_rebuild`` are pure JAX functions usable inside
``jax.jit`` and ``lax.scan``. Rows hold the neighbors within ``cutoff + skin``; the list
stays valid until some atom has moved more than ``skin / 2`` since the build (the
rebuild criterion). Capacity overflow cannot raise inside a jitted loop, so the list
carries the largest count it has seen and ``check_overflow`` raises on the host.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from . import reference
from .backend import get_backend
from ..errors import BoxError, NeighborListOverflowError, ShapeError

# A box side needs at least this many cells for the 27-cell stencil to visit each cell once.
MIN_CELLS_PER_SIDE = 3
# At most this many cells in all: a box much larger than the system (free space, a cluster in
# vacuum) gets fewer, larger cells (each still at least cutoff + skin wide) instead of an
# allocation of box^3 / radius^3 cells (a 10^4 box with radius 2.8 would be 4.5e10 cells).
MAX_CELLS = 2 ** 21


def as_positions(pos, what: str = "positions"):
    """``pos`` as an (N, 3) float64 array (a tracer stays a tracer).

    Integer or float32 coordinates are converted to float64, the dtype everything here computes
    in: the box is cast to the positions' dtype, so integer positions would truncate it (a box of
    6.5 read as 6). Any other shape is a ``ShapeError`` (a (3, N) array would otherwise be read as
    three atoms).
    """
    pos = jnp.asarray(pos)
    if pos.ndim != 2 or pos.shape[1] != 3:
        hint = "; a (3, N) array? pass its transpose" if pos.ndim == 2 and pos.shape[0] == 3 else ""
        raise ShapeError(f"{what} must be an (N, 3) array of Cartesian coordinates, got shape {tuple(pos.shape)}"
                         f"{hint}")
    if jnp.issubdtype(pos.dtype, jnp.complexfloating) or pos.dtype == jnp.bool_:
        raise ShapeError(f"{what} must be real coordinates, got dtype {pos.dtype}")
    return pos if pos.dtype == jnp.float64 else pos.astype(jnp.float64)


def check_box(box) -> tuple[float, float, float]:
    """The three edge lengths of an orthorhombic box as floats, or a ``BoxError`` saying what is wrong."""
    try:
        edges = np.asarray(box, dtype=float)
    except (TypeError, ValueError) as error:
        raise BoxError(f"a box is three edge lengths (x, y, z) of an orthorhombic cell, got {box!r}") from error
    if edges.shape == (3, 3):
        if np.abs(edges - np.diag(np.diag(edges))).max() > 0:
            raise BoxError(f"only orthorhombic boxes are supported (three edge lengths); got the triclinic cell "
                           f"{edges.tolist()}")
        edges = np.diag(edges)
    elif edges.shape == ():
        edges = np.full(3, float(edges))
    if edges.shape != (3,):
        raise BoxError(f"a box is three edge lengths (x, y, z) of an orthorhombic cell, got {box!r}")
    if not np.all(np.isfinite(edges)) or np.any(edges <= 0):
        raise BoxError(f"box edges must be positive and finite, got {tuple(edges.tolist())} (a free cluster "
                       "needs a box much larger than its extent, not 0 or inf)")
    return tuple(float(b) for b in edges)


class NeighborList(NamedTuple):
    neighbors: jax.Array        # (N, capacity) int64, padded with -1
    counts: jax.Array           # (N,) true neighbor counts (may exceed capacity)
    reference: jax.Array        # (N, 3) positions at the last build
    peak: jax.Array             # largest count (or over-full cell) seen since creation
    builds: jax.Array           # how many times the list was built
    cell_peak: jax.Array        # most atoms seen in one cell since creation (0 without cells)


@dataclass(frozen=True)
class NeighborListSpec:
    box: tuple[float, float, float]
    cutoff: float
    skin: float = 0.3
    capacity: int = 128
    backend: str = "adoffload"
    max_per_cell: int = 64      # the JAX reference scans a fixed number of slots per cell
    method: str = "auto"        # "cells", "all_pairs", or "auto" (cells when >= 3 per side)

    def __post_init__(self):
        object.__setattr__(self, "box", check_box(self.box))
        if self.method not in ("auto", "cells", "all_pairs"):
            raise ValueError(f"method must be 'auto', 'cells' or 'all_pairs', got {self.method!r}")
        if not (self.cutoff >= 0 and self.skin >= 0 and math.isfinite(self.radius)):
            raise BoxError(f"cutoff and skin must be finite and >= 0, got cutoff={self.cutoff!r}, skin={self.skin!r}")
        if self.method == "cells" and min(self.cells_per_side) < MIN_CELLS_PER_SIDE:
            raise BoxError(f"a cell list needs >= {MIN_CELLS_PER_SIDE} cells per side; box {self.box} with "
                           f"cutoff + skin {self.radius:g} gives {self.cells_per_side}: use method='all_pairs'")
        if 2 * self.radius > min(self.box):
            raise BoxError(f"cutoff + skin = {self.cutoff:g} + {self.skin:g} is more than half the smallest box edge "
                           f"{min(self.box):g}; the minimum image would miss pairs: use a larger box (or a smaller "
                           f"skin, if the cutoff alone fits)")

    @property
    def radius(self) -> float:
        return self.cutoff + self.skin

    @property
    def cells_per_side(self) -> tuple[int, int, int]:
        if self.radius <= 0:
            return (0, 0, 0)
        cells = [max(1, int(math.floor(b / self.radius))) for b in self.box]
        while math.prod(cells) > MAX_CELLS:             # halve the longest sides: cells only grow
            longest = max(range(3), key=lambda a: cells[a])
            cells[longest] = max(1, cells[longest] // 2)
        return tuple(cells)

    @property
    def uses_cells(self) -> bool:
        if self.method != "auto":
            return self.method == "cells"
        return min(self.cells_per_side) >= MIN_CELLS_PER_SIDE

    def build(self, pos, previous_peak=0, previous_builds=0, previous_cell_peak=0) -> NeighborList:
        pos = as_positions(pos)
        cell_peak = jnp.asarray(previous_cell_peak, jnp.int64)
        if pos.shape[0] == 0:           # no atoms: an empty list (the kernels would launch no threads)
            return NeighborList(jnp.zeros((0, self.capacity), jnp.int64), jnp.zeros((0,), jnp.int64), pos,
                                jnp.asarray(previous_peak, jnp.int64), jnp.asarray(previous_builds) + 1, cell_peak)
        backend = get_backend(self.backend, adjoint=False)
        box = jnp.asarray(self.box, dtype=pos.dtype)
        if self.uses_cells:
            cps = jnp.asarray(self.cells_per_side, dtype=jnp.int64)
            n_cells = int(np.prod(self.cells_per_side))
            cell = backend.cell_index(pos, box, cps)
            order = jnp.argsort(cell).astype(jnp.int64)
            start, count = backend.cell_ranges(cell[order], n_cells)
            neighbors, counts = backend.cell_neighbors(pos, box, cps, cell, order, start, count,
                                                       self.radius, self.capacity, self.max_per_cell)
            cell_peak = jnp.maximum(jnp.max(count).astype(jnp.int64), cell_peak)
        else:
            neighbors, counts = backend.all_pairs_neighbors(pos, box, self.radius, self.capacity)
        peak = jnp.maximum(jnp.max(counts), previous_peak)
        return NeighborList(neighbors, counts, pos, peak, jnp.asarray(previous_builds) + 1, cell_peak)

    def needs_rebuild(self, nl: NeighborList, pos) -> jax.Array:
        pos = as_positions(pos)
        if pos.shape != nl.reference.shape:
            raise ShapeError(f"positions of {pos.shape[0]} atoms given to a neighbor list built for "
                             f"{nl.reference.shape[0]}: build a new list when the number of atoms changes")
        if pos.shape[0] == 0:
            return jnp.asarray(False)
        moved = reference.minimum_image(pos - nl.reference, jnp.asarray(self.box, dtype=pos.dtype))
        return jnp.max(jnp.sum(moved * moved, axis=-1)) > (0.5 * self.skin) ** 2

    def update(self, nl: NeighborList, pos) -> NeighborList:
        """Rebuild if any atom moved more than skin/2 since the last build, else keep ``nl``."""
        return jax.lax.cond(self.needs_rebuild(nl, pos),
                            lambda: self.build(pos, nl.peak, nl.builds, nl.cell_peak),
                            lambda: nl)

    @property
    def scans_cell_slots(self) -> bool:
        """Whether the builder reads at most ``max_per_cell`` atoms per cell (the JAX reference's cell list)."""
        return self.uses_cells and self.backend == "jax"

    def check_overflow(self, nl: NeighborList) -> None:
        """Raise ``NeighborListOverflowError`` if any row (or cell) ever overflowed its capacity."""
        cell_peak = int(nl.cell_peak)
        if self.scans_cell_slots and cell_peak > self.max_per_cell:
            raise NeighborListOverflowError(
                f"a cell held {cell_peak} atoms but the JAX reference's cell list reads max_per_cell = "
                f"{self.max_per_cell} per cell (an inhomogeneous system: a cluster or slab in vacuum); results "
                f"computed with this list are wrong. Create the NeighborListSpec with max_per_cell >= "
                f"{8 * -(-cell_peak // 8)} (ForceField.neighbor_list(..., max_per_cell=...))")
        peak = int(nl.peak)
        if peak > self.capacity:
            raise NeighborListOverflowError(
                f"an atom has {peak} neighbors within cutoff+skin = {self.radius:g} but the list holds "
                f"{self.capacity} per atom; results computed with this list are wrong. "
                f"Create the NeighborListSpec with capacity >= {max(peak, self.capacity) + 16}")


def estimate_capacity(n_atoms: int, box, cutoff: float, skin: float, margin: float = 1.5) -> int:
    """A capacity with room to spare for a roughly uniform system: margin x the mean count, rounded to 8."""
    density = n_atoms / float(np.prod(box))
    mean = density * 4.0 / 3.0 * math.pi * (cutoff + skin) ** 3
    return int(8 * math.ceil((margin * mean + 16) / 8))


def brute_force_neighbors(pos, box, radius) -> list[set[int]]:
    """The exact neighbor sets, in numpy (test oracle)."""
    pos, box = np.asarray(pos), np.asarray(box)
    d = pos[None, :, :] - pos[:, None, :]
    d -= box * np.floor(d / box + 0.5)
    r2 = (d * d).sum(-1)
    np.fill_diagonal(r2, np.inf)
    return [set(np.nonzero(row < radius * radius)[0].tolist()) for row in r2]
