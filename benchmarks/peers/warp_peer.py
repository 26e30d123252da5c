"""Warp (``warp-lang``) as a peer on the host CPU: the user kernels written in Warp, differentiated
by ``wp.Tape``, and a tiny saxpy launch. Importing this module imports Warp; ``available()`` says
whether that works here. The kernels accumulate with ``energy[i] += ...`` (an atomic add Warp knows
how to differentiate), as Warp's own examples do."""
from __future__ import annotations

import numpy as np
import warp as wp

wp.config.quiet = True
F64 = wp.float64


@wp.func
def min_image(d: F64, box: F64):
    return d - box * wp.floor(d / box + F64(0.5))


@wp.kernel
def lj_energy(pos: wp.array2d(dtype=F64), neighbors: wp.array2d(dtype=wp.int32), box: F64, sigma: F64,
              epsilon: F64, cutoff: F64, energy: wp.array(dtype=F64)):
    i = wp.tid()
    for k in range(neighbors.shape[1]):
        j = neighbors[i, k]
        if j >= 0:
            dx = min_image(pos[j, 0] - pos[i, 0], box)
            dy = min_image(pos[j, 1] - pos[i, 1], box)
            dz = min_image(pos[j, 2] - pos[i, 2], box)
            r2 = dx * dx + dy * dy + dz * dz
            if r2 < cutoff * cutoff:
                s2 = sigma * sigma / r2
                s6 = s2 * s2 * s2
                energy[i] += F64(2.0) * epsilon * (s6 * s6 - s6)


@wp.kernel
def morse_energy(pos: wp.array2d(dtype=F64), neighbors: wp.array2d(dtype=wp.int32), box: F64, depth: F64,
                 alpha: F64, r0: F64, cutoff: F64, energy: wp.array(dtype=F64)):
    i = wp.tid()
    for k in range(neighbors.shape[1]):
        j = neighbors[i, k]
        if j >= 0:
            dx = min_image(pos[j, 0] - pos[i, 0], box)
            dy = min_image(pos[j, 1] - pos[i, 1], box)
            dz = min_image(pos[j, 2] - pos[i, 2], box)
            r2 = dx * dx + dy * dy + dz * dz
            if r2 < cutoff * cutoff:
                x = F64(1.0) - wp.exp(-alpha * (wp.sqrt(r2) - r0))
                energy[i] += F64(0.5) * depth * (x * x - F64(1.0))


@wp.kernel
def angle_energy(pos: wp.array2d(dtype=F64), neighbors: wp.array2d(dtype=wp.int32), box: F64, strength: F64,
                 cos0: F64, cutoff: F64, energy: wp.array(dtype=F64)):
    i = wp.tid()
    rc2 = cutoff * cutoff
    for a in range(neighbors.shape[1]):
        j = neighbors[i, a]
        if j >= 0:
            ax = min_image(pos[j, 0] - pos[i, 0], box)
            ay = min_image(pos[j, 1] - pos[i, 1], box)
            az = min_image(pos[j, 2] - pos[i, 2], box)
            ra2 = ax * ax + ay * ay + az * az
            if ra2 < rc2:
                wa = (F64(1.0) - ra2 / rc2) * (F64(1.0) - ra2 / rc2)
                for b in range(a + 1, neighbors.shape[1]):
                    k = neighbors[i, b]
                    if k >= 0:
                        bx = min_image(pos[k, 0] - pos[i, 0], box)
                        by = min_image(pos[k, 1] - pos[i, 1], box)
                        bz = min_image(pos[k, 2] - pos[i, 2], box)
                        rb2 = bx * bx + by * by + bz * bz
                        if rb2 < rc2:
                            wb = (F64(1.0) - rb2 / rc2) * (F64(1.0) - rb2 / rc2)
                            c = (ax * bx + ay * by + az * bz) / wp.sqrt(ra2 * rb2)
                            energy[i] += strength * wa * wb * (c - cos0) * (c - cos0)


@wp.kernel
def saxpy(a: wp.float32, x: wp.array(dtype=wp.float32), y: wp.array(dtype=wp.float32)):
    i = wp.tid()
    y[i] = a * x[i] + y[i]


KERNELS = {"lj": lj_energy, "morse": morse_energy, "angle": angle_energy}


class TapeGradient:
    """Energy and its gradient in the positions: the forward launch recorded on a ``wp.Tape``, then
    ``tape.backward`` with a seed of ones on the per-atom energies (energies and gradient zeroed first)."""

    def __init__(self, name: str, pos: np.ndarray, neighbors: np.ndarray, box: float, params: dict):
        self.kernel = KERNELS[name]
        self.n = len(pos)
        self.pos = wp.array(pos, dtype=F64, device="cpu", requires_grad=True)
        self.neighbors = wp.array(neighbors, dtype=wp.int32, device="cpu")
        self.energy = wp.zeros(self.n, dtype=F64, device="cpu", requires_grad=True)
        self.seed = wp.ones(self.n, dtype=F64, device="cpu")
        self.scalars = [F64(box)] + [F64(v) for v in params.values()]

    def __call__(self) -> None:
        self.energy.zero_()
        self.pos.grad.zero_()
        tape = wp.Tape()
        with tape:
            wp.launch(self.kernel, dim=self.n, inputs=[self.pos, self.neighbors, *self.scalars, self.energy],
                      device="cpu")
        tape.backward(grads={self.energy: self.seed})

    def result(self) -> tuple[float, np.ndarray]:
        """(total energy, gradient in the positions) of the last call."""
        return float(self.energy.numpy().sum()), self.pos.grad.numpy().copy()


def tiny_saxpy(n: int):
    """(launch, adjoint launch) of a Warp saxpy over ``n`` float32 elements on the CPU."""
    x = wp.array(np.arange(n, dtype=np.float32), dtype=wp.float32, device="cpu", requires_grad=True)
    y = wp.zeros(n, dtype=wp.float32, device="cpu", requires_grad=True)
    a = wp.float32(2.0)
    adj_x, adj_y = wp.zeros_like(x), wp.ones_like(y)

    def launch():
        wp.launch(saxpy, dim=n, inputs=[a, x, y], device="cpu")

    def adjoint():
        wp.launch(saxpy, dim=n, inputs=[a, x, y], adj_inputs=[wp.float32(0.0), adj_x, adj_y], device="cpu",
                  adjoint=True)
    return launch, adjoint
