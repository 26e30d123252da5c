// Hand-written CUDA C++ baselines for the RAJAPerf subset in shared/BENCHMARKS.md.
// Written here from the kernels' published math; built with `nvcc -O3 -arch=sm_90 -cubin`.
// One element per thread, 256-thread blocks (RAJAPerf's CUDA default) for the element-wise
// kernels; the reductions are tuned grid-stride kernels (see below).
#include <cstdint>

#define IDX const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; if (i >= n) return;

extern "C" {

__global__ void stream_add(const double* __restrict__ a, const double* __restrict__ b, double* __restrict__ c, int64_t n) { IDX c[i] = a[i] + b[i]; }
__global__ void stream_copy(const double* __restrict__ a, double* __restrict__ c, int64_t n) { IDX c[i] = a[i]; }
__global__ void stream_mul(double* __restrict__ b, const double* __restrict__ c, double alpha, int64_t n) { IDX b[i] = alpha * c[i]; }
__global__ void stream_triad(double* __restrict__ a, const double* __restrict__ b, const double* __restrict__ c, double alpha, int64_t n) { IDX a[i] = b[i] + alpha * c[i]; }
__global__ void basic_daxpy(double* __restrict__ y, const double* __restrict__ x, double a, int64_t n) { IDX y[i] += a * x[i]; }
__global__ void basic_init3(double* __restrict__ o1, double* __restrict__ o2, double* __restrict__ o3,
                            const double* __restrict__ in1, const double* __restrict__ in2, int64_t n) {
  IDX double v = -in1[i] - in2[i]; o1[i] = v; o2[i] = v; o3[i] = v;
}
__global__ void basic_muladdsub(double* __restrict__ o1, double* __restrict__ o2, double* __restrict__ o3,
                                const double* __restrict__ in1, const double* __restrict__ in2, int64_t n) {
  IDX double a = in1[i], b = in2[i]; o1[i] = a * b; o2[i] = a + b; o3[i] = a - b;
}
__global__ void basic_if_quad(const double* __restrict__ a, const double* __restrict__ b, const double* __restrict__ c,
                              double* __restrict__ x1, double* __restrict__ x2, int64_t n) {
  IDX double s = b[i] * b[i] - 4.0 * a[i] * c[i];
  if (s >= 0) { s = sqrt(s); x2[i] = (-b[i] + s) / (2.0 * a[i]); x1[i] = (-b[i] - s) / (2.0 * a[i]); }
  else { x2[i] = 0.0; x1[i] = 0.0; }
}
__global__ void basic_nested_init(double* __restrict__ arr, int64_t ni, int64_t nj, int64_t nk) {
  const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  const int64_t j = blockIdx.y, k = blockIdx.z;
  if (i >= ni) return;
  arr[i + ni * (j + nj * k)] = 0.00000001 * i * j * k;
}
__global__ void lcals_hydro_1d(double* __restrict__ x, const double* __restrict__ y, const double* __restrict__ z,
                               double q, double r, double t, int64_t n) {
  IDX x[i] = q + y[i] * (r * z[i + 10] + t * z[i + 11]);
}
__global__ void lcals_eos(double* __restrict__ x, const double* __restrict__ y, const double* __restrict__ z,
                          const double* __restrict__ u, double q, double r, double t, int64_t n) {
  IDX x[i] = u[i] + r * (z[i] + r * y[i]) + t * (u[i + 3] + r * (u[i + 2] + r * u[i + 1]) + t * (u[i + 6] + q * (u[i + 5] + q * u[i + 4])));
}
__global__ void lcals_planckian(const double* __restrict__ x, double* __restrict__ y, const double* __restrict__ u,
                                const double* __restrict__ v, double* __restrict__ w, int64_t n) {
  IDX double yy = u[i] / v[i]; y[i] = yy; w[i] = x[i] / (exp(yy) - 1.0);
}
__global__ void lcals_first_diff(double* __restrict__ x, const double* __restrict__ y, int64_t n) { IDX x[i] = y[i + 1] - y[i]; }
__global__ void lcals_diff_predict(double* __restrict__ px, const double* __restrict__ cx, int64_t off, int64_t n) {
  IDX
  double ar, br, cr;
  ar = cx[i + off * 4];       br = ar - px[i + off * 4];  px[i + off * 4] = ar;
  cr = br - px[i + off * 5];  px[i + off * 5] = br;
  ar = cr - px[i + off * 6];  px[i + off * 6] = cr;
  br = ar - px[i + off * 7];  px[i + off * 7] = ar;
  cr = br - px[i + off * 8];  px[i + off * 8] = br;
  ar = cr - px[i + off * 9];  px[i + off * 9] = cr;
  br = ar - px[i + off * 10]; px[i + off * 10] = ar;
  cr = br - px[i + off * 11]; px[i + off * 11] = br;
  px[i + off * 13] = cr - px[i + off * 12];
  px[i + off * 12] = cr;
}

// ---- reductions, tuned: a grid-stride loop (the launcher starts just enough 256-thread blocks to
// fill the GPU, see rajaperf.py REDUCTION_BLOCKS) in which each thread sums many elements with
// several independent accumulators and 128-bit loads; then warp shuffles, one shared-memory step
// and ONE atomic per block.
__device__ __forceinline__ double warp_sum(double v) {
  for (int d = 16; d > 0; d >>= 1) v += __shfl_down_sync(0xffffffffu, v, d);
  return v;
}
__device__ double block_sum(double v) {            // the block's total, valid in thread 0
  __shared__ double partial[32];
  v = warp_sum(v);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (lane == 0) partial[warp] = v;
  __syncthreads();
  v = (threadIdx.x < blockDim.x / 32) ? partial[lane] : 0.0;
  return warp == 0 ? warp_sum(v) : 0.0;
}
#define GRID_STRIDE const int64_t first = (int64_t)blockIdx.x * blockDim.x + threadIdx.x, \
                                  stride = (int64_t)gridDim.x * blockDim.x;

__global__ void stream_dot(const double* __restrict__ a, const double* __restrict__ b, double* __restrict__ dot, int64_t n) {
  GRID_STRIDE
  const double2* a2 = reinterpret_cast<const double2*>(a);   // cudaMalloc'd: 256-byte aligned
  const double2* b2 = reinterpret_cast<const double2*>(b);
  const int64_t pairs = n / 2;
  double s0 = 0.0, s1 = 0.0, s2 = 0.0, s3 = 0.0;
  int64_t k = first;
  for (; k + stride < pairs; k += 2 * stride) {              // two 128-bit loads in flight per array
    const double2 x0 = a2[k], y0 = b2[k], x1 = a2[k + stride], y1 = b2[k + stride];
    s0 += x0.x * y0.x; s1 += x0.y * y0.y; s2 += x1.x * y1.x; s3 += x1.y * y1.y;
  }
  if (k < pairs) { const double2 x0 = a2[k], y0 = b2[k]; s0 += x0.x * y0.x; s1 += x0.y * y0.y; }
  if (first == 0 && (n & 1)) s0 += a[n - 1] * b[n - 1];
  const double v = block_sum((s0 + s1) + (s2 + s3));
  if (threadIdx.x == 0) atomicAdd(dot, v);
}
__global__ void basic_pi_reduce(double dx, double* __restrict__ pi, int64_t n) {
  GRID_STRIDE
  double s0 = 0.0, s1 = 0.0;
  int64_t i = first;
  for (; i + stride < n; i += 2 * stride) {
    const double x0 = ((double)i + 0.5) * dx, x1 = ((double)(i + stride) + 0.5) * dx;
    s0 += dx / (1.0 + x0 * x0); s1 += dx / (1.0 + x1 * x1);
  }
  if (i < n) { const double x = ((double)i + 0.5) * dx; s0 += dx / (1.0 + x * x); }
  const double v = block_sum(s0 + s1);
  if (threadIdx.x == 0) atomicAdd(pi, v);
}
// basic_trap_int's sum with 1.0 / sqrt (IEEE) or CUDA's rsqrt (libdevice's __nv_rsqrt, the form XLA
// rewrites 1.0 / sqrt into): one body, two kernels (``use_rsqrt`` is a constant after inlining)
static __device__ __forceinline__ double trap_term(double d, bool use_rsqrt) { return use_rsqrt ? rsqrt(d) : 1.0 / sqrt(d); }
static __device__ __forceinline__ void trap_int(double x0, double xp, double y, double yp, double h, double* sumx,
                                                int64_t n, bool use_rsqrt) {
  GRID_STRIDE
  const double dy = y - yp, dy2 = dy * dy;
  double s0 = 0.0, s1 = 0.0;
  int64_t i = first;
  for (; i + stride < n; i += 2 * stride) {
    const double a = x0 + i * h - xp, b = x0 + (i + stride) * h - xp;
    s0 += trap_term(a * a + dy2, use_rsqrt); s1 += trap_term(b * b + dy2, use_rsqrt);
  }
  if (i < n) { const double a = x0 + i * h - xp; s0 += trap_term(a * a + dy2, use_rsqrt); }
  const double v = block_sum(s0 + s1);
  if (threadIdx.x == 0) atomicAdd(sumx, v);
}
__global__ void basic_trap_int(double x0, double xp, double y, double yp, double h, double* __restrict__ sumx, int64_t n) {
  trap_int(x0, xp, y, yp, h, sumx, n, false);
}
__global__ void basic_trap_int_rsqrt(double x0, double xp, double y, double yp, double h, double* __restrict__ sumx,
                                     int64_t n) {
  trap_int(x0, xp, y, yp, h, sumx, n, true);
}
__global__ void basic_reduce3_int(const int* __restrict__ vec, long long* __restrict__ vsum, int* __restrict__ vmin,
                                  int* __restrict__ vmax, int64_t n) {
  GRID_STRIDE
  const int4* v4 = reinterpret_cast<const int4*>(vec);
  const int64_t quads = n / 4;
  long long s = 0; int lo = 0x7fffffff, hi = -0x7fffffff - 1;
  for (int64_t k = first; k < quads; k += stride) {
    const int4 q = v4[k];
    s += (long long)q.x + q.y + q.z + q.w;
    lo = min(lo, min(min(q.x, q.y), min(q.z, q.w)));
    hi = max(hi, max(max(q.x, q.y), max(q.z, q.w)));
  }
  for (int64_t i = 4 * quads + first; i < n; i += stride) { s += vec[i]; lo = min(lo, vec[i]); hi = max(hi, vec[i]); }
  for (int d = 16; d > 0; d >>= 1) {
    s += __shfl_down_sync(0xffffffffu, s, d);
    lo = min(lo, __shfl_down_sync(0xffffffffu, lo, d));
    hi = max(hi, __shfl_down_sync(0xffffffffu, hi, d));
  }
  __shared__ long long ssum[32]; __shared__ int smin[32], smax[32];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (lane == 0) { ssum[warp] = s; smin[warp] = lo; smax[warp] = hi; }
  __syncthreads();
  if (warp == 0) {
    const bool live = threadIdx.x < blockDim.x / 32;
    s = live ? ssum[lane] : 0; lo = live ? smin[lane] : 0x7fffffff; hi = live ? smax[lane] : -0x7fffffff - 1;
    for (int d = 16; d > 0; d >>= 1) {
      s += __shfl_down_sync(0xffffffffu, s, d);
      lo = min(lo, __shfl_down_sync(0xffffffffu, lo, d));
      hi = max(hi, __shfl_down_sync(0xffffffffu, hi, d));
    }
    if (lane == 0) { atomicAdd((unsigned long long*)vsum, (unsigned long long)s); atomicMin(vmin, lo); atomicMax(vmax, hi); }
  }
}

}  // extern "C"
