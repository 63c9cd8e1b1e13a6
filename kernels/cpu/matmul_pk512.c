/* matmul_pk512.c - the packed form's tiles with AVX-512 VNNI (layout and arithmetic:
 * matmul_pk.c): a 512-bit vector holds one o-block's 16 weight rows, and one dpbusd
 * multiplies 4 values of each by 4 broadcast activation values. */
#include <string.h>

#include "matmul_pk.h"

#if MM_Q8_512

/* Activation row xr's four values from i, broadcast to every lane. */
SIMD_INLINE __m512i mm_pk_x4(const uint8_t *xr, int64_t i) {
    int32_t v;
    memcpy(&v, xr + i, 4);
    return _mm512_set1_epi32(v);
}

/* Activation row xr's values 4s .. 4s + 3 and 16 + 4s .. 16 + 4s + 3 of block b, each
 * four broadcast to every lane: what a nibble part's low and high halves multiply. */
SIMD_INLINE void mm_pk_x(const uint8_t *xr, int64_t b, int s, __m512i *x0, __m512i *x1) {
    *x0 = mm_pk_x4(xr, 32 * b + 4 * s);
    *x1 = mm_pk_x4(xr, 32 * b + 16 + 4 * s);
}

/* Bit t of every byte of h at bit 4 (other bits: anything; 16-bit shifts by at most 4
 * bring no bit of the neighbouring byte to bit 4). */
SIMD_INLINE __m512i mm_pk_to_bit4(__m512i h, const int t) {
    return t < 4 ? _mm512_slli_epi16(h, 4 - t) : t == 4 ? h : _mm512_srli_epi16(h, t - 4);
}

/* The tiles' accumulators, acc[o][r] for o < OB, r < R: set to zero (y NULL), or stored
 * as outputs 16 o .. 16 o + 15 of row r of y (ys floats a row). */
SIMD_INLINE void mm_pk_acc(__m512 acc[MM_PK_OB][MM_PK_RX], float *y, int64_t ys, const int R,
                           const int OB) {
#pragma GCC unroll 2
    for (int o = 0; o < OB; o++)
#pragma GCC unroll 4
        for (int r = 0; r < R; r++) {
            if (y)
                _mm512_storeu_ps(y + r * ys + 16 * o, acc[o][r]);
            else
                acc[o][r] = _mm512_setzero_ps();
        }
}

/* mm_pk_tile for Q6_K: two integer sums a block (its two groups of 16, each with its own
 * scale), started at -32 times the group's sum of q. */
SIMD_INLINE void mm_pk_tile_q6k(int64_t nb, const uint8_t *w, size_t obs, const uint8_t *x,
                                size_t xs, int64_t np, float *y, int64_t ys, const int R,
                                const int OB) {
    const size_t ahead = OB * obs;
    const __m512i lo4 = _mm512_set1_epi8(15), hi2 = _mm512_set1_epi8(0x30);
    __m512 acc[MM_PK_OB][MM_PK_RX];
    mm_pk_acc(acc, NULL, 0, R, OB);
    for (int64_t b = 0; b < nb; b++) {
        __m512i p[MM_PK_OB][MM_PK_RX][2];
#pragma GCC unroll 4
        for (int r = 0; r < R; r++)
#pragma GCC unroll 2
            for (int e = 0; e < 2; e++) {
                const __m512i p0 = _mm512_slli_epi32(_mm512_set1_epi32(mm_qx_bneg16(x + r * xs, np)[2 * b + e]), 5);
#pragma GCC unroll 2
                for (int o = 0; o < OB; o++) p[o][r][e] = p0;
            }
#pragma GCC unroll 4
        for (int s = 0; s < 4; s++) {
            __m512i ul[MM_PK_OB], uh[MM_PK_OB];
#pragma GCC unroll 2
            for (int o = 0; o < OB; o++) {
                const uint8_t *q = w + o * obs + b * mm_pk_qbytes(DT_Q6_K);
                const __m512i v = _mm512_load_si512(q + 64 * s), h = _mm512_load_si512(q + 256 + 64 * (s / 2));
                MM_PREFETCH(q + ahead + 64 * s);
                if (s % 2 == 0) MM_PREFETCH(q + ahead + 256 + 64 * (s / 2));
                /* this part's top bits at bits 0-1 and 2-3 (even s) or 4-5 and 6-7 of h,
                 * moved to bits 4-5 (16-bit shifts: what crosses a byte is masked off) */
                const __m512i hl = s % 2 ? h : _mm512_slli_epi16(h, 4);
                const __m512i hh = s % 2 ? _mm512_srli_epi16(h, 2) : _mm512_slli_epi16(h, 2);
                ul[o] = _mm512_or_si512(_mm512_and_si512(v, lo4), _mm512_and_si512(hl, hi2));
                uh[o] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(v, 4), lo4),
                                        _mm512_and_si512(hh, hi2));
            }
#pragma GCC unroll 4
            for (int r = 0; r < R; r++) {
                __m512i x0, x1;
                mm_pk_x(x + r * xs, b, s, &x0, &x1);
#pragma GCC unroll 2
                for (int o = 0; o < OB; o++) {
                    p[o][r][0] = _mm512_dpbusd_epi32(p[o][r][0], ul[o], x0);
                    p[o][r][1] = _mm512_dpbusd_epi32(p[o][r][1], uh[o], x1);
                }
            }
        }
#pragma GCC unroll 2
        for (int o = 0; o < OB; o++) {
            const uint8_t *ks = w + o * obs + nb * mm_pk_qbytes(DT_Q6_K) + (b / 8) * MM_PK_6SC;
            const int g = 2 * (int)(b % 8);
            MM_PREFETCH(ks + ahead + 32 + 16 * g);
            const __m512 d = _mm512_cvtph_ps(_mm256_load_si256((const __m256i *)ks));
            __m512 sw[2];
#pragma GCC unroll 2
            for (int e = 0; e < 2; e++)
                sw[e] = _mm512_mul_ps(d, _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(
                                             _mm_load_si128((const __m128i *)(ks + 32 + 16 * (g + e))))));
#pragma GCC unroll 4
            for (int r = 0; r < R; r++) {
                const __m512 dx = _mm512_set1_ps(mm_qx_bd(x + r * xs, np)[b]);
                const __m512 a = _mm512_fmadd_ps(_mm512_cvtepi32_ps(p[o][r][0]), _mm512_mul_ps(sw[0], dx),
                                                 acc[o][r]);
                acc[o][r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(p[o][r][1]), _mm512_mul_ps(sw[1], dx), a);
            }
        }
    }
    mm_pk_acc(acc, y, ys, R, OB);
}

/* y[r * ys + 16 o + lane] for activation rows r < R and o-blocks o < OB at w (obs bytes
 * apart), nb blocks; x: R rows of the MM_QX_BLK form, xs bytes apart, np = mm_qx_np. */
SIMD_INLINE void mm_pk_tile(int64_t nb, const uint8_t *w, size_t obs, const uint8_t *x, size_t xs,
                            int64_t np, float *y, int64_t ys, const uint32_t type, const int R,
                            const int OB) {
    if (type == DT_Q6_K) {
        mm_pk_tile_q6k(nb, w, obs, x, xs, np, y, ys, R, OB);
        return;
    }
    const int qb = mm_pk_qbytes(type);
    const bool ioff = mm_pk_ioff(type);
    const int sh = mm_pk_shift(type);
    /* The next OB o-blocks' weights (the next call's) are fetched while these are
     * multiplied (the prefetchers stop at 4 KB pages; figures: kernels/README.md). */
    const size_t ahead = OB * obs;
    const __m512i lo4 = _mm512_set1_epi8(15), bit4 = _mm512_set1_epi8(16);
    __m512 acc[MM_PK_OB][MM_PK_RX];
    mm_pk_acc(acc, NULL, 0, R, OB);
    for (int64_t b = 0; b < nb; b++) {
        __m512i p[MM_PK_OB][MM_PK_RX], hv[MM_PK_OB];
#pragma GCC unroll 4
        for (int r = 0; r < R; r++) {
            __m512i p0 = _mm512_setzero_si512();
            if (ioff)
                p0 = _mm512_slli_epi32(_mm512_set1_epi32(mm_qx_bneg(x + r * xs, np)[b]), sh);
#pragma GCC unroll 2
            for (int o = 0; o < OB; o++) p[o][r] = p0;
        }
        if (type == DT_Q8_0) {
#pragma GCC unroll 8
            for (int s = 0; s < 8; s++) {
                __m512i u[MM_PK_OB];
#pragma GCC unroll 2
                for (int o = 0; o < OB; o++) {
                    u[o] = _mm512_load_si512(w + o * obs + b * qb + 64 * s);
                    MM_PREFETCH(w + o * obs + b * qb + 64 * s + ahead);
                }
#pragma GCC unroll 4
                for (int r = 0; r < R; r++) {
                    const __m512i xv = mm_pk_x4(x + r * xs, 32 * b + 4 * s);
#pragma GCC unroll 2
                    for (int o = 0; o < OB; o++) p[o][r] = _mm512_dpbusd_epi32(p[o][r], u[o], xv);
                }
            }
        } else {
            if (mm_pk_bits(type) == 5)
#pragma GCC unroll 2
                for (int o = 0; o < OB; o++) {
                    hv[o] = _mm512_load_si512(w + o * obs + b * qb + 256);
                    MM_PREFETCH(w + o * obs + b * qb + 256 + ahead);
                }
#pragma GCC unroll 4
            for (int s = 0; s < 4; s++) {
                __m512i ul[MM_PK_OB], uh[MM_PK_OB];
#pragma GCC unroll 2
                for (int o = 0; o < OB; o++) {
                    const __m512i v = _mm512_load_si512(w + o * obs + b * qb + 64 * s);
                    MM_PREFETCH(w + o * obs + b * qb + 64 * s + ahead);
                    ul[o] = _mm512_and_si512(v, lo4);
                    uh[o] = _mm512_and_si512(_mm512_srli_epi16(v, 4), lo4);
                    if (mm_pk_bits(type) == 5) { /* the fifth bits, at bits 2s and 2s + 1, to bit 4 */
                        ul[o] = _mm512_or_si512(ul[o], _mm512_and_si512(mm_pk_to_bit4(hv[o], 2 * s), bit4));
                        uh[o] = _mm512_or_si512(uh[o], _mm512_and_si512(mm_pk_to_bit4(hv[o], 2 * s + 1), bit4));
                    }
                }
#pragma GCC unroll 4
                for (int r = 0; r < R; r++) {
                    __m512i x0, x1;
                    mm_pk_x(x + r * xs, b, s, &x0, &x1);
#pragma GCC unroll 2
                    for (int o = 0; o < OB; o++)
                        p[o][r] = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(p[o][r], ul[o], x0), uh[o], x1);
                }
            }
        }
#pragma GCC unroll 2
        for (int o = 0; o < OB; o++) {
            __m512 dw, mw = _mm512_setzero_ps();
            if (mm_pk_k(type)) { /* d sc and dmin mn of the block's 16 rows */
                const uint8_t *ks = w + o * obs + nb * qb + (b / 8) * MM_PK_KSC;
                const int j = (int)(b % 8);
                MM_PREFETCH(ks + ahead + 64 + 16 * j);
                MM_PREFETCH(ks + ahead + 192 + 16 * j);
                const __m128i sc = _mm_load_si128((const __m128i *)(ks + 64 + 16 * j));
                const __m128i mn = _mm_load_si128((const __m128i *)(ks + 192 + 16 * j));
                dw = _mm512_mul_ps(_mm512_cvtph_ps(_mm256_load_si256((const __m256i *)ks)),
                                   _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(sc)));
                mw = _mm512_mul_ps(_mm512_cvtph_ps(_mm256_load_si256((const __m256i *)(ks + 32))),
                                   _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(mn)));
            } else {
                const uint8_t *sc = w + o * obs + nb * qb + 32 * b;
                MM_PREFETCH(sc + ahead);
                if (mm_pk_minf(type)) MM_PREFETCH(sc + ahead + 32 * nb);
                dw = _mm512_cvtph_ps(_mm256_load_si256((const __m256i *)sc));
                if (mm_pk_minf(type)) mw = _mm512_cvtph_ps(_mm256_load_si256((const __m256i *)(sc + 32 * nb)));
            }
#pragma GCC unroll 4
            for (int r = 0; r < R; r++) {
                const uint8_t *xr = x + r * xs;
                const __m512 a = _mm512_fmadd_ps(_mm512_cvtepi32_ps(p[o][r]),
                                                 _mm512_mul_ps(dw, _mm512_set1_ps(mm_qx_bd(xr, np)[b])),
                                                 acc[o][r]);
                acc[o][r] = mm_pk_minf(type) ? _mm512_fmadd_ps(mw, _mm512_set1_ps(mm_qx_bsx(xr, np)[b]), a)
                            : mm_pk_k(type)   ? _mm512_fnmadd_ps(mw, _mm512_set1_ps(mm_qx_bsx(xr, np)[b]), a)
                                              : a;
            }
        }
    }
    mm_pk_acc(acc, y, ys, R, OB);
}

MM_PK_ALL_TYPES(mm_pk_tile, mm_pk512, mm_pk_tiles)

/* (no wide form: a whole o-block is one vector here, unpacked once for MM_PK_RX rows in
 * registers already) */
mm_pk_row *mm_pk_wide_tiles(uint32_t type) {
    (void)type;
    return NULL;
}
void mm_pk_widen(uint32_t type, int64_t nb, const uint8_t *w, size_t obs, uint8_t *dst) {
    (void)type, (void)nb, (void)w, (void)obs, (void)dst;
}

#endif
