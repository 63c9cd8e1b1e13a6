/* matmul_quant.c - the CPU matmul tiles of the ggml block types of kernels/quant.h
 * (Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K): one template for all seven, which differ
 * only in how quant_unpack turns a chunk of their bytes into the common form.
 *
 * The template walks a row in chunks of 256 values. Per chunk it unpacks each of its NW
 * weight rows (quant_unpack, the code the dequantiser uses) into unsigned quants u
 * (0..63) and, per 16 values, a scale s and an offset m: w = s * (u - off) + m. Against
 * an activation row quantised to int8 blocks of 32 (q, scale d; see matmul.h) a group g
 * of 16 values then contributes
 *
 *     s[g] * d * sum_g u * q  +  (m[g] - off * s[g]) * d * sum_g q
 *
 * The first term is an unsigned-by-signed int8 dot product (dpbusd with VNNI; maddubs
 * without, where u <= 63 keeps its int16 pair sums from saturating), its int32 lanes of
 * 4 values scaled by the lane's s * d; the second multiplies the 16 offsets of the chunk
 * by the activation's 16 precomputed d * sum q (sx) at once. Mins (Q4_1, Q5_1, Q4_K,
 * Q5_K) and the offsets of the symmetric types (Q4_0, Q5_0, Q6_K) thus cost one
 * multiply-add per chunk, whatever the type; llama.cpp does the same with Q8_1's and
 * Q8_K's block sums. Rows shorter than a multiple of 256 (small types) end in a chunk
 * padded with zero weights, zero scales and zero activations.
 *
 * Each (weight row, activation row) pair goes through the same operations in the same
 * order for every NW and NX: the unpacking is per weight row, the sums per pair. */
#include "matmul.h"

#include "../quant.h"

SIMD_INLINE int mm_blk_n(uint32_t type) {
    return type == DT_Q4_K || type == DT_Q5_K || type == DT_Q6_K ? QK_K : 32;
}

SIMD_INLINE int mm_blk_bytes(uint32_t type) {
    switch (type) {
    case DT_Q4_0: return sizeof(block_q4_0);
    case DT_Q4_1: return sizeof(block_q4_1);
    case DT_Q5_0: return sizeof(block_q5_0);
    case DT_Q5_1: return sizeof(block_q5_1);
    case DT_Q4_K: return sizeof(block_q4_K);
    case DT_Q5_K: return sizeof(block_q5_K);
    default: return sizeof(block_q6_K);
    }
}

#if MM_Q8_512 && defined(__AVX512VL__)
#define MM_UNPACK_512 1
/* quant_unpack of 8 whole blocks of a small type, 4 blocks to a register: the portable
 * code works a block at a time, and its per-block scalar work made decode compute-bound.
 * The 16 quant bytes of blocks b..b+3 go into one register; their low and high nibbles
 * are values 0..15 and 16..31 of each block, interleaved by 128-bit lanes. The 5th bits
 * of two blocks are one 64-bit mask. The fp16 d (and m) of all 8 blocks come in one
 * gather of their first 4 bytes. The tests hold this to the portable unpacker (the ref
 * backend dequantises with it) exactly. */
SIMD_INLINE void mm_unpack_small_512(uint32_t type, const uint8_t *p, quant_chunk *c) {
    const int bb = mm_blk_bytes(type);
    const bool has_m = type == DT_Q4_1 || type == DT_Q5_1;
    const bool five = type == DT_Q5_0 || type == DT_Q5_1;
    const int qh_at = 2 + 2 * has_m, qs_at = qh_at + 4 * five;
    const __m512i lo4 = _mm512_set1_epi8(15), bit5 = _mm512_set1_epi8(16);
    const __m512i i01 = _mm512_set_epi64(11, 10, 3, 2, 9, 8, 1, 0);
    const __m512i i23 = _mm512_set_epi64(15, 14, 7, 6, 13, 12, 5, 4);
    for (int b = 0; b < 8; b += 4) {
        const uint8_t *q = p + b * bb + qs_at;
        __m512i v = _mm512_castsi128_si512(_mm_loadu_si128((const __m128i *)q));
        v = _mm512_inserti32x4(v, _mm_loadu_si128((const __m128i *)(q + bb)), 1);
        v = _mm512_inserti32x4(v, _mm_loadu_si128((const __m128i *)(q + 2 * bb)), 2);
        v = _mm512_inserti32x4(v, _mm_loadu_si128((const __m128i *)(q + 3 * bb)), 3);
        __m512i lo = _mm512_and_si512(v, lo4);
        __m512i hi = _mm512_and_si512(_mm512_srli_epi16(v, 4), lo4);
        __m512i u01 = _mm512_permutex2var_epi64(lo, i01, hi);
        __m512i u23 = _mm512_permutex2var_epi64(lo, i23, hi);
        if (five) {
            /* (separate scalars: an array here went through memory and stalled) */
            uint32_t h0, h1, h2, h3;
            memcpy(&h0, p + b * bb + qh_at, 4);
            memcpy(&h1, p + (b + 1) * bb + qh_at, 4);
            memcpy(&h2, p + (b + 2) * bb + qh_at, 4);
            memcpy(&h3, p + (b + 3) * bb + qh_at, 4);
            u01 = _mm512_or_si512(u01, _mm512_maskz_mov_epi8(h0 | (uint64_t)h1 << 32, bit5));
            u23 = _mm512_or_si512(u23, _mm512_maskz_mov_epi8(h2 | (uint64_t)h3 << 32, bit5));
        }
        _mm512_store_si512(c->u + 32 * b, u01);
        _mm512_store_si512(c->u + 32 * b + 64, u23);
    }
    const __m256i offs = _mm256_mullo_epi32(_mm256_set_epi32(7, 6, 5, 4, 3, 2, 1, 0),
                                            _mm256_set1_epi32(bb));
    const __m256i dm = _mm256_i32gather_epi32((const int *)p, offs, 1);
    const __m512i twice = _mm512_set_epi32(7, 7, 6, 6, 5, 5, 4, 4, 3, 3, 2, 2, 1, 1, 0, 0);
    __m512 d = _mm512_castps256_ps512(_mm256_cvtph_ps(_mm256_cvtepi32_epi16(dm)));
    _mm512_store_ps(c->s, _mm512_permutexvar_ps(twice, d));
    __m512 m = _mm512_setzero_ps();
    if (has_m)
        m = _mm512_castps256_ps512(_mm256_cvtph_ps(_mm256_cvtepi32_epi16(_mm256_srli_epi32(dm, 16))));
    _mm512_store_ps(c->m, _mm512_permutexvar_ps(twice, m));
}
#endif

/* Unpacks the chunk of weight row p (cnb blocks from p) and prefetches the same bytes of
 * the row ahead (the next tile's). */
SIMD_INLINE void mm_blk_unpack(uint32_t type, const uint8_t *p, int cnb, size_t ahead,
                               quant_chunk *c) {
    const int bytes = QUANT_CHUNK / mm_blk_n(type) * mm_blk_bytes(type);
    for (int o = 0; o < bytes; o += 64) MM_PREFETCH(p + ahead + o);
    MM_PREFETCH(p + ahead + bytes - 1);
#if MM_UNPACK_512
    if (mm_blk_n(type) == 32 && cnb == 8) {
        mm_unpack_small_512(type, p, c);
        return;
    }
#endif
    quant_unpack(type, p, cnb, c);
}

SIMD_INLINE void mm_tile_blk(int64_t n, const uint8_t *w, size_t ws, const uint8_t *x,
                             size_t xs, float *y, int64_t ys, const uint32_t type,
                             const int NW, const int NX) {
    const int bn = mm_blk_n(type), bb = mm_blk_bytes(type), per_chunk = QUANT_CHUNK / bn;
    const int64_t nb = n / bn;
    const float off = (float)quant_off(type);
    quant_chunk ch[MM_TW];
#if MM_Q8_512
    /* 64 values per register: lane i of part k is group 4k + i / 4 */
    const __m512i zero = _mm512_setzero_si512();
    __m512i gidx[4];
    for (int k = 0; k < 4; k++)
        gidx[k] = _mm512_set_epi32(4 * k + 3, 4 * k + 3, 4 * k + 3, 4 * k + 3, 4 * k + 2,
                                   4 * k + 2, 4 * k + 2, 4 * k + 2, 4 * k + 1, 4 * k + 1,
                                   4 * k + 1, 4 * k + 1, 4 * k, 4 * k, 4 * k, 4 * k);
    __m512 acc[MM_TW][MM_TX];
#pragma GCC unroll 4
    for (int r = 0; r < NW; r++)
#pragma GCC unroll 4
        for (int c = 0; c < NX; c++) acc[r][c] = _mm512_setzero_ps();
    for (int64_t b0 = 0, v0 = 0; b0 < nb; b0 += per_chunk, v0 += QUANT_CHUNK) {
        const int cnb = nb - b0 < per_chunk ? (int)(nb - b0) : per_chunk;
        __m512 sl[MM_TW][4], mo[MM_TW];
#pragma GCC unroll 4
        for (int r = 0; r < NW; r++) {
            mm_blk_unpack(type, w + r * ws + b0 * bb, cnb, NW * ws, &ch[r]);
            __m512 s = _mm512_loadu_ps(ch[r].s);
#pragma GCC unroll 4
            for (int k = 0; k < 4; k++) sl[r][k] = _mm512_permutexvar_ps(gidx[k], s);
            mo[r] = _mm512_fnmadd_ps(_mm512_set1_ps(off), s, _mm512_loadu_ps(ch[r].m));
        }
#pragma GCC unroll 4
        for (int c = 0; c < NX; c++) {
            const uint8_t *xr = x + c * xs;
            const float *dl = mm_qx_dl(xr, n) + v0 / 4;
            const __m512 sx = _mm512_loadu_ps(mm_qx_sx(xr, n) + v0 / 16);
            __m512i xv[4];
            __m512 dv[4];
#pragma GCC unroll 4
            for (int k = 0; k < 4; k++) {
                xv[k] = _mm512_loadu_si512(xr + v0 + 64 * k);
                dv[k] = _mm512_loadu_ps(dl + 16 * k);
            }
#pragma GCC unroll 4
            for (int r = 0; r < NW; r++) {
                __m512 a = acc[r][c];
#pragma GCC unroll 4
                for (int k = 0; k < 4; k++) {
                    __m512i u = _mm512_load_si512(ch[r].u + 64 * k);
                    __m512 p = _mm512_cvtepi32_ps(_mm512_dpbusd_epi32(zero, u, xv[k]));
                    a = _mm512_fmadd_ps(p, _mm512_mul_ps(sl[r][k], dv[k]), a);
                }
                acc[r][c] = _mm512_fmadd_ps(mo[r], sx, a);
            }
        }
    }
    for (int r = 0; r < NW; r++)
        for (int c = 0; c < NX; c++) y[c * ys + r] = _mm512_reduce_add_ps(acc[r][c]);
#elif MM_Q8_SIMD
    /* 32 values per register: lane i of part j is group 2j + i / 4 */
    __m256i gidx[4];
    for (int j = 0; j < 4; j++)
        gidx[j] = _mm256_set_epi32(2 * j + 1, 2 * j + 1, 2 * j + 1, 2 * j + 1, 2 * j, 2 * j,
                                   2 * j, 2 * j);
    __m256 acc[MM_TW][MM_TX];
#pragma GCC unroll 4
    for (int r = 0; r < NW; r++)
#pragma GCC unroll 4
        for (int c = 0; c < NX; c++) acc[r][c] = _mm256_setzero_ps();
    for (int64_t b0 = 0, v0 = 0; b0 < nb; b0 += per_chunk, v0 += QUANT_CHUNK) {
        const int cnb = nb - b0 < per_chunk ? (int)(nb - b0) : per_chunk;
        __m256 sl[MM_TW][8], mo[MM_TW][2];
#pragma GCC unroll 4
        for (int r = 0; r < NW; r++) {
            mm_blk_unpack(type, w + r * ws + b0 * bb, cnb, NW * ws, &ch[r]);
#pragma GCC unroll 2
            for (int h = 0; h < 2; h++) {
                __m256 s = _mm256_loadu_ps(ch[r].s + 8 * h);
#pragma GCC unroll 4
                for (int j = 0; j < 4; j++) sl[r][4 * h + j] = _mm256_permutevar8x32_ps(s, gidx[j]);
                mo[r][h] = _mm256_fnmadd_ps(_mm256_set1_ps(off), s, _mm256_loadu_ps(ch[r].m + 8 * h));
            }
        }
#pragma GCC unroll 4
        for (int c = 0; c < NX; c++) {
            const uint8_t *xr = x + c * xs;
            const float *dl = mm_qx_dl(xr, n) + v0 / 4, *sx = mm_qx_sx(xr, n) + v0 / 16;
#pragma GCC unroll 4
            for (int r = 0; r < NW; r++) {
                __m256 a = acc[r][c];
#pragma GCC unroll 8
                for (int j = 0; j < 8; j++) {
                    __m256i u = _mm256_load_si256((const __m256i *)(ch[r].u + 32 * j));
                    __m256i xv = _mm256_loadu_si256((const __m256i *)(xr + v0 + 32 * j));
#if MM_Q8_VNNI
                    __m256i d = MM_DPBUSD(_mm256_setzero_si256(), u, xv);
#else
                    __m256i d = _mm256_madd_epi16(_mm256_maddubs_epi16(u, xv), _mm256_set1_epi16(1));
#endif
                    a = _mm256_fmadd_ps(_mm256_cvtepi32_ps(d),
                                        _mm256_mul_ps(sl[r][j], _mm256_loadu_ps(dl + 8 * j)), a);
                }
                a = _mm256_fmadd_ps(mo[r][0], _mm256_loadu_ps(sx), a);
                acc[r][c] = _mm256_fmadd_ps(mo[r][1], _mm256_loadu_ps(sx + 8), a);
            }
        }
    }
    for (int r = 0; r < NW; r++)
        for (int c = 0; c < NX; c++) y[c * ys + r] = mm_hsum256(acc[r][c]);
#else
    float acc[MM_TW][MM_TX] = {{0}};
    for (int64_t b0 = 0, v0 = 0; b0 < nb; b0 += per_chunk, v0 += QUANT_CHUNK) {
        const int cnb = nb - b0 < per_chunk ? (int)(nb - b0) : per_chunk;
        for (int r = 0; r < NW; r++)
            mm_blk_unpack(type, w + r * ws + b0 * bb, cnb, NW * ws, &ch[r]);
        for (int c = 0; c < NX; c++) {
            const uint8_t *xr = x + c * xs;
            const int8_t *xq = (const int8_t *)xr + v0;
            const float *dl = mm_qx_dl(xr, n) + v0 / 4, *sx = mm_qx_sx(xr, n) + v0 / 16;
            for (int r = 0; r < NW; r++) {
                float a = acc[r][c];
                for (int g = 0; g < QUANT_CHUNK / 16; g++) {
                    int32_t s = 0;
                    for (int i = 16 * g; i < 16 * g + 16; i++) s += ch[r].u[i] * xq[i];
                    a += (float)s * (ch[r].s[g] * dl[4 * g]);
                    a += (ch[r].m[g] - off * ch[r].s[g]) * sx[g];
                }
                acc[r][c] = a;
            }
        }
    }
    for (int r = 0; r < NW; r++)
        for (int c = 0; c < NX; c++) y[c * ys + r] = acc[r][c];
#endif
}

/* One tile set per type: the type is a constant in each, so quant_unpack's switch and
 * the block sizes fold away. */
#define MM_BLK_TYPE(name, T)                                                              \
    SIMD_INLINE void mm_tile_##name(int64_t n, const uint8_t *w, size_t ws,               \
                                    const uint8_t *x, size_t xs, float *y, int64_t ys,    \
                                    const int NW, const int NX) {                         \
        mm_tile_blk(n, w, ws, x, xs, y, ys, T, NW, NX);                                   \
    }                                                                                     \
    MM_TILES(mm_tile_##name)

MM_BLK_TYPE(q4_0, DT_Q4_0)
MM_BLK_TYPE(q4_1, DT_Q4_1)
MM_BLK_TYPE(q5_0, DT_Q5_0)
MM_BLK_TYPE(q5_1, DT_Q5_1)
MM_BLK_TYPE(q4_k, DT_Q4_K)
MM_BLK_TYPE(q5_k, DT_Q5_K)
MM_BLK_TYPE(q6_k, DT_Q6_K)

mm_tile_row *mm_quant_tiles(uint32_t type) {
    switch (type) {
    case DT_Q4_0: return mm_tile_q4_0_tiles;
    case DT_Q4_1: return mm_tile_q4_1_tiles;
    case DT_Q5_0: return mm_tile_q5_0_tiles;
    case DT_Q5_1: return mm_tile_q5_1_tiles;
    case DT_Q4_K: return mm_tile_q4_k_tiles;
    case DT_Q5_K: return mm_tile_q5_k_tiles;
    case DT_Q6_K: return mm_tile_q6_k_tiles;
    default: return NULL;
    }
}
