/* matmul_pk256.c - the packed form's tiles with AVX2 (layout and arithmetic:
 * matmul_pk.c): a 256-bit vector holds half an o-block, 8 weight rows, 4 values each.
 *
 * Without dpbusd, maddubs multiplies the unsigned weight bytes by the signed activation
 * bytes into int16 sums of pairs; those are added in int16 while they cannot saturate
 * (|q| <= 127: 8 of them for 4-bit weights, 4 for 5-bit, 2 for Q6_K's 6-bit) and then
 * widened by madd with ones: the exact int32 sums dpbusd gives. Q8_0's weights, stored
 * plus 128, are made signed again and multiplied as |w| by sign(x, w) (llama.cpp's way),
 * whose pair sums stay below 2 * 128 * 127, so its sum needs no offset. With AVX-VNNI
 * (Intel client chips since 2021) dpbusd does it in one instruction. Either way a lane
 * ends with the same integer sum and the same float operations as with AVX-512, so the
 * results are the same bits. */
#include <string.h>

#include "matmul_pk.h"

#if MM_PK && !MM_Q8_512

#if MM_Q8_VNNI
#define MM_PK2_VNNI 1
#else
#define MM_PK2_VNNI 0
#endif

/* An integer sum under way: p, int32 lanes, and (without VNNI) s, the int16 pair sums
 * not yet added to p. */
typedef struct mm_pk2_sum {
    __m256i p, s;
} mm_pk2_sum;

/* a += u . x, 4 byte products a lane; k counts this sum's products in the block, of which
 * `run` at most are added in int16 before being widened into p. */
SIMD_INLINE void mm_pk2_dot(mm_pk2_sum *a, __m256i u, __m256i x, const int k, const int run) {
#if MM_PK2_VNNI
    (void)k, (void)run;
    a->p = MM_DPBUSD(a->p, u, x);
#else
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
#endif
}

/* Activation row xr's four values from i, broadcast to every lane. */
SIMD_INLINE __m256i mm_pk2_x4(const uint8_t *xr, int64_t i) {
    int32_t v;
    memcpy(&v, xr + i, 4);
    return _mm256_set1_epi32(v);
}

/* Bit t of every byte of h at bit 4 (see matmul_pk512.c's twin). */
SIMD_INLINE __m256i mm_pk2_to_bit4(__m256i h, const int t) {
    return t < 4 ? _mm256_slli_epi16(h, 4 - t) : t == 4 ? h : _mm256_srli_epi16(h, t - 4);
}

SIMD_INLINE __m256i mm_pk2_load(const uint8_t *p) { return _mm256_load_si256((const __m256i *)p); }
SIMD_INLINE __m256 mm_pk2_h8(const uint8_t *p) { /* 8 fp16 */
    return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p));
}
SIMD_INLINE __m256 mm_pk2_u8(const uint8_t *p) { /* 8 unsigned bytes */
    return _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)p)));
}
SIMD_INLINE __m256 mm_pk2_i8(const uint8_t *p) { /* 8 signed bytes */
    return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)p)));
}

/* The products of block b of halves H0 .. H0 + NH - 1 into p[h][r][0] (Q6_K: its two
 * groups of 16 into p[h][r][0] and [1]); part s of the quants at q + 64 s + 32 (H0 + h). */
SIMD_INLINE void mm_pk2_block(const uint8_t *q, size_t ahead, const uint8_t *x, size_t xs, int64_t b,
                              mm_pk2_sum p[2][MM_PK_RX][2], const uint32_t type, const int R,
                              const int H0, const int NH) {
    const int bits = mm_pk_bits(type);
    const __m256i lo4 = _mm256_set1_epi8(15);
    if (H0 == 0) /* (the other half's call finds the lines in cache) */
        for (int s = 0; s < bits; s++) MM_PREFETCH(q + ahead + 64 * s);
    if (type == DT_Q8_0) {
#pragma GCC unroll 8
        for (int s = 0; s < 8; s++)
#pragma GCC unroll 2
            for (int h = 0; h < NH; h++) {
                const __m256i u = mm_pk2_load(q + 64 * s + 32 * (H0 + h));
                const __m256i wq = _mm256_xor_si256(u, _mm256_set1_epi8((char)0x80)), wa = _mm256_abs_epi8(wq);
#pragma GCC unroll 4
                for (int r = 0; r < R; r++) {
                    const __m256i xv = mm_pk2_x4(x + r * xs, 32 * b + 4 * s);
                    if (MM_PK2_VNNI)
                        mm_pk2_dot(&p[h][r][0], u, xv, s, 1);
                    else
                        mm_pk2_dot(&p[h][r][0], wa, _mm256_sign_epi8(xv, wq), s, 1);
                }
            }
        return;
    }
    const int run = bits == 4 ? 8 : bits == 5 ? 4 : 2;
#pragma GCC unroll 4
    for (int s = 0; s < 4; s++)
#pragma GCC unroll 2
        for (int h = 0; h < NH; h++) {
            const int at = 32 * (H0 + h);
            const __m256i v = mm_pk2_load(q + 64 * s + at);
            __m256i ul = _mm256_and_si256(v, lo4), uh = _mm256_and_si256(_mm256_srli_epi16(v, 4), lo4);
            if (bits == 5) { /* the fifth bits, at bits 2s and 2s + 1, to bit 4 */
                const __m256i hv = mm_pk2_load(q + 256 + at), bit4 = _mm256_set1_epi8(16);
                ul = _mm256_or_si256(ul, _mm256_and_si256(mm_pk2_to_bit4(hv, 2 * s), bit4));
                uh = _mm256_or_si256(uh, _mm256_and_si256(mm_pk2_to_bit4(hv, 2 * s + 1), bit4));
            } else if (bits == 6) { /* the top 2 bits of part s, at bits 4-5 */
                const __m256i hv = mm_pk2_load(q + 256 + 64 * (s / 2) + at), hi2 = _mm256_set1_epi8(0x30);
                const __m256i hl = s % 2 ? hv : _mm256_slli_epi16(hv, 4);
                const __m256i hh = s % 2 ? _mm256_srli_epi16(hv, 2) : _mm256_slli_epi16(hv, 2);
                ul = _mm256_or_si256(ul, _mm256_and_si256(hl, hi2));
                uh = _mm256_or_si256(uh, _mm256_and_si256(hh, hi2));
            }
#pragma GCC unroll 4
            for (int r = 0; r < R; r++) {
                const __m256i x0 = mm_pk2_x4(x + r * xs, 32 * b + 4 * s);
                const __m256i x1 = mm_pk2_x4(x + r * xs, 32 * b + 16 + 4 * s);
                if (bits == 6) { /* values 0-15 and 16-31 are two groups with their own scale */
                    mm_pk2_dot(&p[h][r][0], ul, x0, s, run);
                    mm_pk2_dot(&p[h][r][1], uh, x1, s, run);
                } else {
                    mm_pk2_dot(&p[h][r][0], ul, x0, 2 * s, run);
                    mm_pk2_dot(&p[h][r][0], uh, x1, 2 * s + 1, run);
                }
            }
        }
}

/* The integer sums' start: minus off times the activations' sum of q (the offset types,
 * but Q8_0 without VNNI, whose products are signed), Q6_K per group of 16. */
SIMD_INLINE void mm_pk2_start(const uint8_t *x, size_t xs, int64_t np, int64_t b,
                              mm_pk2_sum p[2][MM_PK_RX][2], const uint32_t type, const int R,
                              const int NH) {
    const bool ioff = mm_pk_ioff(type) && (type != DT_Q8_0 || MM_PK2_VNNI);
    const int ne = type == DT_Q6_K ? 2 : 1;
#pragma GCC unroll 4
    for (int r = 0; r < R; r++)
#pragma GCC unroll 2
        for (int e = 0; e < ne; e++) {
            __m256i p0 = _mm256_setzero_si256();
            if (type == DT_Q6_K)
                p0 = _mm256_slli_epi32(_mm256_set1_epi32(mm_qx_bneg16(x + r * xs, np)[2 * b + e]), 5);
            else if (ioff)
                p0 = _mm256_slli_epi32(_mm256_set1_epi32(mm_qx_bneg(x + r * xs, np)[b]), mm_pk_shift(type));
#pragma GCC unroll 2
            for (int h = 0; h < NH; h++) p[h][r][e].p = p0;
        }
}

/* The lines of block b's scales in the o-block whose scales start at sc. */
SIMD_INLINE void mm_pk2_scale_prefetch(const uint8_t *sc, int64_t nb, int64_t b, const uint32_t type) {
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
SIMD_INLINE void mm_pk2_scale(const uint8_t *w, size_t obs, int64_t nb, const uint8_t *x, size_t xs, int64_t np,
                              int64_t b, mm_pk2_sum p[2][MM_PK_RX][2], __m256 acc[2][MM_PK_RX],
                              const uint32_t type, const int R, const int H0, const int NH) {
    const uint8_t *sc = w + nb * mm_pk_qbytes(type);
    const int j = (int)(b % 8);
    if (H0 == 0) /* the next o-block's scales of this block */
        mm_pk2_scale_prefetch(sc + obs, nb, b, type);
#pragma GCC unroll 2
    for (int h = 0; h < NH; h++) {
        const int at = 16 * (H0 + h);
        __m256 dw, mw = _mm256_setzero_ps(), sw1 = _mm256_setzero_ps();
        if (type == DT_Q6_K) {
            const uint8_t *ks = sc + (b / 8) * MM_PK_6SC;
            const __m256 d = mm_pk2_h8(ks + at);
            dw = _mm256_mul_ps(d, mm_pk2_i8(ks + 32 + 16 * (2 * j) + at / 2));
            sw1 = _mm256_mul_ps(d, mm_pk2_i8(ks + 32 + 16 * (2 * j + 1) + at / 2));
        } else if (mm_pk_k(type)) { /* d sc and dmin mn of the block's 8 rows */
            const uint8_t *ks = sc + (b / 8) * MM_PK_KSC;
            dw = _mm256_mul_ps(mm_pk2_h8(ks + at), mm_pk2_u8(ks + 64 + 16 * j + at / 2));
            mw = _mm256_mul_ps(mm_pk2_h8(ks + 32 + at), mm_pk2_u8(ks + 192 + 16 * j + at / 2));
        } else {
            dw = mm_pk2_h8(sc + 32 * b + at);
            if (mm_pk_minf(type)) mw = mm_pk2_h8(sc + 32 * nb + 32 * b + at);
        }
#pragma GCC unroll 4
        for (int r = 0; r < R; r++) {
            const uint8_t *xr = x + r * xs;
            const __m256 dx = _mm256_set1_ps(mm_qx_bd(xr, np)[b]);
            const __m256 a = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p[h][r][0].p), _mm256_mul_ps(dw, dx), acc[h][r]);
            const __m256 sx = _mm256_set1_ps(mm_qx_bsx(xr, np)[b]);
            acc[h][r] = type == DT_Q6_K ? _mm256_fmadd_ps(_mm256_cvtepi32_ps(p[h][r][1].p), _mm256_mul_ps(sw1, dx), a)
                        : mm_pk_minf(type) ? _mm256_fmadd_ps(mw, sx, a)
                        : mm_pk_k(type)    ? _mm256_fnmadd_ps(mw, sx, a)
                                           : a;
        }
    }
}

/* Halves H0 .. H0 + NH - 1 of one o-block times R activation rows, into y[r * ys +
 * 8 (H0 + h) + lane]. */
SIMD_INLINE void mm_pk2_halves(int64_t nb, const uint8_t *w, size_t obs, const uint8_t *x, size_t xs,
                               int64_t np, float *y, int64_t ys, const uint32_t type, const int R,
                               const int H0, const int NH) {
    const int qb = mm_pk_qbytes(type);
    __m256 acc[2][MM_PK_RX];
#pragma GCC unroll 2
    for (int h = 0; h < NH; h++)
#pragma GCC unroll 4
        for (int r = 0; r < R; r++) acc[h][r] = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        mm_pk2_sum p[2][MM_PK_RX][2];
        mm_pk2_start(x, xs, np, b, p, type, R, NH);
        mm_pk2_block(w + b * qb, obs, x, xs, b, p, type, R, H0, NH);
        mm_pk2_scale(w, obs, nb, x, xs, np, b, p, acc, type, R, H0, NH);
    }
#pragma GCC unroll 2
    for (int h = 0; h < NH; h++)
#pragma GCC unroll 4
        for (int r = 0; r < R; r++) _mm256_storeu_ps(y + r * ys + 8 * (H0 + h), acc[h][r]);
}

/* One o-block (OB is 1) times R rows: both halves together for one row (decode, where
 * the weights stream from memory once), one after the other for more, whose sums would
 * not fit in 16 registers together. */
SIMD_INLINE void mm_pk2_tile(int64_t nb, const uint8_t *w, size_t obs, const uint8_t *x, size_t xs,
                             int64_t np, float *y, int64_t ys, const uint32_t type, const int R,
                             const int OB) {
    (void)OB;
    if (R == 1) {
        mm_pk2_halves(nb, w, obs, x, xs, np, y, ys, type, R, 0, 2);
        return;
    }
    mm_pk2_halves(nb, w, obs, x, xs, np, y, ys, type, R, 0, 1);
    mm_pk2_halves(nb, w, obs, x, xs, np, y, ys, type, R, 1, 1);
}

MM_PK_ALL_TYPES(mm_pk2_tile, mm_pk256)

#endif
