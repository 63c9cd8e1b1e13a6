/* matmul_pkv.c - the packed form's tiles on vectors narrower than an o-block (layout and
 * arithmetic: matmul_pk.c): AVX2 (256 bits, 8 weight rows a vector, half an o-block) and
 * AArch64 NEON (128 bits, 4 rows, a quarter). One skeleton over a few operations per
 * level (the "pv" layer below); the AVX-512 tiles, whose vector is a whole o-block, are
 * matmul_pk512.c's.
 *
 * The int8 dot product of 4 weight bytes by 4 activation bytes per int32 lane:
 * - AVX2: maddubs multiplies the unsigned weight bytes by the signed activation bytes into
 *   int16 sums of pairs; those are added in int16 while they cannot saturate (|q| <= 127:
 *   8 of them for 4-bit weights, 4 for 5-bit) and then widened by madd with ones (the K
 *   types: with their sub-block scale). Q8_0's weights, stored plus 128, are made signed again and multiplied as
 *   |w| by sign(x, w) (llama.cpp's way), whose pair sums stay below 2 * 128 * 127. With
 *   AVX-VNNI (Intel client chips since 2021), dpbusd.
 * - NEON: sdot with the dot-product extension (ARMv8.2 and later: Apple's chips, the
 *   Raspberry Pi 5), else widening multiplies and pairwise adds; Q8_0's weights signed.
 * Either way a lane ends with the exact integer sum dpbusd gives (Q8_0 without its offset:
 * the same integer) and the same float operations in the same order as with AVX-512, so
 * every level gives the same bits; the K types (Q2_K .. Q6_K) take their own path below,
 * the same on AVX2 and NEON, other than AVX-512's. */
#include <string.h>

#include "pk_lanes.h"

#if MM_PK && !MM_Q8_512

/* ---- what the K types add to pk_lanes.h's layer ---------------------------------- */
#if MM_Q8_SIMD
/* A K type's sub-block scales of PV_L rows (bytes at p, signed or not) as the close of a
 * sum multiplies them: in both int16 halves of a lane (MM_KSB_PAIR16) or as int32. */
SIMD_INLINE pv pv_ksc(const uint8_t *p, const bool sgn) {
    const __m128i b = _mm_loadl_epi64((const __m128i *)p);
    const pv v = sgn ? _mm256_cvtepi8_epi32(b) : _mm256_cvtepu8_epi32(b);
#if MM_KSB_PAIR16
    return _mm256_or_si256(_mm256_and_si256(v, _mm256_set1_epi32(0xffff)), _mm256_slli_epi32(v, 16));
#else
    return v;
#endif
}
/* p + the int16 pair sums s times the scales sc (pv_ksc's form) */
SIMD_INLINE pv pv_close(pv p, pv s, pv sc) {
#if MM_KSB_PAIR16
    return _mm256_add_epi32(p, _mm256_madd_epi16(s, sc));
#else
    return _mm256_add_epi32(p, _mm256_mullo_epi32(s, sc));
#endif
}
/* int16 pairs (a[o], b[o]) of PV_L rows' bytes, one lane a row */
SIMD_INLINE pv pv_pair16(const uint8_t *a, const uint8_t *b) {
    return _mm256_cvtepu8_epi16(_mm_unpacklo_epi8(_mm_loadl_epi64((const __m128i *)a),
                                                  _mm_loadl_epi64((const __m128i *)b)));
}
/* acc + pair's two int16 times bs2's (two int16, low first) in every lane */
SIMD_INLINE pv pv_madd16(pv acc, pv pair, int32_t bs2) {
    return _mm256_add_epi32(acc, _mm256_madd_epi16(pair, _mm256_set1_epi32(bs2)));
}
#elif MM_Q8_NEON
SIMD_INLINE pv pv_ksc(const uint8_t *p, const bool sgn) {
    const uint8x8_t b = pv_bytes4(p);
    return sgn ? vreinterpretq_s8_s32(vmovl_s16(vget_low_s16(vmovl_s8(vreinterpret_s8_u8(b)))))
               : vreinterpretq_s8_u32(vmovl_u16(vget_low_u16(vmovl_u8(b))));
}
SIMD_INLINE pv pv_close(pv p, pv s, pv sc) {
    return vreinterpretq_s8_s32(
        vmlaq_s32(vreinterpretq_s32_s8(p), vreinterpretq_s32_s8(s), vreinterpretq_s32_s8(sc)));
}
SIMD_INLINE pv pv_pair16(const uint8_t *a, const uint8_t *b) {
    return vreinterpretq_s8_u16(vmovl_u8(vzip1_u8(pv_bytes4(a), pv_bytes4(b))));
}
SIMD_INLINE pv pv_madd16(pv acc, pv pair, int32_t bs2) {
    const int16x8_t a = vreinterpretq_s16_s8(pair), b = vreinterpretq_s16_s32(vdupq_n_s32(bs2));
    const int32x4_t m = vpaddq_s32(vmull_s16(vget_low_s16(a), vget_low_s16(b)), vmull_high_s16(a, b));
    return vreinterpretq_s8_s32(vaddq_s32(vreinterpretq_s32_s8(acc), m));
}
#endif

/* How many parts of an o-block (PV_NP) a tile takes at once for one activation row (all:
 * the weights stream from memory once) and for more (as many as their sums leave
 * registers for). */
#define PV_NH_MANY (PV_L == 8 ? 1 : 2)

/* ---- the dot product (on pk_lanes.h's pv_sum) ----------------------------------- */

/* a += u . x, 4 byte products a lane (u unsigned below 128, or any byte on AVX2 with
 * dpbusd); k counts this sum's products in the block, `run` of which at most are added in
 * s before being closed into p. Plain (KS false): s is AVX2's int16 pair sums, widened by
 * madd with ones, elsewhere p takes the products at once. KS (the K types' MM_QX_KSB
 * sums): every run starts s at s0 and closes it times the sub-block scales sc (pv_close),
 * so a run never spans two scales. */
SIMD_INLINE void pv_dot(pv_sum *a, pv u, pv x, const int k, const int run, const bool KS, pv sc,
                        pv s0) {
#if MM_Q8_SIMD && !MM_Q8_VNNI
    const __m256i m = _mm256_maddubs_epi16(u, x);
    a->s = k % run == 0 ? (KS ? _mm256_add_epi16(s0, m) : m) : _mm256_add_epi16(a->s, m);
    /* (the sums made opaque, so that the compiler cannot reassociate their chains of adds
     * into trees that keep every product of a block live at once: 16 registers do not
     * hold them, and the spills cost more than the adds) */
    __asm__("" : "+x"(a->s));
    if (k % run == run - 1) {
        a->p = KS ? pv_close(a->p, a->s, sc) : _mm256_add_epi32(a->p, _mm256_madd_epi16(a->s, _mm256_set1_epi16(1)));
        __asm__("" : "+x"(a->p));
    }
#else
#if MM_Q8_VNNI
#define PV_DOT4(acc, u, x) MM_DPBUSD(acc, u, x)
#elif defined(__ARM_FEATURE_DOTPROD)
#define PV_DOT4(acc, u, x) vreinterpretq_s8_s32(vdotq_s32(vreinterpretq_s32_s8(acc), u, x))
#else
#define PV_DOT4(acc, u, x)                                                                     \
    vreinterpretq_s8_s32(vpadalq_s16(vreinterpretq_s32_s8(acc),                                \
                                     vpaddq_s16(vmull_s8(vget_low_s8(u), vget_low_s8(x)),      \
                                                vmull_high_s8(u, x))))
#endif
    if (!KS) {
        a->p = PV_DOT4(a->p, u, x);
        return;
    }
    a->s = PV_DOT4(k % run == 0 ? s0 : a->s, u, x);
    if (k % run == run - 1) a->p = pv_close(a->p, a->s, sc);
#undef PV_DOT4
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
    pv_dot(a, u, x, k, 1, false, u, u);
#elif MM_Q8_SIMD
    const __m256i w = _mm256_xor_si256(u, _mm256_set1_epi8((char)0x80));
    pv_dot(a, _mm256_abs_epi8(w), _mm256_sign_epi8(x, w), k, 1, false, u, u);
#else
    pv_dot(a, veorq_s8(u, vdupq_n_s8((int8_t)0x80)), x, k, 1, false, u, u);
#endif
}

/* Bit t of every byte of h at bit k (then masked; see matmul_pk512.c's twin). */
#define pv_to_bit(h, t, k) ((t) < (k) ? pv_shl16(h, (k) - (t)) : (t) == (k) ? (h) : pv_shr16(h, (t) - (k)))

/* ---- the tiles ------------------------------------------------------------------- */

/* Part s's low (e 0: values 4 s ..) or high (e 1: 16 + 4 s ..) values of the quants at
 * q + at, one byte each. */
SIMD_INLINE pv pv_unpack_half(const uint8_t *q, int at, const int s, const uint32_t type, const int e) {
    const int bits = mm_pk_bits(type);
    if (bits <= 3) { /* 2 bits at 2 (s % 2) + 4 e of part s / 2; Q3_K's third at 2 s + e */
        pv u = pv_and(pv_shr16(pv_load(q + 64 * (s / 2) + at), 2 * (s % 2) + 4 * e), pv_set8(3));
        if (bits == 3) u = pv_or(u, pv_and(pv_to_bit(pv_load(q + 128 + at), 2 * s + e, 2), pv_set8(4)));
        return u;
    }
    const pv v = pv_load(q + 64 * s + at), lo4 = pv_set8(15);
    pv u = pv_and(e ? pv_shr16(v, 4) : v, lo4);
    if (bits == 5) { /* the fifth bits, at bits 2s and 2s + 1, to bit 4 */
        const pv hv = pv_load(q + 256 + at);
        u = pv_or(u, pv_and(pv_to_bit(hv, 2 * s + e, 4), pv_set8(16)));
    } else if (bits == 6) { /* the top 2 bits of part s, at bits 4-5 */
        const pv hv = pv_load(q + 256 + 64 * (s / 2) + at);
        const pv hb = e == 0 ? (s % 2 ? hv : pv_shl16(hv, 4)) : (s % 2 ? pv_shr16(hv, 2) : pv_shl16(hv, 2));
        u = pv_or(u, pv_and(hb, pv_set8(0x30)));
    }
    return u;
}
SIMD_INLINE void pv_unpack(const uint8_t *q, int at, const int s, const uint32_t type, pv *ul,
                           pv *uh) {
    *ul = pv_unpack_half(q, at, s, type, 0), *uh = pv_unpack_half(q, at, s, type, 1);
}

/* Part s's half e of block q (packed, or WIDE: the wide form, one value a byte). */
SIMD_INLINE pv pv_quants(const uint8_t *q, int at, const int s, const uint32_t type, const int e,
                         const int WIDE) {
    return WIDE ? pv_load(q + 64 * (s + 4 * e) + at) : pv_unpack_half(q, at, s, type, e);
}

/* The 4- and 5-bit types' part of an o-block: both halves of each of its 4 steps, NH
 * parts times R rows, each run of sums closed every run products; ksb: the 256-scale form,
 * whose sums the parts' sub-block scales sc[h] multiply (sc unread otherwise). */
SIMD_INLINE void pv_halves(const uint8_t *q, const uint8_t *x, size_t xs, int64_t b,
                           pv_sum p[PV_NP][MM_PK_RX], const uint32_t type, const int R, const int H0,
                           const int NH, const int WIDE, const int run, const bool ksb, const pv *sc) {
    const pv z = pv_zero();
#pragma GCC unroll 4
    for (int s = 0; s < 4; s++)
#pragma GCC unroll 4
        for (int h = 0; h < NH; h++) {
            const int at = 4 * PV_L * (H0 + h);
            const pv ul = pv_quants(q, at, s, type, 0, WIDE), uh = pv_quants(q, at, s, type, 1, WIDE);
            const pv sh = ksb ? sc[h] : z;
#pragma GCC unroll 4
            for (int r = 0; r < R; r++) {
                pv_dot(&p[h][r], ul, pv_x4(x + r * xs, 32 * b + 4 * s), 2 * s, run, ksb, sh, z);
                pv_dot(&p[h][r], uh, pv_x4(x + r * xs, 32 * b + 16 + 4 * s), 2 * s + 1, run, ksb, sh, z);
            }
        }
}

/* The products of block b of parts H0 .. H0 + NH - 1 into p[h][r] (the types of blocks
 * of 32, not the K types: pv_block_k); part s of the quants at q + 64 s + 4 L (H0 + h). */
SIMD_INLINE void pv_block(const uint8_t *q, size_t ahead, const uint8_t *x, size_t xs, int64_t b,
                          pv_sum p[PV_NP][MM_PK_RX], const uint32_t type, const int R,
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
                for (int r = 0; r < R; r++) pv_dot_q8(&p[h][r], u, pv_x4(x + r * xs, 32 * b + 4 * s), s);
            }
        return;
    }
    pv_halves(q, x, xs, b, p, type, R, H0, NH, WIDE, bits == 4 ? 8 : 4, false, NULL);
}

/* The integer sums' start: minus off times the activations' sum of q (the offset types,
 * but Q8_0 made signed). */
SIMD_INLINE void pv_start(const uint8_t *x, size_t xs, int64_t np, int64_t b,
                          pv_sum p[PV_NP][MM_PK_RX], const uint32_t type, const int R,
                          const int NH) {
    const bool ioff = mm_pk_ioff(type) && (type != DT_Q8_0 || !PV_Q8_SIGNED);
#pragma GCC unroll 4
    for (int r = 0; r < R; r++) {
        const pv p0 = ioff ? pv_set32(mm_qx_bneg(x + r * xs, np)[b] * (1 << mm_pk_shift(type))) : pv_zero();
#pragma GCC unroll 4
        for (int h = 0; h < NH; h++) p[h][r].p = p0;
    }
}

/* The lines of block b's scales in the o-block whose scales start at sc. */
SIMD_INLINE void pv_scale_prefetch(const uint8_t *sc, int64_t nb, int64_t b, const uint32_t type) {
    const int j = (int)(b % 8);
    if (type == DT_Q6_K || type == DT_Q3_K) {
        MM_PREFETCH(sc + (b / 8) * MM_PK_6SC + 32 + 32 * j);
    } else if (type == DT_Q2_K) {
        MM_PREFETCH(sc + (b / 8) * MM_PK_2SC + 64 + 32 * j);
        MM_PREFETCH(sc + (b / 8) * MM_PK_2SC + 320 + 32 * j);
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
                          int64_t np, int64_t b, pv_sum p[PV_NP][MM_PK_RX],
                          pf acc[PV_NP][MM_PK_RX], const uint32_t type, const int R, const int H0,
                          const int NH, const int WIDE) {
    const uint8_t *sc = w + nb * (WIDE ? MM_PK_WQB : mm_pk_qbytes(type));
    if (H0 == 0 && !WIDE) /* the next o-block's scales of this block */
        pv_scale_prefetch(sc + obs, nb, b, type);
#pragma GCC unroll 4
    for (int h = 0; h < NH; h++) {
        const int at = PV_L * (H0 + h); /* (the first row of this part) */
        const pf dw = pf_h(sc + 32 * b + 2 * at);
        const pf mw = mm_pk_minf(type) ? pf_h(sc + 32 * nb + 32 * b + 2 * at) : pf_zero();
#pragma GCC unroll 4
        for (int r = 0; r < R; r++) {
            const uint8_t *xr = x + r * xs;
            const pf dx = pf_set1(mm_qx_bd(xr, np)[b]), sx = pf_set1(mm_qx_bsx(xr, np)[b]);
            const pf a = pf_fma(pf_cvt(p[h][r].p), pf_mul(dw, dx), acc[h][r]);
            acc[h][r] = mm_pk_minf(type) ? pf_fma(mw, sx, a) : a;
        }
    }
}

/* ---- the K types, on MM_QX_KSB activations (one scale per 256 values) ---------------
 * Per super block of 256 and (output o, activation row r) one integer sum
 *     P = sum over sub-blocks j of sc_j * sum_j u q    (Q6_K: per group of 16, (u - 32) q)
 * the sub-block scales multiplied in by the close of each run of products (pv_close), then
 * y = fma(float(P), d_w d_x, y) and, Q4_K and Q5_K, y = y - float(M) (dmin_w d_x) with M =
 * sum_j mn_j * (sum of q over sub-block j): two float steps per 256 values where the
 * MM_QX_BLK form takes two or three per 32. Every level that runs these (AVX2, NEON) makes
 * the same integer sums and float steps, so they give the same bits; AVX-512's
 * (matmul_pk512.c, MM_QX_BLK) differ by the activations' rounding. */

/* The K types whose scales cover groups of 16 values */
SIMD_INLINE bool pv_k16(uint32_t type) { return type == DT_Q6_K || type == DT_Q3_K || type == DT_Q2_K; }

/* The products of block b (sub-block j = b % 8) into p[h][r]; scales at ks (the super
 * block's). Q4_K, Q5_K: one sub-block scale; Q6_K, Q3_K, Q2_K: its two groups of 16 one
 * after the other, each with its scale, each run of Q6_K and Q3_K started at minus their
 * offset (32, 4) times the group's sum of q (the activations' o6). */
SIMD_INLINE void pv_block_k(const uint8_t *q, size_t ahead, const uint8_t *ks, const uint8_t *x,
                            size_t xs, int64_t np, int64_t b, pv_sum p[PV_NP][MM_PK_RX],
                            const uint32_t type, const int R, const int H0, const int NH,
                            const int WIDE) {
    const int bits = mm_pk_bits(type), j = (int)(b % 8);
    if (H0 == 0 && !WIDE)
        for (int s = 0; s < bits; s++) MM_PREFETCH(q + ahead + 64 * s);
    if (pv_k16(type)) {
        const int at_sc = type == DT_Q2_K ? 64 : 32;
#pragma GCC unroll 2
        for (int e = 0; e < 2; e++) {
            pv sc[PV_NP], s0[MM_PK_RX];
#pragma GCC unroll 4
            for (int h = 0; h < NH; h++)
                sc[h] = pv_ksc(ks + at_sc + 16 * (2 * j + e) + PV_L * (H0 + h), type != DT_Q2_K);
#pragma GCC unroll 4
            for (int r = 0; r < R; r++) {
                const int32_t o6 = mm_qx_o6(x + r * xs, np)[2 * b + e];
                s0[r] = type == DT_Q2_K ? pv_zero() : pv_set32(type == DT_Q3_K ? mm_ksb_o(o6, 3) : o6);
            }
#pragma GCC unroll 4
            for (int s = 0; s < 4; s++)
#pragma GCC unroll 4
                for (int h = 0; h < NH; h++) {
                    const pv u = pv_quants(q, 4 * PV_L * (H0 + h), s, type, e, WIDE);
#pragma GCC unroll 4
                    for (int r = 0; r < R; r++)
                        pv_dot(&p[h][r], u, pv_x4(x + r * xs, 32 * b + 16 * e + 4 * s), s, 4, true, sc[h], s0[r]);
                }
        }
        return;
    }
    /* (int16 pairs: 16 products of 4 bits or 8 of 5 a run stay below 2^15) */
    const int run = MM_KSB_PAIR16 && bits == 5 ? 4 : 8;
    pv sc[PV_NP];
#pragma GCC unroll 4
    for (int h = 0; h < NH; h++) sc[h] = pv_ksc(ks + 64 + 16 * j + PV_L * (H0 + h), false);
    pv_halves(q, x, xs, b, p, type, R, H0, NH, WIDE, run, true, sc);
}

/* acc[h][r] += super block sb's sums p times their scales at ks. */
SIMD_INLINE void pv_scale_k(const uint8_t *ks, const uint8_t *x, size_t xs, int64_t np, int64_t sb,
                            pv_sum p[PV_NP][MM_PK_RX], pf acc[PV_NP][MM_PK_RX],
                            const uint32_t type, const int R, const int H0, const int NH) {
#pragma GCC unroll 4
    for (int h = 0; h < NH; h++) {
        const int at = PV_L * (H0 + h);
        const pf d = pf_h(ks + 2 * at);
        if (type == DT_Q6_K || type == DT_Q3_K) {
#pragma GCC unroll 4
            for (int r = 0; r < R; r++)
                acc[h][r] = pf_fma(pf_cvt(p[h][r].p), pf_mul(d, pf_set1(mm_qx_kd(x + r * xs, np)[sb])), acc[h][r]);
            continue;
        }
        /* mins per 32 (Q4_K, Q5_K) or 16 (Q2_K) values, in pairs (mn_2i, mn_2i+1) */
        const int nm = type == DT_Q2_K ? 8 : 4, at_mn = type == DT_Q2_K ? 320 : 192;
        const pf dm = pf_h(ks + 32 + 2 * at);
        pv mn[8];
#pragma GCC unroll 8
        for (int i = 0; i < nm; i++) mn[i] = pv_pair16(ks + at_mn + 32 * i + at, ks + at_mn + 16 + 32 * i + at);
#pragma GCC unroll 4
        for (int r = 0; r < R; r++) {
            const uint8_t *xr = x + r * xs;
            const int16_t *bs = type == DT_Q2_K ? mm_qx_ks16(xr, np) + 16 * sb : mm_qx_ks32(xr, np) + 8 * sb;
            pv m = pv_zero();
#pragma GCC unroll 8
            for (int i = 0; i < nm; i++) {
                int32_t bs2;
                memcpy(&bs2, bs + 2 * i, 4);
                m = pv_madd16(m, mn[i], bs2);
            }
            const pf dx = pf_set1(mm_qx_kd(xr, np)[sb]);
            const pf a = pf_fma(pf_cvt(p[h][r].p), pf_mul(d, dx), acc[h][r]);
            acc[h][r] = pf_fnma(pf_cvt(m), pf_mul(dm, dx), a);
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
    if (mm_pk_qx(type) == MM_QX_KSB) {
        const uint8_t *sc = w + nb * qb;
        const int kb = mm_pk_ksc_bytes(type);
        for (int64_t sb = 0; sb < nb / 8; sb++) {
            pv_sum p[PV_NP][MM_PK_RX];
#pragma GCC unroll 4
            for (int h = 0; h < NH; h++)
#pragma GCC unroll 4
                for (int r = 0; r < R; r++) p[h][r].p = pv_zero();
            for (int64_t b = 8 * sb; b < 8 * sb + 8; b++) {
                pv_block_k(w + b * qb, obs, sc + sb * kb, x, xs, np, b, p, type, R, H0, NH, WIDE);
                if (H0 == 0 && !WIDE) pv_scale_prefetch(sc + obs, nb, b, type);
            }
            pv_scale_k(sc + sb * kb, x, xs, np, sb, p, acc, type, R, H0, NH);
        }
    } else {
        for (int64_t b = 0; b < nb; b++) {
            pv_sum p[PV_NP][MM_PK_RX];
            pv_start(x, xs, np, b, p, type, R, NH);
            pv_block(w + b * qb, obs, x, xs, b, p, type, R, H0, NH, WIDE);
            pv_scale(w, obs, nb, x, xs, np, b, p, acc, type, R, H0, NH, WIDE);
        }
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
    /* In the wide form Q3_K takes rows two at a time with both halves on AVX2 (faster for
     * it only, kernels/README.md) */
    if (PV_L == 8 && WIDE && type == DT_Q3_K && R > 2) {
        pv_parts(nb, w, obs, x, xs, np, y, ys, type, 2, 0, PV_NP, WIDE);
        pv_parts(nb, w, obs, x + 2 * xs, xs, np, y + 2 * ys, ys, type, R - 2, 0, PV_NP, WIDE);
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

/* The tables of the types every level packs, then Q2_K's and Q3_K's, which only these
 * tiles take. */
mm_pk_row *mm_pkv_tiles8(uint32_t type);
mm_pk_row *mm_pkvw_tiles8(uint32_t type);
MM_PK_ALL_TYPES(pv_tile, mm_pkv, mm_pkv_tiles8)
MM_PK_ALL_TYPES(pv_tile_wide, mm_pkvw, mm_pkvw_tiles8)
MM_PK_TYPE(pv_tile, mm_pkv_q2_k, DT_Q2_K) MM_PK_TYPE(pv_tile, mm_pkv_q3_k, DT_Q3_K)
MM_PK_TYPE(pv_tile_wide, mm_pkvw_q2_k, DT_Q2_K) MM_PK_TYPE(pv_tile_wide, mm_pkvw_q3_k, DT_Q3_K)

mm_pk_row *mm_pk_tiles(uint32_t type) {
    return type == DT_Q2_K ? mm_pkv_q2_k_fns : type == DT_Q3_K ? mm_pkv_q3_k_fns : mm_pkv_tiles8(type);
}
mm_pk_row *mm_pk_wide_tiles(uint32_t type) {
    return type == DT_Q2_K ? mm_pkvw_q2_k_fns : type == DT_Q3_K ? mm_pkvw_q3_k_fns : mm_pkvw_tiles8(type);
}

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
    case 2: for (int64_t b = 0; b < nb; b++) pv_widen_block(w + b * qb, dst + b * MM_PK_WQB, DT_Q2_K); break;
    case 3: for (int64_t b = 0; b < nb; b++) pv_widen_block(w + b * qb, dst + b * MM_PK_WQB, DT_Q3_K); break;
    case 4: for (int64_t b = 0; b < nb; b++) pv_widen_block(w + b * qb, dst + b * MM_PK_WQB, DT_Q4_0); break;
    case 5: for (int64_t b = 0; b < nb; b++) pv_widen_block(w + b * qb, dst + b * MM_PK_WQB, DT_Q5_0); break;
    default: for (int64_t b = 0; b < nb; b++) pv_widen_block(w + b * qb, dst + b * MM_PK_WQB, DT_Q6_K); break;
    }
    memcpy(dst + nb * MM_PK_WQB, w + nb * qb, obs - (size_t)nb * qb); /* the scales */
}

#endif
