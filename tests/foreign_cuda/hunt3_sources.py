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

// ---------------------------------------------------------------- block reductions, in place, warps
// llm.c's blockReduce: the warp reduction is a template parameter (a function pointer)
template<float (*warp_reduction)(float)>
__device__ inline float blockReduce(float val, bool final_sync = false, float out_of_bounds = 0.0f) {
  __shared__ float shared_val[WARP_SIZE];
  const int lane_id = threadIdx.x % WARP_SIZE;
  const int warp_id = threadIdx.x / WARP_SIZE;
  const int num_warps = blockDim.x / WARP_SIZE;
  float warp_val = warp_reduction(val);
  if (lane_id == 0) { shared_val[warp_id] = warp_val; }
  __syncthreads();
  warp_val = (lane_id < num_warps) ? shared_val[lane_id] : out_of_bounds;
  float block_val = warp_reduction(warp_val);
  if (final_sync) { __syncthreads(); }
  return block_val;
}

// one block per row: softmax and cross-entropy loss with its gradient (llm.c's fused classifier, simplified)
extern "C" __global__ void __launch_bounds__(128) fused_classifier(float* __restrict__ losses, float* __restrict__ probs,
                                                                 const float* __restrict__ logits,
                                                                 const int* __restrict__ targets, int V) {
  int row = blockIdx.x;
  const float* x = logits + row * V;
  float m = -FLT_MAX;
  for (int i = threadIdx.x; i < V; i += blockDim.x) m = fmaxf(m, __ldcs(x + i));
  m = blockReduce<warpReduceMax>(m, true, -FLT_MAX);
  float s = 0.0f;
  for (int i = threadIdx.x; i < V; i += blockDim.x) s += expf(x[i] - m);
  s = blockReduce<warpReduceSum>(s);
  float inv = 1.0f / s;
  int ix = targets[row];
  if (threadIdx.x == 0) losses[row] = -logf(expf(x[ix] - m) * inv);
  for (int i = threadIdx.x; i < V; i += blockDim.x) probs[row * V + i] = expf(x[i] - m) * inv;
}

// layernorm statistics with one block reduction called twice: without final_sync the second call's
// lane 0 writes shared_val[warp] while other warps may still read it from the first call (a race)
template <bool SYNC>
__device__ void row_stats(float* __restrict__ out, const float* __restrict__ x, int C) {
  const float* r = x + blockIdx.x * C;
  float s = 0.0f, q = 0.0f;
  for (int i = threadIdx.x; i < C; i += blockDim.x) { s += r[i]; q += r[i] * r[i]; }
  s = blockReduce<warpReduceSum>(s, SYNC);
  q = blockReduce<warpReduceSum>(q);
  float mean = s / C;
  if (threadIdx.x == 0) out[blockIdx.x] = rsqrtf(q / C - mean * mean + 1e-5f);
}
extern "C" __global__ void row_rstd_synced(float* out, const float* x, int C) { row_stats<true>(out, x, C); }
extern "C" __global__ void row_rstd_racy(float* out, const float* x, int C) { row_stats<false>(out, x, C); }

// a templated block size, explicit instantiations behind extern "C" wrappers; grid-stride loop, a block
// reduction in shared memory, then one atomicAdd of the block's partial into one scalar
template <int BLOCK>
__device__ void sum_squares_impl(const double* __restrict__ x, double* __restrict__ total, int n) {
  __shared__ double s[BLOCK];
  double acc = 0.0;
  for (int i = blockIdx.x * BLOCK + threadIdx.x; i < n; i += BLOCK * gridDim.x) acc += x[i] * x[i];
  s[threadIdx.x] = acc;
  __syncthreads();
#pragma unroll
  for (int h = BLOCK / 2; h > 0; h >>= 1) {
    if (threadIdx.x < h) s[threadIdx.x] += s[threadIdx.x + h];
    __syncthreads();
  }
  if (threadIdx.x == 0) atomicAdd(total, s[0]);
}
template __device__ void sum_squares_impl<64>(const double*, double*, int);
extern "C" __global__ void __launch_bounds__(64) sum_squares_64(const double* x, double* total, int n) {
  sum_squares_impl<64>(x, total, n);
}
extern "C" __global__ void __launch_bounds__(128) sum_squares_128(const double* x, double* total, int n) {
  sum_squares_impl<128>(x, total, n);
}

// two-pass reduction: per-block partials of a weighted norm, then one block combines them
extern "C" __global__ void partial_norms(const float* __restrict__ x, const float* __restrict__ w,
                                        float* __restrict__ partial, int n) {
  float acc = 0.0f;
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) acc += w[i] * x[i] * x[i];
  acc = warpReduceSum(acc);
  __shared__ float warp_sums[32];
  int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  if (lane == 0) warp_sums[warp] = acc;
  __syncthreads();
  if (warp == 0) {
    acc = lane < blockDim.x / 32 ? warp_sums[lane] : 0.0f;
    acc = warpReduceSum(acc);
    if (lane == 0) partial[blockIdx.x] = acc;
  }
}
extern "C" __global__ void finish_norm(const float* __restrict__ partial, float* __restrict__ out, int nparts) {
  float acc = 0.0f;
  for (int i = threadIdx.x; i < nparts; i += blockDim.x) acc += partial[i];
  acc = warpReduceSum(acc);
  if (threadIdx.x == 0) out[0] = sqrtf(acc);
}

// ---------------------------------------------------------------- in place
// y += A x, accumulating in the output (read and written in the loop)
extern "C" __global__ void gemv_accumulate(const double* __restrict__ A, const double* __restrict__ x, double* y,
                                           int m, int n) {
  int row = blockIdx.x * blockDim.x + threadIdx.x;
  if (row >= m) return;
  for (int k = 0; k < n; k++) y[row] += A[row * n + k] * x[k];
}
// a few Newton steps for sqrt(c) in place in the output, with fast reciprocals
extern "C" __global__ void newton_in_place(float* y, const float* __restrict__ c, int n, int steps) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  for (int s = 0; s < steps; s++) y[i] = 0.5f * (y[i] + __fdividef(c[i], y[i]));
}
// a non-negative float max through the int atomicMax on its bits (a common trick)
extern "C" __global__ void atomic_max_bits(const float* __restrict__ x, float* m, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) atomicMax((int*)m, __float_as_int(fabsf(x[i])));
}

// ---------------------------------------------------------------- shared memory and warps
// one extern __shared__ buffer carved into values and their indices at blockDim-sized offsets: each
// block's argmax, then the value at the argmax times a weight
extern "C" __global__ void carved_argmax(const float* __restrict__ x, const float* __restrict__ w,
                                         float* __restrict__ out, int* __restrict__ where) {
  extern __shared__ float smem[];
  float* vals = smem;
  int* idx = reinterpret_cast<int*>(smem + blockDim.x);
  int t = threadIdx.x, i = blockIdx.x * blockDim.x + t;
  vals[t] = x[i];
  idx[t] = i;
  __syncthreads();
  for (int h = blockDim.x / 2; h > 0; h >>= 1) {
    if (t < h && vals[t + h] > vals[t]) { vals[t] = vals[t + h]; idx[t] = idx[t + h]; }
    __syncthreads();
  }
  if (t == 0) { out[blockIdx.x] = vals[0] * w[idx[0]]; where[blockIdx.x] = idx[0]; }
}
// __syncwarp with a partial mask inside a half-warp branch, a shared exchange between its lanes
extern "C" __global__ void half_warp_syncwarp(const float* __restrict__ x, float* __restrict__ y) {
  __shared__ float s[64];
  int t = threadIdx.x, lane = t % 32, i = blockIdx.x * blockDim.x + t;
  float v = x[i];
  if (lane < 16) {
    s[t] = v * v;
    __syncwarp(0x0000ffffu);
    v = v + s[t ^ 1];
    __syncwarp(0x0000ffffu);
  }
  y[i] = v;
}
// __ballot_sync deciding the path: a warp in which every value is positive takes logs, the others squares
extern "C" __global__ void ballot_branch(const float* __restrict__ x, float* __restrict__ y) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  float v = x[i];
  unsigned pos = __ballot_sync(FULL_MASK, v > 0.0f);
  if (pos == FULL_MASK) y[i] = logf(v) * __popc(pos);
  else y[i] = v * v * (__ffs(~pos) - 1);
}

// ---------------------------------------------------------------- more molecular dynamics
// cell list: the particle's cell from floorf, 27 neighbor cells wrapped periodically, each pair counted from
// both sides (full forces, no atomics), the energy reduced in the block and added to one double
extern "C" __global__ void lj_cells(const float4* __restrict__ pos, const int* __restrict__ cell_start,
                                    const int* __restrict__ cell_count, const int* __restrict__ sorted,
                                    int nc, float L, float rc2, float eps, float sig2,
                                    float4* __restrict__ force, double* __restrict__ energy, int n) {
  __shared__ double e_block[64];
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  double e = 0.0;
  if (i < n) {
    float4 p = pos[i];
    float inv_cell = nc / L;
    int cx = (int)floorf(p.x * inv_cell), cy = (int)floorf(p.y * inv_cell), cz = (int)floorf(p.z * inv_cell);
    float fx = 0.f, fy = 0.f, fz = 0.f;
    for (int dz = -1; dz <= 1; dz++)
      for (int dy = -1; dy <= 1; dy++)
        for (int dx = -1; dx <= 1; dx++) {
          int c = (((cz + dz + nc) % nc) * nc + (cy + dy + nc) % nc) * nc + (cx + dx + nc) % nc;
          int start = cell_start[c], count = cell_count[c];
          for (int k = 0; k < count; k++) {
            int j = sorted[start + k];
            if (j == i) continue;
            float4 q = pos[j];
            float rx = p.x - q.x, ry = p.y - q.y, rz = p.z - q.z;
            rx -= L * rintf(rx / L); ry -= L * rintf(ry / L); rz -= L * rintf(rz / L);
            float r2 = rx * rx + ry * ry + rz * rz;
            if (r2 < rc2) {
              float s6 = sig2 / r2; s6 = s6 * s6 * s6;
              float fr = 24.0f * eps * s6 * (2.0f * s6 - 1.0f) / r2;
              fx += fr * rx; fy += fr * ry; fz += fr * rz;
              e += 2.0 * eps * s6 * (s6 - 1.0f);
            }
          }
        }
    force[i] = make_float4(fx, fy, fz, 0.0f);
  }
  e_block[threadIdx.x] = e;
  __syncthreads();
  for (int h = blockDim.x / 2; h > 0; h >>= 1) {
    if (threadIdx.x < h) e_block[threadIdx.x] += e_block[threadIdx.x + h];
    __syncthreads();
  }
  if (threadIdx.x == 0) atomicAdd(energy, e_block[0]);
}

// OpenMM-style tiles: one warp per pair of 32-atom tiles; the j atom and its force rotate through the
// warp with __shfl_sync, both forces land with atomicAdd (Newton's third law), per-pair charges q_i q_j
extern "C" __global__ void tile_coulomb(const float4* __restrict__ posq, const int2* __restrict__ tiles,
                                        float* __restrict__ force, double* __restrict__ energy, float soft2) {
  int lane = threadIdx.x & 31;
  int2 tile = tiles[blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32];
  int i = tile.x * 32 + lane;
  float4 pi = posq[i];
  int j = tile.y * 32 + lane;
  float4 pj = posq[j];
  float fix = 0.f, fiy = 0.f, fiz = 0.f, fjx = 0.f, fjy = 0.f, fjz = 0.f;
  double e = 0.0;
  for (int k = 0; k < 32; k++) {
    int jj = tile.y * 32 + ((lane + k) & 31);
    bool pair = tile.x != tile.y || jj > i;
    if (pair) {
      float dx = pj.x - pi.x, dy = pj.y - pi.y, dz = pj.z - pi.z;
      float r2 = dx * dx + dy * dy + dz * dz + soft2;
      float inv = rsqrtf(r2);
      float qq = pi.w * pj.w;
      float f = qq * inv * inv * inv;
      fix -= f * dx; fiy -= f * dy; fiz -= f * dz;
      fjx += f * dx; fjy += f * dy; fjz += f * dz;
      e += qq * inv;
    }
    int src = (lane + 1) & 31;
    pj.x = __shfl_sync(FULL_MASK, pj.x, src); pj.y = __shfl_sync(FULL_MASK, pj.y, src);
    pj.z = __shfl_sync(FULL_MASK, pj.z, src); pj.w = __shfl_sync(FULL_MASK, pj.w, src);
    fjx = __shfl_sync(FULL_MASK, fjx, src); fjy = __shfl_sync(FULL_MASK, fjy, src);
    fjz = __shfl_sync(FULL_MASK, fjz, src);
  }
  atomicAdd(&force[3 * i], fix); atomicAdd(&force[3 * i + 1], fiy); atomicAdd(&force[3 * i + 2], fiz);
  atomicAdd(&force[3 * j], fjx); atomicAdd(&force[3 * j + 1], fjy); atomicAdd(&force[3 * j + 2], fjz);
  atomicAdd(energy, e);
}

// harmonic bonds from an int2 list, per-type constants, both ends through atomicAdd
extern "C" __global__ void harmonic_bonds(const double* __restrict__ x, const int2* __restrict__ bonds,
                                          const int* __restrict__ btype, const double* __restrict__ k,
                                          const double* __restrict__ r0, double* f, double* energy, int nb) {
  int b = blockIdx.x * blockDim.x + threadIdx.x;
  if (b >= nb) return;
  int2 ij = bonds[b];
  int t = btype[b];
  double dx = x[3 * ij.y] - x[3 * ij.x], dy = x[3 * ij.y + 1] - x[3 * ij.x + 1], dz = x[3 * ij.y + 2] - x[3 * ij.x + 2];
  double r = sqrt(dx * dx + dy * dy + dz * dz);
  double dr = r - r0[t];
  double fr = -2.0 * k[t] * dr / r;
  atomicAdd(&f[3 * ij.x], -fr * dx); atomicAdd(&f[3 * ij.x + 1], -fr * dy); atomicAdd(&f[3 * ij.x + 2], -fr * dz);
  atomicAdd(&f[3 * ij.y], fr * dx); atomicAdd(&f[3 * ij.y + 1], fr * dy); atomicAdd(&f[3 * ij.y + 2], fr * dz);
  atomicAdd(energy, k[t] * dr * dr);
}

// velocity Verlet's second half-kick and drift in place, positions wrapped into the box
extern "C" __global__ void verlet_wrap(double* x, double* v, const double* __restrict__ f, const double* __restrict__ inv_m,
                                       double dt, double L, int n3) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n3) return;
  v[i] += 0.5 * dt * f[i] * inv_m[i / 3];
  x[i] += dt * v[i];
  x[i] -= L * floor(x[i] / L);
}

// Ewald real space with erfcf and an angle term with acosf and sincos (double)
extern "C" __global__ void ewald_real_angles(const float* __restrict__ r, const float* __restrict__ c,
                                             float* __restrict__ out, float alpha, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float e = erfcf(alpha * r[i]) / r[i];
  double s, co;
  sincos((double)acosf(c[i]), &s, &co);
  out[i] = e + (float)(s * co);
}

// ---------------------------------------------------------------- global memory between threads
// global scratch between barriers: legal within a block (a barrier orders global memory for the block)
extern "C" __global__ void global_scratch_neighbors(const float* __restrict__ x, float* tmp, float* y) {
  int t = threadIdx.x, i = blockIdx.x * blockDim.x + t;
  tmp[i] = sinf(x[i]) * x[i];
  __syncthreads();
  int j = blockIdx.x * blockDim.x + (t + 1) % blockDim.x;
  y[i] = tmp[i] * tmp[j] + x[i];
}
// the same, then the scratch overwritten after a second barrier (its old values are needed by the adjoint)
extern "C" __global__ void global_scratch_overwritten(const float* __restrict__ x, float* tmp, float* y) {
  int t = threadIdx.x, i = blockIdx.x * blockDim.x + t;
  tmp[i] = x[i] * x[i];
  __syncthreads();
  int j = blockIdx.x * blockDim.x + (t + 1) % blockDim.x;
  float v = tmp[i] * tmp[j];
  __syncthreads();
  tmp[i] = v;
  __syncthreads();
  y[i] = tmp[j] + expf(tmp[i]);
}
// an in-place stencil without a barrier: thread i reads x[i+1], which thread i+1 overwrites (a race)
extern "C" __global__ void inplace_stencil_race(float* x, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i + 1 < n) x[i] = x[i] + 0.5f * x[i + 1] * x[i + 1];
}
// in place with a barrier between the read and the write: legal within one block
extern "C" __global__ void inplace_stencil_synced(float* x, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  float next = (i + 1 < n && threadIdx.x + 1 < blockDim.x) ? x[i + 1] : 0.0f;
  __syncthreads();
  if (i < n) x[i] = x[i] + 0.5f * next * next;
}

// forces and the position update in one kernel: thread i moves x[i] while others read it through the list (a race)
extern "C" __global__ void move_while_reading(double* x, const int* __restrict__ nlist, const int* __restrict__ nnei,
                                              int maxn, double dt, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  double f = 0.0;
  for (int k = 0; k < nnei[i]; k++) { double d = x[nlist[i * maxn + k]] - x[i]; f += d * exp(-d * d); }
  x[i] += dt * f;
}
// energy accumulated into an InOut total
extern "C" __global__ void energy_into_total(const double* __restrict__ x, double* total, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) atomicAdd(total, 0.5 * x[i] * x[i]);
}

// ---------------------------------------------------------------- more llm.c
// llm.c encoder: token and position embeddings gathered by int index (tokens repeat: their gradients add up)
extern "C" __global__ void encoder_forward(float* __restrict__ out, const int* __restrict__ inp,
                                          const float* __restrict__ wte, const float* __restrict__ wpe,
                                          int B, int T, int C) {
  int idx = blockIdx.x * blockDim.x + threadIdx.x;
  if (idx >= B * T * C) return;
  int bt = idx / C, c = idx % C, t = bt % T;
  int ix = inp[bt];
  out[idx] = __ldcs(wte + ix * C + c) + wpe[t * C + c];
}
// one warp per row with a per-warp shared buffer and __syncwarp, whole warps returning first
extern "C" __global__ void warp_rows_shared(const float* __restrict__ x, float* __restrict__ y, int rows, int cols) {
  __shared__ float buf[4][32];
  int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  int row = blockIdx.x * (blockDim.x / 32) + warp;
  if (row >= rows) return;
  float acc = 0.0f;
  for (int c = lane; c < cols; c += 32) acc += x[row * cols + c] * x[row * cols + c];
  buf[warp][lane] = acc;
  __syncwarp();
  float total = 0.0f;
  for (int k = 0; k < 32; k++) total += buf[warp][(lane + k) % 32];
  __syncwarp();
  float inv = rsqrtf(total + 1e-3f);
  for (int c = lane; c < cols; c += 32) y[row * cols + c] = x[row * cols + c] * inv;
}
// llm.c's softmax backward for causal attention (a gradient kernel, differentiated again: second order)
extern "C" __global__ void softmax_backward_rows(float* __restrict__ dpreatt, const float* __restrict__ datt,
                                                 const float* __restrict__ att, int T, float scale) {
  int lane = threadIdx.x % 32, row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
  if (row >= T) return;
  const float* a = att + row * T;
  const float* da = datt + row * T;
  float local = 0.0f;
  for (int t2 = lane; t2 <= row; t2 += 32) local += a[t2] * da[t2];
  for (int o = 16; o > 0; o >>= 1) local += __shfl_xor_sync(FULL_MASK, local, o);
  for (int t2 = lane; t2 <= row; t2 += 32) dpreatt[row * T + t2] = scale * a[t2] * (da[t2] - local);
}
// a grid-stride loop whose warps reduce and whose lane 0 adds into one scalar (no block step)
extern "C" __global__ void grid_stride_warp_atomic_f(const float* __restrict__ x, float* __restrict__ out, int n) {
  float acc = 0.0f;
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) acc += __expf(x[i]);
  for (int o = 16; o > 0; o >>= 1) acc += __shfl_down_sync(FULL_MASK, acc, o);
  if ((threadIdx.x & 31) == 0) atomicAdd(out, acc);
}

// ---------------------------------------------------------------- chunks and emulated atomics
// one warp per row, a uniform chunk loop with a warp reduction inside each chunk, whole warps returning first
extern "C" __global__ void chunked_warp_sums(const float* __restrict__ x, float* __restrict__ y, int rows, int cols) {
  int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  int row = blockIdx.x * (blockDim.x / 32) + warp;
  if (row >= rows) return;
  float total = 0.0f;
  for (int c0 = 0; c0 < cols; c0 += 32) {
    float v = c0 + lane < cols ? x[row * cols + c0 + lane] : 0.0f;
    v = v * v;
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    total += sqrtf(v + 1.0f);
  }
  if (lane == 0) y[row] = total;
}
// a warp reduction per chunk up to the row's own length (causal): trip counts differ between warps
extern "C" __global__ void causal_chunks(const float* __restrict__ x, float* __restrict__ y, int rows) {
  int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  int row = blockIdx.x * (blockDim.x / 32) + warp;
  if (row >= rows) return;
  float total = 0.0f;
  for (int c0 = 0; c0 <= row; c0 += 32) {
    float v = c0 + lane <= row ? x[row * rows + c0 + lane] : 0.0f;
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    total += v * v;
  }
  if (lane == 0) y[row] = total;
}
// pre-sm_60 double atomicAdd through atomicCAS on the bits
__device__ double atomicAddD(double* address, double val) {
  unsigned long long* address_as_ull = (unsigned long long*)address;
  unsigned long long old = *address_as_ull, assumed;
  do {
    assumed = old;
    old = atomicCAS(address_as_ull, assumed, __double_as_longlong(val + __longlong_as_double(assumed)));
  } while (assumed != old);
  return __longlong_as_double(old);
}
extern "C" __global__ void energy_cas_double(const double* __restrict__ x, double* e, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) atomicAddD(e, x[i] * x[i]);
}

// float bits parked in an int scratch array and read back through an atomic: the derivative must not be lost
extern "C" __global__ void bits_round_trip(const float* __restrict__ x, int* scratch, float* y) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  scratch[i] = __float_as_int(x[i] * 2.0f);
  int back = atomicAdd(&scratch[i], 0);
  y[i] = __int_as_float(back) * x[i];
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

# Loops counting down under a speculated early return: clang -O2 unrolls them with a remainder loop that an
# equality test leaves (refused: its end is not proven); compiled at -O1 they are counted loops.
COUNT_DOWN = r"""
// one warp per row walking its columns from the end, whole warps returning first
extern "C" __global__ void warp_rows_backwards(const float* __restrict__ x, float* __restrict__ y, int rows, int cols) {
  int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  int row = blockIdx.x * (blockDim.x / 32) + warp;
  if (row >= rows) return;
  float run = 0.0f;
  for (int c = cols - 1 - lane; c >= 0; c -= 32) run = run * 0.5f + x[row * cols + c];
  for (int o = 16; o > 0; o >>= 1) run += __shfl_xor_sync(0xffffffffu, run, o);
  for (int c = cols - 1 - lane; c >= 0; c -= 32) y[row * cols + c] = x[row * cols + c] * run;
}
// counting down towards a bound that the counter starts below: the first test leaves at once
extern "C" __global__ void warp_rows_up_test_down(const float* __restrict__ x, float* __restrict__ y, int rows) {
  int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  int row = blockIdx.x * (blockDim.x / 32) + warp;
  if (row >= rows) return;
  float v = x[row * 32 + lane];
  for (int k = lane; k > 3; k -= 5) v = v * 0.5f + 1.0f;
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  y[row * 32 + lane] = v;
}
"""
