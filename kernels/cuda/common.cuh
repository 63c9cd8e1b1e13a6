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

/* blocks for n items of per-block items each, capped for grid-stride loops */
inline unsigned grid_for(int64_t n, int per_block) {
    const int64_t b = (n + per_block - 1) / per_block;
    return (unsigned)(b < 65535 ? b : 65535);
}

} /* namespace cu */

#endif
