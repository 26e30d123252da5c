"""The force field and the neighbor-list builder written in adoffload's kernel language.

Each kernel is the twin of the function of the same name in ``reference.py`` (same
arguments in the same order, Out arrays last; see that module for the conventions). Energy
kernels write per-atom energies; parameter gradients and many-body forces come from their
adjoint kernels (``ado.vjp``, or ``jax.grad`` through ``ado.jax_kernel``). The pair terms also
have ``*_energy_forces`` kernels: energy and forces in one launch, a gather over the full
neighbor list whose pair force is ``ado.value_and_grad`` of the pair potential (AD of the
helper, never a hand-written derivative) and which writes each atom once, without atomics.

The neighbor list is built without atomics, so it is deterministic: ``cell_index`` bins
atoms into cells, the atoms are sorted by cell (``jnp.argsort``), ``cell_ranges`` finds
each cell's slice of the sorted order by binary search, and ``cell_neighbors`` scans the
27 surrounding cells of each atom into a fixed-capacity row, counting (not dropping
silently) neighbors past the capacity so the caller reports the overflow.
"""
from __future__ import annotations

import functools

import adoffload as ado
from ..errors import ArgumentError


# --- helpers -----------------------------------------------------------------------------

@ado.func
def min_image(d: ado.f64, length: ado.f64) -> ado.f64:
    return d - length * ado.floor(d / length + 0.5)


@ado.func
def distance2(pos: ado.In[ado.f64, 2], box: ado.In[ado.f64], i: ado.i64, j: ado.i64) -> ado.f64:
    """Squared minimum-image distance between atoms i and j."""
    dx = min_image(pos[j, 0] - pos[i, 0], box[0])
    dy = min_image(pos[j, 1] - pos[i, 1], box[1])
    dz = min_image(pos[j, 2] - pos[i, 2], box[2])
    return dx * dx + dy * dy + dz * dz


@ado.func
def lj_pair(r2: ado.f64, sigma: ado.f64, epsilon: ado.f64) -> ado.f64:
    s2 = sigma * sigma / r2
    s6 = s2 * s2 * s2
    return 4.0 * epsilon * (s6 * s6 - s6)


@ado.func
def lj_cluster_energy(x, sigma, epsilon):
    """The Lennard-Jones energy of one cluster, ``x`` its coordinates (x0, y0, z0, x1, ...) as a flat
    array: the function ``adoffload.optimize.minimize`` minimizes for examples/chemistry/lj_clusters.py."""
    e = 0.0
    n = len(x) // 3
    for i in range(n):
        for j in range(i + 1, n):
            dx = x[3 * j] - x[3 * i]
            dy = x[3 * j + 1] - x[3 * i + 1]
            dz = x[3 * j + 2] - x[3 * i + 2]
            e += lj_pair(dx * dx + dy * dy + dz * dz, sigma, epsilon)
    return e


@ado.func
def morse_pair(r: ado.f64, depth: ado.f64, alpha: ado.f64, r0: ado.f64) -> ado.f64:
    x = 1.0 - ado.exp(-alpha * (r - r0))
    return depth * (x * x - 1.0)


@ado.func
def dsf_pair(r: ado.f64, alpha: ado.f64, cutoff: ado.f64) -> ado.f64:
    erfc_c = 1.0 - ado.erf(alpha * cutoff)
    slope = erfc_c / (cutoff * cutoff) + 2.0 * alpha / 1.7724538509055159 * ado.exp(-(alpha * cutoff) * (alpha * cutoff)) / cutoff
    return (1.0 - ado.erf(alpha * r)) / r - erfc_c / cutoff + slope * (r - cutoff)


@ado.func
def wrapped_cell(x: ado.f64, length: ado.f64, cells: ado.i64) -> ado.i64:
    frac = x / length
    frac = frac - ado.floor(frac)
    c = int(ado.floor(frac * cells))
    if c > cells - 1:
        c = cells - 1
    return c


# --- pair energies over a neighbor list ----------------------------------------------------

@ado.kernel
def lj_energy(pos: ado.In[ado.f64, 2], box: ado.In[ado.f64], neighbors: ado.In[ado.i64, 2],
              sigma: ado.f64, epsilon: ado.f64, cutoff: ado.f64, e: ado.Out[ado.f64]):
    i = ado.tid()
    rc2 = cutoff * cutoff
    shift = lj_pair(rc2, sigma, epsilon)
    acc = 0.0
    for k in range(neighbors.shape[1]):
        j = neighbors[i, k]
        if j >= 0:
            r2 = distance2(pos, box, i, j)
            if r2 < rc2:
                acc = acc + 0.5 * (lj_pair(r2, sigma, epsilon) - shift)
    e[i] = acc


@ado.kernel
def morse_energy(pos: ado.In[ado.f64, 2], box: ado.In[ado.f64], neighbors: ado.In[ado.i64, 2],
                 depth: ado.f64, alpha: ado.f64, r0: ado.f64, cutoff: ado.f64, e: ado.Out[ado.f64]):
    i = ado.tid()
    shift = morse_pair(cutoff, depth, alpha, r0)
    acc = 0.0
    for k in range(neighbors.shape[1]):
        j = neighbors[i, k]
        if j >= 0:
            r2 = distance2(pos, box, i, j)
            if r2 < cutoff * cutoff:
                acc = acc + 0.5 * (morse_pair(ado.sqrt(r2), depth, alpha, r0) - shift)
    e[i] = acc


@ado.kernel
def coulomb_energy(pos: ado.In[ado.f64, 2], box: ado.In[ado.f64], neighbors: ado.In[ado.i64, 2],
                   charges: ado.In[ado.f64], alpha: ado.f64, cutoff: ado.f64, coulomb_constant: ado.f64,
                   e: ado.Out[ado.f64]):
    i = ado.tid()
    qi = charges[i]
    acc = 0.0
    for k in range(neighbors.shape[1]):
        j = neighbors[i, k]
        if j >= 0:
            r2 = distance2(pos, box, i, j)
            if r2 < cutoff * cutoff:
                acc = acc + 0.5 * qi * charges[j] * dsf_pair(ado.sqrt(r2), alpha, cutoff)
    self_term = (1.0 - ado.erf(alpha * cutoff)) / (2.0 * cutoff) + alpha / 1.7724538509055159
    e[i] = coulomb_constant * (acc - self_term * qi * qi)


@ado.kernel
def cluster_lj_energy(pos: ado.In[ado.f64, 2], sigma: ado.f64, epsilon: ado.f64, e: ado.Out[ado.f64]):
    i = ado.tid()
    acc = 0.0
    for j in range(pos.shape[0]):
        if j != i:
            dx = pos[j, 0] - pos[i, 0]
            dy = pos[j, 1] - pos[i, 1]
            dz = pos[j, 2] - pos[i, 2]
            acc = acc + 0.5 * lj_pair(dx * dx + dy * dy + dz * dz, sigma, epsilon)
    e[i] = acc


# --- pair energies and forces in one launch ---------------------------------------------
# A gather over a FULL neighbor list (each pair in both atoms' rows, each row compacted: the
# loop stops at the first -1, as the list builders write them): thread i sums its own
# energy and force, the pair force coming from AD of the pair potential (ado.value_and_grad),
# and writes them once. No atomics, no scatter. With E = 1/2 sum_i sum_j V(r_ij) and
# d = x_j - x_i, each of the two entries of a pair gives 1/2 V' dr/dx_i, so F_i = -sum_j V' dr/dx_i.

# --- fused energy + forces: a gather over the full list, `lanes` threads per atom ---------------
#
# Each kernel below is built by a factory for a number of lanes per atom. With one lane a thread
# walks its atom's whole neighbor row (the CPU, and GPU systems with enough atoms to fill the
# device). With G > 1 (a power of two) the G consecutive threads of an atom take every G-th slot of
# its row and sum their partial energy and force through `shuffle_down` (the lanes of an atom are
# in one warp: G divides the warp size): a small system then has G times the threads to hide the
# latency of its gathers, and the row is read in G-wide contiguous pieces. Lane 0 writes.

LANE_BLOCK = 128          # threads per block of the G > 1 kernels (a multiple of every warp size)


def lanes_per_atom(n_atoms: int, platform: str, target_threads: int = 200_000, most: int = 4) -> int:
    """Lanes per atom for a fused kernel: 1 on the host; on a GPU the smallest power of two (at
    most ``most``) giving about ``target_threads`` threads, the thread count from which the H200
    gained nothing from more lanes (benchmarks/results/2026-12-01-h200-session7/probe)."""
    lanes = 1
    if platform != "cpu":
        while lanes < most and n_atoms * lanes < target_threads:
            lanes *= 2
    return lanes


def fused_grid(n_atoms: int, lanes: int) -> int:
    """Threads to launch for ``n_atoms`` atoms at ``lanes`` per atom (whole blocks when lanes > 1)."""
    return n_atoms if lanes == 1 else -(-n_atoms * lanes // LANE_BLOCK) * LANE_BLOCK


def _fused_kernel(fn, name: str, lanes: int):
    if lanes < 1 or lanes & (lanes - 1) or lanes > 32:
        raise ArgumentError(f"lanes per atom must be a power of two from 1 to 32, not {lanes!r}")
    fn.__name__ = fn.__qualname__ = name if lanes == 1 else f"{name}_lanes{lanes}"
    return ado.kernel(fn) if lanes == 1 else ado.kernel(block=(LANE_BLOCK,))(fn)


@functools.cache
def lj_energy_forces_kernel(lanes: int = 1):
    """Truncated-and-shifted LJ energy per atom and forces, ``lanes`` threads per atom."""
    def kernel(pos: ado.In[ado.f64, 2], box: ado.In[ado.f64], neighbors: ado.In[ado.i64, 2],
               sigma: ado.f64, epsilon: ado.f64, cutoff: ado.f64,
               e: ado.Out[ado.f64], forces: ado.Out[ado.f64, 2]):
        t = ado.tid()
        i = t // lanes
        first = t % lanes
        rc2 = cutoff * cutoff
        shift = lj_pair(rc2, sigma, epsilon)
        acc = 0.0
        fx = 0.0
        fy = 0.0
        fz = 0.0
        if i < pos.shape[0]:
            xi = pos[i, 0]
            yi = pos[i, 1]
            zi = pos[i, 2]
            bx = box[0]
            by = box[1]
            bz = box[2]
            for k in range(first, neighbors.shape[1], lanes):
                j = neighbors[i, k]
                if j < 0:
                    break                                # rows are compacted: the rest is padding
                dx = min_image(pos[j, 0] - xi, bx)
                dy = min_image(pos[j, 1] - yi, by)
                dz = min_image(pos[j, 2] - zi, bz)
                r2 = dx * dx + dy * dy + dz * dz
                if r2 < rc2:
                    v, dv_dr2 = ado.value_and_grad(lj_pair)(r2, sigma, epsilon)
                    acc = acc + 0.5 * (v - shift)
                    fx = fx + 2.0 * dv_dr2 * dx          # dr2/dx_i = -2 dx
                    fy = fy + 2.0 * dv_dr2 * dy
                    fz = fz + 2.0 * dv_dr2 * dz
        if lanes > 1:                                    # (decided when the kernel compiles)
            h = lanes // 2
            while h > 0:                                 # the atom's lanes sum into its lane 0
                acc = acc + ado.shuffle_down(acc, h)
                fx = fx + ado.shuffle_down(fx, h)
                fy = fy + ado.shuffle_down(fy, h)
                fz = fz + ado.shuffle_down(fz, h)
                h = h // 2
        if first == 0 and i < pos.shape[0]:
            e[i] = acc
            forces[i, 0] = fx
            forces[i, 1] = fy
            forces[i, 2] = fz
    return _fused_kernel(kernel, "lj_energy_forces", lanes)


@functools.cache
def morse_energy_forces_kernel(lanes: int = 1):
    """Shifted Morse energy per atom and forces, ``lanes`` threads per atom."""
    def kernel(pos: ado.In[ado.f64, 2], box: ado.In[ado.f64], neighbors: ado.In[ado.i64, 2],
               depth: ado.f64, alpha: ado.f64, r0: ado.f64, cutoff: ado.f64,
               e: ado.Out[ado.f64], forces: ado.Out[ado.f64, 2]):
        t = ado.tid()
        i = t // lanes
        first = t % lanes
        shift = morse_pair(cutoff, depth, alpha, r0)
        acc = 0.0
        fx = 0.0
        fy = 0.0
        fz = 0.0
        if i < pos.shape[0]:
            xi = pos[i, 0]
            yi = pos[i, 1]
            zi = pos[i, 2]
            bx = box[0]
            by = box[1]
            bz = box[2]
            for k in range(first, neighbors.shape[1], lanes):
                j = neighbors[i, k]
                if j < 0:
                    break                                # rows are compacted: the rest is padding
                dx = min_image(pos[j, 0] - xi, bx)
                dy = min_image(pos[j, 1] - yi, by)
                dz = min_image(pos[j, 2] - zi, bz)
                r2 = dx * dx + dy * dy + dz * dz
                if r2 < cutoff * cutoff:
                    r = ado.sqrt(r2)
                    v, dv_dr = ado.value_and_grad(morse_pair)(r, depth, alpha, r0)
                    acc = acc + 0.5 * (v - shift)
                    scale = dv_dr / r                    # dr/dx_i = -dx / r
                    fx = fx + scale * dx
                    fy = fy + scale * dy
                    fz = fz + scale * dz
        if lanes > 1:                                    # (decided when the kernel compiles)
            h = lanes // 2
            while h > 0:                                 # the atom's lanes sum into its lane 0
                acc = acc + ado.shuffle_down(acc, h)
                fx = fx + ado.shuffle_down(fx, h)
                fy = fy + ado.shuffle_down(fy, h)
                fz = fz + ado.shuffle_down(fz, h)
                h = h // 2
        if first == 0 and i < pos.shape[0]:
            e[i] = acc
            forces[i, 0] = fx
            forces[i, 1] = fy
            forces[i, 2] = fz
    return _fused_kernel(kernel, "morse_energy_forces", lanes)


@functools.cache
def coulomb_energy_forces_kernel(lanes: int = 1):
    """Damped-shifted-force Coulomb energy per atom and forces, ``lanes`` threads per atom."""
    def kernel(pos: ado.In[ado.f64, 2], box: ado.In[ado.f64], neighbors: ado.In[ado.i64, 2],
               charges: ado.In[ado.f64], alpha: ado.f64, cutoff: ado.f64, coulomb_constant: ado.f64,
               e: ado.Out[ado.f64], forces: ado.Out[ado.f64, 2]):
        t = ado.tid()
        i = t // lanes
        first = t % lanes
        acc = 0.0
        fx = 0.0
        fy = 0.0
        fz = 0.0
        qi = 0.0
        if i < pos.shape[0]:
            qi = charges[i]
            xi = pos[i, 0]
            yi = pos[i, 1]
            zi = pos[i, 2]
            bx = box[0]
            by = box[1]
            bz = box[2]
            for k in range(first, neighbors.shape[1], lanes):
                j = neighbors[i, k]
                if j < 0:
                    break                                # rows are compacted: the rest is padding
                dx = min_image(pos[j, 0] - xi, bx)
                dy = min_image(pos[j, 1] - yi, by)
                dz = min_image(pos[j, 2] - zi, bz)
                r2 = dx * dx + dy * dy + dz * dz
                if r2 < cutoff * cutoff:
                    r = ado.sqrt(r2)
                    v, dv_dr = ado.value_and_grad(dsf_pair)(r, alpha, cutoff)
                    qq = qi * charges[j]
                    acc = acc + 0.5 * qq * v
                    scale = coulomb_constant * qq * dv_dr / r
                    fx = fx + scale * dx
                    fy = fy + scale * dy
                    fz = fz + scale * dz
        if lanes > 1:                                    # (decided when the kernel compiles)
            h = lanes // 2
            while h > 0:                                 # the atom's lanes sum into its lane 0
                acc = acc + ado.shuffle_down(acc, h)
                fx = fx + ado.shuffle_down(fx, h)
                fy = fy + ado.shuffle_down(fy, h)
                fz = fz + ado.shuffle_down(fz, h)
                h = h // 2
        if first == 0 and i < pos.shape[0]:
            self_term = (1.0 - ado.erf(alpha * cutoff)) / (2.0 * cutoff) + alpha / 1.7724538509055159
            e[i] = coulomb_constant * (acc - self_term * qi * qi)
            forces[i, 0] = fx
            forces[i, 1] = fy
            forces[i, 2] = fz
    return _fused_kernel(kernel, "coulomb_energy_forces", lanes)


lj_energy_forces = lj_energy_forces_kernel(1)
morse_energy_forces = morse_energy_forces_kernel(1)
coulomb_energy_forces = coulomb_energy_forces_kernel(1)


# --- bonded energies -----------------------------------------------------------------------

@ado.kernel
def bond_energy(pos: ado.In[ado.f64, 2], box: ado.In[ado.f64], bonds: ado.In[ado.i64, 2],
                k: ado.In[ado.f64], r0: ado.In[ado.f64], e: ado.Out[ado.f64]):
    b = ado.tid()
    i = bonds[b, 0]
    j = bonds[b, 1]
    stretch = ado.sqrt(distance2(pos, box, i, j)) - r0[b]
    e[b] = 0.5 * k[b] * stretch * stretch


@ado.kernel
def angle_energy(pos: ado.In[ado.f64, 2], box: ado.In[ado.f64], angles: ado.In[ado.i64, 2],
                 k: ado.In[ado.f64], theta0: ado.In[ado.f64], e: ado.Out[ado.f64]):
    a = ado.tid()
    i = angles[a, 0]
    c = angles[a, 1]
    j = angles[a, 2]
    ax = min_image(pos[i, 0] - pos[c, 0], box[0])
    ay = min_image(pos[i, 1] - pos[c, 1], box[1])
    az = min_image(pos[i, 2] - pos[c, 2], box[2])
    bx = min_image(pos[j, 0] - pos[c, 0], box[0])
    by = min_image(pos[j, 1] - pos[c, 1], box[1])
    bz = min_image(pos[j, 2] - pos[c, 2], box[2])
    cx = ay * bz - az * by
    cy = az * bx - ax * bz
    cz = ax * by - ay * bx
    s2 = cx * cx + cy * cy + cz * cz
    sine = 0.0                          # a linear angle: sqrt'(0) is infinite (NaN forces); its force is zero
    if s2 > 0.0:
        sine = ado.sqrt(s2)
    theta = ado.atan2(sine, ax * bx + ay * by + az * bz)
    bend = theta - theta0[a]
    e[a] = 0.5 * k[a] * bend * bend


# --- neighbor-list construction ------------------------------------------------------------

@ado.kernel
def cell_index(pos: ado.In[ado.f64, 2], box: ado.In[ado.f64], cells_per_side: ado.In[ado.i64],
               cell: ado.Out[ado.i64]):
    i = ado.tid()
    cx = wrapped_cell(pos[i, 0], box[0], cells_per_side[0])
    cy = wrapped_cell(pos[i, 1], box[1], cells_per_side[1])
    cz = wrapped_cell(pos[i, 2], box[2], cells_per_side[2])
    cell[i] = (cx * cells_per_side[1] + cy) * cells_per_side[2] + cz


@ado.kernel
def cell_ranges(sorted_cells: ado.In[ado.i64], start: ado.Out[ado.i64], count: ado.Out[ado.i64]):
    c = ado.tid()
    n = sorted_cells.shape[0]
    lo = 0
    hi = n
    for step in range(64):              # lower bound of c
        if lo < hi:
            mid = (lo + hi) // 2
            if sorted_cells[mid] < c:
                lo = mid + 1
            else:
                hi = mid
    first = lo
    hi = n
    for step in range(64):              # upper bound of c
        if lo < hi:
            mid = (lo + hi) // 2
            if sorted_cells[mid] <= c:
                lo = mid + 1
            else:
                hi = mid
    start[c] = first
    count[c] = lo - first


@ado.kernel
def cell_neighbors(pos: ado.In[ado.f64, 2], box: ado.In[ado.f64], cells_per_side: ado.In[ado.i64],
                   cell: ado.In[ado.i64], order: ado.In[ado.i64], start: ado.In[ado.i64],
                   count: ado.In[ado.i64], cutoff: ado.f64,
                   neighbors: ado.Out[ado.i64, 2], n_neighbors: ado.Out[ado.i64]):
    i = ado.tid()
    capacity = neighbors.shape[1]
    for k in range(capacity):
        neighbors[i, k] = -1
    nx = cells_per_side[0]
    ny = cells_per_side[1]
    nz = cells_per_side[2]
    c = cell[i]
    cz = c % nz
    cy = (c // nz) % ny
    cx = c // (ny * nz)
    rc2 = cutoff * cutoff
    found = 0
    for ox in range(3):
        for oy in range(3):
            for oz in range(3):
                around = (((cx + ox + nx - 1) % nx) * ny + (cy + oy + ny - 1) % ny) * nz + (cz + oz + nz - 1) % nz
                first = start[around]
                for m in range(count[around]):
                    j = order[first + m]
                    if j != i:
                        dx = min_image(pos[j, 0] - pos[i, 0], box[0])
                        dy = min_image(pos[j, 1] - pos[i, 1], box[1])
                        dz = min_image(pos[j, 2] - pos[i, 2], box[2])
                        if dx * dx + dy * dy + dz * dz < rc2:
                            if found < capacity:
                                neighbors[i, found] = j
                            found = found + 1
    n_neighbors[i] = found


@ado.kernel
def all_pairs_neighbors(pos: ado.In[ado.f64, 2], box: ado.In[ado.f64], cutoff: ado.f64,
                        neighbors: ado.Out[ado.i64, 2], n_neighbors: ado.Out[ado.i64]):
    i = ado.tid()
    capacity = neighbors.shape[1]
    for k in range(capacity):
        neighbors[i, k] = -1
    rc2 = cutoff * cutoff
    found = 0
    for j in range(pos.shape[0]):
        if j != i:
            dx = min_image(pos[j, 0] - pos[i, 0], box[0])
            dy = min_image(pos[j, 1] - pos[i, 1], box[1])
            dz = min_image(pos[j, 2] - pos[i, 2], box[2])
            if dx * dx + dy * dy + dz * dz < rc2:
                if found < capacity:
                    neighbors[i, found] = j
                found = found + 1
    n_neighbors[i] = found
