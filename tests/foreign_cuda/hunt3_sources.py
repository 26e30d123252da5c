"""CUDA sources for the third soundness hunt (test_cuda_hunt3.py), written as molecular-dynamics codes
(LAMMPS-GPU, HOOMD) and llm.c / PyTorch kernels write them: neighbor-list pair forces with minimum images
and Newton's third law through atomics, one warp per row with early returns, packed 128-bit loads, fast
intrinsics, templated block reductions, grid-stride loops, in-place updates and carved shared memory.
Every kernel must give the right derivative or a clear refusal."""

HUNT3 = r"""
#define FULL_MASK 0xffffffffu
// ---------------------------------------------------------------- molecular dynamics
// LAMMPS-GPU style: half neighbor list, minimum image with rintf, Newton's third law with
// atomicAdd on both atoms, the energy atomically added to one double; lj1/lj2 by type pair
extern "C" __global__ void lj_half_nlist(const float* __restrict__ pos, const int* __restrict__ type,
                                         const int* __restrict__ nlist, const int* __restrict__ nnei,
                                         int maxn, const float* __restrict__ eps, const float* __restrict__ sig,
                                         int ntypes, float box, float rc2, float* f, double* energy, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float xi = pos[3 * i], yi = pos[3 * i + 1], zi = pos[3 * i + 2];
  int ti = type[i];
  float fxi = 0.f, fyi = 0.f, fzi = 0.f;
  double e = 0.0;
  float inv_box = 1.0f / box;
  for (int k = 0; k < nnei[i]; k++) {
    int j = nlist[i * maxn + k];
    float dx = xi - pos[3 * j], dy = yi - pos[3 * j + 1], dz = zi - pos[3 * j + 2];
    dx -= box * rintf(dx * inv_box);
    dy -= box * rintf(dy * inv_box);
    dz -= box * rintf(dz * inv_box);
    float r2 = dx * dx + dy * dy + dz * dz;
    if (r2 < rc2) {
      int tt = ti * ntypes + type[j];
      float s2 = sig[tt] * sig[tt];
      float r2inv = 1.0f / r2;
      float sr6 = s2 * s2 * s2 * r2inv * r2inv * r2inv;
      float fpair = 24.0f * eps[tt] * sr6 * (2.0f * sr6 - 1.0f) * r2inv;
      fxi += dx * fpair; fyi += dy * fpair; fzi += dz * fpair;
      atomicAdd(&f[3 * j], -dx * fpair);
      atomicAdd(&f[3 * j + 1], -dy * fpair);
      atomicAdd(&f[3 * j + 2], -dz * fpair);
      e += (double)(4.0f * eps[tt] * sr6 * (sr6 - 1.0f));
    }
  }
  atomicAdd(&f[3 * i], fxi);
  atomicAdd(&f[3 * i + 1], fyi);
  atomicAdd(&f[3 * i + 2], fzi);
  atomicAdd(energy, e);
}

// HOOMD style: Scalar4 position with the type in w as int bits, full neighbor list with head_list,
// __ldg of float4, energy per particle (half of each pair), minimum image through floorf
extern "C" __global__ void lj_full_hoomd(float4* __restrict__ d_force, const float4* __restrict__ d_pos,
                                        const unsigned int* __restrict__ d_n_neigh,
                                        const unsigned int* __restrict__ d_nlist,
                                        const unsigned int* __restrict__ d_head_list,
                                        const float2* __restrict__ d_params, int ntypes, float L, float rcutsq,
                                        unsigned int N) {
  unsigned int idx = blockIdx.x * blockDim.x + threadIdx.x;
  if (idx >= N) return;
  float4 postype = __ldg(d_pos + idx);
  int typei = __float_as_int(postype.w);
  unsigned int n_neigh = d_n_neigh[idx];
  unsigned int head = d_head_list[idx];
  float4 force = make_float4(0.f, 0.f, 0.f, 0.f);
  for (unsigned int k = 0; k < n_neigh; k++) {
    unsigned int j = __ldg(d_nlist + head + k);
    float4 pj = __ldg(d_pos + j);
    int typej = __float_as_int(pj.w);
    float dx = postype.x - pj.x, dy = postype.y - pj.y, dz = postype.z - pj.z;
    dx -= L * floorf(dx / L + 0.5f);
    dy -= L * floorf(dy / L + 0.5f);
    dz -= L * floorf(dz / L + 0.5f);
    float rsq = dx * dx + dy * dy + dz * dz;
    float2 p = __ldg(d_params + typei * ntypes + typej);   // lj1 = 4 eps sig^12, lj2 = 4 eps sig^6
    if (rsq < rcutsq) {
      float r2inv = 1.0f / rsq;
      float r6inv = r2inv * r2inv * r2inv;
      float force_divr = r2inv * r6inv * (12.0f * p.x * r6inv - 6.0f * p.y);
      float pair_eng = r6inv * (p.x * r6inv - p.y);
      force.x += dx * force_divr; force.y += dy * force_divr; force.z += dz * force_divr;
      force.w += 0.5f * pair_eng;
    }
  }
  d_force[idx] = force;
}

// ---------------------------------------------------------------- llm.c style
#define WARP_SIZE 32
// llm.c's Packed128: 16 bytes moved as one int4, the payload reached through memcpy
template<class ElementType>
struct alignas(16) Packed128 {
  Packed128() = default;
  __device__ explicit Packed128(int4 bits) { memcpy(&payload, &bits, sizeof(bits)); }
  __device__ ElementType& operator[](int index) { return payload[index]; }
  __device__ const ElementType& operator[](int index) const { return payload[index]; }
  __device__ int4 get_bits() const { int4 bits; memcpy(&bits, &payload, sizeof(bits)); return bits; }
  static constexpr const size_t size = sizeof(int4) / sizeof(ElementType);
  ElementType payload[size];
};
typedef Packed128<float> f128;
template<class ElementType>
__device__ Packed128<ElementType> load128cs(const ElementType* address) {
  return Packed128<ElementType>{__ldcs(reinterpret_cast<const int4*>(address))};
}
template<class ElementType>
__device__ void store128(ElementType* target, Packed128<ElementType> value) {
  *reinterpret_cast<int4*>(target) = value.get_bits();
}

#define GELU_SCALING_FACTOR sqrtf(2.0f / M_PI)
extern "C" __global__ void gelu_forward_kernel2(float* out, const float* inp, int N) {
  int i = (blockIdx.x * blockDim.x + threadIdx.x) * f128::size;
  if (i < N) {
    f128 packed_out;
    f128 packed_inp = load128cs(inp + i);
    for (int k = 0; k < packed_inp.size; ++k) {
      float xi = (float)packed_inp[k];
      float cube = 0.044715f * xi * xi * xi;
      packed_out[k] = (float)(0.5f * xi * (1.0f + tanhf(GELU_SCALING_FACTOR * (xi + cube))));
    }
    store128(out + i, packed_out);
  }
}

// one warp per row: max and sum through __shfl_xor_sync, __expf, the reciprocal once
__device__ float warpReduceMax(float val) {
  for (int offset = 16; offset > 0; offset /= 2) val = fmaxf(val, __shfl_xor_sync(0xFFFFFFFF, val, offset));
  return val;
}
__device__ float warpReduceSum(float val) {
  for (int offset = 16; offset > 0; offset /= 2) val += __shfl_xor_sync(0xFFFFFFFF, val, offset);
  return val;
}
extern "C" __global__ void softmax_forward_kernel7(float* __restrict__ out, const float* __restrict__ inp, int N, int C) {
  int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  int idx = blockIdx.x * (blockDim.x / 32) + warp;
  if (idx >= N) return;
  const float* x = inp + idx * C;
  float maxval = -INFINITY;
  for (int i = lane; i < C; i += 32) maxval = fmaxf(maxval, __ldg(x + i));
  maxval = warpReduceMax(maxval);
  float sumval = 0.0f;
  for (int i = lane; i < C; i += 32) sumval += __expf(x[i] - maxval);
  sumval = warpReduceSum(sumval);
  float inv = __frcp_rn(sumval);
#pragma unroll 4
  for (int i = lane; i < C; i += 32) out[idx * C + i] = __expf(x[i] - maxval) * inv;
}

// causal attention softmax with a scale, __fdividef at the end
extern "C" __global__ void softmax_autoregressive(float* att, const float* preatt, int T, float inv_temperature) {
  int lane = threadIdx.x % WARP_SIZE, warp = threadIdx.x / WARP_SIZE;
  int row = blockIdx.x * (blockDim.x / WARP_SIZE) + warp;   // row = t
  if (row >= T) return;
  const float* x = preatt + row * T;
  float maxval = -FLT_MAX, sumval = 0.0f;
  for (int i = lane; i <= row; i += WARP_SIZE) {
    float old = maxval;
    maxval = fmaxf(maxval, x[i]);
    sumval *= __expf(inv_temperature * (old - maxval));
    sumval += __expf(inv_temperature * (x[i] - maxval));
  }
  float global_max = warpReduceMax(maxval);
  sumval *= __expf(inv_temperature * (maxval - global_max));
  float sum = warpReduceSum(sumval);
  for (int i = lane; i < T; i += WARP_SIZE)
    att[row * T + i] = i <= row ? __fdividef(__expf(inv_temperature * (x[i] - global_max)), sum) : 0.0f;
}

// layernorm, one warp per row, mean and rstd stored with __stcs
extern "C" __global__ void layernorm_forward_warp(float* __restrict__ out, float* __restrict__ mean,
                                                  float* __restrict__ rstd, const float* __restrict__ inp,
                                                  const float* __restrict__ weight, const float* __restrict__ bias,
                                                  int N, int C) {
  int lane = threadIdx.x % 32;
  int idx = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
  if (idx >= N) return;
  const float* x = inp + idx * C;
  float sum = 0.0f;
  for (int i = lane; i < C; i += 32) sum += x[i];
  sum = warpReduceSum(sum);
  float m = sum / C;
  if (lane == 0 && mean != nullptr) __stcs(mean + idx, m);
  sum = 0.0f;
  for (int i = lane; i < C; i += 32) { float diff = x[i] - m; sum += diff * diff; }
  sum = warpReduceSum(sum);
  float s = rsqrtf(sum / C + 1e-5f);
  if (lane == 0 && rstd != nullptr) __stcs(rstd + idx, s);
  float* o = out + idx * C;
  for (int c = lane; c < C; c += 32) {
    float n = s * (__ldcs(x + c) - m);
    __stcs(o + c, n * weight[c] + bias[c]);
  }
}

// rotary embeddings with sincosf's pointer outputs
extern "C" __global__ void rope_forward(float* out, const float* inp, int T, int HS, float theta) {
  int idx = blockIdx.x * blockDim.x + threadIdx.x;
  int half = HS / 2;
  if (idx >= T * half) return;
  int t = idx / half, d = idx % half;
  float freq = powf(theta, -2.0f * d / HS);
  float s, c;
  sincosf(t * freq, &s, &c);
  const float* x = inp + t * HS;
  float a = x[2 * d], b = x[2 * d + 1];
  out[t * HS + 2 * d] = a * c - b * s;
  out[t * HS + 2 * d + 1] = a * s + b * c;
}

// ---------------------------------------------------------------- speculation that must stop
// whole warps leave, then a loop whose exit depends on the data (not counted): refused
extern "C" __global__ void halving_after_exit(const float* x, float* y, int rows) {
  int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32, lane = threadIdx.x % 32;
  if (row >= rows) return;
  float v = x[row * 32 + lane];
  int k = 0;
  while (fabsf(v) > 0.125f) { v *= 0.5f; k++; }
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  y[row * 32 + lane] = v * k;
}

// warp 0 scans a list of flags to its first set one (a block-uniform loop): the other warps, running the
// body speculatively, would read zeros and never leave it
extern "C" __global__ void first_flag_then_reduce(const int* flags, const float* x, float* out) {
  int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (warp == 0) {
    int k = 0;
    while (flags[k] == 0) k++;
    float v = x[blockIdx.x * 32 + lane] * k;
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    if (lane == 0) out[blockIdx.x] = v;
  }
}
"""
