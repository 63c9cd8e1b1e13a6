/* quant.h - the ggml block-quantised weight types Q4_0, Q4_1, Q5_0, Q5_1, Q2_K, Q3_K, Q4_K,
 * Q5_K, Q6_K and the lookup-table types IQ4_NL, IQ4_XS and MXFP4: their block layouts, row (de)quantisers, and one "unpacked chunk" form that both
 * the dequantiser and the CPU matmul read, so each bit layout is written exactly once.
 *
 * Layouts are ggml's (ggml-common.h), byte for byte, as GGUF files store them. All fp16
 * fields are IEEE halves. The unpacked form of a chunk of 256 values (one K-quant super
 * block, or up to 8 blocks of 32 of the small types) is
 *
 *     value[i] = s[i / 16] * (u[i] - off) + m[i / 16]
 *
 * with u[i] an unsigned quant (0..63), s and m floats per 16 values, and off a per-type
 * integer (8 for Q4_0, 16 for Q5_0, 32 for Q6_K, 4 for Q3_K, else 0). The lookup-table types
 * store indices into a 16-entry table of int8 values; their u is the value looked up plus
 * 128 (1..241, off 128), so u - off is the table's value. It is exact: with off folded in
 * as ggml writes it, the products and sums are the ones ggml's dequantize_row_* does, in
 * the same order. The unpackers are inline (and written with GCC vector extensions,
 * which compile to SIMD where there is some and to plain C elsewhere) because the CPU
 * matmul calls them in its inner loop.
 *
 * This module does no matmuls; dtype.c dispatches its row (de)quantisers here. */
#ifndef MD_QUANT_H
#define MD_QUANT_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "dtype.h"

#if defined(__F16C__) || defined(__AVX2__) || defined(__SSSE3__)
#include <immintrin.h>
#endif
#if defined(__aarch64__) && defined(__ARM_NEON)
#include <arm_neon.h>
#endif

#define QK4_0 32
#define QK4_1 32
#define QK5_0 32
#define QK5_1 32
#define QK_K 256

/* value = d * (q - 8), q the 4-bit quant; byte j holds values j (low nibble) and j + 16 */
typedef struct {
    uint16_t d;
    uint8_t qs[QK4_0 / 2];
} block_q4_0;

/* value = d * q + m */
typedef struct {
    uint16_t d, m;
    uint8_t qs[QK4_1 / 2];
} block_q4_1;

/* value = d * (q - 16); bit j of qh (little-endian uint32) is the 5th bit of value j */
typedef struct {
    uint16_t d;
    uint8_t qh[4];
    uint8_t qs[QK5_0 / 2];
} block_q5_0;

/* value = d * q + m */
typedef struct {
    uint16_t d, m;
    uint8_t qh[4];
    uint8_t qs[QK5_1 / 2];
} block_q5_1;

/* 8 sub-blocks of 32: value = d * sc[j] * q - dmin * mn[j], sc and mn 6-bit, packed into
 * scales[12]: for j < 4 in the low 6 bits of bytes j (sc) and j + 4 (mn); for j >= 4 in
 * the low (sc) and high (mn) nibble of byte j + 4, with their top 2 bits in the top bits
 * of bytes j - 4 (sc) and j (mn). Values 64k + l and 64k + 32 + l (l < 32) are the
 * low and high nibbles of qs[32k + l]. */
typedef struct {
    uint16_t d, dmin;
    uint8_t scales[12];
    uint8_t qs[QK_K / 2];
} block_q4_K;

/* As Q4_K with 5-bit quants: bit 2k of qh[l] is the 5th bit of value 64k + l, bit 2k + 1
 * that of value 64k + 32 + l. */
typedef struct {
    uint16_t d, dmin;
    uint8_t scales[12];
    uint8_t qh[QK_K / 8];
    uint8_t qs[QK_K / 2];
} block_q5_K;

/* 16 sub-blocks of 16: value = d * scales[i / 16] * (q - 32), q 6-bit. In each half h of
 * 128 values, value 128h + 32k + l (k < 4, l < 32) has its low 4 bits in ql[64h + l] (k = 0:
 * low nibble, k = 2: high nibble) or ql[64h + 32 + l] (k = 1, 3), and its top 2 bits in
 * bits 2k..2k+1 of qh[32h + l]. */
typedef struct {
    uint8_t ql[QK_K / 2];
    uint8_t qh[QK_K / 4];
    int8_t scales[QK_K / 16];
    uint16_t d;
} block_q6_K;

/* 16 sub-blocks of 16: value = d * (sc & 15) * q - dmin * (sc >> 4), sc = scales[i / 16],
 * q 2-bit: value 128h + 32j + l (l < 32) is bits 2j..2j+1 of qs[32h + l]. */
typedef struct {
    uint8_t scales[QK_K / 16];
    uint8_t qs[QK_K / 4];
    uint16_t d, dmin;
} block_q2_K;

/* 16 sub-blocks of 16: value = d * (sc - 32) * (q - 4), sc 6-bit, q 3-bit. Value 128h + 32j
 * + l has its low 2 bits at bits 2j of qs[32h + l] and its third bit at bit 4h + j of
 * hmask[l]. Sub-block i's sc: low 4 bits the low (i < 8) or high nibble of scales[i % 8],
 * top 2 bits bits 2 (i / 4) of scales[8 + i % 4]. */
typedef struct {
    uint8_t hmask[QK_K / 8];
    uint8_t qs[QK_K / 4];
    uint8_t scales[12];
    uint16_t d;
} block_q3_K;

/* value = d * kv[q], kv the int8 table below, q 4-bit: byte j holds values j (low nibble)
 * and j + 16 */
typedef struct {
    uint16_t d;
    uint8_t qs[16];
} block_iq4_nl;

/* 8 sub-blocks of 32 of IQ4_NL's form with scale d * (ls - 32), ls 6-bit: the low 4 bits
 * of sub-block b's in the low (b even) or high nibble of scales_l[b / 2], the top 2 at bits
 * 2b of scales_h; sub-block b's quants are qs[16b .. 16b + 15]. */
typedef struct {
    uint16_t d;
    uint16_t scales_h;
    uint8_t scales_l[QK_K / 64];
    uint8_t qs[QK_K / 2];
} block_iq4_xs;

/* value = 2^(e - 128) * kv[q] (e8m0 exponent, halved as ggml does it; kv the doubled e2m1
 * values), q 4-bit as IQ4_NL's */
typedef struct {
    uint8_t e;
    uint8_t qs[16];
} block_mxfp4;

/* The tables as u values (value + 128). */
static const uint8_t quant_iq4nl_u[16] = {1, 24, 45, 63, 79, 93, 106, 118,
                                          129, 141, 153, 166, 181, 197, 217, 241};
static const uint8_t quant_mxfp4_u[16] = {128, 129, 130, 131, 132, 134, 136, 140,
                                          128, 127, 126, 125, 124, 122, 120, 116};

_Static_assert(sizeof(block_q2_K) == 84 && sizeof(block_q3_K) == 110 &&
               sizeof(block_iq4_nl) == 18 && sizeof(block_iq4_xs) == 136 &&
               sizeof(block_mxfp4) == 17, "block sizes are ggml's");
_Static_assert(sizeof(block_q4_0) == 18 && sizeof(block_q4_1) == 20 &&
               sizeof(block_q5_0) == 22 && sizeof(block_q5_1) == 24 &&
               sizeof(block_q4_K) == 144 && sizeof(block_q5_K) == 176 &&
               sizeof(block_q6_K) == 210, "block sizes are ggml's");

/* True for the types this module handles (the ones above). */
bool quant_has(uint32_t type);

/* Row (de)quantisers for the types above; n a multiple of the block. The quantisers
 * are plain round-to-nearest with a min/max scale per (sub-)block: valid blocks that
 * dequantise close to the input, for test models, not llama.cpp's tuned quantisation.
 * They return false for other types. */
bool quant_dequantize_row(uint32_t type, const void *src, float *dst, int64_t n);
bool quant_quantize_row(uint32_t type, const float *src, void *dst, int64_t n);

/* ---- the unpacked chunk ------------------------------------------------------------ */

#define QUANT_CHUNK 256 /* values per chunk */

typedef struct quant_chunk {
    _Alignas(64) uint8_t u[QUANT_CHUNK]; /* quants, 0..63 */
    float s[QUANT_CHUNK / 16];             /* scale per 16 values */
    float m[QUANT_CHUNK / 16];             /* offset per 16 values */
} quant_chunk;

/* True for the lookup-table types (IQ4_NL, IQ4_XS, MXFP4). */
static inline bool quant_lut(uint32_t type) {
    return type == DT_IQ4_NL || type == DT_IQ4_XS || type == DT_MXFP4;
}

/* off (see the top) of a type of this module. */
static inline int quant_off(uint32_t type) {
    if (quant_lut(type)) return 128;
    return type == DT_Q4_0 ? 8 : type == DT_Q5_0 ? 16 : type == DT_Q6_K ? 32 : type == DT_Q3_K ? 4 : 0;
}

/* 2^(e - 128) as ggml's e8m0 "half" conversion gives it (subnormal for e < 2) */
static inline float quant_e8m0_half(uint8_t e) {
    uint32_t bits = e < 2 ? 0x00200000u << e : (uint32_t)(e - 1) << 23;
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

static inline float quant_h2f(uint16_t h) {
#if defined(__F16C__)
    return _cvtsh_ss(h);
#else
    return fp16_to_f32(h);
#endif
}

typedef uint8_t quant_v16 __attribute__((vector_size(16)));
typedef uint8_t quant_v32 __attribute__((vector_size(32)));
typedef uint64_t quant_v2u64 __attribute__((vector_size(16)));
typedef uint16_t quant_w16 __attribute__((vector_size(32))); /* quant_v32 as 16-bit words */
typedef float quant_f8 __attribute__((vector_size(32)));
typedef float quant_f16 __attribute__((vector_size(64)));

static inline quant_v16 quant_ld16(const uint8_t *p) {
    quant_v16 v;
    memcpy(&v, p, sizeof v);
    return v;
}
/* (through a pointer: returning a 32-byte vector changes the ABI without AVX) */
static inline void quant_ld32(quant_v32 *v, const uint8_t *p) { memcpy(v, p, sizeof *v); }

/* The 5th bits of 16 values of a Q5_0 / Q5_1 block (bits 8i..8i+15 of qh, i = 0 or 2)
 * as 0 / 16 per byte. Spreads each bit to its own byte with a multiply: no table, no
 * variable shifts, which x86 does not have for bytes. */
static inline quant_v16 quant_q5_high(const uint8_t *qh, int i) {
    quant_v2u64 t = {qh[i], qh[i + 1]};
    t = t * 0x0101010101010101ull & 0x8040201008040201ull;
    t = (t + 0x7f7f7f7f7f7f7f7full) >> 3 & 0x1010101010101010ull;
    return (quant_v16)t;
}

/* Bits j .. j + w - 1 of every byte of quant_v32 v moved to bits 4 .. 4 + w - 1 (mask:
 * 0x1010 for one bit, 0x3030 for two), and the high nibbles of v. x86 has no byte
 * shifts, so these shift 16-bit words and mask off what crossed from the other byte.
 * (Macros: a function returning a 32-byte vector changes the ABI without AVX.) */
#define QUANT_BITS_TO4(v, j, mask) ((quant_v32)(((quant_w16)(v) >> (j) << 4) & (mask)))
#define QUANT_HI4(v) ((quant_v32)((quant_w16)(v) >> 4 & 0x0f0f))
/* bits j .. j + 1 of every byte of v at bits 0 .. 1 */
#define QUANT_BITS2(v, j) ((quant_v32)((quant_w16)(v) >> (j) & 0x0303))

/* Byte to float conversions (GCC lowers __builtin_convertvector of bytes to one scalar
 * conversion per element, so x86 gets them spelled out). */
static inline void quant_u8x8_to_f8(uint64_t b, quant_f8 *out) {
#if defined(__AVX2__)
    __m256 f = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_cvtsi64_si128((long long)b)));
    memcpy(out, &f, sizeof f);
#else
    for (int i = 0; i < 8; i++) (*out)[i] = (float)(uint8_t)(b >> 8 * i);
#endif
}

static inline void quant_i8x16_to_f16(const int8_t *p, quant_f16 *out) {
#if defined(__AVX512F__) && !defined(SIMD_256)
    __m512 f = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)p)));
    memcpy(out, &f, sizeof f);
#elif defined(__AVX2__)
    __m128i v = _mm_loadu_si128((const __m128i *)p);
    __m256 f[2] = {_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(v)),
                   _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(v, 8)))};
    memcpy(out, f, sizeof f);
#else
    for (int i = 0; i < 16; i++) (*out)[i] = (float)p[i];
#endif
}

/* 16 floats of a chunk's s or m from 8: each of v twice (the small and K4 types have one
 * scale per 32 values) */
static inline void quant_store_twice(float *dst, const quant_f8 *v) {
    quant_f16 w = __builtin_shufflevector(*v, *v, 0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7);
    memcpy(dst, &w, sizeof w);
}

/* The 8 6-bit scales (byte j of *sc) and mins (of *mn) of a Q4_K / Q5_K block's scales[12],
 * 4 at a time (layout: see block_q4_K). */
static inline void quant_k_scales(const uint8_t *scales, uint64_t *sc, uint64_t *mn) {
    uint32_t sw[3];
    memcpy(sw, scales, 12);
    const uint32_t m6 = 0x3f3f3f3fu, m4 = 0x0f0f0f0fu, m2 = 0x03030303u;
    *sc = (sw[0] & m6) | (uint64_t)((sw[2] & m4) | (sw[0] >> 6 & m2) << 4) << 32;
    *mn = (sw[1] & m6) | (uint64_t)((sw[2] >> 4 & m4) | (sw[1] >> 6 & m2) << 4) << 32;
}

/* Q2_K and Q3_K's super block into c (layouts: block_q2_K, block_q3_K). */
static inline void quant_unpack_k23(uint32_t type, const uint8_t *blk, quant_chunk *c) {
    const bool three = type == DT_Q3_K;
    const uint8_t *qs = blk + (three ? 32 : 16);
    quant_v32 q, hm = {0};
    if (three) quant_ld32(&hm, blk);
    for (int h = 0; h < 2; h++) {
        quant_ld32(&q, qs + 32 * h);
#pragma GCC unroll 4
        for (int j = 0; j < 4; j++) {
            quant_v32 u = QUANT_BITS2(q, 2 * j);
            if (three) u |= (quant_v32)(((quant_w16)hm >> (4 * h + j) << 2) & 0x0404);
            memcpy(c->u + 128 * h + 32 * j, &u, 32);
        }
    }
    if (three) {
        const block_q3_K *b = (const block_q3_K *)blk;
        const float d = quant_h2f((uint16_t)(blk[108] | blk[109] << 8));
        for (int i = 0; i < 16; i++) {
            const int lo = (i < 8 ? b->scales[i] : b->scales[i - 8] >> 4) & 15;
            const int sc = lo | (b->scales[8 + i % 4] >> 2 * (i / 4) & 3) << 4;
            c->s[i] = d * (float)(sc - 32), c->m[i] = 0;
        }
        return;
    }
    const float d = quant_h2f((uint16_t)(blk[80] | blk[81] << 8));
    const float dmin = quant_h2f((uint16_t)(blk[82] | blk[83] << 8));
    for (int i = 0; i < 16; i++)
        c->s[i] = d * (float)(blk[i] & 15), c->m[i] = -(dmin * (float)(blk[i] >> 4));
}

/* 16 bytes of nibbles (values j and j + 16 in byte j) looked up in a table of u values. */
static inline void quant_lut16(const uint8_t *tab, const uint8_t *qs, uint8_t *u) {
#if defined(__SSSE3__)
    const __m128i t = _mm_loadu_si128((const __m128i *)tab), m = _mm_set1_epi8(15);
    const __m128i q = _mm_loadu_si128((const __m128i *)qs);
    _mm_storeu_si128((__m128i *)u, _mm_shuffle_epi8(t, _mm_and_si128(q, m)));
    _mm_storeu_si128((__m128i *)(u + 16), _mm_shuffle_epi8(t, _mm_and_si128(_mm_srli_epi16(q, 4), m)));
#elif defined(__aarch64__) && defined(__ARM_NEON)
    const uint8x16_t t = vld1q_u8(tab), q = vld1q_u8(qs);
    vst1q_u8(u, vqtbl1q_u8(t, vandq_u8(q, vdupq_n_u8(15))));
    vst1q_u8(u + 16, vqtbl1q_u8(t, vshrq_n_u8(q, 4)));
#else
    for (int j = 0; j < 16; j++) u[j] = tab[qs[j] & 15], u[j + 16] = tab[qs[j] >> 4];
#endif
}

/* The lookup-table types: nb blocks of 32 of IQ4_NL or MXFP4, or IQ4_XS's super block. */
static inline void quant_unpack_lut(uint32_t type, const uint8_t *blk, int nb, quant_chunk *c) {
    memset(c, 0, sizeof *c);
    if (type == DT_IQ4_XS) {
        const block_iq4_xs *b = (const block_iq4_xs *)blk;
        const float d = quant_h2f(b->d);
        for (int k = 0; k < 8; k++) {
            quant_lut16(quant_iq4nl_u, b->qs + 16 * k, c->u + 32 * k);
            const int ls = (b->scales_l[k / 2] >> 4 * (k % 2) & 15) | (b->scales_h >> 2 * k & 3) << 4;
            c->s[2 * k] = c->s[2 * k + 1] = d * (float)(ls - 32);
        }
        return;
    }
    const bool mx = type == DT_MXFP4;
    const int bb = mx ? 17 : 18;
    for (int k = 0; k < nb; k++) {
        const uint8_t *p = blk + k * bb;
        quant_lut16(mx ? quant_mxfp4_u : quant_iq4nl_u, p + bb - 16, c->u + 32 * k);
        c->s[2 * k] = c->s[2 * k + 1] = mx ? quant_e8m0_half(p[0]) : quant_h2f((uint16_t)(p[0] | p[1] << 8));
    }
}

/* Unpacks the chunk starting at blk: one super block of a K type, or nb (1..8) blocks of
 * 32 of a small type, the rest of the chunk zero (u, s and m all 0). */
static inline void quant_unpack(uint32_t type, const uint8_t *blk, int nb, quant_chunk *c) {
    switch (type) {
    case DT_Q4_0: case DT_Q4_1: case DT_Q5_0: case DT_Q5_1: {
        const int bb = type == DT_Q4_0 ? 18 : type == DT_Q4_1 ? 20 : type == DT_Q5_0 ? 22 : 24;
        const bool has_m = type == DT_Q4_1 || type == DT_Q5_1;
        const bool five = type == DT_Q5_0 || type == DT_Q5_1;
        const int qs_at = 2 + 2 * has_m + 4 * five;
        quant_f8 d = {0}, m = {0};
        for (int b = 0; b < 8; b++) {
            if (b >= nb) {
                memset(c->u + 32 * b, 0, 32);
                continue;
            }
            const uint8_t *p = blk + b * bb;
            quant_v16 q = quant_ld16(p + qs_at), lo = q & 15, hi = q >> 4;
            if (five) {
                lo |= quant_q5_high(p + 2 + 2 * has_m, 0);
                hi |= quant_q5_high(p + 2 + 2 * has_m, 2);
            }
            memcpy(c->u + 32 * b, &lo, 16);
            memcpy(c->u + 32 * b + 16, &hi, 16);
            uint16_t h[2];
            memcpy(h, p, 4);
            d[b] = quant_h2f(h[0]);
            if (has_m) m[b] = quant_h2f(h[1]);
        }
        quant_store_twice(c->s, &d);
        quant_store_twice(c->m, &m);
        break;
    }
    case DT_Q4_K: case DT_Q5_K: {
        const bool five = type == DT_Q5_K;
        const uint8_t *scales = blk + 4, *qs = blk + (five ? 48 : 16);
        const float d = quant_h2f((uint16_t)(blk[0] | blk[1] << 8));
        const float dmin = quant_h2f((uint16_t)(blk[2] | blk[3] << 8));
        quant_v32 qh = {0}, q;
        if (five) quant_ld32(&qh, blk + 16);
#pragma GCC unroll 4
        for (int k = 0; k < 4; k++) {
            quant_ld32(&q, qs + 32 * k);
            quant_v32 lo = q & 15, hi = QUANT_HI4(q);
            if (five) {
                lo |= QUANT_BITS_TO4(qh, 2 * k, 0x1010);
                hi |= QUANT_BITS_TO4(qh, 2 * k + 1, 0x1010);
            }
            memcpy(c->u + 64 * k, &lo, 32);
            memcpy(c->u + 64 * k + 32, &hi, 32);
        }
        uint64_t sc, mn;
        quant_k_scales(scales, &sc, &mn);
        quant_f8 sf, mf;
        quant_u8x8_to_f8(sc, &sf);
        quant_u8x8_to_f8(mn, &mf);
        sf *= d;
        mf = -(mf * dmin);
        quant_store_twice(c->s, &sf);
        quant_store_twice(c->m, &mf);
        break;
    }
    case DT_Q6_K: {
        const block_q6_K *b = (const block_q6_K *)blk;
        for (int h = 0; h < 2; h++) {
            quant_v32 l0, l1, qh;
            quant_ld32(&l0, b->ql + 64 * h);
            quant_ld32(&l1, b->ql + 64 * h + 32);
            quant_ld32(&qh, b->qh + 32 * h);
            quant_v32 v[4] = {(l0 & 15) | QUANT_BITS_TO4(qh, 0, 0x3030),
                              (l1 & 15) | QUANT_BITS_TO4(qh, 2, 0x3030),
                              QUANT_HI4(l0) | QUANT_BITS_TO4(qh, 4, 0x3030),
                              QUANT_HI4(l1) | QUANT_BITS_TO4(qh, 6, 0x3030)};
            memcpy(c->u + 128 * h, v, sizeof v);
        }
        quant_f16 s, m = {0};
        quant_i8x16_to_f16(b->scales, &s);
        s *= quant_h2f((uint16_t)(blk[208] | blk[209] << 8)); /* d, read bytewise */
        memcpy(c->s, &s, sizeof s);
        memcpy(c->m, &m, sizeof m);
        break;
    }
    case DT_Q2_K: case DT_Q3_K: quant_unpack_k23(type, blk, c); break;
    case DT_IQ4_NL: case DT_IQ4_XS: case DT_MXFP4: quant_unpack_lut(type, blk, nb, c); break;
    default:
        memset(c, 0, sizeof *c);
        break;
    }
}

#endif
