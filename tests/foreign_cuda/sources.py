"""CUDA kernels of our users' kinds, compiled once per test module (conftest-free: a module fixture)."""

KERNELS = r"""
__global__ void saxpy(float a, const float* x, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}

__global__ void daxpy(double a, const double* x, double* y, int n) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x)
    y[i] = a * x[i] + y[i];
}

// A tuned-looking block reduction: squares into shared memory, tree with __syncthreads, one
// partial per block (T: float for the primal check, double for the derivative checks).
#define BLOCK_SUM(NAME, T)                                               \
__global__ void NAME(const T* x, T* out, int n) {                        \
  __shared__ T s[128];                                                   \
  int t = threadIdx.x;                                                   \
  int i = blockIdx.x * blockDim.x + t;                                   \
  s[t] = i < n ? x[i] * x[i] : (T)0;                                     \
  __syncthreads();                                                       \
  for (int h = blockDim.x / 2; h > 0; h >>= 1) {                         \
    if (t < h) s[t] += s[t + h];                                         \
    __syncthreads();                                                     \
  }                                                                      \
  if (t == 0) out[blockIdx.x] = s[0];                                    \
}
BLOCK_SUM(block_sum, float)
BLOCK_SUM(block_sum_d, double)

// The same sum finished with warp shuffles (the classic last-warp unrolling, on a 64-thread block).
__global__ void warp_sum(const double* x, double* out) {
  __shared__ double s[64];
  int t = threadIdx.x;
  s[t] = x[blockIdx.x * 64 + t];
  __syncthreads();
  double v = t < 32 ? s[t] + s[t + 32] : 0.0;
  for (int d = 16; d > 0; d >>= 1) v += __shfl_down_sync(0xffffffffu, v, d);
  if (t == 0) out[blockIdx.x] = v;
}

// 2-D five-point stencil with a nonlinear term; x is CUDA's fastest axis.
__global__ void stencil(const double* u, double* v, int nx, int ny) {
  int i = blockIdx.y * blockDim.y + threadIdx.y;
  int j = blockIdx.x * blockDim.x + threadIdx.x;
  if (i > 0 && i < ny - 1 && j > 0 && j < nx - 1)
    v[i * nx + j] = 0.25 * (u[(i - 1) * nx + j] + u[(i + 1) * nx + j] + u[i * nx + j - 1] + u[i * nx + j + 1])
                    - sin(u[i * nx + j]) * u[i * nx + j];
}

// A data-dependent loop: Newton's iteration for sqrt(a), as many steps as each element needs.
__global__ void newton_sqrt(const double* a, double* r, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  double x = a[i] > 1.0 ? a[i] : 1.0;
  int it = 0;
  while (fabs(x * x - a[i]) > 1e-13 * a[i] && it < 100) { x = 0.5 * (x + a[i] / x); ++it; }
  r[i] = x;
}

// Lennard-Jones forces and energy, all pairs, accumulated with atomicAdd.
__global__ void lj(const double* pos, double* force, double* energy, int n, double eps, double sigma) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  double e = 0.0;
  for (int j = 0; j < n; ++j) {
    if (j == i) continue;
    double dx = pos[3 * i] - pos[3 * j], dy = pos[3 * i + 1] - pos[3 * j + 1], dz = pos[3 * i + 2] - pos[3 * j + 2];
    double r2 = dx * dx + dy * dy + dz * dz;
    double s2 = sigma * sigma / r2;
    double s6 = s2 * s2 * s2;
    e += 2.0 * eps * (s6 * s6 - s6);
    double f = 24.0 * eps * (2.0 * s6 * s6 - s6) / r2;
    atomicAdd(&force[3 * i], f * dx);
    atomicAdd(&force[3 * i + 1], f * dy);
    atomicAdd(&force[3 * i + 2], f * dz);
  }
  atomicAdd(energy, e);
}
"""

TILED_MATMUL = r"""
#define TILE 8
// C = A B with A (n x k), B (k x m), tiles of 8x8 in shared memory, barriers in the tile loop.
__global__ void matmul(const double* A, const double* B, double* C, int n, int k, int m) {
  __shared__ double As[TILE][TILE];
  __shared__ double Bs[TILE][TILE];
  int row = blockIdx.y * TILE + threadIdx.y, col = blockIdx.x * TILE + threadIdx.x;
  double acc = 0.0;
  for (int t = 0; t < (k + TILE - 1) / TILE; ++t) {
    int ac = t * TILE + threadIdx.x, br = t * TILE + threadIdx.y;
    As[threadIdx.y][threadIdx.x] = (row < n && ac < k) ? A[row * k + ac] : 0.0;
    Bs[threadIdx.y][threadIdx.x] = (br < k && col < m) ? B[br * m + col] : 0.0;
    __syncthreads();
    for (int j = 0; j < TILE; ++j) acc += As[threadIdx.y][j] * Bs[j][threadIdx.x];
    __syncthreads();
  }
  if (row < n && col < m) C[row * m + col] = acc;
}
"""

DOUBLE_BUFFERED = r"""
// Jacobi-like smoothing in shared memory, two buffers swapped every step (pointer phis).
__global__ void smooth(const double* x, double* y, int steps) {
  __shared__ double a[64], b[64];
  int t = threadIdx.x;
  a[t] = x[blockIdx.x * 64 + t];
  __syncthreads();
  double* src = a; double* dst = b;
  for (int s = 0; s < steps; ++s) {
    double l = src[(t + 63) % 64], r = src[(t + 1) % 64];
    dst[t] = 0.25 * l + 0.5 * src[t] + 0.25 * r * r;
    __syncthreads();
    double* tmp = src; src = dst; dst = tmp;
  }
  y[blockIdx.x * 64 + t] = src[t];
}
// One of two arrays chosen by a parameter (a pointer select).
__global__ void pick(const double* p, const double* q, double* out, int which, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  const double* s = which ? p : q;
  if (i < n) out[i] = s[i] * s[i];
}
"""

WARP_VOTES = r"""
// Each thread's predicate and the warp's votes on it; lanes 16..31 are outside `masked`'s mask.
__global__ void votes(const float* x, unsigned* ballot, int* any, int* all, int* count, unsigned* masked, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  int p = i < n && x[i] > 0.0f;
  unsigned b = __ballot_sync(0xffffffffu, p);
  int a = __any_sync(0xffffffffu, p), l = __all_sync(0xffffffffu, p);
  unsigned m = __ballot_sync(0x0000ffffu, p);
  if (i < n) { ballot[i] = b; any[i] = a; all[i] = l; count[i] = __popc(b); masked[i] = m; }
}

// Votes steering the arithmetic: warp-uniform branches on data, a lane's rank among the lanes
// whose value is positive (its derivative flows through the branches the votes pick).
__global__ void vote_flow(const double* x, double* y, double c) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  double v = x[i];
  if (__any_sync(0xffffffffu, v > c)) v = v * v;
  unsigned b = __ballot_sync(0xffffffffu, v > 0.5);
  int lane = threadIdx.x & 31;
  int rank = __popc(b & ((1u << lane) - 1u));
  if (__all_sync(0xffffffffu, v < 10.0)) v = v + rank * sin(v);
  else v = v * c;
  y[i] = v;
}

// Warp-aggregated atomics: one atomicAdd per warp reserves room for the warp's kept elements.
__global__ void compact(const double* x, double* out, int* count, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  int keep = i < n && x[i] > 0.0;
  unsigned b = __ballot_sync(0xffffffffu, keep);
  int lane = threadIdx.x & 31, leader = __ffs(b) - 1, base = 0;
  if (lane == leader) base = atomicAdd(count, __popc(b));
  base = __shfl_sync(0xffffffffu, base, leader);
  if (keep) out[base + __popc(b & ((1u << lane) - 1u))] = 2.0 * x[i];
}

// A block sum whose last steps are warp-synchronous, ordered by __syncwarp (reached by every thread).
__global__ void syncwarp_sum(const double* x, double* out) {
  __shared__ double s[64];
  int t = threadIdx.x;
  s[t] = x[blockIdx.x * 64 + t];
  __syncthreads();
  for (int h = 32; h > 0; h >>= 1) {
    double v = t < h ? s[t] + s[t + h] : 0.0;
    __syncwarp();
    if (t < h) s[t] = v * (h == 32 ? s[t + h] : 1.0);
    __syncwarp();
  }
  if (t == 0) out[blockIdx.x] = s[0];
}
"""

STRUCTS = r"""
struct LJ { double eps, sigma; };
struct Atom { double x, y, z; };

// A block's atoms in a shared array of structs; the pair parameters passed as a struct by value.
__global__ void tile_energy(LJ p, const double* pos, double* energy) {
  __shared__ Atom tile[64];
  int t = threadIdx.x, i = blockIdx.x * 64 + t;
  tile[t].x = pos[3 * i]; tile[t].y = pos[3 * i + 1]; tile[t].z = pos[3 * i + 2];
  __syncthreads();
  double e = 0.0;
  for (int j = 0; j < 64; ++j) {
    if (j == t) continue;
    double dx = tile[t].x - tile[j].x, dy = tile[t].y - tile[j].y, dz = tile[t].z - tile[j].z;
    double s2 = p.sigma * p.sigma / (dx * dx + dy * dy + dz * dz), s6 = s2 * s2 * s2;
    e += 2.0 * p.eps * (s6 * s6 - s6);
  }
  energy[i] = e;
}

// float3 tiles (CUDA's vector type) reversed within the block, with a struct of mixed fields.
struct Scale { float a; int shift; float b; };
__global__ void reverse3(Scale s, const float* x, float* y) {
  __shared__ float3 tile[128];
  int t = threadIdx.x, i = blockIdx.x * 128 + t;
  tile[t] = float3{x[3 * i], x[3 * i + 1], x[3 * i + 2]};
  __syncthreads();
  float3 v = tile[(127 - t + s.shift) % 128];
  y[3 * i] = s.a * v.x + s.b; y[3 * i + 1] = s.a * v.y * v.y; y[3 * i + 2] = s.b * v.z;
}
"""

SYNCWARP_TAIL = r"""
// The warp-synchronous end of a block sum: only warp 0 runs the tail, ordered by __syncwarp.
__global__ void tail_sum(const double* x, double* out) {
  __shared__ double s[64];
  int t = threadIdx.x;
  s[t] = x[blockIdx.x * 64 + t];
  __syncthreads();
  if (t < 32) {
    double v = s[t] * s[t + 32];
    for (int h = 16; h > 0; h >>= 1) {
      s[t] = v;
      __syncwarp();
      v += s[t ^ h];
      __syncwarp();
    }
    if (t == 0) out[blockIdx.x] = v;
  }
}
"""

# Faults and bad inputs (issue 30): a local array indexed at run time, null pointers, integer
# divisions by a parameter, and an index computed in 32-bit int arithmetic
FAULTS = r"""
__global__ void local_window(const double* x, double* y, int k) {
  double a[4];
  for (int j = 0; j < 4; ++j) a[j] = x[j] * x[j];
  y[threadIdx.x] = a[threadIdx.x + k];
}
__global__ void maybe_null(const float* x, float* y, int n) {
  const float* p = n > 0 ? x : nullptr;
  y[threadIdx.x] = p[threadIdx.x];
}
__global__ void divide(const int* x, int* q, int* r, int d) {
  int i = threadIdx.x;
  q[i] = x[i] / d;
  r[i] = x[i] % d;
}
__global__ void divide_long(const long long* x, long long* q, long long d) {
  q[threadIdx.x] = x[threadIdx.x] / d;
}
__global__ void squared_index(const float* x, float* y, int j) {
  y[threadIdx.x] = x[j * j + threadIdx.x];
}
"""
