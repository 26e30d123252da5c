/* adoffload's CUDA device header: what a kernel needs from CUDA, without the CUDA toolkit.
 * Included (-include) by ado.from_cuda before the user's source. The thread indices,
 * barriers and atomics use clang's NVPTX builtins; adoffload translates the intrinsics
 * they become into its block-kernel operations (adoffload/foreign_cuda/translate.py).
 * Shuffles and the lane index call adoffload's own operations directly (asm labels). */
#pragma once

#define __device__ __attribute__((device))
#define __global__ __attribute__((global))
#define __host__ __attribute__((host))
#define __shared__ __attribute__((shared))
#define __constant__ __attribute__((constant))
#define __forceinline__ __inline__ __attribute__((always_inline))
#define __noinline__ __attribute__((noinline))
#define __launch_bounds__(...) __attribute__((launch_bounds(__VA_ARGS__)))
#define __restrict__ __restrict
#define __ADO_DEV static __device__ __forceinline__

/* what CUDA's runtime headers bring in from the C and C++ libraries (stddef.h, stdint.h, math.h) */
typedef __SIZE_TYPE__ size_t;
typedef __PTRDIFF_TYPE__ ptrdiff_t;
typedef __INT32_TYPE__ int32_t;
typedef __UINT32_TYPE__ uint32_t;
typedef __INT64_TYPE__ int64_t;
typedef __UINT64_TYPE__ uint64_t;
#define INFINITY __builtin_inff()
#define NAN __builtin_nanf("")
#define HUGE_VALF __builtin_huge_valf()
#define HUGE_VAL __builtin_huge_val()
/* float.h, limits.h and math.h's constants, which CUDA code uses without including them (nvcc's headers
 * bring them in; system headers cannot be included here) */
#ifndef FLT_MAX
#define FLT_MAX __FLT_MAX__
#define FLT_MIN __FLT_MIN__
#define FLT_EPSILON __FLT_EPSILON__
#define DBL_MAX __DBL_MAX__
#define DBL_MIN __DBL_MIN__
#define DBL_EPSILON __DBL_EPSILON__
#endif
#ifndef INT_MAX
#define INT_MAX __INT_MAX__
#define INT_MIN (-__INT_MAX__ - 1)
#define UINT_MAX (__INT_MAX__ * 2U + 1U)
#endif
#ifndef M_PI
#define M_E 2.7182818284590452354
#define M_LOG2E 1.4426950408889634074
#define M_LN2 0.69314718055994530942
#define M_LN10 2.30258509299404568402
#define M_PI 3.14159265358979323846
#define M_PI_2 1.57079632679489661923
#define M_PI_4 0.78539816339744830962
#define M_1_PI 0.31830988618379067154
#define M_2_PI 0.63661977236758134308
#define M_2_SQRTPI 1.12837916709551257390
#define M_SQRT2 1.41421356237309504880
#define M_SQRT1_2 0.70710678118654752440
#endif
/* memcpy and memset in device code, as CUDA declares them (clang emits llvm.memcpy/llvm.memset) */
extern "C" __device__ void *memcpy(void *, const void *, size_t);
extern "C" __device__ void *memset(void *, int, size_t);

struct uint3 { unsigned int x, y, z; };
struct dim3 { unsigned int x, y, z; };

/* CUDA's vector types, with CUDA's alignment (loads of them are one wide access) */
#define __ADO_VEC2(T, N, A) struct __attribute__((aligned(A))) N##2 { T x, y; };                      \
  __ADO_MAKE2(T, N)
#define __ADO_VEC3(T, N) struct N##3 { T x, y, z; };
#define __ADO_VEC4(T, N, A) struct __attribute__((aligned(A))) N##4 { T x, y, z, w; };                \
  __ADO_MAKE4(T, N)
#define __ADO_MAKE2(T, N) static __device__ __inline__ N##2 make_##N##2(T x, T y) { N##2 v = {x, y}; return v; }
#define __ADO_MAKE4(T, N) static __device__ __inline__ N##4 make_##N##4(T x, T y, T z, T w) {  \
  N##4 v = {x, y, z, w}; return v; }
__ADO_VEC2(float, float, 8) __ADO_VEC3(float, float) __ADO_VEC4(float, float, 16)
__ADO_VEC2(double, double, 16) __ADO_VEC3(double, double) __ADO_VEC4(double, double, 16)
__ADO_VEC2(int, int, 8) __ADO_VEC3(int, int) __ADO_VEC4(int, int, 16)
__ADO_VEC2(unsigned int, uint, 8) __ADO_VEC4(unsigned int, uint, 16)
#undef __ADO_VEC2
#undef __ADO_VEC3
#undef __ADO_VEC4
#undef __ADO_MAKE2
#undef __ADO_MAKE4
typedef unsigned long long __ado_u64;

#ifdef __HIP__
/* HIP (AMDGPU): the same NVVM names as for CUDA, through asm labels, so that one translation
 * (translate.py) serves both; __syncthreads is adoffload's barrier directly. */
#define __ADO_HIP_SREG(SREG, AXIS) extern "C" __device__ unsigned int __nvvm_read_ptx_sreg_##SREG##_##AXIS(void) \
  __asm__("llvm.nvvm.read.ptx.sreg." #SREG "." #AXIS);
#define __ADO_HIP_SREGS(SREG) __ADO_HIP_SREG(SREG, x) __ADO_HIP_SREG(SREG, y) __ADO_HIP_SREG(SREG, z)
__ADO_HIP_SREGS(tid) __ADO_HIP_SREGS(ctaid) __ADO_HIP_SREGS(ntid) __ADO_HIP_SREGS(nctaid)
#undef __ADO_HIP_SREGS
#undef __ADO_HIP_SREG
extern "C" __device__ void __syncthreads(void) __asm__("adoffload.sync_threads");
#endif

/* threadIdx.x etc.: each field a property read by its own intrinsic (as clang's own header does). */
#define __ADO_SREG(NAME, SREG)                                                                   \
  struct __ado_##NAME##_t {                                                                      \
    __declspec(property(get = __get_x)) unsigned int x;                                        \
    __declspec(property(get = __get_y)) unsigned int y;                                        \
    __declspec(property(get = __get_z)) unsigned int z;                                        \
    static __device__ __forceinline__ unsigned int __get_x() { return __nvvm_read_ptx_sreg_##SREG##_x(); } \
    static __device__ __forceinline__ unsigned int __get_y() { return __nvvm_read_ptx_sreg_##SREG##_y(); } \
    static __device__ __forceinline__ unsigned int __get_z() { return __nvvm_read_ptx_sreg_##SREG##_z(); } \
  };                                                                                             \
  extern const __device__ __attribute__((weak)) __ado_##NAME##_t NAME;
__ADO_SREG(threadIdx, tid)
__ADO_SREG(blockIdx, ctaid)
__ADO_SREG(blockDim, ntid)
__ADO_SREG(gridDim, nctaid)
#undef __ADO_SREG
static const int warpSize = 32;

/* barriers: on CUDA, __syncthreads() is a clang builtin (llvm.nvvm.barrier*) */

/* adoffload's warp operations (collectives.py), called by name */
extern "C" __device__ float __ado_shuffle_f32(float v, int lane) __asm__("adoffload.shuffle.f32");
extern "C" __device__ double __ado_shuffle_f64(double v, int lane) __asm__("adoffload.shuffle.f64");
extern "C" __device__ int __ado_lane_id(void) __asm__("adoffload.lane_id");

/* The lane a shuffle reads, for segments of `width` lanes (a power of two up to 32). */
__ADO_DEV int __ado_src_idx(int src, int width) { int me = __ado_lane_id(); return (me & ~(width - 1)) + (src & (width - 1)); }
__ADO_DEV int __ado_src_down(unsigned d, int width) {
  int me = __ado_lane_id(); int s = (me & (width - 1)) + (int)d; return s < width ? me + (int)d : me; }
__ADO_DEV int __ado_src_up(unsigned d, int width) {
  int me = __ado_lane_id(); return (me & (width - 1)) >= (int)d ? me - (int)d : me; }
__ADO_DEV int __ado_src_xor(int m, int width) {
  int me = __ado_lane_id(); int s = me ^ m; return (s & ~(width - 1)) == (me & ~(width - 1)) ? s : me; }

#define __ADO_SHUFFLES(NAME, SRC, ARG)                                                            \
  __ADO_DEV float NAME(unsigned mask, float v, ARG a, int width = 32) { return __ado_shuffle_f32(v, SRC(a, width)); } \
  __ADO_DEV double NAME(unsigned mask, double v, ARG a, int width = 32) { return __ado_shuffle_f64(v, SRC(a, width)); } \
  __ADO_DEV int NAME(unsigned mask, int v, ARG a, int width = 32) {                                \
    return __builtin_bit_cast(int, __ado_shuffle_f32(__builtin_bit_cast(float, v), SRC(a, width))); } \
  __ADO_DEV unsigned NAME(unsigned mask, unsigned v, ARG a, int width = 32) {                      \
    return __builtin_bit_cast(unsigned, __ado_shuffle_f32(__builtin_bit_cast(float, v), SRC(a, width))); } \
  __ADO_DEV long long NAME(unsigned mask, long long v, ARG a, int width = 32) {                    \
    return __builtin_bit_cast(long long, __ado_shuffle_f64(__builtin_bit_cast(double, v), SRC(a, width))); } \
  __ADO_DEV unsigned long long NAME(unsigned mask, unsigned long long v, ARG a, int width = 32) {  \
    return __builtin_bit_cast(unsigned long long, __ado_shuffle_f64(__builtin_bit_cast(double, v), SRC(a, width))); }
__ADO_SHUFFLES(__shfl_sync, __ado_src_idx, int)
__ADO_SHUFFLES(__shfl_down_sync, __ado_src_down, unsigned)
__ADO_SHUFFLES(__shfl_up_sync, __ado_src_up, unsigned)
__ADO_SHUFFLES(__shfl_xor_sync, __ado_src_xor, int)
#undef __ADO_SHUFFLES

/* read-only and cache-hinted loads: plain loads here (the launcher marks read-only arrays for the GPU) */
template <class T> __ADO_DEV T __ldg(const T *p) { return *p; }
template <class T> __ADO_DEV T __ldca(const T *p) { return *p; }
template <class T> __ADO_DEV T __ldcg(const T *p) { return *p; }
template <class T> __ADO_DEV T __ldcs(const T *p) { return *p; }
template <class T> __ADO_DEV T __ldlu(const T *p) { return *p; }
template <class T> __ADO_DEV T __ldcv(const T *p) { return *p; }
/* cache-hinted stores: plain stores here */
template <class T> __ADO_DEV void __stwb(T *p, T v) { *p = v; }
template <class T> __ADO_DEV void __stcg(T *p, T v) { *p = v; }
template <class T> __ADO_DEV void __stcs(T *p, T v) { *p = v; }
template <class T> __ADO_DEV void __stwt(T *p, T v) { *p = v; }

/* warp votes: adoffload's warp_ballot (collectives.py) gives bit k for lane k of the caller's warp
 * of 32 lanes (on AMD's 64-lane wavefronts the caller's half, as for the shuffles above). Every
 * thread of the block must reach them (as the shuffles); lanes outside `mask` count as false. */
extern "C" __device__ unsigned __ado_warp_ballot(bool p) __asm__("adoffload.warp_ballot");
__ADO_DEV unsigned __ballot_sync(unsigned mask, int p) { return __ado_warp_ballot(p != 0) & mask; }
__ADO_DEV int __any_sync(unsigned mask, int p) { return __ballot_sync(mask, p) != 0; }
__ADO_DEV int __all_sync(unsigned mask, int p) { return (__ado_warp_ballot(p != 0) & mask) == mask; }
#ifdef __HIP__
/* HIP's own votes take 64-bit masks of 64-lane wavefronts; here warps have 32 lanes (as warpSize
 * says), so code written for 64 lanes fails to compile instead of counting half the lanes. */
#define __ADO_WAVE64(T, NAME) __device__ T NAME(unsigned long long, int) __attribute__((unavailable(            \
  "adoffload: " #NAME " with a 64-bit mask assumes 64-lane wavefronts; adoffload's warps have 32 lanes "   \
  "(warpSize), so use a 32-bit mask")));
__ADO_WAVE64(unsigned long long, __ballot_sync) __ADO_WAVE64(int, __any_sync) __ADO_WAVE64(int, __all_sync)
#undef __ADO_WAVE64
__ADO_DEV unsigned __ballot_sync(int mask, int p) { return __ballot_sync((unsigned)mask, p); }   /* not ambiguous */
__ADO_DEV int __any_sync(int mask, int p) { return __any_sync((unsigned)mask, p); }
__ADO_DEV int __all_sync(int mask, int p) { return __all_sync((unsigned)mask, p); }
#endif

/* __syncwarp: a barrier of the whole block (translate.py), which orders at least what the warp
 * barrier orders; like __syncthreads, every thread of the block must reach it. */
extern "C" __device__ void __ado_syncwarp(void) __asm__("adoffload.cuda.syncwarp");
__ADO_DEV void __syncwarp(unsigned mask = 0xffffffffu) { __ado_syncwarp(); }

/* integer intrinsics used with the votes */
__ADO_DEV int __popc(unsigned x) { return __builtin_popcount(x); }
__ADO_DEV int __popcll(unsigned long long x) { return __builtin_popcountll(x); }
__ADO_DEV int __ffs(int x) { return __builtin_ffs(x); }
__ADO_DEV int __ffsll(long long x) { return __builtin_ffsll(x); }
__ADO_DEV int __clz(int x) { return x == 0 ? 32 : __builtin_clz((unsigned)x); }
__ADO_DEV int __clzll(long long x) { return x == 0 ? 64 : __builtin_clzll((unsigned long long)x); }
__ADO_DEV unsigned __brev(unsigned x) { return __builtin_bitreverse32(x); }

/* Not provided: named here so that clang says why instead of "undeclared identifier". */
__device__ unsigned __activemask(void) __attribute__((unavailable(
  "adoffload: __activemask is not supported (adoffload runs branches around warp operations on every "
  "thread of the warp, so the set of active lanes is not CUDA's); pass the mask the code means")));

/* atomics (relaxed, device scope, like CUDA's); they return the old value */
#define __ADO_ATOMIC(NAME, OP, T) __ADO_DEV T NAME(T *p, T v) { return OP(p, v, __ATOMIC_RELAXED); }
__ADO_ATOMIC(atomicAdd, __atomic_fetch_add, float)
__ADO_ATOMIC(atomicAdd, __atomic_fetch_add, double)
__ADO_ATOMIC(atomicAdd, __atomic_fetch_add, int)
__ADO_ATOMIC(atomicAdd, __atomic_fetch_add, unsigned int)
__ADO_ATOMIC(atomicAdd, __atomic_fetch_add, __ado_u64)
__ADO_ATOMIC(atomicSub, __atomic_fetch_sub, int)
__ADO_ATOMIC(atomicSub, __atomic_fetch_sub, unsigned int)
__ADO_ATOMIC(atomicMax, __atomic_fetch_max, int)
__ADO_ATOMIC(atomicMax, __atomic_fetch_max, unsigned int)
__ADO_ATOMIC(atomicMin, __atomic_fetch_min, int)
__ADO_ATOMIC(atomicMin, __atomic_fetch_min, unsigned int)
__ADO_ATOMIC(atomicExch, __atomic_exchange_n, int)
__ADO_ATOMIC(atomicExch, __atomic_exchange_n, unsigned int)
#undef __ADO_ATOMIC
#define __ADO_CAS(T) __ADO_DEV T atomicCAS(T *p, T expected, T desired) {                          \
  __atomic_compare_exchange_n(p, &expected, desired, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED); return expected; }
__ADO_CAS(int) __ADO_CAS(unsigned int) __ADO_CAS(__ado_u64)
#undef __ADO_CAS
__ADO_DEV float atomicExch(float *p, float v) { float old; __atomic_exchange(p, &v, &old, __ATOMIC_RELAXED); return old; }
/* CUDA's wrapping counters: ((old >= limit) ? 0 : old + 1) and ((old == 0 || old > limit) ? limit : old - 1) */
__ADO_DEV unsigned atomicInc(unsigned *p, unsigned limit) {
  unsigned old = __atomic_load_n(p, __ATOMIC_RELAXED), seen;
  do { seen = old; old = atomicCAS(p, seen, seen >= limit ? 0u : seen + 1u); } while (old != seen);
  return old; }
__ADO_DEV unsigned atomicDec(unsigned *p, unsigned limit) {
  unsigned old = __atomic_load_n(p, __ATOMIC_RELAXED), seen;
  do { seen = old; old = atomicCAS(p, seen, (seen == 0u || seen > limit) ? limit : seen - 1u); } while (old != seen);
  return old; }
/* memory fences (the threadfence reduction's "publish the partial, then take a ticket") */
__ADO_DEV void __threadfence(void) { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
__ADO_DEV void __threadfence_block(void) { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
__ADO_DEV void __threadfence_system(void) { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
/* __syncthreads_count/_and/_or: a barrier that also counts the threads whose predicate holds, through
 * one shared counter (reset by thread 0, atomics, read after a second barrier, a third before the next
 * reset), so that the block-kernel machinery sees only barriers and shared-memory atomics. */
__ADO_DEV int __ado_block_count(int p) {
  __shared__ int count;
  bool first = threadIdx.x == 0 && threadIdx.y == 0 && threadIdx.z == 0;
  if (first) count = 0;
  __syncthreads();
  if (p) atomicAdd(&count, 1);
  __syncthreads();
  int c = count;
  __syncthreads();
  return c;
}
__ADO_DEV int __syncthreads_count(int p) { return __ado_block_count(p); }
__ADO_DEV int __syncthreads_and(int p) {
  return __ado_block_count(p) == (int)(blockDim.x * blockDim.y * blockDim.z); }
__ADO_DEV int __syncthreads_or(int p) { return __ado_block_count(p) != 0; }

/* math: the C library's names, which adoffload's engine and targets know (libm on the host,
 * libdevice on NVIDIA, device math on AMD); C++ overloads for float as in CUDA */
#define __ADO_MATH1(F)                                                                          \
  extern "C" __device__ double F(double); extern "C" __device__ float F##f(float);                \
  __ADO_DEV float F(float x) { return F##f(x); }
#define __ADO_MATH2(F)                                                                          \
  extern "C" __device__ double F(double, double); extern "C" __device__ float F##f(float, float); \
  __ADO_DEV float F(float x, float y) { return F##f(x, y); }
__ADO_MATH1(sin) __ADO_MATH1(cos) __ADO_MATH1(tan) __ADO_MATH1(exp) __ADO_MATH1(log)
__ADO_MATH1(sqrt) __ADO_MATH1(fabs) __ADO_MATH1(floor) __ADO_MATH1(ceil) __ADO_MATH1(tanh)
__ADO_MATH1(sinh) __ADO_MATH1(cosh) __ADO_MATH1(asin) __ADO_MATH1(acos) __ADO_MATH1(atan)
__ADO_MATH1(erf) __ADO_MATH1(erfc) __ADO_MATH1(exp2) __ADO_MATH1(exp10) __ADO_MATH1(log2) __ADO_MATH1(log10) __ADO_MATH1(log1p)
__ADO_MATH1(expm1) __ADO_MATH1(trunc) __ADO_MATH1(round) __ADO_MATH1(cbrt) __ADO_MATH1(rint) __ADO_MATH1(nearbyint)
__ADO_MATH2(pow) __ADO_MATH2(fmin) __ADO_MATH2(fmax) __ADO_MATH2(atan2) __ADO_MATH2(copysign)
__ADO_MATH2(hypot) __ADO_MATH2(fmod)
#undef __ADO_MATH1
#undef __ADO_MATH2
extern "C" __device__ double fma(double, double, double);
extern "C" __device__ float fmaf(float, float, float);
__ADO_DEV float fma(float x, float y, float z) { return fmaf(x, y, z); }
/* sincos as two calls (the targets fuse them where they can): no pointer results for the engine */
__ADO_DEV void sincos(double x, double *s, double *c) { *s = sin(x); *c = cos(x); }
__ADO_DEV void sincosf(float x, float *s, float *c) { *s = sinf(x); *c = cosf(x); }
__ADO_DEV void sincos(float x, float *s, float *c) { sincosf(x, s, c); }
__ADO_DEV void __sincosf(float x, float *s, float *c) { sincosf(x, s, c); }
__ADO_DEV float abs(float x) { return fabsf(x); }
__ADO_DEV double abs(double x) { return fabs(x); }
__ADO_DEV int abs(int x) { return x < 0 ? -x : x; }
/* rsqrt as CUDA and HIP mean it: the device's approximation (libdevice's __nv_rsqrt on NVIDIA, ocml's on
 * AMD); the host runs the IEEE 1.0 / sqrt (adoffload/codegen/host.py). const: clang knows no rsqrt, so
 * say it touches no memory. */
extern "C" __device__ __attribute__((const)) double rsqrt(double);
extern "C" __device__ __attribute__((const)) float rsqrtf(float);
__ADO_DEV float rsqrt(float x) { return rsqrtf(x); }
__ADO_DEV float __expf(float x) { return expf(x); }
__ADO_DEV float __logf(float x) { return logf(x); }
__ADO_DEV float __sinf(float x) { return sinf(x); }
__ADO_DEV float __cosf(float x) { return cosf(x); }
__ADO_DEV float __powf(float x, float y) { return powf(x, y); }
__ADO_DEV float __fdividef(float x, float y) { return x / y; }
__ADO_DEV float __saturatef(float x) { return fminf(fmaxf(x, 0.0f), 1.0f); }
/* IEEE round-to-nearest arithmetic, kept apart (each its own function) so that clang never fuses it into an fma */
__ADO_DEV float __fadd_rn(float a, float b) { return a + b; }
__ADO_DEV float __fsub_rn(float a, float b) { return a - b; }
__ADO_DEV float __fmul_rn(float a, float b) { return a * b; }
__ADO_DEV float __fdiv_rn(float a, float b) { return a / b; }
__ADO_DEV float __frcp_rn(float a) { return 1.0f / a; }
__ADO_DEV float __fsqrt_rn(float a) { return sqrtf(a); }
__ADO_DEV float __fmaf_rn(float a, float b, float c) { return fmaf(a, b, c); }
__ADO_DEV double __dadd_rn(double a, double b) { return a + b; }
__ADO_DEV double __dsub_rn(double a, double b) { return a - b; }
__ADO_DEV double __dmul_rn(double a, double b) { return a * b; }
__ADO_DEV double __ddiv_rn(double a, double b) { return a / b; }
__ADO_DEV double __drcp_rn(double a) { return 1.0 / a; }
__ADO_DEV double __dsqrt_rn(double a) { return sqrt(a); }
__ADO_DEV double __fma_rn(double a, double b, double c) { return fma(a, b, c); }
__ADO_DEV float __int2float_rn(int x) { return (float)x; }
__ADO_DEV double __int2double_rn(int x) { return (double)x; }
__ADO_DEV int __float2int_rz(float x) { return (int)x; }
__ADO_DEV int __float2int_rd(float x) { return (int)floorf(x); }
__ADO_DEV int __float2int_ru(float x) { return (int)ceilf(x); }
__ADO_DEV int __double2int_rz(double x) { return (int)x; }
__ADO_DEV int min(int a, int b) { return a < b ? a : b; }
__ADO_DEV int max(int a, int b) { return a > b ? a : b; }
__ADO_DEV unsigned min(unsigned a, unsigned b) { return a < b ? a : b; }
__ADO_DEV unsigned max(unsigned a, unsigned b) { return a > b ? a : b; }
__ADO_DEV float min(float a, float b) { return fminf(a, b); }
__ADO_DEV float max(float a, float b) { return fmaxf(a, b); }
__ADO_DEV double min(double a, double b) { return fmin(a, b); }
__ADO_DEV double max(double a, double b) { return fmax(a, b); }
__ADO_DEV float __int_as_float(int x) { return __builtin_bit_cast(float, x); }
__ADO_DEV float __uint_as_float(unsigned x) { return __builtin_bit_cast(float, x); }
__ADO_DEV unsigned __float_as_uint(float x) { return __builtin_bit_cast(unsigned, x); }
__ADO_DEV double __longlong_as_double(long long x) { return __builtin_bit_cast(double, x); }
__ADO_DEV long long __double_as_longlong(double x) { return __builtin_bit_cast(long long, x); }
__ADO_DEV int __double2hiint(double x) { return (int)(__builtin_bit_cast(unsigned long long, x) >> 32); }
__ADO_DEV int __double2loint(double x) { return (int)__builtin_bit_cast(unsigned long long, x); }
__ADO_DEV double __hiloint2double(int hi, int lo) {
  return __builtin_bit_cast(double, ((unsigned long long)(unsigned)hi << 32) | (unsigned)lo); }
__ADO_DEV int __float_as_int(float x) { return __builtin_bit_cast(int, x); }
