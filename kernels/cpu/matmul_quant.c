/* matmul_quant.c - the CPU matmul of the ggml block types of kernels/quant.h (Q4_0,
 * Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K): per type a preparer, which unpacks weight rows
 * into one common form (mm_prep, matmul.h), and one tile template over that form for
 * all seven.
 *
 * A row is walked in chunks of 256 values, 16 groups of 16. The preparer unpacks a
 * chunk (quant_unpack, the code the dequantiser uses, or with AVX-512 faster twins that
 * write the grouped order straight from registers) into unsigned quants u (0..63) and, per group, a scale s and an offset
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
    const __m512i part[4] = {_mm512_permutex2var_epi32(e01, i2lo, f01),
                             _mm512_permutex2var_epi32(e01, i2hi, f01),
                             _mm512_permutex2var_epi32(e23, i2lo, f23),
                             _mm512_permutex2var_epi32(e23, i2hi, f23)};
#pragma GCC unroll 4
    for (int k = 0; k < 4; k++) _mm512_store_si512(dst + 64 * k, part[k]);
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

/* (With AVX-512 both are a few permutes: they run on every activation row quantised.
 * dst is 64-byte aligned there.) */
void mm_grp_reorder(const uint8_t *src, uint8_t *dst) {
#if MM_Q8_512
    mm_grp_rounds(_mm512_loadu_si512(src), _mm512_loadu_si512(src + 64),
                  _mm512_loadu_si512(src + 128), _mm512_loadu_si512(src + 192),
                  mm_grp_idx1(false, false), mm_grp_idx1(false, true), dst);
#else
    for (int v = 0; v < QUANT_CHUNK; v += 4) memcpy(dst + mm_grp_pos(v), src + v, 4);
#endif
}

void mm_tail_reorder(const uint8_t *src, uint8_t *dst, int nq) {
#if MM_Q8_512
    /* within a quarter, dword 4g + s (value order) to dword 4s + g */
    const __m512i t = _mm512_set_epi32(15, 11, 7, 3, 14, 10, 6, 2, 13, 9, 5, 1, 12, 8, 4, 0);
    for (int j = 0; j < nq; j++)
        _mm512_store_si512(dst + 64 * j, _mm512_permutexvar_epi32(t, _mm512_loadu_si512(src + 64 * j)));
#else
    for (int v = 0; v < 64 * nq; v += 4) memcpy(dst + mm_tail_pos(v), src + v, 4);
#endif
}

#if MM_Q8_512 && defined(__AVX512VL__)
#define MM_UNPACK_512 1
/* quant_unpack of a chunk (cnb <= 8 blocks) of a small type, straight into the grouped order: the
 * portable code works a block at a time, and its per-block scalar work would make decode
 * compute-bound. The 16 quant bytes of blocks b..b+3 go into one register; their low and
 * high nibbles are groups 2b and 2b + 1 (values 0..15 and 16..31 of each block). The 5th
 * bits of a block's low and high halves are the two 16-bit halves of its qh: the qh of 4
 * blocks side by side, narrowed to 16 bits (vpmovdw) before or after a shift, are the
 * byte masks of a register's low and high halves. The first 4 bytes of every block (fp16 d
 * and m) are read as scalars: a gather of 8 costs more than 8 loads. Callers pass cnb as a
 * constant 8 for whole chunks, so the masks below fold away there. The tests hold this to
 * the portable unpacker (the ref backend dequantises with it) exactly. */
/* The 4-byte words at p, p + bb, p + 2 bb, p + 3 bb (0 from the n-th on), put together
 * in registers: built in memory (as _mm_set_epi32 is), the 16-byte load of four 4-byte
 * stores cannot be forwarded and stalls. */
SIMD_INLINE __m128i mm_w32x4(const uint8_t *p, int bb, int n) {
    uint32_t w[4] = {0, 0, 0, 0};
    for (int i = 0; i < 4; i++)
        if (i < n) memcpy(&w[i], p + i * bb, 4);
    __m128i v = _mm_cvtsi32_si128((int)w[0]);
    v = _mm_insert_epi32(v, (int)w[1], 1);
    v = _mm_insert_epi32(v, (int)w[2], 2);
    return _mm_insert_epi32(v, (int)w[3], 3);
}

/* The scales (fp16 d, twice: one per group) and offsets (m, of Q4_1 and Q5_1) of a chunk of
 * cnb blocks of a small type into c->s and c->mo (m only; off is folded in later). */
SIMD_INLINE void mm_unpack_dm_512(uint32_t type, const uint8_t *p, const int cnb, mm_prep *c) {
    const int bb = mm_blk_bytes(type);
    const bool has_m = type == DT_Q4_1 || type == DT_Q5_1;
    const __m256i dm = _mm256_inserti128_si256(_mm256_castsi128_si256(mm_w32x4(p, bb, cnb)),
                                               mm_w32x4(p + 4 * bb, bb, cnb - 4), 1);
    const __m512i twice = _mm512_set_epi32(7, 7, 6, 6, 5, 5, 4, 4, 3, 3, 2, 2, 1, 1, 0, 0);
    __m512 d = _mm512_castps256_ps512(_mm256_cvtph_ps(_mm256_cvtepi32_epi16(dm)));
    _mm512_store_ps(c->s, _mm512_permutexvar_ps(twice, d));
    __m512 m = _mm512_setzero_ps();
    if (has_m)
        m = _mm512_castps256_ps512(_mm256_cvtph_ps(_mm256_cvtepi32_epi16(_mm256_srli_epi32(dm, 16))));
    _mm512_store_ps(c->mo, _mm512_permutexvar_ps(twice, m)); /* m; off is folded in later */
}

SIMD_INLINE void mm_unpack_small_512(uint32_t type, const uint8_t *p, const int cnb, mm_prep *c) {
    const int bb = mm_blk_bytes(type);
    const bool has_m = type == DT_Q4_1 || type == DT_Q5_1;
    const bool five = type == DT_Q5_0 || type == DT_Q5_1;
    const int qh_at = 2 + 2 * has_m, qs_at = qh_at + 4 * five;
    const __m512i lo4 = _mm512_set1_epi8(15), bit5 = _mm512_set1_epi8(16);
    __m512i lo[2], hi[2];
#pragma GCC unroll 2 /* (rolled, lo and hi went through memory) */
    for (int h = 0; h < 2; h++) {
        /* blocks past cnb (a row's last, partial chunk) load as zeros, without reading */
        const uint8_t *q = p + 4 * h * bb + qs_at;
#define MM_LD_BLK(i)                                                                      \
    (4 * h + (i) < cnb ? _mm_loadu_si128((const __m128i *)(q + (i) * bb)) : _mm_setzero_si128())
        __m512i v = _mm512_castsi128_si512(MM_LD_BLK(0));
        v = _mm512_inserti32x4(v, MM_LD_BLK(1), 1);
        v = _mm512_inserti32x4(v, MM_LD_BLK(2), 2);
        v = _mm512_inserti32x4(v, MM_LD_BLK(3), 3);
#undef MM_LD_BLK
        lo[h] = _mm512_and_si512(v, lo4);
        hi[h] = _mm512_and_si512(_mm512_srli_epi16(v, 4), lo4);
        if (five) {
            const __m128i qh = mm_w32x4(p + 4 * h * bb + qh_at, bb, cnb - 4 * h);
            const __mmask64 ml = _cvtu64_mask64((uint64_t)_mm_cvtsi128_si64(_mm_cvtepi32_epi16(qh)));
            const __mmask64 mh = _cvtu64_mask64(
                (uint64_t)_mm_cvtsi128_si64(_mm_cvtepi32_epi16(_mm_srli_epi32(qh, 16))));
            lo[h] = _mm512_or_si512(lo[h], _mm512_maskz_mov_epi8(ml, bit5));
            hi[h] = _mm512_or_si512(hi[h], _mm512_maskz_mov_epi8(mh, bit5));
        }
    }
    mm_grp_rounds(lo[0], hi[0], lo[1], hi[1], mm_grp_idx1(true, false), mm_grp_idx1(true, true),
                  c->u);
    mm_unpack_dm_512(type, p, cnb, c);
}

/* The tail chunk of a small type (cnb < 8 blocks) straight into the compact order (matmul.h):
 * quarter j is blocks 2j and 2j + 1, whose low and high nibbles (values 0..15 and 16..31
 * of each) are its groups 0..3. Loaded as [low 2j | low 2j + 1 | high 2j | high 2j + 1]
 * (16 bytes each), one permute of dwords puts sub-position s of group g at dword 4s + g.
 * Blocks past cnb are zeros, never read. */
SIMD_INLINE void mm_unpack_tail_512(uint32_t type, const uint8_t *p, int cnb, mm_prep *c) {
    const int bb = mm_blk_bytes(type);
    const bool has_m = type == DT_Q4_1 || type == DT_Q5_1;
    const bool five = type == DT_Q5_0 || type == DT_Q5_1;
    const int qh_at = 2 + 2 * has_m, qs_at = qh_at + 4 * five;
    const __m256i lo4 = _mm256_set1_epi8(15);
    const __m512i bit5 = _mm512_set1_epi8(16);
    const __m512i idx = _mm512_set_epi32(15, 7, 11, 3, 14, 6, 10, 2, 13, 5, 9, 1, 12, 4, 8, 0);
    for (int j = 0; 2 * j < cnb; j++) {
        const bool two = 2 * j + 1 < cnb;
        const uint8_t *b = p + 2 * j * bb;
        __m256i v = _mm256_zextsi128_si256(_mm_loadu_si128((const __m128i *)(b + qs_at)));
        if (two) v = _mm256_inserti128_si256(v, _mm_loadu_si128((const __m128i *)(b + bb + qs_at)), 1);
        __m512i u = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_and_si256(v, lo4)),
                                       _mm256_and_si256(_mm256_srli_epi16(v, 4), lo4), 1);
        if (five) { /* a block's qh: bits 0..15 for its low nibbles, 16..31 for its high */
            uint32_t h0, h1 = 0;
            memcpy(&h0, b + qh_at, 4);
            if (two) memcpy(&h1, b + bb + qh_at, 4);
            const uint64_t m = (h0 & 0xffffu) | (uint64_t)(h1 & 0xffffu) << 16 |
                               (uint64_t)(h0 >> 16) << 32 | (uint64_t)(h1 >> 16) << 48;
            u = _mm512_or_si512(u, _mm512_maskz_mov_epi8(_cvtu64_mask64(m), bit5));
        }
        _mm512_store_si512(c->u + 64 * j, _mm512_permutexvar_epi32(idx, u));
    }
    mm_unpack_dm_512(type, p, cnb, c);
}
#endif

#if MM_UNPACK_512
/* quant_unpack of a super block of Q5_K or Q6_K, straight into the grouped order, as
 * mm_unpack_small_512 does for the small types (their portable unpacking of the high
 * bits, then the stores and reloads of quant_chunk, made decode compute-bound; Q4_K,
 * with no high bits, measured 4% faster through quant_unpack). In value order part k
 * (values 64k .. 64k + 63) is, for Q5_K, the low then the high nibbles of qs[32k ..
 * 32k + 31], their 5th bits bits 2k and 2k + 1 of qh; for Q6_K, half h = k / 2 of the
 * block, the low (k even) or high (k odd) nibbles of ql[64h .. 64h + 63], their top two
 * bits bits 0, 2 (k even) or 4, 6 (k odd) of qh[32h .. 32h + 31], lower then upper 32
 * values. A 16-bit shift then a byte mask picks the bits of each byte (the bits that cross
 * from the neighbouring byte are masked off). The scales are quant_unpack's arithmetic. */
SIMD_INLINE void mm_unpack_k_512(uint32_t type, const uint8_t *p, mm_prep *c) {
    const __m512i lo4 = _mm512_set1_epi8(15);
    const __mmask32 upper = 0xffff0000u; /* the upper 32 bytes, as 16-bit lanes */
    __m512i part[4];
    if (type == DT_Q6_K) {
        const block_q6_K *b = (const block_q6_K *)p;
        const __m512i three = _mm512_set1_epi8(3);
#pragma GCC unroll 2
        for (int h = 0; h < 2; h++) {
            const __m512i l = _mm512_loadu_si512(b->ql + 64 * h);
            const __m512i qh = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(b->qh + 32 * h)));
            /* top bits of the lower / upper 32 values of the even and odd parts */
            const __m512i te = _mm512_mask_srli_epi16(qh, upper, qh, 2);
            const __m512i to = _mm512_mask_srli_epi16(_mm512_srli_epi16(qh, 4), upper, qh, 6);
            part[2 * h] = _mm512_or_si512(_mm512_and_si512(l, lo4),
                                          _mm512_slli_epi16(_mm512_and_si512(te, three), 4));
            part[2 * h + 1] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(l, 4), lo4),
                                              _mm512_slli_epi16(_mm512_and_si512(to, three), 4));
        }
        __m512 sf = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)b->scales)));
        sf = _mm512_mul_ps(sf, _mm512_set1_ps(quant_h2f((uint16_t)(p[208] | p[209] << 8))));
        _mm512_store_ps(c->s, sf);
        _mm512_store_ps(c->mo, _mm512_setzero_ps()); /* m; off is folded in later */
    } else {
        const block_q5_K *b = (const block_q5_K *)p;
        const __m512i bit5 = _mm512_set1_epi8(16);
        const __m512i qh = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)b->qh));
#pragma GCC unroll 4
        for (int k = 0; k < 4; k++) {
            const __m512i q = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(b->qs + 32 * k)));
            const __m512i u = _mm512_and_si512(_mm512_mask_srli_epi16(q, upper, q, 4), lo4);
            /* bit 2k (lower half) or 2k + 1 (upper half) of each qh byte */
            const __m512i sel = _mm512_mask_blend_epi8(0xffffffff00000000ull,
                                                       _mm512_set1_epi8((char)(1 << 2 * k)),
                                                       _mm512_set1_epi8((char)(2 << 2 * k)));
            part[k] = _mm512_or_si512(u, _mm512_maskz_mov_epi8(_mm512_test_epi8_mask(qh, sel), bit5));
        }
        /* the 6-bit scales and mins, 8 each (layout: see block_q4_K) */
        uint32_t sw[3];
        memcpy(sw, b->scales, 12);
        const uint32_t m6 = 0x3f3f3f3fu, m4 = 0x0f0f0f0fu, m2 = 0x03030303u;
        const uint64_t sc = (sw[0] & m6) | (uint64_t)((sw[2] & m4) | (sw[0] >> 6 & m2) << 4) << 32;
        const uint64_t mn = (sw[1] & m6) | (uint64_t)((sw[2] >> 4 & m4) | (sw[1] >> 6 & m2) << 4) << 32;
        const float d = quant_h2f((uint16_t)(p[0] | p[1] << 8));
        const float dmin = quant_h2f((uint16_t)(p[2] | p[3] << 8));
        const __m512i twice = _mm512_set_epi32(7, 7, 6, 6, 5, 5, 4, 4, 3, 3, 2, 2, 1, 1, 0, 0);
        const __m512i scm = _mm512_cvtepu8_epi32(_mm_set_epi64x((long long)mn, (long long)sc));
        const __m512 f = _mm512_cvtepi32_ps(scm); /* lanes 0..7 scales, 8..15 mins */
        const __m256 sf = _mm256_mul_ps(_mm512_castps512_ps256(f), _mm256_set1_ps(d));
        const __m256 mf = _mm256_sub_ps(_mm256_setzero_ps(),
                                        _mm256_mul_ps(_mm512_extractf32x8_ps(f, 1), _mm256_set1_ps(dmin)));
        _mm512_store_ps(c->s, _mm512_permutexvar_ps(twice, _mm512_castps256_ps512(sf)));
        _mm512_store_ps(c->mo, _mm512_permutexvar_ps(twice, _mm512_castps256_ps512(mf)));
    }
    mm_grp_rounds(part[0], part[1], part[2], part[3], mm_grp_idx1(false, false),
                  mm_grp_idx1(false, true), c->u);
}
#endif

/* Prepares one chunk of weight row p (cnb blocks from p; fewer than a chunk's: the tail
 * chunk, in the compact order) and prefetches the same bytes of the row ahead (the next
 * tile's). */
SIMD_INLINE void mm_blk_prep(uint32_t type, const uint8_t *p, int cnb, size_t ahead,
                             mm_prep *c) {
    const int bytes = QUANT_CHUNK / mm_blk_n(type) * mm_blk_bytes(type);
    for (int o = 0; o < bytes; o += 64) MM_PREFETCH(p + ahead + o);
    MM_PREFETCH(p + ahead + bytes - 1);
    const float off = (float)quant_off(type);
#if MM_Q8_512
#if MM_UNPACK_512
    if (type != DT_Q4_K) {
        if (mm_blk_n(type) != 32)
            mm_unpack_k_512(type, p, c);
        else if (cnb == 8)
            mm_unpack_small_512(type, p, 8, c); /* (the constant folds the tail masks away) */
        else
            mm_unpack_tail_512(type, p, cnb, c);
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
    if (cnb < QUANT_CHUNK / mm_blk_n(type))
        mm_tail_reorder(ch.u, c->u, (cnb * mm_blk_n(type) + 63) / 64);
    else
        mm_grp_reorder(ch.u, c->u);
    for (int g = 0; g < 16; g++) {
        c->s[g] = ch.s[g];
        c->mo[g] = ch.m[g] - off * ch.s[g];
    }
#endif
}

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
 * change. A tail chunk (matmul.h) adds the same to the lanes of its groups only. */

#if MM_Q8_512
/* The tail chunk (nq quarters, compact order) of MM_TX activation rows, four pairs of
 * (weight row, activation row) at a time. A quarter of the activation rows fills one
 * register, row c in block c: quarter j's part s of row c is block c of xp[s], its dg
 * and sx block c of dg and sx (zero past NX), while a weight row's part s, s and mo are
 * broadcast to all four blocks. Four chained dot products then leave group 4j + g of
 * pair (r, c) in lane 4c + g, and mm_tile_grp's two multiply-adds run for the four pairs
 * at once, on their accumulator lanes 4j .. 4j + 3, gathered from and put back where
 * they were: per lane the operations and the order of a whole chunk. */
SIMD_INLINE void mm_tail_x512(int64_t n, const uint8_t *x, size_t xs, int j, __m512i xp[4],
                              __m512 *dg, __m512 *sx, const int NX) {
    const int64_t ch = mm_full_chunks(n);
    *dg = _mm512_setzero_ps(), *sx = _mm512_setzero_ps();
#pragma GCC unroll 4
    for (int s = 0; s < 4; s++) xp[s] = _mm512_setzero_si512();
#pragma GCC unroll 4
    for (int c = 0; c < NX; c++) {
        const __mmask16 in_c = (__mmask16)(0xf << 4 * c);
        const uint8_t *xr = x + c * xs;
        const uint8_t *xq = xr + ch * QUANT_CHUNK + 64 * j;
#pragma GCC unroll 4
        for (int s = 0; s < 4; s++)
            xp[s] = _mm512_mask_broadcast_i32x4(xp[s], in_c, _mm_load_si128((const __m128i *)(xq + 16 * s)));
        *dg = _mm512_mask_broadcast_f32x4(*dg, in_c, _mm_load_ps(mm_qx_dg(xr, n) + 16 * ch + 4 * j));
        *sx = _mm512_mask_broadcast_f32x4(*sx, in_c, _mm_load_ps(mm_qx_sx(xr, n) + 16 * ch + 4 * j));
    }
}

/* Quarter j of prepared weight row q against the packed activations: a (the four pairs'
 * accumulator lanes) plus the quarter's terms. */
SIMD_INLINE __m512 mm_tail_fma512(const mm_prep *q, int j, const __m512i xp[4], __m512 dg,
                                  __m512 sx, __m512 a) {
    __m512i p = _mm512_setzero_si512();
#pragma GCC unroll 4
    for (int s = 0; s < 4; s++)
        p = _mm512_dpbusd_epi32(
            p, _mm512_broadcast_i32x4(_mm_load_si128((const __m128i *)(q->u + 64 * j + 16 * s))), xp[s]);
    const __m512 sw = _mm512_broadcast_f32x4(_mm_load_ps(q->s + 4 * j));
    a = _mm512_fmadd_ps(_mm512_cvtepi32_ps(p), _mm512_mul_ps(sw, dg), a);
    return _mm512_fmadd_ps(_mm512_broadcast_f32x4(_mm_load_ps(q->mo + 4 * j)), sx, a);
}

/* The tail added to acc[MM_TX * r + c], r < NW, one pair's lanes gathered and put back
 * at a time. */
SIMD_INLINE void mm_tail512(int64_t n, const mm_prep *w, const uint8_t *x, size_t xs,
                            __m512 acc[MM_TW * MM_TX], const int NW, const int NX) {
    const __m512i blk = _mm512_set_epi32(3, 2, 1, 0, 3, 2, 1, 0, 3, 2, 1, 0, 3, 2, 1, 0);
    for (int j = 0; j < mm_tail_quarters(n); j++) {
        __m512i xp[4];
        __m512 dg, sx;
        mm_tail_x512(n, x, xs, j, xp, &dg, &sx, NX);
        const __m512i from_j = _mm512_add_epi32(blk, _mm512_set1_epi32(4 * j));
        const __mmask16 to_j = (__mmask16)(0xf << 4 * j);
#pragma GCC unroll 4
        for (int r = 0; r < NW; r++) {
            __m512 a = _mm512_setzero_ps();
#pragma GCC unroll 4
            for (int c = 0; c < NX; c++)
                a = _mm512_mask_permutexvar_ps(a, (__mmask16)(0xf << 4 * c), from_j, acc[MM_TX * r + c]);
            a = mm_tail_fma512(w + r, j, xp, dg, sx, a);
#pragma GCC unroll 4
            for (int c = 0; c < NX; c++)
                acc[MM_TX * r + c] = _mm512_mask_permutexvar_ps(
                    acc[MM_TX * r + c], to_j, _mm512_add_epi32(blk, _mm512_set1_epi32(4 * c)), a);
        }
    }
}

/* Quarter j for a whole tile of weight rows, on the halves of vf_hsum16's first level
 * that hold it (lh: lo for j < 2, hi after): lh[2r] holds pairs (r, 0) and (r, 1), lh[2r +
 * 1] pairs (r, 2) and (r, 3), quarter j of each in block j % 2 and 2 + j % 2. One
 * permute gathers a row's four pairs, two put them back. */
SIMD_INLINE void mm_tail_lh512(const mm_prep *w, int j, const __m512i xp[4], __m512 dg,
                               __m512 sx, __m512 lh[8]) {
    const int jj = j % 2;
    const __m512i gather = _mm512_add_epi32(
        _mm512_set_epi32(27, 26, 25, 24, 19, 18, 17, 16, 11, 10, 9, 8, 3, 2, 1, 0), _mm512_set1_epi32(4 * jj));
    const __m512i put01 = _mm512_set_epi32(7, 6, 5, 4, 7, 6, 5, 4, 3, 2, 1, 0, 3, 2, 1, 0);
    const __m512i put23 = _mm512_add_epi32(put01, _mm512_set1_epi32(8));
    const __mmask16 at = (__mmask16)(0x0f0f << 4 * jj);
#pragma GCC unroll 4
    for (int r = 0; r < MM_TW; r++) {
        __m512 a = _mm512_permutex2var_ps(lh[2 * r], gather, lh[2 * r + 1]);
        a = mm_tail_fma512(w + r, j, xp, dg, sx, a);
        lh[2 * r] = _mm512_mask_permutexvar_ps(lh[2 * r], at, put01, a);
        lh[2 * r + 1] = _mm512_mask_permutexvar_ps(lh[2 * r + 1], at, put23, a);
    }
}

/* The tail chunk, if any, then the sums stored (mm_put512); with a whole tile of weight
 * rows the tail works inside vf_hsum16, whose first level moves those blocks anyway. */
SIMD_INLINE void mm_finish512(int64_t n, const mm_prep *w, const uint8_t *x, size_t xs,
                              __m512 acc[MM_TW * MM_TX], float *y, int64_t ys, const int NW,
                              const int NX) {
    if (n % QUANT_CHUNK == 0 || NW != MM_TW) {
        if (n % QUANT_CHUNK) mm_tail512(n, w, x, xs, acc, NW, NX);
        mm_put512(acc, y, ys, NW, NX);
        return;
    }
    __m512 lo[8], hi[8];
    vf_hsum16_lohi(acc, lo, hi);
    for (int j = 0; j < mm_tail_quarters(n); j++) {
        __m512i xp[4];
        __m512 dg, sx;
        mm_tail_x512(n, x, xs, j, xp, &dg, &sx, NX);
        if (j < 2)
            mm_tail_lh512(w, j, xp, dg, sx, lo);
        else
            mm_tail_lh512(w, j, xp, dg, sx, hi);
    }
    mm_store16(vf_hsum16_rest(lo, hi), y, ys, NX);
}
#endif

#if MM_Q8_SIMD && !MM_Q8_512
/* The int32 group sums of half h (groups 8h .. 8h + 7) of a chunk of weights u and
 * activations x: the four parts chained. In a tail chunk (nq quarters) half h is quarters
 * 2h and 2h + 1 (zero past nq), each its four parts chained. */
SIMD_INLINE __m256i mm_dot_half(const uint8_t *u, const uint8_t *x, int h, bool tail, int nq) {
#if MM_Q8_VNNI
#define MM_DOT256(p, a, b) MM_DPBUSD(p, a, b)
#define MM_DOT128(p, a, b) MM_DPBUSD128(p, a, b)
#else
#define MM_DOT256(p, a, b) _mm256_add_epi32(p, _mm256_madd_epi16(_mm256_maddubs_epi16(a, b), _mm256_set1_epi16(1)))
#define MM_DOT128(p, a, b) _mm_add_epi32(p, _mm_madd_epi16(_mm_maddubs_epi16(a, b), _mm_set1_epi16(1)))
#endif
    if (!tail) {
        __m256i p = _mm256_setzero_si256();
#pragma GCC unroll 4
        for (int k = 0; k < 4; k++)
            p = MM_DOT256(p, _mm256_load_si256((const __m256i *)(u + 64 * k + 32 * h)),
                          _mm256_load_si256((const __m256i *)(x + 64 * k + 32 * h)));
        return p;
    }
    __m128i p[2] = {_mm_setzero_si128(), _mm_setzero_si128()};
    for (int i = 0; i < 2 && 2 * h + i < nq; i++)
#pragma GCC unroll 4
        for (int k = 0; k < 4; k++) {
            const int at = 64 * (2 * h + i) + 16 * k;
            p[i] = MM_DOT128(p[i], _mm_load_si128((const __m128i *)(u + at)),
                             _mm_load_si128((const __m128i *)(x + at)));
        }
#undef MM_DOT256
#undef MM_DOT128
    return _mm256_set_m128i(p[1], p[0]);
}
#endif

SIMD_INLINE void mm_tile_grp(int64_t n, const uint8_t *w, size_t ws, const uint8_t *x,
                             size_t xs, float *y, int64_t ys, const int NW, const int NX) {
    (void)ws;
    const mm_prep *pr = (const mm_prep *)w;
    const int64_t nfull = mm_full_chunks(n);
#if MM_Q8_512
    /* Two weight rows at a time, held in registers while all NX activation rows pass:
     * each part of x is then loaded once for both rows (loads, not arithmetic, bound
     * this loop). */
    const __m512i zero = _mm512_setzero_si512();
    __m512 sums[MM_TW * MM_TX]; /* [MM_TX * r + c], summed up at the end (mm_put512) */
#pragma GCC unroll 16
    for (int i = 0; i < MM_TW * MM_TX; i++) sums[i] = _mm512_setzero_ps();
#pragma GCC unroll 2
    for (int r0 = 0; r0 < NW; r0 += 2) {
        const int nr = NW - r0 < 2 ? NW - r0 : 2;
        __m512 acc[2][MM_TX];
#pragma GCC unroll 2
        for (int r = 0; r < nr; r++)
#pragma GCC unroll 4
            for (int c = 0; c < NX; c++) acc[r][c] = _mm512_setzero_ps();
        const mm_prep *q = pr + r0;
        for (int64_t ch = 0; ch < nfull; ch++, q += NW) {
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
                __m512 dg = _mm512_load_ps(mm_qx_dg(xr, n) + 16 * ch);
                __m512 sx = _mm512_load_ps(mm_qx_sx(xr, n) + 16 * ch);
                /* (the empty asm keeps these, and each xv below, in a register: folded
                 * into the instructions as memory operands they were loaded once per
                 * weight row, and loads, not arithmetic, bounded the loop: 7-10% faster) */
                __asm__("" : "+v"(dg), "+v"(sx));
                __m512i p[2] = {zero, zero};
#pragma GCC unroll 4
                for (int k = 0; k < 4; k++) {
                    __m512i xv = _mm512_load_si512(xq + 64 * k);
                    __asm__("" : "+v"(xv));
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
#pragma GCC unroll 2
        for (int r = 0; r < nr; r++)
#pragma GCC unroll 4
            for (int c = 0; c < NX; c++) sums[MM_TX * (r0 + r) + c] = acc[r][c];
    }
    mm_finish512(n, pr + nfull * NW, x, xs, sums, y, ys, NW, NX);
#elif MM_Q8_SIMD
    /* the low and high 32 bytes of each part are groups 0..7 and 8..15 */
    const int64_t nch = nfull + (n % QUANT_CHUNK != 0);
    const int nq = mm_tail_quarters(n);
    __m256 acc[MM_TW][MM_TX];
#pragma GCC unroll 4
    for (int r = 0; r < NW; r++)
#pragma GCC unroll 4
        for (int c = 0; c < NX; c++) acc[r][c] = _mm256_setzero_ps();
    for (int64_t ch = 0; ch < nch; ch++, pr += NW) {
        const bool tail = ch == nfull;
        const int nh = tail ? (nq + 1) / 2 : 2; /* halves with groups in them */
#pragma GCC unroll 4
        for (int c = 0; c < NX; c++) {
            const uint8_t *xr = x + c * xs;
            const uint8_t *xq = xr + ch * QUANT_CHUNK;
            const float *dg = mm_qx_dg(xr, n) + 16 * ch, *sx = mm_qx_sx(xr, n) + 16 * ch;
#pragma GCC unroll 4
            for (int r = 0; r < NW; r++) {
                __m256 a = acc[r][c];
#pragma GCC unroll 2
                for (int h = 0; h < nh; h++)
                    a = _mm256_fmadd_ps(_mm256_cvtepi32_ps(mm_dot_half(pr[r].u, xq, h, tail, nq)),
                                        _mm256_mul_ps(_mm256_loadu_ps(pr[r].s + 8 * h),
                                                      _mm256_loadu_ps(dg + 8 * h)), a);
#pragma GCC unroll 2
                for (int h = 0; h < nh; h++)
                    a = _mm256_fmadd_ps(_mm256_loadu_ps(pr[r].mo + 8 * h), _mm256_loadu_ps(sx + 8 * h), a);
                acc[r][c] = a;
            }
        }
    }
    for (int r = 0; r < NW; r++)
        for (int c = 0; c < NX; c++) y[c * ys + r] = mm_hsum256(acc[r][c]);
#else
    const int64_t nch = nfull + (n % QUANT_CHUNK != 0);
    float acc[MM_TW][MM_TX] = {{0}};
    for (int64_t ch = 0; ch < nch; ch++, pr += NW) {
        const bool tail = ch == nfull;
        const int ng = tail ? 4 * mm_tail_quarters(n) : 16; /* groups with values in them */
        for (int c = 0; c < NX; c++) {
            const uint8_t *xr = x + c * xs;
            const int8_t *xq = (const int8_t *)xr + ch * QUANT_CHUNK;
            const float *dg = mm_qx_dg(xr, n) + 16 * ch, *sx = mm_qx_sx(xr, n) + 16 * ch;
            for (int r = 0; r < NW; r++) {
                float a = acc[r][c];
                for (int g = 0; g < ng; g++) {
                    int32_t s = 0;
                    for (int k = 0; k < 4; k++)
                        for (int b = 0; b < 4; b++) {
                            const int at = tail ? mm_tail_pos(16 * g + 4 * k + b)
                                                : mm_grp_pos(16 * g + 4 * k + b);
                            s += pr[r].u[at] * xq[at];
                        }
                    a += (float)s * (pr[r].s[g] * dg[g]);
                }
                for (int g = 0; g < ng; g++) a += pr[r].mo[g] * sx[g];
                acc[r][c] = a;
            }
        }
    }
    for (int r = 0; r < NW; r++)
        for (int c = 0; c < NX; c++) y[c * ys + r] = acc[r][c];
#endif
}

MM_TILES(mm_tile_grp)

mm_tile_row *mm_grp_tiles(void) { return mm_tile_grp_tiles; }

#if MM_Q8_512
/* ---- the fused tile, for a few activation rows --------------------------------------
 * With one group of activation rows (decode) nothing is gained by preparing a tile's
 * rows whole first, and the prepared rows (up to 34 KB for 4 rows of 5632) leave L1:
 * decode of 1B K-quant models measured 15-20% slower. This tile prepares one chunk of
 * its NW rows at a time (1.5 KB, on the stack) and multiplies it at once. Per (weight row,
 * activation row) pair it does mm_tile_grp's operations in mm_tile_grp's order (the
 * chained dot products of the four parts, then the two multiply-adds), so its results
 * are bitwise those of the prepared path. */
SIMD_INLINE void mm_tile_fused(int64_t n, const uint8_t *w, size_t ws, const uint8_t *x,
                               size_t xs, float *y, int64_t ys, const uint32_t type,
                               const int NW, const int NX) {
    const int bn = mm_blk_n(type), bb = mm_blk_bytes(type), per_chunk = QUANT_CHUNK / bn;
    const int64_t nfull = mm_full_chunks(n);
    const size_t ahead = MM_AHEAD * (size_t)NW * ws;
    const __m512i zero = _mm512_setzero_si512();
    __m512 acc[MM_TW * MM_TX]; /* [MM_TX * r + c], as mm_put512 takes them */
#pragma GCC unroll 16
    for (int i = 0; i < MM_TW * MM_TX; i++) acc[i] = _mm512_setzero_ps();
    mm_prep q[MM_TW];
    for (int64_t ch = 0; ch < nfull; ch++) {
#pragma GCC unroll 4
        for (int r = 0; r < NW; r++)
            mm_blk_prep(type, w + r * ws + ch * per_chunk * bb, per_chunk, ahead, &q[r]);
#pragma GCC unroll 4
        for (int c = 0; c < NX; c++) {
            const uint8_t *xr = x + c * xs;
            const uint8_t *xq = xr + ch * QUANT_CHUNK;
            const __m512 dg = _mm512_load_ps(mm_qx_dg(xr, n) + 16 * ch);
            const __m512 sx = _mm512_load_ps(mm_qx_sx(xr, n) + 16 * ch);
            __m512i p[MM_TW];
#pragma GCC unroll 4
            for (int r = 0; r < NW; r++) p[r] = zero;
#pragma GCC unroll 4
            for (int k = 0; k < 4; k++) {
                const __m512i xv = _mm512_load_si512(xq + 64 * k);
#pragma GCC unroll 4
                for (int r = 0; r < NW; r++)
                    p[r] = _mm512_dpbusd_epi32(p[r], _mm512_load_si512(q[r].u + 64 * k), xv);
            }
#pragma GCC unroll 4
            for (int r = 0; r < NW; r++) {
                __m512 a = _mm512_fmadd_ps(_mm512_cvtepi32_ps(p[r]),
                                           _mm512_mul_ps(_mm512_load_ps(q[r].s), dg), acc[MM_TX * r + c]);
                acc[MM_TX * r + c] = _mm512_fmadd_ps(_mm512_load_ps(q[r].mo), sx, a);
            }
        }
    }
    if (n % QUANT_CHUNK) { /* (small types only) */
        const int cnb = (int)(n / bn - nfull * per_chunk);
#pragma GCC unroll 4
        for (int r = 0; r < NW; r++)
            mm_blk_prep(type, w + r * ws + nfull * per_chunk * bb, cnb, ahead, &q[r]);
    }
    mm_finish512(n, q, x, xs, acc, y, ys, NW, NX);
}
#define MM_FUSED_TYPE(name, T)                                                            \
    SIMD_INLINE void mm_fused_##name(int64_t n, const uint8_t *w, size_t ws,              \
                                     const uint8_t *x, size_t xs, float *y, int64_t ys,   \
                                     const int NW, const int NX) {                        \
        mm_tile_fused(n, w, ws, x, xs, y, ys, T, NW, NX);                                 \
    }                                                                                     \
    MM_TILES(mm_fused_##name)
#else
#define MM_FUSED_TYPE(name, T)
#endif

/* One preparer per type: the type is a constant in each, so quant_unpack's switch and
 * the block sizes fold away. */
#define MM_BLK_TYPE(name, T)                                                              \
    static void mm_prep_##name(int64_t n, const uint8_t *w, size_t ws, int nw,            \
                               mm_prep *dst) {                                            \
        mm_prep_blk(n, w, ws, nw, dst, T);                                                \
    }                                                                                     \
    MM_FUSED_TYPE(name, T)

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

mm_tile_row *mm_quant_fused(uint32_t type) {
#if MM_Q8_512
    switch (type) {
    case DT_Q4_0: return mm_fused_q4_0_tiles;
    case DT_Q4_1: return mm_fused_q4_1_tiles;
    case DT_Q5_0: return mm_fused_q5_0_tiles;
    case DT_Q5_1: return mm_fused_q5_1_tiles;
    case DT_Q4_K: return mm_fused_q4_k_tiles;
    case DT_Q5_K: return mm_fused_q5_k_tiles;
    case DT_Q6_K: return mm_fused_q6_k_tiles;
    default: return NULL;
    }
#else
    (void)type;
    return NULL;
#endif
}
