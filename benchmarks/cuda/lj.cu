// Hand-written CUDA ceiling for the chemistry benchmark: truncated-and-shifted Lennard-Jones
// energy and forces over a FULL neighbor list (each pair in both atoms' rows, rows compacted and
// padded with -1), float64. One thread per atom (lj_energy_forces), or LANES consecutive threads
// per atom (lj_energy_forces_lanes2/4/8: each takes every LANES-th slot of the row, the partial
// sums meet in the atom's first lane through __shfl_down_sync), gathers its neighbors, sums its
// own energy and force in registers and writes them once: no atomics. The same inputs as
// adoffload's lj_energy_forces kernel (pos (N,3), box (3), neighbors (N,cap) int64); built with
// `nvcc -O3 -arch=sm_90 -cubin`. The total energy (a sum over e) is not part of this kernel.
#include <cstdint>

template <int LANES>
__device__ void lj_atom(const double* __restrict__ pos, const double* __restrict__ box,
                        const int64_t* __restrict__ neighbors, double sigma, double epsilon, double cutoff,
                        double* __restrict__ e, double* __restrict__ forces, int64_t n, int64_t capacity) {
  const int64_t t = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  const int64_t i = t / LANES;
  const int first = (int)(t % LANES);
  double acc = 0.0, fx = 0.0, fy = 0.0, fz = 0.0;
  if (i < n) {
    const double bx = box[0], by = box[1], bz = box[2];
    const double xi = pos[3 * i], yi = pos[3 * i + 1], zi = pos[3 * i + 2];
    const double rc2 = cutoff * cutoff, s2 = sigma * sigma;
    const double sc6 = (s2 / rc2) * (s2 / rc2) * (s2 / rc2);
    const double shift = 4.0 * epsilon * (sc6 * sc6 - sc6);
    const int64_t* row = neighbors + i * capacity;
    for (int64_t k = first; k < capacity; k += LANES) {
      const int64_t j = row[k];
      if (j < 0) break;                                 // compacted rows: the rest is padding
      double dx = pos[3 * j] - xi, dy = pos[3 * j + 1] - yi, dz = pos[3 * j + 2] - zi;
      dx -= bx * floor(dx / bx + 0.5);
      dy -= by * floor(dy / by + 0.5);
      dz -= bz * floor(dz / bz + 0.5);
      const double r2 = dx * dx + dy * dy + dz * dz;
      if (r2 < rc2) {
        const double inv_r2 = 1.0 / r2, u = s2 * inv_r2, s6 = u * u * u;
        acc += 0.5 * (4.0 * epsilon * (s6 * s6 - s6) - shift);
        const double scale = 24.0 * epsilon * (2.0 * s6 * s6 - s6) * inv_r2;   // F_i = -sum scale * d
        fx -= scale * dx; fy -= scale * dy; fz -= scale * dz;
      }
    }
  }
  if (LANES > 1) {                                      // every lane of the warp gets here
#pragma unroll
    for (int h = LANES / 2; h > 0; h /= 2) {
      acc += __shfl_down_sync(0xffffffffu, acc, h);
      fx += __shfl_down_sync(0xffffffffu, fx, h);
      fy += __shfl_down_sync(0xffffffffu, fy, h);
      fz += __shfl_down_sync(0xffffffffu, fz, h);
    }
  }
  if (first == 0 && i < n) {
    e[i] = acc;
    forces[3 * i] = fx; forces[3 * i + 1] = fy; forces[3 * i + 2] = fz;
  }
}

#define LJ_KERNEL(NAME, LANES)                                                                              \
  extern "C" __global__ void NAME(const double* __restrict__ pos, const double* __restrict__ box,           \
                                  const int64_t* __restrict__ neighbors, double sigma, double epsilon,      \
                                  double cutoff, double* __restrict__ e, double* __restrict__ forces,       \
                                  int64_t n, int64_t capacity) {                                            \
    lj_atom<LANES>(pos, box, neighbors, sigma, epsilon, cutoff, e, forces, n, capacity);                   \
  }

LJ_KERNEL(lj_energy_forces, 1)
LJ_KERNEL(lj_energy_forces_lanes2, 2)
LJ_KERNEL(lj_energy_forces_lanes4, 4)
LJ_KERNEL(lj_energy_forces_lanes8, 8)
