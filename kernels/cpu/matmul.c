/* matmul.c - the CPU backend's y = x W^T for every weight type it supports.
 *
 * One loop skeleton (mm_task, mm_rows) for all types: the output rows of W are cut into
 * chunks handed to the thread pool; inside a chunk, each tile of MM_TW weight rows is
 * multiplied by every activation row, MM_TX at a time. The tile's weights stay in cache
 * across the activation groups, so a step of k rows streams W from memory once instead
 * of k times; that is what makes a batch of rows (a forest step) cost little more than
 * one row while decode is bound by memory bandwidth. Types with a preparer (the ggml
 * block types, matmul_quant.c) first unpack the tile's rows once into a per-thread
 * scratch, so the unpacking, too, is paid once per tile and not once per group.
 *
 * What differs per weight type is only the tile: a template function "dot NW rows of W
 * with NX activation rows" written once per storage family (float-like: F32, F16,
 * BF16 share one, varying only how a vector of weights is loaded; the ggml block types
 * Q4_0 .. Q6_K, and Q8_0 with AVX-512 VNNI, share one over their prepared form, and
 * differ only in their preparer; Q8_0 has its own tile otherwise) and instantiated for NW in {1, MM_TW} and NX in 1..MM_TX by
 * MM_TILES (matmul.h). A new type adds a template or a preparer, one MM_TILES line and
 * one case in mm_kind_of.
 *
 * Every tile computes each (weight row, activation row) dot product with the same
 * sequence of operations whatever NW and NX are, so a row's result does not depend on
 * the batch it is in (the forest tests compare batches with linear decoding bitwise).
 *
 * Quantised types multiply int8 by int8: the activations are first quantised to
 * blocks of 32 int8 values with a float scale (as llama.cpp does with Q8_0), once per
 * call, into the backend's scratch. Each block product is an exact int32 sum, scaled
 * by d_w * d_x. The CPU result therefore differs from the ref backend (which uses the
 * float activations) by the activation rounding: a few 1e-3 of the output's scale. */
#include <string.h>

#include "matmul.h"

/* ---- float-like weights: F32, F16, BF16 ---------------------------------------- */

enum { MM_F32, MM_F16, MM_BF16 };

/* VF_N weights of a row, from element i, as floats. wt is a constant after inlining,
 * so the switch disappears. */
SIMD_INLINE vf mm_wload(int wt, const uint8_t *row, int64_t i) {
    switch (wt) {
    case MM_F32: return vf_load((const float *)row + i);
    case MM_F16: return vf_load_f16((const uint16_t *)row + i);
    default: return vf_load_bf16((const uint16_t *)row + i);
    }
}

SIMD_INLINE float mm_wscalar(int wt, const uint8_t *row, int64_t i) {
    switch (wt) {
    case MM_F32: return ((const float *)row)[i];
    case MM_F16: return fp16_to_f32(((const uint16_t *)row)[i]);
    default: return bf16_to_f32(((const uint16_t *)row)[i]);
    }
}

SIMD_INLINE void mm_tile_float(int64_t n, const uint8_t *w, size_t ws, const uint8_t *xb,
                               size_t xs, float *y, int64_t ys, const int wt, const int NW,
                               const int NX) {
    const float *x = (const float *)xb;
    const size_t xsf = xs / sizeof(float);
    vf acc[MM_TW][MM_TX];
#pragma GCC unroll 4
    for (int r = 0; r < NW; r++)
#pragma GCC unroll 4
        for (int c = 0; c < NX; c++) acc[r][c] = vf_zero();
    const size_t esz = wt == MM_F32 ? 4 : 2;
    int64_t i = 0;
    for (; i + VF_N <= n; i += VF_N) {
        vf wv[MM_TW];
#pragma GCC unroll 4
        for (int r = 0; r < NW; r++) {
            MM_PREFETCH(w + (r + NW) * ws + (size_t)i * esz);
            wv[r] = mm_wload(wt, w + r * ws, i);
        }
#pragma GCC unroll 4
        for (int c = 0; c < NX; c++) {
            vf xv = vf_load(x + c * xsf + i);
#pragma GCC unroll 4
            for (int r = 0; r < NW; r++) acc[r][c] = vf_fma(wv[r], xv, acc[r][c]);
        }
    }
    for (int r = 0; r < NW; r++)
        for (int c = 0; c < NX; c++) {
            float s = vf_hsum(acc[r][c]);
            for (int64_t j = i; j < n; j++) s += mm_wscalar(wt, w + r * ws, j) * x[c * xsf + j];
            y[c * ys + r] = s;
        }
}

SIMD_INLINE void mm_tile_f32(int64_t n, const uint8_t *w, size_t ws, const uint8_t *x,
                             size_t xs, float *y, int64_t ys, const int NW, const int NX) {
    mm_tile_float(n, w, ws, x, xs, y, ys, MM_F32, NW, NX);
}
SIMD_INLINE void mm_tile_f16(int64_t n, const uint8_t *w, size_t ws, const uint8_t *x,
                             size_t xs, float *y, int64_t ys, const int NW, const int NX) {
    mm_tile_float(n, w, ws, x, xs, y, ys, MM_F16, NW, NX);
}
SIMD_INLINE void mm_tile_bf16(int64_t n, const uint8_t *w, size_t ws, const uint8_t *x,
                              size_t xs, float *y, int64_t ys, const int NW, const int NX) {
    mm_tile_float(n, w, ws, x, xs, y, ys, MM_BF16, NW, NX);
}

MM_TILES(mm_tile_f32)
MM_TILES(mm_tile_f16)
MM_TILES(mm_tile_bf16)

/* ---- quantised activations (layout: see matmul.h) ------------------------------ */

#if MM_Q8_512
/* sx and xo of a chunk of grouped activations (or of the nq quarters of a tail chunk)
 * from its quants: the int8 dot product with ones sums each int32 lane's four values; in
 * the grouped order the four parts' lane g are group g's, in the compact tail order lanes
 * g, 4 + g, 8 + g and 12 + g of a quarter are. The same integer sums as a per-block
 * reduction, a few instructions per chunk instead of two reductions per block. */
static void mm_qx_group_sums(const uint8_t *qc, int nq, bool tail, const float *dg, float *sx,
                             int32_t *xo) {
    const __m512i ones = _mm512_set1_epi8(1);
    if (!tail) {
        __m512i s = _mm512_setzero_si512();
        for (int k = 0; k < 4; k++) s = _mm512_dpbusd_epi32(s, ones, _mm512_load_si512(qc + 64 * k));
        _mm512_store_ps(sx, _mm512_mul_ps(_mm512_load_ps(dg), _mm512_cvtepi32_ps(s)));
        _mm512_store_si512(xo, _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_slli_epi32(s, 7)));
        return;
    }
    for (int j = 0; j < nq; j++) {
        __m512i s = _mm512_dpbusd_epi32(_mm512_setzero_si512(), ones, _mm512_load_si512(qc + 64 * j));
        s = _mm512_add_epi32(s, _mm512_shuffle_i32x4(s, s, 0x4e));
        s = _mm512_add_epi32(s, _mm512_shuffle_i32x4(s, s, 0xb1));
        const __m128i g = _mm512_castsi512_si128(s);
        _mm_storeu_ps(sx + 4 * j, _mm_mul_ps(_mm_loadu_ps(dg + 4 * j), _mm_cvtepi32_ps(g)));
        _mm_storeu_si128((__m128i *)(xo + 4 * j), _mm_sub_epi32(_mm_setzero_si128(), _mm_slli_epi32(g, 7)));
    }
}
#endif

#if SIMD_AVX512
/* round(v * id) as int32, clamped to +-127 so that a non-finite activation (a broken
 * model's) never becomes INT_MIN, whose sums would overflow; finite values are unchanged. */
static inline __m512i mm_q8_round(__m512 v, __m512 id) {
    __m512 c = _mm512_max_ps(_mm512_mul_ps(v, id), _mm512_set1_ps(-127.0f));
    return _mm512_cvtps_epi32(_mm512_min_ps(c, _mm512_set1_ps(127.0f)));
}
#endif

#if SIMD_AVX2
/* max |x| over n values (a multiple of 8), as the plain C loop's fmaxf gives it (a NaN
 * lane keeps the max) */
static inline float mm_amax_avx2(const float *x, int n) {
    const __m256 sign = _mm256_set1_ps(-0.0f);
    __m256 m = _mm256_setzero_ps();
    for (int k = 0; k < n; k += 8) m = _mm256_max_ps(_mm256_andnot_ps(sign, _mm256_loadu_ps(x + k)), m);
    __m128 h = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
    h = _mm_max_ps(h, _mm_movehl_ps(h, h));
    return _mm_cvtss_f32(_mm_max_ss(h, _mm_movehdup_ps(h)));
}

/* 32 values times id rounded to int8 into q (the C loop's bits: cvtps rounds to nearest
 * even as lrintf does); qi: the same as int32, 8 a vector */
static inline void mm_q8_round32_avx2(const float *xb, float id, int8_t *q, __m256i qi[4]) {
    const __m256 vid = _mm256_set1_ps(id), lo = _mm256_set1_ps(-127.0f), hi = _mm256_set1_ps(127.0f);
    for (int k = 0; k < 4; k++)
        qi[k] = _mm256_cvtps_epi32(
            _mm256_min_ps(_mm256_max_ps(_mm256_mul_ps(_mm256_loadu_ps(xb + 8 * k), vid), lo), hi));
    const __m256i b = _mm256_packs_epi16(_mm256_packs_epi32(qi[0], qi[1]), _mm256_packs_epi32(qi[2], qi[3]));
    _mm256_storeu_si256((__m256i *)q, _mm256_permutevar8x32_epi32(b, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7)));
}

/* One block of 32 values quantised as the plain C loop below does it; returns its scale,
 * the sums of q over its two halves in s[0], s[1]. */
static inline float mm_q8_block_avx2(const float *xb, int8_t *q, int32_t s[2]) {
    const float amax = mm_amax_avx2(xb, 32);
    __m256i qi[4];
    mm_q8_round32_avx2(xb, amax > 0 ? 127.0f / amax : 0.0f, q, qi);
    for (int e = 0; e < 2; e++) {
        __m256i t = _mm256_add_epi32(qi[2 * e], qi[2 * e + 1]);
        __m128i u = _mm_add_epi32(_mm256_castsi256_si128(t), _mm256_extracti128_si256(t, 1));
        u = _mm_add_epi32(u, _mm_shuffle_epi32(u, 0x4e));
        s[e] = _mm_cvtsi128_si32(_mm_add_epi32(u, _mm_shuffle_epi32(u, 0xb1)));
    }
    return amax / 127.0f;
}
#endif

/* ---- the MM_QX_KSB form: a scale per 256 values ---------------------------------- */

/* A chunk's ks32 (8), o6 and ks16 (16) from its 256 quants q. */
static void mm_ksb_sums(const int8_t *q, int16_t *ks32, int32_t *o6, int16_t *ks16) {
#if SIMD_AVX2
    const __m256i ones = _mm256_set1_epi8(1);
    for (int b = 0; b < 8; b++) { /* int16 lanes 2i, 2i + 1: q[4i] + q[4i + 1], q[4i + 2] + q[4i + 3] */
        __m256i v = _mm256_maddubs_epi16(ones, _mm256_loadu_si256((const __m256i *)(q + 32 * b)));
        v = _mm256_add_epi16(v, _mm256_shuffle_epi32(v, 0x4e));
        v = _mm256_add_epi16(v, _mm256_shuffle_epi32(v, 0xb1)); /* a group's in lanes 0, 1 of its half */
        const int32_t g0 = _mm256_extract_epi32(v, 0), g1 = _mm256_extract_epi32(v, 4);
        const int16_t p[4] = {(int16_t)g0, (int16_t)(g0 >> 16), (int16_t)g1, (int16_t)(g1 >> 16)};
        o6[2 * b] = mm_ksb_o6(p[0], p[1]), o6[2 * b + 1] = mm_ksb_o6(p[2], p[3]);
        ks16[2 * b] = (int16_t)(p[0] + p[1]), ks16[2 * b + 1] = (int16_t)(p[2] + p[3]);
        ks32[b] = (int16_t)(p[0] + p[1] + p[2] + p[3]);
    }
#else
    for (int g = 0; g < 16; g++) {
        int32_t s01 = 0, s23 = 0;
        for (int i = 0; i < 16; i++) *(i % 4 < 2 ? &s01 : &s23) += q[16 * g + i];
        o6[g] = mm_ksb_o6(s01, s23);
        ks16[g] = (int16_t)(s01 + s23);
        if (g % 2 == 0) ks32[g / 2] = 0;
        ks32[g / 2] = (int16_t)(ks32[g / 2] + s01 + s23);
    }
#endif
}

/* 256 values quantised with one scale (returned) into q, and their sums. */
static float mm_ksb_chunk(const float *x, int8_t *q, int16_t *ks32, int32_t *o6, int16_t *ks16) {
#if SIMD_AVX2
    const float amax = mm_amax_avx2(x, 256), id = amax > 0 ? 127.0f / amax : 0.0f;
    __m256i qi[4];
    for (int b = 0; b < 8; b++) mm_q8_round32_avx2(x + 32 * b, id, q + 32 * b, qi);
#elif SIMD_NEON
    /* (the C loop's bits: maxnm ignores NaN as fmaxf does, cvtn rounds to nearest even) */
    float32x4_t m = vdupq_n_f32(0);
    for (int j = 0; j < 256; j += 4) m = vmaxnmq_f32(m, vabsq_f32(vld1q_f32(x + j)));
    const float amax = vmaxnmvq_f32(m), id = amax > 0 ? 127.0f / amax : 0.0f;
    const float32x4_t vid = vdupq_n_f32(id), lo = vdupq_n_f32(-127.0f), hi = vdupq_n_f32(127.0f);
    for (int j = 0; j < 256; j += 8) {
        int32x4_t v[2];
        for (int k = 0; k < 2; k++)
            v[k] = vcvtnq_s32_f32(vminnmq_f32(vmaxnmq_f32(vmulq_f32(vld1q_f32(x + j + 4 * k), vid), lo), hi));
        vst1_s8(q + j, vmovn_s16(vcombine_s16(vmovn_s32(v[0]), vmovn_s32(v[1]))));
    }
#else
    float amax = 0;
    for (int j = 0; j < 256; j++) amax = fmaxf(amax, fabsf(x[j]));
    const float id = amax > 0 ? 127.0f / amax : 0.0f;
    for (int j = 0; j < 256; j++) q[j] = (int8_t)lrintf(fminf(fmaxf(x[j] * id, -127.0f), 127.0f));
#endif
    mm_ksb_sums(q, ks32, o6, ks16);
    return amax / 127.0f;
}

/* Quantises x (n values) into dst in the MM_QX_KSB form; a tail chunk as if padded with
 * zeros. */
static void mm_qx_quantize_ksb(const float *x, uint8_t *dst, int64_t n) {
    const int64_t np = mm_qx_np(n);
    float *kd = (float *)mm_qx_kd(dst, np);
    int16_t *ks32 = (int16_t *)mm_qx_ks32(dst, np);
    int32_t *o6 = (int32_t *)mm_qx_o6(dst, np);
    int16_t *ks16 = (int16_t *)mm_qx_ks16(dst, np);
    for (int64_t c = 0; c < np / 256; c++) {
        const float *xc = x + 256 * c;
        float pad[256];
        if (256 * c + 256 > n) {
            memset(pad, 0, sizeof pad);
            memcpy(pad, xc, (size_t)(n - 256 * c) * sizeof *pad);
            xc = pad;
        }
        kd[c] = mm_ksb_chunk(xc, (int8_t *)dst + 256 * c, ks32 + 8 * c, o6 + 16 * c, ks16 + 16 * c);
    }
}

/* Quantises x (n values) into dst in the given order (MM_QX_LINEAR, MM_QX_GROUPED or
 * MM_QX_BLK, MM_QX_KSB). */
static void mm_qx_quantize(const float *x, uint8_t *dst, int64_t n, int order) {
    if (order == MM_QX_KSB) {
        mm_qx_quantize_ksb(x, dst, n);
        return;
    }
    const int64_t np = mm_qx_np(n);
    const bool blk = order == MM_QX_BLK;
    int8_t *q = (int8_t *)dst;
    float *dg = (float *)mm_qx_dg(dst, n), *sx = (float *)mm_qx_sx(dst, n);
    float *d = (float *)mm_qx_d(dst, n);
    int32_t *xo = (int32_t *)mm_qx_xo(dst, n);
    float *bd = (float *)mm_qx_bd(dst, np), *bsx = (float *)mm_qx_bsx(dst, np);
    int32_t *bneg = (int32_t *)mm_qx_bneg(dst, np), *bneg16 = (int32_t *)mm_qx_bneg16(dst, np);
    for (int64_t b = 0; b < n / QK8_0; b++) {
        const float *xb = x + b * QK8_0;
        int32_t s0 = 0, s1 = 0; /* sums of q over the two halves */
#if SIMD_AVX512
        __m512 v0 = _mm512_loadu_ps(xb), v1 = _mm512_loadu_ps(xb + 16);
        float amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(v0), _mm512_abs_ps(v1)));
        float db = amax / 127.0f, id = amax > 0 ? 127.0f / amax : 0.0f;
        __m512 vid = _mm512_set1_ps(id);
        __m512i q0 = mm_q8_round(v0, vid), q1 = mm_q8_round(v1, vid);
        _mm_storeu_si128((__m128i *)(q + b * QK8_0), _mm512_cvtepi32_epi8(q0));
        _mm_storeu_si128((__m128i *)(q + b * QK8_0 + 16), _mm512_cvtepi32_epi8(q1));
        /* (with VNNI the grouped order's sums are taken after the reordering, a chunk at
         * a time) */
        if (blk || !MM_Q8_512) s0 = _mm512_reduce_add_epi32(q0), s1 = _mm512_reduce_add_epi32(q1);
#elif SIMD_AVX2
        int32_t sh[2];
        const float db = mm_q8_block_avx2(xb, q + b * QK8_0, sh);
        s0 = sh[0], s1 = sh[1];
#else
        float amax = 0;
        for (int j = 0; j < QK8_0; j++) amax = fmaxf(amax, fabsf(xb[j]));
        float db = amax / 127.0f, id = amax > 0 ? 127.0f / amax : 0.0f;
        for (int j = 0; j < QK8_0; j++) {
            q[b * QK8_0 + j] = (int8_t)lrintf(fminf(fmaxf(xb[j] * id, -127.0f), 127.0f));
            *(j < 16 ? &s0 : &s1) += q[b * QK8_0 + j];
        }
#endif
        if (blk) {
            bd[b] = db, bsx[b] = db * (float)(s0 + s1), bneg[b] = -(s0 + s1);
            bneg16[2 * b] = -s0, bneg16[2 * b + 1] = -s1;
            continue;
        }
        d[b] = dg[2 * b] = dg[2 * b + 1] = db;
        sx[2 * b] = db * (float)s0, sx[2 * b + 1] = db * (float)s1;
        xo[2 * b] = -128 * s0, xo[2 * b + 1] = -128 * s1;
    }
    memset(q + n, 0, (size_t)(np - n));
    for (int64_t b = n / QK8_0; b < np / QK8_0; b++) {
        if (blk) {
            bd[b] = bsx[b] = 0, bneg[b] = bneg16[2 * b] = bneg16[2 * b + 1] = 0;
            continue;
        }
        d[b] = dg[2 * b] = dg[2 * b + 1] = sx[2 * b] = sx[2 * b + 1] = 0;
        xo[2 * b] = xo[2 * b + 1] = 0;
    }
    if (order == MM_QX_GROUPED) {
        _Alignas(64) uint8_t t[256]; /* chunks of 256 values; the tail's in its own order */
        for (int64_t c = 0; c < np; c += 256) {
            memcpy(t, q + c, 256);
            if (c + 256 <= n)
                mm_grp_reorder(t, (uint8_t *)q + c);
            else
                mm_tail_reorder(t, (uint8_t *)q + c, mm_tail_quarters(n));
#if MM_Q8_512
            mm_qx_group_sums((const uint8_t *)q + c, c + 256 <= n ? 4 : mm_tail_quarters(n),
                             c + 256 > n, dg + c / 16, sx + c / 16, xo + c / 16);
#endif
        }
    }
}

/* ---- Q8_0 weights, without AVX-512 VNNI (with it, Q8_0 is one of matmul_quant.c's
 * block types) -------------------------------------------------------------------------
 * Per block, an int32 vector whose lanes sum to sum_j w[j] * x[j]. With AVX-VNNI dpbusd multiplies unsigned by signed bytes, so x is biased to
 * x + 128 (unsigned) and the bias, 128 * sum(w), is taken off by starting the sum at
 * -128 * sum(w) (computed once per weight block, shared by all activation rows). With
 * plain AVX2, maddubs(|w|, sign(x, w)) gives the same products (llama.cpp's trick);
 * |w| * |x| <= 128 * 127 keeps the int16 pair sums from saturating. */

#if !MM_Q8_512
#if MM_Q8_SIMD
/* wa, wb: the two forms of a weight block the dot needs (see above) */
SIMD_INLINE void mm_q8_wprep(const int8_t *qs, __m256i *wa, __m256i *wb) {
    __m256i w = _mm256_loadu_si256((const __m256i *)qs);
#if MM_Q8_VNNI
    const __m256i zero = _mm256_setzero_si256();
    *wa = w;
    *wb = _mm256_sub_epi32(zero, MM_DPBUSD(zero, _mm256_set1_epi8((char)0x80), w));
#else
    *wa = _mm256_abs_epi8(w);
    *wb = w;
#endif
}

SIMD_INLINE __m256i mm_q8_xprep(const int8_t *qs) {
    __m256i x = _mm256_loadu_si256((const __m256i *)qs);
#if MM_Q8_VNNI
    return _mm256_xor_si256(x, _mm256_set1_epi8((char)0x80));
#else
    return x;
#endif
}

SIMD_INLINE __m256i mm_q8_dot(__m256i wa, __m256i wb, __m256i xp) {
#if MM_Q8_VNNI
    return MM_DPBUSD(wb, xp, wa);
#else
    __m256i p = _mm256_maddubs_epi16(wa, _mm256_sign_epi8(xp, wb));
    return _mm256_madd_epi16(p, _mm256_set1_epi16(1));
#endif
}
#endif

SIMD_INLINE void mm_tile_q8_0(int64_t n, const uint8_t *w, size_t ws, const uint8_t *x,
                              size_t xs, float *y, int64_t ys, const int NW, const int NX) {
    const int64_t nb = n / QK8_0;
#if MM_Q8_SIMD
    __m256 acc[MM_TW][MM_TX];
#pragma GCC unroll 4
    for (int r = 0; r < NW; r++)
#pragma GCC unroll 4
        for (int c = 0; c < NX; c++) acc[r][c] = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        __m256i wa[MM_TW], wb[MM_TW];
        float dw[MM_TW];
#pragma GCC unroll 4
        for (int r = 0; r < NW; r++) {
            const block_q8_0 *blk = (const block_q8_0 *)(w + r * ws) + b;
            MM_PREFETCH((const uint8_t *)blk + NW * ws);
            mm_q8_wprep(blk->qs, &wa[r], &wb[r]);
            dw[r] = simd_h2f(blk->d);
        }
#pragma GCC unroll 4
        for (int c = 0; c < NX; c++) {
            const uint8_t *xr = x + c * xs;
            __m256i xp = mm_q8_xprep((const int8_t *)xr + b * QK8_0);
            float dx = mm_qx_d(xr, n)[b];
#pragma GCC unroll 4
            for (int r = 0; r < NW; r++) {
                __m256 s = _mm256_cvtepi32_ps(mm_q8_dot(wa[r], wb[r], xp));
                acc[r][c] = _mm256_fmadd_ps(s, _mm256_set1_ps(dw[r] * dx), acc[r][c]);
            }
        }
    }
    for (int r = 0; r < NW; r++)
        for (int c = 0; c < NX; c++) y[c * ys + r] = mm_hsum256(acc[r][c]);
#else
    float acc[MM_TW][MM_TX] = {{0}};
    for (int64_t b = 0; b < nb; b++) {
        for (int r = 0; r < NW; r++) {
            const block_q8_0 *blk = (const block_q8_0 *)(w + r * ws) + b;
            float dw = simd_h2f(blk->d);
            for (int c = 0; c < NX; c++) {
                const int8_t *xq = (const int8_t *)(x + c * xs) + b * QK8_0;
                int32_t s = 0;
                for (int j = 0; j < QK8_0; j++) s += (int32_t)blk->qs[j] * xq[j];
                acc[r][c] += dw * mm_qx_d(x + c * xs, n)[b] * (float)s;
            }
        }
    }
    for (int r = 0; r < NW; r++)
        for (int c = 0; c < NX; c++) y[c * ys + r] = acc[r][c];
#endif
}

MM_TILES(mm_tile_q8_0)
#endif

/* ---- the skeleton ---------------------------------------------------------------- */

typedef struct mm_kind {
    mm_tile_row *tiles;               /* [2], see MM_TILES */
    int qx;                           /* MM_QX_*: the activations the tiles read */
    mm_prep_fn prep;                  /* NULL: the tiles read the weight rows as stored */
    mm_tile_row *fused;               /* NULL, or tiles for <= MM_TX rows, without prep */
    bool pk;                          /* the packed form: mm_pk_rows instead of tiles */
} mm_kind;

/* tiles NULL (and not pk): the backend cannot multiply by this type. packed: the
 * matrix is kern_mat_pack's (matmul_pk.c). */
static mm_kind mm_kind_of(uint32_t type, bool packed) {
    if (packed) return (mm_kind){.qx = mm_pk_qx(type), .pk = true};
    switch (type) {
    case DT_F32: return (mm_kind){mm_tile_f32_tiles, MM_QX_NONE, NULL, NULL, false};
    case DT_F16: return (mm_kind){mm_tile_f16_tiles, MM_QX_NONE, NULL, NULL, false};
    case DT_BF16: return (mm_kind){mm_tile_bf16_tiles, MM_QX_NONE, NULL, NULL, false};
#if !MM_Q8_512
    case DT_Q8_0: return (mm_kind){mm_tile_q8_0_tiles, MM_QX_LINEAR, NULL, NULL, false};
#endif
    default: {
        mm_prep_fn prep = mm_quant_prep(type);
        return (mm_kind){mm_quant_tiles(type), MM_QX_GROUPED, prep, mm_quant_fused(type), false};
    }
    }
}

typedef struct mm_job {
    mm_kind k;
    uint32_t type;
    const uint8_t *w;
    size_t ws;              /* bytes per weight row (packed: unused) */
    const uint8_t *x;       /* activations as the tiles read them */
    size_t xs;              /* bytes per activation row */
    float *y;
    int64_t n_in, n_out;
    int32_t n_rows;
    int64_t rows_per_task;  /* a multiple of MM_TW (packed: of 16 MM_PK_OB) */
    uint8_t *prep;          /* per thread, prep_bytes each (64-byte aligned) */
    size_t prep_bytes;
} mm_job;

/* nw (1 or MM_TW) weight rows from o times every activation row, MM_TX at a time. A
 * prepared type unpacks the rows once into this thread's scratch, where they stay in
 * cache for all activation groups; that is what makes many rows cost little more than
 * one. With a single group (decode) the fused tiles unpack a chunk at a time instead, as
 * whole prepared rows would leave L1 (kernels/README.md). Both give bitwise the same
 * results. */
static void mm_rows(const mm_job *j, int64_t o, int nw, int32_t thread) {
    const uint8_t *w = j->w + o * j->ws;
    if (j->k.fused && j->n_rows <= MM_TX) {
        j->k.fused[nw == MM_TW][j->n_rows - 1](j->n_in, w, j->ws, j->x, j->xs, j->y + o,
                                                j->n_out);
        return;
    }
    if (j->k.prep) {
        mm_prep *pr = (mm_prep *)(j->prep + (size_t)thread * j->prep_bytes);
        j->k.prep(j->n_in, w, j->ws, nw, pr);
        w = (const uint8_t *)pr;
    }
    const mm_tile_fn *t = j->k.tiles[nw == MM_TW];
    for (int32_t r0 = 0; r0 < j->n_rows; r0 += MM_TX) {
        const int nx = j->n_rows - r0 < MM_TX ? j->n_rows - r0 : MM_TX;
        t[nx - 1](j->n_in, w, j->ws, j->x + (size_t)r0 * j->xs, j->xs,
                  j->y + (int64_t)r0 * j->n_out + o, j->n_out);
    }
}

/* Task `task` of one matrix: its rows_per_task output rows, MM_TW at a time. Its first
 * MM_AHEAD tiles are prefetched together first: the tiles prefetch the ones after them,
 * but a task's first tiles follow another task's (often another thread's, or another
 * matrix's), so without this decode waits on DRAM a weight row at a time
 * (kernels/README.md). */
static void mm_task(const mm_job *j, int32_t task, int32_t thread) {
    const int64_t o0 = task * j->rows_per_task;
    const int64_t o1 = o0 + j->rows_per_task < j->n_out ? o0 + j->rows_per_task : j->n_out;
#if MM_PK
    if (j->k.pk) {
        uint8_t *wide = j->prep_bytes ? j->prep + (size_t)thread * j->prep_bytes : NULL;
        mm_pk_rows(j->type, j->n_in, j->w, o0, o1, j->x, j->xs, j->n_rows, j->y, j->n_out, wide);
        return;
    }
#endif
    const int64_t warm = o0 + MM_AHEAD * MM_TW < o1 ? o0 + MM_AHEAD * MM_TW : o1;
    for (size_t b = 0; b < (size_t)(warm - o0) * j->ws; b += 64)
        MM_PREFETCH(j->w + (size_t)o0 * j->ws + b);
    int64_t o = o0;
    for (; o + MM_TW <= o1; o += MM_TW) mm_rows(j, o, MM_TW, thread);
    for (; o < o1; o++) mm_rows(j, o, 1, thread);
}

typedef struct mm_quant_job {
    const float *x;
    uint8_t *q;
    size_t qs;      /* bytes per quantised row */
    int64_t n_in;
    int order;      /* MM_QX_LINEAR .. MM_QX_KSB */
} mm_quant_job;

static void mm_quant_task(void *ctx, int32_t row, int32_t thread) {
    (void)thread;
    const mm_quant_job *q = ctx;
    mm_qx_quantize(q->x + (int64_t)row * q->n_in, q->q + (size_t)row * q->qs, q->n_in, q->order);
}

enum { MM_MULTI = KERN_MATMUL_N };

/* Tasks per thread a matrix is cut into: 2 keeps some room for a thread that falls behind
 * (a busy host, unequal cores). Batches past the fused tiles (MM_TASKS_BATCH), bound by
 * arithmetic, take shorter tasks, so that the thread that starts late does not leave the
 * other waiting for up to a task at the end (figures for both: kernels/README.md). */
#define MM_TASKS 2
#define MM_TASKS_BATCH 4

/* From this many rows the activations are quantised in the pool, a row a task, rather than
 * by the calling thread alone; fewer go through the pool only when large (decode of a big
 * model). Figures: kernels/README.md. */
#define MM_QUANT_POOL_ROWS 4

/* Several matrices' tasks in one round of the pool: task t belongs to matrix i where
 * first[i] <= t < first[i + 1]. */
typedef struct mm_multi {
    mm_job j[MM_MULTI];
    int32_t first[MM_MULTI + 1];
    int32_t n;
} mm_multi;

static void mm_multi_task(void *ctx, int32_t task, int32_t thread) {
    const mm_multi *m = ctx;
    int32_t i = 0;
    while (task >= m->first[i + 1]) i++;
    mm_task(&m->j[i], task - m->first[i], thread);
}

/* The activations quantised once per order the matrices read, then every matrix's tiles
 * in one pool_run: for the projections that read the same input (q, k and v; gate and
 * up) that is one quantisation and one wait for the threads instead of three. Each
 * matrix's results are those of multiplying it alone. */
void cpu_matmul_n(kern_backend *b, int32_t n, float *const *y, const kern_mat *const *w,
                  const float *x, int32_t n_rows) {
    ASSERT(n >= 1 && n <= MM_MULTI);
    if (n_rows <= 0) return;
    pool *p = cpu_pool(b);
    const int32_t nt = pool_threads(p);
    const int64_t n_in = w[0]->n_in;
    const size_t xs = mm_qx_row_bytes(n_in), xb = xs * (size_t)n_rows;
    mm_multi m = {.n = n};
    size_t prep_bytes = 0;
    bool need[MM_QX_N] = {false}; /* by MM_QX_* */
    for (int32_t i = 0; i < n; i++) {
        const bool pk = w[i]->packed != NULL;
        const mm_kind k = mm_kind_of(w[i]->type, pk);
        ASSERT((k.tiles != NULL || k.pk) && w[i]->n_in == n_in && dtype_row_ok(w[i]->type, n_in));
        m.j[i] = (mm_job){.k = k, .type = w[i]->type, .w = pk ? w[i]->packed : w[i]->data,
                          .ws = pk ? 0 : dtype_row_bytes(w[i]->type, n_in),
                          .y = y[i], .n_in = n_in, .n_out = w[i]->n_out,
                          .n_rows = n_rows};
        need[k.qx] = true;
        const size_t pb = k.pk   ? mm_pk_wide_bytes(w[i]->type, n_in, n_rows)
                          : k.prep ? MM_TW * mm_prep_row_bytes(n_in)
                                   : 0;
        if (pb > prep_bytes) prep_bytes = pb;
    }
    /* Each thread's prepared rows on pages of their own, a page apart from the next
     * thread's and from the activations: a core's prefetchers, following its stores to
     * the end of its area, fetched the start of the next thread's area, whose stores then
     * had to take those lines back from the other core. (The prefetchers do not cross a
     * 4 KB page; figures: kernels/README.md.) */
    const size_t page = 4096;
    if (prep_bytes) prep_bytes = (prep_bytes + page - 1) / page * page + page;
    /* one scratch: the quantised rows in each order wanted, then each thread's prepared
     * weight rows */
    const uint8_t *qx[MM_QX_N] = {(const uint8_t *)x};
    int nq = 0;
    for (int order = MM_QX_LINEAR; order < MM_QX_N; order++) nq += need[order];
    if (nq) {
        uint8_t *s = cpu_scratch(b, n == 1 ? "matmul" : "matmul_n",
                                 nq * xb + prep_bytes * (size_t)nt + 2 * page), *at = s;
        if (!s) return; /* recorded for kern_backend_sync */
        for (int order = MM_QX_LINEAR; order < MM_QX_N; order++) {
            if (!need[order]) continue;
            mm_quant_job q = {x, at, xs, n_in, order};
            at += xb;
            if ((int64_t)n_rows * n_in >= 65536 || n_rows >= MM_QUANT_POOL_ROWS)
                pool_run(p, n_rows, mm_quant_task, &q);
            else
                for (int32_t r = 0; r < n_rows; r++) mm_quant_task(&q, r, 0);
            if (order == MM_QX_GROUPED && mm_tail_quarters(n_in))
                for (int32_t r0 = 0; r0 < n_rows; r0 += MM_TX)
                    mm_qx_tail_pack(q.q + (size_t)r0 * xs, xs, n_in,
                                    n_rows - r0 < MM_TX ? n_rows - r0 : MM_TX);
            qx[order] = q.q;
        }
        at = (uint8_t *)(((uintptr_t)at + 2 * page - 1) / page * page); /* a page past x */
        for (int32_t i = 0; i < n; i++) {
            m.j[i].prep = at;
            m.j[i].prep_bytes = prep_bytes;
        }
    }
    m.first[0] = 0;
    for (int32_t i = 0; i < n; i++) {
        mm_job *j = &m.j[i];
        j->x = qx[j->k.qx];
        j->xs = j->k.qx == MM_QX_NONE ? (size_t)n_in * sizeof(float) : xs;
        /* MM_TASKS (MM_TASKS_BATCH) chunks per thread: more balance uneven progress, but
         * each costs a claim of the pool's shared ticket and a start without prefetched
         * weights */
        const int unit = j->k.pk ? 16 * MM_PK_OB : MM_TW; /* (packed: a tile's o-blocks) */
        const int64_t n_tiles = (j->n_out + unit - 1) / unit;
        const int per = n_rows > MM_TX ? MM_TASKS_BATCH : MM_TASKS;
        int64_t tpt = (n_tiles + per * nt - 1) / (per * nt);
        if (tpt < 1) tpt = 1;
        j->rows_per_task = tpt * unit;
        m.first[i + 1] = m.first[i] + (int32_t)((j->n_out + j->rows_per_task - 1) / j->rows_per_task);
    }
    if (m.first[n] > 0) pool_run(p, m.first[n], mm_multi_task, &m);
}

void cpu_matmul(kern_backend *b, float *y, const kern_mat *w, const float *x, int32_t n_rows) {
    cpu_matmul_n(b, 1, &y, &w, x, n_rows);
}
