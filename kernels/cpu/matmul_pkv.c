/* matmul_pkv.c - the packed form's tiles on vectors narrower than an o-block (layout and
 * arithmetic: matmul_pk.c): AVX2 (256 bits, 8 weight rows a vector, half an o-block) and
 * AArch64 NEON (128 bits, 4 rows, a quarter). One skeleton over a few operations per
 * level (the "pv" layer below); the AVX-512 tiles, whose vector is a whole o-block, are
 * matmul_pk512.c's.
 *
 * The int8 dot product of 4 weight bytes by 4 activation bytes per int32 lane:
 * - AVX2: maddubs multiplies the unsigned weight bytes by the signed activation bytes into
 *   int16 sums of pairs; those are added in int16 while they cannot saturate (|q| <= 127:
 *   8 of them for 4-bit weights, 4 for 5-bit, 2 for Q6_K's 6-bit) and then widened by madd
 *   with ones. Q8_0's weights, stored plus 128, are made signed again and multiplied as
 *   |w| by sign(x, w) (llama.cpp's way), whose pair sums stay below 2 * 128 * 127. With
 *   AVX-VNNI (Intel client chips since 2021), dpbusd.
 * - NEON: sdot with the dot-product extension (ARMv8.2 and later: Apple's chips, the
 *   Raspberry Pi 5), else widening multiplies and pairwise adds; Q8_0's weights signed.
 * Either way a lane ends with the exact integer sum dpbusd gives (Q8_0 without its offset:
 * the same integer) and the same float operations in the same order as with AVX-512, so
 * every level gives the same bits. */
#include <string.h>

#include "matmul_pk.h"

#if MM_PK && !MM_Q8_512

/* ---- the pv layer: int vectors (pv) of PV_L int32 lanes, float vectors (pf) -------- */
#if MM_Q8_SIMD
#define PV_L 8
typedef __m256i pv;
typedef __m256 pf;
SIMD_INLINE pv pv_load(const uint8_t *p) { return _mm256_load_si256((const __m256i *)p); }
SIMD_INLINE pv pv_zero(void) { return _mm256_setzero_si256(); }
SIMD_INLINE pv pv_set8(int8_t v) { return _mm256_set1_epi8(v); }
SIMD_INLINE pv pv_set32(int32_t v) { return _mm256_set1_epi32(v); }
SIMD_INLINE pv pv_and(pv a, pv b) { return _mm256_and_si256(a, b); }
SIMD_INLINE pv pv_or(pv a, pv b) { return _mm256_or_si256(a, b); }
SIMD_INLINE void pv_store(uint8_t *p, pv a) { _mm256_store_si256((__m256i *)p, a); }
#define pv_shl16(a, n) _mm256_slli_epi16(a, n)
#define pv_shr16(a, n) _mm256_srli_epi16(a, n)
SIMD_INLINE pf pf_zero(void) { return _mm256_setzero_ps(); }
SIMD_INLINE pf pf_set1(float v) { return _mm256_set1_ps(v); }
SIMD_INLINE pf pf_mul(pf a, pf b) { return _mm256_mul_ps(a, b); }
SIMD_INLINE pf pf_fma(pf a, pf b, pf c) { return _mm256_fmadd_ps(a, b, c); }  /* a b + c */
SIMD_INLINE pf pf_fnma(pf a, pf b, pf c) { return _mm256_fnmadd_ps(a, b, c); } /* c - a b */
SIMD_INLINE pf pf_cvt(pv a) { return _mm256_cvtepi32_ps(a); }
SIMD_INLINE void pf_store(float *p, pf a) { _mm256_storeu_ps(p, a); }
SIMD_INLINE pf pf_h(const uint8_t *p) { return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p)); }
SIMD_INLINE pf pf_u8(const uint8_t *p) {
    return _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)p)));
}
SIMD_INLINE pf pf_i8(const uint8_t *p) {
    return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)p)));
}
#elif MM_Q8_NEON
#define PV_L 4
typedef int8x16_t pv;
typedef float32x4_t pf;
SIMD_INLINE pv pv_load(const uint8_t *p) { return vld1q_s8((const int8_t *)p); }
SIMD_INLINE pv pv_zero(void) { return vdupq_n_s8(0); }
SIMD_INLINE pv pv_set8(int8_t v) { return vdupq_n_s8(v); }
SIMD_INLINE pv pv_set32(int32_t v) { return vreinterpretq_s8_s32(vdupq_n_s32(v)); }
SIMD_INLINE pv pv_and(pv a, pv b) { return vandq_s8(a, b); }
SIMD_INLINE pv pv_or(pv a, pv b) { return vorrq_s8(a, b); }
SIMD_INLINE void pv_store(uint8_t *p, pv a) { vst1q_s8((int8_t *)p, a); }
/* (shifts by a vector count, which any n may be: the _n forms want an immediate even in
 * the arms of a conditional that constant folding drops) */
#define pv_shl16(a, n) vreinterpretq_s8_u16(vshlq_u16(vreinterpretq_u16_s8(a), vdupq_n_s16(n)))
#define pv_shr16(a, n) vreinterpretq_s8_u16(vshlq_u16(vreinterpretq_u16_s8(a), vdupq_n_s16(-(n))))
SIMD_INLINE pf pf_zero(void) { return vdupq_n_f32(0); }
SIMD_INLINE pf pf_set1(float v) { return vdupq_n_f32(v); }
SIMD_INLINE pf pf_mul(pf a, pf b) { return vmulq_f32(a, b); }
SIMD_INLINE pf pf_fma(pf a, pf b, pf c) { return vfmaq_f32(c, a, b); }
SIMD_INLINE pf pf_fnma(pf a, pf b, pf c) { return vfmsq_f32(c, a, b); }
SIMD_INLINE pf pf_cvt(pv a) { return vcvtq_f32_s32(vreinterpretq_s32_s8(a)); }
SIMD_INLINE void pf_store(float *p, pf a) { vst1q_f32(p, a); }
SIMD_INLINE pf pf_h(const uint8_t *p) { return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16((const uint16_t *)p))); }
SIMD_INLINE uint8x8_t pv_bytes4(const uint8_t *p) { /* (4 bytes: no read past them) */
    uint32_t v;
    memcpy(&v, p, 4);
    return vcreate_u8(v);
}
SIMD_INLINE pf pf_u8(const uint8_t *p) {
    return vcvtq_f32_u32(vmovl_u16(vget_low_u16(vmovl_u8(pv_bytes4(p)))));
}
SIMD_INLINE pf pf_i8(const uint8_t *p) {
    return vcvtq_f32_s32(vmovl_s16(vget_low_s16(vmovl_s8(vreinterpret_s8_u8(pv_bytes4(p))))));
}
#endif

/* Activation row xr's four values from i, broadcast to every lane. */
SIMD_INLINE pv pv_x4(const uint8_t *xr, int64_t i) {
    int32_t v;
    memcpy(&v, xr + i, 4);
    return pv_set32(v);
}

/* Parts of an o-block (16 rows) one vector holds a quarter or half of; how many parts a
 * tile takes at once for one activation row (all: the weights stream from memory once)
 * and for more (as many as their sums leave registers for). */
#define PV_NP (16 / PV_L)
#define PV_NH_MANY (PV_L == 8 ? 1 : 2)

/* ---- the dot product ----------------------------------------------------------------
 * An integer sum under way: p, int32 lanes, and (AVX2 without VNNI) s, the int16 pair
 * sums not yet added to p. */
typedef struct pv_sum {
    pv p, s;
} pv_sum;

/* a += u . x, 4 byte products a lane (u unsigned below 128, or any byte on AVX2 with
 * dpbusd); k counts this sum's products in the block, `run` of which at most are added in
 * int16 before being widened into p (AVX2's maddubs). */
SIMD_INLINE void pv_dot(pv_sum *a, pv u, pv x, const int k, const int run) {
#if MM_Q8_VNNI
    (void)k, (void)run;
    a->p = MM_DPBUSD(a->p, u, x);
#elif MM_Q8_SIMD
    const __m256i m = _mm256_maddubs_epi16(u, x);
    a->s = k % run == 0 ? m : _mm256_add_epi16(a->s, m);
    /* (the sums made opaque, so that the compiler cannot reassociate their chains of adds
     * into trees that keep every product of a block live at once: 16 registers do not
     * hold them, and the spills cost more than the adds) */
    __asm__("" : "+x"(a->s));
    if (k % run == run - 1) {
        a->p = _mm256_add_epi32(a->p, _mm256_madd_epi16(a->s, _mm256_set1_epi16(1)));
        __asm__("" : "+x"(a->p));
    }
#elif defined(__ARM_FEATURE_DOTPROD)
    (void)k, (void)run;
    a->p = vreinterpretq_s8_s32(vdotq_s32(vreinterpretq_s32_s8(a->p), u, x));
#else
    (void)k, (void)run;
    const int16x8_t m = vpaddq_s16(vmull_s8(vget_low_s8(u), vget_low_s8(x)), vmull_high_s8(u, x));
    a->p = vreinterpretq_s8_s32(vpadalq_s16(vreinterpretq_s32_s8(a->p), m));
#endif
}

/* Q8_0's weights u (stored plus 128) times x: with dpbusd as they are (the sum starts at
 * -128 sum q); else signed again, and the sum starts at 0. */
#if MM_Q8_VNNI
#define PV_Q8_SIGNED 0
#else
#define PV_Q8_SIGNED 1
#endif
SIMD_INLINE void pv_dot_q8(pv_sum *a, pv u, pv x, const int k) {
#if MM_Q8_VNNI
    pv_dot(a, u, x, k, 1);
#elif MM_Q8_SIMD
    const __m256i w = _mm256_xor_si256(u, _mm256_set1_epi8((char)0x80));
    pv_dot(a, _mm256_abs_epi8(w), _mm256_sign_epi8(x, w), k, 1);
#else
    pv_dot(a, veorq_s8(u, vdupq_n_s8((int8_t)0x80)), x, k, 1);
#endif
}

/* Bit t of every byte of h at bit 4 (see matmul_pk512.c's twin). */
#define pv_to_bit4(h, t) ((t) < 4 ? pv_shl16(h, 4 - (t)) : (t) == 4 ? (h) : pv_shr16(h, (t) - 4))

/* ---- the tiles ------------------------------------------------------------------- */

/* Part s's low (values 4 s ..) and high (16 + 4 s ..) values of the quants at q + at,
 * one byte each. */
SIMD_INLINE void pv_unpack(const uint8_t *q, int at, const int s, const uint32_t type, pv *ul,
                           pv *uh) {
    const int bits = mm_pk_bits(type);
    const pv v = pv_load(q + 64 * s + at), lo4 = pv_set8(15);
    *ul = pv_and(v, lo4), *uh = pv_and(pv_shr16(v, 4), lo4);
    if (bits == 5) { /* the fifth bits, at bits 2s and 2s + 1, to bit 4 */
        const pv hv = pv_load(q + 256 + at), bit4 = pv_set8(16);
        *ul = pv_or(*ul, pv_and(pv_to_bit4(hv, 2 * s), bit4));
        *uh = pv_or(*uh, pv_and(pv_to_bit4(hv, 2 * s + 1), bit4));
    } else if (bits == 6) { /* the top 2 bits of part s, at bits 4-5 */
        const pv hv = pv_load(q + 256 + 64 * (s / 2) + at), hi2 = pv_set8(0x30);
        const pv hl = s % 2 ? hv : pv_shl16(hv, 4);
        const pv hh = s % 2 ? pv_shr16(hv, 2) : pv_shl16(hv, 2);
        *ul = pv_or(*ul, pv_and(hl, hi2));
        *uh = pv_or(*uh, pv_and(hh, hi2));
    }
}

/* The products of block b of parts H0 .. H0 + NH - 1 into p[h][r][0] (Q6_K: its two
 * groups of 16 into p[h][r][0] and [1]); part s of the quants at q + 64 s + 4 L (H0 + h),
 * packed, or (WIDE) of the wide form, whose 8 parts hold one value a byte. */
SIMD_INLINE void pv_block(const uint8_t *q, size_t ahead, const uint8_t *x, size_t xs, int64_t b,
                          pv_sum p[PV_NP][MM_PK_RX][2], const uint32_t type, const int R,
                          const int H0, const int NH, const int WIDE) {
    const int bits = mm_pk_bits(type);
    if (H0 == 0 && !WIDE) /* (the other parts' calls find the lines in cache) */
        for (int s = 0; s < bits; s++) MM_PREFETCH(q + ahead + 64 * s);
    if (type == DT_Q8_0) {
#pragma GCC unroll 8
        for (int s = 0; s < 8; s++)
#pragma GCC unroll 4
            for (int h = 0; h < NH; h++) {
                const pv u = pv_load(q + 64 * s + 4 * PV_L * (H0 + h));
#pragma GCC unroll 4
                for (int r = 0; r < R; r++) pv_dot_q8(&p[h][r][0], u, pv_x4(x + r * xs, 32 * b + 4 * s), s);
            }
        return;
    }
    const int run = bits == 4 ? 8 : bits == 5 ? 4 : 2;
#pragma GCC unroll 4
    for (int s = 0; s < 4; s++)
#pragma GCC unroll 4
        for (int h = 0; h < NH; h++) {
            const int at = 4 * PV_L * (H0 + h);
            pv ul, uh;
            if (WIDE)
                ul = pv_load(q + 64 * s + at), uh = pv_load(q + 64 * (s + 4) + at);
            else
                pv_unpack(q, at, s, type, &ul, &uh);
#pragma GCC unroll 4
            for (int r = 0; r < R; r++) {
                const pv x0 = pv_x4(x + r * xs, 32 * b + 4 * s);
                const pv x1 = pv_x4(x + r * xs, 32 * b + 16 + 4 * s);
                if (bits == 6) { /* values 0-15 and 16-31 are two groups with their own scale */
                    pv_dot(&p[h][r][0], ul, x0, s, run);
                    pv_dot(&p[h][r][1], uh, x1, s, run);
                } else {
                    pv_dot(&p[h][r][0], ul, x0, 2 * s, run);
                    pv_dot(&p[h][r][0], uh, x1, 2 * s + 1, run);
                }
            }
        }
}

/* The integer sums' start: minus off times the activations' sum of q (the offset types,
 * but Q8_0 made signed), Q6_K per group of 16. */
SIMD_INLINE void pv_start(const uint8_t *x, size_t xs, int64_t np, int64_t b,
                          pv_sum p[PV_NP][MM_PK_RX][2], const uint32_t type, const int R,
                          const int NH) {
    const bool ioff = mm_pk_ioff(type) && (type != DT_Q8_0 || !PV_Q8_SIGNED);
    const int ne = type == DT_Q6_K ? 2 : 1;
#pragma GCC unroll 4
    for (int r = 0; r < R; r++)
#pragma GCC unroll 2
        for (int e = 0; e < ne; e++) {
            pv p0 = pv_zero();
            if (type == DT_Q6_K)
                p0 = pv_set32(mm_qx_bneg16(x + r * xs, np)[2 * b + e] * 32);
            else if (ioff)
                p0 = pv_set32(mm_qx_bneg(x + r * xs, np)[b] * (1 << mm_pk_shift(type)));
#pragma GCC unroll 4
            for (int h = 0; h < NH; h++) p[h][r][e].p = p0;
        }
}

/* The lines of block b's scales in the o-block whose scales start at sc. */
SIMD_INLINE void pv_scale_prefetch(const uint8_t *sc, int64_t nb, int64_t b, const uint32_t type) {
    const int j = (int)(b % 8);
    if (type == DT_Q6_K) {
        MM_PREFETCH(sc + (b / 8) * MM_PK_6SC + 32 + 32 * j);
    } else if (mm_pk_k(type)) {
        MM_PREFETCH(sc + (b / 8) * MM_PK_KSC + 64 + 16 * j);
        MM_PREFETCH(sc + (b / 8) * MM_PK_KSC + 192 + 16 * j);
    } else {
        MM_PREFETCH(sc + 32 * b);
        if (mm_pk_minf(type)) MM_PREFETCH(sc + 32 * nb + 32 * b);
    }
}

/* acc[h][r] += block b's sums times their scales, as matmul_pk512.c does lane by lane. */
SIMD_INLINE void pv_scale(const uint8_t *w, size_t obs, int64_t nb, const uint8_t *x, size_t xs,
                          int64_t np, int64_t b, pv_sum p[PV_NP][MM_PK_RX][2],
                          pf acc[PV_NP][MM_PK_RX], const uint32_t type, const int R, const int H0,
                          const int NH, const int WIDE) {
    const uint8_t *sc = w + nb * (WIDE ? MM_PK_WQB : mm_pk_qbytes(type));
    const int j = (int)(b % 8);
    if (H0 == 0 && !WIDE) /* the next o-block's scales of this block */
        pv_scale_prefetch(sc + obs, nb, b, type);
#pragma GCC unroll 4
    for (int h = 0; h < NH; h++) {
        const int at = PV_L * (H0 + h); /* (the first row of this part) */
        pf dw, mw = pf_zero(), sw1 = pf_zero();
        if (type == DT_Q6_K) {
            const uint8_t *ks = sc + (b / 8) * MM_PK_6SC;
            const pf d = pf_h(ks + 2 * at);
            dw = pf_mul(d, pf_i8(ks + 32 + 16 * (2 * j) + at));
            sw1 = pf_mul(d, pf_i8(ks + 32 + 16 * (2 * j + 1) + at));
        } else if (mm_pk_k(type)) { /* d sc and dmin mn of the part's rows */
            const uint8_t *ks = sc + (b / 8) * MM_PK_KSC;
            dw = pf_mul(pf_h(ks + 2 * at), pf_u8(ks + 64 + 16 * j + at));
            mw = pf_mul(pf_h(ks + 32 + 2 * at), pf_u8(ks + 192 + 16 * j + at));
        } else {
            dw = pf_h(sc + 32 * b + 2 * at);
            if (mm_pk_minf(type)) mw = pf_h(sc + 32 * nb + 32 * b + 2 * at);
        }
#pragma GCC unroll 4
        for (int r = 0; r < R; r++) {
            const uint8_t *xr = x + r * xs;
            const pf dx = pf_set1(mm_qx_bd(xr, np)[b]), sx = pf_set1(mm_qx_bsx(xr, np)[b]);
            const pf a = pf_fma(pf_cvt(p[h][r][0].p), pf_mul(dw, dx), acc[h][r]);
            acc[h][r] = type == DT_Q6_K   ? pf_fma(pf_cvt(p[h][r][1].p), pf_mul(sw1, dx), a)
                        : mm_pk_minf(type) ? pf_fma(mw, sx, a)
                        : mm_pk_k(type)    ? pf_fnma(mw, sx, a)
                                           : a;
        }
    }
}

/* Parts H0 .. H0 + NH - 1 of one o-block times R activation rows, into y[r * ys +
 * L (H0 + h) + lane]. */
SIMD_INLINE void pv_parts(int64_t nb, const uint8_t *w, size_t obs, const uint8_t *x, size_t xs,
                          int64_t np, float *y, int64_t ys, const uint32_t type, const int R,
                          const int H0, const int NH, const int WIDE) {
    const int qb = WIDE ? MM_PK_WQB : mm_pk_qbytes(type);
    pf acc[PV_NP][MM_PK_RX];
#pragma GCC unroll 4
    for (int h = 0; h < NH; h++)
#pragma GCC unroll 4
        for (int r = 0; r < R; r++) acc[h][r] = pf_zero();
    for (int64_t b = 0; b < nb; b++) {
        pv_sum p[PV_NP][MM_PK_RX][2];
        pv_start(x, xs, np, b, p, type, R, NH);
        pv_block(w + b * qb, obs, x, xs, b, p, type, R, H0, NH, WIDE);
        pv_scale(w, obs, nb, x, xs, np, b, p, acc, type, R, H0, NH, WIDE);
    }
#pragma GCC unroll 4
    for (int h = 0; h < NH; h++)
#pragma GCC unroll 4
        for (int r = 0; r < R; r++) pf_store(y + r * ys + PV_L * (H0 + h), acc[h][r]);
}

/* One o-block (OB is 1) times R rows: all its parts together for one row (decode, where
 * the weights stream from memory once), PV_NH_MANY at a time for more, whose sums would
 * not fit in the registers together; packed or (WIDE) in the wide form. */
SIMD_INLINE void pv_tile_as(int64_t nb, const uint8_t *w, size_t obs, const uint8_t *x, size_t xs,
                            int64_t np, float *y, int64_t ys, const uint32_t type, const int R,
                            const int WIDE) {
    if (R == 1) {
        pv_parts(nb, w, obs, x, xs, np, y, ys, type, R, 0, PV_NP, WIDE);
        return;
    }
#pragma GCC unroll 4
    for (int h0 = 0; h0 < PV_NP; h0 += PV_NH_MANY)
        pv_parts(nb, w, obs, x, xs, np, y, ys, type, R, h0, PV_NH_MANY, WIDE);
}
SIMD_INLINE void pv_tile(int64_t nb, const uint8_t *w, size_t obs, const uint8_t *x, size_t xs,
                         int64_t np, float *y, int64_t ys, const uint32_t type, const int R,
                         const int OB) {
    (void)OB;
    pv_tile_as(nb, w, obs, x, xs, np, y, ys, type, R, 0);
}
SIMD_INLINE void pv_tile_wide(int64_t nb, const uint8_t *w, size_t obs, const uint8_t *x,
                              size_t xs, int64_t np, float *y, int64_t ys, const uint32_t type,
                              const int R, const int OB) {
    (void)OB;
    pv_tile_as(nb, w, obs, x, xs, np, y, ys, type, R, 1);
}

MM_PK_ALL_TYPES(pv_tile, mm_pkv, mm_pk_tiles)
MM_PK_ALL_TYPES(pv_tile_wide, mm_pkvw, mm_pk_wide_tiles)

/* The wide form of one block's quants, part by part. */
SIMD_INLINE void pv_widen_block(const uint8_t *q, uint8_t *dst, const uint32_t type) {
#pragma GCC unroll 4
    for (int s = 0; s < 4; s++)
#pragma GCC unroll 4
        for (int h = 0; h < PV_NP; h++) {
            const int at = 4 * PV_L * h;
            pv ul, uh;
            pv_unpack(q, at, s, type, &ul, &uh);
            pv_store(dst + 64 * s + at, ul);
            pv_store(dst + 64 * (s + 4) + at, uh);
        }
}

void mm_pk_widen(uint32_t type, int64_t nb, const uint8_t *w, size_t obs, uint8_t *dst) {
    const int qb = mm_pk_qbytes(type);
    switch (mm_pk_bits(type)) { /* (the bit count a compile-time constant in each loop) */
    case 4: for (int64_t b = 0; b < nb; b++) pv_widen_block(w + b * qb, dst + b * MM_PK_WQB, DT_Q4_0); break;
    case 5: for (int64_t b = 0; b < nb; b++) pv_widen_block(w + b * qb, dst + b * MM_PK_WQB, DT_Q5_0); break;
    default: for (int64_t b = 0; b < nb; b++) pv_widen_block(w + b * qb, dst + b * MM_PK_WQB, DT_Q6_K); break;
    }
    memcpy(dst + nb * MM_PK_WQB, w + nb * qb, obs - (size_t)nb * qb); /* the scales */
}

#endif
