/* unpack.h - the block types' preparers (matmul_quant.c): one chunk of 256 values of one
 * weight row unpacked into the grouped form of the tiles (mm_prep, matmul.h), per type.
 * Inline, so that the fused tiles prepare as they go with the type a constant. Private to
 * matmul_quant.c.
 *
 * Each unpacks into unsigned quants u and, per group of 16, a scale s and an offset m
 * (w = s * (u - off) + m), stores u in the grouped order (mm_grp_pos), s, and mo = m -
 * off * s; see matmul_quant.c for how the tiles use them. With AVX-512 (MM_Q8_512) the
 * small types, Q5_K, Q6_K and Q8_0 have unpackers that write the grouped order straight
 * from registers; otherwise (and for Q2_K, Q3_K, Q4_K and the lookup-table types)
 * quant_unpack, the code the dequantiser uses, then a reordering. */
#ifndef MD_CPU_UNPACK_H
#define MD_CPU_UNPACK_H

#include <stddef.h>

#include "matmul.h"

#include "../quant.h"

SIMD_INLINE int mm_blk_n(uint32_t type) {
    return dtype_get(type)->block;
}

SIMD_INLINE int mm_blk_bytes(uint32_t type) {
    switch (type) {
    case DT_Q8_0: return sizeof(block_q8_0);
    case DT_Q4_0: return sizeof(block_q4_0);
    case DT_Q4_1: return sizeof(block_q4_1);
    case DT_Q5_0: return sizeof(block_q5_0);
    case DT_Q5_1: return sizeof(block_q5_1);
    case DT_Q4_K: return sizeof(block_q4_K);
    case DT_Q5_K: return sizeof(block_q5_K);
    case DT_Q2_K: return sizeof(block_q2_K);
    case DT_Q3_K: return sizeof(block_q3_K);
    case DT_IQ4_NL: return sizeof(block_iq4_nl);
    case DT_IQ4_XS: return sizeof(block_iq4_xs);
    case DT_MXFP4: return sizeof(block_mxfp4);
    default: return sizeof(block_q6_K);
    }
}

/* The types AVX-512 unpacks straight from registers (the others go through quant_unpack). */
SIMD_INLINE bool mm_has_unpack_512(uint32_t type) {
    return type == DT_Q4_0 || type == DT_Q4_1 || type == DT_Q5_0 || type == DT_Q5_1 ||
           type == DT_Q5_K || type == DT_Q6_K;
}

/* The lookup-table types on AVX2 without VNNI, whose maddubs would saturate on their u (up
 * to 241): their prepared u holds the signed table value (u - 128) instead, which the
 * tiles multiply as |w| by sign(x, w), and their mo is m (0): no offset left to take off. */
SIMD_INLINE bool mm_lut_signed(uint32_t type) {
#if MM_Q8_SIMD && !MM_Q8_VNNI && !MM_Q8_512
    return quant_lut(type);
#else
    (void)type;
    return false;
#endif
}

/* The types without a min (m = 0) whose offset is a power of two up to 128 take it off
 * in integers with AVX-512 VNNI (matmul_quant.c): off = 128 >> mm_int_off(type); -1 for
 * the others, whose mo the tiles multiply. */
SIMD_INLINE int mm_int_off(uint32_t type) {
#if MM_Q8_512
    switch (type) {
    case DT_Q8_0: return 0;
    case DT_Q4_0: return 4;
    case DT_Q5_0: return 3;
    case DT_Q6_K: return 2;
    case DT_IQ4_NL: case DT_IQ4_XS: case DT_MXFP4: return 0;
    default: return -1;
    }
#else
    (void)type;
    return -1;
#endif
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

/* A quarter (64 values) from value order into the compact tail order: dword 4g + s to
 * dword 4s + g. */
SIMD_INLINE __m512i mm_tail_quarter(__m512i v) {
    return _mm512_permutexvar_epi32(
        _mm512_set_epi32(15, 11, 7, 3, 14, 10, 6, 2, 13, 9, 5, 1, 12, 8, 4, 0), v);
}

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

/* 8 fp16 values (one per block of 32) as 16 floats, each twice (one per group of 16) */
SIMD_INLINE __m512 mm_ph8_twice(__m128i h) {
    const __m512i twice = _mm512_set_epi32(7, 7, 6, 6, 5, 5, 4, 4, 3, 3, 2, 2, 1, 1, 0, 0);
    return _mm512_permutexvar_ps(twice, _mm512_castps256_ps512(_mm256_cvtph_ps(h)));
}

/* The scales (fp16 d, twice: one per group) and offsets (m, of Q4_1 and Q5_1) of a chunk of
 * cnb blocks of a small type into c->s and c->mo (m only; off is folded in later). */
SIMD_INLINE void mm_unpack_dm_512(uint32_t type, const uint8_t *p, const int cnb, mm_prep *c) {
    const int bb = mm_blk_bytes(type);
    const bool has_m = type == DT_Q4_1 || type == DT_Q5_1;
    const __m256i dm = _mm256_inserti128_si256(_mm256_castsi128_si256(mm_w32x4(p, bb, cnb)),
                                               mm_w32x4(p + 4 * bb, bb, cnb - 4), 1);
    _mm512_store_ps(c->s, mm_ph8_twice(_mm256_cvtepi32_epi16(dm)));
    if (mm_int_off(type) >= 0) return; /* (their tiles read no mo) */
    const __m128i m = has_m ? _mm256_cvtepi32_epi16(_mm256_srli_epi32(dm, 16)) : _mm_setzero_si128();
    _mm512_store_ps(c->mo, mm_ph8_twice(m)); /* m; off is folded in later */
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

/* A chunk of Q8_0 (cnb <= 8 blocks): u = q + 128, unsigned as the dot products want it
 * (its tiles start each group's sum at the activations' xo, -128 sum q, so the sum stays
 * an exact integer; mo is 0). Register j holds blocks 2j and 2j + 1, values 64j .. 64j + 63 in value order: a whole
 * chunk goes through mm_grp_rounds, a tail chunk's quarters through one permute each.
 * A block's scale d is its two groups' s. */
SIMD_INLINE void mm_unpack_q8_512(const uint8_t *p, const int cnb, mm_prep *c) {
    const int bb = sizeof(block_q8_0);
    const __m256i k80 = _mm256_set1_epi8((char)0x80);
    __m512i v[4];
#pragma GCC unroll 4
    for (int j = 0; j < 4; j++) {
        const uint8_t *q = p + 2 * j * bb + offsetof(block_q8_0, qs);
        v[j] = _mm512_setzero_si512();
        if (2 * j < cnb)
            v[j] = _mm512_castsi256_si512(_mm256_xor_si256(_mm256_loadu_si256((const __m256i *)q), k80));
        if (2 * j + 1 < cnb)
            v[j] = _mm512_inserti64x4(
                v[j], _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)(q + bb)), k80), 1);
    }
    if (cnb == 8)
        mm_grp_rounds(v[0], v[1], v[2], v[3], mm_grp_idx1(false, false), mm_grp_idx1(false, true),
                      c->u);
    else
        for (int j = 0; 2 * j < cnb; j++) _mm512_store_si512(c->u + 64 * j, mm_tail_quarter(v[j]));
    mm_unpack_dm_512(DT_Q8_0, p, cnb, c);
}

/* quant_unpack of a super block of Q5_K or Q6_K, straight into the grouped order, as
 * mm_unpack_small_512 does for the small types (their portable unpacking of the high
 * bits, then the stores and reloads of quant_chunk, made decode compute-bound; Q4_K,
 * with no high bits, is faster through quant_unpack). In value order part k
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
    if (type == DT_Q8_0) { /* (its tiles read no mo) */
        if (cnb == 8)
            mm_unpack_q8_512(p, 8, c); /* (the constant folds the tail's branches away) */
        else
            mm_unpack_q8_512(p, cnb, c);
        return;
    }
    if (mm_has_unpack_512(type)) {
        if (mm_blk_n(type) != 32)
            mm_unpack_k_512(type, p, c);
        else if (cnb == 8)
            mm_unpack_small_512(type, p, 8, c); /* (as above) */
        else
            mm_unpack_tail_512(type, p, cnb, c);
        if (mm_int_off(type) >= 0) return; /* (its tiles read no mo) */
        __m512 s = _mm512_load_ps(c->s);
        _mm512_store_ps(c->mo, _mm512_fnmadd_ps(_mm512_set1_ps(off), s, _mm512_load_ps(c->mo)));
        return;
    }
    quant_chunk ch;
    quant_unpack(type, p, cnb, &ch);
    if (cnb < QUANT_CHUNK / mm_blk_n(type)) { /* (IQ4_NL, MXFP4) */
        mm_tail_reorder(ch.u, c->u, (cnb * mm_blk_n(type) + 63) / 64);
    } else {
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
    }
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
    const bool sg = mm_lut_signed(type);
    if (sg)
        for (int i = 0; i < QUANT_CHUNK; i++) c->u[i] ^= 0x80; /* u - 128 as int8 */
    for (int g = 0; g < 16; g++) {
        c->s[g] = ch.s[g];
        c->mo[g] = sg ? ch.m[g] : ch.m[g] - off * ch.s[g];
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

#endif
