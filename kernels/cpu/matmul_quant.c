/* matmul_quant.c - the CPU matmul of the ggml block types of kernels/quant.h (Q4_0,
 * Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K): per type a preparer, which unpacks weight rows
 * into one common form (mm_prep, matmul.h), and one tile template over that form for
 * all seven.
 *
 * A row is walked in chunks of 256 values, 16 groups of 16. The preparer unpacks a
 * chunk (quant_unpack, the code the dequantiser uses, or a faster AVX-512 twin for the
 * small types) into unsigned quants u (0..63) and, per group, a scale s and an offset
 * m: w = s * (u - off) + m; it stores u in the grouped order (mm_grp_pos), s, and
 * mo = m - off * s. Against an activation row quantised to int8 blocks of 32 (q, scale
 * d, in the same grouped order; see matmul.h) group g contributes
 *
 *     s[g] * d * sum_g u * q  +  mo[g] * d * sum_g q
 *
 * The first term is four chained unsigned-by-signed int8 dot products (dpbusd with
 * VNNI; maddubs + madd without, where u <= 63 keeps the int16 pair sums from
 * saturating), one per 64-byte part of the chunk, which leave group g's exact int32
 * sum in lane g; it is scaled by s * d lane by lane. The second multiplies the 16
 * offsets by the activation's precomputed d * sum q (sx) at once. So a chunk costs a
 * pair of rows 4 dot instructions and 4 float operations, whatever the type; mins and
 * offsets are folded in as llama.cpp does with Q8_1's and Q8_K's block sums. Rows
 * shorter than a multiple of 256 (small types) end in a chunk padded with zero
 * weights, zero scales and zero activations.
 *
 * Each (weight row, activation row) pair goes through the same operations in the same
 * order for every NW and NX and every batch: the unpacking is per weight row, the sums
 * per pair. */
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

/* ---- the grouped order ------------------------------------------------------------ */

void mm_grp_reorder(const uint8_t *src, uint8_t *dst) {
    for (int v = 0; v < QUANT_CHUNK; v += 4) memcpy(dst + mm_grp_pos(v), src + v, 4);
}

#if MM_Q8_512
/* Four registers of 16 int32 lanes to the grouped order at dst, in two rounds of
 * two-source permutes. Round 1 (idx1lo, idx1hi: the caller's, as source orders differ) takes
 * from a and b the lanes of sub-positions s = 0, 1 (lo) or 2, 3 (hi) of local groups
 * 0..7, lane 8 (s % 2) + group; round 2 puts the groups 0..7 of one pair and 8..15 of
 * the other side by side: lane g of part s. */
SIMD_INLINE void mm_grp_rounds(__m512i a0, __m512i b0, __m512i a1, __m512i b1,
                               __m512i idx1lo, __m512i idx1hi, uint8_t *dst) {
    const __m512i i2lo = _mm512_set_epi32(23, 22, 21, 20, 19, 18, 17, 16, 7, 6, 5, 4, 3, 2, 1, 0);
    const __m512i i2hi = _mm512_set_epi32(31, 30, 29, 28, 27, 26, 25, 24, 15, 14, 13, 12, 11, 10, 9, 8);
    __m512i e01 = _mm512_permutex2var_epi32(a0, idx1lo, b0);
    __m512i e23 = _mm512_permutex2var_epi32(a0, idx1hi, b0);
    __m512i f01 = _mm512_permutex2var_epi32(a1, idx1lo, b1);
    __m512i f23 = _mm512_permutex2var_epi32(a1, idx1hi, b1);
    _mm512_store_si512(dst, _mm512_permutex2var_epi32(e01, i2lo, f01));
    _mm512_store_si512(dst + 64, _mm512_permutex2var_epi32(e01, i2hi, f01));
    _mm512_store_si512(dst + 128, _mm512_permutex2var_epi32(e23, i2lo, f23));
    _mm512_store_si512(dst + 192, _mm512_permutex2var_epi32(e23, i2hi, f23));
}

/* Round-1 indices: lane 8 s' + l (local group l < 8, s = s' or s' + 2) takes, from
 * sources a (index < 16) and b (index >= 16), the dword of group l at sub-position s.
 * In value order a holds groups 0-3 and b 4-7, 4 dwords each (l >> 2 << 4 | 4 (l & 3) + s);
 * for the small types a holds the low and b the high halves of blocks 0-3, group 2q + h
 * (l & 1 << 4 | 4 (l >> 1) + s). */
SIMD_INLINE __m512i mm_grp_idx1(bool small, bool hi) {
    if (small)
        return hi ? _mm512_set_epi32(31, 15, 27, 11, 23, 7, 19, 3, 30, 14, 26, 10, 22, 6, 18, 2)
                  : _mm512_set_epi32(29, 13, 25, 9, 21, 5, 17, 1, 28, 12, 24, 8, 20, 4, 16, 0);
    return hi ? _mm512_set_epi32(31, 27, 23, 19, 15, 11, 7, 3, 30, 26, 22, 18, 14, 10, 6, 2)
              : _mm512_set_epi32(29, 25, 21, 17, 13, 9, 5, 1, 28, 24, 20, 16, 12, 8, 4, 0);
}
#endif

#if MM_Q8_512 && defined(__AVX512VL__)
#define MM_UNPACK_512 1
/* quant_unpack of a chunk (cnb <= 8 blocks) of a small type, straight into the grouped order: the
 * portable code works a block at a time, and its per-block scalar work would make decode
 * compute-bound. The 16 quant bytes of blocks b..b+3 go into one register; their low and
 * high nibbles are groups 2b and 2b + 1 (values 0..15 and 16..31 of each block). The 5th
 * bits of a block's low and high halves come from the two halves of its qh. The fp16 d
 * (and m) of all 8 blocks come in one gather of their first 4 bytes. The tests hold this
 * to the portable unpacker (the ref backend dequantises with it) exactly. */
SIMD_INLINE void mm_unpack_small_512(uint32_t type, const uint8_t *p, int cnb, mm_prep *c) {
    const int bb = mm_blk_bytes(type);
    const bool has_m = type == DT_Q4_1 || type == DT_Q5_1;
    const bool five = type == DT_Q5_0 || type == DT_Q5_1;
    const int qh_at = 2 + 2 * has_m, qs_at = qh_at + 4 * five;
    const __m512i lo4 = _mm512_set1_epi8(15), bit5 = _mm512_set1_epi8(16);
    __m512i lo[2], hi[2];
    for (int h = 0; h < 2; h++) {
        /* blocks past cnb (a row's last, partial chunk) load as zeros, without reading */
        const uint8_t *q = p + 4 * h * bb + qs_at;
#define MM_LD_BLK(i) _mm_maskz_loadu_epi8(4 * h + (i) < cnb ? 0xffff : 0, q + (i) * bb)
        __m512i v = _mm512_castsi128_si512(MM_LD_BLK(0));
        v = _mm512_inserti32x4(v, MM_LD_BLK(1), 1);
        v = _mm512_inserti32x4(v, MM_LD_BLK(2), 2);
        v = _mm512_inserti32x4(v, MM_LD_BLK(3), 3);
#undef MM_LD_BLK
        lo[h] = _mm512_and_si512(v, lo4);
        hi[h] = _mm512_and_si512(_mm512_srli_epi16(v, 4), lo4);
        if (five) {
            /* (separate scalars: an array here went through memory and stalled) */
            uint32_t h0 = 0, h1 = 0, h2 = 0, h3 = 0;
            const uint8_t *ph = p + 4 * h * bb + qh_at;
            if (4 * h < cnb) memcpy(&h0, ph, 4);
            if (4 * h + 1 < cnb) memcpy(&h1, ph + bb, 4);
            if (4 * h + 2 < cnb) memcpy(&h2, ph + 2 * bb, 4);
            if (4 * h + 3 < cnb) memcpy(&h3, ph + 3 * bb, 4);
            uint64_t ml = (h0 & 0xffffu) | (uint64_t)(h1 & 0xffffu) << 16 |
                          (uint64_t)(h2 & 0xffffu) << 32 | (uint64_t)(h3 & 0xffffu) << 48;
            uint64_t mh = (h0 >> 16) | (uint64_t)(h1 >> 16) << 16 | (uint64_t)(h2 >> 16) << 32 |
                          (uint64_t)(h3 >> 16) << 48;
            lo[h] = _mm512_or_si512(lo[h], _mm512_maskz_mov_epi8(ml, bit5));
            hi[h] = _mm512_or_si512(hi[h], _mm512_maskz_mov_epi8(mh, bit5));
        }
    }
    mm_grp_rounds(lo[0], hi[0], lo[1], hi[1], mm_grp_idx1(true, false), mm_grp_idx1(true, true),
                  c->u);
    const __m256i offs = _mm256_mullo_epi32(_mm256_set_epi32(7, 6, 5, 4, 3, 2, 1, 0),
                                            _mm256_set1_epi32(bb));
    const __m256i dm = cnb == 8 ? _mm256_i32gather_epi32((const int *)p, offs, 1)
                                : _mm256_mmask_i32gather_epi32(_mm256_setzero_si256(),
                                                               (__mmask8)((1u << cnb) - 1), offs, p, 1);
    const __m512i twice = _mm512_set_epi32(7, 7, 6, 6, 5, 5, 4, 4, 3, 3, 2, 2, 1, 1, 0, 0);
    __m512 d = _mm512_castps256_ps512(_mm256_cvtph_ps(_mm256_cvtepi32_epi16(dm)));
    _mm512_store_ps(c->s, _mm512_permutexvar_ps(twice, d));
    __m512 m = _mm512_setzero_ps();
    if (has_m)
        m = _mm512_castps256_ps512(_mm256_cvtph_ps(_mm256_cvtepi32_epi16(_mm256_srli_epi32(dm, 16))));
    _mm512_store_ps(c->mo, _mm512_permutexvar_ps(twice, m)); /* m; off is folded in later */
}
#endif

/* Prepares one chunk of weight row p (cnb blocks from p) and prefetches the same bytes
 * of the row ahead (the next tile's). */
SIMD_INLINE void mm_blk_prep(uint32_t type, const uint8_t *p, int cnb, size_t ahead,
                             mm_prep *c) {
    const int bytes = QUANT_CHUNK / mm_blk_n(type) * mm_blk_bytes(type);
    for (int o = 0; o < bytes; o += 64) MM_PREFETCH(p + ahead + o);
    MM_PREFETCH(p + ahead + bytes - 1);
    const float off = (float)quant_off(type);
#if MM_Q8_512
#if MM_UNPACK_512
    if (mm_blk_n(type) == 32) {
        mm_unpack_small_512(type, p, cnb, c);
        __m512 s = _mm512_load_ps(c->s);
        _mm512_store_ps(c->mo, _mm512_fnmadd_ps(_mm512_set1_ps(off), s, _mm512_load_ps(c->mo)));
        return;
    }
#endif
    quant_chunk ch;
    quant_unpack(type, p, cnb, &ch);
    /* value order: part k holds groups 4k .. 4k + 3. (Read back in the 32-byte pieces
     * quant_unpack stored: a 64-byte load of two fresh 32-byte stores cannot be
     * forwarded and stalls until they retire.) */
#define MM_LD_PART(k)                                                                     \
    _mm512_inserti64x4(                                                                   \
        _mm512_castsi256_si512(_mm256_load_si256((const __m256i *)(ch.u + 64 * (k)))),    \
        _mm256_load_si256((const __m256i *)(ch.u + 64 * (k) + 32)), 1)
    mm_grp_rounds(MM_LD_PART(0), MM_LD_PART(1), MM_LD_PART(2), MM_LD_PART(3),
                  mm_grp_idx1(false, false), mm_grp_idx1(false, true), c->u);
#undef MM_LD_PART
    __m512 s = _mm512_loadu_ps(ch.s);
    _mm512_store_ps(c->s, s);
    _mm512_store_ps(c->mo, _mm512_fnmadd_ps(_mm512_set1_ps(off), s, _mm512_loadu_ps(ch.m)));
#else
    quant_chunk ch;
    quant_unpack(type, p, cnb, &ch);
    mm_grp_reorder(ch.u, c->u);
    for (int g = 0; g < 16; g++) {
        c->s[g] = ch.s[g];
        c->mo[g] = ch.m[g] - off * ch.s[g];
    }
#endif
}

/* How many tiles ahead the preparer prefetches. A tile's rows are unpacked in one go and
 * then multiplied without touching memory, so one tile ahead leaves decode (one
 * activation row, bound by memory bandwidth) waiting on DRAM after each tile; two
 * measured as fast as the old fused loop. */
#define MM_AHEAD 2

/* All chunks of nw weight rows into dst (layout: see mm_prep_fn). */
SIMD_INLINE void mm_prep_blk(int64_t n, const uint8_t *w, size_t ws, int nw, mm_prep *dst,
                             const uint32_t type) {
    const int bn = mm_blk_n(type), bb = mm_blk_bytes(type), per_chunk = QUANT_CHUNK / bn;
    const int64_t nb = n / bn;
    for (int64_t b0 = 0; b0 < nb; b0 += per_chunk, dst += nw) {
        const int cnb = nb - b0 < per_chunk ? (int)(nb - b0) : per_chunk;
        for (int r = 0; r < nw; r++)
            mm_blk_prep(type, w + r * ws + b0 * bb, cnb, MM_AHEAD * (size_t)nw * ws, dst + r);
    }
}

/* ---- the tile over prepared rows --------------------------------------------------
 * Per chunk and (weight row, activation row) pair: the int32 dot products of the four
 * 64-byte parts are chained, so lane g ends with the exact sum over group g; then
 *     acc += float(sum) * (s[g] * dg[g])  and  acc += mo[g] * sx[g]
 * lane by lane. The sums are the same for every NW and NX; only the loops around them
 * change. */
SIMD_INLINE void mm_tile_grp(int64_t n, const uint8_t *w, size_t ws, const uint8_t *x,
                             size_t xs, float *y, int64_t ys, const int NW, const int NX) {
    (void)ws;
    const mm_prep *pr = (const mm_prep *)w;
    const int64_t nch = mm_qx_np(n) / QUANT_CHUNK;
#if MM_Q8_512
    /* Two weight rows at a time, held in registers while all NX activation rows pass:
     * each part of x is then loaded once for both rows (loads, not arithmetic, bound
     * this loop). */
    const __m512i zero = _mm512_setzero_si512();
#pragma GCC unroll 2
    for (int r0 = 0; r0 < NW; r0 += 2) {
        const int nr = NW - r0 < 2 ? NW - r0 : 2;
        __m512 acc[2][MM_TX];
#pragma GCC unroll 2
        for (int r = 0; r < nr; r++)
#pragma GCC unroll 4
            for (int c = 0; c < NX; c++) acc[r][c] = _mm512_setzero_ps();
        const mm_prep *q = pr + r0;
        for (int64_t ch = 0; ch < nch; ch++, q += NW) {
            __m512i u[2][4];
            __m512 sw[2], mo[2];
#pragma GCC unroll 2
            for (int r = 0; r < nr; r++) {
#pragma GCC unroll 4
                for (int k = 0; k < 4; k++) u[r][k] = _mm512_load_si512(q[r].u + 64 * k);
                sw[r] = _mm512_load_ps(q[r].s);
                mo[r] = _mm512_load_ps(q[r].mo);
            }
#pragma GCC unroll 4
            for (int c = 0; c < NX; c++) {
                const uint8_t *xr = x + c * xs;
                const uint8_t *xq = xr + ch * QUANT_CHUNK;
                const __m512 dg = _mm512_load_ps(mm_qx_dg(xr, n) + 16 * ch);
                const __m512 sx = _mm512_load_ps(mm_qx_sx(xr, n) + 16 * ch);
                __m512i p[2] = {zero, zero};
#pragma GCC unroll 4
                for (int k = 0; k < 4; k++) {
                    const __m512i xv = _mm512_load_si512(xq + 64 * k);
#pragma GCC unroll 2
                    for (int r = 0; r < nr; r++) p[r] = _mm512_dpbusd_epi32(p[r], u[r][k], xv);
                }
#pragma GCC unroll 2
                for (int r = 0; r < nr; r++) {
                    __m512 a = _mm512_fmadd_ps(_mm512_cvtepi32_ps(p[r]), _mm512_mul_ps(sw[r], dg),
                                               acc[r][c]);
                    acc[r][c] = _mm512_fmadd_ps(mo[r], sx, a);
                }
            }
        }
        for (int r = 0; r < nr; r++)
            for (int c = 0; c < NX; c++) y[c * ys + r0 + r] = _mm512_reduce_add_ps(acc[r][c]);
    }
#elif MM_Q8_SIMD
    /* the low and high 32 bytes of each part are groups 0..7 and 8..15 */
    __m256 acc[MM_TW][MM_TX];
#pragma GCC unroll 4
    for (int r = 0; r < NW; r++)
#pragma GCC unroll 4
        for (int c = 0; c < NX; c++) acc[r][c] = _mm256_setzero_ps();
    for (int64_t ch = 0; ch < nch; ch++, pr += NW) {
#pragma GCC unroll 4
        for (int c = 0; c < NX; c++) {
            const uint8_t *xr = x + c * xs;
            const uint8_t *xq = xr + ch * QUANT_CHUNK;
            const float *dg = mm_qx_dg(xr, n) + 16 * ch, *sx = mm_qx_sx(xr, n) + 16 * ch;
#pragma GCC unroll 4
            for (int r = 0; r < NW; r++) {
                __m256 a = acc[r][c];
#pragma GCC unroll 2
                for (int h = 0; h < 2; h++) {
                    __m256i p = _mm256_setzero_si256();
#pragma GCC unroll 4
                    for (int k = 0; k < 4; k++) {
                        __m256i u = _mm256_load_si256((const __m256i *)(pr[r].u + 64 * k + 32 * h));
                        __m256i xv = _mm256_load_si256((const __m256i *)(xq + 64 * k + 32 * h));
#if MM_Q8_VNNI
                        p = MM_DPBUSD(p, u, xv);
#else
                        p = _mm256_add_epi32(p, _mm256_madd_epi16(_mm256_maddubs_epi16(u, xv),
                                                                  _mm256_set1_epi16(1)));
#endif
                    }
                    a = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p),
                                        _mm256_mul_ps(_mm256_loadu_ps(pr[r].s + 8 * h),
                                                      _mm256_loadu_ps(dg + 8 * h)), a);
                }
                a = _mm256_fmadd_ps(_mm256_loadu_ps(pr[r].mo), _mm256_loadu_ps(sx), a);
                acc[r][c] = _mm256_fmadd_ps(_mm256_loadu_ps(pr[r].mo + 8), _mm256_loadu_ps(sx + 8), a);
            }
        }
    }
    for (int r = 0; r < NW; r++)
        for (int c = 0; c < NX; c++) y[c * ys + r] = mm_hsum256(acc[r][c]);
#else
    float acc[MM_TW][MM_TX] = {{0}};
    for (int64_t ch = 0; ch < nch; ch++, pr += NW)
        for (int c = 0; c < NX; c++) {
            const uint8_t *xr = x + c * xs;
            const int8_t *xq = (const int8_t *)xr + ch * QUANT_CHUNK;
            const float *dg = mm_qx_dg(xr, n) + 16 * ch, *sx = mm_qx_sx(xr, n) + 16 * ch;
            for (int r = 0; r < NW; r++) {
                float a = acc[r][c];
                for (int g = 0; g < 16; g++) {
                    int32_t s = 0;
                    for (int k = 0; k < 4; k++)
                        for (int b = 0; b < 4; b++)
                            s += pr[r].u[64 * k + 4 * g + b] * xq[64 * k + 4 * g + b];
                    a += (float)s * (pr[r].s[g] * dg[g]);
                }
                for (int g = 0; g < 16; g++) a += pr[r].mo[g] * sx[g];
                acc[r][c] = a;
            }
        }
    for (int r = 0; r < NW; r++)
        for (int c = 0; c < NX; c++) y[c * ys + r] = acc[r][c];
#endif
}

MM_TILES(mm_tile_grp)

mm_tile_row *mm_grp_tiles(void) { return mm_tile_grp_tiles; }

/* One preparer per type: the type is a constant in each, so quant_unpack's switch and
 * the block sizes fold away. */
#define MM_BLK_TYPE(name, T)                                                              \
    static void mm_prep_##name(int64_t n, const uint8_t *w, size_t ws, int nw,            \
                               mm_prep *dst) {                                            \
        mm_prep_blk(n, w, ws, nw, dst, T);                                                \
    }

MM_BLK_TYPE(q4_0, DT_Q4_0)
MM_BLK_TYPE(q4_1, DT_Q4_1)
MM_BLK_TYPE(q5_0, DT_Q5_0)
MM_BLK_TYPE(q5_1, DT_Q5_1)
MM_BLK_TYPE(q4_k, DT_Q4_K)
MM_BLK_TYPE(q5_k, DT_Q5_K)
MM_BLK_TYPE(q6_k, DT_Q6_K)

mm_prep_fn mm_quant_prep(uint32_t type) {
    switch (type) {
    case DT_Q4_0: return mm_prep_q4_0;
    case DT_Q4_1: return mm_prep_q4_1;
    case DT_Q5_0: return mm_prep_q5_0;
    case DT_Q5_1: return mm_prep_q5_1;
    case DT_Q4_K: return mm_prep_q4_k;
    case DT_Q5_K: return mm_prep_q5_k;
    case DT_Q6_K: return mm_prep_q6_k;
    default: return NULL;
    }
}
