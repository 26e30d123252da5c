// Hand-written CUDA C++ baselines for the RAJAPerf subset in shared/BENCHMARKS.md.
// Written here from the kernels' published math; built with `nvcc -O3 -arch=sm_90 -cubin`.
// One element per thread, 256-thread blocks (RAJAPerf's CUDA default); reductions use a
// warp-shuffle + shared-memory block reduction and one atomic per block.
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

// ---- reductions: warp shuffle, then shared memory, then one atomic per block
__device__ double block_sum(double v) {
  __shared__ double partial[32];
  for (int d = 16; d > 0; d >>= 1) v += __shfl_down_sync(0xffffffffu, v, d);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (lane == 0) partial[warp] = v;
  __syncthreads();
  v = (threadIdx.x < blockDim.x / 32) ? partial[lane] : 0.0;
  if (warp == 0) for (int d = 16; d > 0; d >>= 1) v += __shfl_down_sync(0xffffffffu, v, d);
  return v;
}
__global__ void stream_dot(const double* __restrict__ a, const double* __restrict__ b, double* __restrict__ dot, int64_t n) {
  const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  double v = i < n ? a[i] * b[i] : 0.0;
  v = block_sum(v);
  if (threadIdx.x == 0) atomicAdd(dot, v);
}
__global__ void basic_pi_reduce(double dx, double* __restrict__ pi, int64_t n) {
  const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  double v = 0.0;
  if (i < n) { double x = ((double)i + 0.5) * dx; v = dx / (1.0 + x * x); }
  v = block_sum(v);
  if (threadIdx.x == 0) atomicAdd(pi, v);
}
__global__ void basic_trap_int(double x0, double xp, double y, double yp, double h, double* __restrict__ sumx, int64_t n) {
  const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  double v = 0.0;
  if (i < n) { double x = x0 + i * h; double dx = x - xp, dy = y - yp; v = 1.0 / sqrt(dx * dx + dy * dy); }
  v = block_sum(v);
  if (threadIdx.x == 0) atomicAdd(sumx, v);
}
__global__ void basic_reduce3_int(const int* __restrict__ vec, long long* __restrict__ vsum, int* __restrict__ vmin,
                                  int* __restrict__ vmax, int64_t n) {
  const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  long long s = 0; int lo = 0x7fffffff, hi = -0x7fffffff - 1;
  if (i < n) { s = vec[i]; lo = vec[i]; hi = vec[i]; }
  for (int d = 16; d > 0; d >>= 1) {
    s += __shfl_down_sync(0xffffffffu, s, d);
    lo = min(lo, __shfl_down_sync(0xffffffffu, lo, d));
    hi = max(hi, __shfl_down_sync(0xffffffffu, hi, d));
  }
  if ((threadIdx.x & 31) == 0) { atomicAdd((unsigned long long*)vsum, (unsigned long long)s); atomicMin(vmin, lo); atomicMax(vmax, hi); }
}

}  // extern "C"
