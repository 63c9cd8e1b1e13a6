/* common.cuh - what every kernel of kernels/cuda/ shares: the emulation header (or CUDA's
 * under nvcc), half conversions, and warp and block reductions written once. Reductions
 * have a fixed order (a butterfly in each warp, then one over the warps' partials), so a
 * launch gives the same bits every time. Blocks that reduce have a multiple of 32 threads. */
#ifndef MD_CUDA_COMMON_CUH
#define MD_CUDA_COMMON_CUH

#include <stdint.h>

#include "kernels/cuda/cu.h"
#include "kernels/cuda/emu.h"

extern "C" {
#include "kernels/dtype.h"
}

#if !CU_EMU
#include <cuda_fp16.h>
#endif

/* a loop the device compiler should unroll (the emulator's compiler decides itself) */
#if CU_EMU
#define CU_UNROLL
#define CU_UNROLL_BY(n)
#else
#define CU_UNROLL _Pragma("unroll")
#define CU_PRAGMA(x) _Pragma(#x)
/* ... by n, an integral constant expression (a template's parameters may appear in it) */
#define CU_UNROLL_BY(n) CU_PRAGMA(unroll n)
#endif

namespace cu {

constexpr unsigned FULL = 0xffffffffu;

__device__ __forceinline__ float h2f(uint16_t h) {
#if CU_EMU
    return fp16_to_f32(h); /* the C library's, which the device conversion matches */
#else
    return __half2float(__ushort_as_half(h));
#endif
}

__device__ __forceinline__ float bf2f(uint16_t h) { return __uint_as_float((unsigned)h << 16); }

/* SwiGLU's value, silu(g) * u in float: the one expression of cu_swiglu and of the
 * quantiser that takes gate and up (their results the same bits). */
__device__ __forceinline__ float silu_mul(float g, float u) { return g / (1.0f + expf(-g)) * u; }

/* f as fp16 bits, rounded to nearest even, magnitudes past fp16's largest (65504) saturated
 * to it (an activation outlier stays finite instead of turning a product into inf or NaN). */
__device__ __forceinline__ uint16_t f2h_sat(float f) {
    const float c = fabsf(f) > 65504.0f ? copysignf(65504.0f, f) : f; /* (NaN stays NaN) */
#if CU_EMU
    return f32_to_fp16(c);
#else
    return __half_as_ushort(__float2half_rn(c));
#endif
}

/* f as bf16 bits, rounded to nearest even (NaN kept quiet): dtype.c's f32_to_bf16. */
__device__ __forceinline__ uint16_t f2bf(float f) {
    unsigned u = __float_as_uint(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)(u >> 16 | 0x40);
    u += 0x7fffu + (u >> 16 & 1);
    return (uint16_t)(u >> 16);
}

/* a little-endian uint16 at any byte address */
__device__ __forceinline__ uint16_t ld16(const uint8_t *p) {
    return (uint16_t)(p[0] | p[1] << 8);
}

template <class T> __device__ __forceinline__ T warp_sum(T v) {
    for (int o = 16; o > 0; o /= 2) v += __shfl_xor_sync(FULL, v, o);
    return v;
}

template <class T> __device__ __forceinline__ T warp_max(T v) {
    for (int o = 16; o > 0; o /= 2) {
        const T u = __shfl_xor_sync(FULL, v, o);
        v = u > v ? u : v;
    }
    return v;
}

/* The sum (or max) of v over the block, returned to every thread. scratch: 32 values of
 * shared memory, free again when the call returns (it starts with a barrier, so calls can
 * follow each other). */
template <class T> __device__ __forceinline__ T block_sum(T v, T *scratch) {
    const int lane = threadIdx.x % 32, w = threadIdx.x / 32, nw = blockDim.x / 32;
    v = warp_sum(v);
    __syncthreads();
    if (lane == 0) scratch[w] = v;
    __syncthreads();
    return warp_sum(lane < nw ? scratch[lane] : T(0));
}

template <class T> __device__ __forceinline__ T block_max(T v, T *scratch, T lowest) {
    const int lane = threadIdx.x % 32, w = threadIdx.x / 32, nw = blockDim.x / 32;
    v = warp_max(v);
    __syncthreads();
    if (lane == 0) scratch[w] = v;
    __syncthreads();
    return warp_max(lane < nw ? scratch[lane] : lowest);
}

/* Up to CU_MQ_N matrices of one type and n_in that one launch multiplies by the same
 * activations (blockIdx.z picks one); matrices without output rows left out. */
struct mat_set {
    float *y[CU_MQ_N];
    const uint8_t *w[CU_MQ_N];
    int64_t n_out[CU_MQ_N];
    int n;        /* matrices kept */
    int64_t most; /* the largest n_out (the grid's width) */
};

inline mat_set make_set(int32_t n, float *const *y, const void *const *w, const int64_t *n_out) {
    mat_set m = {};
    for (int32_t i = 0; i < n && i < CU_MQ_N; i++)
        if (n_out[i] > 0) {
            m.y[m.n] = y[i], m.w[m.n] = static_cast<const uint8_t *>(w[i]), m.n_out[m.n++] = n_out[i];
            m.most = n_out[i] > m.most ? n_out[i] : m.most;
        }
    return m;
}

/* blocks for n items of per-block items each, capped for grid-stride loops */
inline unsigned grid_for(int64_t n, int per_block) {
    const int64_t b = (n + per_block - 1) / per_block;
    return (unsigned)(b < 65535 ? b : 65535);
}

} /* namespace cu */

#endif
