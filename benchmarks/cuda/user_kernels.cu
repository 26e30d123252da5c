// Hand-written CUDA forces for the user_kernels suite: the same physics as benchmarks/kernels/user.py
// (per-atom energies over a padded FULL neighbor list of int32 indices, -1 = empty slot, cubic
// periodic box, minimum image, float64), with the forces written out by hand instead of derived.
//
// Pair terms (LJ, Morse): LANES consecutive threads per atom (1 or 2), each taking every LANES-th
// slot; the partial sums meet in the atom's first lane through __shfl_down_sync and are written once:
// a gather, no atomics. The three-body angle term scatters to both neighbors, so it adds forces
// with atomicAdd (the force array must be zeroed before each launch). Built with `nvcc -O3 -arch=sm_90 -cubin`; every integer parameter is a 64-bit int.

struct LJ {
  double sigma, epsilon, cutoff;
  // returns V(r2) and writes dV/dr2
  __device__ double operator()(double r2, double* dv) const {
    if (r2 >= cutoff * cutoff) { *dv = 0.0; return 0.0; }
    const double u = sigma * sigma / r2, s6 = u * u * u;
    *dv = 4.0 * epsilon * (-6.0 * s6 * s6 + 3.0 * s6) / r2;
    return 4.0 * epsilon * (s6 * s6 - s6);
  }
};

struct Morse {
  double depth, alpha, r0, cutoff;
  __device__ double operator()(double r2, double* dv) const {
    if (r2 >= cutoff * cutoff) { *dv = 0.0; return 0.0; }
    const double r = sqrt(r2), ex = exp(-alpha * (r - r0)), x = 1.0 - ex;
    *dv = depth * x * alpha * ex / r;
    return depth * (x * x - 1.0);
  }
};

__device__ __forceinline__ double min_image(double d, double box) { return d - box * floor(d / box + 0.5); }

template <int LANES, class Pair>
__device__ void pair_forces(const double* __restrict__ pos, const int* __restrict__ neighbors, double box, Pair pair,
                            double* __restrict__ energy, double* __restrict__ force, long long n, long long slots) {
  const long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  const long long i = t / LANES;
  const int lane = (int)(t % LANES);
  double e = 0.0, fx = 0.0, fy = 0.0, fz = 0.0;
  if (i < n) {
    const double xi = pos[3 * i], yi = pos[3 * i + 1], zi = pos[3 * i + 2];
    const int* row = neighbors + i * slots;
    for (long long k = lane; k < slots; k += LANES) {
      const int j = row[k];
      if (j < 0) continue;
      const double dx = min_image(pos[3 * j] - xi, box), dy = min_image(pos[3 * j + 1] - yi, box),
                   dz = min_image(pos[3 * j + 2] - zi, box);
      double dv;
      e += 0.5 * pair(dx * dx + dy * dy + dz * dz, &dv);
      fx += 2.0 * dv * dx; fy += 2.0 * dv * dy; fz += 2.0 * dv * dz;     // d = pos_j - pos_i
    }
  }
  for (int h = LANES / 2; h > 0; h /= 2) {
    e += __shfl_down_sync(0xffffffffu, e, h);
    fx += __shfl_down_sync(0xffffffffu, fx, h);
    fy += __shfl_down_sync(0xffffffffu, fy, h);
    fz += __shfl_down_sync(0xffffffffu, fz, h);
  }
  if (i < n && lane == 0) {
    energy[i] = e;
    force[3 * i] = fx; force[3 * i + 1] = fy; force[3 * i + 2] = fz;
  }
}

#define PAIR_ENTRY(NAME, ...)                                                                                \
  extern "C" __global__ void NAME(const double* pos, const int* neighbors, double box, __VA_ARGS__,            \
                                  double* energy, double* force, long long n, long long slots)

PAIR_ENTRY(lj_forces, double sigma, double epsilon, double cutoff) {
  pair_forces<1>(pos, neighbors, box, LJ{sigma, epsilon, cutoff}, energy, force, n, slots);
}
PAIR_ENTRY(lj_forces_lanes2, double sigma, double epsilon, double cutoff) {
  pair_forces<2>(pos, neighbors, box, LJ{sigma, epsilon, cutoff}, energy, force, n, slots);
}
PAIR_ENTRY(morse_forces, double depth, double alpha, double r0, double cutoff) {
  pair_forces<1>(pos, neighbors, box, Morse{depth, alpha, r0, cutoff}, energy, force, n, slots);
}
PAIR_ENTRY(morse_forces_lanes2, double depth, double alpha, double r0, double cutoff) {
  pair_forces<2>(pos, neighbors, box, Morse{depth, alpha, r0, cutoff}, energy, force, n, slots);
}

// One thread per center atom i; each pair (j, k) of its neighbors within the cutoff adds
// strength * w_j * w_k * (cos - cos0)^2, w = (1 - r^2/rc^2)^2, and its forces on i, j and k.
extern "C" __global__ void angle_forces(const double* pos, const int* neighbors, double box, double strength,
                                        double cos0, double cutoff, double* energy, double* force, long long n,
                                        long long slots) {
  const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const double rc2 = cutoff * cutoff;
  const double xi = pos[3 * i], yi = pos[3 * i + 1], zi = pos[3 * i + 2];
  const int* row = neighbors + i * slots;
  double e = 0.0, fix = 0.0, fiy = 0.0, fiz = 0.0;
  for (long long a = 0; a < slots; ++a) {
    const int j = row[a];
    if (j < 0) continue;
    const double ax = min_image(pos[3 * j] - xi, box), ay = min_image(pos[3 * j + 1] - yi, box),
                 az = min_image(pos[3 * j + 2] - zi, box);
    const double ra2 = ax * ax + ay * ay + az * az;
    if (ra2 >= rc2) continue;
    const double ua = 1.0 - ra2 / rc2;
    double fjx = 0.0, fjy = 0.0, fjz = 0.0;
    for (long long b = a + 1; b < slots; ++b) {
      const int k = row[b];
      if (k < 0) continue;
      const double bx = min_image(pos[3 * k] - xi, box), by = min_image(pos[3 * k + 1] - yi, box),
                   bz = min_image(pos[3 * k + 2] - zi, box);
      const double rb2 = bx * bx + by * by + bz * bz;
      if (rb2 >= rc2) continue;
      const double ub = 1.0 - rb2 / rc2, inv = 1.0 / sqrt(ra2 * rb2);
      const double c = (ax * bx + ay * by + az * bz) * inv, g = c - cos0;
      e += strength * ua * ua * ub * ub * g * g;
      const double dwa = -4.0 * ua / rc2 * ub * ub * g * g * strength;    // d term / d a = dwa * a + dcc * dc/da
      const double dwb = -4.0 * ub / rc2 * ua * ua * g * g * strength;
      const double dcc = 2.0 * strength * ua * ua * ub * ub * g;
      const double gax = dwa * ax + dcc * (bx * inv - c * ax / ra2), gay = dwa * ay + dcc * (by * inv - c * ay / ra2),
                   gaz = dwa * az + dcc * (bz * inv - c * az / ra2);
      const double gbx = dwb * bx + dcc * (ax * inv - c * bx / rb2), gby = dwb * by + dcc * (ay * inv - c * by / rb2),
                   gbz = dwb * bz + dcc * (az * inv - c * bz / rb2);
      fjx -= gax; fjy -= gay; fjz -= gaz;
      atomicAdd(&force[3 * k], -gbx); atomicAdd(&force[3 * k + 1], -gby); atomicAdd(&force[3 * k + 2], -gbz);
      fix += gax + gbx; fiy += gay + gby; fiz += gaz + gbz;
    }
    if (fjx != 0.0 || fjy != 0.0 || fjz != 0.0) {
      atomicAdd(&force[3 * j], fjx); atomicAdd(&force[3 * j + 1], fjy); atomicAdd(&force[3 * j + 2], fjz);
    }
  }
  energy[i] = e;
  atomicAdd(&force[3 * i], fix); atomicAdd(&force[3 * i + 1], fiy); atomicAdd(&force[3 * i + 2], fiz);
}
