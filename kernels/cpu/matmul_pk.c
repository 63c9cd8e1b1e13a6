/* matmul_pk.c - the packed form of the block types' weights (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0,
 * Q4_K, Q5_K, Q6_K; kern_mat_pack) and the matmul over it, with AVX-512 VNNI: a vector
 * holds 16 weight rows.
 *
 * The tiles of matmul_quant.c put 16 groups of one weight row in a vector, so every 4
 * int8 dot products end in a float conversion, a scale product and one or two
 * multiply-adds per pair of rows: float work that shares pipes with the dot products
 * and capped those tiles (kernels/README.md). Here lane o of a vector is weight row o
 * of a block of 16 rows, and an activation
 * row's 4 values are broadcast to all lanes: the 8 dot products of a 32-value block go
 * into one integer sum per (16 rows, activation row), then one scale product and one or
 * two multiply-adds (3 float instructions per 8 dot products instead of 3 per 4). The
 * activations are broadcast from memory, which folds into the dot product, and a weight
 * vector, unpacked once, serves up to MM_PK_RX activation rows. There is no preparing
 * pass and no horizontal sum: a lane ends as one output.
 *
 * Packed form, per block of 16 weight rows (an o-block): the quants of its blocks of 32
 * values, block by block (mm_pk_qbytes each; layout: mm_pk_quants, and Q8_0's 8 parts of
 * values plus 128, unsigned as the dot product wants), then the scales: per block of 32
 * the 16 rows' fp16 d (32 bytes) and then (Q4_1, Q5_1) their fp16 m; for the K types per
 * super block of 256 (MM_PK_KSC, MM_PK_6SC). Padded to 64 bytes (mm_pk_ob_bytes). The
 * same bytes as stored but for that padding and Q4_K's and Q5_K's scales (4 bytes more a
 * row and super block). n_out must be a multiple of 16; other matrices stay as stored.
 *
 * Arithmetic of output (o, activation row r): for each block b in order, the integer sum
 * P = sum_j u_j q_j, started at -off * sum_j q_j for the offset types (Q4_0: 8, Q8_0: 128;
 * exact in int32), then y = fma(float(P), d_w * d_x, y) and for Q4_1 y = fma(m_w, s_x, y)
 * with s_x = d_x * sum_j q_j (Q5_0: off 16; Q5_1 as Q4_1; Q4_K, Q5_K: d_w = d * sc, y =
 * y - (dmin * mn) * s_x; Q6_K: two sums a block, one per group of 16 with its own d_w =
 * d * sc, started at -32 times the group's sum of q). The same for every r, in any
 * batch, on any thread: a row's results do not depend on the rows beside it (forest
 * steps rely on it). They differ from the stored form's by float rounding (the stored
 * tiles sum groups of 16 first). */
#include <stdlib.h>
#include <string.h>

#include "unpack.h"

#if MM_Q8_512

/* bits a value of the type has, and bytes of the quants of one block of an o-block: a
 * 64-byte part per bit (4 nibble parts, then one part of fifth bits or two of top 2
 * bits; Q8_0 8 parts of bytes) */
SIMD_INLINE int mm_pk_bits(uint32_t type) {
    switch (type) {
    case DT_Q8_0: return 8;
    case DT_Q6_K: return 6;
    case DT_Q5_0: case DT_Q5_1: case DT_Q5_K: return 5;
    default: return 4;
    }
}
SIMD_INLINE int mm_pk_qbytes(uint32_t type) { return 64 * mm_pk_bits(type); }
/* the types whose blocks have a float min (w = d q + m), and the K types' (w = d sc q -
 * dmin mn) */
SIMD_INLINE bool mm_pk_minf(uint32_t type) { return type == DT_Q4_1 || type == DT_Q5_1; }
SIMD_INLINE bool mm_pk_k(uint32_t type) { return type == DT_Q4_K || type == DT_Q5_K; }

/* bytes of a K type's super block of scales in an o-block: Q4_K, Q5_K: the 16 rows' fp16
 * d and dmin, then per sub-block their 6-bit sc, then their mn, a byte each; Q6_K: the 16
 * rows' fp16 d, then per group of 16 values their int8 scales */
#define MM_PK_KSC (64 + 2 * 8 * 16)
#define MM_PK_6SC (32 + 16 * 16)

/* Lane o of one block's quants at dst (zeroed before), from its 32 values u (value order,
 * below 1 << bits). Nibble part p: byte 4o + i holds the low 4 bits of values 4p + i and
 * 16 + 4p + i. 5 bits: one part more whose byte 4o + i holds the fifth bits of the two
 * values of part p's byte at bits 2p, 2p + 1. 6 bits: two parts more; in part h, byte 4o
 * + i holds the top 2 bits of those of parts 2h and 2h + 1 at bits 0-1, 2-3 and 4-5, 6-7. */
static void mm_pk_quants(const uint8_t *u, int bits, int o, uint8_t *dst) {
    for (int p = 0; p < 4; p++)
        for (int i = 0; i < 4; i++) {
            const uint8_t lo = u[4 * p + i], hi = u[16 + 4 * p + i];
            dst[64 * p + 4 * o + i] = (uint8_t)((lo & 15) | (hi & 15) << 4);
            if (bits == 5)
                dst[256 + 4 * o + i] |= (uint8_t)(((lo >> 4) | (hi >> 4) << 1) << 2 * p);
            else if (bits == 6)
                dst[256 + 64 * (p / 2) + 4 * o + i] |=
                    (uint8_t)(((lo >> 4) | (hi >> 4) << 2) << 4 * (p % 2));
        }
}

/* Packs super block s of the 16 stored rows of a K type at src (rs bytes apart) into the
 * o-block at ob (nb blocks of 32). */
static void mm_pk_super(uint32_t type, const uint8_t *src, size_t rs, int64_t s, int64_t nb,
                        uint8_t *ob) {
    const int qb = mm_pk_qbytes(type), bits = mm_pk_bits(type);
    uint8_t *ks = ob + nb * qb + s * (type == DT_Q6_K ? MM_PK_6SC : MM_PK_KSC);
    for (int o = 0; o < 16; o++) {
        const uint8_t *blk = src + (size_t)o * rs + (size_t)s * (size_t)mm_blk_bytes(type);
        if (type == DT_Q6_K) {
            const block_q6_K *b6 = (const block_q6_K *)blk;
            memcpy(ks + 2 * o, &b6->d, 2);
            for (int g = 0; g < 16; g++) ks[32 + 16 * g + o] = (uint8_t)b6->scales[g];
        } else {
            memcpy(ks + 2 * o, blk, 2);          /* d */
            memcpy(ks + 32 + 2 * o, blk + 2, 2); /* dmin */
            uint64_t sc, mn;
            quant_k_scales(blk + 4, &sc, &mn);
            for (int j = 0; j < 8; j++) {
                ks[64 + 16 * j + o] = (uint8_t)(sc >> 8 * j);
                ks[192 + 16 * j + o] = (uint8_t)(mn >> 8 * j);
            }
        }
        quant_chunk c;
        quant_unpack(type, blk, 8, &c);
        for (int j = 0; j < 8; j++) mm_pk_quants(c.u + 32 * j, bits, o, ob + (8 * s + j) * qb);
    }
}

/* Packs block b of the 16 stored rows of a block type of 32 at src (rs bytes apart) into
 * the o-block at ob (nb blocks). */
static void mm_pk_block(uint32_t type, const uint8_t *src, size_t rs, int64_t b, int64_t nb,
                        uint8_t *ob) {
    const int bb = mm_blk_bytes(type), qb = mm_pk_qbytes(type);
    uint8_t *dst = ob + b * qb, *sc = ob + nb * qb + 32 * b;
    for (int o = 0; o < 16; o++) {
        const uint8_t *blk = src + (size_t)o * rs + (size_t)b * (size_t)bb;
        memcpy(sc + 2 * o, blk, 2); /* d */
        if (mm_pk_minf(type)) memcpy(sc + 32 * nb + 2 * o, blk + 2, 2); /* m */
        if (mm_pk_bits(type) == 5) {
            quant_chunk c;
            quant_unpack(type, blk, 1, &c);
            mm_pk_quants(c.u, 5, o, dst);
            continue;
        }
        /* Q4_0, Q4_1, Q8_0: their bytes as stored already are what the parts hold */
        const uint8_t *qs = blk + (type == DT_Q4_1 ? 4 : 2);
        for (int s = 0; s < qb / 64; s++) {
            uint32_t v;
            memcpy(&v, qs + 4 * s, 4);
            if (type == DT_Q8_0) v ^= 0x80808080u; /* + 128 in each byte */
            memcpy(dst + 64 * s + 4 * o, &v, 4);
        }
    }
}

/* How many activation rows one pass takes, and weight o-blocks (16 rows each): four rows
 * by two o-blocks measured best of the shapes tried (kernels/README.md). */
#define MM_PK_RX 4
#define MM_PK_OB 2

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
    /* off = 1 << sh, for the types with an integer offset */
    const bool ioff = type == DT_Q4_0 || type == DT_Q5_0 || type == DT_Q8_0;
    const int sh = type == DT_Q8_0 ? 7 : type == DT_Q5_0 ? 4 : 3;
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

typedef void (*mm_pk_fn)(int64_t nb, const uint8_t *w, size_t obs, const uint8_t *x, size_t xs,
                         int64_t np, float *y, int64_t ys);

#define MM_PK_FN(name, T, r, ob)                                                           \
    static void name##_##r##x##ob(int64_t nb, const uint8_t *w, size_t obs, const uint8_t *x, \
                                  size_t xs, int64_t np, float *y, int64_t ys) {            \
        mm_pk_tile(nb, w, obs, x, xs, np, y, ys, T, r, ob);                                 \
    }
#define MM_PK_TYPE(name, T)                                                                \
    MM_PK_FN(name, T, 1, 1) MM_PK_FN(name, T, 2, 1) MM_PK_FN(name, T, 3, 1)                \
    MM_PK_FN(name, T, 4, 1) MM_PK_FN(name, T, 1, 2) MM_PK_FN(name, T, 2, 2)                \
    MM_PK_FN(name, T, 3, 2) MM_PK_FN(name, T, 4, 2)                                         \
    static const mm_pk_fn name##_fns[MM_PK_OB][MM_PK_RX] = {                               \
        {name##_1x1, name##_2x1, name##_3x1, name##_4x1},                                  \
        {name##_1x2, name##_2x2, name##_3x2, name##_4x2}};

_Static_assert(MM_PK_RX == 4 && MM_PK_OB == 2, "MM_PK_TYPE spells out R 1..4, OB 1..2");

MM_PK_TYPE(mm_pk_q4_0, DT_Q4_0)
MM_PK_TYPE(mm_pk_q4_1, DT_Q4_1)
MM_PK_TYPE(mm_pk_q8_0, DT_Q8_0)
MM_PK_TYPE(mm_pk_q4_k, DT_Q4_K)
MM_PK_TYPE(mm_pk_q6_k, DT_Q6_K)
MM_PK_TYPE(mm_pk_q5_0, DT_Q5_0)
MM_PK_TYPE(mm_pk_q5_1, DT_Q5_1)
MM_PK_TYPE(mm_pk_q5_k, DT_Q5_K)

void mm_pk_rows(uint32_t type, int64_t n_in, const uint8_t *w, int64_t o0, int64_t o1,
                const uint8_t *x, size_t xs, int32_t n_rows, float *y, int64_t n_out) {
    const mm_pk_fn(*fns)[MM_PK_RX] = type == DT_Q4_0 ? mm_pk_q4_0_fns
                                     : type == DT_Q4_1 ? mm_pk_q4_1_fns
                                     : type == DT_Q4_K ? mm_pk_q4_k_fns
                                     : type == DT_Q6_K ? mm_pk_q6_k_fns
                                     : type == DT_Q5_0 ? mm_pk_q5_0_fns
                                     : type == DT_Q5_1 ? mm_pk_q5_1_fns
                                     : type == DT_Q5_K ? mm_pk_q5_k_fns
                                                       : mm_pk_q8_0_fns;
    const int64_t nb = n_in / 32, np = mm_qx_np(n_in);
    const size_t obs = mm_pk_ob_bytes(type, n_in);
    for (int64_t o = o0; o < o1; o += 16 * MM_PK_OB) {
        const int ob = o1 - o < 16 * MM_PK_OB ? (int)((o1 - o) / 16) : MM_PK_OB;
        const uint8_t *wo = w + (size_t)(o / 16) * obs;
        for (int32_t r0 = 0; r0 < n_rows; r0 += MM_PK_RX) {
            const int nr = n_rows - r0 < MM_PK_RX ? n_rows - r0 : MM_PK_RX;
            fns[ob - 1][nr - 1](nb, wo, obs, x + (size_t)r0 * xs, xs, np, y + (int64_t)r0 * n_out + o, n_out);
        }
    }
}

#endif

void *kern_mat_pack(const kern_mat *w, size_t *bytes) {
#if MM_Q8_512
    if (!mm_pk_type(w->type) || !dtype_row_ok(w->type, w->n_in) || w->n_in <= 0 || w->n_out <= 0 ||
        w->n_out % 16)
        return NULL;
    const size_t rs = dtype_row_bytes(w->type, w->n_in), obs = mm_pk_ob_bytes(w->type, w->n_in);
    const size_t total = obs * (size_t)(w->n_out / 16);
    uint8_t *out = kern_aligned_alloc(total);
    if (!out) return NULL;
    memset(out, 0, total); /* (the padding, and the high-bit parts the packers or into) */
    const int64_t nb = w->n_in / 32;
    for (int64_t ob = 0; ob < w->n_out / 16; ob++)
        for (int64_t b = 0; b < nb; b += mm_blk_n(w->type) / 32)
            if (mm_blk_n(w->type) > 32)
                mm_pk_super(w->type, (const uint8_t *)w->data + (size_t)(16 * ob) * rs, rs, b / 8, nb,
                            out + (size_t)ob * obs);
            else
                mm_pk_block(w->type, (const uint8_t *)w->data + (size_t)(16 * ob) * rs, rs, b, nb,
                        out + (size_t)ob * obs);
    if (bytes) *bytes = total;
    return out;
#else
    (void)w, (void)bytes;
    return NULL;
#endif
}
