"""CUDA sources written in the style of others' code (CUDA samples, textbooks, scientific codes) for
the soundness hunt of test_cuda_hunt.py: every kernel there must give the right derivative or a
clear refusal. Kept apart from the tests so that the CUDA text reads as a .cu file would."""

HUNT = r"""
#define FULL 0xffffffffu

// ---------------------------------------------------------------- elementwise and grid-stride
extern "C" __global__ void scale_shift_ldg(const float* __restrict__ x, float* __restrict__ y,
                                           float a, float b, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * __ldg(&x[i]) + b;
}

extern "C" __global__ void axpby_grid_stride(double a, const double* __restrict__ x, double b,
                                             double* __restrict__ y, int n) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x)
    y[i] = a * x[i] + b * y[i];
}

__device__ __forceinline__ float gelu_tanh(float v) {
  const float k0 = 0.7978845608f, k1 = 0.044715f;
  return 0.5f * v * (1.0f + tanhf(k0 * fmaf(k1 * v, v * v, v)));
}

extern "C" __global__ void activations_f32(const float* __restrict__ x, float* gelu, float* silu,
                                           float* soft, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float v = __ldg(x + i);
  gelu[i] = gelu_tanh(v);
  silu[i] = __fdividef(v, 1.0f + __expf(-v));
  soft[i] = log1pf(expf(v)) + rsqrtf(1.0f + v * v) + erff(0.5f * v) + powf(1.5f + v * v, 0.75f);
}

extern "C" __global__ void math_f64(const double* __restrict__ x, double* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  double v = x[i], s, c;
  sincos(v, &s, &c);
  double r = sqrt(1.0 + v * v);
  out[4 * i + 0] = fma(s, c, exp(-0.5 * v * v));
  out[4 * i + 1] = pow(r, 1.5) + tanh(v) * erf(v);
  out[4 * i + 2] = log1p(v * v) / r + atan2(s, 2.0 + c);
  out[4 * i + 3] = cbrt(2.0 + s) + hypot(v, c);
}

// ---------------------------------------------------------------- reductions
template <int BLOCK>
__device__ void tree_sum_squares(const float* x, float* partial, int n) {
  __shared__ float s[BLOCK];
  int t = threadIdx.x;
  int i = blockIdx.x * BLOCK + t;
  float v = i < n ? x[i] : 0.0f;
  s[t] = v * v;
  __syncthreads();
  for (int h = BLOCK / 2; h > 0; h /= 2) {
    if (t < h) s[t] += s[t + h];
    __syncthreads();
  }
  if (t == 0) partial[blockIdx.x] = s[0];
}
extern "C" __global__ void sum_squares_64(const float* x, float* partial, int n) { tree_sum_squares<64>(x, partial, n); }
extern "C" __global__ void sum_squares_128(const float* x, float* partial, int n) { tree_sum_squares<128>(x, partial, n); }

__device__ __forceinline__ double warp_reduce_sum(double v) {
  for (int offset = warpSize / 2; offset > 0; offset /= 2) v += __shfl_down_sync(FULL, v, offset);
  return v;
}

// Shared tree down to one warp, then shuffles; one atomicAdd per block into a scalar.
extern "C" __global__ void dot_shfl_atomic(const double* a, const double* b, double* result, int n) {
  __shared__ double cache[128];
  int t = threadIdx.x;
  double acc = 0.0;
  for (int i = blockIdx.x * blockDim.x + t; i < n; i += blockDim.x * gridDim.x) acc += a[i] * b[i];
  cache[t] = acc;
  __syncthreads();
  for (int s = blockDim.x / 2; s >= 32; s >>= 1) {
    if (t < s) cache[t] += cache[t + s];
    __syncthreads();
  }
  if (t < 32) {
    double v = warp_reduce_sum(cache[t]);
    if (t == 0) atomicAdd(result, v);
  }
}

// Per-warp sums with shuffles, warp partials through shared memory, the first warp finishes.
extern "C" __global__ void norm2_two_level(const float* __restrict__ x, float* out, int n) {
  __shared__ float warp_part[32];
  int lane = threadIdx.x % warpSize, warp = threadIdx.x / warpSize;
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  float v = i < n ? x[i] * x[i] : 0.0f;
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(FULL, v, o);
  if (lane == 0) warp_part[warp] = v;
  __syncthreads();
  if (warp == 0) {
    v = lane < blockDim.x / warpSize ? warp_part[lane] : 0.0f;
    for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(FULL, v, o);
    if (lane == 0) atomicAdd(out, v);
  }
}

// Warp-synchronous tail with __syncwarp between the steps (the post-Volta form of the classic).
extern "C" __global__ void sum_syncwarp_tail(const double* x, double* partial) {
  __shared__ double s[64];
  int t = threadIdx.x;
  s[t] = x[blockIdx.x * 64 + t];
  __syncthreads();
  if (t < 32) {
    double v = s[t] + s[t + 32];
    s[t] = v; __syncwarp();
    for (int o = 16; o > 0; o >>= 1) {
      v += s[t + o]; __syncwarp();
      s[t] = v; __syncwarp();
    }
    if (t == 0) partial[blockIdx.x] = v;
  }
}

// The pre-Volta warp-synchronous tail: volatile, no barrier (a race on today's GPUs).
extern "C" __global__ void sum_volatile_tail(const float* x, float* partial) {
  __shared__ float s[64];
  int t = threadIdx.x;
  s[t] = x[blockIdx.x * 64 + t];
  __syncthreads();
  if (t < 32) {
    volatile float* vs = s;
    vs[t] += vs[t + 32]; vs[t] += vs[t + 16]; vs[t] += vs[t + 8];
    vs[t] += vs[t + 4]; vs[t] += vs[t + 2]; vs[t] += vs[t + 1];
  }
  if (t == 0) partial[blockIdx.x] = s[0];
}

// Butterfly all-reduce: every lane gets its warp's sum and normalizes its own element.
extern "C" __global__ void warp_normalize(const double* x, double* y) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  double v = x[i];
  double total = v * v;
  for (int m = 16; m >= 1; m /= 2) total += __shfl_xor_sync(FULL, total, m);
  y[i] = v * rsqrt(total);
}

// ---------------------------------------------------------------- stencils
#define RADIUS 3
#define BLOCK1D 64
extern "C" __global__ void stencil1d(const double* in, const double* w, double* out, int n) {
  __shared__ double tile[BLOCK1D + 2 * RADIUS];
  int g = blockIdx.x * blockDim.x + threadIdx.x;
  int l = threadIdx.x + RADIUS;
  tile[l] = g < n ? in[g] : 0.0;
  if (threadIdx.x < RADIUS) {
    tile[l - RADIUS] = g >= RADIUS ? in[g - RADIUS] : 0.0;
    tile[l + BLOCK1D] = g + BLOCK1D < n ? in[g + BLOCK1D] : 0.0;
  }
  __syncthreads();
  if (g >= n) return;
  double r = 0.0;
  #pragma unroll
  for (int k = -RADIUS; k <= RADIUS; ++k) r += w[k + RADIUS] * tile[l + k];
  out[g] = r * r;
}

#define TX 16
#define TY 8
extern "C" __global__ void heat2d(const float* __restrict__ u, float* __restrict__ v, float dt, int nx, int ny) {
  __shared__ float tile[TY + 2][TX + 2];
  int x = blockIdx.x * TX + threadIdx.x, y = blockIdx.y * TY + threadIdx.y;
  int lx = threadIdx.x + 1, ly = threadIdx.y + 1;
  bool inside = x < nx && y < ny;
  tile[ly][lx] = inside ? u[y * nx + x] : 0.0f;
  if (threadIdx.x == 0) tile[ly][0] = (x > 0 && y < ny) ? u[y * nx + x - 1] : 0.0f;
  if (threadIdx.x == TX - 1) tile[ly][TX + 1] = (x + 1 < nx && y < ny) ? u[y * nx + x + 1] : 0.0f;
  if (threadIdx.y == 0) tile[0][lx] = (y > 0 && x < nx) ? u[(y - 1) * nx + x] : 0.0f;
  if (threadIdx.y == TY - 1) tile[TY + 1][lx] = (y + 1 < ny && x < nx) ? u[(y + 1) * nx + x] : 0.0f;
  __syncthreads();
  if (!inside) return;
  float c = tile[ly][lx];
  float lap = tile[ly][lx - 1] + tile[ly][lx + 1] + tile[ly - 1][lx] + tile[ly + 1][lx] - 4.0f * c;
  v[y * nx + x] = c + dt * (lap - c * c * c);
}

// The same tile with the bottom halo written into row 1, which thread row 0 writes too: a race.
extern "C" __global__ void heat2d_bad_halo(const float* __restrict__ u, float* __restrict__ v, float dt, int nx,
                                           int ny) {
  __shared__ float tile[TY + 2][TX + 2];
  int x = blockIdx.x * TX + threadIdx.x, y = blockIdx.y * TY + threadIdx.y;
  int lx = threadIdx.x + 1, ly = threadIdx.y + 1;
  tile[ly][lx] = (x < nx && y < ny) ? u[y * nx + x] : 0.0f;
  if (threadIdx.y == 0) tile[0][lx] = (y > 0 && x < nx) ? u[(y - 1) * nx + x] : 0.0f;
  if (threadIdx.y == TY - 1) tile[1][lx] = (y + 1 < ny && x < nx) ? u[(y + 1) * nx + x] : 0.0f;
  __syncthreads();
  if (x < nx && y < ny) v[y * nx + x] = tile[ly - 1][lx] + tile[ly + 1][lx] - 2.0f * tile[ly][lx] + dt;
}

// ---------------------------------------------------------------- dense linear algebra
#define TILE 16
extern "C" __global__ void matmul_tiled(const double* A, const double* B, double* C, int M, int N, int K) {
  __shared__ double As[TILE][TILE];
  __shared__ double Bs[TILE][TILE];
  int row = blockIdx.y * TILE + threadIdx.y, col = blockIdx.x * TILE + threadIdx.x;
  double acc = 0.0;
  for (int t = 0; t < (K + TILE - 1) / TILE; ++t) {
    int ka = t * TILE + threadIdx.x, kb = t * TILE + threadIdx.y;
    As[threadIdx.y][threadIdx.x] = (row < M && ka < K) ? A[row * K + ka] : 0.0;
    Bs[threadIdx.y][threadIdx.x] = (kb < K && col < N) ? B[kb * N + col] : 0.0;
    __syncthreads();
    for (int k = 0; k < TILE; ++k) acc += As[threadIdx.y][k] * Bs[k][threadIdx.x];
    __syncthreads();
  }
  if (row < M && col < N) C[row * N + col] = acc;
}

#define TDIM 32
#define ROWS 8
extern "C" __global__ void transpose_scaled(float* out, const float* in, float alpha, int width, int height) {
  __shared__ float tile[TDIM][TDIM + 1];
  int x = blockIdx.x * TDIM + threadIdx.x, y = blockIdx.y * TDIM + threadIdx.y;
  for (int j = 0; j < TDIM; j += ROWS)
    if (x < width && y + j < height) tile[threadIdx.y + j][threadIdx.x] = in[(y + j) * width + x];
  __syncthreads();
  x = blockIdx.y * TDIM + threadIdx.x;
  y = blockIdx.x * TDIM + threadIdx.y;
  for (int j = 0; j < TDIM; j += ROWS)
    if (x < height && y + j < width) out[(y + j) * height + x] = alpha * tile[threadIdx.x][threadIdx.y + j];
}

// CSR sparse matrix-vector product, one row per thread.
extern "C" __global__ void spmv_csr(const int* rowptr, const int* cols, const double* vals, const double* x,
                                    double* y, int rows) {
  int r = blockIdx.x * blockDim.x + threadIdx.x;
  if (r < rows) {
    double sum = 0.0;
    for (int p = rowptr[r]; p < rowptr[r + 1]; ++p) sum += vals[p] * x[cols[p]];
    y[r] = sum;
  }
}

// ---------------------------------------------------------------- integer atomics, then floats
#define NBINS 16
extern "C" __global__ void histogram_weights(const float* x, float* y, int* counts, float lo, float width, int n) {
  __shared__ int bins[NBINS];
  int t = threadIdx.x, i = blockIdx.x * blockDim.x + t;
  if (t < NBINS) bins[t] = 0;
  __syncthreads();
  int b = -1;
  if (i < n) {
    b = (int)((x[i] - lo) / width);
    b = min(max(b, 0), NBINS - 1);
    atomicAdd(&bins[b], 1);
  }
  __syncthreads();
  if (t < NBINS) atomicAdd(&counts[t], bins[t]);
  if (i < n) y[i] = x[i] * x[i] / (float)bins[b];
}

// Scatter-add of weighted values (a sparse transpose product), float atomics into global memory.
extern "C" __global__ void scatter_add(const int* index, const float* w, const float* x, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) atomicAdd(&y[index[i]], w[i] * sinf(x[i]));
}

// ---------------------------------------------------------------- rows: softmax, layer norm, log-sum-exp
#define RB 64
extern "C" __global__ void softmax_rows(const float* x, float* y, int cols) {
  __shared__ float red[RB];
  const float* xr = x + blockIdx.x * cols;
  float* yr = y + blockIdx.x * cols;
  int t = threadIdx.x;
  float m = -INFINITY;
  for (int j = t; j < cols; j += RB) m = fmaxf(m, xr[j]);
  red[t] = m;
  __syncthreads();
  for (int s = RB / 2; s > 0; s >>= 1) {
    if (t < s) red[t] = fmaxf(red[t], red[t + s]);
    __syncthreads();
  }
  m = red[0];
  __syncthreads();
  float sum = 0.0f;
  for (int j = t; j < cols; j += RB) sum += __expf(xr[j] - m);
  red[t] = sum;
  __syncthreads();
  for (int s = RB / 2; s > 0; s >>= 1) {
    if (t < s) red[t] += red[t + s];
    __syncthreads();
  }
  float inv = 1.0f / red[0];
  for (int j = t; j < cols; j += RB) yr[j] = __expf(xr[j] - m) * inv;
}

template <int BLOCK>
__device__ void layer_norm_row(const double* x, const double* gamma, const double* beta, double* y, int cols,
                               double eps) {
  __shared__ double s_sum[BLOCK], s_sq[BLOCK];
  const double* xr = x + (size_t)blockIdx.x * cols;
  int t = threadIdx.x;
  double a = 0.0, q = 0.0;
  for (int j = t; j < cols; j += BLOCK) { double v = xr[j]; a += v; q += v * v; }
  s_sum[t] = a; s_sq[t] = q;
  __syncthreads();
  for (int s = BLOCK / 2; s > 0; s >>= 1) {
    if (t < s) { s_sum[t] += s_sum[t + s]; s_sq[t] += s_sq[t + s]; }
    __syncthreads();
  }
  double mean = s_sum[0] / cols;
  double var = s_sq[0] / cols - mean * mean;
  double inv = rsqrt(var + eps);
  for (int j = t; j < cols; j += BLOCK) y[(size_t)blockIdx.x * cols + j] = (xr[j] - mean) * inv * gamma[j] + beta[j];
}
extern "C" __global__ void layer_norm_64(const double* x, const double* g, const double* b, double* y, int cols,
                                         double eps) { layer_norm_row<64>(x, g, b, y, cols, eps); }

// One warp per row: log-sum-exp with shuffles only.
extern "C" __global__ void logsumexp_warp(const double* x, double* out, int rows, int cols) {
  int warp = (blockIdx.x * blockDim.x + threadIdx.x) / 32, lane = threadIdx.x & 31;
  if (warp >= rows) return;
  const double* r = x + warp * cols;
  double m = -1e300;
  for (int j = lane; j < cols; j += 32) m = fmax(m, r[j]);
  for (int o = 16; o > 0; o >>= 1) m = fmax(m, __shfl_xor_sync(FULL, m, o));
  double s = 0.0;
  for (int j = lane; j < cols; j += 32) s += exp(r[j] - m);
  for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(FULL, s, o);
  if (lane == 0) out[warp] = m + log(s);
}

// The same without the early return: the last warps redo the last row and do not store.
extern "C" __global__ void logsumexp_warp_clamped(const double* x, double* out, int rows, int cols) {
  int warp = (blockIdx.x * blockDim.x + threadIdx.x) / 32, lane = threadIdx.x & 31;
  const double* r = x + min(warp, rows - 1) * cols;
  double m = -1e300;
  for (int j = lane; j < cols; j += 32) m = fmax(m, r[j]);
  for (int o = 16; o > 0; o >>= 1) m = fmax(m, __shfl_xor_sync(FULL, m, o));
  double s = 0.0;
  for (int j = lane; j < cols; j += 32) s += exp(r[j] - m);
  for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(FULL, s, o);
  if (lane == 0 && warp < rows) out[warp] = m + log(s);
}

// Block-wide inclusive scan (Hillis-Steele, double buffered) then a nonlinear use of the prefix.
extern "C" __global__ void scan_then_map(const double* x, double* y) {
  __shared__ double buf[2][64];
  int t = threadIdx.x, g = blockIdx.x * 64 + t;
  int cur = 0;
  buf[0][t] = x[g];
  __syncthreads();
  for (int off = 1; off < 64; off *= 2) {
    int nxt = 1 - cur;
    buf[nxt][t] = t >= off ? buf[cur][t] + buf[cur][t - off] : buf[cur][t];
    cur = nxt;
    __syncthreads();
  }
  y[g] = sin(buf[cur][t]) * x[g];
}

// ---------------------------------------------------------------- particles
struct Vec3 { double x, y, z; };
__device__ __forceinline__ Vec3 sub(Vec3 a, Vec3 b) { Vec3 r = {a.x - b.x, a.y - b.y, a.z - b.z}; return r; }
__device__ __forceinline__ double dot(Vec3 a, Vec3 b) { return a.x * b.x + a.y * b.y + a.z * b.z; }
__device__ __forceinline__ Vec3 cross(Vec3 a, Vec3 b) {
  Vec3 r = {a.y * b.z - a.z * b.y, a.z * b.x - a.x * b.z, a.x * b.y - a.y * b.x};
  return r;
}
__device__ __forceinline__ Vec3 load3(const double* p, int i) { Vec3 r = {p[3 * i], p[3 * i + 1], p[3 * i + 2]}; return r; }

// Torque-like quantities on user structs passed through device functions.
extern "C" __global__ void torques(const double* r, const double* f, double* tau, double* work, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  Vec3 a = load3(r, i), b = load3(f, i);
  Vec3 c = cross(a, b);
  double s = sqrt(dot(c, c) + 1e-3);
  tau[3 * i] = c.x / s; tau[3 * i + 1] = c.y / s; tau[3 * i + 2] = c.z / s;
  work[i] = dot(sub(a, b), b);
}

// N-body: positions tiled through shared memory (float4: x, y, z, mass), softened gravity.
#define NB 32
extern "C" __global__ void nbody_forces(const float4* pos, float3* acc, float soft2, int n) {
  __shared__ float4 sh[NB];
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  float4 me = pos[i < n ? i : 0];
  float3 a = {0.0f, 0.0f, 0.0f};
  for (int tile = 0; tile < (n + NB - 1) / NB; ++tile) {
    int j = tile * NB + threadIdx.x;
    sh[threadIdx.x] = j < n ? pos[j] : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    __syncthreads();
    #pragma unroll 4
    for (int k = 0; k < NB; ++k) {
      float4 o = sh[k];
      float dx = o.x - me.x, dy = o.y - me.y, dz = o.z - me.z;
      float d2 = dx * dx + dy * dy + dz * dz + soft2;
      float inv = rsqrtf(d2);
      float s = o.w * inv * inv * inv;
      a.x += dx * s; a.y += dy * s; a.z += dz * s;
    }
    __syncthreads();
  }
  if (i < n) acc[i] = a;
}

// Morse pair energy: each thread its i, j > i; one atomicAdd per pair into a scalar.
extern "C" __global__ void morse_energy(const double* pos, double* energy, double D, double alpha, double r0, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  Vec3 pi = load3(pos, i);
  for (int j = i + 1; j < n; ++j) {
    Vec3 d = sub(load3(pos, j), pi);
    double r = sqrt(dot(d, d));
    double e = 1.0 - exp(-alpha * (r - r0));
    atomicAdd(energy, D * e * e);
  }
}

// ---------------------------------------------------------------- misc user patterns
template <int BLOCK, typename T>
__global__ void reverse_block(const T* in, T* out) {
  __shared__ T s[BLOCK];
  int t = threadIdx.x, base = blockIdx.x * BLOCK;
  s[BLOCK - 1 - t] = in[base + t];
  __syncthreads();
  out[base + t] = s[t] * in[base + t];
}
template __global__ void reverse_block<64, double>(const double*, double*);

extern "C" __global__ void reverse_dynamic(const double* in, double* out) {
  extern __shared__ double dyn[];
  int t = threadIdx.x, base = blockIdx.x * blockDim.x;
  dyn[blockDim.x - 1 - t] = in[base + t];
  __syncthreads();
  out[base + t] = dyn[t] * dyn[t];
}

// Explicit RK4 step of a damped oscillator per element (device function in a loop).
__device__ __forceinline__ double2 rhs(double2 s, double w, double c) {
  return make_double2(s.y, -w * w * s.x - c * s.y);
}
extern "C" __global__ void rk4_oscillators(double* x, double* v, const double* w, double c, double dt, int steps,
                                           int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  double2 s = make_double2(x[i], v[i]);
  double wi = w[i];
  for (int k = 0; k < steps; ++k) {
    double2 k1 = rhs(s, wi, c);
    double2 k2 = rhs(make_double2(s.x + 0.5 * dt * k1.x, s.y + 0.5 * dt * k1.y), wi, c);
    double2 k3 = rhs(make_double2(s.x + 0.5 * dt * k2.x, s.y + 0.5 * dt * k2.y), wi, c);
    double2 k4 = rhs(make_double2(s.x + dt * k3.x, s.y + dt * k3.y), wi, c);
    s.x += dt / 6.0 * (k1.x + 2.0 * k2.x + 2.0 * k3.x + k4.x);
    s.y += dt / 6.0 * (k1.y + 2.0 * k2.y + 2.0 * k3.y + k4.y);
  }
  x[i] = s.x; v[i] = s.y;
}

// Mixed precision: float inputs, a double accumulator per block, clamped with fminf/fmaxf.
extern "C" __global__ void clamp_accumulate(const float* x, double* partial, float lo, float hi, int n) {
  __shared__ double s[64];
  int t = threadIdx.x, i = blockIdx.x * 64 + t;
  float v = i < n ? fminf(fmaxf(x[i], lo), hi) : 0.0f;
  s[t] = (double)v * (double)v;
  __syncthreads();
  for (int h = 32; h > 0; h >>= 1) {
    if (t < h) s[t] += s[t + h];
    __syncthreads();
  }
  if (t == 0) partial[blockIdx.x] = s[0];
}

// Early return after the last barrier: fine.
extern "C" __global__ void neighbor_diff_return_after(const double* x, double* y, int n) {
  __shared__ double s[65];
  int t = threadIdx.x, i = blockIdx.x * 64 + t;
  s[t] = i < n ? x[i] : 0.0;
  if (t == 0) s[64] = i + 64 < n ? x[i + 64] : 0.0;
  __syncthreads();
  if (i >= n) return;
  y[i] = s[t + 1] * s[t + 1] - s[t];
}

// Early return before a barrier: the returning threads never reach __syncthreads (undefined in CUDA).
extern "C" __global__ void neighbor_diff_return_before(const double* x, double* y, int n) {
  __shared__ double s[64];
  int t = threadIdx.x, i = blockIdx.x * 64 + t;
  if (i >= n) return;
  s[t] = x[i];
  __syncthreads();
  y[i] = s[(t + 1) % 64] - s[t];
}

// A barrier inside a branch on the data.
extern "C" __global__ void barrier_under_data_branch(const double* x, double* y) {
  __shared__ double s[64];
  int t = threadIdx.x;
  s[t] = x[t];
  if (x[0] > 0.0 && t < 32) { __syncthreads(); s[t] += s[t + 32]; }
  __syncthreads();
  y[t] = s[t];
}

// A race: every thread writes s[0] in one barrier interval.
extern "C" __global__ void racy_accumulate(const double* x, double* y) {
  __shared__ double s[1];
  s[0] = 0.0;
  __syncthreads();
  s[0] += x[threadIdx.x];
  __syncthreads();
  y[threadIdx.x] = s[0];
}

// ---------------------------------------------------------------- more warp and atomic patterns
// atomicAdd's old value used in the math: each thread sees the sum of the threads before it.
extern "C" __global__ void ticket_prefix(const float* x, float* acc, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    float before = atomicAdd(acc, x[i]);
    y[i] = before * x[i];
  }
}

// Weighted histogram in shared memory with float atomics, then one global atomicAdd per bin.
extern "C" __global__ void weighted_histogram(const int* bin, const double* w, double* hist, int n) {
  __shared__ double local[8];
  int t = threadIdx.x, i = blockIdx.x * blockDim.x + t;
  if (t < 8) local[t] = 0.0;
  __syncthreads();
  if (i < n) atomicAdd(&local[bin[i] & 7], w[i] * w[i]);
  __syncthreads();
  if (t < 8) atomicAdd(&hist[t], local[t]);
}

// Segmented reductions with width 16, a broadcast from lane 0, and an inclusive warp scan (shfl_up).
extern "C" __global__ void warp_segments(const double* x, double* half_sums, double* centered, double* scan) {
  int i = blockIdx.x * blockDim.x + threadIdx.x, lane = threadIdx.x & 31;
  double v = x[i];
  double h = v;
  for (int o = 8; o > 0; o >>= 1) h += __shfl_down_sync(FULL, h, o, 16);
  if ((lane & 15) == 0) half_sums[i / 16] = h;
  double first = __shfl_sync(FULL, v, 0);
  centered[i] = v - first * first;
  double s = v;
  for (int o = 1; o < 32; o <<= 1) {
    double up = __shfl_up_sync(FULL, s, o);
    if (lane >= o) s += up;
  }
  scan[i] = s;
}

// Filter coefficients in __constant__ memory (initialized in the source), a per-thread local array.
__constant__ double horner[5] = {0.5, -1.25, 0.75, 0.125, -0.0625};
extern "C" __global__ void poly_window(const double* x, double* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  double win[4];
  for (int k = 0; k < 4; ++k) win[k] = x[min(i + k, n - 1)];
  double acc = 0.0;
  for (int k = 0; k < 4; ++k) {
    double p = horner[4];
    for (int d = 3; d >= 0; --d) p = p * win[k] + horner[d];
    acc += p * win[(k + 1) & 3];
  }
  y[i] = acc;
}

// Piecewise physics: a smooth cutoff switched by data-dependent branches.
extern "C" __global__ void switched_potential(const double* r, double* e, double rc, double rs, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  double x = r[i], v;
  if (x < rs) {
    v = 1.0 / (x * x);
  } else if (x < rc) {
    double s = (x - rs) / (rc - rs);
    v = (1.0 / (x * x)) * (1.0 - s * s * (3.0 - 2.0 * s));
  } else {
    v = 0.0;
  }
  e[i] = v;
}

// A grid-stride loop with a barrier inside: threads leave it after different trip counts.
extern "C" __global__ void grid_stride_barrier(const double* x, double* y, int n) {
  __shared__ double s[64];
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) {
    s[threadIdx.x] = x[i];
    __syncthreads();
    y[i] = s[63 - threadIdx.x];
    __syncthreads();
  }
}

// Recursion in a device function (clang cannot inline it).
__device__ double power_rec(double b, int e) { return e == 0 ? 1.0 : b * power_rec(b, e - 1); }
extern "C" __global__ void recursive_power(const double* x, double* y, const int* e) {
  int i = threadIdx.x;
  y[i] = power_rec(x[i], e[i]);
}

// Values exchanged through global memory between a block's threads across a barrier.
extern "C" __global__ void global_exchange(const double* x, double* tmp, double* y) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  tmp[i] = x[i] * x[i];
  __syncthreads();
  int partner = blockIdx.x * blockDim.x + (threadIdx.x ^ 1);
  y[i] = tmp[partner] * x[i];
}

// ---------------------------------------------------------------- shared state across phases
// A block total through a shared float atomic, then every thread normalizes by it.
extern "C" __global__ void normalize_by_shared_total(const float* x, float* y) {
  __shared__ float total;
  int t = threadIdx.x, i = blockIdx.x * blockDim.x + t;
  if (t == 0) total = 0.0f;
  __syncthreads();
  float v = x[i];
  atomicAdd(&total, v * v);
  __syncthreads();
  y[i] = v * rsqrtf(total);
}

// Jacobi sweeps in shared memory, the two buffers swapped through pointers.
extern "C" __global__ void jacobi_shared(const double* u0, double* u, const double* f, int iters) {
  __shared__ double a[66], b[66];
  int t = threadIdx.x, g = blockIdx.x * 64 + t;
  double* cur = a;
  double* nxt = b;
  cur[t + 1] = u0[g];
  if (t == 0) { a[0] = 0.0; a[65] = 0.0; b[0] = 0.0; b[65] = 0.0; }
  __syncthreads();
  double fi = f[g];
  for (int it = 0; it < iters; ++it) {
    nxt[t + 1] = 0.5 * (cur[t] + cur[t + 2]) + 0.1 * fi * cur[t + 1] * cur[t + 1];
    __syncthreads();
    double* tmp = cur; cur = nxt; nxt = tmp;
  }
  u[g] = cur[t + 1];
}

// Tiles of an InOut array read in a loop, then the array is overwritten.
extern "C" __global__ void tiles_then_overwrite(double* y, int tiles) {
  __shared__ double s[64];
  int t = threadIdx.x;
  double acc = 0.0;
  for (int k = 0; k < tiles; ++k) {
    s[t] = y[k * 64 + t];
    __syncthreads();
    acc += s[t] * s[63 - t];
    __syncthreads();
  }
  for (int k = 0; k < tiles; ++k) y[k * 64 + t] = acc * y[k * 64 + t];
}

// A shared accumulator updated in every trip of a barrier loop (read-modify-write across trips).
extern "C" __global__ void rotating_accumulator(const double* x, double* y, int tiles) {
  __shared__ double acc[64];
  int t = threadIdx.x;
  acc[t] = 0.0;
  __syncthreads();
  for (int k = 0; k < tiles; ++k) {
    double v = x[(blockIdx.x * tiles + k) * 64 + t];
    acc[(t + k) % 64] = 0.5 * acc[(t + k) % 64] * acc[(t + k) % 64] + v * v + v;
    __syncthreads();
  }
  y[blockIdx.x * 64 + t] = acc[t] * acc[63 - t];
}

// ---------------------------------------------------------------- CUDA-samples-style reduction, gathers
// Two loads per thread, unsigned indices, template block size with compile-time-unrolled steps.
template <unsigned int blockSize>
__global__ void __launch_bounds__(blockSize) reduce_two_loads(const double* g_idata, double* g_odata, unsigned int n) {
  __shared__ double sdata[blockSize];
  unsigned int tid = threadIdx.x;
  unsigned int i = blockIdx.x * (blockSize * 2) + threadIdx.x;
  double mySum = (i < n) ? g_idata[i] : 0.0;
  if (i + blockSize < n) mySum += g_idata[i + blockSize];
  sdata[tid] = mySum * mySum;
  __syncthreads();
  if (blockSize >= 128) { if (tid < 64) sdata[tid] = mySum = sdata[tid] + sdata[tid + 64]; __syncthreads(); }
  for (unsigned int s = 32; s > 0; s >>= 1) {
    if (tid < s) sdata[tid] = sdata[tid] + sdata[tid + s];
    __syncthreads();
  }
  if (tid == 0) g_odata[blockIdx.x] = sdata[0];
}
template __global__ void reduce_two_loads<128>(const double*, double*, unsigned int);

// A gather inside each warp from data-dependent lanes (many lanes may read one lane).
extern "C" __global__ void warp_gather(const double* x, const int* src, double* y) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  double v = x[i] * x[i];
  double got = __shfl_sync(FULL, v, src[i] & 31);
  y[i] = got * x[i];
}

// Per-thread scratch rows in shared memory, and a value thread 0 broadcasts through a shared scalar.
extern "C" __global__ void scratch_and_broadcast(const double* x, double* y) {
  __shared__ double scratch[64][5];
  __shared__ double first;
  int t = threadIdx.x, i = blockIdx.x * 64 + t;
  double v = x[i];
  for (int k = 0; k < 5; ++k) scratch[t][k] = k == 0 ? v : scratch[t][k - 1] * v;
  double p = 0.0;
  for (int k = 0; k < 5; ++k) p += scratch[t][k] / (k + 1);
  if (t == 0) first = p;
  __syncthreads();
  y[i] = p - first * v;
}

// ---------------------------------------------------------------- state across barriers, 2-D warps
// A per-thread array live across barriers, a barrier under a branch on a kernel parameter.
extern "C" __global__ void private_rows_across_barrier(const double* x, double* y, int mode) {
  __shared__ double s[64];
  int t = threadIdx.x, base = blockIdx.x * 256;
  double r[4];
  for (int k = 0; k < 4; ++k) r[k] = x[base + 64 * k + t];
  s[t] = r[0] * r[1];
  __syncthreads();
  double left = s[(t + 63) % 64];
  if (mode == 1) {
    __syncthreads();
    s[t] = r[2] * left;
    __syncthreads();
    left = s[(t + 1) % 64];
  }
  for (int k = 0; k < 4; ++k) y[base + 64 * k + t] = r[k] * left + r[(k + 1) & 3];
}

// A 16x8 block: a warp is two rows; shuffles cross from one row into the next.
extern "C" __global__ void rows_in_warps(const float* x, float* y, int nx) {
  int col = blockIdx.x * 16 + threadIdx.x, row = blockIdx.y * 8 + threadIdx.y;
  int i = row * nx + col;
  float v = x[i];
  float below = __shfl_down_sync(FULL, v, 16);     // the next row's element for the warp's first row
  float sum = v;
  for (int o = 8; o > 0; o >>= 1) sum += __shfl_xor_sync(FULL, sum, o);   // the row's 16 lanes
  y[i] = (threadIdx.y & 1) == 0 ? v * below + sum : v * sum;
}

// Each trip reads a chunk of an InOut array into a tile and overwrites the chunk from the tile.
extern "C" __global__ void chunks_in_place(double* y, int chunks) {
  __shared__ double s[64];
  int t = threadIdx.x;
  for (int k = 0; k < chunks; ++k) {
    s[t] = y[k * 64 + t];
    __syncthreads();
    y[k * 64 + t] = s[63 - t] * s[t] + (k > 0 ? y[(k - 1) * 64 + t] : 0.0);
    __syncthreads();
  }
}

// A serial section: thread 0 sums the tile, every thread divides by it.
extern "C" __global__ void serial_section(const double* x, double* y) {
  __shared__ double s[64];
  __shared__ double total;
  int t = threadIdx.x, i = blockIdx.x * 64 + t;
  s[t] = exp(x[i]);
  __syncthreads();
  if (t == 0) {
    double acc = 0.0;
    for (int j = 0; j < 64; ++j) acc += s[j];
    total = acc;
  }
  __syncthreads();
  y[i] = s[t] / total;
}

// Half a warp in a branch (a valid 16-lane mask): the other lanes run it speculatively on zeros,
// where log and sqrt are infinite or have infinite derivatives.
extern "C" __global__ void half_warp_logsum(const double* x, double* out) {
  __shared__ double s[64];
  int t = threadIdx.x;
  s[t] = x[blockIdx.x * 64 + t];
  __syncthreads();
  if (t < 16) {
    double v = log(s[t] * s[t] + s[t + 16] * s[t + 16]) + sqrt(s[t + 32] * s[t + 32]);
    for (int o = 8; o > 0; o >>= 1) v += __shfl_down_sync(0x0000ffffu, v, o, 16);
    if (t == 0) out[blockIdx.x] = v;
  }
}
"""
