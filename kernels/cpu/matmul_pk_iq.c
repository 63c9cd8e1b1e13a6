/* matmul_pk_iq.c - the packed form of the lookup-table types (IQ4_NL, IQ4_XS, MXFP4) and
 * its tiles on every level with a packed form (AVX-512 VNNI, AVX2, AArch64 NEON): the
 * packing of an o-block (16 weight rows) and the tiles matmul_pk.c's row loop calls for
 * them, one skeleton over a small vector layer per level (16, 8 or 4 rows a vector).
 *
 * A weight is t[q] times a scale, q a 4-bit code and t a table of 16 small integers
 * (IQ4_NL's non-linear int8 table, for IQ4_XS too; MXFP4's e2m1 values doubled, as
 * quant.h keeps them). The codes are stored as Q4_0's nibbles, so the packed quants are
 * Q4_0's (matmul_pk.c: part p, byte 4o + i of an o-block's block holds the codes of values
 * 4p + i and 16 + 4p + i of row o); the tiles turn a vector of codes into table values
 * with one byte shuffle (pshufb, tbl), then take the int8 dot product with the activations
 * as the other types do. Scales, after all blocks' quants: IQ4_NL per block of 32 the 16
 * rows' fp16 d (32 bytes, as stored); MXFP4 per block their e8m0 byte (16 bytes, as
 * stored; the float 2^(e - 128) is made in the tile, the half of ggml's conversion that
 * undoes the doubled table); IQ4_XS per super block of 256 the rows' fp16 d, then per
 * block their ls - 32 as int8 (MM_PK_XSC: 2 bytes a row and super block more than stored).
 *
 * Arithmetic of output (o, activation row r), on every level: per block b in order, the
 * exact integer P = sum_j t[q_j] x_j, then y = fma(float(P), d_w * d_x, y) with d_w the
 * block's scale (IQ4_XS: float(d) * (ls - 32), exact in float). A row's result does not
 * depend on the rows beside it; every level gives the same bits. The integer sum per
 * level: dpbusd (AVX-512 VNNI, AVX-VNNI) takes t + 128, unsigned, and starts at -128 sum q;
 * plain AVX2's maddubs takes IQ4's signed values as |t| times sign(x, t) (a pair up to
 * 2 x 127 x 127, so each product is widened at once) and MXFP4's as t + 12 (below 25: 4
 * products added in int16) starting at -12 sum q; NEON multiplies the signed values. */
#include <string.h>

#include "pk_lanes.h"

/* bytes of IQ4_XS's scales of one super block in an o-block */
#define MM_PK_XSC (32 + 8 * 16)

size_t mm_pk_lut_ob_bytes(uint32_t type, int64_t n) {
    const int64_t nb = n / 32;
    const size_t sc = type == DT_IQ4_XS ? (size_t)(nb / 8) * MM_PK_XSC
                      : type == DT_MXFP4 ? (size_t)nb * 16
                                         : (size_t)nb * 32;
    return ((size_t)nb * 256 + sc + 63) / 64 * 64;
}

#if MM_PK

/* Packs the 16 stored rows at src (rs bytes apart, nb blocks of 32 each) into the o-block
 * at ob (zeroed before). */
void mm_pk_lut_pack(uint32_t type, const uint8_t *src, size_t rs, int64_t nb, uint8_t *ob) {
    uint8_t *sc = ob + nb * 256;
    for (int o = 0; o < 16; o++) {
        const uint8_t *row = src + (size_t)o * rs;
        for (int64_t b = 0; b < nb; b++) {
            const uint8_t *qs;
            if (type == DT_IQ4_XS) {
                const block_iq4_xs *x = (const block_iq4_xs *)row + b / 8;
                const int k = (int)(b % 8);
                uint8_t *ks = sc + (b / 8) * MM_PK_XSC;
                const int ls = (x->scales_l[k / 2] >> 4 * (k % 2) & 15) | (x->scales_h >> 2 * k & 3) << 4;
                memcpy(ks + 2 * o, &x->d, 2);
                ks[32 + 16 * k + o] = (uint8_t)(int8_t)(ls - 32);
                qs = x->qs + 16 * k;
            } else if (type == DT_MXFP4) {
                const block_mxfp4 *m = (const block_mxfp4 *)row + b;
                sc[16 * b + o] = m->e;
                qs = m->qs;
            } else {
                const block_iq4_nl *l = (const block_iq4_nl *)row + b;
                memcpy(sc + 32 * b + 2 * o, &l->d, 2);
                qs = l->qs;
            }
            for (int p = 0; p < 4; p++) memcpy(ob + 256 * b + 64 * p + 4 * o, qs + 4 * p, 4);
        }
    }
}


/* ---- the level: pk_lanes.h's vectors, and the table lookup ---------------------- */
#if MM_Q8_512
SIMD_INLINE pv lv_table(const int8_t *t) {
    return _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)t));
}
SIMD_INLINE void lv_lookup(pv t, pv v, pv *lo, pv *hi) {
    const pv m = _mm512_set1_epi8(15);
    *lo = _mm512_shuffle_epi8(t, _mm512_and_si512(v, m));
    *hi = _mm512_shuffle_epi8(t, _mm512_and_si512(_mm512_srli_epi16(v, 4), m));
}
SIMD_INLINE pf pf_i8(const uint8_t *p) {
    return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)p)));
}
SIMD_INLINE pf pf_e8m0(const uint8_t *p) {
    const pv e = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)p));
    const pv big = _mm512_slli_epi32(_mm512_sub_epi32(e, _mm512_set1_epi32(1)), 23);
    const pv small = _mm512_sllv_epi32(_mm512_set1_epi32(0x00200000), e);
    const __mmask16 sub = _mm512_cmplt_epu32_mask(e, _mm512_set1_epi32(2));
    return _mm512_castsi512_ps(_mm512_mask_blend_epi32(sub, big, small));
}
#elif MM_Q8_SIMD
SIMD_INLINE pv lv_table(const int8_t *t) {
    return _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)t));
}
/* table values of the low and high nibbles of v */
SIMD_INLINE void lv_lookup(pv t, pv v, pv *lo, pv *hi) {
    const pv m = _mm256_set1_epi8(15);
    *lo = _mm256_shuffle_epi8(t, _mm256_and_si256(v, m));
    *hi = _mm256_shuffle_epi8(t, _mm256_and_si256(_mm256_srli_epi16(v, 4), m));
}
SIMD_INLINE pf pf_i8(const uint8_t *p) {
    return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)p)));
}
/* quant_e8m0_half of each byte: (e - 1) << 23 as float bits, subnormal below 2 */
SIMD_INLINE pf pf_e8m0(const uint8_t *p) {
    const pv e = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)p));
    const pv big = _mm256_slli_epi32(_mm256_sub_epi32(e, _mm256_set1_epi32(1)), 23);
    const pv small = _mm256_sllv_epi32(_mm256_set1_epi32(0x00200000), e);
    const pv sub = _mm256_cmpgt_epi32(_mm256_set1_epi32(2), e);
    return _mm256_castsi256_ps(_mm256_blendv_epi8(big, small, sub));
}
#elif MM_Q8_NEON
SIMD_INLINE pv lv_table(const int8_t *t) { return vld1q_s8(t); }
SIMD_INLINE void lv_lookup(pv t, pv v, pv *lo, pv *hi) {
    const uint8x16_t u = vreinterpretq_u8_s8(v);
    *lo = vqtbl1q_s8(t, vandq_u8(u, vdupq_n_u8(15)));
    *hi = vqtbl1q_s8(t, vshrq_n_u8(u, 4));
}
SIMD_INLINE uint32x4_t lv_u8x4(const uint8_t *p) {
    return vmovl_u16(vget_low_u16(vmovl_u8(pv_bytes4(p))));
}
SIMD_INLINE pf pf_i8(const uint8_t *p) {
    const int32x4_t v = vreinterpretq_s32_u32(lv_u8x4(p));
    return vcvtq_f32_s32(vshrq_n_s32(vshlq_n_s32(v, 24), 24)); /* (sign-extended) */
}
SIMD_INLINE pf pf_e8m0(const uint8_t *p) {
    const uint32x4_t e = lv_u8x4(p);
    const uint32x4_t big = vshlq_n_u32(vsubq_u32(e, vdupq_n_u32(1)), 23);
    const uint32x4_t small = vshlq_u32(vdupq_n_u32(0x00200000), vreinterpretq_s32_u32(e));
    return vreinterpretq_f32_u32(vbslq_u32(vcltq_u32(e, vdupq_n_u32(2)), small, big));
}
#endif

/* What the level adds to the table's values to make them the unsigned operand of its dot
 * product (0: signed). */
SIMD_INLINE int lv_bias(const uint32_t type) {
#if MM_Q8_VNNI || MM_Q8_512
    (void)type;
    return 128;
#elif MM_Q8_SIMD
    return type == DT_MXFP4 ? 12 : 0;
#else
    (void)type;
    return 0;
#endif
}

/* a += t . x, 4 byte products a lane, t the biased table values; k counts this sum's
 * products in the block. */
SIMD_INLINE void lv_dot(pv_sum *a, pv t, pv x, const int k, const uint32_t type) {
#if MM_Q8_512
    (void)k, (void)type;
    a->p = _mm512_dpbusd_epi32(a->p, t, x);
#elif MM_Q8_VNNI
    (void)k, (void)type;
    a->p = MM_DPBUSD(a->p, t, x);
#elif MM_Q8_SIMD
    const int run = lv_bias(type) ? 4 : 1; /* products added in int16 before widening */
    const __m256i m = lv_bias(type) ? _mm256_maddubs_epi16(t, x)
                                    : _mm256_maddubs_epi16(_mm256_abs_epi8(t), _mm256_sign_epi8(x, t));
    a->s = k % run == 0 ? m : _mm256_add_epi16(a->s, m);
    __asm__("" : "+x"(a->s)); /* (kept a chain: see matmul_pkv.c's pv_dot) */
    if (k % run == run - 1) {
        a->p = _mm256_add_epi32(a->p, _mm256_madd_epi16(a->s, _mm256_set1_epi16(1)));
        __asm__("" : "+x"(a->p));
    }
#elif defined(__ARM_FEATURE_DOTPROD)
    (void)k, (void)type;
    a->p = vreinterpretq_s8_s32(vdotq_s32(vreinterpretq_s32_s8(a->p), t, x));
#else
    (void)k, (void)type;
    const int16x8_t m = vpaddq_s16(vmull_s8(vget_low_s8(t), vget_low_s8(x)), vmull_high_s8(t, x));
    a->p = vreinterpretq_s8_s32(vpadalq_s16(vreinterpretq_s32_s8(a->p), m));
#endif
}

/* The lanes at (the first row of a part) of block b's d_w, in the o-block whose scales
 * start at sc. */
SIMD_INLINE pf lv_scale(const uint8_t *sc, int64_t b, int at, const uint32_t type) {
    if (type == DT_IQ4_XS) {
        const uint8_t *ks = sc + (b / 8) * MM_PK_XSC;
        return pf_mul(pf_h(ks + 2 * at), pf_i8(ks + 32 + 16 * (b % 8) + at));
    }
    return type == DT_MXFP4 ? pf_e8m0(sc + 16 * b + at) : pf_h(sc + 32 * b + 2 * at);
}
SIMD_INLINE const uint8_t *lv_scale_line(const uint8_t *sc, int64_t b, const uint32_t type) {
    return type == DT_IQ4_XS ? sc + (b / 8) * MM_PK_XSC + 32 + 16 * (b % 8)
           : type == DT_MXFP4 ? sc + 16 * b
                              : sc + 32 * b;
}

/* How many parts of an o-block a tile takes at once for more than one activation row
 * (one: their sums fill the registers) */
#define LV_NH_MANY (PV_L == 4 ? 2 : 1)

/* Parts H0 .. H0 + NH - 1 of the o-block at w times R activation rows, into y[r * ys +
 * L (H0 + h) + lane]. */
SIMD_INLINE void lv_parts(int64_t nb, const uint8_t *w, size_t obs, const uint8_t *x, size_t xs,
                          int64_t np, float *y, int64_t ys, const uint32_t type, const int R,
                          const int H0, const int NH) {
    const uint8_t *u = type == DT_MXFP4 ? quant_mxfp4_u : quant_iq4nl_u;
    const int bias = lv_bias(type);
    int8_t tv[16];
    for (int i = 0; i < 16; i++) tv[i] = (int8_t)(u[i] - 128 + bias);
    const pv tab = lv_table(tv);
    const uint8_t *sc = w + nb * 256;
    pf acc[PV_NP][MM_PK_RX];
#pragma GCC unroll 4
    for (int h = 0; h < NH; h++)
#pragma GCC unroll 4
        for (int r = 0; r < R; r++) acc[h][r] = pf_zero();
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *q = w + 256 * b;
        if (H0 == 0) { /* the next o-block's block (the other parts find it in cache) */
            for (int s = 0; s < 4; s++) MM_PREFETCH(q + obs + 64 * s);
            MM_PREFETCH(lv_scale_line(sc + obs, b, type));
        }
        pv_sum p[PV_NP][MM_PK_RX];
#pragma GCC unroll 4
        for (int r = 0; r < R; r++) {
            const pv p0 = pv_set32(bias * mm_qx_bneg(x + r * xs, np)[b]);
#pragma GCC unroll 4
            for (int h = 0; h < NH; h++) p[h][r].p = p0;
        }
#pragma GCC unroll 4
        for (int s = 0; s < 4; s++)
#pragma GCC unroll 4
            for (int h = 0; h < NH; h++) {
                pv tl, th;
                lv_lookup(tab, pv_load(q + 64 * s + 4 * PV_L * (H0 + h)), &tl, &th);
#pragma GCC unroll 4
                for (int r = 0; r < R; r++) {
                    lv_dot(&p[h][r], tl, pv_x4(x + r * xs, 32 * b + 4 * s), 2 * s, type);
                    lv_dot(&p[h][r], th, pv_x4(x + r * xs, 32 * b + 16 + 4 * s), 2 * s + 1, type);
                }
            }
#pragma GCC unroll 4
        for (int h = 0; h < NH; h++) {
            const pf dw = lv_scale(sc, b, PV_L * (H0 + h), type);
#pragma GCC unroll 4
            for (int r = 0; r < R; r++) {
                const pf dx = pf_set1(mm_qx_bd(x + r * xs, np)[b]);
                acc[h][r] = pf_fma(pf_cvt(p[h][r].p), pf_mul(dw, dx), acc[h][r]);
            }
        }
    }
#pragma GCC unroll 4
    for (int h = 0; h < NH; h++)
#pragma GCC unroll 4
        for (int r = 0; r < R; r++) pf_store(y + r * ys + PV_L * (H0 + h), acc[h][r]);
}

/* OB o-blocks (obs bytes apart; AVX-512 takes 2) times R rows, one after the other: all
 * of an o-block's parts together for one row (decode, where the weights stream from memory
 * once), LV_NH_MANY at a time for more. */
SIMD_INLINE void lv_tile(int64_t nb, const uint8_t *w, size_t obs, const uint8_t *x, size_t xs,
                         int64_t np, float *y, int64_t ys, const uint32_t type, const int R,
                         const int OB) {
#pragma GCC unroll 2
    for (int o = 0; o < OB; o++) {
        const uint8_t *wo = w + o * obs;
        if (R == 1) {
            lv_parts(nb, wo, OB * obs, x, xs, np, y + 16 * o, ys, type, R, 0, PV_NP);
            continue;
        }
#pragma GCC unroll 4
        for (int h0 = 0; h0 < PV_NP; h0 += LV_NH_MANY)
            lv_parts(nb, wo, OB * obs, x, xs, np, y + 16 * o, ys, type, R, h0, LV_NH_MANY);
    }
}

MM_PK_TYPE(lv_tile, mm_pkl_iq4_nl, DT_IQ4_NL)
MM_PK_TYPE(lv_tile, mm_pkl_iq4_xs, DT_IQ4_XS)
MM_PK_TYPE(lv_tile, mm_pkl_mxfp4, DT_MXFP4)

mm_pk_row *mm_pk_lut_tiles(uint32_t type) {
    return type == DT_IQ4_XS ? mm_pkl_iq4_xs_fns : type == DT_MXFP4 ? mm_pkl_mxfp4_fns : mm_pkl_iq4_nl_fns;
}

#endif
