/* matmul.h - what matmul.c (the skeleton, float and Q8_0 tiles) and matmul_quant.c (the
 * tiles of the ggml block types Q4_0 .. Q6_K) share: the tile shape and its function
 * type, the macro that instantiates a tile template for every shape, which int8 dot
 * instructions the build has, and the layout of a quantised activation row. Private to
 * kernels/cpu. */
#ifndef MD_CPU_MATMUL_H
#define MD_CPU_MATMUL_H

#include <stdbool.h>

#include "../quant.h"
#include "cpu.h"
#include "simd.h"

#define MM_TW 4 /* weight rows per tile */
#define MM_TX 4 /* activation rows per tile (MM_TILES spells out 1..4) */

/* y[c * ys + r] = dot(row r of w, row c of x), r < NW, c < NX; n = n_in; ws and xs are
 * row strides in bytes. x is float32 or the quantised form, depending on the type. */
typedef void (*mm_tile_fn)(int64_t n, const uint8_t *w, size_t ws, const uint8_t *x, size_t xs,
                           float *y, int64_t ys);

/* A type's tiles: [NW == MM_TW][NX - 1], as MM_TILES lays them out. */
typedef const mm_tile_fn mm_tile_row[MM_TX];

/* Instantiates template tmpl for one (NW, NX) pair, then for all of them, plus the
 * table mm_kind_of hands to the skeleton: [NW == MM_TW][NX - 1]. */
#define MM_TILE_FN(tmpl, nw, nx)                                                          \
    static void tmpl##_##nw##x##nx(int64_t n, const uint8_t *w, size_t ws,                \
                                   const uint8_t *x, size_t xs, float *y, int64_t ys) {   \
        tmpl(n, w, ws, x, xs, y, ys, nw, nx);                                             \
    }
#define MM_TILES(tmpl)                                                                    \
    MM_TILE_FN(tmpl, 1, 1) MM_TILE_FN(tmpl, 1, 2) MM_TILE_FN(tmpl, 1, 3)                  \
    MM_TILE_FN(tmpl, 1, 4) MM_TILE_FN(tmpl, 4, 1) MM_TILE_FN(tmpl, 4, 2)                  \
    MM_TILE_FN(tmpl, 4, 3) MM_TILE_FN(tmpl, 4, 4)                                         \
    static mm_tile_row tmpl##_tiles[2] = {                                                \
        {tmpl##_1x1, tmpl##_1x2, tmpl##_1x3, tmpl##_1x4},                                 \
        {tmpl##_4x1, tmpl##_4x2, tmpl##_4x3, tmpl##_4x4}};

/* Tiles prefetch the same columns of the next tile's weight rows (the next MM_TW rows
 * of W), one tile ahead. The hardware prefetchers stop at 4 KB pages, and a weight row
 * is about a page, so without this every row of a tile starts with a miss to DRAM. Into
 * L2 (prefetcht1), not L1: a core has few L1 miss buffers, and prefetches that hold them
 * until DRAM answers left decode streaming weights at about 60% of the read bandwidth. */
#define MM_PREFETCH(p) __builtin_prefetch((p), 0, 2)

/* How many tiles ahead the block types' tiles prefetch. A tile's rows are unpacked in
 * one go and then multiplied without touching memory, so one tile ahead leaves decode
 * (one activation row, bound by memory bandwidth) waiting on DRAM after each tile; two
 * do not (kernels/README.md). (A task's first MM_AHEAD tiles: see mm_task.) */
#define MM_AHEAD 2

_Static_assert(MM_TW == 4 && MM_TX == 4, "MM_TILES spells out NW in {1, 4}, NX in 1..4");

/* ---- int8 dot products: which instructions this build has ---------------------- *
 * MM_Q8_512: AVX-512 VNNI on 512-bit registers. MM_Q8_SIMD: AVX2 (256-bit), with
 * MM_Q8_VNNI when dpbusd exists at that width (AVX-512 VNNI + VL, or AVX-VNNI).
 * Neither: plain C. */
#if defined(SIMD_SCALAR)
/* plain C */
#elif defined(__AVX512VNNI__) && defined(__AVX512VL__)
#define MM_Q8_VNNI 1
#define MM_DPBUSD(acc, u, s) _mm256_dpbusd_epi32(acc, u, s)
#define MM_DPBUSD128(acc, u, s) _mm_dpbusd_epi32(acc, u, s)
#elif defined(__AVXVNNI__)
#define MM_Q8_VNNI 1
#define MM_DPBUSD(acc, u, s) _mm256_dpbusd_avx_epi32(acc, u, s)
#define MM_DPBUSD128(acc, u, s) _mm_dpbusd_avx_epi32(acc, u, s)
#endif
#if defined(__AVX2__) && defined(__FMA__) && !defined(SIMD_SCALAR)
#define MM_Q8_SIMD 1
#endif
/* MM_Q8_NEON: AArch64 NEON (sdot where __ARM_FEATURE_DOTPROD says the target has it). */
#if defined(__aarch64__) && defined(__ARM_NEON) && !defined(SIMD_SCALAR)
#define MM_Q8_NEON 1
#include <arm_neon.h>
#endif
/* With AVX-512 VNNI two blocks share one 512-bit register: half the instructions. (VL,
 * which every VNNI processor has, for the 256-bit forms the unpackers use.) */
#if SIMD_AVX512 && defined(__AVX512VNNI__) && defined(__AVX512BW__) && defined(__AVX512VL__)
#define MM_Q8_512 1
#else
#define MM_Q8_512 0
#endif

/* The packed form (kern_mat_pack, matmul_pk.c) has tiles with AVX-512 VNNI
 * (matmul_pk512.c), AVX2 and NEON (matmul_pkv.c). */
#if MM_Q8_512 || MM_Q8_SIMD || MM_Q8_NEON
#define MM_PK 1
#else
#define MM_PK 0
#endif

/* How many activation rows one tile takes, and o-blocks: with AVX-512 four rows by two
 * o-blocks measured best of the shapes tried (kernels/README.md); AVX2's 16 registers
 * hold one o-block's (two halves of 8 rows) sums. */
#define MM_PK_RX 4
#if MM_Q8_512
#define MM_PK_OB 2
#else
#define MM_PK_OB 1
#endif

#if MM_Q8_512
/* y[c * ys + r] = lane 4r + c of s (vf_hsum16's order), r < MM_TW, c < NX */
SIMD_INLINE void mm_store16(__m512 s, float *y, int64_t ys, const int NX) {
#pragma GCC unroll 4
    for (int c = 0; c < NX; c++) {
        const __m512i at = _mm512_add_epi32(_mm512_set1_epi32(4 * c),
                                            _mm512_set_epi32(3, 2, 1, 0, 3, 2, 1, 0, 3, 2, 1, 0, 3, 2, 1, 0));
        _mm_storeu_ps(y + c * ys, _mm512_castps512_ps128(_mm512_permutexvar_ps(at, s)));
    }
}

/* y[c * ys + r] = vf_hsum(acc[MM_TX * r + c]), r < NW, c < NX; entries past NW or
 * NX must be set (to anything) when NW == MM_TW. */
/* (vf_hsum16 sums a whole 4 x 4 tile for about 3 instructions a pair instead of 8.) */
SIMD_INLINE void mm_put512(const __m512 acc[MM_TW * MM_TX], float *y, int64_t ys, const int NW,
                           const int NX) {
    if (NW == MM_TW) {
        mm_store16(vf_hsum16(acc), y, ys, NX);
        return;
    }
    for (int r = 0; r < NW; r++)
        for (int c = 0; c < NX; c++) y[c * ys + r] = vf_hsum(acc[MM_TX * r + c]);
}
#endif

#if MM_Q8_SIMD
SIMD_INLINE float mm_hsum256(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_shuffle_ps(s, s, 1));
    return _mm_cvtss_f32(s);
}
#endif

/* ---- quantised activations ------------------------------------------------------ *
 * An activation row of n values quantised to blocks of 32 int8 values with a float
 * scale each, x[i] ~= d[i / 32] * q[i], padded with zeros (q, dg, sx and d all 0) to
 * np = n rounded up to 256 (the parts keep their places; the tiles read the padding only
 * as far as the tail chunk's last quarter, see below). From offset 0:
 *   q   np int8 values: in value order (MM_QX_LINEAR, what Q8_0 reads) or, per chunk of
 *       256, in the grouped order of the block types (MM_QX_GROUPED, see mm_grp_pos;
 *       a tail chunk in its compact order, see mm_tail_pos)
 *   dg  np / 16 floats: d of value 16g, i.e. one per group of 16 values
 *   sx  np / 16 floats: d times the sum of q over values 16g .. 16g + 15 (what a
 *       weight block's min or offset multiplies)
 *   xo  np / 16 int32: -128 times that sum of q (what Q8_0's weights, made unsigned by
 *       adding 128, add to a group's dot product; AVX-512 VNNI builds only, else 0)
 *   d   np / 32 floats, one per block
 *   tp  a row whose n is not a multiple of 256, with AVX-512 VNNI: for each quarter of
 *       its tail chunk, that quarter of this row and the next MM_TX - 1 as the tail
 *       tiles read it (mm_tail_x512: 7 registers), in rows 0, MM_TX, 2 MM_TX, ... of
 *       a call's activations only (mm_qx_tail_pack); the tail tiles would otherwise
 *       build it anew for every tile of weight rows
 * Every part starts at a multiple of 64 bytes from the row start. */
enum { MM_QX_NONE, MM_QX_LINEAR, MM_QX_GROUPED, MM_QX_BLK, MM_QX_KSB, MM_QX_N };

SIMD_INLINE int64_t mm_qx_np(int64_t n) { return (n + 255) / 256 * 256; }
/* whole chunks of a row, and quarters (64 values) of its tail chunk (see below) */
SIMD_INLINE int64_t mm_full_chunks(int64_t n) { return n / 256; }
SIMD_INLINE int mm_tail_quarters(int64_t n) { return (int)((n % 256 + 63) / 64); }
#if MM_Q8_512
#define MM_QX_TP_QUARTER (7 * 64) /* bytes of tp per tail quarter */
#else
#define MM_QX_TP_QUARTER 0
#endif
SIMD_INLINE size_t mm_qx_tp_at(int64_t n) {
    int64_t np = mm_qx_np(n);
    return (size_t)(np + np / 4 + np / 4 + np / 4 + np / 8 + 63) / 64 * 64;
}
SIMD_INLINE size_t mm_qx_row_bytes(int64_t n) {
    return mm_qx_tp_at(n) + (size_t)mm_tail_quarters(n) * MM_QX_TP_QUARTER;
}
SIMD_INLINE const float *mm_qx_dg(const uint8_t *xr, int64_t n) {
    return (const float *)(xr + mm_qx_np(n));
}
SIMD_INLINE const float *mm_qx_sx(const uint8_t *xr, int64_t n) {
    return (const float *)(xr + mm_qx_np(n) + mm_qx_np(n) / 4);
}
SIMD_INLINE const int32_t *mm_qx_xo(const uint8_t *xr, int64_t n) {
    return (const int32_t *)(xr + mm_qx_np(n) + mm_qx_np(n) / 2);
}
SIMD_INLINE const float *mm_qx_d(const uint8_t *xr, int64_t n) {
    return (const float *)(xr + mm_qx_np(n) + 3 * mm_qx_np(n) / 4);
}
SIMD_INLINE const uint8_t *mm_qx_tp(const uint8_t *xr, int64_t n) { return xr + mm_qx_tp_at(n); }

/* The MM_QX_BLK form (the packed matrices', matmul_pk.c), in the same row size: q in
 * value order, then per block of 32 from offset np: d (np / 32 floats), sx = d times the
 * block's sum of q (np / 32 floats) and neg = minus that sum (np / 32 int32); then per
 * half block neg16 = minus the sum of its 16 q (np / 16 int32, for Q6_K's offset). */
SIMD_INLINE const float *mm_qx_bd(const uint8_t *xr, int64_t np) { return (const float *)(xr + np); }
SIMD_INLINE const float *mm_qx_bsx(const uint8_t *xr, int64_t np) {
    return (const float *)(xr + np + np / 8);
}
SIMD_INLINE const int32_t *mm_qx_bneg(const uint8_t *xr, int64_t np) {
    return (const int32_t *)(xr + np + np / 4);
}
SIMD_INLINE const int32_t *mm_qx_bneg16(const uint8_t *xr, int64_t np) {
    return (const int32_t *)(xr + np + 3 * np / 8);
}

/* The MM_QX_KSB form (the packed K types' on AVX2 and NEON, matmul_pkv.c), in the same
 * row size: one scale per 256 values (llama.cpp's Q8_K), so that the weights' sub-block
 * scales can go into the integer sums. q in value order, then from offset np: kd, d per
 * chunk of 256 (np / 256 floats); ks32, the sum of q per block of 32 (np / 32 int16, for
 * the K mins); o6, Q6_K's offset start per group of 16 (np / 16 int32, mm_ksb_o6); ks16,
 * the sum of q per group of 16 (np / 16 int16, for Q2_K's mins). */
SIMD_INLINE const float *mm_qx_kd(const uint8_t *xr, int64_t np) { return (const float *)(xr + np); }
SIMD_INLINE const int16_t *mm_qx_ks32(const uint8_t *xr, int64_t np) {
    return (const int16_t *)(xr + np + np / 64);
}
SIMD_INLINE const int32_t *mm_qx_o6(const uint8_t *xr, int64_t np) {
    return (const int32_t *)(xr + np + np / 64 + np / 16);
}
SIMD_INLINE const int16_t *mm_qx_ks16(const uint8_t *xr, int64_t np) {
    return (const int16_t *)(xr + np + np / 64 + np / 16 + np / 4);
}
/* Whether this build's AVX2 products sum int16 pairs (maddubs, without dpbusd): then a
 * K type's sub-block scale multiplies both int16 halves of a lane in one madd. */
#if MM_Q8_SIMD && !MM_Q8_VNNI && !MM_Q8_512
#define MM_KSB_PAIR16 1
#else
#define MM_KSB_PAIR16 0
#endif
/* Q6_K's (u - 32) q over a group of 16 as u q started at o6: -32 times the group's sum of
 * q, s01 over the values at 4i and 4i + 1, s23 over 4i + 2 and 4i + 3. With int16 pairs
 * (MM_KSB_PAIR16) each half of a lane starts at its own part, |32 * 8 * 127| < 2^15;
 * else as one int32. */
SIMD_INLINE int32_t mm_ksb_o6(int32_t s01, int32_t s23) {
#if MM_KSB_PAIR16
    return (int32_t)((uint32_t)(uint16_t)(int16_t)(-32 * s01) |
                     (uint32_t)(uint16_t)(int16_t)(-32 * s23) << 16);
#else
    return -32 * (s01 + s23);
#endif
}
/* o6 as the start for an offset of 32 >> sh (Q3_K's 4: sh 3), exact */
SIMD_INLINE int32_t mm_ksb_o(int32_t o6, int sh) {
#if MM_KSB_PAIR16
    return (int32_t)((uint32_t)(uint16_t)(int16_t)((int16_t)o6 >> sh) |
                     (uint32_t)(uint16_t)(int16_t)((int16_t)(o6 >> 16) >> sh) << 16);
#else
    return o6 >> sh;
#endif
}

/* Fills tp in row 0 of x (xs bytes a row) for rows 0 .. nx - 1 (nx <= MM_TX), all
 * quantised; nothing where there is no tp. */
void mm_qx_tail_pack(uint8_t *x, size_t xs, int64_t n, int nx);

/* The grouped order of a chunk of 256 values (16 groups of 16, the unit a block type's
 * scale covers): value 16g + 4s + b (s, b < 4) sits at byte 64s + 4g + b. Then int32
 * lane g of the four 64-byte parts holds the 4 values of group g at sub-position s, so
 * chained int8 dot products over the four parts sum a whole group in lane g. */
SIMD_INLINE int mm_grp_pos(int v) { return 64 * (v / 4 % 4) + 4 * (v / 16) + v % 4; }

/* Reorders 256 bytes from value order into the grouped order (dst != src). */
void mm_grp_reorder(const uint8_t *src, uint8_t *dst);

/* ---- the tail chunk --------------------------------------------------------------- *
 * A row whose n is not a multiple of 256 (the small types) ends in a tail chunk of
 * n % 256 values. Padded to 256 it would cost a whole chunk (a 576-value row: a third of
 * its work on zeros), so only its first nq = ceil((n % 256) / 64) quarters (64 values,
 * 4 groups each) are stored, read and computed. In the grouped order a quarter is 16
 * bytes of each of the four parts, so the tail chunk, of the weights and of the
 * activations alike, has its own compact order: quarter j (64 bytes from 64j) holds its
 * value 16g + 4s + b (group 4j + g) at byte 16s + 4g + b; that is, the grouped order with
 * its 4 x 4 blocks of 16 bytes transposed. The group-indexed parts (dg, sx; a prepared
 * chunk's s and mo) keep their places. The bytes past quarter nq are never read.
 *
 * Skipping the rest is exact: those groups only ever added float(0) * (0 * 0) and 0 * 0,
 * exact zeros, to an accumulator that is never -0. */
SIMD_INLINE int mm_tail_pos(int v) { return 64 * (v / 64) + 16 * (v / 4 % 4) + 4 * (v / 16 % 4) + v % 4; }

/* Reorders the first 64 nq bytes of a chunk from value order into the compact tail
 * order (dst != src). */
void mm_tail_reorder(const uint8_t *src, uint8_t *dst, int nq);

/* ---- the packed form (kern_mat_pack, matmul_pk.c) --------------------------------
 * Matrices of the block types (Q4_0 .. Q8_0, Q4_K .. Q6_K; Q2_K, Q3_K without AVX-512;
 * IQ4_NL, IQ4_XS, MXFP4: mm_pk_lut) whose n_out is a multiple of 16, repacked once at load
 * so that a vector holds 16 weight rows (layout and arithmetic: matmul_pk.c). The
 * activations they read are of the mm_pk_qx form. Builds with AVX-512 VNNI, AVX2 or NEON (MM_PK). */
/* the lookup-table types, packed by matmul_pk_iq.c */
SIMD_INLINE bool mm_pk_lut(uint32_t type) { return quant_lut(type) && MM_PK; }
/* bytes of a lookup-table type's o-block of n values (matmul_pk_iq.c) */
size_t mm_pk_lut_ob_bytes(uint32_t type, int64_t n);
SIMD_INLINE bool mm_pk_type(uint32_t type) {
    return type == DT_Q4_0 || type == DT_Q4_1 || type == DT_Q5_0 || type == DT_Q5_1 ||
           type == DT_Q8_0 || type == DT_Q4_K || type == DT_Q5_K || type == DT_Q6_K || mm_pk_lut(type) ||
           (!MM_Q8_512 && (type == DT_Q2_K || type == DT_Q3_K)); /* (matmul_pkv.c's only) */
}
/* The activation form a packed matrix of the type reads: the K types' MM_QX_KSB where the
 * tiles are matmul_pkv.c's, else MM_QX_BLK. */
SIMD_INLINE int mm_pk_qx(uint32_t type) {
    return !MM_Q8_512 && (type == DT_Q4_K || type == DT_Q5_K || type == DT_Q6_K ||
                          type == DT_Q2_K || type == DT_Q3_K)
               ? MM_QX_KSB
               : MM_QX_BLK;
}
/* bytes a packed row takes per super block more than stored: Q4_K, Q5_K, Q3_K their 6-bit
 * scales (and mins) as bytes; Q2_K its 4-bit ones */
SIMD_INLINE size_t mm_pk_extra(uint32_t type) {
    return type == DT_Q4_K || type == DT_Q5_K || type == DT_Q3_K ? 4 : type == DT_Q2_K ? 16 : 0;
}
/* bytes of a packed block of 16 weight rows of n values */
SIMD_INLINE size_t mm_pk_ob_bytes(uint32_t type, int64_t n) {
    if (mm_pk_lut(type)) return mm_pk_lut_ob_bytes(type, n);
    const size_t bytes = 16 * (dtype_row_bytes(type, n) + mm_pk_extra(type) * (size_t)(n / 256));
    return (bytes + 63) / 64 * 64;
}
/* Weight rows o0 .. o1 - 1 (multiples of 16) of a packed matrix at w (n_in columns)
 * times n_rows activation rows of the mm_pk_qx form at x (xs bytes apart) into y
 * (n_out floats a row). wide: NULL, or mm_pk_wide_bytes of this thread's scratch, where
 * batches of more than MM_PK_RX rows unpack each o-block once for all their rows (the
 * results are the same bits either way). */
void mm_pk_rows(uint32_t type, int64_t n_in, const uint8_t *w, int64_t o0, int64_t o1,
                const uint8_t *x, size_t xs, int32_t n_rows, float *y, int64_t n_out,
                uint8_t *wide);
/* bytes of scratch mm_pk_rows uses to unpack an o-block of n values for a batch of
 * n_rows rows; 0 where it does not (one group of rows, or a level without it) */
size_t mm_pk_wide_bytes(uint32_t type, int64_t n, int32_t n_rows);

/* A block type of kernels/quant.h, prepared for the tiles: mm_prep_fn unpacks nw (1 or
 * MM_TW) weight rows of n values, all their chunks, into the grouped form at dst (one
 * mm_prep per row and chunk, chunk-major: chunk c of row r is at dst + (c * nw + r)),
 * prefetching the rows after them. The block types' tiles (mm_grp_tiles) take that
 * form as their weights (w; ws is ignored). */
typedef struct mm_prep {
    _Alignas(64) uint8_t u[256]; /* unsigned quants, grouped order */
    float s[16];                 /* scale per group */
    float mo[16];                /* m - off * s per group: what the group sum of x costs */
} mm_prep;

typedef void (*mm_prep_fn)(int64_t n, const uint8_t *w, size_t ws, int nw, mm_prep *dst);

/* bytes of prepared form per weight row of n values */
SIMD_INLINE size_t mm_prep_row_bytes(int64_t n) {
    return (size_t)(mm_qx_np(n) / 256) * sizeof(mm_prep);
}

/* The preparer of a block type of kernels/quant.h (matmul_quant.c); NULL for others. */
mm_prep_fn mm_quant_prep(uint32_t type);
/* A block type's tiles, over prepared weights; NULL for types without a preparer. */
mm_tile_row *mm_quant_tiles(uint32_t type);
/* A block type's tiles that prepare as they go (for at most MM_TX activation rows;
 * results bitwise those of the prepared path); NULL where the build has none. */
mm_tile_row *mm_quant_fused(uint32_t type);

#endif
