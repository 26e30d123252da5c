"""CUDA sources for the second soundness hunt (test_cuda_hunt2.py): block-level idioms the first hunt
(hunt_sources.py) did not cover: vector loads, butterfly and scan shuffles, block votes, stream
compaction, hand-written atomics, shared-memory scans and sorts, constant memory, aliasing pointers and
index arithmetic. Every kernel must give the right derivative or a clear refusal."""

HUNT2 = r"""
#define FULL_MASK 0xffffffffu

// ---------------------------------------------------------------- vectorized memory
extern "C" __global__ void saxpy_float4(float a, const float* __restrict__ x, float* __restrict__ y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  int n4 = n / 4;
  if (i < n4) {
    float4 xv = reinterpret_cast<const float4*>(x)[i];
    float4 yv = reinterpret_cast<float4*>(y)[i];
    yv.x = a * xv.x + yv.x; yv.y = a * xv.y + yv.y;
    yv.z = a * xv.z + yv.z; yv.w = a * xv.w + yv.w;
    reinterpret_cast<float4*>(y)[i] = yv;
  }
  // the scalar tail, by the first threads of the grid
  int t = n4 * 4 + i;
  if (t < n) y[t] = a * x[t] + y[t];
}

extern "C" __global__ void ldg_float4_lengths(const float4* __restrict__ p, float* __restrict__ len, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float4 v = __ldg(p + i);
  len[i] = sqrtf(v.x * v.x + v.y * v.y + v.z * v.z) * v.w;
}

extern "C" __global__ void complex_mul_double2(const double2* __restrict__ a, const double2* __restrict__ b,
                                               double2* __restrict__ c, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    double2 u = a[i], v = b[i];
    c[i] = make_double2(u.x * v.x - u.y * v.y, u.x * v.y + u.y * v.x);
  }
}

struct Particle { float x, y, z, m; };

// an array of structs in shared memory, read by the neighbour thread
extern "C" __global__ void aos_shared_pairs(const float* __restrict__ pos, float* __restrict__ e) {
  __shared__ Particle tile[64];
  int t = threadIdx.x, i = blockIdx.x * 64 + t;
  float4 v = reinterpret_cast<const float4*>(pos)[i];
  tile[t].x = v.x; tile[t].y = v.y; tile[t].z = v.z; tile[t].m = v.w;
  __syncthreads();
  Particle q = tile[(t + 1) & 63];
  float dx = q.x - v.x, dy = q.y - v.y, dz = q.z - v.z;
  e[i] = v.w * q.m / sqrtf(dx * dx + dy * dy + dz * dz + 0.1f);
}

// the same pairs from a struct of arrays in shared memory, float2 stores of the result
struct Tile { float x[64], y[64], z[64], m[64]; };

extern "C" __global__ void soa_shared_pairs(const float* __restrict__ pos, float2* __restrict__ out) {
  __shared__ Tile s;
  int t = threadIdx.x, i = blockIdx.x * 64 + t;
  s.x[t] = pos[4 * i]; s.y[t] = pos[4 * i + 1]; s.z[t] = pos[4 * i + 2]; s.m[t] = pos[4 * i + 3];
  __syncthreads();
  int j = 63 - t;
  float dx = s.x[j] - s.x[t], dy = s.y[j] - s.y[t], dz = s.z[j] - s.z[t];
  float r2 = dx * dx + dy * dy + dz * dz + 0.1f;
  out[i] = make_float2(s.m[t] * s.m[j] / r2, r2);
}

// ---------------------------------------------------------------- shuffles
__device__ __forceinline__ double warp_allreduce_max(double v) {
  for (int m = 16; m >= 1; m >>= 1) v = fmax(v, __shfl_xor_sync(FULL_MASK, v, m));
  return v;
}
__device__ __forceinline__ double warp_allreduce_sum(double v) {
#pragma unroll
  for (int m = 16; m >= 1; m >>= 1) v += __shfl_xor_sync(FULL_MASK, v, m);
  return v;
}

// one row of 32 per warp: softmax through butterfly all-reductions (every lane gets the result)
extern "C" __global__ void butterfly_softmax(const double* __restrict__ x, double* __restrict__ y) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  double v = x[i];
  double m = warp_allreduce_max(v);
  double e = exp(v - m);
  double s = warp_allreduce_sum(e);
  y[i] = e / s;
}

// inclusive warp scan with __shfl_up_sync, then a map over the scan
extern "C" __global__ void warp_scan_up(const float* __restrict__ x, float* __restrict__ y) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  int lane = threadIdx.x & 31;
  float v = x[i];
  float s = v;
  for (int d = 1; d < 32; d *= 2) {
    float n = __shfl_up_sync(FULL_MASK, s, d);
    if (lane >= d) s += n;
  }
  y[i] = tanhf(s) * v;
}

// lane 0's value broadcast to its warp
extern "C" __global__ void lane0_broadcast(const double* __restrict__ x, double* __restrict__ y) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  double v = x[i];
  double first = __shfl_sync(FULL_MASK, v * v, 0);
  y[i] = v * first - sin(first);
}

// segmented sums of 16 lanes (width 16) on doubles, then each lane scaled by its segment's sum
extern "C" __global__ void half_warp_width16(const double* __restrict__ x, double* __restrict__ y) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  double v = x[i], s = v;
  for (int d = 8; d > 0; d >>= 1) s += __shfl_down_sync(FULL_MASK, s, d, 16);
  double total = __shfl_sync(FULL_MASK, s, 0, 16);
  y[i] = v * total;
}

struct Pair { float v; float w; };

// a struct shuffled as 32-bit words, as generic warp code does (memcpy to ints and back)
__device__ __forceinline__ Pair shfl_pair_down(Pair p, int d) {
  int words[2];
  __builtin_memcpy(words, &p, sizeof(p));
  words[0] = __shfl_down_sync(FULL_MASK, words[0], d);
  words[1] = __shfl_down_sync(FULL_MASK, words[1], d);
  Pair r;
  __builtin_memcpy(&r, words, sizeof(r));
  return r;
}

extern "C" __global__ void struct_shuffle_words(const float* __restrict__ x, float* __restrict__ out) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  Pair p = {x[i], x[i] * x[i]};
  for (int d = 16; d > 0; d >>= 1) {
    Pair o = shfl_pair_down(p, d);
    p.v += o.v; p.w += o.w;
  }
  if ((threadIdx.x & 31) == 0) out[i / 32] = p.w - p.v * p.v / 32.0f;
}

// the same struct shuffled field by field (float shuffles)
extern "C" __global__ void struct_shuffle_fields(const float* __restrict__ x, float* __restrict__ out) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  Pair p = {x[i], x[i] * x[i]};
  for (int d = 16; d > 0; d >>= 1) {
    p.v += __shfl_down_sync(FULL_MASK, p.v, d);
    p.w += __shfl_down_sync(FULL_MASK, p.w, d);
  }
  if ((threadIdx.x & 31) == 0) out[i / 32] = p.w - p.v * p.v / 32.0f;
}

// ---------------------------------------------------------------- votes and compaction
// positive values of each warp packed to the front of its 32 slots (ballot + popc), then squared
extern "C" __global__ void ballot_compact(const double* __restrict__ x, double* __restrict__ y) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  int lane = threadIdx.x & 31;
  double v = x[i];
  bool keep = v > 0.0;
  unsigned bits = __ballot_sync(FULL_MASK, keep);
  int slot = __popc(bits & ((1u << lane) - 1u));
  int base = i - lane;
  if (keep) y[base + slot] = v * v + v;
}

// warp-aggregated atomic: one atomicAdd per warp reserves the slots, the leader's base broadcast
extern "C" __global__ void warp_aggregated_append(const double* __restrict__ x, double* __restrict__ out,
                                                  int* __restrict__ count) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  int lane = threadIdx.x & 31;
  double v = x[i];
  bool keep = v > 0.0;
  unsigned bits = __ballot_sync(FULL_MASK, keep);
  int leader = __ffs(bits) - 1;
  int base = 0;
  if (lane == leader) base = atomicAdd(count, __popc(bits));
  base = __shfl_sync(FULL_MASK, base, leader < 0 ? 0 : leader);
  if (keep) out[base + __popc(bits & ((1u << lane) - 1u))] = exp(v);
}

// ---------------------------------------------------------------- reduce6 (CUDA samples)
template <unsigned int blockSize>
__device__ __forceinline__ double warp_reduce6(double sum) {
  if (blockSize >= 64) sum += __shfl_down_sync(FULL_MASK, sum, 16);
  if (blockSize >= 32) sum += __shfl_down_sync(FULL_MASK, sum, 8);
  if (blockSize >= 16) sum += __shfl_down_sync(FULL_MASK, sum, 4);
  if (blockSize >= 8) sum += __shfl_down_sync(FULL_MASK, sum, 2);
  if (blockSize >= 4) sum += __shfl_down_sync(FULL_MASK, sum, 1);
  return sum;
}

template <unsigned int blockSize, bool nIsPow2>
__device__ void reduce6(const double* g_idata, double* g_odata, unsigned int n) {
  __shared__ double sdata[blockSize];
  unsigned int tid = threadIdx.x;
  unsigned int gridSize = blockSize * 2 * gridDim.x;
  double mySum = 0;
  unsigned int i = blockIdx.x * blockSize * 2 + threadIdx.x;
  while (i < n) {
    mySum += g_idata[i] * g_idata[i];
    if (nIsPow2 || i + blockSize < n) mySum += g_idata[i + blockSize] * g_idata[i + blockSize];
    i += gridSize;
  }
  sdata[tid] = mySum;
  __syncthreads();
  if ((blockSize >= 512) && (tid < 256)) sdata[tid] = mySum = mySum + sdata[tid + 256];
  __syncthreads();
  if ((blockSize >= 256) && (tid < 128)) sdata[tid] = mySum = mySum + sdata[tid + 128];
  __syncthreads();
  if ((blockSize >= 128) && (tid < 64)) sdata[tid] = mySum = mySum + sdata[tid + 64];
  __syncthreads();
  if (tid < 32) {
    if (blockSize >= 64) mySum += sdata[tid + 32];
    mySum = warp_reduce6<blockSize>(mySum);
  }
  if (tid == 0) g_odata[blockIdx.x] = mySum;
}

extern "C" __global__ void reduce6_128_pow2(const double* x, double* out, unsigned int n) {
  reduce6<128, true>(x, out, n);
}
extern "C" __global__ void reduce6_64_any(const double* x, double* out, unsigned int n) {
  reduce6<64, false>(x, out, n);
}

// #pragma unroll over a fixed tap count with Horner's rule
extern "C" __global__ void unrolled_fir(const float* __restrict__ x, const float* __restrict__ taps,
                                        float* __restrict__ y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float acc = 0.0f;
#pragma unroll
  for (int k = 0; k < 5; ++k) {
    int j = i - k;
    acc = fmaf(taps[k], j >= 0 ? x[j] : 0.0f, acc);
  }
  y[i] = acc * acc;
}

// Welford's running (count, mean, M2) per thread over a grid-stride range, merged across the warp
// with butterfly shuffles (Chan et al.'s pairwise formula), the variance of each warp's range
struct Welford { float n, mean, m2; };

__device__ __forceinline__ Welford welford_merge(Welford a, Welford b) {
  float n = a.n + b.n;
  if (n == 0.0f) return a;
  float delta = b.mean - a.mean;
  Welford r;
  r.n = n;
  r.mean = a.mean + delta * b.n / n;
  r.m2 = a.m2 + b.m2 + delta * delta * a.n * b.n / n;
  return r;
}

extern "C" __global__ void welford_warp_variance(const float* __restrict__ x, float* __restrict__ var, int per_lane) {
  int lane = threadIdx.x & 31, warp = (blockIdx.x * blockDim.x + threadIdx.x) >> 5;
  Welford w = {0.0f, 0.0f, 0.0f};
  for (int k = 0; k < per_lane; ++k) {
    float v = x[warp * 32 * per_lane + k * 32 + lane];
    w.n += 1.0f;
    float d = v - w.mean;
    w.mean += d / w.n;
    w.m2 += d * (v - w.mean);
  }
  for (int m = 16; m > 0; m >>= 1) {
    Welford o;
    o.n = __shfl_xor_sync(FULL_MASK, w.n, m);
    o.mean = __shfl_xor_sync(FULL_MASK, w.mean, m);
    o.m2 = __shfl_xor_sync(FULL_MASK, w.m2, m);
    w = welford_merge(w, o);
  }
  if (lane == 0) var[warp] = w.m2 / w.n;
}

// online softmax (flash-attention style): each lane keeps a running max and a rescaled sum over its
// strided part of a row, the warp merges the pairs, then every lane writes its normalized values
extern "C" __global__ void online_softmax_rows(const double* __restrict__ x, double* __restrict__ y, int cols) {
  int lane = threadIdx.x & 31, row = (blockIdx.x * blockDim.x + threadIdx.x) >> 5;
  const double* xr = x + (size_t)row * cols;
  double m = -INFINITY, s = 0.0;
  for (int c = lane; c < cols; c += 32) {
    double v = xr[c];
    double m_new = fmax(m, v);
    s = s * exp(m - m_new) + exp(v - m_new);
    m = m_new;
  }
  for (int d = 16; d > 0; d >>= 1) {
    double m_o = __shfl_xor_sync(FULL_MASK, m, d), s_o = __shfl_xor_sync(FULL_MASK, s, d);
    double m_new = fmax(m, m_o);
    s = s * exp(m - m_new) + s_o * exp(m_o - m_new);
    m = m_new;
  }
  for (int c = lane; c < cols; c += 32) y[(size_t)row * cols + c] = exp(xr[c] - m) / s;
}

// Kahan-compensated sums per thread, then __fmul_rn/__fadd_rn and friends (unfused arithmetic)
extern "C" __global__ void kahan_rn(const float* __restrict__ x, float* __restrict__ out, int per_thread) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  float sum = 0.0f, c = 0.0f;
  for (int k = 0; k < per_thread; ++k) {
    float v = x[i * per_thread + k];
    float y = __fsub_rn(__fmul_rn(v, v), c);
    float t = __fadd_rn(sum, y);
    c = __fsub_rn(__fsub_rn(t, sum), y);
    sum = t;
  }
  out[i] = __fdiv_rn(__fsqrt_rn(sum), __int2float_rn(per_thread)) + __fmaf_rn(sum, __frcp_rn(1.0f + sum), 0.5f);
}

// float4 stores into a float array in shared memory, scalar reads of other threads' elements
extern "C" __global__ void shared_float4_stores(const float* __restrict__ x, float* __restrict__ y) {
  __shared__ __attribute__((aligned(16))) float tile[256];
  int t = threadIdx.x, base = blockIdx.x * 256;
  float4 v = reinterpret_cast<const float4*>(x + base)[t];
  v.x *= v.x; v.y *= v.y; v.z *= v.z; v.w *= v.w;
  reinterpret_cast<float4*>(tile)[t] = v;
  __syncthreads();
  for (int k = 0; k < 4; ++k) {
    int j = 4 * t + k;
    y[base + j] = tile[255 - j] * x[base + j];
  }
}

// atomicExch on floats: as a store (old value unused), and as a swap whose old value is used
extern "C" __global__ void exch_store_and_swap(const float* __restrict__ x, float* __restrict__ slot,
                                               float* __restrict__ swapped, float* __restrict__ got) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  atomicExch(&slot[i], x[i] * x[i]);
  float old = atomicExch(&swapped[i], 2.0f * x[i]);
  got[i] = old * x[i];
}

// ---------------------------------------------------------------- scans and sorts in shared memory
// Blelloch's work-efficient exclusive scan (GPU Gems 3, 39.2), 128 elements per block of 64
extern "C" __global__ void blelloch_scan(const double* __restrict__ x, double* __restrict__ y) {
  __shared__ double temp[128];
  int t = threadIdx.x, base = blockIdx.x * 128;
  temp[2 * t] = x[base + 2 * t];
  temp[2 * t + 1] = x[base + 2 * t + 1];
  int offset = 1;
  for (int d = 64; d > 0; d >>= 1) {
    __syncthreads();
    if (t < d) {
      int ai = offset * (2 * t + 1) - 1, bi = offset * (2 * t + 2) - 1;
      temp[bi] += temp[ai];
    }
    offset *= 2;
  }
  if (t == 0) temp[127] = 0;
  for (int d = 1; d < 128; d *= 2) {
    offset >>= 1;
    __syncthreads();
    if (t < d) {
      int ai = offset * (2 * t + 1) - 1, bi = offset * (2 * t + 2) - 1;
      double a = temp[ai];
      temp[ai] = temp[bi];
      temp[bi] += a;
    }
  }
  __syncthreads();
  y[base + 2 * t] = exp(-temp[2 * t]) * x[base + 2 * t];
  y[base + 2 * t + 1] = exp(-temp[2 * t + 1]) * x[base + 2 * t + 1];
}

// Hillis-Steele inclusive scan with two buffers swapped by index (pout/pin)
extern "C" __global__ void hillis_steele_scan(const float* __restrict__ x, float* __restrict__ y) {
  __shared__ float buf[2 * 64];
  int t = threadIdx.x, i = blockIdx.x * 64 + t;
  int pout = 0, pin = 1;
  buf[pout * 64 + t] = x[i];
  __syncthreads();
  for (int offset = 1; offset < 64; offset *= 2) {
    pout = 1 - pout;
    pin = 1 - pout;
    if (t >= offset) buf[pout * 64 + t] = buf[pin * 64 + t] + buf[pin * 64 + t - offset];
    else buf[pout * 64 + t] = buf[pin * 64 + t];
    __syncthreads();
  }
  float s = buf[pout * 64 + t];
  y[i] = s * s;
}

// bitonic sort of (key, value) pairs in shared memory: the values follow the keys' permutation
extern "C" __global__ void bitonic_sort_pairs(const float* __restrict__ keys, const double* __restrict__ vals,
                                              double* __restrict__ out) {
  __shared__ float k[64];
  __shared__ double v[64];
  int t = threadIdx.x, i = blockIdx.x * 64 + t;
  k[t] = keys[i];
  v[t] = vals[i];
  __syncthreads();
  for (int size = 2; size <= 64; size <<= 1) {
    for (int stride = size >> 1; stride > 0; stride >>= 1) {
      int partner = t ^ stride;
      if (partner > t) {
        bool up = (t & size) == 0;
        if ((k[t] > k[partner]) == up) {
          float tk = k[t]; k[t] = k[partner]; k[partner] = tk;
          double tv = v[t]; v[t] = v[partner]; v[partner] = tv;
        }
      }
      __syncthreads();
    }
  }
  out[i] = v[t] * (double)(t + 1) + v[t] * v[t];
}

// the CUDA samples' bitonic sort (sortingNetworks): 64 threads sort 128 (key, value) pairs, each
// thread comparing the pair at pos = 2 * t - (t & (stride - 1)) and pos + stride
__device__ __forceinline__ void comparator(float& keyA, double& valA, float& keyB, double& valB, unsigned dir) {
  if ((keyA > keyB) == (dir != 0)) {
    float k = keyA; keyA = keyB; keyB = k;
    double v = valA; valA = valB; valB = v;
  }
}

extern "C" __global__ void bitonic_samples(const float* __restrict__ keys, const double* __restrict__ vals,
                                           double* __restrict__ out) {
  __shared__ float sk[128];
  __shared__ double sv[128];
  unsigned t = threadIdx.x, base = blockIdx.x * 128;
  sk[t] = keys[base + t]; sv[t] = vals[base + t];
  sk[t + 64] = keys[base + t + 64]; sv[t + 64] = vals[base + t + 64];
  for (unsigned size = 2; size < 128; size <<= 1) {
    unsigned dir = (t & (size / 2)) != 0;
    for (unsigned stride = size / 2; stride > 0; stride >>= 1) {
      __syncthreads();
      unsigned pos = 2 * t - (t & (stride - 1));
      comparator(sk[pos], sv[pos], sk[pos + stride], sv[pos + stride], dir);
    }
  }
  for (unsigned stride = 64; stride > 0; stride >>= 1) {
    __syncthreads();
    unsigned pos = 2 * t - (t & (stride - 1));
    comparator(sk[pos], sv[pos], sk[pos + stride], sv[pos + stride], 1);
  }
  __syncthreads();
  out[base + t] = sv[t] * sv[t + 64];
  out[base + t + 64] = exp(sv[t + 64]) + sv[t];
}

// ---------------------------------------------------------------- hand-written atomics
__device__ float atomicMaxFloat(float* addr, float value) {
  int* a = reinterpret_cast<int*>(addr);
  int old = *a, assumed;
  do {
    assumed = old;
    if (__int_as_float(assumed) >= value) break;
    old = atomicCAS(a, assumed, __float_as_int(value));
  } while (assumed != old);
  return __int_as_float(old);
}

extern "C" __global__ void cas_atomic_max(const float* __restrict__ x, float* __restrict__ m, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) atomicMaxFloat(m, x[i] * x[i]);
}

__device__ float atomicMulFloat(float* addr, float value) {
  int* a = reinterpret_cast<int*>(addr);
  int old = *a, assumed;
  do {
    assumed = old;
    old = atomicCAS(a, assumed, __float_as_int(__int_as_float(assumed) * value));
  } while (assumed != old);
  return __int_as_float(old);
}

extern "C" __global__ void cas_atomic_mul(const float* __restrict__ x, float* __restrict__ prod, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) atomicMulFloat(prod, 1.0f + 0.1f * x[i]);
}

// atomicExch on an int flag elects one writer per block; the values use double atomicAdd in shared memory
extern "C" __global__ void exch_flag_double_add(const double* __restrict__ x, double* __restrict__ out,
                                                int* __restrict__ flags) {
  __shared__ double acc;
  int t = threadIdx.x, i = blockIdx.x * blockDim.x + t;
  if (t == 0) acc = 0.0;
  __syncthreads();
  atomicAdd(&acc, x[i] * x[i]);
  __syncthreads();
  if (atomicExch(&flags[blockIdx.x], 1) == 0) out[blockIdx.x] = sqrt(acc);
}

// ---------------------------------------------------------------- shared memory layouts
// a __device__ function that holds its own __shared__ array (a block-wide max and sum)
__device__ float block_max64(float v) {
  __shared__ float red[64];
  int t = threadIdx.x;
  red[t] = v;
  __syncthreads();
  for (int h = 32; h > 0; h >>= 1) {
    if (t < h) red[t] = fmaxf(red[t], red[t + h]);
    __syncthreads();
  }
  float m = red[0];
  __syncthreads();
  return m;
}

__device__ float block_sum64(float v) {
  __shared__ float red[64];
  int t = threadIdx.x;
  red[t] = v;
  __syncthreads();
  for (int h = 32; h > 0; h >>= 1) {
    if (t < h) red[t] += red[t + h];
    __syncthreads();
  }
  float s = red[0];
  __syncthreads();
  return s;
}

extern "C" __global__ void device_fn_shared_softmax(const float* __restrict__ x, float* __restrict__ y) {
  int i = blockIdx.x * 64 + threadIdx.x;
  float v = x[i];
  float e = expf(v - block_max64(v));
  y[i] = e / block_sum64(e);
}

// the padded 32x33 tile transpose (CUDA samples' transposeNoBankConflicts) with a map
extern "C" __global__ void transpose_padded(const float* __restrict__ in, float* __restrict__ out, int width,
                                            int height) {
  __shared__ float tile[32][33];
  int x = blockIdx.x * 32 + threadIdx.x, y = blockIdx.y * 32 + threadIdx.y;
  for (int j = 0; j < 32; j += 8)
    if (x < width && y + j < height) tile[threadIdx.y + j][threadIdx.x] = in[(y + j) * width + x];
  __syncthreads();
  x = blockIdx.y * 32 + threadIdx.x;
  y = blockIdx.x * 32 + threadIdx.y;
  for (int j = 0; j < 32; j += 8)
    if (x < height && y + j < width) {
      float v = tile[threadIdx.x][threadIdx.y + j];
      out[(y + j) * height + x] = v * fabsf(v);
    }
}

// one extern __shared__ buffer carved into a float array and a double array
extern "C" __global__ void dynamic_shared_carved(const float* __restrict__ a, const double* __restrict__ b,
                                                 double* __restrict__ y) {
  extern __shared__ unsigned char smem[];
  double* sb = reinterpret_cast<double*>(smem);
  float* sa = reinterpret_cast<float*>(smem + blockDim.x * sizeof(double));
  int t = threadIdx.x, i = blockIdx.x * blockDim.x + t;
  sa[t] = a[i];
  sb[t] = b[i];
  __syncthreads();
  int j = (t + 3) % blockDim.x;
  y[i] = (double)sa[j] * sb[t] + sb[j] * sb[j];
}

// one extern __shared__ float buffer carved into two arrays (the usual way to have several)
extern "C" __global__ void dynamic_shared_floats(const float* __restrict__ a, const float* __restrict__ b,
                                                 float* __restrict__ y) {
  extern __shared__ float buf[];
  float* sa = buf;
  float* sb = buf + blockDim.x;
  int t = threadIdx.x, i = blockIdx.x * blockDim.x + t;
  sa[t] = a[i];
  sb[t] = b[i] * b[i];
  __syncthreads();
  int j = blockDim.x - 1 - t;
  y[i] = sa[j] * sb[t] + sinf(sb[j]);
}

// __constant__ coefficients of a 3x3 filter over a 2-D image, __launch_bounds__
__constant__ float c_filter[9] = {0.0625f, 0.125f, 0.0625f, 0.125f, 0.25f, 0.125f, 0.0625f, 0.125f, 0.0625f};

extern "C" __global__ void __launch_bounds__(128, 4)
constant_conv2d(const float* __restrict__ img, float* __restrict__ out, int w, int h) {
  int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y;
  if (x >= w || y >= h) return;
  float acc = 0.0f;
#pragma unroll
  for (int dy = -1; dy <= 1; ++dy)
#pragma unroll
    for (int dx = -1; dx <= 1; ++dx) {
      int xx = min(max(x + dx, 0), w - 1), yy = min(max(y + dy, 0), h - 1);
      acc += c_filter[(dy + 1) * 3 + dx + 1] * img[yy * w + xx];
    }
  out[y * w + x] = acc * acc;
}

// __restrict__ on two pointers: the launch may pass one buffer for both
extern "C" __global__ void restrict_scale(const float* __restrict__ x, float* __restrict__ y, float a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] * x[i];
}

// ---------------------------------------------------------------- integer index math and kinks
extern "C" __global__ void index_arith(const double* __restrict__ x, double* __restrict__ y, int n) {
  unsigned int u = blockIdx.x * blockDim.x + threadIdx.x;
  size_t s = (size_t)u;
  long long shift = (long long)u - 5;
  if (s >= (size_t)n) return;
  int left = (int)(((shift % n) + n) % n);              // negative modulo wrapped into [0, n)
  unsigned int right = (u + 7u) % (unsigned)n;
  int mid = min(max((int)u - 2, 0), n - 1);
  y[s] = x[left] * x[right] + x[mid] * x[s];
}

extern "C" __global__ void kinks_f32(const float* __restrict__ a, const float* __restrict__ b,
                                     float* __restrict__ y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float u = a[i], v = b[i];
  y[5 * i + 0] = fminf(u, v) * 2.0f;
  y[5 * i + 1] = fmaxf(u, v) * 3.0f;
  y[5 * i + 2] = copysignf(u * u + 1.0f, v);
  y[5 * i + 3] = fabsf(u) * v;
  y[5 * i + 4] = floorf(4.0f * u) + u * v;
}

// ---------------------------------------------------------------- early exits
// whole warps leave before a __syncwarp (legal): the rest reduces through shared memory
extern "C" __global__ void warp_exit_then_syncwarp(const double* __restrict__ x, double* __restrict__ out,
                                                   int active_warps) {
  __shared__ double s[64];
  int t = threadIdx.x, warp = t / 32, lane = t & 31;
  if (warp >= active_warps) return;
  s[t] = x[blockIdx.x * 64 + t] * x[blockIdx.x * 64 + t];
  __syncwarp();
  for (int h = 16; h > 0; h >>= 1) {
    double o = lane < h ? s[t + h] : 0.0;
    __syncwarp();
    if (lane < h) s[t] += o;
    __syncwarp();
  }
  if (lane == 0) out[blockIdx.x * 2 + warp] = s[t];
}

// whole warps leave before a __syncthreads: undefined in CUDA, must be refused
extern "C" __global__ void warp_exit_then_syncthreads(const double* __restrict__ x, double* __restrict__ out,
                                                      int active_warps) {
  __shared__ double s[64];
  int t = threadIdx.x, warp = t / 32;
  if (warp >= active_warps) return;
  s[t] = x[blockIdx.x * 64 + t];
  __syncthreads();
  out[blockIdx.x * 64 + t] = s[t] * s[t ^ 1];
}

// ---------------------------------------------------------------- more layouts, bits and branches
// a double shuffled as two 32-bit halves (code written before CUDA had double shuffles)
__device__ __forceinline__ double shfl_xor_halves(double v, int m) {
  int hi = __double2hiint(v), lo = __double2loint(v);
  hi = __shfl_xor_sync(FULL_MASK, hi, m);
  lo = __shfl_xor_sync(FULL_MASK, lo, m);
  return __hiloint2double(hi, lo);
}
extern "C" __global__ void double_halves_allreduce(const double* __restrict__ x, double* __restrict__ y) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  double v = x[i] * x[i];
  for (int m = 16; m > 0; m >>= 1) v += shfl_xor_halves(v, m);
  y[i] = x[i] / sqrt(v);
}
// the same through __double_as_longlong
extern "C" __global__ void double_bits_allreduce(const double* __restrict__ x, double* __restrict__ y) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  double v = x[i] * x[i];
  for (int m = 16; m > 0; m >>= 1)
    v += __longlong_as_double(__shfl_xor_sync(FULL_MASK, __double_as_longlong(v), m));
  y[i] = x[i] / sqrt(v);
}
// partial unrolling of a loop with a runtime trip count
extern "C" __global__ void unroll4_runtime(const float* __restrict__ x, float* __restrict__ y, int per_thread) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  float acc = 0.0f;
#pragma unroll 4
  for (int k = 0; k < per_thread; ++k) acc += sinf(x[i * per_thread + k]) * (float)(k + 1);
  y[i] = acc;
}
// weighted histogram in shared memory with float atomics, merged into global with atomicAdd
extern "C" __global__ void shared_float_histogram(const int* __restrict__ bin, const float* __restrict__ w,
                                                  float* __restrict__ hist, int n) {
  __shared__ float local[16];
  int t = threadIdx.x, i = blockIdx.x * blockDim.x + t;
  if (t < 16) local[t] = 0.0f;
  __syncthreads();
  if (i < n) atomicAdd(&local[bin[i] & 15], w[i] * w[i]);
  __syncthreads();
  if (t < 16) atomicAdd(&hist[t], local[t]);
}
// rows through a pointer with negative offsets
extern "C" __global__ void row_pointer_neighbors(const double* __restrict__ x, double* __restrict__ y, int cols) {
  int r = blockIdx.x, c = threadIdx.x + 1;
  const double* row = x + (size_t)r * cols + c;
  if (c < cols - 1) y[r * cols + c] = row[-1] * row[1] - row[0] * row[0];
}
// the last block handles the remainder under a block-uniform branch holding a barrier
extern "C" __global__ void last_block_tail(const float* __restrict__ x, float* __restrict__ out, int n) {
  __shared__ float s[64];
  int t = threadIdx.x, i = blockIdx.x * 64 + t;
  s[t] = i < n ? x[i] : 0.0f;
  __syncthreads();
  if (blockIdx.x == gridDim.x - 1) {
    s[t] = s[t] * s[t];
    __syncthreads();
    if (i < n) out[i] = s[t] + s[63 - t];
  } else {
    out[i] = s[t] * s[(t + 1) & 63];
  }
}
// a parameter struct holding pointers, as many codes pass their arguments
struct Args { const float* x; float* y; int n; float a; };
extern "C" __global__ void struct_of_pointers(Args p) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < p.n) p.y[i] = p.a * p.x[i];
}
// a shared union: the same 64 words as floats and as ints (keys packed with values)
union Word { float f; int i; };
extern "C" __global__ void shared_union(const float* __restrict__ x, float* __restrict__ y) {
  __shared__ Word s[64];
  int t = threadIdx.x, i = blockIdx.x * 64 + t;
  s[t].f = x[i];
  __syncthreads();
  int bits = s[63 - t].i;
  y[i] = __int_as_float(bits) * x[i];
}
// a shuffle whose source lane comes from data, within segments of 8 lanes
extern "C" __global__ void data_lane_width8(const double* __restrict__ x, const int* __restrict__ src,
                                            double* __restrict__ y) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  double v = x[i] * x[i];
  y[i] = __shfl_sync(FULL_MASK, v, src[i], 8) + x[i];
}

// ---------------------------------------------------------------- one element stored by many threads
// every thread of the block stores the block's result (the same value), no "if (t == 0)"
extern "C" __global__ void all_threads_store_result(const double* __restrict__ x, double* __restrict__ out) {
  __shared__ double s[64];
  int t = threadIdx.x;
  s[t] = x[blockIdx.x * 64 + t] * x[blockIdx.x * 64 + t];
  __syncthreads();
  for (int h = 32; h > 0; h >>= 1) {
    if (t < h) s[t] += s[t + h];
    __syncthreads();
  }
  out[blockIdx.x] = sqrt(s[0]);
}
// a loop whose trip count thread 0 computes into shared memory, with barriers in the body
extern "C" __global__ void shared_trip_count(const double* __restrict__ x, double* __restrict__ y,
                                             const int* __restrict__ rounds) {
  __shared__ int count;
  __shared__ double s[64];
  int t = threadIdx.x, i = blockIdx.x * 64 + t;
  if (t == 0) count = rounds[blockIdx.x];
  double v = x[i];
  __syncthreads();
  for (int k = 0; k < count; ++k) {
    s[t] = v;
    __syncthreads();
    v = 0.5 * v + 0.25 * s[(t + 1) & 63] * s[(t + 63) & 63];
    __syncthreads();
  }
  y[i] = v;
}
// every thread stores the same scalar-parameter product into one slot
extern "C" __global__ void same_value_everywhere(const double* __restrict__ x, double* __restrict__ out, double a) {
  out[0] = a * x[0];
}
"""

# Block votes and the threadfence reduction: CUDA functions the header may lack, compiled on their own
# so that the kernels above do not depend on them.
BLOCK_SYNC = r"""
// __syncthreads_count: each value scaled by how many of the block are positive
extern "C" __global__ void syncthreads_count_scale(const float* __restrict__ x, float* __restrict__ y) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  float v = x[i];
  int positives = __syncthreads_count(v > 0.0f);
  y[i] = v * (float)positives;
}

// __syncthreads_or / _and choose the formula of the whole block
extern "C" __global__ void syncthreads_and_or(const float* __restrict__ x, float* __restrict__ y) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  float v = x[i];
  int any_big = __syncthreads_or(fabsf(v) > 2.0f);
  int all_pos = __syncthreads_and(v > -3.0f);
  y[i] = any_big ? v * v : (all_pos ? sinf(v) : v);
}

// ---------------------------------------------------------------- threadfence reduction (CUDA sample)
__device__ unsigned int retirementCount = 0;

extern "C" __global__ void threadfence_sum(const float* __restrict__ x, float* partial, float* total) {
  __shared__ float s[64];
  __shared__ bool amLast;
  int t = threadIdx.x, i = blockIdx.x * 64 + t;
  float v = x[i];
  s[t] = v * v;
  __syncthreads();
  for (int h = 32; h > 0; h >>= 1) {
    if (t < h) s[t] += s[t + h];
    __syncthreads();
  }
  if (t == 0) {
    partial[blockIdx.x] = s[0];
    __threadfence();
    unsigned int ticket = atomicInc(&retirementCount, gridDim.x);
    amLast = (ticket == gridDim.x - 1);
  }
  __syncthreads();
  if (amLast && t == 0) {
    float sum = 0.0f;
    for (unsigned b = 0; b < gridDim.x; ++b) sum += partial[b];
    total[0] = sum;
    retirementCount = 0;
  }
}

// the same with an int flag
__device__ unsigned int retirementCountInt = 0;

extern "C" __global__ void threadfence_sum_int(const float* __restrict__ x, float* partial, float* total) {
  __shared__ float s[64];
  __shared__ int amLast;
  int t = threadIdx.x, i = blockIdx.x * 64 + t;
  float v = x[i];
  s[t] = v * v;
  __syncthreads();
  for (int h = 32; h > 0; h >>= 1) {
    if (t < h) s[t] += s[t + h];
    __syncthreads();
  }
  if (t == 0) {
    partial[blockIdx.x] = s[0];
    __threadfence();
    unsigned int ticket = atomicInc(&retirementCountInt, gridDim.x);
    amLast = (ticket == gridDim.x - 1);
  }
  __syncthreads();
  if (amLast && t == 0) {
    float sum = 0.0f;
    for (unsigned b = 0; b < gridDim.x; ++b) sum += partial[b];
    total[0] = sum;
    retirementCountInt = 0;
  }
}
"""
