"""Molecular dynamics over several devices by spatial decomposition.

The periodic box is cut into a ``px x py x pz`` grid of domains laid over a device mesh
with axes ``("x", "y", "z")`` (``(n, 1, 1)`` is slabs). Each device owns the atoms inside
its domain, in fixed-capacity buffers (empty slots have id -1), and sees copies (ghosts)
of the atoms within ``cutoff + skin`` of its faces, which its neighbors send with
``jax.lax.ppermute`` inside ``jax.shard_map``: one stage per cut axis, x then y then z,
each stage forwarding the ghosts received before it, so edge and corner neighbors arrive
without diagonal messages. A ghost that crosses the periodic boundary is shifted by the box
edge, and the energy kernels see a free-space box along cut axes (no minimum image there).

Like the single-device neighbor list, everything is rebuilt only when some atom moved more
than ``skin / 2`` since the last build (a global decision, ``pmax``): atoms that left their
domain then migrate to the neighbor domain, ghosts are chosen again, and the local cell
list is built by the backend's kernels. Between builds only ghost *positions* travel, along
the recorded plan, every step.

Forces are ``-jax.grad`` of the energy of the atoms each device owns; the ghosts' share of
the gradient returns to their owners through the transpose of ``ppermute``. So the
decomposed step is the single-domain step up to summation order, and ``jax.grad`` of a
loss on a decomposed trajectory is its gradient, with communication derived by JAX.

Buffers never drop atoms silently: every buffer's largest fill is carried in the state and
``check_overflow`` (called after each chunk by ``run``) raises ``DomainOverflowError`` with
the capacity to ask for.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, PartitionSpec as P

from .backend import get_backend
from .forcefield import ForceField, LennardJones, Morse
from .neighbors import estimate_capacity
from ..errors import BoxError, DomainOverflowError, ShardingError

AXES = ("x", "y", "z")
DOMAINS = P(AXES)            # leading axis split over every mesh axis: one block per domain
FREE_SPACE = 1e12            # box edge given to the kernels along cut axes: minimum image is then the identity
_SUPPORTED_TERMS = (LennardJones, Morse)
# What the peaks row of a domain records, in order (each the largest fill seen since the start).
PEAKS = ("owned", "ghosts", "migrants", "neighbors", "jumps")


class DomainState(NamedTuple):
    """The sharded state; every leaf's leading axis is split over the domains."""
    pos: jax.Array          # (D*C, 3) owned atoms; empty slots hold zeros
    vel: jax.Array          # (D*C, 3)
    force: jax.Array        # (D*C, 3)
    ids: jax.Array          # (D*C,) atom index in the caller's order, -1 for an empty slot
    reference: jax.Array    # (D*C, 3) positions at the last build
    send: jax.Array         # (D*2*stages, S) local rows sent to the low / high neighbor, per stage
    ghost_valid: jax.Array  # (D*G,) which received ghost rows hold an atom
    neighbors: jax.Array    # (D*(C+G), K) local neighbor rows (owned atoms only; -1 padding)
    potential: jax.Array    # (D,) energy owned by each domain
    peaks: jax.Array        # (D, len(PEAKS)) largest buffer fills seen
    builds: jax.Array       # (D,) rebuilds so far


def domain_mesh(devices, box, radius: float, shape=None) -> Mesh:
    """A mesh with axes ("x", "y", "z") over ``devices``, cutting ``box`` into domains.

    ``shape`` (px, py, pz) forces a grid (``(n, 1, 1)``: slabs); by default the grid with
    the least ghost volume among those whose domains are at least ``radius`` wide.
    """
    devices = list(devices)
    n = len(devices)
    if shape is None:
        shapes = [s for s in _factorizations(n) if all(b / p >= radius for b, p in zip(box, s) if p > 1)]
        if not shapes:
            raise BoxError(f"box {tuple(box)} cannot be cut into {n} domains at least cutoff + skin = {radius:g} "
                           "wide; use fewer devices")
        shape = min(shapes, key=lambda s: (_ghost_volume(box, s, radius), s[::-1]))
    if int(np.prod(shape)) != n:
        raise ShardingError(f"a {shape} grid of domains needs {int(np.prod(shape))} devices, got {n}")
    return Mesh(np.asarray(devices, dtype=object).reshape(shape), AXES)


def _factorizations(n):
    return [(a, b, n // (a * b)) for a in range(1, n + 1) if n % a == 0
            for b in range(1, n // a + 1) if (n // a) % b == 0]


def _ghost_volume(box, shape, radius):
    widths = [b / p for b, p in zip(box, shape)]
    return sum(2 * radius * math.prod(widths[:a] + widths[a + 1:]) for a in range(3) if shape[a] > 1)


@dataclass(frozen=True)
class Decomposition:
    """The static plan of a decomposed run: force field, mesh, skin and buffer capacities.

    Build it with ``Decomposition.create`` (capacities from the density, with a margin) or
    directly with explicit capacities: ``capacity`` owned atoms per domain,
    ``ghost_capacity`` atoms per stage and direction (ghosts, and migrants at a rebuild),
    ``neighbor_capacity`` neighbors per atom, ``max_per_cell`` for the JAX reference backend.
    """
    ff: ForceField
    mesh: Mesh
    skin: float
    capacity: int
    ghost_capacity: int
    neighbor_capacity: int
    max_per_cell: int = 64
    _compiled: dict = field(default_factory=dict, init=False, compare=False, hash=False, repr=False)

    @classmethod
    def create(cls, ff: ForceField, mesh: Mesh, n_atoms: int, skin: float = 0.3, margin: float = 1.25):
        box = np.asarray(ff.box, dtype=float)
        density = n_atoms / float(np.prod(box))
        shape = mesh.devices.shape
        radius = ff.cutoff + skin
        widths = box / np.asarray(shape)
        per_domain = n_atoms / math.prod(shape)
        capacity = _with_margin(per_domain, margin)
        extents, ghosts = list(widths), 0.0
        for a in range(3):
            if shape[a] > 1:
                ghosts = max(ghosts, density * radius * math.prod(extents[:a] + extents[a + 1:]))
                extents[a] += 2 * radius
        neighbors = estimate_capacity(n_atoms, box, ff.cutoff, skin)
        per_cell = _with_margin(2.0 * density * radius ** 3, 1.0)
        return cls(ff, mesh, skin, capacity, _with_margin(ghosts, margin), neighbors, per_cell)

    def __post_init__(self):
        if tuple(self.mesh.axis_names) != AXES:
            raise ShardingError(f"a decomposition mesh has axes {AXES} (domain_mesh makes one), got {self.mesh.axis_names}")
        for term in self.ff.terms:
            if not isinstance(term, _SUPPORTED_TERMS):
                raise ShardingError(f"domain decomposition moves positions only; term {term.name!r} "
                                    f"({type(term).__name__}) needs per-atom data or bonds and is not supported")
        radius = self.radius
        for a, (edge, p) in enumerate(zip(self.box, self.shape)):
            if 2 * radius > edge:
                raise BoxError(f"cutoff + skin = {radius:g} is more than half the box edge {edge:g} ({AXES[a]})")
            if p > 1 and edge / p < radius:
                raise BoxError(f"{p} domains along {AXES[a]} are {edge / p:g} wide, less than cutoff + skin = "
                               f"{radius:g}; use fewer domains along {AXES[a]}")
            if p == 1 and edge // radius < 3:
                raise BoxError(f"the cell list needs >= 3 cells along {AXES[a]}: edge {edge:g}, cutoff + skin "
                               f"{radius:g}")
        # Resolved here, not under a trace: the first call runs the backend's smoke tests (forces included).
        object.__setattr__(self, "_backend", get_backend(self.ff.backend))

    # --- geometry ---------------------------------------------------------------------------

    @property
    def box(self) -> tuple:
        return tuple(self.ff.box)

    @property
    def shape(self) -> tuple:
        return tuple(self.mesh.devices.shape)

    @property
    def n_domains(self) -> int:
        return self.mesh.size

    @property
    def radius(self) -> float:
        return self.ff.cutoff + self.skin

    @property
    def stages(self) -> tuple:
        """The cut axes, in exchange order."""
        return tuple(a for a in range(3) if self.shape[a] > 1)

    def _width(self, a):
        return self.box[a] / self.shape[a]

    def _local_frame(self):
        """Per axis: (extent, cells) of the local cell grid (domain + ghosts along cut axes)."""
        frame = []
        for a in range(3):
            extent = self._width(a) + 2 * self.radius if self.shape[a] > 1 else self.box[a]
            frame.append((extent, int(extent // self.radius)))
        return frame

    def _kernel_box(self, dtype):
        return jnp.asarray([FREE_SPACE if p > 1 else b for b, p in zip(self.box, self.shape)], dtype=dtype)

    # --- host side: distribute, gather, check ----------------------------------------------

    def distribute(self, pos, vel) -> DomainState:
        """Place atoms (in any order; their index becomes their id) on their domains, then build."""
        pos = np.asarray(pos, dtype=np.float64)
        vel = np.asarray(vel, dtype=np.float64)
        box = np.asarray(self.box)
        pos = pos - box * np.floor(pos / box)
        coords = np.minimum((pos / (box / self.shape)).astype(np.int64), np.asarray(self.shape) - 1)
        domain = np.ravel_multi_index(coords.T, self.shape)
        counts = np.bincount(domain, minlength=self.n_domains)
        if counts.max() > self.capacity:
            raise DomainOverflowError(f"a domain starts with {counts.max()} atoms, more than capacity "
                                      f"{self.capacity}: create the Decomposition with capacity >= "
                                      f"{_with_margin(counts.max(), 1.1)}")
        C, D = self.capacity, self.n_domains
        ids = np.full(D * C, -1, dtype=np.int64)
        order = np.argsort(domain, kind="stable")
        rank = np.arange(len(pos)) - np.repeat(np.cumsum(counts) - counts, counts)
        slots = domain[order] * C + rank
        ids[slots] = order
        host = {"pos": np.zeros((D * C, 3)), "vel": np.zeros((D * C, 3))}
        host["pos"][slots], host["vel"][slots] = pos[order], vel[order]
        # The plan, the ghosts and the neighbor list come from the first build below: their
        # placeholders here are one row per domain (a full-size neighbor list would cost
        # gigabytes of host memory at millions of atoms).
        blank = DomainState(host["pos"], host["vel"], np.zeros((D * C, 3)), ids, host["pos"],
                            np.zeros((D * 2 * len(self.stages), self.ghost_capacity), np.int64), np.zeros(D, bool),
                            np.full((D, 1), -1, np.int64), np.zeros(D), np.zeros((D, len(PEAKS)), np.int64),
                            np.zeros(D, np.int64))
        sharding = jax.sharding.NamedSharding(self.mesh, DOMAINS)
        placed = jax.tree.map(lambda x: jax.make_array_from_callback(x.shape, sharding, lambda i, x=x: x[i]), blank)
        state = self._compile("prepare", self._prepare_blocks)(placed, self.ff.parameters)
        self.check_overflow(state)
        return state

    def gather(self, state: DomainState, values=None):
        """Per-atom arrays in id order on the host: positions (wrapped into the box) and
        velocities, or the given owned-slot arrays (e.g. ``state.force``)."""
        from .sharding import to_host
        ids = to_host(state.ids)
        present = ids >= 0
        n = int(present.sum())
        arrays = (state.pos, state.vel) if values is None else tuple(values)
        out = []
        for x in arrays:
            host = to_host(x)
            result = np.empty((n,) + host.shape[1:], host.dtype)
            result[ids[present]] = host[present]
            out.append(result)
        if values is None:
            box = np.asarray(self.box)
            out[0] = out[0] - box * np.floor(out[0] / box)
        return tuple(out)

    def check_overflow(self, state: DomainState) -> None:
        """Raise ``DomainOverflowError`` if any buffer ever overflowed (results are then wrong)."""
        from .sharding import to_host
        peaks = to_host(state.peaks).max(axis=0)
        limits = {"owned": self.capacity, "ghosts": self.ghost_capacity, "migrants": self.ghost_capacity,
                  "neighbors": self.neighbor_capacity, "jumps": 0}
        what = {"owned": "capacity (owned atoms per domain)", "ghosts": "ghost_capacity (ghosts per face)",
                "migrants": "ghost_capacity (atoms migrating through one face)",
                "neighbors": "neighbor_capacity (neighbors per atom; the JAX reference backend also reports a cell "
                             "holding more than max_per_cell atoms this way)"}
        for name, peak in zip(PEAKS, peaks):
            if peak > limits[name]:
                if name == "jumps":
                    raise DomainOverflowError("an atom moved past a whole domain between two rebuilds; "
                                              "the time step is too large for this decomposition")
                raise DomainOverflowError(f"a domain needed {int(peak)} slots for {name} but {what[name]} is "
                                          f"{limits[name]}; results of this run are wrong. Create the "
                                          f"Decomposition with {what[name].split()[0]} >= {_with_margin(peak, 1.1)}")

    # --- compiled entry points -------------------------------------------------------------

    def _compile(self, key, block_fn, *, static=(), replicated_out=False):
        """jit(shard_map(block_fn)) over (state, params, *static), cached per key and statics."""
        cache_key = (key,) + tuple(static)
        if cache_key not in self._compiled:
            out_specs = (DOMAINS, P()) if replicated_out else DOMAINS
            mapped = jax.shard_map(lambda s, p: block_fn(s, p, *static), mesh=self.mesh,
                                   in_specs=(DOMAINS, P()), out_specs=out_specs)
            self._compiled[cache_key] = jax.jit(mapped)
        return self._compiled[cache_key]

    def simulate(self, state: DomainState, steps: int, dt: float, params=None):
        """``steps`` velocity Verlet steps; returns (state, per-step potential, per-step kinetic).

        A pure, jittable and differentiable function of ``state`` and ``params`` (both may
        be traced): ``jax.grad`` of a loss on its outputs runs the adjoint through every
        step, migration and ghost exchange included.
        """
        params = self.ff.parameters if params is None else params
        advance = self._compile("simulate", self._simulate_blocks, static=(int(steps), float(dt)), replicated_out=True)
        state, (potential, kinetic, _) = advance(state, params)
        return state, potential, kinetic

    def forces(self, state: DomainState, params=None):
        """Forces on the owned slots (layout of ``state.pos``) with ``params``, at the current
        positions and neighbor lists (differentiable with respect to ``params``)."""
        params = self.ff.parameters if params is None else params
        return self._compile("forces", lambda s, p: self._energy_and_forces(s, p)[1])(state, params)

    def run(self, state: DomainState, steps: int, dt: float, *, chunk: int = 10, params=None, progress=None):
        """Integrate exactly ``steps`` NVE steps in jitted chunks (the last one shorter when ``chunk``
        does not divide ``steps``), checking energies and buffers after each chunk.

        Returns (state, record dict, seconds excluding the first chunk, steps timed), like
        ``dynamics.run``; ``record`` holds per-chunk step, potential, kinetic, total, temperature.
        """
        from .dynamics import check_finite, chunk_lengths
        params = self.ff.parameters if params is None else params
        lengths = chunk_lengths(steps, chunk, dt)
        record = {k: [] for k in ("step", "potential", "kinetic", "total", "temperature")}
        n_atoms = None
        timed_seconds, timed_steps, started, done = 0.0, 0, None, 0
        for c, length in enumerate(lengths):
            advance = self._compile("simulate", self._simulate_blocks, static=(length, float(dt)), replicated_out=True)
            state, (potential, kinetic, n_atoms) = advance(state, params)
            potential.block_until_ready()
            now = time.perf_counter()
            if started is not None and length == chunk:      # (a shorter last chunk compiles anew)
                timed_seconds += now - started
                timed_steps += length
            started = now
            done += length
            pe, ke, n = float(potential[-1]), float(kinetic[-1]), int(n_atoms)
            check_finite(state.pos, pe, ke, done, dt)
            self.check_overflow(state)
            record["step"].append(done)
            record["potential"].append(pe)
            record["kinetic"].append(ke)
            record["total"].append(pe + ke)
            record["temperature"].append(2.0 * ke / (3 * n - 3))
            if progress is not None:
                progress(c + 1, len(lengths))
        return state, {k: np.asarray(v) for k, v in record.items()}, timed_seconds, timed_steps

    # --- per-domain functions (run inside shard_map) -------------------------------------

    def _prepare_blocks(self, block: DomainState, params):
        block = self._rebuild(block)
        potential, force = self._energy_and_forces(block, params)
        return block._replace(force=force, potential=potential)

    def _simulate_blocks(self, block: DomainState, params, steps, dt):
        def step(block, _):
            block = self._verlet(block, params, dt)
            valid = (block.ids >= 0)[:, None]
            kinetic = 0.5 * jnp.sum(jnp.where(valid, block.vel * block.vel, 0.0))
            return block, (jax.lax.psum(block.potential[0], AXES), jax.lax.psum(kinetic, AXES))
        block, (potential, kinetic) = jax.lax.scan(step, block, None, length=steps)
        n_atoms = jax.lax.psum(jnp.sum(block.ids >= 0), AXES)
        return block, (potential, kinetic, n_atoms)

    def _verlet(self, block: DomainState, params, dt):
        vel = block.vel + 0.5 * dt * block.force
        pos = block.pos + dt * vel
        block = block._replace(pos=pos, vel=vel)
        moved = jnp.where(block.ids >= 0, jnp.sum(jax.lax.stop_gradient(pos - block.reference) ** 2, axis=-1), 0.0)
        stale = jax.lax.pmax(jnp.max(moved), AXES) > (0.5 * self.skin) ** 2
        block = jax.lax.cond(stale, self._rebuild, lambda b: b, block)
        potential, force = self._energy_and_forces(block, params)
        return block._replace(vel=block.vel + 0.5 * dt * force, force=force, potential=potential)

    def _energy_and_forces(self, block: DomainState, params):
        def owned_energy(pos):
            local = self._exchange(pos, block.send)
            return self._energy(local, block.neighbors, params)
        energy, gradient = jax.value_and_grad(owned_energy)(block.pos)
        return energy[None], -gradient

    def _energy(self, local_pos, neighbors, params):
        box = self._kernel_box(local_pos.dtype)        # jax.grad of this runs the kernels' adjoints
        return sum(t.energy(self._backend, local_pos, box, neighbors, params[t.name]) for t in self.ff.terms)

    def _rebuild(self, block: DomainState) -> DomainState:
        """Migrate atoms to their domains, choose ghosts, rebuild the local neighbor list."""
        box = jnp.asarray(self.box, dtype=block.pos.dtype)
        pos, vel, ids = block.pos - box * jnp.floor(block.pos / box), block.vel, block.ids
        owned_peak, migrants, jumps = jnp.sum(ids >= 0), jnp.asarray(0), jnp.asarray(0)
        for a in self.stages:
            pos, vel, ids, (kept, moving, jumped) = self._migrate(a, pos, vel, ids)
            owned_peak, migrants, jumps = jnp.maximum(owned_peak, kept), jnp.maximum(migrants, moving), jumps + jumped
        local, valid = pos, ids >= 0
        send, ghosts = [], jnp.asarray(0)
        for a in self.stages:
            low, high, n_low, n_high = self._choose_ghosts(a, local, valid)
            send += [low, high]
            ghosts = jnp.maximum(ghosts, jnp.maximum(n_low, n_high))
            received = self._exchange_stage(a, jnp.concatenate([local, valid[:, None].astype(local.dtype)], 1),
                                            low, high, counts=(n_low, n_high))
            local, valid = received[:, :3], received[:, 3] > 0.5
        send = jnp.stack(send) if send else block.send          # one domain along every axis: no ghosts
        neighbors, most = self._build_neighbors(local, valid, ids >= 0)
        peaks = jnp.stack([owned_peak, ghosts, migrants, most, jumps]).astype(jnp.int64)
        return block._replace(pos=pos, vel=vel, ids=ids, reference=pos, send=send, ghost_valid=valid[self.capacity:],
                              neighbors=neighbors, peaks=jnp.maximum(block.peaks, peaks[None]),
                              builds=block.builds + 1)

    def _migrate(self, a, pos, vel, ids):
        """Send the atoms that left the domain along axis ``a`` to the neighbor they entered."""
        name, p, C, S = AXES[a], self.shape[a], self.capacity, self.ghost_capacity
        coord = jax.lax.axis_index(name)
        valid = ids >= 0
        target = jnp.clip(jnp.floor(pos[:, a] / self._width(a)).astype(jnp.int64), 0, p - 1)
        step = (target - coord) % p
        up = valid & (step == 1)
        down = valid & (step == p - 1) & ~up
        jumped = jnp.sum(valid & (step != 0) & ~up & ~down)
        payload = jnp.concatenate([pos, vel], axis=1)
        up_rows, n_up = _pack(up, S)
        down_rows, n_down = _pack(down, S)
        arrived = [_shift(payload[rows], ids[rows], n, name, p, direction)
                   for rows, n, direction in ((up_rows, n_up, +1), (down_rows, n_down, -1))]
        all_payload = jnp.concatenate([payload] + [x for x, _ in arrived])
        all_ids = jnp.concatenate([jnp.where(up | down, -1, ids)] + [i for _, i in arrived])
        rows, kept = _pack(all_ids >= 0, C)
        present = jnp.arange(C) < kept
        payload = jnp.where(present[:, None], all_payload[rows], 0.0)
        ids = jnp.where(present, all_ids[rows], -1)
        return payload[:, :3], payload[:, 3:], ids, (kept, jnp.maximum(n_up, n_down), jumped)

    def _choose_ghosts(self, a, local, valid):
        """Rows within cutoff + skin of the low and of the high face along axis ``a``."""
        coord = jax.lax.axis_index(AXES[a])
        low_face = coord * self._width(a)
        x = local[:, a]
        low, n_low = _pack(valid & (x < low_face + self.radius), self.ghost_capacity)
        high, n_high = _pack(valid & (x >= low_face + self._width(a) - self.radius), self.ghost_capacity)
        return low, high, n_low, n_high

    def _exchange(self, pos, send):
        """Owned positions followed by the ghosts' current positions, along the recorded plan."""
        for s, a in enumerate(self.stages):
            pos = self._exchange_stage(a, pos, send[2 * s], send[2 * s + 1])
        return pos

    def _exchange_stage(self, a, local, low_rows, high_rows, counts=None):
        """Append the rows the high neighbor sent down and the low neighbor sent up.

        Rows crossing the periodic boundary are shifted by the box edge along ``a`` so that
        ghosts sit next to the domain that receives them. With ``counts``, the rows past
        each count are sent as zeros (a validity column then reads 0 there).
        """
        name, p = AXES[a], self.shape[a]
        coord = jax.lax.axis_index(name)
        to_low, to_high = local[low_rows], local[high_rows]
        if counts is not None:
            slot = jnp.arange(low_rows.shape[0])[:, None]
            to_low, to_high = jnp.where(slot < counts[0], to_low, 0.0), jnp.where(slot < counts[1], to_high, 0.0)
        edge = jnp.zeros(local.shape[1], local.dtype).at[a].set(self.box[a])
        to_low = to_low + jnp.where(coord == 0, 1.0, 0.0) * edge
        to_high = to_high - jnp.where(coord == p - 1, 1.0, 0.0) * edge
        from_high = jax.lax.ppermute(to_low, name, [(i, (i - 1) % p) for i in range(p)])
        from_low = jax.lax.ppermute(to_high, name, [(i, (i + 1) % p) for i in range(p)])
        return jnp.concatenate([local, from_low, from_high])

    def _build_neighbors(self, local, valid, owned):
        """Neighbor rows of the owned atoms among all local atoms, from a local cell list."""
        backend = self._backend
        local = jax.lax.stop_gradient(local)          # the list is piecewise constant in positions
        frame = self._local_frame()
        cells = np.asarray([c for _, c in frame], dtype=np.int64)
        n_cells = int(np.prod(cells))
        index = []
        for a, (extent, n) in enumerate(frame):
            if self.shape[a] > 1:
                origin = jax.lax.axis_index(AXES[a]) * self._width(a) - self.radius
                u = jnp.clip((local[:, a] - origin) / extent, 0.0, 1.0)
            else:
                u = local[:, a] / extent - jnp.floor(local[:, a] / extent)
            index.append(jnp.clip(jnp.floor(u * n).astype(jnp.int64), 0, n - 1))
        cell = (index[0] * cells[1] + index[1]) * cells[2] + index[2]
        cell = jnp.where(valid, cell, n_cells)        # empty slots sort past every real cell: nobody sees them
        order = jnp.argsort(cell).astype(jnp.int64)
        start, count = backend.cell_ranges(cell[order], n_cells)
        neighbors, counts = backend.cell_neighbors(local, self._kernel_box(local.dtype), jnp.asarray(cells), cell,
                                                   order, start, count, self.radius, self.neighbor_capacity,
                                                   self.max_per_cell)
        rows = jnp.concatenate([owned, jnp.zeros(local.shape[0] - owned.shape[0], bool)])
        return jnp.where(rows[:, None], neighbors, -1), jnp.max(jnp.where(rows, counts, 0))


def _pack(mask, size):
    """Indices of the set entries of ``mask`` in the first ``size`` slots, and how many there are."""
    rows = jnp.nonzero(mask, size=size, fill_value=0)[0].astype(jnp.int64)
    return rows, jnp.sum(mask)


def _shift(payload, ids, n, name, p, direction):
    """Send ``n`` migrant rows one domain ``direction`` (+1 up, -1 down) along mesh axis ``name``."""
    present = jnp.arange(ids.shape[0]) < n
    ids = jnp.where(present, ids, -1)
    perm = [(i, (i + direction) % p) for i in range(p)]
    return jax.lax.ppermute(payload, name, perm), jax.lax.ppermute(ids, name, perm)


def _with_margin(expected, margin):
    """A capacity for ``expected`` entries: ``margin`` times it, six standard deviations, rounded up to 8."""
    return int(8 * math.ceil((margin * expected + 6.0 * math.sqrt(expected) + 16) / 8))
