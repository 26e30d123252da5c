"""CUDA sources in the styles of NVIDIA's samples and the common tutorials (test_samples_style.py),
for idioms the hunts (hunt_sources.py, hunt2_sources.py) did not cover: the reduction series
(interleaved addressing with %, strided index, first add during load, the volatile warp tail with
and without __syncwarp, the blockSize cascade), grid-stride loads with one atomic per block, the
diagonal transpose, the samples' matrixMul, a bank-conflict-free scan, the tutorial stencil, a
warp-per-row softmax, float4 reads of shared memory, a separable row convolution, and a warp per
row of a matrix-vector product. Written from the idioms, not copied."""

SAMPLES = r"""
#define FULL 0xffffffffu

// the samples' way to one extern __shared__ buffer of several types
template <class T> struct SharedMemory {
  __device__ inline operator T*() { extern __shared__ int __smem[]; return (T*)__smem; }
  __device__ inline operator const T*() const { extern __shared__ int __smem[]; return (T*)__smem; }
};

// ---------------------------------------------------------------- the reduction series
// reduce0: interleaved addressing, the active threads chosen with %
extern "C" __global__ void reduce_interleaved_mod(const double* g_idata, double* g_odata) {
  double* sdata = SharedMemory<double>();
  unsigned int tid = threadIdx.x;
  unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
  sdata[tid] = sin(g_idata[i]);
  __syncthreads();
  for (unsigned int s = 1; s < blockDim.x; s *= 2) {
    if (tid % (2 * s) == 0) sdata[tid] += sdata[tid + s];
    __syncthreads();
  }
  if (tid == 0) g_odata[blockIdx.x] = sdata[0] * sdata[0];
}

// reduce1: interleaved addressing, a strided index instead of the divergent %
extern "C" __global__ void reduce_strided_index(const double* g_idata, double* g_odata) {
  __shared__ double sdata[128];
  unsigned int tid = threadIdx.x;
  sdata[tid] = g_idata[blockIdx.x * blockDim.x + tid] * g_idata[blockIdx.x * blockDim.x + tid];
  __syncthreads();
  for (unsigned int s = 1; s < blockDim.x; s *= 2) {
    int index = 2 * s * tid;
    if (index < blockDim.x) sdata[index] += sdata[index + s];
    __syncthreads();
  }
  if (tid == 0) g_odata[blockIdx.x] = sqrt(sdata[0]);
}

// reduce3: the first add during the global load, sequential addressing, dynamic shared memory
extern "C" __global__ void reduce_first_add(const float* g_idata, float* g_odata, unsigned int n) {
  float* sdata = SharedMemory<float>();
  unsigned int tid = threadIdx.x;
  unsigned int i = blockIdx.x * (blockDim.x * 2) + threadIdx.x;
  float mySum = (i < n) ? g_idata[i] : 0;
  if (i + blockDim.x < n) mySum += g_idata[i + blockDim.x];
  sdata[tid] = mySum * mySum;
  __syncthreads();
  for (unsigned int s = blockDim.x / 2; s > 0; s >>= 1) {
    if (tid < s) sdata[tid] = mySum = mySum * mySum + sdata[tid + s];   // each step squares the own part
    __syncthreads();
  }
  if (tid == 0) g_odata[blockIdx.x] = mySum;
}

// reduce4/5: the warp-synchronous tail through a volatile pointer, no __syncwarp (a race since Volta)
template <unsigned int blockSize>
__device__ void warpReduce(volatile float* sdata, unsigned int tid) {
  if (blockSize >= 64) sdata[tid] += sdata[tid + 32];
  if (blockSize >= 32) sdata[tid] += sdata[tid + 16];
  if (blockSize >= 16) sdata[tid] += sdata[tid + 8];
  if (blockSize >= 8) sdata[tid] += sdata[tid + 4];
  if (blockSize >= 4) sdata[tid] += sdata[tid + 2];
  if (blockSize >= 2) sdata[tid] += sdata[tid + 1];
}

template <unsigned int blockSize>
__device__ void reduce5(const float* g_idata, float* g_odata) {
  __shared__ float sdata[blockSize];
  unsigned int tid = threadIdx.x;
  unsigned int i = blockIdx.x * (blockSize * 2) + tid;
  sdata[tid] = g_idata[i] + g_idata[i + blockSize];
  __syncthreads();
  if (blockSize >= 512) { if (tid < 256) { sdata[tid] += sdata[tid + 256]; } __syncthreads(); }
  if (blockSize >= 256) { if (tid < 128) { sdata[tid] += sdata[tid + 128]; } __syncthreads(); }
  if (blockSize >= 128) { if (tid < 64) { sdata[tid] += sdata[tid + 64]; } __syncthreads(); }
  if (tid < 32) warpReduce<blockSize>(sdata, tid);
  if (tid == 0) g_odata[blockIdx.x] = sdata[0];
}
extern "C" __global__ void reduce_volatile_tail_128(const float* x, float* out) { reduce5<128>(x, out); }

// the same tail with a __syncwarp after each step, still racy: thread t reads sdata[t + 16] while
// thread t + 16 writes it within one step
__device__ void warpReduceSyncwarp(volatile float* sdata, unsigned int tid) {
  sdata[tid] += sdata[tid + 32]; __syncwarp();
  sdata[tid] += sdata[tid + 16]; __syncwarp();
  sdata[tid] += sdata[tid + 8]; __syncwarp();
  sdata[tid] += sdata[tid + 4]; __syncwarp();
  sdata[tid] += sdata[tid + 2]; __syncwarp();
  sdata[tid] += sdata[tid + 1]; __syncwarp();
}
extern "C" __global__ void reduce_syncwarp_in_place(const float* x, float* out) {
  __shared__ float sdata[64];
  unsigned int tid = threadIdx.x;
  sdata[tid] = x[blockIdx.x * 64 + tid];
  __syncthreads();
  if (tid < 32) warpReduceSyncwarp(sdata, tid);
  if (tid == 0) out[blockIdx.x] = sdata[0];
}

// the race-free form: read into a register, __syncwarp, write, __syncwarp; the blockSize cascade
// with barriers inside the constant branches
template <unsigned int blockSize>
__device__ void reduce_cascade(const double* g_idata, double* g_odata, unsigned int n) {
  __shared__ double sdata[blockSize];
  unsigned int tid = threadIdx.x;
  unsigned int i = blockIdx.x * blockSize + tid;
  double v = i < n ? exp(g_idata[i]) : 0.0;
  sdata[tid] = v;
  __syncthreads();
  if (blockSize >= 1024) { if (tid < 512) { sdata[tid] = v = v + sdata[tid + 512]; } __syncthreads(); }
  if (blockSize >= 512) { if (tid < 256) { sdata[tid] = v = v + sdata[tid + 256]; } __syncthreads(); }
  if (blockSize >= 256) { if (tid < 128) { sdata[tid] = v = v + sdata[tid + 128]; } __syncthreads(); }
  if (blockSize >= 128) { if (tid < 64) { sdata[tid] = v = v + sdata[tid + 64]; } __syncthreads(); }
  if (tid < 32) {
    if (blockSize >= 64) v += sdata[tid + 32];
    for (int offset = 16; offset > 0; offset /= 2) {
      __syncwarp();
      sdata[tid] = v;
      __syncwarp();
      v += sdata[tid + offset];
    }
  }
  if (tid == 0) g_odata[blockIdx.x] = log(v);
}
extern "C" __global__ void reduce_cascade_256(const double* x, double* out, unsigned int n) {
  reduce_cascade<256>(x, out, n);
}

// grid-stride loads, shuffles per warp, the warp sums through a static __shared__ array of a
// device function, one atomicAdd per block
__inline__ __device__ float warpReduceSum(float val) {
  for (int offset = warpSize / 2; offset > 0; offset /= 2) val += __shfl_down_sync(FULL, val, offset);
  return val;
}
__inline__ __device__ float blockReduceSum(float val) {
  static __shared__ float shared[32];
  int lane = threadIdx.x % warpSize;
  int wid = threadIdx.x / warpSize;
  val = warpReduceSum(val);
  if (lane == 0) shared[wid] = val;
  __syncthreads();
  val = (threadIdx.x < blockDim.x / warpSize) ? shared[lane] : 0;
  if (wid == 0) val = warpReduceSum(val);
  return val;
}
extern "C" __global__ void grid_stride_block_atomic(const float* in, float* out, int N) {
  float sum = 0;
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < N; i += blockDim.x * gridDim.x) sum += in[i] * in[i];
  sum = blockReduceSum(sum);
  if (threadIdx.x == 0) atomicAdd(out, sum);
}
// the warp-atomic variant: one atomicAdd per warp
extern "C" __global__ void grid_stride_warp_atomic(const float* in, float* out, int N) {
  float sum = 0;
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < N; i += blockDim.x * gridDim.x) sum += tanhf(in[i]);
  sum = warpReduceSum(sum);
  if ((threadIdx.x & (warpSize - 1)) == 0) atomicAdd(out, sum);
}

// ---------------------------------------------------------------- transpose
// diagonal block ordering (the transpose whitepaper's partition-camping fix), padded tile
#define TILE_DIM 32
#define BLOCK_ROWS 8
extern "C" __global__ void transpose_diagonal(double* odata, const double* idata, int width, int height) {
  __shared__ double tile[TILE_DIM][TILE_DIM + 1];
  int blockIdx_x, blockIdx_y;
  if (width == height) {
    blockIdx_y = blockIdx.x;
    blockIdx_x = (blockIdx.x + blockIdx.y) % gridDim.x;
  } else {
    int bid = blockIdx.x + gridDim.x * blockIdx.y;
    blockIdx_y = bid % gridDim.y;
    blockIdx_x = ((bid / gridDim.y) + blockIdx_y) % gridDim.x;
  }
  int xIndex = blockIdx_x * TILE_DIM + threadIdx.x;
  int yIndex = blockIdx_y * TILE_DIM + threadIdx.y;
  int index_in = xIndex + yIndex * width;
  xIndex = blockIdx_y * TILE_DIM + threadIdx.x;
  yIndex = blockIdx_x * TILE_DIM + threadIdx.y;
  int index_out = xIndex + yIndex * height;
  for (int i = 0; i < TILE_DIM; i += BLOCK_ROWS) tile[threadIdx.y + i][threadIdx.x] = idata[index_in + i * width];
  __syncthreads();
  for (int i = 0; i < TILE_DIM; i += BLOCK_ROWS) {
    double v = tile[threadIdx.x][threadIdx.y + i];
    odata[index_out + i * height] = v * v * v;
  }
}

// ---------------------------------------------------------------- the samples' matrixMul
template <int BLOCK_SIZE>
__device__ void MatrixMulCUDA(float* C, const float* A, const float* B, int wA, int wB) {
  int bx = blockIdx.x, by = blockIdx.y;
  int tx = threadIdx.x, ty = threadIdx.y;
  int aBegin = wA * BLOCK_SIZE * by;
  int aEnd = aBegin + wA - 1;
  int aStep = BLOCK_SIZE;
  int bBegin = BLOCK_SIZE * bx;
  int bStep = BLOCK_SIZE * wB;
  float Csub = 0;
  for (int a = aBegin, b = bBegin; a <= aEnd; a += aStep, b += bStep) {
    __shared__ float As[BLOCK_SIZE][BLOCK_SIZE];
    __shared__ float Bs[BLOCK_SIZE][BLOCK_SIZE];
    As[ty][tx] = A[a + wA * ty + tx];
    Bs[ty][tx] = B[b + wB * ty + tx];
    __syncthreads();
#pragma unroll
    for (int k = 0; k < BLOCK_SIZE; ++k) Csub += As[ty][k] * Bs[k][tx];
    __syncthreads();
  }
  int c = wB * BLOCK_SIZE * by + BLOCK_SIZE * bx;
  C[c + wB * ty + tx] = Csub;
}
extern "C" __global__ void matrix_mul_16(float* C, const float* A, const float* B, int wA, int wB) {
  MatrixMulCUDA<16>(C, A, B, wA, wB);
}

// ---------------------------------------------------------------- scan
// the work-efficient scan with bank-conflict-free offsets (GPU Gems 3, 39.2.3)
#define NUM_BANKS 32
#define LOG_NUM_BANKS 5
#define CONFLICT_FREE_OFFSET(n) ((n) >> LOG_NUM_BANKS)
extern "C" __global__ void prescan_bcao(double* g_odata, const double* g_idata) {
  __shared__ double temp[256 + 256 / NUM_BANKS];
  int thid = threadIdx.x;
  int n = 2 * blockDim.x;
  int offset = 1;
  const double* in = g_idata + blockIdx.x * n;
  double* out = g_odata + blockIdx.x * n;
  int ai = thid;
  int bi = thid + (n / 2);
  int bankOffsetA = CONFLICT_FREE_OFFSET(ai);
  int bankOffsetB = CONFLICT_FREE_OFFSET(bi);
  temp[ai + bankOffsetA] = in[ai];
  temp[bi + bankOffsetB] = in[bi];
  for (int d = n >> 1; d > 0; d >>= 1) {
    __syncthreads();
    if (thid < d) {
      int ai = offset * (2 * thid + 1) - 1;
      int bi = offset * (2 * thid + 2) - 1;
      ai += CONFLICT_FREE_OFFSET(ai);
      bi += CONFLICT_FREE_OFFSET(bi);
      temp[bi] += temp[ai];
    }
    offset *= 2;
  }
  if (thid == 0) temp[n - 1 + CONFLICT_FREE_OFFSET(n - 1)] = 0;
  for (int d = 1; d < n; d *= 2) {
    offset >>= 1;
    __syncthreads();
    if (thid < d) {
      int ai = offset * (2 * thid + 1) - 1;
      int bi = offset * (2 * thid + 2) - 1;
      ai += CONFLICT_FREE_OFFSET(ai);
      bi += CONFLICT_FREE_OFFSET(bi);
      double t = temp[ai];
      temp[ai] = temp[bi];
      temp[bi] += t;
    }
  }
  __syncthreads();
  out[ai] = temp[ai + bankOffsetA] * in[ai];
  out[bi] = temp[bi + bankOffsetB] * in[bi];
}

// its up-sweep alone: a tree reduction in place, each element left holding its subtree's sum
extern "C" __global__ void upsweep_bcao(const double* g_idata, double* g_odata) {
  __shared__ double temp[256 + 256 / NUM_BANKS];
  int thid = threadIdx.x, n = 2 * blockDim.x, offset = 1;
  const double* in = g_idata + blockIdx.x * n;
  double* out = g_odata + blockIdx.x * n;
  int ai = thid, bi = thid + (n / 2);
  temp[ai + CONFLICT_FREE_OFFSET(ai)] = in[ai];
  temp[bi + CONFLICT_FREE_OFFSET(bi)] = in[bi];
  for (int d = n >> 1; d > 0; d >>= 1) {
    __syncthreads();
    if (thid < d) {
      int ai = offset * (2 * thid + 1) - 1;
      int bi = offset * (2 * thid + 2) - 1;
      ai += CONFLICT_FREE_OFFSET(ai);
      bi += CONFLICT_FREE_OFFSET(bi);
      temp[bi] += temp[ai];
    }
    offset *= 2;
  }
  __syncthreads();
  out[ai] = temp[ai + CONFLICT_FREE_OFFSET(ai)] * in[ai];
  out[bi] = temp[bi + CONFLICT_FREE_OFFSET(bi)] * in[bi];
}

// ---------------------------------------------------------------- stencil (the CUDA C tutorial's)
#define RADIUS 3
#define BLOCK_SIZE 64
extern "C" __global__ void stencil_1d(const float* in, float* out) {
  __shared__ float temp[BLOCK_SIZE + 2 * RADIUS];
  int gindex = threadIdx.x + blockIdx.x * blockDim.x + RADIUS;   // `in` holds RADIUS halo cells each side
  int lindex = threadIdx.x + RADIUS;
  temp[lindex] = in[gindex];
  if (threadIdx.x < RADIUS) {
    temp[lindex - RADIUS] = in[gindex - RADIUS];
    temp[lindex + BLOCK_SIZE] = in[gindex + BLOCK_SIZE];
  }
  __syncthreads();
  float result = 0;
  for (int offset = -RADIUS; offset <= RADIUS; offset++) result += temp[lindex + offset] * (offset + 4);
  out[gindex - RADIUS] = result * temp[lindex];
}

// ---------------------------------------------------------------- softmax, a warp per row
extern "C" __global__ void warp_row_softmax(const float* x, float* y, int rows, int cols) {
  int warps = blockDim.x / 32;
  int row = blockIdx.x * warps + threadIdx.x / 32;
  int lane = threadIdx.x & 31;
  if (row >= rows) return;                 // whole warps leave
  const float* xr = x + row * cols;
  float m = -INFINITY;
  for (int c = lane; c < cols; c += 32) m = fmaxf(m, xr[c]);
  for (int o = 16; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(FULL, m, o));
  float s = 0.f;
  for (int c = lane; c < cols; c += 32) s += __expf(xr[c] - m);
  for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(FULL, s, o);
  for (int c = lane; c < cols; c += 32) y[row * cols + c] = __expf(xr[c] - m) / s;
}

// ---------------------------------------------------------------- float4 into and out of shared memory
extern "C" __global__ void float4_shared_roundtrip(const float* __restrict__ x, float* __restrict__ y) {
  __shared__ float tile[256];
  int t = threadIdx.x;
  reinterpret_cast<float4*>(tile)[t] = __ldg(reinterpret_cast<const float4*>(x) + blockIdx.x * 64 + t);
  __syncthreads();
  float4 v = reinterpret_cast<const float4*>(tile)[63 - t];
  float4 r;
  r.x = v.w * v.x; r.y = v.z * v.y; r.z = v.y + v.z * v.z; r.w = v.x * v.w;
  reinterpret_cast<float4*>(y)[blockIdx.x * 64 + t] = r;
}

// ---------------------------------------------------------------- separable convolution, rows
#define KERNEL_RADIUS 4
#define ROWS_BLOCKDIM_X 16
#define ROWS_BLOCKDIM_Y 4
#define ROWS_RESULT_STEPS 2
#define ROWS_HALO_STEPS 1
__constant__ float c_Kernel[2 * KERNEL_RADIUS + 1] = {0.02f, 0.05f, 0.1f, 0.2f, 0.26f, 0.2f, 0.1f, 0.05f, 0.02f};
extern "C" __global__ void convolution_rows(float* d_Dst, const float* d_Src, int imageW, int imageH, int pitch) {
  __shared__ float s_Data[ROWS_BLOCKDIM_Y][(ROWS_RESULT_STEPS + 2 * ROWS_HALO_STEPS) * ROWS_BLOCKDIM_X];
  const int baseX = (blockIdx.x * ROWS_RESULT_STEPS - ROWS_HALO_STEPS) * ROWS_BLOCKDIM_X + threadIdx.x;
  const int baseY = blockIdx.y * ROWS_BLOCKDIM_Y + threadIdx.y;
  d_Src += baseY * pitch + baseX;
  d_Dst += baseY * pitch + baseX;
#pragma unroll
  for (int i = ROWS_HALO_STEPS; i < ROWS_HALO_STEPS + ROWS_RESULT_STEPS; i++)
    s_Data[threadIdx.y][threadIdx.x + i * ROWS_BLOCKDIM_X] = d_Src[i * ROWS_BLOCKDIM_X];
#pragma unroll
  for (int i = 0; i < ROWS_HALO_STEPS; i++)
    s_Data[threadIdx.y][threadIdx.x + i * ROWS_BLOCKDIM_X] = (baseX >= -i * ROWS_BLOCKDIM_X) ? d_Src[i * ROWS_BLOCKDIM_X] : 0;
#pragma unroll
  for (int i = ROWS_HALO_STEPS + ROWS_RESULT_STEPS; i < ROWS_HALO_STEPS + ROWS_RESULT_STEPS + ROWS_HALO_STEPS; i++)
    s_Data[threadIdx.y][threadIdx.x + i * ROWS_BLOCKDIM_X] =
        (imageW - baseX > i * ROWS_BLOCKDIM_X) ? d_Src[i * ROWS_BLOCKDIM_X] : 0;
  __syncthreads();
#pragma unroll
  for (int i = ROWS_HALO_STEPS; i < ROWS_HALO_STEPS + ROWS_RESULT_STEPS; i++) {
    float sum = 0;
#pragma unroll
    for (int j = -KERNEL_RADIUS; j <= KERNEL_RADIUS; j++)
      sum += c_Kernel[KERNEL_RADIUS - j] * s_Data[threadIdx.y][threadIdx.x + i * ROWS_BLOCKDIM_X + j];
    d_Dst[i * ROWS_BLOCKDIM_X] = sum * sum;
  }
}

// ---------------------------------------------------------------- write-write races on global memory
// a common slip: every thread stores its own value to its block's slot (one of them wins)
extern "C" __global__ void last_writer_wins(const float* x, float* out) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  out[blockIdx.x] = x[i] * x[i];
}
// the same from the first four threads only
extern "C" __global__ void first_lanes_store(const float* x, float* out) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (threadIdx.x < 4) out[blockIdx.x] = x[i];
}

// ---------------------------------------------------------------- matrix-vector, a warp per row
extern "C" __global__ void gemv_warp_rows(const double* __restrict__ A, const double* __restrict__ x,
                                          double* __restrict__ y, int m, int n) {
  int row = (blockIdx.x * blockDim.x + threadIdx.x) / warpSize;
  int lane = threadIdx.x % warpSize;
  double sum = 0.0;
  if (row < m)
    for (int c = lane; c < n; c += warpSize) sum += A[row * n + c] * x[c];
  for (int offset = warpSize / 2; offset > 0; offset >>= 1) sum += __shfl_down_sync(FULL, sum, offset);
  if (lane == 0 && row < m) y[row] = tanh(sum);
}
"""

# reduce1's stride as the race check sees it: doubled in the loop header, its old value tested in the latch,
# so that it takes 1, 2, ..., 64 in blocks of 128 threads. With -DLAST=64 thread 0 writes s[1] in the last
# trip while thread 1 reads it (a race the check must find); with -DLAST=128 that store never runs.
STRIDE_SETS = r"""
extern "C" __global__ void race_at_last_stride(const float* x, float* y) {
  __shared__ float s[128];
  unsigned t = threadIdx.x;
  s[t] = x[blockIdx.x * 128 + t];
  __syncthreads();
  float v = 0.0f;
  for (unsigned h = 1; h < blockDim.x; h *= 2) {
    int index = 2 * h * t;
    if (index < blockDim.x && h == LAST) s[1] = 2.0f * s[index];
    if (t == 1) v += s[1];
    __syncthreads();
  }
  y[blockIdx.x * 128 + t] = v;
}
"""

# two counters stepped together, only one of them tested (the scan's d and offset): in blocks of 128
# threads offset takes 1, ..., 64 in the loop and leaves it as 128. -DLAST / -DAFTER choose a store that runs at one of those values,
# racing with thread 1's read (in the loop, or after it with no barrier between), or one that never runs.
PAIRED_COUNTERS = r"""
extern "C" __global__ void race_at_paired_offset(const float* x, float* y) {
  __shared__ float s[128];
  int t = threadIdx.x;
  s[t] = x[blockIdx.x * 128 + t];
  __syncthreads();
  float v = 0.0f;
  int offset = 1;
  for (int d = blockDim.x / 2; d > 0; d >>= 1) {     // blockDim: clang cannot count the trips itself
    if (t == 0 && offset == LAST) s[1] = 2.0f * s[0];
    if (t == 1) v += s[1];
    offset *= 2;
    __syncthreads();
  }
  if (t == 0 && offset == AFTER) s[1] = 3.0f;
  if (t == 1) v += s[1];
  y[blockIdx.x * 128 + t] = v;
}
"""
