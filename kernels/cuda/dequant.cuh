/* dequant.cuh - one weight value of a GGUF row on the GPU: dq<TYPE>(row, i) is value i of a
 * row of DT_TYPE blocks as stored, for F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q2_K ..
 * Q6_K, IQ4_NL, IQ4_XS and MXFP4 (block layouts: kernels/quant.h and dtype.h). The block types give the
 * unpacked form of quant.h, value = s * (u - off) + m, computed with the same unfused float
 * operations as quant.c's dequantiser, so both give the same bits. Only the bit layouts
 * are here; the loops that read rows live in the kernels. */
#ifndef MD_CUDA_DEQUANT_CUH
#define MD_CUDA_DEQUANT_CUH

#include <type_traits>

#include "kernels/cuda/common.cuh"

namespace cu {

/* the arithmetic of quant.c's dequantiser */
__device__ __forceinline__ float dq_value(float s, int u, int off, float m) {
    return __fadd_rn(__fmul_rn(s, (float)(u - off)), m);
}

/* Q4_0, Q4_1, Q5_0, Q5_1: blocks of 32, value j of a block its low (j < 16) or high nibble
 * of qs[j % 16], plus bit j of qh as the 5th bit */
template <int TYPE> __device__ __forceinline__ float dq_small(const uint8_t *row, int64_t i) {
    constexpr bool has_m = TYPE == DT_Q4_1 || TYPE == DT_Q5_1;
    constexpr bool five = TYPE == DT_Q5_0 || TYPE == DT_Q5_1;
    constexpr int bb = 2 + 2 * has_m + 4 * five + 16, qs_at = bb - 16;
    constexpr int off = TYPE == DT_Q4_0 ? 8 : TYPE == DT_Q5_0 ? 16 : 0;
    const uint8_t *p = row + i / 32 * bb;
    const int j = (int)(i % 32), q = p[qs_at + j % 16];
    int u = j < 16 ? q & 15 : q >> 4;
    if (five) u |= (p[2 + 2 * has_m + j / 8] >> (j % 8) & 1) << 4;
    return dq_value(h2f(ld16(p)), u, off, has_m ? h2f(ld16(p + 2)) : 0.0f);
}

/* Q4_K, Q5_K: super blocks of 256 in 8 sub-blocks of 32 with 6-bit scales and mins */
template <int TYPE> __device__ __forceinline__ float dq_k45(const uint8_t *row, int64_t i) {
    constexpr bool five = TYPE == DT_Q5_K;
    const uint8_t *p = row + i / 256 * (five ? 176 : 144);
    const int r = (int)(i % 256), sub = r / 32, l = r % 32;
    const uint8_t *sc6 = p + 4;
    int sc, mn;
    if (sub < 4) {
        sc = sc6[sub] & 63;
        mn = sc6[sub + 4] & 63;
    } else {
        sc = (sc6[sub + 4] & 15) | (sc6[sub - 4] >> 6) << 4;
        mn = (sc6[sub + 4] >> 4) | (sc6[sub] >> 6) << 4;
    }
    const int q = p[(five ? 48 : 16) + 32 * (sub / 2) + l];
    int u = sub % 2 ? q >> 4 : q & 15;
    if (five) u |= (p[16 + l] >> sub & 1) << 4;
    const float s = __fmul_rn((float)sc, h2f(ld16(p)));
    const float m = -__fmul_rn((float)mn, h2f(ld16(p + 2)));
    return dq_value(s, u, 0, m);
}

/* Q6_K: super blocks of 256, 16 sub-blocks of 16 with int8 scales, 6-bit quants */
__device__ __forceinline__ float dq_q6k(const uint8_t *row, int64_t i) {
    const uint8_t *p = row + i / 256 * 210;
    const int r = (int)(i % 256), h = r / 128, k = r % 128 / 32, l = r % 32;
    const int lo = p[64 * h + 32 * (k % 2) + l] >> 4 * (k / 2) & 15;
    const int hi = p[128 + 32 * h + l] >> 2 * k & 3;
    const float s = __fmul_rn((float)(int8_t)p[192 + r / 16], h2f(ld16(p + 208)));
    return dq_value(s, lo | hi << 4, 32, 0.0f);
}

/* Q2_K, Q3_K: super blocks of 256, 16 sub-blocks of 16 with 4-bit scales and mins (Q2_K) or
 * 6-bit signed scales (Q3_K), 2-bit quants (and a third bit in Q3_K's hmask) */
template <int TYPE> __device__ __forceinline__ float dq_k23(const uint8_t *row, int64_t i) {
    constexpr bool three = TYPE == DT_Q3_K;
    const uint8_t *p = row + i / 256 * (three ? 110 : 84);
    const int r = (int)(i % 256), g = r / 16;
    int u = p[(three ? 32 : 16) + 32 * (r / 128) + r % 32] >> 2 * (r % 128 / 32) & 3;
    if (three) {
        u |= (p[r % 32] >> (r / 32) & 1) << 2;
        const int lo = (g < 8 ? p[96 + g] : p[88 + g] >> 4) & 15;
        const int sc = lo | (p[104 + g % 4] >> 2 * (g / 4) & 3) << 4;
        return dq_value(__fmul_rn(h2f(ld16(p + 108)), (float)(sc - 32)), u, 4, 0.0f);
    }
    const float s = __fmul_rn(h2f(ld16(p + 80)), (float)(p[g] & 15));
    const float m = -__fmul_rn(h2f(ld16(p + 82)), (float)(p[g] >> 4));
    return dq_value(s, u, 0, m);
}

/* The lookup tables of quant.h (quant_iq4nl_u, quant_mxfp4_u: value + 128), 8 bytes a word. */
template <int TYPE> __device__ __forceinline__ int lut_u(int idx) {
    const uint64_t w = TYPE == DT_MXFP4 ? (idx < 8 ? 0x8C88868483828180ull : 0x74787A7C7D7E7F80ull)
                                        : (idx < 8 ? 0x766A5D4F3F2D1801ull : 0xF1D9C5B5A6998D81ull);
    return (int)(w >> 8 * (idx % 8) & 0xff);
}

/* 2^(e - 128) as ggml's e8m0 "half" conversion gives it */
__device__ __forceinline__ float e8m0_half(unsigned e) {
    return __uint_as_float(e < 2 ? 0x00200000u << e : (e - 1) << 23);
}

/* IQ4_NL, MXFP4 (blocks of 32), IQ4_XS (super blocks of 256 in 8 sub-blocks of 32 with 6-bit
 * scales): value j of a block (sub-block) its table value at the low (j < 16) or high nibble
 * of qs[j % 16] */
template <int TYPE> __device__ __forceinline__ float dq_lut(const uint8_t *row, int64_t i) {
    float s;
    const uint8_t *qs;
    if constexpr (TYPE == DT_IQ4_XS) {
        const uint8_t *p = row + i / 256 * 136;
        const int k = (int)(i % 256 / 32);
        const int ls = (p[4 + k / 2] >> 4 * (k % 2) & 15) | (ld16(p + 2) >> 2 * k & 3) << 4;
        s = __fmul_rn(h2f(ld16(p)), (float)(ls - 32)), qs = p + 8 + 16 * k;
    } else if constexpr (TYPE == DT_MXFP4) {
        const uint8_t *p = row + i / 32 * 17;
        s = e8m0_half(p[0]), qs = p + 1;
    } else {
        const uint8_t *p = row + i / 32 * 18;
        s = h2f(ld16(p)), qs = p + 2;
    }
    const int j = (int)(i % 32), q = qs[j % 16];
    return dq_value(s, lut_u<TYPE>(j < 16 ? q & 15 : q >> 4), 128, 0.0f);
}

template <int TYPE> __device__ __forceinline__ float dq(const uint8_t *row, int64_t i) {
    if constexpr (TYPE == DT_F32) {
        return reinterpret_cast<const float *>(row)[i];
    } else if constexpr (TYPE == DT_F16) {
        return h2f(reinterpret_cast<const uint16_t *>(row)[i]);
    } else if constexpr (TYPE == DT_BF16) {
        return bf2f(reinterpret_cast<const uint16_t *>(row)[i]);
    } else if constexpr (TYPE == DT_Q8_0) {
        const uint8_t *p = row + i / 32 * 34;
        return __fmul_rn(h2f(ld16(p)), (float)(int8_t)p[2 + i % 32]);
    } else if constexpr (TYPE == DT_Q4_K || TYPE == DT_Q5_K) {
        return dq_k45<TYPE>(row, i);
    } else if constexpr (TYPE == DT_Q6_K) {
        return dq_q6k(row, i);
    } else if constexpr (TYPE == DT_Q2_K || TYPE == DT_Q3_K) {
        return dq_k23<TYPE>(row, i);
    } else if constexpr (TYPE == DT_IQ4_NL || TYPE == DT_IQ4_XS || TYPE == DT_MXFP4) {
        return dq_lut<TYPE>(row, i);
    } else {
        static_assert(TYPE == DT_Q4_0 || TYPE == DT_Q4_1 || TYPE == DT_Q5_0 || TYPE == DT_Q5_1,
                      "a weight type without a device dequantiser");
        return dq_small<TYPE>(row, i);
    }
}

/* Whether F::run takes its type: F::supported where F says, else true. */
template <class F, class = void> struct supported : std::true_type {};
template <class F>
struct supported<F, std::void_t<decltype(F::supported)>> : std::bool_constant<F::supported> {};

template <class F, class... A> inline bool run_if_supported(A... a) {
    if constexpr (supported<F>::value) {
        F::run(a...);
        return true;
    } else {
        return false;
    }
}

/* Calls Fn<TYPE>::run(a...) for a run-time type id; false when the type has no device
 * dequantiser, or Fn<TYPE>::supported is false. The one place that lists the types, for
 * every launch templated on one. */
template <template <int> class Fn, class... A> inline bool with_type(uint32_t type, A... a) {
    switch (type) {
    case DT_F32: return run_if_supported<Fn<DT_F32>>(a...);
    case DT_F16: return run_if_supported<Fn<DT_F16>>(a...);
    case DT_BF16: return run_if_supported<Fn<DT_BF16>>(a...);
    case DT_Q8_0: return run_if_supported<Fn<DT_Q8_0>>(a...);
    case DT_Q4_0: return run_if_supported<Fn<DT_Q4_0>>(a...);
    case DT_Q4_1: return run_if_supported<Fn<DT_Q4_1>>(a...);
    case DT_Q5_0: return run_if_supported<Fn<DT_Q5_0>>(a...);
    case DT_Q5_1: return run_if_supported<Fn<DT_Q5_1>>(a...);
    case DT_Q4_K: return run_if_supported<Fn<DT_Q4_K>>(a...);
    case DT_Q5_K: return run_if_supported<Fn<DT_Q5_K>>(a...);
    case DT_Q6_K: return run_if_supported<Fn<DT_Q6_K>>(a...);
    case DT_Q2_K: return run_if_supported<Fn<DT_Q2_K>>(a...);
    case DT_Q3_K: return run_if_supported<Fn<DT_Q3_K>>(a...);
    case DT_IQ4_NL: return run_if_supported<Fn<DT_IQ4_NL>>(a...);
    case DT_IQ4_XS: return run_if_supported<Fn<DT_IQ4_XS>>(a...);
    case DT_MXFP4: return run_if_supported<Fn<DT_MXFP4>>(a...);
    default: return false;
    }
}

template <int TYPE> struct no_launch {
    static void run() {}
};

/* Whether the type has a device dequantiser (and so every kernel templated on one). */
inline bool has_type(uint32_t type) { return with_type<no_launch>(type); }

} /* namespace cu */

#endif
