"""Two small kernels for the README and the command line.

    python -m adoffload compile examples/kernels.py:saxpy --emit ptx
    python -m adoffload compile examples/kernels.py:lj_energy --emit ir --mode vjp --wrt pos

Run as a script, it launches both on the host and checks the Lennard-Jones forces from the
adjoint kernel against finite differences of the energy.
"""
import numpy as np

import adoffload as ado


@ado.kernel
def saxpy(a: ado.f32, x: ado.In[ado.f32], y: ado.In[ado.f32], out: ado.Out[ado.f32]):
    """out = a * x + y, one element per thread."""
    i = ado.tid()
    out[i] = a * x[i] + y[i]


@ado.kernel
def lj_energy(pos: ado.In[ado.f64, 2], sigma: ado.f64, epsilon: ado.f64, e: ado.Out[ado.f64]):
    """Per-atom Lennard-Jones energy: half of atom i's pair energies with every other atom."""
    i = ado.tid()
    acc = 0.0
    for j in range(pos.shape[0]):
        if j != i:
            dx = pos[j, 0] - pos[i, 0]
            dy = pos[j, 1] - pos[i, 1]
            dz = pos[j, 2] - pos[i, 2]
            s2 = sigma * sigma / (dx * dx + dy * dy + dz * dz)
            s6 = s2 * s2 * s2
            acc = acc + 2.0 * epsilon * (s6 * s6 - s6)
    e[i] = acc


def energy(pos, sigma=1.0, epsilon=1.0):
    e = np.zeros(len(pos))
    lj_energy(pos, sigma, epsilon, e, grid=len(pos))
    return e.sum()


def forces(pos, sigma=1.0, epsilon=1.0):
    """-dE/dpos from the adjoint kernel, seeded with ones (E is the sum of per-atom energies)."""
    d_pos = np.zeros_like(pos)
    ado.vjp(lj_energy, ["pos"])(pos, sigma, epsilon, np.zeros(len(pos)), d_pos, np.ones(len(pos)),
                                grid=len(pos))
    return -d_pos


if __name__ == "__main__":
    x = np.linspace(0.0, 1.0, 8, dtype=np.float32)
    out = np.zeros_like(x)
    saxpy(2.0, x, np.ones_like(x), out, grid=x.size)
    print("saxpy:", out)

    rng = np.random.default_rng(0)
    grid = np.stack(np.meshgrid(*(np.arange(3.0),) * 3, indexing="ij"), -1).reshape(-1, 3)
    pos = 1.12 * grid + rng.uniform(-0.05, 0.05, grid.shape)
    f = forces(pos)
    h, k = 1e-6, (4, 1)
    up, down = pos.copy(), pos.copy()
    up[k] += h
    down[k] -= h
    print(f"E = {energy(pos):.6f}; force on atom 4 along y: adjoint {f[k]:.6f}, "
          f"finite differences {-(energy(up) - energy(down)) / (2 * h):.6f}")
